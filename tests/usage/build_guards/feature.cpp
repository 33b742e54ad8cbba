// The logits are capped where the compiler has no __builtin_assume (GCC 12 has none; Clang, which the tool parses
// with, has it), and doubled where it does not take #elifdef as a directive (GCC 12 in ISO mode skips it as an
// unknown one and takes the #else). The tool sees neither and patches the site; a build with such a compiler
// would compile code before the fused loss that it skips.
#include <torch/torch.h>

#define ALWAYS_DEFINED 1

torch::Tensor featureLoss(torch::nn::Linear& lm_head, const torch::Tensor& h, const torch::Tensor& labels) {
  auto logits = lm_head(h);
#if !__has_builtin(__builtin_assume)
  logits = 30.0 * torch::tanh(logits / 30.0);
#endif
#ifdef NEVER_DEFINED
#elifdef ALWAYS_DEFINED
#else
  logits = logits * 2;
#endif
  return torch::nn::functional::cross_entropy(logits, labels);
}

int main() { return 0; }
