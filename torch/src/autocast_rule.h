// The one place that decides what autocast does to the fused call: exactly what it does to the
// F::linear + F::cross_entropy pair the call replaces.
//   linear (lower-precision list): hidden, weight and bias cast to the autocast dtype of hidden's device
//     (at::autocast::cached_cast, so an fp32 weight is cast once per autocast region, as for F::linear);
//   cross_entropy (fp32 list): the loss is fp32.
// Outside autocast nothing is cast (mixed dtypes are then refused, as F::linear refuses them).
// Autocast is active for a device when its autocast dispatch key is not excluded in this thread: the
// test at::autocast::is_enabled()/is_autocast_enabled(device) make, spelled the same in 1.13 and 2.x.
#pragma once

#include <torch/types.h>

namespace lmfuse::torch_detail {

/// True when autocast is on for `tensor`'s device type in this thread and would cast `tensor`.
bool autocastCasts(const torch::Tensor& tensor);

/// The dtype F::linear(hidden, weight) returns in the current autocast state.
torch::ScalarType linearResultType(const torch::Tensor& hidden, const torch::Tensor& weight);

struct AutocastOperands {
  torch::Tensor hidden, weight, bias;
  c10::optional<torch::ScalarType> lossDtype;  ///< fp32 under autocast, else the caller's choice
};

/// hidden, weight and bias as F::linear would see them under the current autocast state; lossDtype is
/// `requested` when set, fp32 under autocast, unset otherwise.
AutocastOperands applyAutocast(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                               c10::optional<torch::ScalarType> requested);

}  // namespace lmfuse::torch_detail
