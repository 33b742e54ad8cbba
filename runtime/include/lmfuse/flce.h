// lmfuse runtime: fused linear + cross-entropy over raw host or device pointers.
//
// Contract: computes the cross-entropy of z = f(h·Wᵀ + b) against integer labels, and when asked the
// gradients of the loss with respect to h, W and b, holding no more of the N × V logits than fit a
// workspace the caller allocates (query workspace_size first): tokens are processed in chunks whose size
// comes from that workspace (on CUDA one chunk when all of them fit its default budget, which also holds an
// fp32 [V, D] accumulator otherwise). The call allocates nothing, synchronises nothing (CUDA) and never
// reads out of bounds. One exception, for profilers and sanitizers: with the environment variable
// LMFUSE_CUDA_EAGER set (to anything but "" or "0"), a CUDA call whose stream is not being captured reads
// each choice the device makes (compaction's branch, a numerators chunk's redo) back to the host, one
// synchronisation each, and runs only the chosen work, instead of recording a graph with conditional
// nodes, which Nsight Compute does not profile and compute-sanitizer's racecheck and synccheck do not
// follow. Same kernels, same order, bitwise the same results.
// No LibTorch, no other dependency: C++17 and, for the CUDA path, the CUDA runtime.
//
// Notation (all accumulation in fp32 or better, whatever the storage dtype):
//   x_ij   = h_i · W_j + b_j                       (b_j = 0 without a bias)
//   s_ij   = logit_scale · x_ij
//   z_ij   = softcap · tanh(s_ij / softcap)        if softcap > 0, else s_ij
//   lse_i  = log Σ_j exp(z_ij)
//   loss_i = lse_i − (1 − ε)·z_i,y_i − (ε / V)·Σ_j z_ij + z_loss · lse_i²      (ε = label_smoothing)
//            which is PyTorch's cross_entropy with label smoothing, plus the z-loss.
//   Row i is valid when its target y_i ≠ ignore_index; an invalid row has loss_i = 0 and no gradient.
//   Reduction Sum:  L = Σ_valid loss_i.   Mean: L = Σ_valid loss_i / divisor,
//     divisor = n_items (device/host pointer) if given, else n_items_value if > 0, else the count of
//     valid rows, counted on the device. A mean over zero valid rows is 0 with zero gradients
//     (documented choice: a NaN would poison the optimiser state of every later step); so is a mean
//     whose divisor read through n_items is ≤ 0 or NaN. n_items / n_items_value with Sum or None is
//     an Error (they only mean something for Mean).
//   Reduction None: loss[i] = loss_i (0 for invalid rows).
//   Gradient with respect to z_ij for a valid row, before the upstream scale g_i:
//     dz_ij = (1 + 2·z_loss·lse_i)·p_ij − (1 − ε)·[j = y_i] − ε / V,   p_ij = exp(z_ij − lse_i)
//   then dx_ij = dz_ij · (1 − tanh²(s_ij / softcap)) · logit_scale   (no tanh factor without softcap),
//   multiplied by g_i = grad_scale (scalar for Mean/Sum, per token for None; 1 when absent) and by
//   1/divisor for Mean. grad_h = dx·W, grad_W = dxᵀ·h, grad_b = Σ_i dx_i.
//
// Shift (causal language modelling): with ShiftKind::Rows the target of token t is label t+1 within
// consecutive rows of seq_len tokens (the last token of each row has no target and is invalid); with
// ShiftKind::Segments the same within packed segments [cu_seqlens[k], cu_seqlens[k+1]), so the last
// token of one packed sequence never predicts the first of the next; tokens past cu_seqlens[segments]
// are invalid, and so are tokens before cu_seqlens[0]. shift.seq_len must be 0 unless the kind is Rows,
// cu_seqlens / segments null / 0 unless it is Segments (an Error otherwise: a forgotten kind would
// silently train without the shift). On the CPU cu_seqlens is checked (cu_seqlens[0] ≥ 0,
// non-decreasing, cu_seqlens[segments] ≤ tokens); on CUDA it is device memory and is not read by the
// host, and a malformed one still never makes the runtime read out of bounds.
//
// Labels out of range: a target outside [0, V) that is not ignore_index is never read as an index. Its
// row is valid (it counts in the Mean's divisor) and its loss is NaN (so a Mean or Sum is NaN: it cannot
// pass silently); its dx row is NaN too, so grad_hidden's row and every grad_weight / grad_bias entry
// are NaN (zero instead under the empty-mean rule above); its lse is computed as usual. The first
// offending token (lowest index), its label and the label's index in labels (token + 1 under a shift)
// are recorded in the workspace's first 256 bytes; check() throws an Error such as
//   "lmfuse::check: token 3's target labels[3] = 128256 is outside [0, 128256) and is not ignore_index (-100); ..."
//
// Errors: every argument is validated before anything is written; a bad one throws Error
// "<function>: <argument> <what is wrong>", e.g. "lmfuse::linear_cross_entropy: problem.weight_stride (3)
// is smaller than problem.hidden_dim (4)". Besides the rules stated on each field: sizes must be
// positive, strides 0 or ≥ hidden_dim, every pointer aligned to its element type, workspace.data to 16
// bytes, outputs.grad_bias needs problem.bias, outputs.param_grads is a ParamGradKind. On Cuda also:
// hidden, weight, grad_hidden, grad_weight, grad_weight_accumulate and the workspace 16-byte aligned and
// their row strides multiples of 16 bytes (cuBLASLt); the CUDA backend adds its own checks (device
// memory, its workspace alignment).
//
// Mixed precision (Outputs::param_grads = ParamGradKind::Float32): the parameters are fp32 masters and
// the call computes with Float16 / BFloat16 copies of them, as autocast does. Pass problem.dtype = the
// half type, problem.weight / problem.bias = the caller's half copies of the fp32 weight and bias (what
// autocast's F::linear would multiply with; the runtime cannot allocate one), and fp32 grad_weight
// (overwritten) and/or grad_weight_accumulate (the existing fp32 .grad, added to) and fp32 grad_bias.
// grad_hidden stays in problem.dtype. The weight gradient is the same sum as with half outputs,
// Σ_i dx_i·h_i accumulated in fp32 or better, but stored once in fp32: never rounded to the half type
// (autocast's cast backward would round it to bf16/fp16 and then widen it), and with no [V, D]
// accumulator in the workspace (on CUDA the fp32 grad_weight accumulates chunk after chunk in place; size
// the workspace with the workspace_size overload that takes the outputs to leave that region out).
// Under autocast this is the exact gradient of the computation autocast runs, minus that rounding.
//
// CPU backend: host memory, every sum in fp64 in a fixed order, so its results are bitwise independent
// of chunk_tokens, memory mode and Context::threads (OpenMP when built with it). It skips ignored
// tokens before any arithmetic. Accumulate keeps an fp64 [V, D + 1] accumulator in the workspace;
// LowMemory keeps each token's lse (8·N bytes) and recomputes the logits of one vocabulary slice at a
// time for the weight and bias gradients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace lmfuse {

