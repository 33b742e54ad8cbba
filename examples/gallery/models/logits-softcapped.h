// Refused, logits-softcapped: Gemma-style final-logit soft-capping (tanh) between head and loss.
#pragma once
#include "common.h"

namespace gallery {
struct SoftcappedHeadImpl : torch::nn::Module {
  SoftcappedHeadImpl(int64_t dim, int64_t vocab)
      : lm_head(register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(dim, vocab).bias(false)))) {}

  LogitsAndLoss forward(const torch::Tensor& x, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(x);
    logits = logits / final_logit_softcapping;
    logits = torch::tanh(logits);
    logits = logits * final_logit_softcapping;
    torch::Tensor loss;
    if (labels.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), labels->view(-1));
    }
    return {logits, loss};
  }

  double final_logit_softcapping = 30.0;
  torch::nn::Linear lm_head;
};
}  // namespace gallery
