// No loss site: the head's logits are only used for inference.
#include <torch/torch.h>

int main() {
  torch::nn::Linear head(8, 5);
  auto logits = head(torch::randn({2, 8}));
  return logits.argmax(-1).numel() == 2 ? 0 : 1;
}
