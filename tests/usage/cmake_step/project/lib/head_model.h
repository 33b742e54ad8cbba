// A model defined in a header (VARIANT link_forms): headlib's rewrite patches its site, so no unit linked
// into one binary with headlib may compile this original (two definitions of head_loss).
#pragma once
#include <torch/torch.h>
inline torch::Tensor head_loss(torch::nn::Linear &head, const torch::Tensor &h, c10::optional<torch::Tensor> labels) {
  torch::Tensor loss;
  auto logits = head(h);
  if (labels.has_value()) {
    loss = torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), labels->view(-1));
  }
  return loss;
}
