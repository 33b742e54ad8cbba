// Refused, logits-rebound: Cohere-style logit scale applied to the logits after the head.
#pragma once
#include "common.h"

namespace gallery {
struct ScaledLogitsImpl : torch::nn::Module {
  ScaledLogitsImpl(int64_t dim, int64_t vocab)
      : lm_head(register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(dim, vocab).bias(false)))) {}

  LogitsAndLoss forward(const torch::Tensor& x, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(x);
    logits = logits * logit_scale;
    torch::Tensor loss;
    if (labels.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), labels->view(-1));
    }
    return {logits, loss};
  }

  double logit_scale = 0.0625;
  torch::nn::Linear lm_head;
};
}  // namespace gallery
