// The model: its head's type comes from <head_type.h>, which common/ (first on the include path) defines
// as a plain Linear and third/ as a capped head. many.h is empty until the check fills it with refused
// sites (a large audit). cap.h exists only where the build generates it (VARIANT generated): it caps the
// logits, so the site must be refused. HEAD_BY_COMPILER (VARIANT compiler_type) makes the head's class depend on
// the compiler.
#include <torch/torch.h>
#include <head_type.h>
#include "many.h"
#if __has_include("cap.h")
#include "cap.h"
#endif
namespace F = torch::nn::functional;
#ifdef HEAD_BY_COMPILER
// The head's class chosen by how long the compiler spells __PRETTY_FUNCTION__ (GCC's text is longer than
// Clang's): no macro or flag differs, yet GCC compiles a head that doubles its output where Clang reads a Linear.
template <class T> constexpr unsigned long pretty_length() { return sizeof(__PRETTY_FUNCTION__); }
struct DoubledImpl : torch::nn::LinearImpl {
  using torch::nn::LinearImpl::LinearImpl;
  torch::Tensor forward(const torch::Tensor &x);
};
TORCH_MODULE(Doubled);
using Head = std::conditional_t<(pretty_length<int>() > 50), Doubled, HeadType>;
#else
using Head = HeadType;
#endif
torch::Tensor loss_of(Head &head, const torch::Tensor &h, c10::optional<torch::Tensor> labels) {
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
  Head head(4, 4);
  torch::Tensor h, y;
  loss_of(head, h, y);
  return util() == 1 ? 0 : 1;
}
