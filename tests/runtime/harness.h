// Test harness of the CPU runtime: a random problem that owns its buffers (Case), a runner that calls
// the public API and decodes every output to fp64 (run_runtime), and an independent brute-force
// implementation that materialises the full N × V logits in fp64 (brute_force). The brute force shares
// no code with the runtime: its own shift lookup, its own softcap derivative (through tanh of x, where
// the runtime uses z), its own reductions.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "lmfuse/flce.h"

namespace lmfuse::test {

/// Fresh seed per run (LMFUSE_TEST_SEED overrides it to replay a failure).
uint64_t fresh_seed();

struct Case {
  int64_t tokens = 0, dim = 0, vocab = 0;
  DType dtype = DType::Float32;
  IndexType label_type = IndexType::Int64;
  int64_t hidden_stride = 0, weight_stride = 0;  // 0 = dense
  Options options;                               // pointers inside are set by bind()
  std::vector<int64_t> labels;                   // logical labels
  std::vector<int64_t> cu_seqlens;               // logical boundaries (ShiftKind::Segments)
  std::vector<float> grad_scale;                 // empty = none; 1 value or [N]
  bool n_items_pointer = false;                  // pass n_items_host through options.n_items
  float n_items_host = 0.0f;
  std::vector<double> hidden, weight, bias;      // values exactly as stored (bias empty = none)
  std::vector<float> accumulate_init;            // initial grad_weight_accumulate [V, D]

  // Storage as the runtime reads it (built by store()).
  std::vector<unsigned char> hidden_bytes, weight_bytes, bias_bytes, label_bytes, cu_bytes;

  /// Converts the logical vectors to the storage buffers (after any edit of labels/values/types).
  void store();
  /// The problem and options with every pointer set to this case's buffers.
  Problem problem() const;
  Options bound_options() const;
  /// The label of labels[] scored at `token` under the shift, or ignore_index when none.
  int64_t target(int64_t token) const;
};

/// Random case: fp32 values are random doubles in [-scale, scale] rounded to float; fp16/bf16 values
/// are multiples of scale/128 in [-2·scale, 2·scale], exactly representable in both; labels uniform in [0, V) with
/// `ignored` of them set to ignore_index; bias when with_bias.
Case random_case(std::mt19937_64& rng, int64_t tokens, int64_t dim, int64_t vocab, DType dtype,
                 bool with_bias, double ignored_fraction = 0.25, double scale = 1.0);

/// Which outputs a run asks for.
struct Wants {
  bool lse = true, grad_hidden = true, grad_weight = true, grad_bias = true, accumulate = false;
  int64_t grad_hidden_pad = 0, grad_weight_pad = 0;  // extra elements per output row (stride > D)
  bool fp32_param_grads = false;  // grad_weight and grad_bias in fp32 (ParamGradKind::Float32)
};

/// All outputs decoded to fp64, dense. Absent outputs are empty.
struct Result {
  std::vector<double> loss, lse, grad_hidden, grad_weight, grad_bias, accumulate;
};

struct RunConfig {
  Wants wants;
  int threads = 0;
  int64_t chunk_tokens = 0;
  MemoryMode memory = MemoryMode::Auto;
  std::size_t budget = 0;
};

/// Calls lmfuse::linear_cross_entropy on the CPU (workspace sized by workspace_size).
Result run_runtime(const Case& c, const RunConfig& config);
Result brute_force(const Case& c, const Wants& wants);
/// The brute-force objective whose gradient the runtime returns: grad_scale · L for Mean/Sum,
/// Σ_i grad_scale_i · loss_i for None; for
/// finite differences.
double brute_force_objective(const Case& c);

/// Storage dtype decode (independent of the runtime's headers): value of element i of a buffer.
double decode(const std::vector<unsigned char>& bytes, DType dtype, int64_t index);

/// Relative size of one rounding step of the dtype (2^-24, 2^-11, 2^-8).
double unit_roundoff(DType dtype);

}  // namespace lmfuse::test
