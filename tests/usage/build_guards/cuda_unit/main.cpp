#include "../model.h"

double probeLoss();

int main() {
  Tiny model;
  auto loss = model->forward(torch::randn({4, 8}), torch::randint(0, 11, {4}));
  return loss.item<double>() > 0 && probeLoss() > 0 ? 0 : 1;
}
