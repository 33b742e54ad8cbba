// Kernels of the compaction (see compaction.h). Deterministic: the order is a stable prefix sum in one
// block (fixed partition of the tokens over threads), gathers and scatters move whole rows.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "check.h"
#include "compaction.h"
#include "launch_util.cuh"  // defines: rowGrid, withType

namespace lmfuse::detail::cuda {
namespace {

constexpr int kScanThreads = 1024;

__global__ void __launch_bounds__(kScanThreads) compactKernel(const int32_t* targets, int64_t tokens, int64_t* order,
                                                              Scalars* scalars, float* rowLoss, float* lse,
                                                              float* userLse, float* userLoss) {
  __shared__ long long counts[kScanThreads];
  // Thread t owns the contiguous tokens [t·per, (t+1)·per), so a prefix sum over threads keeps the order.
  const int64_t per = (tokens + kScanThreads - 1) / kScanThreads;
  const int64_t begin = min(tokens, threadIdx.x * per), end = min(tokens, begin + per);
  long long mine = 0;
  for (int64_t i = begin; i < end; ++i) {
    if (targets[i] != kIgnored) {
      ++mine;
    } else {
      rowLoss[i] = 0.0f;
      lse[i] = 0.0f;
      if (userLse) userLse[i] = 0.0f;
      if (userLoss) userLoss[i] = 0.0f;
    }
  }
  counts[threadIdx.x] = mine;
  __syncthreads();
  for (int offset = 1; offset < kScanThreads; offset *= 2) {  // inclusive Hillis-Steele scan
    long long add = threadIdx.x >= offset ? counts[threadIdx.x - offset] : 0;
    __syncthreads();
    counts[threadIdx.x] += add;
    __syncthreads();
  }
  long long next = counts[threadIdx.x] - mine;
  for (int64_t i = begin; i < end; ++i)
    if (targets[i] != kIgnored) order[next++] = i;
  const long long total = counts[kScanThreads - 1];
  for (int64_t j = total + threadIdx.x; j < tokens; j += kScanThreads) order[j] = -1;
  if (threadIdx.x == 0) scalars->compactCount = total;
}

template <typename T>
__global__ void zeroIgnoredKernel(const int32_t* targets, int64_t tokens, int64_t columns, T* out, int64_t ld) {
  for (int64_t r = blockIdx.x; r < tokens; r += gridDim.x) {
    if (targets[r] != kIgnored) continue;
    for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) out[r * ld + c] = T(0.0f);
  }
}

// Rows are moved as 16-byte vectors when the row length allows (strides are 16-byte multiples: validated).
template <typename T>
__global__ void gatherKernel(const T* hidden, int64_t ld, const int64_t* order, int64_t first, int64_t rows,
                             int64_t columns, T* out) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t token = order[first + r];
    T* o = out + r * columns;
    if (columns % (16 / sizeof(T)) == 0) {
      const int64_t vectors = columns * int64_t(sizeof(T)) / 16;
      uint4* ov = reinterpret_cast<uint4*>(o);
      const uint4* iv = token >= 0 ? reinterpret_cast<const uint4*>(hidden + token * ld) : nullptr;
      for (int64_t c = threadIdx.x; c < vectors; c += blockDim.x) ov[c] = iv ? iv[c] : make_uint4(0, 0, 0, 0);
    } else {
      for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) o[c] = token >= 0 ? hidden[token * ld + c] : T(0.0f);
    }
  }
}

template <typename T>
__global__ void scatterKernel(const T* compact, const int64_t* order, int64_t first, int64_t rows, int64_t columns,
                              T* out, int64_t ld) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t token = order[first + r];
    if (token < 0) continue;
    const T* in = compact + r * columns;
    if (columns % (16 / sizeof(T)) == 0) {
      const int64_t vectors = columns * int64_t(sizeof(T)) / 16;
      for (int64_t c = threadIdx.x; c < vectors; c += blockDim.x)
        reinterpret_cast<uint4*>(out + token * ld)[c] = reinterpret_cast<const uint4*>(in)[c];
    } else {
      for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) out[token * ld + c] = in[c];
    }
  }
}

__global__ void selectBranchKernel(cudaGraphConditionalHandle branch, bool graph, int64_t granule, int64_t branches,
                                   int64_t identityTokens, Scalars* scalars) {
  const long long count = scalars->compactCount;
  long long r = count > 0 ? (count - 1) / granule : 0;
  if (r > branches - 1) r = branches - 1;
  if (identityTokens > 0 && count == identityTokens) r = branches;
  scalars->branch = unsigned(r);
  if (graph) cudaGraphSetConditional(branch, unsigned(r));
}

}  // namespace

void launchCompact(const int32_t* targets, int64_t tokens, int64_t* order, Scalars* scalars, float* rowLoss,
                   float* lse, float* userLse, float* userLoss, cudaStream_t stream) {
  compactKernel<<<1, kScanThreads, 0, stream>>>(targets, tokens, order, scalars, rowLoss, lse, userLse, userLoss);
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchZeroIgnoredRows(DType dtype, const int32_t* targets, int64_t tokens, int64_t columns, void* out,
                           int64_t ld, cudaStream_t stream) {
  withType(dtype, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    zeroIgnoredKernel<T><<<rowGrid(tokens), 256, 0, stream>>>(targets, tokens, columns, static_cast<T*>(out), ld);
  });
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchGatherRows(DType dtype, const void* hidden, int64_t ld, const int64_t* order, int64_t first, int64_t rows,
                      int64_t columns, void* out, cudaStream_t stream) {
  withType(dtype, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    gatherKernel<T><<<rowGrid(rows), 256, 0, stream>>>(static_cast<const T*>(hidden), ld, order, first, rows, columns,
                                                       static_cast<T*>(out));
  });
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchScatterRows(DType dtype, const void* compact, const int64_t* order, int64_t first, int64_t rows,
                       int64_t columns, void* out, int64_t ld, cudaStream_t stream) {
  withType(dtype, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    scatterKernel<T><<<rowGrid(rows), 256, 0, stream>>>(static_cast<const T*>(compact), order, first, rows, columns,
                                                        static_cast<T*>(out), ld);
  });
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

void launchSelectBranch(const Condition& branch, int64_t granule, int64_t branches, int64_t identityTokens,
                        Scalars* scalars, cudaStream_t stream) {
  selectBranchKernel<<<1, 1, 0, stream>>>(branch.handle, branch.graph, granule, branches, identityTokens, scalars);
  LMFUSE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lmfuse::detail::cuda
