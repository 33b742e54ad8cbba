// The agreed lmfuse LibTorch call, declared only (rewriter unit tests parse, never run).
#pragma once

#include <torch/torch.h>

#include <lmfuse/analysed.h>  // the library's own (a link to it): rewritten calls are checked by it

namespace lmfuse {
enum class Reduction : int { Mean, Sum, None };
struct ShiftDims {
  int64_t logits, labels;
};
struct LogitsAsPassed {
  template <class Code> LogitsAsPassed(const char *site, const torch::Tensor &from, Code code) {}
  template <class Code> LogitsAsPassed(const char *site, const torch::Tensor &from, Code code, ShiftDims dims) {}
  template <class Code, class LabelsCode>
  LogitsAsPassed(const char *site, const torch::Tensor &from, Code code, ShiftDims dims, const torch::Tensor &labels,
                 LabelsCode labelsCode) {}
};
struct LossOptions {
  LossOptions &ignore_index(int64_t value) { return *this; }
  LossOptions &label_smoothing(double value) { return *this; }
  LossOptions &reduction(Reduction value) { return *this; }
  LossOptions &shift(bool value) { return *this; }
  LossOptions &dtype(torch::ScalarType value) { return *this; }
  LossOptions &logits_as_passed(LogitsAsPassed value) { return *this; }
  LossOptions &analysed(const AnalysedTypesTag &) { return *this; }
};
torch::Tensor linear_cross_entropy(const torch::Tensor &hidden, const torch::Tensor &weight,
                                   const torch::Tensor &bias, const torch::Tensor &labels,
                                   const LossOptions &options = {});
template <class ModuleOptions> LossOptions module_loss_options(const ModuleOptions &options);
template <class ModuleOptions>
LossOptions module_loss_options(const ModuleOptions &options, const torch::Tensor &weight);
bool enabled();
bool return_logits();
bool skip_logits();
torch::Tensor skipped_logits(const torch::Tensor &hidden, const torch::Tensor &weight, const char *site, int64_t hidden_rank = 0);
torch::Tensor skipped_logits(const torch::Tensor &hidden, const torch::Tensor &weight, const torch::Tensor &bias, const char *site, int64_t hidden_rank = 0);
template <class Code> torch::Tensor skipped_logits_after(const torch::Tensor &skipped, Code code);
}  // namespace lmfuse
