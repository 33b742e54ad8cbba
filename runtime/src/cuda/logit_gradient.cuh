// The loss gradient of one logit, in device code, for every kernel that writes dx: the row and slice
// kernels (kernels.cu) and the tile product's gradient epilogue (tile_gemm.cu). One definition, so a
// logit's dx has the same bits whichever kernel writes it (the tests compare them bitwise).
// Contract: a row's token and target come from RowParams exactly as kernels.h describes (rowTokens for
// compaction, -1 past the last compacted row); every function is a pure function of its arguments.
#pragma once

#include <cstdint>

#include "kernels.h"    // defines: RowParams, Scalars, kIgnored
#include "loss_math.h"  // defines: LossParams, transform_logit, transform_derivative_at

namespace lmfuse::detail::cuda {

__device__ __forceinline__ detail::LossParams<float> lossParams(const RowParams& p) {
  return {p.logitScale, p.softcap, p.smoothing, p.zLoss, p.vocab};
}

/// The token of buffer row r, or -1 for compaction padding.
__device__ __forceinline__ int64_t rowToken(const RowParams& p, int64_t r) {
  return p.rowTokens ? p.rowTokens[p.firstToken + r] : p.firstToken + r;
}

/// dx = g · dz/dx · ((1 + 2·z_loss·lse)·exp(z − lse) − ε/V − (1 − ε)·[column = target])
/// (logit_gradient of loss_math.h, written with the fast __expf: the kernels that use it are
/// bandwidth-bound, and the accuracy needed is the dtype's, fp32 at most). What every row shares:
struct GradientConstants {
  detail::LossParams<float> loss;
  float uniform, hit;  // ε/V, 1 − ε
};

/// What one row adds (16 bytes, so a kernel can stage many rows' worth in shared memory).
struct RowGradient {
  float lse, scale, g;  // scale = 1 + 2·z_loss·lse
  int32_t localTarget;  // target − columnBegin: may fall outside the buffer's columns
};

__device__ __forceinline__ GradientConstants gradientConstants(const RowParams& p) {
  return {lossParams(p), p.smoothing / float(p.vocab), 1.0f - p.smoothing};
}

/// dx of every logit of a row whose label is out of range (flce.h's contract): NaN, so the error reaches
/// grad_hidden's row and every grad_weight and grad_bias entry; 0 under a Mean over nothing (lossFactor 0),
/// where every gradient of the call is zero.
__device__ __forceinline__ float outOfRangeGradient(const RowParams& p) {
  return p.scalars->lossFactor == 0.0f ? 0.0f : __int_as_float(0x7fc00000);
}

/// The factor g of a token's gradient: its own (Reduction::None) or the call's.
__device__ __forceinline__ float gradScale(const RowParams& p, int64_t token) {
  return p.tokenGradScale ? p.tokenGradScale[token] : p.scalars->gradFactor;
}

__device__ __forceinline__ RowGradient rowGradient(const RowParams& p, float g, int32_t target, float lse) {
  return {lse, 1.0f + 2.0f * p.zLoss * lse, g, int32_t(target - p.columnBegin)};
}

/// dx of the logit `raw` (bias already added) in buffer column `column`.
__device__ __forceinline__ float logitGradient(float raw, int32_t column, const RowGradient& row,
                                              const GradientConstants& k) {
  const float z = transform_logit(raw, k.loss);
  const float dz = row.scale * __expf(z - row.lse) - k.uniform - (column == row.localTarget ? k.hit : 0.0f);
  return dz * transform_derivative_at(z, k.loss) * row.g;
}

}  // namespace lmfuse::detail::cuda
