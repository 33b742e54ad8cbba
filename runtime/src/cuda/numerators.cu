// Kernels of the numerators schedule (see numerators.h). One warp per row for the row kernels, each
// reducing in a fixed order (lane-strided, then a butterfly), so results do not depend on scheduling.
#include "numerators.h"

#include <cuda_bf16.h>

#include "check.h"
#include "launch_util.cuh"     // defines: rowGrid
#include "logit_gradient.cuh"  // defines: rowToken, gradScale
#include "tile_gemm.h"         // defines: kNumeratorExponentCap

namespace lmfuse::detail::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 8;  // rows per block of the row kernels

__device__ __forceinline__ float warpSum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}
__device__ __forceinline__ float warpMax(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

// Σ a[k]·b[k] over n bf16 pairs, this lane's share in a fixed order; 16-byte loads where both rows allow.
__device__ float dotShare(const bf16* a, const bf16* b, int64_t n, int lane) {
  float sum = 0.0f;
  int64_t done = 0;
  if ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) % 16 == 0) {
    const int64_t vectors = n / 8;
    for (int64_t k = lane; k < vectors; k += 32) {
      const uint4 x = reinterpret_cast<const uint4*>(a)[k], y = reinterpret_cast<const uint4*>(b)[k];
      const bf16* xs = reinterpret_cast<const bf16*>(&x);
      const bf16* ys = reinterpret_cast<const bf16*>(&y);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum = fmaf(__bfloat162float(xs[e]), __bfloat162float(ys[e]), sum);
    }
    done = vectors * 8;
  }
  for (int64_t c = done + lane; c < n; c += 32) sum = fmaf(__bfloat162float(a[c]), __bfloat162float(b[c]), sum);
  return sum;
}

__global__ void targetLogitsKernel(const bf16* hidden, int64_t hiddenLd, const bf16* weight, int64_t weightLd,
                                   int64_t hiddenDim, RowParams p, float* shift, Scalars* scalars) {
  if (blockIdx.x == 0 && threadIdx.x == 0) scalars->redo = 0;
  const int lane = threadIdx.x % 32;
  for (int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; r < p.rows; r += int64_t(gridDim.x) * kWarps) {
    const int64_t token = rowToken(p, r);
    if (token < 0) continue;
    const int32_t target = p.targets[token];
    const float sum =
        target >= 0 ? warpSum(dotShare(hidden + r * hiddenLd, weight + int64_t(target) * weightLd, hiddenDim, lane))
                    : 0.0f;
    if (lane == 0) shift[token] = p.logitScale * sum;
  }
}

__device__ int64_t statisticsBlocks(int64_t columns) {
  return (columns + kRowStatisticsColumns - 1) / kRowStatisticsColumns;
}

// tail.buffer null: the row's columns are all in `buffer` (p.columns == p.vocab).
__global__ void numeratorRowsKernel(bf16* buffer, RowParams p, RowPartials partials, NumeratorTail tail, float* lse,
                                    float* rowScale, float* rowLoss, float* userLse, float* userLoss, Scalars* scalars) {
  const int lane = threadIdx.x % 32;
  const int64_t blocks = statisticsBlocks(p.columns);
  const int64_t tailBlocks = tail.buffer ? statisticsBlocks(p.vocab - p.columns) : 0;
  // Half the cap: whatever the last bits of ex2.approx at the cap, a capped numerator is above it.
  const float capped = exp2f(kNumeratorExponentCap - 1.0f);
  for (int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; r < p.rows; r += int64_t(gridDim.x) * kWarps) {
    const float2* part = reinterpret_cast<const float2*>(partials.data + r * partials.stride);
    const float2* tailPart = reinterpret_cast<const float2*>(tail.partials.data + r * tail.partials.stride);
    float most = 0.0f, sum = 0.0f;
    for (int64_t b = lane; b < blocks + tailBlocks; b += 32) {
      const float2 q = b < blocks ? part[b] : tailPart[b - blocks];
      most = fmaxf(most, q.x);
      sum += q.y;
    }
    most = warpMax(most);
    sum = warpSum(sum);
    if (lane != 0) continue;
    const int64_t token = rowToken(p, r);
    const int32_t target = token >= 0 ? p.targets[token] : kIgnored;
    // A NaN or inf anywhere would reach grad_weight through the products even with c = 0; a capped
    // numerator of a labelled row would change its softmax. Either way the chunk is redone the usual way.
    if (!isfinite(sum) || (target >= 0 && most >= capped)) scalars->redo = 1;
    rowScale[r] = 0.0f;
    if (token < 0) continue;
    if (target < 0) {  // ignored (loss 0) or out of range (NaN, as the row kernel writes it)
      const float loss = target == kOutOfRange ? __int_as_float(0x7fc00000) : 0.0f;
      // Its dx is outOfRangeGradient: so is c (through c ⊙ h, a NaN reaches every grad_weight entry).
      if (target == kOutOfRange) rowScale[r] = outOfRangeGradient(p);
      rowLoss[token] = loss;
      lse[token] = 0.0f;
      if (userLse) userLse[token] = 0.0f;
      if (userLoss) userLoss[token] = loss;
      continue;
    }
    const float loss = logf(sum);  // lse − z_target, with z_target the shift
    const float rowLse = lse[token] + loss;
    lse[token] = rowLse;
    if (userLse) userLse[token] = rowLse;
    rowLoss[token] = loss;
    if (userLoss) userLoss[token] = loss;
    rowScale[r] = gradScale(p, token) * p.logitScale / sum;
    bf16* at = target < p.columns ? buffer + r * p.ld + target
                                  : static_cast<bf16*>(tail.buffer) + r * tail.ld + (target - p.columns);
    *at = __float2bfloat16_rn(1.0f - sum);
  }
}

