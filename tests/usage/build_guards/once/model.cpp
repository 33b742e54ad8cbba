// b/cfg.h is a symbolic link to a/cfg.h: #pragma once reads the file once, whichever name comes second. A
// mirror holding two copies would read it twice in a build whose compiler knows a header by its file (Clang)
// and double the logits; the mirror keeps the two names one file (a hard link).
#include <torch/torch.h>
#include "a/cfg.h"
#include "b/cfg.h"

torch::Tensor onceLoss(torch::nn::Linear& lm_head, const torch::Tensor& h, const torch::Tensor& labels) {
  auto logits = lm_head(h);
#ifdef ONCE_READ_TWICE
  logits = logits * 2;
#endif
  return torch::nn::functional::cross_entropy(logits, labels);
}

int main() { return 0; }
