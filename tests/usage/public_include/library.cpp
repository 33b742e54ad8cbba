// The library's unit: it compiles the rewritten public_model.h.
#include <public_model.h>

double libraryLoss() {
  torch::manual_seed(0);
  torch::nn::Linear head(8, 16);
  return publicLoss(head, torch::randn({4, 8}), torch::randint(16, {4})).item<double>();
}
