// The CUDA backend's kernels: target resolution and counting, the per-row cross-entropy pass over a
// logits buffer (online max/sum in fp32, loss, lse, gradient written in place), the low-memory slice
// gradient, the deterministic bias column sum, the deterministic loss reduction, and conversions.
// Contract: no kernel uses floating-point atomics or any order that depends on scheduling, so every
// result is bitwise reproducible; every index is 64-bit; a label is used as an index only after the
// range check in prepareKernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <algorithm>
#include <climits>
#include <type_traits>

#include "check.h"
#include "kernels.h"
#include "launch_util.cuh"  // defines: rowGrid, withType
#include "logit_gradient.cuh"  // defines: lossParams, rowToken, gradScale, gradientConstants, rowGradient,
                               //   logitGradient
#include "loss_math.h"  // defines: transform_logit, row_loss
#include "targets.h"    // defines: target_position (the shift), shared with the CPU reference

namespace lmfuse::detail::cuda {
namespace {

using detail::LossParams;

// ---------------------------------------------------------------------------------------------------
// Element helpers
// ---------------------------------------------------------------------------------------------------
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
// Targets, count, divisor
// ---------------------------------------------------------------------------------------------------
struct PrepareArgs {
  const void* labels;
  IndexType labelType;
  int64_t tokens, vocab, ignoreIndex;
  Shift shift;
  Reduction reduction;
  const float* nItems;
  float nItemsValue;
  const float* gradScale;
};

constexpr int kPrepareThreads = 1024;

__global__ void __launch_bounds__(kPrepareThreads) prepareKernel(PrepareArgs a, int32_t* targets,
                                                                 Scalars* scalars, LabelErrorReport* report) {
  __shared__ long long counts[kPrepareThreads];
  __shared__ long long badTokens[kPrepareThreads];
  __shared__ long long badLabels[kPrepareThreads];
  long long count = 0, badToken = LLONG_MAX, badLabel = 0;
  for (int64_t i = threadIdx.x; i < a.tokens; i += blockDim.x) {
    const int64_t position = target_position(a.shift, a.tokens, i);
    const int64_t label = position == kNoTarget ? 0 : load_index(a.labels, a.labelType, position);
    int32_t target = kIgnored;
    if (position != kNoTarget && label != a.ignoreIndex) {
      ++count;  // an out-of-range label's row is valid too: it counts in the Mean's divisor (flce.h)
      if (label < 0 || label >= a.vocab) {
        target = kOutOfRange;
        if (i < badToken) { badToken = i; badLabel = label; }
      } else {
        target = int32_t(label);
      }
    }
    targets[i] = target;
  }
  counts[threadIdx.x] = count;
  badTokens[threadIdx.x] = badToken;
  badLabels[threadIdx.x] = badLabel;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      counts[threadIdx.x] += counts[threadIdx.x + width];
      if (badTokens[threadIdx.x + width] < badTokens[threadIdx.x]) {
        badTokens[threadIdx.x] = badTokens[threadIdx.x + width];
        badLabels[threadIdx.x] = badLabels[threadIdx.x + width];
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const bool bad = badTokens[0] != LLONG_MAX;
    report->token = bad ? badTokens[0] : kNoLabelError;
    report->label = bad ? badLabels[0] : 0;
    report->label_position = bad ? target_position(a.shift, a.tokens, badTokens[0]) : 0;
    report->vocab = a.vocab;
    report->ignore_index = a.ignoreIndex;
    float lossFactor = 1.0f;
    if (a.reduction == Reduction::Mean) {
      float divisor = a.nItems ? *a.nItems : a.nItemsValue > 0 ? a.nItemsValue : float(counts[0]);
      lossFactor = divisor > 0 ? 1.0f / divisor : 0.0f;
    }
    float upstream = (a.reduction != Reduction::None && a.gradScale) ? *a.gradScale : 1.0f;
    scalars->lossFactor = lossFactor;
    scalars->gradFactor = upstream * lossFactor;
    scalars->validCount = counts[0];
    scalars->redo = 0;
    scalars->redone = 0;
  }
}

// ---------------------------------------------------------------------------------------------------
// Cross-entropy rows
// ---------------------------------------------------------------------------------------------------
constexpr int kRowThreads = 512;

template <typename T>
__device__ __forceinline__ float biasAt(const RowParams& p, int64_t column) {
  return p.bias ? toFloat(static_cast<const T*>(p.bias)[column]) : 0.0f;
}

// Rows start on 16-byte boundaries (the buffers' leading dimensions are padded), so whole vectors are
// stored and only the tail of a row goes element by element. The row's `lanes` threads share it, thread
// `lane` taking every lanes-th vector: the whole block for the row kernel, part of one for narrow slices.
template <typename T>
__device__ void fillRow(T* row, int64_t columns, float value, int lane, int lanes) {
  using V = Vec<T>;
  const int64_t vectors = columns / V::kSize;
  const T element = fromFloat<T>(value);
  uint4 vector;
  T* elements = reinterpret_cast<T*>(&vector);
  for (int e = 0; e < V::kSize; ++e) elements[e] = element;
  for (int64_t k = lane; k < vectors; k += lanes) reinterpret_cast<uint4*>(row)[k] = vector;
  for (int64_t c = vectors * V::kSize + lane; c < columns; c += lanes) row[c] = element;
}

template <typename T>
__device__ void zeroRow(T* row, int64_t columns, int lane, int lanes) {
  fillRow(row, columns, 0.0f, lane, lanes);
}

// The dx row of a token without a usable label: zeros where it is ignored, outOfRangeGradient where its
// label is out of range.
template <typename T>
__device__ void unlabelledRow(T* row, const RowParams& p, int32_t target, int lane, int lanes) {
  fillRow(row, p.columns, target == kOutOfRange ? outOfRangeGradient(p) : 0.0f, lane, lanes);
}

// Overwrites one row (columns [columnBegin, columnBegin + columns) of the vocabulary) with dx
// (logit_gradient.cuh); lanes as for zeroRow. With kSumZ, returns this lane's Σ z of the logits it read
// (label smoothing's term, where the row's first pass came from partial statistics); else 0.
template <typename T, bool kSumZ = false>
__device__ float gradientRow(T* row, const RowParams& p, const RowGradient& terms, int lane, int lanes) {
  using V = Vec<T>;
  const GradientConstants constants = gradientConstants(p);
  const T* bias = p.bias ? static_cast<const T*>(p.bias) + (p.columnBegin - p.biasBegin) : nullptr;
  float sumZ = 0.0f;
  auto dx = [&](float logit, int32_t column) {
    const float raw = logit + (bias ? toFloat(bias[column]) : 0.0f);
    if (kSumZ) sumZ += transform_logit(raw, constants.loss);
    return logitGradient(raw, column, terms, constants);
  };
  const int32_t columns = int32_t(p.columns);
  const int32_t vectors = columns / V::kSize;
  for (int32_t k = lane; k < vectors; k += lanes) {
    V in = reinterpret_cast<const V*>(row)[k], out;
#pragma unroll
    for (int e = 0; e < V::kSize; ++e) out.v[e] = fromFloat<T>(dx(toFloat(in.v[e]), k * V::kSize + e));
    reinterpret_cast<V*>(row)[k] = out;
  }
  for (int32_t c = vectors * V::kSize + lane; c < columns; c += lanes) row[c] = fromFloat<T>(dx(toFloat(row[c]), c));
  return sumZ;
}

__device__ __forceinline__ void combine(float& m, float& s, float om, float os) {
  float mx = fmaxf(m, om);
  if (mx == -INFINITY) return;
  s = s * __expf(m - mx) + os * __expf(om - mx);
  m = mx;
}

// A row's (max, Σ exp(z − max), Σ z) over the block, in a fixed order: butterfly within warps, then warp 0
// over the warps; the result is lane 0 of warp 0's. Every thread of the block calls it.
struct RowReduction {
  float max[kRowThreads / 32], sum[kRowThreads / 32], z[kRowThreads / 32];
};

__device__ void reduceRow(float& m, float& s, float& sumZ, RowReduction& shared) {
  for (int offset = 16; offset > 0; offset /= 2) {
    float om = __shfl_xor_sync(0xffffffffu, m, offset), os = __shfl_xor_sync(0xffffffffu, s, offset);
    combine(m, s, om, os);
    sumZ += __shfl_xor_sync(0xffffffffu, sumZ, offset);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) { shared.max[warp] = m; shared.sum[warp] = s; shared.z[warp] = sumZ; }
  __syncthreads();
  if (warp == 0) {
    constexpr int kWarps = kRowThreads / 32;
    m = lane < kWarps ? shared.max[lane] : -INFINITY;
    s = lane < kWarps ? shared.sum[lane] : 0.0f;
    sumZ = lane < kWarps ? shared.z[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) {
      float om = __shfl_xor_sync(0xffffffffu, m, offset), os = __shfl_xor_sync(0xffffffffu, s, offset);
      combine(m, s, om, os);
      sumZ += __shfl_xor_sync(0xffffffffu, sumZ, offset);
    }
  }
}

template <typename T, bool kGradient>
__global__ void __launch_bounds__(kRowThreads) rowLossKernel(T* buffer, RowParams p, RowPartials partials,
                                                             float* rowLoss, float* lseOut, float* userLse,
                                                             float* userLoss) {
  using V = Vec<T>;
  __shared__ RowReduction reduction;
  __shared__ float rowLse, rowZTarget;
  const int64_t r = blockIdx.x;
  T* row = buffer + r * p.ld;
  const int64_t token = rowToken(p, r);
  if (token < 0) {  // compaction padding past the last token: a zero gradient row, no outputs
    if (kGradient) zeroRow(row, p.columns, threadIdx.x, blockDim.x);
    return;
  }
  const int32_t target = p.targets[token];
  if (target < 0) {
    if (threadIdx.x == 0) {
      float loss = target == kOutOfRange ? __int_as_float(0x7fc00000) : 0.0f;
      rowLoss[token] = loss;
      lseOut[token] = 0.0f;
      if (userLse) userLse[token] = 0.0f;
      if (userLoss) userLoss[token] = loss;
    }
    if (kGradient) unlabelledRow(row, p, target, threadIdx.x, blockDim.x);
    return;
  }
  const LossParams<float> lp = lossParams(p);
  float m = -INFINITY, s = 0.0f, sumZ = 0.0f;
  const int32_t columns = int32_t(p.columns);  // V < 2^31; row offsets stay 64-bit
  // Partials exist for bf16 logits only (the tile product's); not compiled for the others.
  constexpr bool kPartials = std::is_same<T, __nv_bfloat16>::value;
  // Σ z comes from the gradient pass where the partials replace the first pass (and smoothing needs it).
  const bool sumZLater = kPartials && partials.data && p.smoothing != 0.0f;
  if (kPartials && partials.data) {
    // Pass 1 from the tile product's partial statistics: one float2 per 256 columns.
    const float2* part = reinterpret_cast<const float2*>(partials.data + r * partials.stride);
    const int32_t blocks = int32_t((columns + kRowStatisticsColumns - 1) / kRowStatisticsColumns);
    for (int32_t b = threadIdx.x; b < blocks; b += blockDim.x) {
      const float2 q = part[b];
      combine(m, s, q.x, q.y);
    }
  } else {
    // Pass 1: online max and sum of exp, and Σ z for label smoothing.
    const int32_t vectors = columns / V::kSize;
    for (int32_t k = threadIdx.x; k < vectors; k += blockDim.x) {
      V in = reinterpret_cast<const V*>(row)[k];
      float z[V::kSize];
      float vmax = -INFINITY;
#pragma unroll
      for (int e = 0; e < V::kSize; ++e) {
        z[e] = transform_logit(toFloat(in.v[e]) + biasAt<T>(p, k * V::kSize + e), lp);
        vmax = fmaxf(vmax, z[e]);
        sumZ += z[e];
      }
      if (vmax > m) { s *= __expf(m - vmax); m = vmax; }
#pragma unroll
      for (int e = 0; e < V::kSize; ++e) s += __expf(z[e] - m);
    }
    for (int32_t c = vectors * V::kSize + threadIdx.x; c < columns; c += blockDim.x) {
      float z = transform_logit(toFloat(row[c]) + biasAt<T>(p, c), lp);
      sumZ += z;
      if (z > m) { s *= __expf(m - z); m = z; }
      s += __expf(z - m);
    }
  }
  reduceRow(m, s, sumZ, reduction);
  if (threadIdx.x == 0) {
    const float lse = m + logf(s);
    const float zTarget = transform_logit(toFloat(row[target]) + biasAt<T>(p, target), lp);
    lseOut[token] = lse;
    if (userLse) userLse[token] = lse;
    if (!sumZLater) {
      const float loss = row_loss(lse, zTarget, sumZ, lp);
      rowLoss[token] = loss;
      if (userLoss) userLoss[token] = loss;
    }
    rowLse = lse;
    rowZTarget = zTarget;
  }
  if (!kGradient) return;
  __syncthreads();  // row[target] was read before any thread overwrites the row
  const RowGradient terms = rowGradient(p, gradScale(p, token), target, rowLse);
  if (!sumZLater) {
    gradientRow(row, p, terms, threadIdx.x, blockDim.x);
    return;
  }
  m = -INFINITY;
  s = 0.0f;
  sumZ = gradientRow<T, true>(row, p, terms, threadIdx.x, blockDim.x);
  __syncthreads();  // the first reduction's shared values are read
  reduceRow(m, s, sumZ, reduction);
  if (threadIdx.x == 0) {
    const float loss = row_loss(rowLse, rowZTarget, sumZ, lp);
    rowLoss[token] = loss;
    if (userLoss) userLoss[token] = loss;
  }
}

// `rowLanes` threads per row (a power of two from 32 to the block): a narrow slice's rows share a block,
// rather than one row per 512-thread block with most threads idle (measured 0.037 ms for 8192 rows of 128
// columns that way, NOTES.md v23).
template <typename T>
__global__ void __launch_bounds__(kRowThreads) sliceGradientKernel(T* buffer, RowParams p, const float* lse,
                                                                   int rowLanes) {
  const int64_t r = int64_t(blockIdx.x) * (blockDim.x / rowLanes) + threadIdx.x / rowLanes;
  if (r >= p.rows) return;
  const int lane = int(threadIdx.x) % rowLanes;
  T* row = buffer + r * p.ld;
  const int64_t token = rowToken(p, r);
  const int32_t target = token < 0 ? kIgnored : p.targets[token];
  if (target < 0) { unlabelledRow(row, p, target, lane, rowLanes); return; }
  gradientRow(row, p, rowGradient(p, gradScale(p, token), target, lse[token]), lane, rowLanes);
}

// ---------------------------------------------------------------------------------------------------
// Reductions and conversions
// ---------------------------------------------------------------------------------------------------
constexpr int kColumnThreads = 256;

template <typename T>
__global__ void columnSumKernel(const T* buffer, int64_t rows, int64_t columns, int64_t ld, float* out,
                                bool accumulate) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= columns) return;
  float sum = 0.0f;
  for (int64_t r = 0; r < rows; ++r) sum += toFloat(buffer[r * ld + c]);
  out[c] = accumulate ? out[c] + sum : sum;
}

