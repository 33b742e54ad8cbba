// One call of the runtime on LibTorch tensors: validates and flattens the operands (the checks name
// the argument), allocates the workspace from LibTorch's allocator on the operands' device, picks the
// CPU or CUDA context, and returns the fp32 loss and the gradients that were asked for.
// No autograd here: adapter.cpp builds the autograd function on top of this.
#pragma once

#include <lmfuse/torch.h>

#include <vector>

namespace lmfuse::torch_detail {

/// The operands as the runtime takes them: [N, D] hidden, [V, D] weight, [V] bias, [N] labels, with
/// unit inner strides and aligned rows; the tensors keep the memory the Problem points to alive.
struct Operands {
  torch::Tensor hidden, weight, bias, labels, n_items;
  /// hidden folded into rows as F::linear's product folds it (`reshape({-1, D})`: a view of hidden where one
  /// exists, else a copy): what the original's backward saves of its input. `hidden` is this or its copy.
  torch::Tensor hidden_rows;
  /// weight as passed, before any copy: F::linear's product reads weight.t() of it, and its layout decides the
  /// layout of the gradient LibTorch hands back (adapter.cpp).
  torch::Tensor weight_passed;
  std::vector<int64_t> leading_shape;  ///< hidden's shape without its last dimension
  Problem problem;
  Options options;
  Context context;
  ParamGradKind param_grads = ParamGradKind::ProblemDType;  ///< storage type of grad_weight and grad_bias
};

/// param_grads = Float32: weight and bias are half copies of fp32 parameters whose gradients are fp32
/// (mixed precision, see flce.h).
Operands prepareOperands(const torch::Tensor& hidden, const torch::Tensor& weight,
                         const torch::Tensor& bias, const torch::Tensor& labels,
                         const LossOptions& options, ParamGradKind param_grads = ParamGradKind::ProblemDType);

struct Gradients {
  bool hidden = false, weight = false, bias = false;
  bool any() const { return hidden || weight || bias; }
};

struct CallResult {
  torch::Tensor loss;  ///< fp32: 0-dim for Mean/Sum, hidden's leading shape for None (a tensor of its own, no view)
  torch::Tensor grad_hidden, grad_weight, grad_bias;  ///< [N, D], [V, D], [V]; undefined when not asked
};

/// Runs the fused call. grad_scale (fp32 on the operands' device: one element for Mean/Sum, N for
/// None) is the upstream gradient; undefined means 1.
CallResult runFused(const Operands& operands, Gradients wanted, const torch::Tensor& grad_scale = {});

/// Multiplies the gradients of an earlier Mean/Sum call in place by `upstream` (one fp32 element on
/// the operands' device), on the device, without a synchronisation.
void scaleGradients(const Operands& operands, CallResult& result, const torch::Tensor& upstream);

/// Adds one to fused_call_count() (switches.cpp).
void countFusedCall();

}  // namespace lmfuse::torch_detail
