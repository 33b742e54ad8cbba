// Includes the header without linking the library (the original model, as an A/B build would): a program
// of its own, so the original here is no second definition of the library's rewritten one.
#include <public_model.h>

#include <iostream>

double libraryLoss() { return 0; }

int main() {
  torch::nn::Linear head(8, 16);
  std::cout << "plain loss " << publicLoss(head, torch::randn({4, 8}), torch::randint(16, {4})).item<double>() << "\n";
}