constexpr int kReduceThreads = 1024;

__global__ void __launch_bounds__(kReduceThreads) reduceLossKernel(const float* rowLoss, int64_t tokens,
                                                                   const Scalars* scalars, float* loss) {
  __shared__ float partial[kReduceThreads];
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < tokens; i += blockDim.x) sum += rowLoss[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  // A Mean over nothing (lossFactor 0) is 0 even where a row's loss is NaN (an out-of-range label): flce.h.
  if (threadIdx.x == 0) loss[0] = scalars->lossFactor == 0.0f ? 0.0f : partial[0] * scalars->lossFactor;
}

// Row-wise loops (a block per row, grid-stride over rows): no 64-bit division per element; 16-byte
// fp32 loads when the caller says every row start is aligned for them.
template <typename T>
__global__ void convertKernel(const float* acc, int64_t rows, int64_t columns, T* out, int64_t outLd, float* also,
                              bool vectorised) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* a = acc + r * columns;
    T* o = out + r * outLd;
    float* s = also ? also + r * columns : nullptr;
    int64_t c = 0;
    if (vectorised) {
      for (c = 4 * int64_t(threadIdx.x); c + 3 < columns; c += 4 * int64_t(blockDim.x)) {
        const float4 value = *reinterpret_cast<const float4*>(a + c);
        o[c] = fromFloat<T>(value.x);
        o[c + 1] = fromFloat<T>(value.y);
        o[c + 2] = fromFloat<T>(value.z);
        o[c + 3] = fromFloat<T>(value.w);
        if (s) {
          float4 sum = *reinterpret_cast<float4*>(s + c);
          sum.x += value.x; sum.y += value.y; sum.z += value.z; sum.w += value.w;
          *reinterpret_cast<float4*>(s + c) = sum;
        }
      }
      c = columns / 4 * 4;
    }
    for (int64_t k = c + threadIdx.x; k < columns; k += blockDim.x) {
      o[k] = fromFloat<T>(a[k]);
      if (s) s[k] += a[k];
    }
  }
}

