// The model: its head's type comes from <head_type.h>, which common/ (first on the include path) defines
// as a plain Linear and third/ as a capped head. many.h is empty until the check fills it with refused
// sites (a large audit). cap.h exists only where the build generates it (VARIANT generated): it caps the
// logits, so the site must be refused. HEAD_BY_COMPILER, REDUCTION_BY_COMPILER, SHIFT_BY_COMPILER,
// BASE_BY_COMPILER and OPTIONS_BY_COMPILER (VARIANTs compiler_type, compiler_reduction, compiler_shift,
// compiler_base, compiler_options) make the head's class, the loss's reduction, the dim its shift is written on,
// the base class of the head's class or the class of the loss's options depend on the compiler.
#include <torch/torch.h>
#include <head_type.h>
#include <memory>
#include <type_traits>
#include "many.h"
#if __has_include("cap.h")
#include "cap.h"
#endif
namespace F = torch::nn::functional;
// How long the compiler spells __PRETTY_FUNCTION__: GCC's text is longer than Clang's (59 and 40 characters), so
// what is chosen from it differs between them with no macro or flag between them.
template <class T> constexpr unsigned long pretty_length() { return sizeof(__PRETTY_FUNCTION__); }
constexpr bool kLongPrettyFunction = pretty_length<int>() > 50;
#ifdef HEAD_BY_COMPILER
// GCC compiles a head that doubles its output where Clang reads a Linear.
struct DoubledImpl : torch::nn::LinearImpl {
  using torch::nn::LinearImpl::LinearImpl;
  torch::Tensor forward(const torch::Tensor &x);
};
TORCH_MODULE(Doubled);
using Head = std::conditional_t<kLongPrettyFunction, Doubled, HeadType>;
#else
using Head = HeadType;
#endif
#ifdef BASE_BY_COMPILER
// GCC derives the head's class from one with a forward of its own, where Clang reads a LinearImpl.
struct TanhImpl : torch::nn::LinearImpl {
  using torch::nn::LinearImpl::LinearImpl;
  torch::Tensor forward(const torch::Tensor &x);
};
struct ChosenImpl : std::conditional_t<kLongPrettyFunction, TanhImpl, torch::nn::LinearImpl> {
  ChosenImpl(int64_t in, int64_t out) : std::conditional_t<kLongPrettyFunction, TanhImpl, torch::nn::LinearImpl>(in, out) {}
};
torch::Tensor chosen_loss(const std::shared_ptr<ChosenImpl> &head, const torch::Tensor &h, const torch::Tensor &labels) {
  auto logits = head->forward(h);
  return F::cross_entropy(logits.view({-1, logits.size(-1)}), labels.view(-1));
}
#endif
#ifdef OPTIONS_BY_COMPILER
// GCC calls a setter of the program's where Clang reads the library's options.
struct PaddedOptions : F::CrossEntropyFuncOptions {
  PaddedOptions &ignore_index(int64_t);
};
using ChosenOptions = std::conditional_t<kLongPrettyFunction, PaddedOptions, F::CrossEntropyFuncOptions>;
#endif
// GCC sums where Clang reads a mean; GCC shifts along the batch where Clang reads the time dim.
using LossReduction = std::conditional_t<kLongPrettyFunction, torch::enumtype::kSum, torch::enumtype::kMean>;
constexpr int kTimeDim = kLongPrettyFunction ? 0 : 1;
torch::Tensor loss_of(Head &head, const torch::Tensor &h, c10::optional<torch::Tensor> labels) {
  torch::Tensor loss;
  auto logits = head(h);
#ifdef CAPPED
  logits = torch::tanh(logits / 30.0) * 30.0;
#endif
  if (labels.has_value()) {
#if defined(REDUCTION_BY_COMPILER)
    loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), labels->view(-1),
                            F::CrossEntropyFuncOptions().reduction(LossReduction()));
#elif defined(OPTIONS_BY_COMPILER)
    loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), labels->view(-1), ChosenOptions().ignore_index(-1));
#elif defined(SHIFT_BY_COMPILER)
    loss = F::cross_entropy(logits.slice(kTimeDim, 0, -1).reshape({-1, logits.size(-1)}),
                            labels->slice(kTimeDim, 1).reshape(-1));
#else
    loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), labels->view(-1));
#endif
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
