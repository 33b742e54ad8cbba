// CUDA passes of the vocabulary-parallel loss (vocab_parallel.h): direct kernels, fp32 arithmetic, fp64
// statistics and loss. No cuBLAS, no workspace, no host synchronisation, no allocation: every kernel
// recomputes the logits it needs from hidden and the shard's weight (a correct baseline; the chunked
// cuBLASLt pipeline of the single-process call is not used here yet). Deterministic: every sum runs in a
// fixed order (per-thread strides, then a fixed tree in shared memory).
#include <cuda_runtime.h>

#include <cmath>

#include "../loss_math.h"
#include "../shard.h"
#include "../storage.h"
#include "../targets.h"
#include "check.h"

namespace lmfuse::detail::cuda {
namespace {

constexpr int kThreads = 256;

__device__ inline float loadf(float value) { return value; }
__device__ inline float loadf(Half value) { return to_float(value); }
__device__ inline float loadf(BFloat16 value) { return to_float(value); }

/// The operands a kernel reads, by value (kernel parameters).
template <class T>
struct ShardArgs {
  Problem problem;
  VocabShard shard;
  Options options;
  LossParams<float> params;
  const T* hidden;
  const T* weight;
  const T* bias;
};

template <class T>
__device__ bool validToken(const ShardArgs<T>& a, int64_t token, int64_t& label) {
  int64_t position = target_position(a.options.shift, a.problem.tokens, token);
  if (position == kNoTarget) return false;
  label = load_index(a.problem.labels, a.problem.label_type, position);
  return label != a.options.ignore_index;
}

template <class T>
__device__ float logitAt(const ShardArgs<T>& a, int64_t token, int64_t row) {
  const T* h = a.hidden + token * a.problem.hidden_stride;
  const T* w = a.weight + row * a.problem.weight_stride;
  float x = 0.0f;
  for (int64_t k = 0; k < a.problem.hidden_dim; ++k) x = fmaf(loadf(h[k]), loadf(w[k]), x);
  return a.bias ? x + loadf(a.bias[row]) : x;
}

/// Block-wide sum in a fixed order; every thread gets the result.
__device__ double blockSum(double value, double* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) scratch[threadIdx.x] += scratch[threadIdx.x + width];
    __syncthreads();
  }
  double total = scratch[0];
  __syncthreads();
  return total;
}

// ============================== pass 1 ==============================

template <class T>
__global__ void statisticsKernel(ShardArgs<T> a, ShardStatistics out) {
  __shared__ double scratch[kThreads];
  __shared__ float maxes[kThreads];
  for (int64_t token = blockIdx.x; token < a.problem.tokens; token += gridDim.x) {
    int64_t label = 0;
    bool valid = validToken(a, token, label);  // the same for the whole block
    float max = -INFINITY, sum = 0.0f, logitSum = 0.0f, target = 0.0f;
    if (valid) {
      for (int64_t row = threadIdx.x; row < a.problem.vocab; row += blockDim.x) {
        float z = transform_logit(logitAt(a, token, row), a.params);
        if (z > max) {
          sum = sum * expf(max - z) + 1.0f;
          max = z;
        } else {
          sum += expf(z - max);
        }
        logitSum += z;
        if (row + a.shard.vocab_begin == label) target = z;
      }
    }
    maxes[threadIdx.x] = max;
    __syncthreads();
    for (int width = kThreads / 2; width > 0; width /= 2) {
      if (threadIdx.x < width) maxes[threadIdx.x] = fmaxf(maxes[threadIdx.x], maxes[threadIdx.x + width]);
      __syncthreads();
    }
    float rowMax = maxes[0];
    __syncthreads();
    double rowSum = blockSum(max == -INFINITY ? 0.0 : double(sum) * exp(double(max) - double(rowMax)), scratch);
    double rowLogitSum = blockSum(logitSum, scratch);
    double rowTarget = blockSum(target, scratch);
    if (threadIdx.x == 0) {
      bool inRange = label >= 0 && label < a.shard.vocab_total;
      out.max[token] = valid ? double(rowMax) : 0.0;
      out.sum_exp[token] = valid ? rowSum : 0.0;
      out.target[token] = !valid ? 0.0 : inRange ? rowTarget : NAN;
      out.logit_sum[token] = valid ? rowLogitSum : 0.0;
    }
  }
}

