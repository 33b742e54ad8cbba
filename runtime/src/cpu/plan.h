// How the CPU reference lays out its workspace for one problem: the chunk of tokens processed at once,
// the vocabulary slice whose weight gradient is accumulated at once, and the byte offset of every
// buffer. workspace_size and the call derive the same plan from the same arguments.
//
// Two schedules, bitwise identical in their results (every fp64 sum runs in the same order):
//  - fused (MemoryMode::Accumulate): one pass over token chunks; a [V, D + 1] fp64 accumulator takes
//    the weight and bias gradients as each chunk goes by.
//  - sliced (MemoryMode::LowMemory): the token pass computes loss, lse and grad_hidden, keeping each
//    token's lse; then, per vocabulary slice, a second token pass recomputes that slice's logits and
//    accumulates its [slice, D + 1] gradient. Costs one more logits GEMM, needs no V × D buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lmfuse/flce.h"

namespace lmfuse::detail::cpu {

constexpr std::size_t kDefaultBudget = std::size_t(256) << 20;  // flce.h: CPU default 256 MiB

struct Plan {
  int64_t chunk_tokens = 0;  // valid tokens per chunk (C)
  int64_t vocab_slice = 0;   // vocabulary rows per gradient accumulator (V when fused; 0 without gradients)
  bool fused = false;        // the fused schedule (see above)
  // Byte offsets in the workspace (the label report occupies [0, kErrorReportBytes)).
  std::size_t logits = 0;           // double [C, V]: x, then z, then dx of the chunk
  std::size_t hidden = 0;           // double [C, D]: the chunk's hidden rows
  std::size_t grad_hidden = 0;      // double [C, D]: the chunk's grad_hidden rows (with gradients)
  std::size_t row_token = 0;        // int64 [C]: token of each chunk row
  std::size_t row_label = 0;        // int64 [C]: its target label
  std::size_t row_loss = 0;         // double [C]
  std::size_t lse_store = 0;        // double [N]: every token's lse (sliced schedule only)
  std::size_t weight_gradient = 0;  // double [vocab_slice, D]
  std::size_t bias_gradient = 0;    // double [vocab_slice]
  std::size_t total = 0;
};

/// The plan for these arguments (validated). with_gradients: whether any gradient output is given.
Plan make_plan(const Problem& problem, const Options& options, bool with_gradients);

}  // namespace lmfuse::detail::cpu
