// The cross-entropy row kernel with the row held on chip (Hopper thread block clusters): a cluster of
// K CTAs splits one row of logits into K slices, each CTA copies its slice into shared memory with one
// bulk asynchronous copy, the CTAs combine their max / sum-of-exp / Σz through distributed shared memory,
// and each writes its slice's gradient back from shared memory. The row crosses the memory bus twice
// (one read, one write) instead of three times (two reads, one write) for the kernel in kernels.cu,
// which reads the row again for the gradient because a 250 KB row (Llama-3) or 500 KB row (Gemma-2) does
// not fit one CTA's shared memory.
// Contract: same outputs as rowLossKernel<T, true> (loss, lse, dx in place), deterministic: the partials
// are combined in rank order by every CTA. Launched only on compute capability ≥ 9.0, for rows that
// K ≤ 8 (portable cluster size) slices of ≤ kSliceBytes cover.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "check.h"
#include "kernels.h"
#include "launch_util.cuh"  // defines: withType
#include "row_math.cuh"     // defines: Vec, toFloat, lossParams, biasAt, zeroRow, gradientRow, combine

namespace lmfuse::detail::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kClusterThreads = 512;
constexpr int kClusterWarps = kClusterThreads / 32;
// Two CTAs per SM (228 KB of shared memory each SM): one copies its slice in while the other writes.
constexpr int64_t kSliceBytes = 96 << 10;
constexpr int kMaxClusterSize = 8;  // the portable cluster size

struct Partial {
  float max, sum, sumZ;
};

__device__ __forceinline__ uint32_t sharedAddress(const void* pointer) {
  return uint32_t(__cvta_generic_to_shared(pointer));
}

template <typename T>
__global__ void __launch_bounds__(kClusterThreads) clusterRowKernel(T* buffer, RowParams p, int32_t sliceElements,
                                                                   float* rowLoss, float* lseOut, float* userLse,
                                                                   float* userLoss) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using V = Vec<T>;
  extern __shared__ __align__(128) unsigned char dynamicShared[];
  T* slice = reinterpret_cast<T*>(dynamicShared);
  __shared__ alignas(8) uint64_t loaded;  // mbarrier of the bulk copy
  __shared__ Partial partial;             // this CTA's, read by every CTA of the cluster
  __shared__ float warpMax[kClusterWarps], warpSum[kClusterWarps], warpZ[kClusterWarps];
  __shared__ float rowLse;

  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank(), size = cluster.num_blocks();
  const int64_t r = blockIdx.x / size;
  T* row = buffer + r * p.ld;
  const int32_t columns = int32_t(p.columns);
  const int32_t begin = int32_t(rank) * sliceElements;
  const int32_t count = max(0, min(sliceElements, columns - begin));
  const int64_t token = p.rowTokens ? p.rowTokens[p.firstToken + r] : p.firstToken + r;
  const int32_t target = token < 0 ? kIgnored : p.targets[token];
  if (target < 0) {  // the same for every CTA of the row's cluster, so none waits at a cluster barrier
    if (rank == 0 && token >= 0 && threadIdx.x == 0) {
      const float loss = target == kOutOfRange ? __int_as_float(0x7fc00000) : 0.0f;
      rowLoss[token] = loss;
      lseOut[token] = 0.0f;
      if (userLse) userLse[token] = 0.0f;
      if (userLoss) userLoss[token] = loss;
    }
    zeroRow(row + begin, count);
    return;
  }

  // The slice into shared memory: one bulk copy of its 16-byte part, the last few elements by threads.
  const uint32_t bar = sharedAddress(&loaded);
  const uint32_t bulkBytes = uint32_t(count) * uint32_t(sizeof(T)) / 16 * 16;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bulkBytes) : "memory");
    if (bulkBytes > 0)
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       sharedAddress(slice)),
                   "l"(row + begin), "r"(bulkBytes), "r"(bar)
                   : "memory");
  }
  for (int32_t c = int32_t(bulkBytes / sizeof(T)) + threadIdx.x; c < count; c += blockDim.x) slice[c] = row[begin + c];
  __syncthreads();  // the barrier is initialised before anyone waits on it
  for (uint32_t done = 0; !done;) {
    asm volatile(
        "{\n .reg .pred ready;\n mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], 0;\n selp.u32 %0, 1, 0, ready;\n}\n"
        : "=r"(done)
        : "r"(bar)
        : "memory");
  }

  // This slice's online max and sum of exp, and Σ z for label smoothing.
  const LossParams<float> lp = lossParams(p);
  float m = -INFINITY, s = 0.0f, sumZ = 0.0f;
  const int32_t vectors = count / V::kSize;
  for (int32_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    V in = reinterpret_cast<const V*>(slice)[k];
    float z[V::kSize];
    float vmax = -INFINITY;
#pragma unroll
    for (int e = 0; e < V::kSize; ++e) {
      z[e] = transform_logit(toFloat(in.v[e]) + biasAt<T>(p, begin + k * V::kSize + e), lp);
      vmax = fmaxf(vmax, z[e]);
      sumZ += z[e];
    }
    if (vmax > m) { s *= __expf(m - vmax); m = vmax; }
#pragma unroll
    for (int e = 0; e < V::kSize; ++e) s += __expf(z[e] - m);
  }
  for (int32_t c = vectors * V::kSize + threadIdx.x; c < count; c += blockDim.x) {
    float z = transform_logit(toFloat(slice[c]) + biasAt<T>(p, begin + c), lp);
    sumZ += z;
    if (z > m) { s *= __expf(m - z); m = z; }
    s += __expf(z - m);
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    float om = __shfl_xor_sync(0xffffffffu, m, offset), os = __shfl_xor_sync(0xffffffffu, s, offset);
    combine(m, s, om, os);
    sumZ += __shfl_xor_sync(0xffffffffu, sumZ, offset);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) { warpMax[warp] = m; warpSum[warp] = s; warpZ[warp] = sumZ; }
  __syncthreads();
  if (warp == 0) {
    m = lane < kClusterWarps ? warpMax[lane] : -INFINITY;
    s = lane < kClusterWarps ? warpSum[lane] : 0.0f;
    sumZ = lane < kClusterWarps ? warpZ[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) {
      float om = __shfl_xor_sync(0xffffffffu, m, offset), os = __shfl_xor_sync(0xffffffffu, s, offset);
      combine(m, s, om, os);
      sumZ += __shfl_xor_sync(0xffffffffu, sumZ, offset);
    }
    if (lane == 0) partial = {m, s, sumZ};
  }
  cluster.sync();  // every partial (and every slice) is visible to the whole cluster

  if (threadIdx.x == 0) {
    float rowMax = -INFINITY, rowSum = 0.0f, rowZ = 0.0f;
    for (unsigned j = 0; j < size; ++j) {  // rank order: the same result in every CTA
      const Partial* other = cluster.map_shared_rank(&partial, j);
      combine(rowMax, rowSum, other->max, other->sum);
      rowZ += other->sumZ;
    }
    const float lse = rowMax + logf(rowSum);
    rowLse = lse;
    if (rank == 0) {
      const unsigned owner = unsigned(target / sliceElements);
      const T* ownerSlice = cluster.map_shared_rank(slice, owner);
      const float zTarget =
          transform_logit(toFloat(ownerSlice[target - int32_t(owner) * sliceElements]) + biasAt<T>(p, target), lp);
      const float loss = row_loss(lse, zTarget, rowZ, lp);
      rowLoss[token] = loss;
      lseOut[token] = lse;
      if (userLse) userLse[token] = lse;
      if (userLoss) userLoss[token] = loss;
    }
  }
  // Done reading the other CTAs' shared memory; they may not exit (freeing it) before every CTA is.
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  __syncthreads();
  const float g = p.tokenGradScale ? p.tokenGradScale[token] : p.scalars->gradFactor;
  gradientRow(slice, row + begin, count, begin, p, rowLse, target, g);
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

}  // namespace

