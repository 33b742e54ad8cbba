// Refused, in-macro: the loss is spelled through a macro, whose expansion an edit must not touch.
#pragma once
#include "common.h"

#define GALLERY_LM_LOSS(logits, targets) \
  F::cross_entropy((logits).view({-1, (logits).size(-1)}), (targets).view(-1))

namespace gallery {
struct MacroLossImpl : torch::nn::Module {
  MacroLossImpl(int64_t dim, int64_t vocab)
      : lm_head(register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(dim, vocab).bias(false)))) {}

  LogitsAndLoss forward(const torch::Tensor& x, c10::optional<torch::Tensor> targets) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = GALLERY_LM_LOSS(logits, *targets);
    }
    return {logits, loss};
  }

  torch::nn::Linear lm_head;
};
}  // namespace gallery
