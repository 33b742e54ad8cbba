// The autocast rule of the fused call (see autocast_rule.h).
#include "autocast_rule.h"

#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace lmfuse::torch_detail {
namespace {

bool autocastOn(c10::DeviceType device) {
  if (device != c10::DeviceType::CPU && device != c10::DeviceType::CUDA) return false;
  return !c10::impl::tls_is_dispatch_key_excluded(at::autocast::get_autocast_dispatch_key_from_device_type(device));
}

torch::Tensor cast(const torch::Tensor& tensor) {
  if (!tensor.defined()) return tensor;
  const c10::DeviceType device = tensor.device().type();
  return at::autocast::cached_cast(at::autocast::get_lower_precision_fp_from_device_type(device), tensor, device);
}

}  // namespace

bool autocastCasts(const torch::Tensor& tensor) {
  return tensor.defined() && autocastOn(tensor.device().type()) && tensor.is_floating_point() &&
         tensor.scalar_type() != torch::kDouble;
}

torch::ScalarType autocastType(const torch::Tensor& tensor) {
  if (autocastCasts(tensor))
    return at::autocast::get_lower_precision_fp_from_device_type(tensor.device().type());
  return tensor.scalar_type();
}

torch::ScalarType linearResultType(const torch::Tensor& hidden, const torch::Tensor&) { return autocastType(hidden); }

AutocastOperands applyAutocast(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                               c10::optional<torch::ScalarType> requested) {
  AutocastOperands operands{hidden, weight, bias, weight, bias, false, requested};
  if (!hidden.defined() || !autocastOn(hidden.device().type())) return operands;
  operands.hidden = cast(hidden);
  operands.weight = cast(weight);
  operands.bias = cast(bias);
  if (!requested) operands.lossDtype = torch::kFloat;
  const auto isFloat = [](const torch::Tensor& tensor) { return tensor.scalar_type() == torch::kFloat; };
  operands.fp32Params = weight.defined() && isFloat(weight) && !isFloat(operands.weight) &&
                        (!bias.defined() || isFloat(bias));
  if (operands.fp32Params) {  // the half copies only feed the GEMMs: no cast node, no half gradient
    operands.weight = operands.weight.detach();
    if (bias.defined()) operands.bias = operands.bias.detach();
  } else {
    operands.gradWeight = operands.weight;
    operands.gradBias = operands.bias;
  }
  return operands;
}

}  // namespace lmfuse::torch_detail
