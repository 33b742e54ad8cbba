// A CUDA unit of the target (host code) that uses the model too: it would compile the original header.
#include "../model.h"

double probeLoss() {
  Tiny model;
  return model->forward(torch::randn({4, 8}), torch::randint(0, 11, {4})).item<double>();
}
