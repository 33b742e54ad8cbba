// What lmfuse's two benchmark programs share: the error check, reproducible random bf16 inputs on the
// device (a counter-based hash: no cuRAND) and the median of CUDA-event timings after warm-up.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace lmfuse_bench {

#define BENCH_CHECK(call)                                                                        \
  do {                                                                                           \
    auto status_ = (call);                                                                       \
    if (int(status_) != 0) {                                                                     \
      std::fprintf(stderr, "%s failed (%d) at %s:%d\n", #call, int(status_), __FILE__, __LINE__); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

// ---------------------------------------------------------------------------------------------------
// Random inputs on the device (a counter-based hash: reproducible, no cuRAND)
// ---------------------------------------------------------------------------------------------------
__device__ __forceinline__ uint64_t mix(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
  return x;
}
__device__ __forceinline__ float uniform(uint64_t seed, uint64_t i) {
  return float(mix(seed * 0x9e3779b97f4a7c15ull + i) >> 40) / float(1 << 24) * 2.0f - 1.0f;
}
__global__ void fillKernel(__nv_bfloat16* out, int64_t count, float scale, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(scale * uniform(seed, i));
}

inline float medianOf(std::vector<float> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

template <class F>
float timeMedian(F&& f, int repeats, cudaStream_t stream, int warmups = 2) {
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < warmups; ++i) f();  // warm-up: handles, heuristics, module load
  BENCH_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> times;
  for (int i = 0; i < repeats; ++i) {
    BENCH_CHECK(cudaEventRecord(start, stream));
    f();
    BENCH_CHECK(cudaEventRecord(stop, stream));
    BENCH_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  BENCH_CHECK(cudaEventDestroy(start));
  BENCH_CHECK(cudaEventDestroy(stop));
  return medianOf(times);
}

}  // namespace lmfuse_bench
