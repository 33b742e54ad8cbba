// Accepted: the nanoGPT head, rewritten to the fused call (the baseline every refusal differs from).
#pragma once
#include "common.h"

namespace gallery {
struct PlainHeadImpl : torch::nn::Module {
  PlainHeadImpl(int64_t dim, int64_t vocab)
      : ln_f(register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        lm_head(register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(dim, vocab).bias(false)))) {}

  LogitsAndLoss forward(const torch::Tensor& h, c10::optional<torch::Tensor> targets) {
    auto x = ln_f(h);
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(-1));
    }
    return {logits, loss};
  }

  torch::nn::LayerNorm ln_f;
  torch::nn::Linear lm_head;
};
}  // namespace gallery