// ============================== pass 2 ==============================

/// The Mean's divisor as every block sees it (n_items, n_items_value, or the count of valid tokens);
/// NaN-or-≤ 0 means the empty-mean rule. 1 for Sum and None.
template <class T>
__device__ double meanDivisor(const ShardArgs<T>& a, double* scratch) {
  if (a.options.reduction != Reduction::Mean) return 1.0;
  if (a.options.n_items) return double(*a.options.n_items);
  if (a.options.n_items_value > 0.0) return a.options.n_items_value;
  double count = 0.0;
  for (int64_t token = threadIdx.x; token < a.problem.tokens; token += blockDim.x) {
    int64_t label = 0;
    count += validToken(a, token, label) ? 1.0 : 0.0;
  }
  return blockSum(count, scratch);
}

template <class T>
__device__ double tokenScale(const ShardArgs<T>& a, int64_t token, double divisor) {
  if (!(divisor > 0.0)) return 0.0;
  bool none = a.options.reduction == Reduction::None;
  double upstream = a.options.grad_scale ? double(a.options.grad_scale[none ? token : 0]) : 1.0;
  return upstream / divisor;
}

template <class T>
__device__ float dxAt(const ShardArgs<T>& a, const GlobalStatistics& in, int64_t token, int64_t label, int64_t row,
                      double divisor) {
  double scale = tokenScale(a, token, divisor);
  if (label < 0 || label >= a.shard.vocab_total) return scale == 0.0 ? 0.0f : NAN;
  float x = logitAt(a, token, row);
  float z = transform_logit(x, a.params);
  float dz = logit_gradient(z, row + a.shard.vocab_begin == label, float(in.lse[token]), a.params);
  return float(double(dz * transform_derivative(x, a.params)) * scale);
}

/// One block: the loss (fixed-order sum over tokens) and, for None, every token's loss.
template <class T>
__global__ void lossKernel(ShardArgs<T> a, GlobalStatistics in, double* loss) {
  __shared__ double scratch[kThreads];
  double divisor = meanDivisor(a, scratch);
  double total = 0.0;
  for (int64_t token = threadIdx.x; token < a.problem.tokens; token += blockDim.x) {
    int64_t label = 0;
    double value = 0.0;
    if (validToken(a, token, label))
      value = row_loss(in.lse[token], in.target[token], in.logit_sum[token], LossParams<double>{
                           a.options.logit_scale, a.options.softcap, a.options.label_smoothing,
                           a.options.z_loss, a.shard.vocab_total});
    if (a.options.reduction == Reduction::None) loss[token] = value;
    total += value;
  }
  total = blockSum(total, scratch);
  if (threadIdx.x != 0 || a.options.reduction == Reduction::None) return;
  loss[0] = a.options.reduction == Reduction::Sum ? total : divisor > 0.0 ? total / divisor : 0.0;
}

