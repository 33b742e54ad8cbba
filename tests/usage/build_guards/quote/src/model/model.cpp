#include "config.h"  // this folder's

#include <torch/torch.h>

#ifndef MODEL_CONFIG
#error model.cpp must read src/model/config.h
#endif

torch::Tensor modelLoss(torch::nn::Linear& lm_head, const torch::Tensor& h, const torch::Tensor& labels) {
  auto logits = lm_head(h);
  return torch::nn::functional::cross_entropy(logits, labels);
}