template <typename T>
__global__ void flatConvertKernel(const float* acc, int64_t count, T* out, float* also) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = fromFloat<T>(acc[i]);
    if (also) also[i] += acc[i];
  }
}

template <typename T>
__global__ void scaleKernel(T* out, int64_t rows, int64_t columns, int64_t ld, const float* factor) {
  const float f = *factor;
  if (f == 1.0f) return;  // x·1 = x exactly: the usual upstream of loss.backward() costs no pass
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) out[r * ld + c] = fromFloat<T>(toFloat(out[r * ld + c]) * f);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Launchers
// ---------------------------------------------------------------------------------------------------
void launchPrepare(const Problem& problem, const Options& options, int32_t* targets, Scalars* scalars,
                   LabelErrorReport* report, cudaStream_t stream) {
  PrepareArgs a{};
  a.labels = problem.labels;
  a.labelType = problem.label_type;
  a.tokens = problem.tokens;
  a.vocab = problem.vocab;
  a.ignoreIndex = options.ignore_index;
  a.shift = options.shift;
  a.reduction = options.reduction;
  a.nItems = options.n_items;
  a.nItemsValue = float(options.n_items_value);
  a.gradScale = options.grad_scale;
  prepareKernel<<<1, kPrepareThreads, 0, stream>>>(a, targets, scalars, report);
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchRowLoss(DType dtype, void* buffer, const RowParams& params, bool writeGradient,
                   const RowPartials* partials, float* rowLoss, float* lse, float* userLse, float* userLoss,
                   cudaStream_t stream) {
  if (params.rows == 0) return;
  if (partials && (dtype != DType::BFloat16 || (!writeGradient && params.smoothing != 0.0f)))
    LMFUSE_FAIL("CUDA backend: row partials are bf16 only, and a row pass without the gradient needs its own "
                "first pass for label smoothing");
  withType(dtype, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    auto* kernel = writeGradient ? rowLossKernel<T, true> : rowLossKernel<T, false>;
    kernel<<<unsigned(params.rows), kRowThreads, 0, stream>>>(static_cast<T*>(buffer), params,
                                                              partials ? *partials : RowPartials{}, rowLoss, lse,
                                                              userLse, userLoss);
  });
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchSliceGradient(DType dtype, void* buffer, const RowParams& params, const float* lse,
                         cudaStream_t stream) {
  if (params.rows == 0) return;
  withType(dtype, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    const int64_t vectors = (params.columns + Vec<T>::kSize - 1) / Vec<T>::kSize;
    int rowLanes = 32;
    while (rowLanes < kRowThreads && rowLanes < vectors) rowLanes *= 2;
    const int64_t rowsPerBlock = kRowThreads / rowLanes;
    sliceGradientKernel<T><<<unsigned((params.rows + rowsPerBlock - 1) / rowsPerBlock), kRowThreads, 0, stream>>>(
        static_cast<T*>(buffer), params, lse, rowLanes);
  });
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchColumnSum(DType dtype, const void* buffer, int64_t rows, int64_t columns, int64_t ld,
                     float* biasAccumulator, bool accumulate, cudaStream_t stream) {
  withType(dtype, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    columnSumKernel<T><<<unsigned((columns + kColumnThreads - 1) / kColumnThreads), kColumnThreads, 0, stream>>>(
        static_cast<const T*>(buffer), rows, columns, ld, biasAccumulator, accumulate);
  });
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchReduceLoss(const float* rowLoss, int64_t tokens, const Scalars* scalars, float* loss,
                      cudaStream_t stream) {
  reduceLossKernel<<<1, kReduceThreads, 0, stream>>>(rowLoss, tokens, scalars, loss);
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchConvert(DType dtype, const float* accumulator, int64_t rows, int64_t columns, void* out,
                   int64_t outLd, float* also, cudaStream_t stream) {
  withType(dtype, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    if (rows == 1) {  // the bias: one long row, spread over blocks
      flatConvertKernel<T><<<unsigned(std::min<int64_t>((columns + 255) / 256, 4096)), 256, 0, stream>>>(
          accumulator, columns, static_cast<T*>(out), also);
      return;
    }
    const bool vectorised = columns % 4 == 0 && reinterpret_cast<uintptr_t>(accumulator) % 16 == 0 &&
                            (!also || reinterpret_cast<uintptr_t>(also) % 16 == 0);
    convertKernel<T><<<rowGrid(rows), 256, 0, stream>>>(accumulator, rows, columns, static_cast<T*>(out), outLd,
                                                        also, vectorised);
  });
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchScale(DType dtype, void* out, int64_t rows, int64_t columns, int64_t ld, const float* factor,
                 cudaStream_t stream) {
  withType(dtype, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    scaleKernel<T><<<rowGrid(rows), 256, 0, stream>>>(static_cast<T*>(out), rows, columns, ld, factor);
  });
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lmfuse::detail::cuda
