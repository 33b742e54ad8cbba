// A loss site defined inline in the library's public include folder (see ../CMakeLists.txt): the library's
// rewrite patches it, so every unit linked into a binary with the library must compile the rewritten copy.
#pragma once

#include <torch/torch.h>

inline torch::Tensor publicLoss(torch::nn::Linear& lm_head, const torch::Tensor& h, const torch::Tensor& labels) {
  auto logits = lm_head(h);
#ifdef PUBLIC_CAP  // usage_public_include_capped: its own rewrite refuses the site that the library's patches
  logits = 30.0 * torch::tanh(logits / 30.0);
#endif
  return torch::nn::functional::cross_entropy(logits, labels);
}

/// The loss of one fixed batch through the library's (rewritten) publicLoss (library.cpp).
double libraryLoss();
