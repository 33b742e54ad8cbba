// Argument validation of the public API: one LMFUSE_REQUIRE per rule, each message naming the argument.
#include "validate.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "backend.h"
#include "error.h"
#include "storage.h"

namespace lmfuse::detail {
namespace {

bool is_dtype(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float16 || dtype == DType::BFloat16;
}
bool is_index_type(IndexType type) { return type == IndexType::Int32 || type == IndexType::Int64; }
bool is_reduction(Reduction reduction) {
  return reduction == Reduction::Mean || reduction == Reduction::Sum || reduction == Reduction::None;
}
bool is_shift_kind(ShiftKind kind) {
  return kind == ShiftKind::None || kind == ShiftKind::Rows || kind == ShiftKind::Segments;
}
bool is_memory_mode(MemoryMode mode) {
  return mode == MemoryMode::Auto || mode == MemoryMode::Accumulate || mode == MemoryMode::LowMemory;
}
bool is_param_grad_kind(ParamGradKind kind) {
  return kind == ParamGradKind::ProblemDType || kind == ParamGradKind::Float32;
}
bool is_device(DeviceKind device) { return device == DeviceKind::Cpu || device == DeviceKind::Cuda; }

bool is_aligned(const void* pointer, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(pointer) % alignment == 0;
}

// A row stride: 0 (dense) or at least hidden_dim, and rows × stride elements addressable in bytes.
void check_stride(const char* function, const char* name, int64_t stride, int64_t rows,
                  int64_t hidden_dim, int64_t element_bytes) {
  LMFUSE_REQUIRE(function, stride >= 0, name << " (" << stride << ") is negative");
  LMFUSE_REQUIRE(function, stride == 0 || stride >= hidden_dim,
                 name << " (" << stride << ") is smaller than problem.hidden_dim (" << hidden_dim << ")");
  int64_t effective = stride == 0 ? hidden_dim : stride;
  LMFUSE_REQUIRE(function, rows <= std::numeric_limits<int64_t>::max() / element_bytes / effective,
                 name << " (" << effective << ") times " << rows << " rows overflows a 64-bit byte offset");
}

void check_pointer(const char* function, const char* name, const void* pointer, std::size_t alignment) {
  LMFUSE_REQUIRE(function, is_aligned(pointer, alignment),
                 name << " (" << pointer << ") is not aligned to its element size (" << alignment
                      << " bytes)");
}

void check_sizes(const char* function, const Problem& problem) {
  LMFUSE_REQUIRE(function, problem.tokens > 0, "problem.tokens (" << problem.tokens << ") must be positive");
  LMFUSE_REQUIRE(function, problem.hidden_dim > 0,
                 "problem.hidden_dim (" << problem.hidden_dim << ") must be positive");
  LMFUSE_REQUIRE(function, problem.vocab > 0, "problem.vocab (" << problem.vocab << ") must be positive");
  LMFUSE_REQUIRE(function, is_dtype(problem.dtype),
                 "problem.dtype (" << int(problem.dtype) << ") is not a supported DType (Float32, Float16, BFloat16)");
}

void check_param_grad_kind(const char* function, const Outputs& outputs) {
  LMFUSE_REQUIRE(function, is_param_grad_kind(outputs.param_grads),
                 "outputs.param_grads (" << int(outputs.param_grads)
                                         << ") is not a ParamGradKind (ProblemDType, Float32)");
}

void check_cu_seqlens_values(const char* function, const Problem& problem, const Shift& shift) {
  int64_t previous = 0;
  for (int64_t k = 0; k <= shift.segments; ++k) {
    int64_t boundary = load_index(shift.cu_seqlens, shift.cu_seqlens_type, k);
    LMFUSE_REQUIRE(function, boundary >= previous,
                   "options.shift.cu_seqlens[" << k << "] (" << boundary << ") is "
                       << (k == 0 ? "negative" : "smaller than the boundary before it"));
    previous = boundary;
  }
  LMFUSE_REQUIRE(function, previous <= problem.tokens,
                 "options.shift.cu_seqlens[" << shift.segments << "] (" << previous
                     << ") is larger than problem.tokens (" << problem.tokens << ")");
}

}  // namespace

void validate_shape(const char* function, const Problem& problem, const Options& options,
                    const Context& context) {
  LMFUSE_REQUIRE(function, is_device(context.device),
                 "context.device (" << int(context.device) << ") is not a DeviceKind");
  LMFUSE_REQUIRE(function, context.threads >= 0, "context.threads (" << context.threads << ") is negative");
  check_sizes(function, problem);
  LMFUSE_REQUIRE(function, is_index_type(problem.label_type),
                 "problem.label_type (" << int(problem.label_type) << ") is not an IndexType (Int32, Int64)");
  int64_t element = dtype_size(problem.dtype);
  check_stride(function, "problem.hidden_stride", problem.hidden_stride, problem.tokens, problem.hidden_dim, element);
  check_stride(function, "problem.weight_stride", problem.weight_stride, problem.vocab, problem.hidden_dim, element);

  LMFUSE_REQUIRE(function, std::isfinite(options.label_smoothing) && options.label_smoothing >= 0.0 &&
                               options.label_smoothing <= 1.0,
                 "options.label_smoothing (" << options.label_smoothing << ") is outside [0, 1]");
  LMFUSE_REQUIRE(function, std::isfinite(options.softcap) && options.softcap >= 0.0,
                 "options.softcap (" << options.softcap << ") must be 0 (off) or a positive finite number");
  LMFUSE_REQUIRE(function, std::isfinite(options.logit_scale),
                 "options.logit_scale (" << options.logit_scale << ") is not finite");
  LMFUSE_REQUIRE(function, std::isfinite(options.z_loss) && options.z_loss >= 0.0,
                 "options.z_loss (" << options.z_loss << ") must be a finite number ≥ 0");
  LMFUSE_REQUIRE(function, is_reduction(options.reduction),
                 "options.reduction (" << int(options.reduction) << ") is not a Reduction (Mean, Sum, None)");
  LMFUSE_REQUIRE(function, std::isfinite(options.n_items_value) && options.n_items_value >= 0.0,
                 "options.n_items_value (" << options.n_items_value << ") must be a finite number ≥ 0");
  bool mean = options.reduction == Reduction::Mean;
  LMFUSE_REQUIRE(function, mean || (options.n_items == nullptr && options.n_items_value == 0.0),
                 "options.n_items / options.n_items_value set the divisor of Reduction::Mean, but "
                 "options.reduction is " << (options.reduction == Reduction::Sum ? "Sum" : "None"));
  int64_t scale_count = options.reduction == Reduction::None ? problem.tokens : 1;
  LMFUSE_REQUIRE(function, options.grad_scale_count >= 0,
                 "options.grad_scale_count (" << options.grad_scale_count << ") is negative");
  LMFUSE_REQUIRE(function, options.grad_scale_count == 0 || options.grad_scale_count == scale_count,
                 "options.grad_scale_count (" << options.grad_scale_count << ") does not match "
                     << (options.reduction == Reduction::None
                             ? "Reduction::None, which takes one upstream gradient per token ("
                             : "a scalar reduction, which takes one upstream gradient (")
                     << scale_count << ")");
  LMFUSE_REQUIRE(function, is_memory_mode(options.memory),
                 "options.memory (" << int(options.memory) << ") is not a MemoryMode");
  LMFUSE_REQUIRE(function, options.chunk_tokens >= 0,
                 "options.chunk_tokens (" << options.chunk_tokens << ") is negative");

  const Shift& shift = options.shift;
  LMFUSE_REQUIRE(function, is_shift_kind(shift.kind),
                 "options.shift.kind (" << int(shift.kind) << ") is not a ShiftKind (None, Rows, Segments)");
  if (shift.kind == ShiftKind::Rows) {
    LMFUSE_REQUIRE(function, shift.seq_len > 0,
                   "options.shift.seq_len (" << shift.seq_len << ") must be positive with ShiftKind::Rows");
    LMFUSE_REQUIRE(function, problem.tokens % shift.seq_len == 0,
                   "problem.tokens (" << problem.tokens << ") is not a multiple of options.shift.seq_len ("
                                      << shift.seq_len << ")");
  } else {
    LMFUSE_REQUIRE(function, shift.seq_len == 0,
                   "options.shift.seq_len (" << shift.seq_len << ") is set but options.shift.kind is not Rows");
  }
  if (shift.kind == ShiftKind::Segments) {
    LMFUSE_REQUIRE(function, shift.segments > 0,
                   "options.shift.segments (" << shift.segments << ") must be positive with ShiftKind::Segments");
    LMFUSE_REQUIRE(function, is_index_type(shift.cu_seqlens_type),
                   "options.shift.cu_seqlens_type (" << int(shift.cu_seqlens_type) << ") is not an IndexType");
  } else {
    LMFUSE_REQUIRE(function, shift.segments == 0 && shift.cu_seqlens == nullptr,
                   "options.shift.cu_seqlens / options.shift.segments are set but options.shift.kind is not Segments");
  }
}

void validate_call(const char* function, const Problem& problem, const Options& options,
                   const Outputs& outputs, const Context& context) {
  validate_shape(function, problem, options, context);
  std::size_t element = std::size_t(dtype_size(problem.dtype));
  std::size_t label_bytes = std::size_t(index_size(problem.label_type));

  LMFUSE_REQUIRE(function, problem.hidden != nullptr, "problem.hidden is null");
  LMFUSE_REQUIRE(function, problem.weight != nullptr, "problem.weight is null");
  LMFUSE_REQUIRE(function, problem.labels != nullptr, "problem.labels is null");
  check_pointer(function, "problem.hidden", problem.hidden, element);
  check_pointer(function, "problem.weight", problem.weight, element);
  check_pointer(function, "problem.bias", problem.bias, element);
  check_pointer(function, "problem.labels", problem.labels, label_bytes);
  check_pointer(function, "options.n_items", options.n_items, alignof(float));
  check_pointer(function, "options.grad_scale", options.grad_scale, alignof(float));

  const Shift& shift = options.shift;
  if (shift.kind == ShiftKind::Segments) {
    LMFUSE_REQUIRE(function, shift.cu_seqlens != nullptr,
                   "options.shift.cu_seqlens is null with ShiftKind::Segments");
    check_pointer(function, "options.shift.cu_seqlens", shift.cu_seqlens,
                  std::size_t(index_size(shift.cu_seqlens_type)));
    if (context.device == DeviceKind::Cpu) check_cu_seqlens_values(function, problem, shift);
  }

  LMFUSE_REQUIRE(function, outputs.loss != nullptr, "outputs.loss is null");
  check_pointer(function, "outputs.loss", outputs.loss, alignof(float));
  check_pointer(function, "outputs.lse", outputs.lse, alignof(float));
  check_param_grad_kind(function, outputs);
  std::size_t param_element = std::size_t(dtype_size(param_grad_dtype(problem.dtype, outputs.param_grads)));
  check_pointer(function, "outputs.grad_hidden", outputs.grad_hidden, element);
  check_pointer(function, "outputs.grad_weight", outputs.grad_weight, param_element);
  check_pointer(function, "outputs.grad_weight_accumulate", outputs.grad_weight_accumulate, alignof(float));
  check_pointer(function, "outputs.grad_bias", outputs.grad_bias, param_element);
  check_stride(function, "outputs.grad_hidden_stride", outputs.grad_hidden_stride, problem.tokens,
               problem.hidden_dim, int64_t(element));
  check_stride(function, "outputs.grad_weight_stride", outputs.grad_weight_stride, problem.vocab,
               problem.hidden_dim, int64_t(param_element));
  LMFUSE_REQUIRE(function, outputs.grad_bias == nullptr || problem.bias != nullptr,
                 "outputs.grad_bias is set but problem.bias is null (there is no bias to differentiate)");
}

void validate_param_grads(const char* function, const Outputs& outputs) { check_param_grad_kind(function, outputs); }

void validate_workspace(const char* function, const Workspace& workspace, std::size_t required) {
  LMFUSE_REQUIRE(function, workspace.data != nullptr,
                 "workspace.data is null (this call needs " << required << " bytes; see workspace_size)");
  LMFUSE_REQUIRE(function, workspace.bytes >= required,
                 "workspace.bytes (" << workspace.bytes << ") is smaller than the " << required
                                     << " bytes this call needs (see workspace_size)");
  check_pointer(function, "workspace.data", workspace.data, alignof(std::max_align_t));
}

void validate_cuda_alignment(const char* function, const Problem& problem, const Outputs& outputs,
                             const Workspace& workspace) {
  constexpr std::size_t kAlignment = 16;
  auto aligned = [&](const char* name, const void* pointer) {
    LMFUSE_REQUIRE(function, is_aligned(pointer, kAlignment),
                   name << " (" << pointer << ") is not 16-byte aligned, which the CUDA backend (cuBLASLt) needs");
  };
  aligned("problem.hidden", problem.hidden);
  aligned("problem.weight", problem.weight);
  aligned("outputs.grad_hidden", outputs.grad_hidden);
  aligned("outputs.grad_weight", outputs.grad_weight);
  aligned("outputs.grad_weight_accumulate", outputs.grad_weight_accumulate);
  aligned("workspace.data", workspace.data);
  int64_t element = dtype_size(problem.dtype);
  auto stride_aligned = [&](const char* name, int64_t stride, int64_t element_bytes) {
    int64_t effective = stride == 0 ? problem.hidden_dim : stride;
    LMFUSE_REQUIRE(function, effective * element_bytes % int64_t(kAlignment) == 0,
                   name << " (" << effective << " elements, " << effective * element_bytes
                        << " bytes) is not a multiple of 16 bytes, which the CUDA backend (cuBLASLt) needs"
                        << (stride == 0 ? " (a dense stride equals problem.hidden_dim)" : ""));
  };
  stride_aligned("problem.hidden_stride", problem.hidden_stride, element);
  stride_aligned("problem.weight_stride", problem.weight_stride, element);
  if (outputs.grad_hidden) stride_aligned("outputs.grad_hidden_stride", outputs.grad_hidden_stride, element);
  if (outputs.grad_weight)
    stride_aligned("outputs.grad_weight_stride", outputs.grad_weight_stride,
                   dtype_size(param_grad_dtype(problem.dtype, outputs.param_grads)));
  if (outputs.grad_weight_accumulate) stride_aligned("problem.hidden_dim (the row stride of outputs.grad_weight_accumulate)", 0, 4);
}

void validate_scale_grads(const char* function, const Problem& problem, const Outputs& outputs,
                          const float* upstream, const Context& context) {
  LMFUSE_REQUIRE(function, is_device(context.device),
                 "context.device (" << int(context.device) << ") is not a DeviceKind");
  LMFUSE_REQUIRE(function, context.threads >= 0, "context.threads (" << context.threads << ") is negative");
  check_sizes(function, problem);
  LMFUSE_REQUIRE(function, upstream != nullptr, "upstream is null");
  check_pointer(function, "upstream", upstream, alignof(float));
  std::size_t element = std::size_t(dtype_size(problem.dtype));
  check_param_grad_kind(function, outputs);
  std::size_t param_element = std::size_t(dtype_size(param_grad_dtype(problem.dtype, outputs.param_grads)));
  check_pointer(function, "outputs.grad_hidden", outputs.grad_hidden, element);
  check_pointer(function, "outputs.grad_weight", outputs.grad_weight, param_element);
  check_pointer(function, "outputs.grad_bias", outputs.grad_bias, param_element);
  check_stride(function, "outputs.grad_hidden_stride", outputs.grad_hidden_stride, problem.tokens,
               problem.hidden_dim, int64_t(element));
  check_stride(function, "outputs.grad_weight_stride", outputs.grad_weight_stride, problem.vocab,
               problem.hidden_dim, int64_t(param_element));
}

void validate_check(const char* function, const Workspace& workspace, const Context& context) {
  LMFUSE_REQUIRE(function, is_device(context.device),
                 "context.device (" << int(context.device) << ") is not a DeviceKind");
  LMFUSE_REQUIRE(function, workspace.data != nullptr, "workspace.data is null");
  LMFUSE_REQUIRE(function, workspace.bytes >= kErrorReportBytes,
                 "workspace.bytes (" << workspace.bytes << ") is smaller than the " << kErrorReportBytes
                                     << "-byte label report every workspace starts with");
  check_pointer(function, "workspace.data", workspace.data, alignof(int64_t));
}

Problem with_dense_strides(Problem problem) {
  if (problem.hidden_stride == 0) problem.hidden_stride = problem.hidden_dim;
  if (problem.weight_stride == 0) problem.weight_stride = problem.hidden_dim;
  return problem;
}

Outputs with_dense_strides(Outputs outputs, int64_t hidden_dim) {
  if (outputs.grad_hidden_stride == 0) outputs.grad_hidden_stride = hidden_dim;
  if (outputs.grad_weight_stride == 0) outputs.grad_weight_stride = hidden_dim;
  return outputs;
}

}  // namespace lmfuse::detail
