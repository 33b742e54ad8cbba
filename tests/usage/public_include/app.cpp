// Links the library and includes its header: this unit would compile the original publicLoss beside the
// library's rewritten one (two definitions of one inline function), so its build must fail.
#include <public_model.h>

#include <iostream>

int main() {
  torch::nn::Linear head(8, 16);
  std::cout << publicLoss(head, torch::randn({4, 8}), torch::randint(16, {4})).item<double>() << " "
            << libraryLoss() << "\n";
}