/// Storage type of hidden, weight, bias and of the hidden/weight/bias gradients.
enum class DType : int { Float32, Float16, BFloat16 };
/// Storage type of labels and of cu_seqlens.
enum class IndexType : int { Int32, Int64 };
enum class Reduction : int { Mean, Sum, None };
enum class DeviceKind : int { Cpu, Cuda };
enum class ShiftKind : int { None, Rows, Segments };
/// Accumulate: one [V, D] grad_weight accumulator in the workspace (fp32 on CUDA, fp64 on the CPU; fastest).
/// LowMemory: no V × D accumulator (vocabulary slices, logits recomputed for the backward pass). On CUDA with
/// a dense grad_weight output, every buffer of the call but a few per-token arrays lives inside
/// grad_weight until the slices write it (workspace_size for these outputs: under 1 MiB at N = 8192),
/// and ignored tokens are skipped as in the default mode.
/// Auto: Accumulate when it fits workspace_budget, else LowMemory.
enum class MemoryMode : int { Auto, Accumulate, LowMemory };
/// Storage type of outputs.grad_weight and outputs.grad_bias: problem.dtype (the default), or fp32
/// whatever problem.dtype is (mixed precision: fp32 master parameters, see the contract above).
enum class ParamGradKind : int { ProblemDType, Float32 };

/// Every error the runtime reports: bad arguments (the message names the argument), a workspace that
/// is too small, a backend that is not built, and out-of-range labels found by check().
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The operands. Strides are in elements between consecutive rows (0 means dense: hidden_dim).
struct Problem {
  int64_t tokens = 0;      ///< N
  int64_t hidden_dim = 0;  ///< D
  int64_t vocab = 0;       ///< V
  DType dtype = DType::BFloat16;
  const void* hidden = nullptr;  ///< [N, D]
  int64_t hidden_stride = 0;
  const void* weight = nullptr;  ///< [V, D]
  int64_t weight_stride = 0;
  const void* bias = nullptr;    ///< [V], optional
  const void* labels = nullptr;  ///< [N]
  IndexType label_type = IndexType::Int64;
};

struct Shift {
  ShiftKind kind = ShiftKind::None;
  int64_t seq_len = 0;                ///< Rows: tokens % seq_len == 0
  const void* cu_seqlens = nullptr;   ///< Segments: [segments + 1], same memory space as labels
  IndexType cu_seqlens_type = IndexType::Int32;
  int64_t segments = 0;
};

