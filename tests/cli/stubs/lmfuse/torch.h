// The agreed lmfuse LibTorch call (torch/include/lmfuse/torch.h), declared over the test stubs.
#pragma once
#include <torch/torch.h>

#include <lmfuse/analysed.h>  // the library's own (a link to it): rewritten calls are checked by it

namespace lmfuse {
enum class Reduction { Mean, Sum, None };
struct ShiftDims {
  int64_t logits, labels;
};
struct LogitsAsPassed {
  template <class Code> LogitsAsPassed(const char *Site, const torch::Tensor &From, Code Input) {}
  template <class Code> LogitsAsPassed(const char *Site, const torch::Tensor &From, Code Input, ShiftDims dims) {}
  template <class Code, class LabelsCode>
  LogitsAsPassed(const char *Site, const torch::Tensor &From, Code Input, ShiftDims dims, const torch::Tensor &Labels,
                 LabelsCode LabelsInput) {}
};
struct LossOptions {
  LossOptions &ignore_index(int64_t Value);
  LossOptions &label_smoothing(double Value);
  LossOptions &reduction(Reduction Value);
  LossOptions &shift(bool Value);
  LossOptions &dtype(at::ScalarType Value);
  LossOptions &logits_as_passed(LogitsAsPassed Value);
  LossOptions &analysed(const AnalysedTypesTag &) { return *this; }
};
torch::Tensor linear_cross_entropy(const torch::Tensor &hidden, const torch::Tensor &weight,
                                   const torch::Tensor &bias, const torch::Tensor &labels,
                                   const LossOptions &options = {});
bool enabled();
bool return_logits();
bool skip_logits();
torch::Tensor skipped_logits(const torch::Tensor &hidden, const torch::Tensor &weight, const char *site);
torch::Tensor skipped_logits(const torch::Tensor &hidden, const torch::Tensor &weight, const torch::Tensor &bias, const char *site);
template <class Code> torch::Tensor skipped_logits_after(const torch::Tensor &skipped, Code code);
}  // namespace lmfuse
