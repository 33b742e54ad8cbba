// Refused, head-wrapped: a value-changing expression around the head call itself (temperature).
#pragma once
#include "common.h"

namespace gallery {
struct TemperatureHeadImpl : torch::nn::Module {
  TemperatureHeadImpl(int64_t dim, int64_t vocab)
      : head(register_module("head", torch::nn::Linear(dim, vocab))) {}

  LogitsAndLoss forward(const torch::Tensor& x, c10::optional<torch::Tensor> targets) {
    auto logits = head(x) / temperature;
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1));
    }
    return {logits, loss};
  }

  double temperature = 0.7;
  torch::nn::Linear head;
};
}  // namespace gallery
