// lmfuse over several processes, on torch.distributed's C++ engine (c10d): the data-parallel global mean
// and the vocabulary-parallel loss. Include this where the process group is made; model code that only
// passes LossOptions around needs just <lmfuse/torch.h>.
//
// Contract:
//   Data parallel: LossOptions().process_group(lmfuse::distributed_group(pg)) makes the Mean's divisor the
//     count of labelled tokens summed over the group (one all-reduce of one float on the operands' device,
//     no host synchronisation): each rank's loss is its own tokens' sum over the global count, so the sum
//     of the ranks' gradients (all-reduce SUM, not AVG) is the gradient of the whole batch's mean. Only
//     with Reduction::Mean, and not together with n_items (either sets the divisor).
//   Vocabulary parallel: vocab_parallel_linear_cross_entropy(hidden, weight_shard, bias_shard, labels,
//     group, options) is linear_cross_entropy of <lmfuse/torch.h> with the head's [V, D] weight split by
//     rows across the group: rank r holds rows [begin_r, begin_r + V_r), the ranks' shards in rank order
//     (begin_0 = 0, begin_r = begin_{r-1} + V_{r-1}) unless `vocab_begin` says otherwise. hidden, labels
//     and options are the same on every rank. It returns the same loss on every rank, with gradients to
//     hidden (all-reduced over the group: every rank gets the full grad_hidden), to the rank's weight shard
//     and to its bias shard. Never gathers logits; per call the collectives are one all-reduce (max) and
//     one all-reduce (sum) of per-token statistics, [N] and [3, N] in fp64, and, in the backward pass,
//     one all-reduce (sum) of grad_hidden. CPU fp64 operands are accepted here (the runtime's exact path:
//     the result equals the single-process fp64 loss to rounding whatever the split; the upstream gradient
//     is applied in fp32, as by the runtime). An out-of-range label makes the loss NaN, with no error
//     raised (unlike the single-process CPU call, whose check() would need the rank's label report to
//     cross ranks). grad_hidden is all-reduced in hidden's dtype. Every LossOptions
//     field applies; with process_group set too, the mean's divisor is counted over that (data-parallel)
//     group.
//   Agreement check: before the first call with a given configuration on a group, one all-gather of a
//     small int64 signature (shapes, dtypes, every option, the shard's range, whether this rank's own
//     arguments are valid) lets every rank compare all of them; any disagreement throws the same Error
//     on every rank, naming the field and each rank's value. Later calls with a configuration already
//     checked skip it (so CUDA calls stay free of host synchronisation and capturable); a rank that
//     changes its configuration alone is caught only by the collectives' timeout.
//   A group of size 1 is allowed: the degenerate case equals the single-process call (so a script run
//   with --world-size 1 works unchanged, and the distributed path can be checked against it).
//   Groups: make_group() builds a store (FileStore on a path, or TCPStore on 127.0.0.1) and a Gloo (CPU)
//   or NCCL (CUDA, where LibTorch has it) group whose collectives fail after `timeout` instead of hanging.
#pragma once

#include <lmfuse/torch.h>

#include <chrono>
#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace lmfuse {

/// What LossOptions::process_group carries (torch.h only forward-declares it).
struct ProcessGroupHandle {
  c10::intrusive_ptr<c10d::ProcessGroup> group;
};

/// The handle LossOptions::process_group takes.
std::shared_ptr<const ProcessGroupHandle> distributed_group(c10::intrusive_ptr<c10d::ProcessGroup> group);

enum class GroupBackend { Gloo, Nccl };

struct GroupOptions {
  int world_size = 1;
  int rank = 0;
  GroupBackend backend = GroupBackend::Gloo;
  /// Rendezvous: a FileStore at this path when non-empty (every rank the same path, a fresh file), else a
  /// TCPStore on 127.0.0.1:tcp_port served by rank 0.
  std::string store_path;
  int tcp_port = 29500;
  /// Every collective, and the rendezvous, fails after this long instead of waiting forever.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

/// The store and the process group of GroupOptions. NCCL throws where LibTorch was built without it.
c10::intrusive_ptr<c10d::ProcessGroup> make_group(const GroupOptions& options);

/// The vocabulary-parallel loss (contract above). vocab_begin < 0: the rank-order layout.
torch::Tensor vocab_parallel_linear_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight_shard,
                                                  const torch::Tensor& bias_shard, const torch::Tensor& labels,
                                                  const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                                  const LossOptions& options = {}, int64_t vocab_begin = -1);

}  // namespace lmfuse
