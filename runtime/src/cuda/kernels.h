// Launchers of the CUDA backend's kernels (kernels.cu). Each enqueues on the given stream, allocates
// nothing, never synchronises, and checks its launch. All indexing is 64-bit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "error_report.h"  // defines: LabelErrorReport
#include "lmfuse/flce.h"

namespace lmfuse::detail::cuda {

// Targets: per token, the label it is scored against after the shift: >= 0 valid, kIgnored, kOutOfRange.
constexpr int32_t kIgnored = -1;
constexpr int32_t kOutOfRange = -2;

// Device scalars written by launchPrepare, read by every later kernel (by the host only where
// LMFUSE_CUDA_EAGER has a conditional choice read back: branch, redo).
struct Scalars {
  float gradFactor;   // grad_scale (Mean/Sum) times 1/divisor (Mean); 0 for a Mean over nothing
  float lossFactor;   // 1/divisor for Mean (0 for a Mean over nothing), 1 otherwise
  long long validCount;
  long long compactCount;  // tokens that go through the GEMMs when compacting: valid + out-of-range labels
  // The numerators schedule (numerators.h): 1 while the current chunk must be redone the usual way, and the
  // chunks redone in this call so far.
  unsigned int redo;
  unsigned int redone;
  unsigned int branch;  // the compaction branch launchSelectBranch chose (read back by an eager call)
};

/// Resolves every token's target (ignore_index, shift by rows or packed segments, range check), counts
/// the valid ones, records the first out-of-range token in the error report, and fills Scalars.
/// One block: deterministic, no atomics.
void launchPrepare(const Problem& problem, const Options& options, int32_t* targets, Scalars* scalars,
                   LabelErrorReport* report, cudaStream_t stream);

/// Row parameters shared by the cross-entropy kernels.
struct RowParams {
  int64_t vocab = 0;      // V (full vocabulary)
  int64_t columnBegin = 0;  // first vocabulary column held in the buffer (vocabulary slices)
  int64_t columns = 0;    // columns held in the buffer
  int64_t ld = 0;         // leading dimension of the buffer (elements)
  int64_t firstToken = 0; // token of buffer row 0 (with rowTokens: the compacted row of buffer row 0)
  const int64_t* rowTokens = nullptr;  // compaction: token of each compacted row, -1 past the last
  int64_t rows = 0;
  float smoothing = 0, softcap = 0, logitScale = 1, zLoss = 0;
  const void* bias = nullptr;       // in dtype, or null: bias[c − biasBegin] is vocabulary column c's
  int64_t biasBegin = 0;            // vocabulary column of bias[0] (a vocabulary shard's first row)
  const int32_t* targets = nullptr; // [N]
  const Scalars* scalars = nullptr;
  const float* tokenGradScale = nullptr;  // [N] for Reduction::None, or null
};

/// Columns per block of a row's partial softmax statistics: the tile product's column tile.
constexpr int64_t kRowStatisticsColumns = 256;

/// Partial softmax statistics of a logits buffer's rows, as the tile product's statistics epilogue writes
/// them (tile_gemm.h): for buffer row r and block b of kRowStatisticsColumns columns, the float2
/// (max, Σ exp(z − max)) over the block's columns, at byte r·stride + 8·b of `data`.
struct RowPartials {
  const char* data = nullptr;
  int64_t stride = 0;
};

/// Full rows (columns == vocab): one pass of online max/sum per row gives lse and the loss; when
/// writeGradient, the row is overwritten in place with dx (the gradient with respect to x = h·Wᵀ + b).
/// Given `partials` of these rows, lse comes from them instead of a pass over the row (and Σ z for label
/// smoothing from the gradient pass), so a row is read once: only with writeGradient, or without smoothing.
/// rowLoss/lse are the workspace arrays [N]; userLse and userLoss (Reduction::None) may be null.
void launchRowLoss(DType dtype, void* buffer, const RowParams& params, bool writeGradient,
                   const RowPartials* partials, float* rowLoss, float* lse, float* userLse, float* userLoss,
                   cudaStream_t stream);

/// A slice of columns whose rows' lse is known (the low-memory grad_weight pass): overwrites the buffer
/// with dx, elementwise.
void launchSliceGradient(DType dtype, void* buffer, const RowParams& params, const float* lse,
                         cudaStream_t stream);

/// biasAccumulator[c] (=, or += when accumulate) Σ_r buffer[r, c], in a fixed order (deterministic).
void launchColumnSum(DType dtype, const void* buffer, int64_t rows, int64_t columns, int64_t ld,
                     float* biasAccumulator, bool accumulate, cudaStream_t stream);

/// loss[0] = lossFactor · Σ_i rowLoss[i] in a fixed order; one block.
void launchReduceLoss(const float* rowLoss, int64_t tokens, const Scalars* scalars, float* loss,
                      cudaStream_t stream);

/// out[r, c] = dtype(acc[r, c]) for an fp32 [rows, columns] accumulator (ld = columns); when `also`
/// is given, also[r, c] += acc[r, c] (a dense fp32 array).
void launchConvert(DType dtype, const float* accumulator, int64_t rows, int64_t columns, void* out,
                   int64_t outLd, float* also, cudaStream_t stream);

/// out[r, c] *= *factor over a strided [rows, columns] matrix in dtype.
void launchScale(DType dtype, void* out, int64_t rows, int64_t columns, int64_t ld, const float* factor,
                 cudaStream_t stream);

}  // namespace lmfuse::detail::cuda
