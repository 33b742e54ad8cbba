// Compaction of the CUDA backend: only tokens with a label go through the GEMMs, without the host ever
// learning how many there are. The count stays on the device; the call's work is one CUDA graph SWITCH
// node (conditional.h) whose branch r runs the first min(N, (r + 1)·granule) gathered tokens, and
// launchSelectBranch picks the smallest branch that holds them all.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "conditional.h"  // defines: Condition
#include "kernels.h"
#include "lmfuse/flce.h"

namespace lmfuse::detail::cuda {

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

/// Chooses the smallest r with (r + 1)·granule ≥ the compacted count (0 for no tokens: branch 0 runs its
/// rows as padding, which writes the zero gradients), at most branches − 1; `branches` itself when
/// identityTokens > 0 and the count is exactly identityTokens (every token: no gather needed). Writes r to
/// scalars->branch (`branch.value`) and, for a graph condition, sets it.
void launchSelectBranch(const Condition& branch, int64_t granule, int64_t branches, int64_t identityTokens,
                        Scalars* scalars, cudaStream_t stream);

}  // namespace lmfuse::detail::cuda
