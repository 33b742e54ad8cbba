// Compaction of the CUDA backend (issue 5): only tokens with a label to score go through the GEMMs,
// without the host ever learning how many there are. The count stays on the device; chunks past it are
// skipped by CUDA graph conditional nodes (conditional.h) whose conditions setChunkConditions writes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "hd.h"  // defines: LMFUSE_HD (host and device under nvcc)
#include "kernels.h"
#include "lmfuse/flce.h"

namespace lmfuse::detail::cuda {

constexpr int kMaxConditionalChunks = 96;  // handles passed by value to one kernel
// Each chunk's work exists in kChunkParts sizes: the first ceil(rows·(j+1)/kChunkParts) rows, j < kChunkParts,
// so the chunk holding the last tokens costs about what its tokens need, not a whole chunk.
constexpr int kChunkParts = 4;

/// Rows of part j of a chunk of `rows` rows.
LMFUSE_HD inline int64_t partRows(int64_t rows, int j) { return (rows * (j + 1) + kChunkParts - 1) / kChunkParts; }

/// Stable order of the tokens that go through the GEMMs (target != kIgnored): order[j] is the j-th one,
/// -1 for j >= count (padding); writes scalars->compactCount. For every ignored token it writes what the
/// skipped row kernel would have: rowLoss 0, lse 0 (and userLse, userLoss when given). One block.
void launchCompact(const int32_t* targets, int64_t tokens, int64_t* order, Scalars* scalars, float* rowLoss,
                   float* lse, float* userLse, float* userLoss, cudaStream_t stream);

/// Zeroes the grad_hidden rows of ignored tokens (the compacted GEMMs never write them).
void launchZeroIgnoredRows(DType dtype, const int32_t* targets, int64_t tokens, int64_t columns, void* out,
                           int64_t ld, cudaStream_t stream);

/// out[r] = hidden[order[first + r]] (a zero row where order is -1), r < rows; out is dense [rows, D].
void launchGatherRows(DType dtype, const void* hidden, int64_t ld, const int64_t* order, int64_t first, int64_t rows,
                      int64_t columns, void* out, cudaStream_t stream);

/// out[order[first + r]] = compact[r] for rows whose order is not -1; compact is dense [rows, D].
void launchScatterRows(DType dtype, const void* compact, const int64_t* order, int64_t first, int64_t rows,
                       int64_t columns, void* out, int64_t ld, cudaStream_t stream);

/// Sets each chunk's switch condition: the smallest part j whose rows cover the chunk's compacted tokens
/// (min(count − firstRow, rows)), or kChunkParts (no body) for a chunk past the
/// count; chunk 0 always runs at least part 0, since it initialises the accumulators.
struct ChunkConditions {
  cudaGraphConditionalHandle handles[3 * kMaxConditionalChunks];
  int64_t firstRow[3 * kMaxConditionalChunks];
  int64_t rows[3 * kMaxConditionalChunks];
  int count;
};
void launchSetConditions(const ChunkConditions& conditions, const Scalars* scalars, cudaStream_t stream);

}  // namespace lmfuse::detail::cuda
