// The one place that decides what autocast does to the fused call: exactly what it does to the
// F::linear + F::cross_entropy pair the call replaces.
//   linear (lower-precision list): hidden, weight and bias cast to the autocast dtype of hidden's device
//     (at::autocast::cached_cast, so an fp32 weight is cast once per autocast region, as for F::linear);
//   cross_entropy (fp32 list): the loss is fp32.
// One difference, in the gradients only: fp32 weight and bias (mixed precision's master parameters) get
// theirs written in fp32 by the runtime (ParamGradKind::Float32, computed from the bf16/fp16 copies)
// instead of through the cast's backward, which would round them to the half type and then widen them.
// Outside autocast nothing is cast (hidden and weight of mixed dtypes are then refused, as F::linear refuses
// them; a rewritten call whose bias has a dtype of its own computes the original: original_loss.h).
// Autocast is active for a device when its autocast dispatch key is not excluded in this thread: the
// test at::autocast::is_enabled()/is_autocast_enabled(device) make, spelled the same in 1.13 and 2.x.
#pragma once

#include <torch/types.h>

namespace lmfuse::torch_detail {

/// True when autocast is on for `tensor`'s device type in this thread and would cast `tensor`.
bool autocastCasts(const torch::Tensor& tensor);

/// The dtype an op of autocast's lower-precision list (F::linear) takes `tensor` in, in the current autocast
/// state: the autocast dtype of its device where autocastCasts(tensor), else its own.
torch::ScalarType autocastType(const torch::Tensor& tensor);

/// The dtype F::linear(hidden, weight) returns in the current autocast state.
torch::ScalarType linearResultType(const torch::Tensor& hidden, const torch::Tensor& weight);

struct AutocastOperands {
  torch::Tensor hidden, weight, bias;  ///< what the GEMMs multiply
  /// The tensors autograd hands the weight and bias gradients to: weight and bias above, or under
  /// fp32Params the caller's fp32 weight and bias (weight and bias above are then their half copies,
  /// detached).
  torch::Tensor gradWeight, gradBias;
  bool fp32Params = false;  ///< the runtime writes fp32 weight and bias gradients (ParamGradKind::Float32)
  c10::optional<torch::ScalarType> lossDtype;  ///< fp32 under autocast, else the caller's choice
};

/// hidden, weight and bias as F::linear would see them under the current autocast state; lossDtype is
/// `requested` when set, fp32 under autocast, unset otherwise. fp32Params when autocast casts an fp32
/// weight and the bias is absent or fp32 too (one storage type for both gradients, as the runtime takes).
AutocastOperands applyAutocast(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                               c10::optional<torch::ScalarType> requested);

}  // namespace lmfuse::torch_detail
