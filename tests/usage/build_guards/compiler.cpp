// The logits are capped unless Clang compiles this file. The tool parses with Clang and sees no cap, so it
// patches the site; a build with another compiler would compile the cap before a fused loss that skips it.
#include <torch/torch.h>

torch::Tensor compilerLoss(torch::nn::Linear& lm_head, const torch::Tensor& h, const torch::Tensor& labels) {
  auto logits = lm_head(h);
#if !defined(__clang__)
  logits = 30.0 * torch::tanh(logits / 30.0);
#endif
  return torch::nn::functional::cross_entropy(logits, labels);
}

int main() { return 0; }
