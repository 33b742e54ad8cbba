// The model: its head's type comes from <head_type.h>, which common/ (first on the include path) defines
// as a plain Linear and third/ as a capped head. many.h is empty until the check fills it with refused
// sites (a large audit). cap.h exists only where the build generates it (VARIANT generated): it caps the
// logits, so the site must be refused.
#include <torch/torch.h>
#include <head_type.h>
#include "many.h"
#if __has_include("cap.h")
#include "cap.h"
#endif
namespace F = torch::nn::functional;
torch::Tensor loss_of(HeadType &head, const torch::Tensor &h, c10::optional<torch::Tensor> labels) {
  torch::Tensor loss;
  auto logits = head(h);
#ifdef CAPPED
  logits = torch::tanh(logits / 30.0) * 30.0;
#endif
  if (labels.has_value()) {
    loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), labels->view(-1));
  }
  return loss;
}
int util();
int main() {
  HeadType head(4, 4);
  torch::Tensor h, y;
  loss_of(head, h, y);
  return util() == 1 ? 0 : 1;
}