bool launchRowLossOnChip(DType dtype, void* buffer, const RowParams& params, float* rowLoss, float* lse,
                         float* userLse, float* userLoss, cudaStream_t stream) {
  int device = 0, major = 0;
  LMFUSE_CUDA_CHECK(cudaGetDevice(&device));
  LMFUSE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 9 || params.columnBegin != 0) return false;
  const int64_t element = dtype == DType::Float32 ? 4 : 2;
  const int64_t clusterSize = (params.columns * element + kSliceBytes - 1) / kSliceBytes;
  if (clusterSize > kMaxClusterSize) return false;
  if (params.rows == 0) return true;
  // Slices start on 16-byte boundaries of the (16-byte aligned) row: a multiple of 8 elements.
  const int64_t sliceElements = ((params.columns + clusterSize - 1) / clusterSize + 7) / 8 * 8;
  const std::size_t sharedBytes = std::size_t(sliceElements * element);
  withType(dtype, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    auto kernel = clusterRowKernel<T>;
    LMFUSE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sharedBytes)));
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(unsigned(params.rows * clusterSize));
    config.blockDim = dim3(kClusterThreads);
    config.dynamicSmemBytes = sharedBytes;
    config.stream = stream;
    cudaLaunchAttribute cluster[1];
    cluster[0].id = cudaLaunchAttributeClusterDimension;
    cluster[0].val.clusterDim.x = unsigned(clusterSize);
    cluster[0].val.clusterDim.y = 1;
    cluster[0].val.clusterDim.z = 1;
    config.attrs = cluster;
    config.numAttrs = 1;
    LMFUSE_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<T*>(buffer), params, int32_t(sliceElements),
                                         rowLoss, lse, userLse, userLoss));
  });
  return true;
}

}  // namespace lmfuse::detail::cuda
