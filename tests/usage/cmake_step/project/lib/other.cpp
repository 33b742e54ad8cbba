// A program's unit that links headlib without including head_model.h: one definition of head_loss.
#include <torch/torch.h>
torch::Tensor library_loss(torch::nn::Linear &head, const torch::Tensor &h, c10::optional<torch::Tensor> labels);
int main() {
  torch::nn::Linear head(4, 4);
  torch::Tensor h, y;
  library_loss(head, h, y);
  return 0;
}
