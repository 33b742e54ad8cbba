// The original computation of a rewritten call (see original_loss.h).
#include "original_loss.h"

#include <torch/nn/functional/linear.h>
#include <torch/nn/functional/loss.h>

#include <cstring>
#include <torch/autograd.h>

#include <unordered_set>
#include <vector>

#include "errors.h"
#include "logits_stand_in.h"

namespace lmfuse::torch_detail {
namespace {

namespace F = torch::nn::functional;

// Whether an autograd graph reaches a log_softmax within a few nodes: the views and copies between it and the
// loss input (a model's whole graph is not walked).
bool reachesLogSoftmax(const std::shared_ptr<torch::autograd::Node>& start) {
  std::vector<torch::autograd::Node*> pending;
  if (start) pending.push_back(start.get());
  std::unordered_set<torch::autograd::Node*> seen;
  for (int visited = 0; !pending.empty() && visited < 32; ++visited) {
    torch::autograd::Node* node = pending.back();
    pending.pop_back();
    if (!seen.insert(node).second) continue;
    if (node->name().find("LogSoftmaxBackward") != std::string::npos) return true;
    for (const torch::autograd::Edge& edge : node->next_edges())
      if (edge.function) pending.push_back(edge.function.get());
  }
  return false;
}

}  // namespace

bool needsOriginal(const torch::Tensor& hidden, const torch::Tensor& weight, const LossOptions& options) {
  const LogitsAsPassed& passed = options.logits_as_passed();
  if (!passed.input || !passed.labels || !passed.labels_from.defined()) return false;
  const torch::Tensor& from = passed.labels_from;
  torch::Tensor target;
  try {
    target = passed.labels(at::empty_strided(from.sizes(), from.strides(), from.options().device(at::kMeta)));
  } catch (...) {
    return false;  // the check of the labels (logits_as_passed.cpp) throws what the original throws
  }
  if (!target.defined()) return false;
  // fp64, not a dense tensor (a sparse input), or carrying a forward-mode tangent (LibTorch's C++ custom
  // Functions have no forward derivative: the original's ops do).
  const auto notTaken = [](const torch::Tensor& operand) {
    return operand.defined() && (operand.scalar_type() == at::kDouble || operand.layout() != at::kStrided ||
                                 operand._fw_grad(/*level=*/0).defined());
  };
  // Zero input features: the logits are the bias alone, and the runtime takes no empty weight.
  const bool noFeatures = weight.defined() && weight.dim() == 2 && weight.size(1) == 0;
  return target.is_floating_point() || target.is_complex() || target.scalar_type() == at::kByte ||
         notTaken(hidden) || notTaken(weight) || noFeatures;
}

bool inputIsLogSoftmax(const torch::Tensor& hidden, const torch::Tensor& weight, const LogitsAsPassed& passed) {
  if (!passed.input) return false;
  try {
    const at::AutoGradMode gradMode(true);
    torch::Tensor standIn;
    if (!passed.from.defined()) {
      standIn = logitsStandIn(hidden, weight).requires_grad_(true);
    } else if (is_skipped_logits(passed.from)) {
      // Reshapes between the head and the loss never make a log_softmax (on skipped logits they would throw).
      standIn = logitsStandIn(passed.from).detach().requires_grad_(true);
    } else {
      if (reachesLogSoftmax(passed.from.grad_fn())) return true;
      standIn = logitsStandIn(passed.from).detach().requires_grad_(true);
    }
    return reachesLogSoftmax(passed.input(standIn).grad_fn());
  } catch (...) {
    return false;
  }
}

namespace {

torch::Tensor computeOriginal(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                              const LossOptions& options) {
  const LogitsAsPassed& passed = options.logits_as_passed();
  // A rewritten call passes only what the replaced loss's options say; these have no LibTorch counterpart.
  LMFUSE_TORCH_CHECK(Check::Unsupported,
                     options.softcap() == 0 && options.logit_scale() == 1 && options.z_loss() == 0 &&
                         !options.n_items().defined() && !options.process_group(),
                     "lmfuse::linear_cross_entropy: the loss replaced at ", passed.site,
                     " is computed as the original computes it (floating labels, Byte class indices, fp64 or sparse operands, "
                     "which the fused loss does not take), and the "
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
  const torch::Tensor input = passed.input(from);
  const torch::Tensor target = passed.labels(passed.labels_from);
  const auto reduction = options.reduction();
  if (inputIsLogSoftmax(hidden, weight, passed)) {
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
                           const LossOptions& options) {
  try {
    return computeOriginal(hidden, weight, bias, options);
  } catch (c10::Error& error) {
    // LibTorch's own error, of its own class, with the site added.
    error.add_context(c10::str("lmfuse::linear_cross_entropy: the loss replaced at ", options.logits_as_passed().site,
                               " computed as the original (floating labels, Byte class indices, fp64 or sparse operands), which throws here"));
    throw;
  }
}

}  // namespace lmfuse::torch_detail
