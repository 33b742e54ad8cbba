// Validation, flattening and the runtime call for the LibTorch adapter (see fused_call.h).
#include "fused_call.h"

#include "dispatch_state.h"
#include "environment.h"
#include "errors.h"

#include <ATen/Parallel.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#ifdef LMFUSE_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>  // defines: getCurrentCUDAStream (the stream the call runs on)
#include <cuda_runtime_api.h>     // defines: cudaStreamIsCapturing
#endif

namespace lmfuse::torch_detail {
namespace {

constexpr const char* kWho = "lmfuse::linear_cross_entropy: ";
// Row starts and base pointers aligned to this many bytes are accepted as they are; anything else is
// copied (the CUDA backend's vector loads and cuBLASLt want 16-byte aligned rows).
constexpr int64_t kAlignmentBytes = 16;

DType runtimeDType(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat: return DType::Float32;
    case torch::kHalf: return DType::Float16;
    case torch::kBFloat16: return DType::BFloat16;
    default:
      LMFUSE_TORCH_CHECK(Check::Argument, false, kWho, "hidden has dtype ", type,
                  "; supported are Float, Half and BFloat16 (the runtime computes in fp32)");
  }
  return DType::Float32;
}

bool aligned(const torch::Tensor& matrix) {
  const int64_t element = static_cast<int64_t>(matrix.element_size());
  const auto address = reinterpret_cast<std::uintptr_t>(matrix.data_ptr());
  const bool oneRow = matrix.size(0) <= 1;
  return address % kAlignmentBytes == 0 && (oneRow || (matrix.stride(0) * element) % kAlignmentBytes == 0);
}

// The [rows, cols] matrix itself where its inner stride is 1 and its rows are aligned, else a contiguous copy.
torch::Tensor runtimeMatrix(const torch::Tensor& matrix) {
  const int64_t cols = matrix.size(1);
  const bool oneRow = matrix.size(0) <= 1;
  const bool usable = (matrix.stride(1) == 1 || cols == 1) && (oneRow || matrix.stride(0) >= cols) &&
                      aligned(matrix);
  return usable ? matrix : matrix.contiguous();
}

Context contextFor(const torch::Device& device) {
  Context context;
  if (device.is_cpu()) {
    context.device = DeviceKind::Cpu;
    context.threads = at::get_num_threads();
    return context;
  }
  LMFUSE_TORCH_CHECK(Check::Argument, device.is_cuda(), kWho, "tensors on ", device, " are not supported (CPU and CUDA are)");
#ifdef LMFUSE_TORCH_CUDA
  context.device = DeviceKind::Cuda;
  context.stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
#else
  LMFUSE_TORCH_CHECK(Check::Argument, false, kWho, "hidden is a CUDA tensor, but lmfuse_torch was built against a LibTorch "
              "without CUDA");
#endif
  return context;
}

// Runtime errors become LibTorch errors with the runtime's message, of the class errors.h gives the check:
// `what` is Check::LabelOutOfRange for check() (out-of-range labels, c10::IndexError as nll_loss raises;
// the only other errors check() raises are backend failures on CUDA, where the original's device-side
// assertion is no class a program catches either), Check::Argument (c10::Error, RuntimeError in Python)
// for the rest.
template <typename Call>
void callRuntime(Check what, Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    raise(what, __func__, __FILE__, static_cast<uint32_t>(__LINE__), std::string(kWho) + error.what());
  }
}

// Requires `operand` (named `name` in the message) to hold its values in its memory (valuesInMemory).
void requireValuesInMemory(const torch::Tensor& operand, const char* name) {
  LMFUSE_TORCH_CHECK(Check::Argument, valuesInMemory(operand), kWho, name, " holds no values in memory the fused loss "
                     "can read (a meta tensor, an efficient zero tensor, or a wrapper such as functionalization's; its "
                     "key set is ", operand.key_set(), "); compute this loss with LibTorch's operators");
}

}  // namespace

