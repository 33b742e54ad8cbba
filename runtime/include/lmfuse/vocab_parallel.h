// lmfuse runtime: the fused linear + cross-entropy with the head's weight split by vocabulary rows across
// ranks (Megatron's vocab-parallel head), in two passes around the caller's collectives.
//
// Contract: rank r holds rows [vocab_begin, vocab_begin + problem.vocab) of a [vocab_total, D] weight (and
// of the bias), and every rank holds the same hidden, labels and options. Nobody ever holds a logit of
// another rank's rows: what crosses ranks is four fp64 numbers per token and the [N, D] grad_hidden.
//   pass 1  vocab_parallel_statistics: per token, over the shard's rows j (z_ij as in flce.h)
//             max       m_i = max_j z_ij
//             sum_exp   s_i = Σ_j exp(z_ij − m_i)
//             target    t_i = z_i,y_i when y_i is in the shard, else 0 (NaN on every rank when y_i is
//                             outside [0, vocab_total) and not ignore_index: the loss is then NaN)
//             logit_sum c_i = Σ_j z_ij                    (label smoothing needs the sum over the vocabulary)
//           an invalid row (ignored, or no target under the shift) has m = s = t = c = 0.
//   caller  M_i = all-reduce max of m_i; lse_i = M_i + log(all-reduce sum of s_i·exp(m_i − M_i));
//           T_i = all-reduce sum of t_i; C_i = all-reduce sum of c_i   (lse of an invalid row: anything)
//   pass 2  vocab_parallel_loss: from (lse, T, C) the loss of flce.h with V = vocab_total (the same value
//           on every rank: every rank may return it), the shard's grad_weight and grad_bias, and this
//           shard's share of grad_hidden = Σ_{j in shard} dx_ij·W_j, which the caller all-reduces (sum).
// Every option of flce.h applies (ignore_index, label smoothing, softcap, logit_scale, z-loss, Mean / Sum /
// None, n_items, grad_scale, the Rows and Segments shifts); label smoothing's ε/V and the z-loss use the
// global lse and vocab_total. The Mean's divisor counted on the device is this rank's count of valid rows,
// which is the global count since labels are replicated; pass n_items for a count over a data-parallel
// group. Statistics and the loss are fp64 in the context's memory space (device memory on Cuda).
//
// Precision: problem.dtype as in flce.h, or, on the CPU only, float64 = true: hidden, weight, bias and every
// gradient are fp64 (problem.dtype is ignored), so the result is the exact fp64 one whatever the split.
// On CUDA a slice's logits are stored in problem.dtype before the statistics and dx are formed from them
// (as the single-process call's cuBLASLt path does), and dx is stored in problem.dtype for the products.
// Errors: as flce.h (Error "<function>: <argument> <what is wrong>", before anything is written), plus
// the shard: 0 ≤ vocab_begin, vocab_begin + problem.vocab ≤ vocab_total, and on CUDA the alignment
// cuBLASLt needs (flce.h) and a workspace of vocab_parallel_workspace_size bytes. The upstream gradient
// (options.grad_scale) is fp32, as in flce.h.
// Cost on CUDA: the shard's rows go through in vocabulary slices of every token, each slice's logits
// written by a cuBLASLt product into the workspace and never kept: pass 1 is one product over the shard
// (h·W_shardᵀ) and a pass over its logits; pass 2 recomputes them and adds grad_weight's and grad_hidden's
// products, so the two passes cost four products where the single-process call costs three. Neither call
// synchronises the stream, allocates or copies to the host (both can be captured in a CUDA graph).
// On the CPU the workspace is not used (its size is 0), and each row of a gradient is summed in an fp64
// buffer of D values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lmfuse/flce.h"

namespace lmfuse {

/// This rank's rows of the vocabulary.
struct VocabShard {
  int64_t vocab_begin = 0;  ///< first global row held here
  int64_t vocab_total = 0;  ///< rows of the whole vocabulary (V of the formulas)
  bool float64 = false;     ///< CPU only: hidden, weight, bias and the gradients are fp64
};

/// Per-token statistics, fp64, [tokens] each (layout chosen by the caller: four arrays or one [4, N]).
struct ShardStatistics {
  double* max = nullptr;
  double* sum_exp = nullptr;
  double* target = nullptr;
  double* logit_sum = nullptr;
};

/// The combined statistics pass 2 reads, fp64, [tokens] each.
struct GlobalStatistics {
  const double* lse = nullptr;
  const double* target = nullptr;
  const double* logit_sum = nullptr;
};

/// Pass 2's results: loss as in flce.h but fp64 ([1], or [N] for None), the shard's share of grad_hidden,
/// the shard's grad_weight [problem.vocab, D] and grad_bias [problem.vocab] (overwritten, each optional).
struct ShardOutputs {
  double* loss = nullptr;
  void* grad_hidden = nullptr;
  void* grad_weight = nullptr;
  void* grad_bias = nullptr;

  bool wants_gradients() const { return grad_hidden || grad_weight || grad_bias; }
};

/// Bytes of workspace pass 1 (with_gradients false) or pass 2 (with_gradients: any gradient) needs; the
/// pass-2 size serves both. On CUDA: a slice of the shard's logits (at most options.workspace_budget
/// bytes, 256 MiB when 0, unless 256 columns of every token need more), per-token arrays, cuBLASLt's 32 MiB, and with gradients in 16-bit storage an
/// fp32 [tokens, hidden_dim] sum of grad_hidden. 0 on the CPU. Pointers in `problem` are not read.
std::size_t vocab_parallel_workspace_size(const Problem& problem, const VocabShard& shard, const Options& options,
                                          bool with_gradients, const Context& context);

/// Pass 1. problem.vocab is the shard's row count; problem.weight / bias point at the shard's rows.
void vocab_parallel_statistics(const Problem& problem, const VocabShard& shard, const Options& options,
                               const ShardStatistics& statistics, Workspace workspace, const Context& context);

/// Pass 2, from the combined statistics.
void vocab_parallel_loss(const Problem& problem, const VocabShard& shard, const Options& options,
                         const GlobalStatistics& statistics, const ShardOutputs& outputs, Workspace workspace,
                         const Context& context);

}  // namespace lmfuse
