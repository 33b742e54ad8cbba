// The agreed lmfuse LibTorch call, declared only (rewriter unit tests parse, never run).
#pragma once

#include <torch/torch.h>

namespace lmfuse {
enum class Reduction : int { Mean, Sum, None };
struct LossOptions {
  LossOptions &ignore_index(int64_t value) { return *this; }
  LossOptions &label_smoothing(double value) { return *this; }
  LossOptions &reduction(Reduction value) { return *this; }
  LossOptions &shift(bool value) { return *this; }
  LossOptions &dtype(torch::ScalarType value) { return *this; }
};
torch::Tensor linear_cross_entropy(const torch::Tensor &hidden, const torch::Tensor &weight,
                                   const torch::Tensor &bias, const torch::Tensor &labels,
                                   const LossOptions &options = {});
template <class ModuleOptions> LossOptions module_loss_options(const ModuleOptions &options);
bool enabled();
bool return_logits();
bool skip_logits();
torch::Tensor skipped_logits(const torch::Tensor &hidden, const torch::Tensor &weight, const char *site);
}  // namespace lmfuse