Operands prepareOperands(const torch::Tensor& hidden, const torch::Tensor& weight,
                         const torch::Tensor& bias, const torch::Tensor& labels,
                         const LossOptions& options, ParamGradKind param_grads) {
  LMFUSE_TORCH_CHECK(Check::Argument, hidden.defined(), kWho, "hidden is an undefined tensor");
  LMFUSE_TORCH_CHECK(Check::Argument, weight.defined(), kWho, "weight is an undefined tensor");
  LMFUSE_TORCH_CHECK(Check::Argument, labels.defined(), kWho, "labels is an undefined tensor");
  requireValuesInMemory(hidden, "hidden");
  requireValuesInMemory(weight, "weight");
  requireValuesInMemory(bias, "bias");
  requireValuesInMemory(labels, "labels");
  requireValuesInMemory(options.n_items(), "n_items");
  LMFUSE_TORCH_CHECK(Check::Argument, hidden.dim() >= 1, kWho, "hidden must have a last (hidden) dimension, got a scalar");
  LMFUSE_TORCH_CHECK(Check::Argument, weight.dim() == 2, kWho, "weight must be [V, D], got shape ", weight.sizes());
  const int64_t dim = hidden.size(-1);
  const int64_t vocab = weight.size(0);
  LMFUSE_TORCH_CHECK(Check::Argument, weight.size(1) == dim, kWho, "weight is ", weight.sizes(), " but hidden's last dimension is ",
              dim, " (F::linear needs weight [V, ", dim, "])");
  LMFUSE_TORCH_CHECK(Check::Argument, vocab > 0 && dim > 0, kWho, "empty weight ", weight.sizes());
  const torch::ScalarType dtype = hidden.scalar_type();
  const DType runtimeType = runtimeDType(dtype);
  LMFUSE_TORCH_CHECK(Check::Argument, weight.scalar_type() == dtype, kWho, "weight has dtype ", weight.scalar_type(),
              " but hidden has dtype ", dtype, " (cast one of them, as F::linear requires)");
  LMFUSE_TORCH_CHECK(Check::Argument, weight.device() == hidden.device(), kWho, "weight is on ", weight.device(),
              " but hidden is on ", hidden.device());
  if (bias.defined()) {
    LMFUSE_TORCH_CHECK(Check::Argument, bias.dim() == 1 && bias.size(0) == vocab, kWho, "bias must be [", vocab, "], got shape ",
                bias.sizes());
    LMFUSE_TORCH_CHECK(Check::Argument, bias.scalar_type() == dtype, kWho, "bias has dtype ", bias.scalar_type(),
                " but hidden has dtype ", dtype);
    LMFUSE_TORCH_CHECK(Check::Argument, bias.device() == hidden.device(), kWho, "bias is on ", bias.device(), " but hidden is on ",
                hidden.device());
  }
  LMFUSE_TORCH_CHECK(Check::LabelType, labels.scalar_type() == torch::kLong || labels.scalar_type() == torch::kInt, kWho,
              "labels has dtype ", labels.scalar_type(), "; supported are Long and Int");
  LMFUSE_TORCH_CHECK(Check::Argument, labels.device() == hidden.device(), kWho, "labels is on ", labels.device(),
              " but hidden is on ", hidden.device());

  Operands operands;
  operands.leading_shape.assign(hidden.sizes().begin(), hidden.sizes().end() - 1);
  const int64_t tokens = hidden.numel() / dim;
  LMFUSE_TORCH_CHECK(Check::LabelCount, labels.numel() == tokens, kWho, "labels has ", labels.numel(), " elements (shape ",
              labels.sizes(), ") but hidden ", hidden.sizes(), " has ", tokens, " tokens");

  // The runtime reads memory: a tensor with LibTorch's negative bit (at::_neg_view, the imaginary part of a
  // conjugate) holds the negation of its values there, so it is read from a copy with the bit resolved.
  operands.hidden_rows = hidden.reshape({-1, dim});
  operands.hidden = runtimeMatrix(operands.hidden_rows.resolve_neg());
  operands.weight_passed = weight;
  operands.weight = runtimeMatrix(weight.resolve_neg());
  operands.bias = bias.defined() ? bias.resolve_neg().contiguous() : torch::Tensor();
  operands.labels = labels.reshape({-1}).resolve_neg().contiguous();

  Problem& problem = operands.problem;
  problem.tokens = tokens;
  problem.hidden_dim = dim;
  problem.vocab = vocab;
  problem.dtype = runtimeType;
  problem.hidden = operands.hidden.data_ptr();
  problem.hidden_stride = tokens > 1 ? operands.hidden.stride(0) : dim;
  problem.weight = operands.weight.data_ptr();
  problem.weight_stride = vocab > 1 ? operands.weight.stride(0) : dim;
  problem.bias = operands.bias.defined() ? operands.bias.data_ptr() : nullptr;
  problem.labels = operands.labels.data_ptr();
  problem.label_type = labels.scalar_type() == torch::kLong ? IndexType::Int64 : IndexType::Int32;

  Options& runtimeOptions = operands.options;
  runtimeOptions.ignore_index = options.ignore_index();
  runtimeOptions.label_smoothing = options.label_smoothing();
  runtimeOptions.softcap = options.softcap();
  runtimeOptions.logit_scale = options.logit_scale();
  runtimeOptions.z_loss = options.z_loss();
  runtimeOptions.reduction = options.reduction();
  runtimeOptions.memory = options.memory();
  runtimeOptions.chunk_tokens = options.chunk_tokens();
  if (options.n_items().defined()) {
    const torch::Tensor& count = options.n_items();
    LMFUSE_TORCH_CHECK(Check::Argument, count.numel() == 1, kWho, "n_items must hold one element, got shape ", count.sizes());
    LMFUSE_TORCH_CHECK(Check::Argument, count.device() == hidden.device(), kWho, "n_items is on ", count.device(),
                " but hidden is on ", hidden.device());
    // A device-side conversion: no synchronisation, whatever n_items' dtype.
    operands.n_items = count.reshape({1}).resolve_neg().to(torch::kFloat).contiguous();
    runtimeOptions.n_items = operands.n_items.data_ptr<float>();
  }
  if (options.shift()) {
    LMFUSE_TORCH_CHECK(Check::Argument, labels.dim() >= 1, kWho, "shift needs labels with a sequence dimension, got a scalar");
    runtimeOptions.shift.kind = ShiftKind::Rows;
    runtimeOptions.shift.seq_len = labels.size(-1);
  }
  operands.context = contextFor(hidden.device());
  operands.param_grads = param_grads;
  return operands;
}

