// The check of LossOptions::logits_as_passed (contract in <lmfuse/torch.h>): the replaced loss call
// received one row of the head's V classes per token, which is what the fused loss computes.
#pragma once

#include <lmfuse/torch.h>

namespace lmfuse::torch_detail {

/// Runs the original's loss input code on a stand-in of the logits (inputOnStandIn, passed_code.h) and
/// throws, naming the site and the shape, when its result is not [tokens, V] (tokens less one per row under
/// the causal shift) or [V] for a single token, or when a shifted loss's hidden and labels are not [B, T, D]
/// and [B, T]; and, given `target` (the labels as the original passed them: labelsAsPassed), when those are
/// not Long class indices, one per row of that input. Does nothing when the options record no input, or when
/// hidden and weight are not shaped as the fused call takes them (the operand checks name those).
void checkLogitsAsPassed(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& labels,
                         const torch::Tensor& target, const LossOptions& options);

}  // namespace lmfuse::torch_detail
