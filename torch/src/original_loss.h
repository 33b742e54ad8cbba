// The original computation of a rewritten call, for inputs the fused loss does not take and the original does
// (floating labels: class probabilities [rows, V] to cross_entropy, its soft-target loss; Byte class indices;
// fp64 or sparse hidden states or weight), and for a loss it does not compute (logits_as_passed.h: 3-D logits
// read over dimension 1, classes regrouped by a view, a shift along another dimension).
#pragma once

#include <lmfuse/torch.h>

namespace lmfuse::torch_detail {

/// True when `target` (the labels as the original passed them: labelsAsPassed, passed_code.h) is defined and
/// the call holds what the original computes and the fused loss does not take: labels that are floating (or
/// complex: class probabilities to cross_entropy) or Byte class indices (which nll_loss takes), or fp64,
/// sparse (not strided) or forward-mode-dual hidden states or weight, a weight of zero features, or a bias
/// of another dtype than the weight as F::linear takes them, or operands whose values are not in their memory
/// (dispatch_state.h: valuesInMemory), or any call while the JIT tracer records (the tracer sees LibTorch's operators,
/// and the runtime runs none). Such a call computes originalLoss instead.
bool needsOriginal(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                   const torch::Tensor& target, const LossOptions& options);

/// What the replaced call computed, with LibTorch's own operators: the head's logits F::linear(hidden, weight,
/// bias) (never values of skipped logits: those are made from the head's logits as their stand-in records),
/// the loss input's code as the original wrote it, the labels as it passed them (`target`), and
/// cross_entropy (nll_loss where the input is a log_softmax) with the options' ignore_index, label_smoothing
/// and reduction. Autograd to hidden, weight and bias is LibTorch's; whatever the original throws, this throws.
torch::Tensor originalLoss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                           const torch::Tensor& target, const LossOptions& options);

}  // namespace lmfuse::torch_detail