__global__ void redoConditionKernel(cudaGraphConditionalHandle condition, bool graph, Scalars* scalars) {
  const unsigned redo = scalars->redo;
  if (redo) scalars->redone += 1;
  if (graph) cudaGraphSetConditional(condition, redo);
}

__global__ void unitScaleKernel(float* rowScale, int64_t rows) {
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x)
    rowScale[r] = 1.0f;
}

__device__ __forceinline__ float toFloat(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float toFloat(float x) { return x; }

// out row `to(r)` (skipped where negative) = bf16(rowScale[r] · in row r), over `columns`; 8 elements a piece
// (16-byte stores) where both rows are 16-byte aligned.
template <typename In, typename To>
__global__ void scaleRowsKernel(const In* in, int64_t inLd, const float* rowScale, int64_t rows, int64_t columns,
                                bf16* out, int64_t outLd, To to) {
  struct alignas(16) Piece {
    In values[8];
  };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t o = to(r);
    if (o < 0) continue;
    const float c = rowScale[r];
    const In* x = in + r * inLd;
    bf16* y = out + o * outLd;
    int64_t done = 0;
    if ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16 == 0) {
      for (int64_t k = threadIdx.x; k < columns / 8; k += blockDim.x) {
        const Piece piece = reinterpret_cast<const Piece*>(x)[k];
        uint4 scaled;
        bf16* values = reinterpret_cast<bf16*>(&scaled);
#pragma unroll
        for (int e = 0; e < 8; ++e) values[e] = __float2bfloat16_rn(c * toFloat(piece.values[e]));
        reinterpret_cast<uint4*>(y)[k] = scaled;
      }
      done = columns / 8 * 8;
    }
    for (int64_t k = done + threadIdx.x; k < columns; k += blockDim.x) y[k] = __float2bfloat16_rn(c * toFloat(x[k]));
  }
}

struct SameRow {
  __device__ int64_t operator()(int64_t r) const { return r; }
};
struct TokenRow {
  RowParams p;
  __device__ int64_t operator()(int64_t r) const { return rowToken(p, r); }
};

unsigned warpRowsGrid(int64_t rows) { return rowGrid((rows + kWarps - 1) / kWarps); }

template <typename In>
void scaleRows(const In* x, int64_t inLd, const float* rowScale, const RowParams* tokens, int64_t rows,
               int64_t columns, void* out, int64_t outLd, cudaStream_t stream) {
  auto* y = static_cast<bf16*>(out);
  if (tokens)
    scaleRowsKernel<<<rowGrid(rows), 256, 0, stream>>>(x, inLd, rowScale, rows, columns, y, outLd, TokenRow{*tokens});
  else
    scaleRowsKernel<<<rowGrid(rows), 256, 0, stream>>>(x, inLd, rowScale, rows, columns, y, outLd, SameRow{});
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launchTargetLogits(const void* hidden, int64_t hiddenLd, const void* weight, int64_t weightLd,
                        int64_t hiddenDim, const RowParams& rows, float* shift, Scalars* scalars,
                        cudaStream_t stream) {
  targetLogitsKernel<<<warpRowsGrid(rows.rows), 32 * kWarps, 0, stream>>>(
      static_cast<const bf16*>(hidden), hiddenLd, static_cast<const bf16*>(weight), weightLd, hiddenDim, rows, shift,
      scalars);
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchNumeratorRows(void* buffer, const RowParams& rows, const RowPartials& partials, float* lse,
                         float* rowScale, float* rowLoss, float* userLse, float* userLoss, Scalars* scalars,
                         cudaStream_t stream, const NumeratorTail* tail) {
  numeratorRowsKernel<<<warpRowsGrid(rows.rows), 32 * kWarps, 0, stream>>>(
      static_cast<bf16*>(buffer), rows, partials, tail ? *tail : NumeratorTail{}, lse, rowScale, rowLoss, userLse,
      userLoss, scalars);
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchRedoCondition(const Condition& condition, Scalars* scalars, cudaStream_t stream) {
  redoConditionKernel<<<1, 1, 0, stream>>>(condition.handle, condition.graph, scalars);
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchUnitScale(float* rowScale, int64_t rows, cudaStream_t stream) {
  unitScaleKernel<<<rowGrid((rows + 255) / 256), 256, 0, stream>>>(rowScale, rows);
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchScaleRows(const void* in, int64_t inLd, const float* rowScale, const RowParams* tokens, int64_t rows,
                     int64_t columns, void* out, int64_t outLd, cudaStream_t stream) {
  scaleRows(static_cast<const bf16*>(in), inLd, rowScale, tokens, rows, columns, out, outLd, stream);
}

void launchScaleFloatRows(const float* in, int64_t inLd, const float* rowScale, const RowParams* tokens, int64_t rows,
                          int64_t columns, void* out, int64_t outLd, cudaStream_t stream) {
  scaleRows(in, inLd, rowScale, tokens, rows, columns, out, outLd, stream);
}

}  // namespace lmfuse::detail::cuda