/// Rows of grad_hidden (outer = token, inner = the shard's rows) or of grad_weight / grad_bias (outer = a
/// shard row, inner = tokens): a tile of dx in shared memory, then each thread its columns.
template <class T, bool kByToken>
__global__ void gradientKernel(ShardArgs<T> a, GlobalStatistics in, T* grad, T* gradBias) {
  __shared__ double scratch[kThreads];
  __shared__ float dx[kThreads];
  const double divisor = meanDivisor(a, scratch);
  const int64_t outerCount = kByToken ? a.problem.tokens : a.problem.vocab;
  const int64_t innerCount = kByToken ? a.problem.vocab : a.problem.tokens;
  const int64_t dim = a.problem.hidden_dim;
  for (int64_t outer = blockIdx.x; outer < outerCount; outer += gridDim.x) {
    int64_t outerLabel = 0;
    const bool outerValid = !kByToken || validToken(a, outer, outerLabel);
    float accumulator[8] = {};  // columns threadIdx.x + c·blockDim.x for c < 8, then a second sweep
    for (int64_t column0 = 0; column0 < dim; column0 += 8 * kThreads) {
      for (float& value : accumulator) value = 0.0f;
      double biasSum = 0.0;
      for (int64_t tile = 0; outerValid && tile < innerCount; tile += kThreads) {
        int64_t inner = tile + threadIdx.x;
        float d = 0.0f;
        if (inner < innerCount) {
          int64_t token = kByToken ? outer : inner, row = kByToken ? inner : outer, label = outerLabel;
          if (kByToken || validToken(a, token, label)) d = dxAt(a, in, token, label, row, divisor);
        }
        dx[threadIdx.x] = d;
        biasSum += d;
        __syncthreads();
        for (int64_t j = 0; j < kThreads && tile + j < innerCount; ++j) {
          const T* source = kByToken ? a.weight + (tile + j) * a.problem.weight_stride
                                     : a.hidden + (tile + j) * a.problem.hidden_stride;
          for (int c = 0; c < 8; ++c) {
            int64_t column = column0 + threadIdx.x + int64_t(c) * kThreads;
            if (column < dim) accumulator[c] = fmaf(dx[j], loadf(source[column]), accumulator[c]);
          }
        }
        __syncthreads();
      }
      for (int c = 0; c < 8; ++c) {
        int64_t column = column0 + threadIdx.x + int64_t(c) * kThreads;
        if (grad && column < dim) grad[outer * dim + column] = StorageTraits<T>::store(accumulator[c]);
      }
      if (!kByToken && gradBias && column0 == 0) {
        double total = blockSum(biasSum, scratch);
        if (threadIdx.x == 0) gradBias[outer] = StorageTraits<T>::store(total);
      }
    }
  }
}

template <class T>
ShardArgs<T> argsFor(const Problem& problem, const VocabShard& shard, const Options& options) {
  return {problem, shard, options, LossParams<float>::from(options, shard.vocab_total),
          static_cast<const T*>(problem.hidden), static_cast<const T*>(problem.weight),
          static_cast<const T*>(problem.bias)};
}

template <class Body>
void withStorage(DType dtype, const Body& body) {
  switch (dtype) {
    case DType::Float32: return body(float{});
    case DType::Float16: return body(Half{});
    case DType::BFloat16: return body(BFloat16{});
  }
}

unsigned gridFor(int64_t items) { return unsigned(items < 1 ? 1 : items > 65535 ? 65535 : items); }

}  // namespace

void shard_statistics(const Problem& problem, const VocabShard& shard, const Options& options,
                      const ShardStatistics& statistics, const Context& context) {
  auto stream = static_cast<cudaStream_t>(context.stream);
  withStorage(problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    statisticsKernel<T><<<gridFor(problem.tokens), kThreads, 0, stream>>>(argsFor<T>(problem, shard, options),
                                                                         statistics);
    LMFUSE_CUDA_CHECK(cudaGetLastError());
  });
}

void shard_loss(const Problem& problem, const VocabShard& shard, const Options& options,
                const GlobalStatistics& statistics, const ShardOutputs& outputs, const Context& context) {
  auto stream = static_cast<cudaStream_t>(context.stream);
  withStorage(problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    ShardArgs<T> args = argsFor<T>(problem, shard, options);
    lossKernel<T><<<1, kThreads, 0, stream>>>(args, statistics, outputs.loss);
    LMFUSE_CUDA_CHECK(cudaGetLastError());
    if (outputs.grad_hidden) {
      gradientKernel<T, true><<<gridFor(problem.tokens), kThreads, 0, stream>>>(
          args, statistics, static_cast<T*>(outputs.grad_hidden), nullptr);
      LMFUSE_CUDA_CHECK(cudaGetLastError());
    }
    if (outputs.grad_weight || outputs.grad_bias) {
      gradientKernel<T, false><<<gridFor(problem.vocab), kThreads, 0, stream>>>(
          args, statistics, static_cast<T*>(outputs.grad_weight), static_cast<T*>(outputs.grad_bias));
      LMFUSE_CUDA_CHECK(cudaGetLastError());
    }
  });
}

}  // namespace lmfuse::detail::cuda
