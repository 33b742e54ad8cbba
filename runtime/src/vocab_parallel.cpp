// The public functions of vocab_parallel.h: validate every argument once (the shared checks of
// validate.h, then the shard's own, then on CUDA alignment and workspace), then forward to exactly one
// backend (shard.h) chosen by context.device, through reported() so a backend failure's message starts
// with the public function too. Nothing is written before validation has passed.
#include "lmfuse/vocab_parallel.h"

#include "error.h"
#include "shard.h"
#include "validate.h"

namespace lmfuse {
namespace {

// What flce.h's call would check (sizes, options, shift, the input pointers), plus the shard's range.
// validate_call also needs an output; a probe loss pointer stands in for the ones checked below.
Problem validated(const char* function, const Problem& problem, const VocabShard& shard, const Options& options,
                  const Context& context) {
  Problem checked = problem;
  if (shard.float64) checked.dtype = DType::Float32;  // fp64 storage: the strides count elements all the same
  float probe = 0.0f;
  Outputs outputs;
  outputs.loss = &probe;
  detail::validate_call(function, checked, options, outputs, context);
  LMFUSE_REQUIRE(function, !shard.float64 || context.device == DeviceKind::Cpu,
                 "shard.float64 is set but context.device is not Cpu (fp64 storage is the CPU's exact path)");
  LMFUSE_REQUIRE(function, shard.vocab_begin >= 0, "shard.vocab_begin (" << shard.vocab_begin << ") is negative");
  LMFUSE_REQUIRE(function, shard.vocab_begin + problem.vocab <= shard.vocab_total,
                 "shard.vocab_begin (" << shard.vocab_begin << ") + problem.vocab (" << problem.vocab
                                       << ") exceeds shard.vocab_total (" << shard.vocab_total << ")");
  checked = detail::with_dense_strides(checked);
  checked.dtype = problem.dtype;
  return checked;
}

// The workspace a CUDA pass needs, and the alignment of its products' operands (validate.h); nothing on the CPU.
void validateDevice(const char* function, const Problem& problem, const Options& options, const Outputs& outputs,
                    Workspace workspace, bool with_gradients, const Context& context) {
  if (context.device != DeviceKind::Cuda) return;
  detail::validate_cuda_alignment(function, problem, outputs, workspace);
  detail::validate_workspace(function, workspace, detail::cuda::shard_workspace_size(problem, options, with_gradients));
}

}  // namespace

std::size_t vocab_parallel_workspace_size(const Problem& problem, const VocabShard& shard, const Options& options,
                                          bool with_gradients, const Context& context) {
  const char* function = "lmfuse::vocab_parallel_workspace_size";
  Problem checked = problem;
  if (shard.float64) checked.dtype = DType::Float32;
  detail::validate_shape(function, checked, options, context);
  if (context.device != DeviceKind::Cuda) return 0;
  return detail::reported(function, [&] { return detail::cuda::shard_workspace_size(problem, options, with_gradients); });
}

void vocab_parallel_statistics(const Problem& problem, const VocabShard& shard, const Options& options,
                               const ShardStatistics& statistics, Workspace workspace, const Context& context) {
  const char* function = "lmfuse::vocab_parallel_statistics";
  Problem dense = validated(function, problem, shard, options, context);
  LMFUSE_REQUIRE(function, statistics.max && statistics.sum_exp && statistics.target && statistics.logit_sum,
                 "statistics.max, sum_exp, target and logit_sum are all required");
  validateDevice(function, problem, options, Outputs{}, workspace, false, context);
  detail::reported(function, [&] {
    if (context.device == DeviceKind::Cuda)
      detail::cuda::shard_statistics(dense, shard, options, statistics, workspace, context);
    else
      detail::cpu::shard_statistics(dense, shard, options, statistics, context);
  });
}

void vocab_parallel_loss(const Problem& problem, const VocabShard& shard, const Options& options,
                         const GlobalStatistics& statistics, const ShardOutputs& outputs, Workspace workspace,
                         const Context& context) {
  const char* function = "lmfuse::vocab_parallel_loss";
  Problem dense = validated(function, problem, shard, options, context);
  LMFUSE_REQUIRE(function, statistics.lse && statistics.target && statistics.logit_sum,
                 "statistics.lse, target and logit_sum are all required");
  LMFUSE_REQUIRE(function, outputs.loss, "outputs.loss is null");
  LMFUSE_REQUIRE(function, !outputs.grad_bias || problem.bias, "outputs.grad_bias is set but problem.bias is null");
  Outputs products;  // the gradients the products write (dense rows)
  products.grad_hidden = outputs.grad_hidden;
  products.grad_weight = outputs.grad_weight;
  validateDevice(function, problem, options, products, workspace, outputs.wants_gradients(), context);
  detail::reported(function, [&] {
    if (context.device == DeviceKind::Cuda)
      detail::cuda::shard_loss(dense, shard, options, statistics, outputs, workspace, context);
    else
      detail::cpu::shard_loss(dense, shard, options, statistics, outputs, context);
  });
}

}  // namespace lmfuse
