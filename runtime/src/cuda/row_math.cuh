// Device helpers of the cross-entropy row kernels (kernels.cu): storage conversions, 16-byte vectors,
// the loss parameters of a row, and the gradient of one row's logits (in place or from another copy of
// the row). Device code only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels.h"    // defines: RowParams
#include "loss_math.h"  // defines: LossParams, transform_logit, transform_derivative_at, row_loss

namespace lmfuse::detail::cuda {

using detail::LossParams;

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T fromFloat(float x);
template <> __device__ __forceinline__ float fromFloat<float>(float x) { return x; }
template <> __device__ __forceinline__ __half fromFloat<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

template <typename T> struct alignas(16) Vec {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

// ---------------------------------------------------------------------------------------------------
// Rows
// ---------------------------------------------------------------------------------------------------
__device__ __forceinline__ LossParams<float> lossParams(const RowParams& p) {
  return {p.logitScale, p.softcap, p.smoothing, p.zLoss, p.vocab};
}

template <typename T>
__device__ __forceinline__ float biasAt(const RowParams& p, int64_t column) {
  return p.bias ? toFloat(static_cast<const T*>(p.bias)[column]) : 0.0f;
}

// Rows start on 16-byte boundaries (the buffers' leading dimensions are padded), so whole vectors are
// stored and only the tail of a row goes element by element.
template <typename T>
__device__ void zeroRow(T* row, int64_t columns) {
  using V = Vec<T>;
  const int64_t vectors = columns / V::kSize;
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) reinterpret_cast<uint4*>(row)[k] = make_uint4(0, 0, 0, 0);
  for (int64_t c = vectors * V::kSize + threadIdx.x; c < columns; c += blockDim.x) row[c] = fromFloat<T>(0.0f);
}

// Writes to `out` for the logits in `in` (the same row in place, or a row held in shared memory), columns
// [columnBegin, columnBegin + columns) of the vocabulary:
//   dx = g · dz/dx · ((1 + 2·z_loss·lse)·exp(z − lse) − ε/V − (1 − ε)·[column = target])
// (logit_gradient of loss_math.h, written out so the exponential is the fast __expf: this loop is the
// bandwidth-bound part of the backward pass and its accuracy need is the dtype's, fp32 at most).
template <typename T>
__device__ void gradientRow(const T* in, T* out, int32_t columns, int64_t columnBegin, const RowParams& p, float lse,
                            int64_t target, float g) {
  using V = Vec<T>;
  const LossParams<float> lp = lossParams(p);
  const float a = 1.0f + 2.0f * p.zLoss * lse;
  const float uniform = p.smoothing / float(p.vocab);
  const float hit = 1.0f - p.smoothing;
  const int32_t localTarget = int32_t(target - columnBegin);  // may fall outside these columns
  const T* bias = p.bias ? static_cast<const T*>(p.bias) + columnBegin : nullptr;
  auto dx = [&](float raw, int32_t column) {
    const float z = transform_logit(raw + (bias ? toFloat(bias[column]) : 0.0f), lp);
    const float dz = a * __expf(z - lse) - uniform - (column == localTarget ? hit : 0.0f);
    return dz * transform_derivative_at(z, lp) * g;
  };
  const int32_t vectors = columns / V::kSize;
  for (int32_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    V x = reinterpret_cast<const V*>(in)[k], y;
#pragma unroll
    for (int e = 0; e < V::kSize; ++e) y.v[e] = fromFloat<T>(dx(toFloat(x.v[e]), k * V::kSize + e));
    reinterpret_cast<V*>(out)[k] = y;
  }
  for (int32_t c = vectors * V::kSize + threadIdx.x; c < columns; c += blockDim.x)
    out[c] = fromFloat<T>(dx(toFloat(in[c]), c));
}

__device__ __forceinline__ void combine(float& m, float& s, float om, float os) {
  float mx = fmaxf(m, om);
  if (mx == -INFINITY) return;
  s = s * __expf(m - mx) + os * __expf(om - mx);
  m = mx;
}

}  // namespace lmfuse::detail::cuda
