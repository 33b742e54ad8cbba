// Refused, logits-used-elsewhere: the logits also feed the next-token probabilities the model caches.
#pragma once
#include "common.h"

namespace gallery {
struct CachingHeadImpl : torch::nn::Module {
  CachingHeadImpl(int64_t dim, int64_t vocab)
      : lm_head(register_module("lm_head", torch::nn::Linear(dim, vocab))) {}

  LogitsAndLoss forward(const torch::Tensor& x, c10::optional<torch::Tensor> targets) {
    auto logits = lm_head(x);
    last_probs = F::softmax(logits.select(1, -1), F::SoftmaxFuncOptions(-1)).detach();
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1));
    }
    return {logits, loss};
  }

  torch::Tensor last_probs;
  torch::nn::Linear lm_head;
};
}  // namespace gallery
