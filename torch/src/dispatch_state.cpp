// See dispatch_state.h.
#include "dispatch_state.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/jit/frontend/tracer.h>

namespace lmfuse::torch_detail {

bool valuesInMemory(const torch::Tensor& tensor) {
  if (!tensor.defined()) return true;
  // Keys of tensors whose values live elsewhere than their storage, or are computed by kernels of their own.
  static const c10::DispatchKeySet elsewhere({c10::DispatchKey::Functionalize, c10::DispatchKey::ZeroTensor,
                                              c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot,
                                              c10::DispatchKey::FuncTorchBatched, c10::DispatchKey::FuncTorchGradWrapper,
                                              c10::DispatchKey::Batched});
  return !tensor.key_set().has_any(elsewhere) && tensor.layout() == at::kStrided &&
         (tensor.device().is_cpu() || tensor.device().is_cuda()) && tensor.has_storage() &&
         (tensor.numel() == 0 || tensor.data_ptr() != nullptr);
}

bool tracerRecordsHere() {
  return torch::jit::tracer::isTracing() && !c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::Tracer);
}

bool autogradRecords(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias) {
  c10::DispatchKeySet keys;
  for (const torch::Tensor* operand : {&hidden, &weight, &bias})
    if (operand->defined()) keys = keys | operand->key_set();
  return (keys - c10::impl::tls_local_dispatch_key_set().excluded_).has_any(c10::autograd_dispatch_keyset);
}

}  // namespace lmfuse::torch_detail
