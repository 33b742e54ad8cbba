// A program's unit that includes the original head_model.h and links headlib: two definitions of head_loss.
#include "head_model.h"
torch::Tensor library_loss(torch::nn::Linear &head, const torch::Tensor &h, c10::optional<torch::Tensor> labels);
int main() {
  torch::nn::Linear head(4, 4);
  torch::Tensor h, y;
  head_loss(head, h, y);
  library_loss(head, h, y);
  return 0;
}
