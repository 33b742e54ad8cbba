// Suppressed: an accepted site the author opted out of with // NOLINT(lmfuse) on the head line.
#pragma once
#include "common.h"

namespace gallery {
struct OptedOutImpl : torch::nn::Module {
  OptedOutImpl(int64_t dim, int64_t vocab)
      : lm_head(register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(dim, vocab).bias(false)))) {}

  LogitsAndLoss forward(const torch::Tensor& x, c10::optional<torch::Tensor> targets) {
    auto logits = lm_head(x);  // NOLINT(lmfuse)
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1));
    }
    return {logits, loss};
  }

  torch::nn::Linear lm_head;
};
}  // namespace gallery
