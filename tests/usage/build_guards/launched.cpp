// The logits are capped where the compile defines CAPPED_BY_LAUNCHER, which only the target's compiler
// launcher (add_define.sh) adds: the compile database does not show it, so the tool sees no cap and patches
// the site, and the build must fail naming the macro rather than compile the cap before a fused loss.
#include <torch/torch.h>

torch::Tensor launchedLoss(torch::nn::Linear& lm_head, const torch::Tensor& h, const torch::Tensor& labels) {
  auto logits = lm_head(h);
#ifdef CAPPED_BY_LAUNCHER
  logits = 30.0 * torch::tanh(logits / 30.0);
#endif
  return torch::nn::functional::cross_entropy(logits, labels);
}

int main() { return 0; }
