// The public functions of flce.h: validate every argument once (validate.h), then forward to exactly one
// backend (backend.h) chosen by context.device. Nothing is written before validation has passed.
// Every backend call runs through reported() (error.h), so a backend's failure reaches the caller as
// "<function>: <what>", like the argument errors.
#include "backend.h"
#include "error.h"
#include "lmfuse/flce.h"
#include "validate.h"

namespace lmfuse {

std::size_t workspace_size(const Problem& problem, const Options& options, bool with_gradients,
                           const Context& context) {
  const char* function = "lmfuse::workspace_size";
  detail::validate_shape(function, problem, options, context);
  Problem dense = detail::with_dense_strides(problem);
  return detail::reported(function, [&] {
    return context.device == DeviceKind::Cuda ? detail::cuda::workspace_size(dense, options, with_gradients)
                                              : detail::cpu::workspace_size(dense, options, with_gradients);
  });
}

std::size_t workspace_size(const Problem& problem, const Options& options, const Outputs& outputs,
                           const Context& context) {
  const char* function = "lmfuse::workspace_size";
  detail::validate_shape(function, problem, options, context);
  detail::validate_param_grads(function, outputs);
  Problem dense = detail::with_dense_strides(problem);
  return detail::reported(function, [&] {
    return context.device == DeviceKind::Cuda ? detail::cuda::workspace_size(dense, options, outputs)
                                              : detail::cpu::workspace_size(dense, options, outputs.wants_gradients());
  });
}

void linear_cross_entropy(const Problem& problem, const Options& options, const Outputs& outputs,
                          Workspace workspace, const Context& context) {
  const char* function = "lmfuse::linear_cross_entropy";
  detail::validate_call(function, problem, options, outputs, context);
  Problem dense = detail::with_dense_strides(problem);
  Outputs dense_outputs = detail::with_dense_strides(outputs, problem.hidden_dim);
  bool with_gradients = outputs.wants_gradients();
  detail::reported(function, [&] {
    if (context.device == DeviceKind::Cuda) {
      detail::validate_cuda_alignment(function, problem, outputs, workspace);
      detail::validate_workspace(function, workspace, detail::cuda::workspace_size(dense, options, dense_outputs));
      detail::cuda::linear_cross_entropy(dense, options, dense_outputs, workspace, context);
    } else {
      detail::validate_workspace(function, workspace,
                                 detail::cpu::workspace_size(dense, options, with_gradients));
      detail::cpu::linear_cross_entropy(dense, options, dense_outputs, workspace, context);
    }
  });
}

void scale_grads(const Problem& problem, const Outputs& outputs, const float* upstream,
                 const Context& context) {
  const char* function = "lmfuse::scale_grads";
  detail::validate_scale_grads(function, problem, outputs, upstream, context);
  Outputs dense_outputs = detail::with_dense_strides(outputs, problem.hidden_dim);
  detail::reported(function, [&] {
    if (context.device == DeviceKind::Cuda) detail::cuda::scale_grads(problem, dense_outputs, upstream, context);
    else detail::cpu::scale_grads(problem, dense_outputs, upstream, context);
  });
}

void check(Workspace workspace, const Context& context) {
  const char* function = "lmfuse::check";
  detail::validate_check(function, workspace, context);
  detail::reported(function, [&] {
    if (context.device == DeviceKind::Cuda) detail::cuda::check(workspace, context);
    else detail::cpu::check(workspace, context);
  });
}

bool cuda_available() { return detail::cuda::available(); }

}  // namespace lmfuse
