// Refused, head-not-linear: an MLP head (Sequential of Linear, GELU, Linear) produces the logits.
#pragma once
#include "common.h"

namespace gallery {
struct MlpHeadImpl : torch::nn::Module {
  MlpHeadImpl(int64_t dim, int64_t vocab)
      : lm_head(register_module("lm_head", torch::nn::Sequential(torch::nn::Linear(dim, dim), torch::nn::GELU(),
                                                                 torch::nn::Linear(dim, vocab)))) {}

  LogitsAndLoss forward(const torch::Tensor& x, c10::optional<torch::Tensor> targets) {
    auto logits = lm_head->forward(x);
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1));
    }
    return {logits, loss};
  }

  torch::nn::Sequential lm_head;
};
}  // namespace gallery
