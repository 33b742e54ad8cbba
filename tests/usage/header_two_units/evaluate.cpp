#include "model.h"

double evaluate(TinyLM& model, const torch::Tensor& idx, const torch::Tensor& targets) {
  torch::NoGradGuard noGrad;
  return model->forward(idx, targets).second.item<double>();
}
