// The check of LossOptions::logits_as_passed (contract in <lmfuse/torch.h>): whether the replaced loss call
// received one row of the head's V classes per token, which is what the fused loss computes.
#pragma once

#include <string>

#include <lmfuse/torch.h>

namespace lmfuse::torch_detail {

/// Runs the original's loss input code on a stand-in of the logits (inputOnStandIn, passed_code.h) and
/// returns why the fused loss does not compute the loss replaced, naming the site and the shapes: its result is not [tokens, V] (tokens less
/// one per row under the causal shift) or [V] for a single token, or a shifted loss's hidden and labels are
/// not [B, T, D] and [B, T], or the original shifted along other dimensions. Empty where it does (and where
/// the options record no input, or hidden and weight are not shaped as the fused call takes them: the operand
/// checks name those). Where the fused loss computes it and `target` (the labels as the original passed them:
/// labelsAsPassed) is defined, throws what the original's cross_entropy throws on those labels, of its class,
/// when they are not Long class indices, one per row of that input.
std::string whyNotFused(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& labels,
                        const torch::Tensor& target, const LossOptions& options);

}  // namespace lmfuse::torch_detail
