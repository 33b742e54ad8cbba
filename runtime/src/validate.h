// Argument validation of the public API (flce.h). api.cpp runs it once per call, before any output is
// touched and before dispatching to a backend, so backends may assume valid arguments. Every failure
// throws lmfuse::Error "<function>: <argument> <what is wrong>", e.g.
//   "lmfuse::linear_cross_entropy: problem.weight_stride (3) is smaller than problem.hidden_dim (4)".
// Backends receive problems and outputs whose 0 ("dense") strides are replaced by hidden_dim.
#pragma once

#include <cstddef>

#include "lmfuse/flce.h"

namespace lmfuse::detail {

/// Sizes, enums, strides and options: everything that does not read a pointer. What workspace_size
/// checks, and the first step of validate_call. Also checks context.device and context.threads.
void validate_shape(const char* function, const Problem& problem, const Options& options,
                    const Context& context);

/// validate_shape, then the pointers of problem/options/outputs: required ones non-null, all aligned
/// to their element type, and the output strides. On DeviceKind::Cpu it also reads host cu_seqlens
/// (non-negative, non-decreasing, last ≤ tokens); device memory is never read here.
void validate_call(const char* function, const Problem& problem, const Options& options,
                   const Outputs& outputs, const Context& context);

/// outputs.param_grads: a ParamGradKind (the one field of Outputs that sizes a workspace besides its pointers).
void validate_param_grads(const char* function, const Outputs& outputs);

/// The workspace: non-null and at least `required` bytes (what the backend's workspace_size returned).
void validate_workspace(const char* function, const Workspace& workspace, std::size_t required);

/// What cuBLASLt needs on DeviceKind::Cuda: hidden, weight, grad_hidden, grad_weight,
/// grad_weight_accumulate and the workspace 16-byte aligned, and their row strides multiples of
/// 16 bytes. api.cpp calls it before dispatching to the CUDA backend (after validate_call).
void validate_cuda_alignment(const char* function, const Problem& problem, const Outputs& outputs,
                             const Workspace& workspace);

/// scale_grads: sizes and dtype of problem (its input pointers are not read), the gradient pointers and
/// strides of outputs, and upstream non-null.
void validate_scale_grads(const char* function, const Problem& problem, const Outputs& outputs,
                          const float* upstream, const Context& context);

/// check: a workspace large enough to hold the out-of-range-label report.
void validate_check(const char* function, const Workspace& workspace, const Context& context);

/// Copies with every stride of 0 replaced by hidden_dim (the dense layout).
Problem with_dense_strides(Problem problem);
Outputs with_dense_strides(Outputs outputs, int64_t hidden_dim);

}  // namespace lmfuse::detail
