// Refused, loss-unsupported: per-class weights in the loss options (the fused runtime has none).
#pragma once
#include "common.h"

namespace gallery {
struct ClassWeightedImpl : torch::nn::Module {
  ClassWeightedImpl(int64_t dim, int64_t vocab)
      : class_weights(torch::ones({vocab})),
        lm_head(register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(dim, vocab).bias(false)))) {}

  LogitsAndLoss forward(const torch::Tensor& x, c10::optional<torch::Tensor> targets) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1),
                              F::CrossEntropyFuncOptions().weight(class_weights));
    }
    return {logits, loss};
  }

  torch::Tensor class_weights;
  torch::nn::Linear lm_head;
};
}  // namespace gallery