struct Options {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;  ///< ε in [0, 1]
  double softcap = 0.0;          ///< 0 = off
  double logit_scale = 1.0;
  double z_loss = 0.0;
  Reduction reduction = Reduction::Mean;
  const float* n_items = nullptr;  ///< Mean divisor read through a pointer (device for CUDA)
  double n_items_value = 0.0;      ///< Mean divisor as a host constant when > 0
  /// Upstream gradient applied during the call: a scalar for Mean/Sum, [N] for None. null = 1.
  const float* grad_scale = nullptr;
  /// Floats grad_scale points to, when the caller knows it: 0 = not stated; else it must be 1 for
  /// Mean/Sum and tokens for None (catches a scalar upstream passed with Reduction::None).
  int64_t grad_scale_count = 0;
  Shift shift;
  /// Bytes the runtime may use in its workspace; 0 = the default (CPU: 256 MiB; CUDA: 1.5 GiB plus the size
  /// of an fp32 [V, D] accumulator when grad_weight is asked for, at most 4 GiB; 512 MiB under LowMemory).
  /// A target:
  /// when even the minimum (one token per chunk, plus the accumulator under Accumulate) is larger,
  /// workspace_size returns that minimum.
  std::size_t workspace_budget = 0;
  MemoryMode memory = MemoryMode::Auto;
  /// Tokens per chunk; 0 = chosen from the budget. The result does not depend on it beyond rounding
  /// (on the CPU not at all; there it also overrides the budget's choice).
  int64_t chunk_tokens = 0;
  /// Only valid tokens go through the GEMMs (CUDA; gathered on the device, no host synchronisation).
  bool compact = true;
};

/// Results. All optional but `loss`. Gradients are computed only when at least one gradient pointer
/// is given; grad_weight and grad_bias are overwritten, grad_weight_accumulate is added to. No output may
/// overlap an input or another output: on CUDA a dense grad_weight's bytes are also scratch space until its
/// values are written (the lean low-memory plan, and a default-mode pass whose numerators outgrow the
/// workspace).
struct Outputs {
  float* loss = nullptr;             ///< [1], or [N] for Reduction::None
  float* lse = nullptr;              ///< [N] fp32, 0 for invalid rows
  void* grad_hidden = nullptr;       ///< [N, D] in dtype
  int64_t grad_hidden_stride = 0;
  void* grad_weight = nullptr;       ///< [V, D] in param_grads' type
  int64_t grad_weight_stride = 0;
  float* grad_weight_accumulate = nullptr;  ///< [V, D] fp32, dense; this call's gradient is added
  void* grad_bias = nullptr;         ///< [V] in param_grads' type
  /// The storage type of grad_weight and grad_bias (Float32: mixed precision, contract above).
  ParamGradKind param_grads = ParamGradKind::ProblemDType;

  bool wants_gradients() const {
    return grad_hidden || grad_weight || grad_weight_accumulate || grad_bias;
  }
};

struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

struct Context {
  DeviceKind device = DeviceKind::Cpu;
  void* stream = nullptr;  ///< cudaStream_t for Cuda; null = the legacy default stream
  int threads = 0;         ///< CPU worker threads; 0 = all available (results do not depend on it)
};

/// Bytes of workspace the call needs for this problem (pointers in `problem` are not read): enough for
/// any combination of outputs (with_gradients: any gradient).
std::size_t workspace_size(const Problem& problem, const Options& options, bool with_gradients,
                           const Context& context);

/// Bytes of workspace a call with exactly these outputs needs: which pointers are set (never what they
/// point to) and param_grads decide it. Never more than the overload above, and less where the plan needs
/// no [V, D] accumulator: on CUDA, fp32 parameter gradients (ParamGradKind::Float32, the mixed-precision
/// case), grad_weight_accumulate without grad_weight, or no grad_weight at all. A call accepts a workspace
/// of this size for these outputs; a call with other outputs (a forward-only call too) may need more.
std::size_t workspace_size(const Problem& problem, const Options& options, const Outputs& outputs,
                           const Context& context);

/// The fused call. Throws Error, before touching any output, when an argument is invalid.
void linear_cross_entropy(const Problem& problem, const Options& options, const Outputs& outputs,
                          Workspace workspace, const Context& context);

/// Multiplies grad_hidden, grad_weight and grad_bias of `outputs` (in their types, param_grads
/// included) by *upstream (a scalar read through
/// a pointer in the context's memory space), for an upstream gradient known only after the call.
/// grad_weight_accumulate is not touched: pass the upstream as Options::grad_scale instead.
void scale_grads(const Problem& problem, const Outputs& outputs, const float* upstream,
                 const Context& context);

/// Throws Error naming the first token whose label was outside [0, V) in the last call that used
/// this workspace. Synchronises the stream (it is the one explicit synchronisation point).
/// workspace.bytes must be at least 256 (the report); a workspace no call has used gives no meaning.
void check(Workspace workspace, const Context& context);

/// True when this build has the CUDA backend and a device is visible.
bool cuda_available();

}  // namespace lmfuse
