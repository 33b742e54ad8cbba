// Refused, labels-mismatch: the loss target is the input ids, not the guarded labels.
#pragma once
#include "common.h"

namespace gallery {
struct WrongTargetImpl : torch::nn::Module {
  WrongTargetImpl(int64_t dim, int64_t vocab)
      : lm_head(register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(dim, vocab).bias(false)))) {}

  LogitsAndLoss forward(const torch::Tensor& x, const torch::Tensor& input_ids,
                        c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (labels.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), input_ids.view(-1));
    }
    return {logits, loss};
  }

  torch::nn::Linear lm_head;
};
}  // namespace gallery
