// The original computation of a rewritten call, for inputs the fused loss does not take and the original does:
// floating labels (class probabilities [rows, V] to cross_entropy, its soft-target loss), Byte class indices,
// fp64 or sparse hidden states or weight.
#pragma once

#include <lmfuse/torch.h>

namespace lmfuse::torch_detail {

/// True when `options` record the replaced loss's labels argument (LossOptions::logits_as_passed) and the call
/// holds what the original computes and the fused loss does not take: labels that, run on a stand-in, are
/// floating (or complex: class probabilities to cross_entropy) or Byte class indices (which nll_loss takes),
/// or fp64 or sparse (not strided) hidden states or weight. Such a call computes originalLoss instead.
bool needsOriginal(const torch::Tensor& hidden, const torch::Tensor& weight, const LossOptions& options);

/// What the replaced call computed, with LibTorch's own operators: the head's logits F::linear(hidden, weight,
/// bias) (never values of skipped logits: those are made from the head's logits as their stand-in records),
/// the loss input's code as the original wrote it, its labels argument's code, and cross_entropy (nll_loss where
/// the input is a log_softmax) with the options' ignore_index, label_smoothing and reduction. Autograd to
/// hidden, weight and bias is LibTorch's; whatever the original throws, this throws.
torch::Tensor originalLoss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                           const LossOptions& options);

/// True when the replaced loss's input is a log_softmax of the logits (an nll_loss site: the rewrite accepts
/// log_softmax only there), found by running its code, and the reshapes of skipped logits it starts from, on a
/// stand-in that records autograd. False when that cannot be told (computed logits without a graph).
bool inputIsLogSoftmax(const torch::Tensor& hidden, const torch::Tensor& weight, const LogitsAsPassed& passed);

}  // namespace lmfuse::torch_detail
