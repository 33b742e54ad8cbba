// Refused, labels-branch-nontrivial: a mixture-of-experts auxiliary loss is added inside the labels branch.
#pragma once
#include "common.h"

namespace gallery {
struct AuxLossHeadImpl : torch::nn::Module {
  AuxLossHeadImpl(int64_t dim, int64_t vocab)
      : lm_head(register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(dim, vocab).bias(false)))) {}

  LogitsAndLoss forward(const torch::Tensor& x, const torch::Tensor& router_loss,
                        c10::optional<torch::Tensor> targets) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1));
      aux_loss = router_aux_loss_coef * router_loss;
      loss = loss + aux_loss;
    }
    return {logits, loss};
  }

  double router_aux_loss_coef = 0.01;
  torch::Tensor aux_loss;
  torch::nn::Linear lm_head;
};
}  // namespace gallery
