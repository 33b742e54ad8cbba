// The original computation of a rewritten call (see original_loss.h).
#include "original_loss.h"

#include <torch/nn/functional/linear.h>
#include <torch/nn/functional/loss.h>

#include "autocast_rule.h"
#include "dispatch_state.h"
#include "errors.h"
#include "fused_call.h"
#include "logits_stand_in.h"
#include "passed_code.h"

namespace lmfuse::torch_detail {

namespace F = torch::nn::functional;

bool needsOriginal(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                   const torch::Tensor& target, const LossOptions& options) {
  if (!options.logits_as_passed().input || !target.defined()) return false;
  // fp64, not a dense tensor (a sparse input), or carrying a forward-mode tangent (LibTorch's C++ custom
  // Functions have no forward derivative: the original's ops do).
  const auto notTaken = [](const torch::Tensor& operand) {
    return operand.defined() && (operand.scalar_type() == at::kDouble || operand.layout() != at::kStrided ||
                                 operand._fw_grad(/*level=*/0).defined());
  };
  // Zero input features: the logits are the bias alone, and the runtime takes no empty weight.
  const bool noFeatures = weight.defined() && weight.dim() == 2 && weight.size(1) == 0;
  // A bias of another dtype than the weight as F::linear takes them (an fp64 or bf16 bias of an fp32 Linear):
  // F::linear adds it, the runtime takes one dtype for both.
  const bool biasOfOtherType = bias.defined() && weight.defined() && autocastType(bias) != autocastType(weight);
  // Values the runtime cannot read from memory (valuesInMemory: a meta tensor, a zero tensor, a functionalization
  // wrapper): LibTorch's kernels for them compute the original.
  const bool elsewhere = !valuesInMemory(hidden) || !valuesInMemory(weight) || !valuesInMemory(bias) ||
                         !valuesInMemory(target);
  // The JIT tracer records LibTorch's operators, and the runtime computes through none: a traced graph would hold
  // no loss. Traced, the call computes with the original's operators, which the tracer records.
  return target.is_floating_point() || target.is_complex() || target.scalar_type() == at::kByte ||
         notTaken(hidden) || notTaken(weight) || noFeatures || biasOfOtherType || elsewhere ||
         tracerRecordsHere();
}

namespace {

torch::Tensor computeOriginal(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                              const torch::Tensor& target, const LossOptions& options) {
  const LogitsAsPassed& passed = options.logits_as_passed();
  // A rewritten call passes only what the replaced loss's options say; these have no LibTorch counterpart.
  LMFUSE_TORCH_CHECK(Check::Unsupported,
                     options.softcap() == 0 && options.logit_scale() == 1 && options.z_loss() == 0 &&
                         !options.n_items().defined() && !options.process_group(),
                     "lmfuse::linear_cross_entropy: the loss replaced at ", passed.site,
                     " is computed as the original computes it (inputs or a loss the fused loss does not take), and the "
                     "options set softcap, logit_scale, z_loss, n_items or a process group, which it has not");
  // The logits the loss input is made from, as the original computed them. Skipped logits hold no values:
  // theirs are made from the head's.
  torch::Tensor from;
  if (!passed.from.defined()) {
    from = F::linear(hidden, weight, bias);
  } else if (is_skipped_logits(passed.from)) {
    from = skippedLogitsValues(passed.from, F::linear(hidden, weight, bias));
  } else {
    from = passed.from;
  }
  const bool programLogits = passed.from.defined() && !is_skipped_logits(passed.from);
  const InputAsPassed computed = inputFromLogits(from, programLogits, passed);
  const torch::Tensor& input = computed.input;
  const auto reduction = options.reduction();
  if (computed.logSoftmax) {
    auto nll = F::NLLLossFuncOptions().ignore_index(options.ignore_index());
    if (reduction == Reduction::Sum) nll.reduction(torch::kSum);
    else if (reduction == Reduction::None) nll.reduction(torch::kNone);
    return F::nll_loss(input, target, nll);
  }
  auto ce = F::CrossEntropyFuncOptions().ignore_index(options.ignore_index()).label_smoothing(options.label_smoothing());
  if (reduction == Reduction::Sum) ce.reduction(torch::kSum);
  else if (reduction == Reduction::None) ce.reduction(torch::kNone);
  return F::cross_entropy(input, target, ce);
}

}  // namespace

torch::Tensor originalLoss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                           const torch::Tensor& target, const LossOptions& options) {
  try {
    return computeOriginal(hidden, weight, bias, target, options);
  } catch (c10::Error& error) {
    // LibTorch's own error, of its own class, with the site added.
    error.add_context(c10::str("lmfuse::linear_cross_entropy: the loss replaced at ", options.logits_as_passed().site,
                               " computed as the original (inputs or a loss the fused loss does not take), which throws here"));
    throw;
  }
}

}  // namespace lmfuse::torch_detail