CallResult runFused(const Operands& operands, Gradients wanted, const torch::Tensor& grad_scale) {
  const Problem& problem = operands.problem;
  const auto floatOptions = operands.hidden.options().dtype(torch::kFloat);
  const bool perToken = operands.options.reduction == Reduction::None;
  CallResult result;
  // In the shape the call returns, so that the loss handed to the program is no view (an in-place op on it, `loss /=
  // steps`, works as on the original's).
  result.loss = perToken ? torch::empty(operands.leading_shape, floatOptions) : torch::empty({}, floatOptions);
  if (wanted.hidden) result.grad_hidden = torch::empty({problem.tokens, problem.hidden_dim}, operands.hidden.options());
  const bool fp32Params = operands.param_grads == ParamGradKind::Float32;
  const auto paramOptions = fp32Params ? floatOptions : operands.weight.options();
  if (wanted.weight) result.grad_weight = torch::empty({problem.vocab, problem.hidden_dim}, paramOptions);
  if (wanted.bias) result.grad_bias = torch::empty({problem.vocab}, paramOptions);
  if (problem.tokens == 0) {  // nothing to compute: a zero loss (see the Mean rule in flce.h), zero gradients
    result.loss.zero_();
    for (torch::Tensor* grad : {&result.grad_hidden, &result.grad_weight, &result.grad_bias})
      if (grad->defined()) grad->zero_();
    return result;
  }

  Options options = operands.options;
  torch::Tensor scale;
  if (grad_scale.defined()) {
    scale = grad_scale.resolve_neg().to(torch::kFloat).contiguous();
    LMFUSE_TORCH_CHECK(Check::Argument, scale.numel() == (perToken ? problem.tokens : 1), kWho, "upstream gradient has ",
                scale.numel(), " elements");
    options.grad_scale = scale.data_ptr<float>();
  }
  Outputs outputs;
  outputs.param_grads = operands.param_grads;
  outputs.loss = result.loss.data_ptr<float>();
  if (wanted.hidden) outputs.grad_hidden = result.grad_hidden.data_ptr();
  if (wanted.weight) outputs.grad_weight = result.grad_weight.data_ptr();
  if (wanted.bias) outputs.grad_bias = result.grad_bias.data_ptr();

  const c10::DeviceGuard deviceGuard(operands.hidden.device());
  torch::Tensor workspace;
  Workspace space;
  callRuntime(Check::Argument, [&] {
    // fp32 parameter gradients: sized for these outputs, which leaves out the [V, D] accumulator on CUDA
    // (the fp32 grad_weight accumulates in place).
    // Low memory: sized for these outputs too, which is the lean plan's few per-token arrays on CUDA.
    const bool forOutputs = fp32Params || options.memory == MemoryMode::LowMemory;
    space.bytes = forOutputs ? workspace_size(problem, options, outputs, operands.context)
                             : workspace_size(problem, options, outputs.wants_gradients(), operands.context);
    // From LibTorch's allocator: on CUDA the caching allocator serves it (no cudaMalloc per call,
    // capturable), and it lives exactly as long as this call.
    workspace = torch::empty({static_cast<int64_t>(std::max<std::size_t>(space.bytes, 1))},
                             operands.hidden.options().dtype(torch::kByte));
    space.data = workspace.data_ptr();
    linear_cross_entropy(problem, options, outputs, space, operands.context);
  });
  const bool checkLabels = operands.context.device == DeviceKind::Cpu || switchOn("LMFUSE_CHECK_LABELS");
#ifdef LMFUSE_TORCH_CUDA
  // The check waits for the stream, which a stream being captured into a CUDA graph must not: said here, as an
  // error of the call's use (the runtime's own refusal would reach the caller as a label's IndexError).
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  LMFUSE_TORCH_CHECK(Check::Argument,
                     !checkLabels || operands.context.device == DeviceKind::Cpu ||
                         (cudaStreamIsCapturing(static_cast<cudaStream_t>(operands.context.stream), &capture) ==
                              cudaSuccess &&
                          capture == cudaStreamCaptureStatusNone),
                     kWho, "LMFUSE_CHECK_LABELS is set, and the labels cannot be checked on a stream being captured "
                     "into a CUDA graph (the check waits for the stream); leave it unset for captured calls");
#endif
  if (checkLabels)
    callRuntime(Check::LabelOutOfRange, [&] { check(space, operands.context); });
  return result;
}

void scaleGradients(const Operands& operands, CallResult& result, const torch::Tensor& upstream) {
  if (operands.problem.tokens == 0) return;
  Outputs outputs;
  outputs.param_grads = operands.param_grads;
  if (result.grad_hidden.defined()) outputs.grad_hidden = result.grad_hidden.data_ptr();
  if (result.grad_weight.defined()) outputs.grad_weight = result.grad_weight.data_ptr();
  if (result.grad_bias.defined()) outputs.grad_bias = result.grad_bias.data_ptr();
  if (!outputs.wants_gradients()) return;
  const torch::Tensor scale = upstream.resolve_neg().to(torch::kFloat).contiguous();
  LMFUSE_TORCH_CHECK(Check::Argument, scale.numel() == 1, kWho, "upstream gradient of a reduced loss has ", scale.numel(), " elements");
  const c10::DeviceGuard deviceGuard(operands.hidden.device());
  callRuntime(Check::Argument, [&] { scale_grads(operands.problem, outputs, scale.data_ptr<float>(), operands.context); });
}

}  // namespace lmfuse::torch_detail
