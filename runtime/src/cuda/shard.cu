// CUDA passes of the vocabulary-parallel loss (vocab_parallel.h) at the speed of their matrix products.
//
// Contract: every kernel and product is enqueued on context.stream; nothing is allocated, nothing is
// copied to the host, the stream is never synchronised, so either pass can be captured in a CUDA graph.
// The shard's rows go through in vocabulary slices of all N tokens (shardLayout: as many columns as fit
// kSliceLogitsBytes of logits, or options.workspace_budget's bytes, in multiples of 256), each slice's logits written by one cuBLASLt product
// into the workspace:
//   pass 1  per slice: logits, then one block per row merges the slice's (max, Σ exp, target logit, Σ z),
//           from fp32 partials, into the fp64 statistics (the first slice writes them);
//   pass 2  the loss from the combined statistics alone (one block, fp64); then per slice: logits, dx in
//           place (kernels.h: launchSliceGradient, the low-memory pass's kernel, from the global lse),
//           grad_weight's slice rows = dxᵀ·h and grad_bias's = Σ_rows dx (complete: every token is in the
//           slice), and grad_hidden += dx·W_slice into an fp32 [N, D] accumulator (grad_hidden itself for
//           fp32 storage), converted once at the end.
// So pass 1 costs one product over the shard and pass 2 three, the single-process call's products plus the
// logits recomputed once more. Ignored tokens still go through the products (no compaction here).
// Deterministic: fixed slices, cuBLASLt's cached algorithms, every reduction in a fixed order, no atomics.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <type_traits>
#include <vector>

#include "../error_report.h"
#include "../loss_math.h"
#include "../shard.h"
#include "../storage.h"  // defines: dtype_size
#include "../targets.h"
#include "check.h"
#include "device_state.h"
#include "gemm.h"
#include "kernels.h"
#include "launch_util.cuh"  // defines: rowGrid, withType
#include "plan.h"           // defines: kCublasWorkspaceBytes, Region

namespace lmfuse::detail::cuda {
namespace {

// A slice's logits take at most this much (more only where 256 columns of N tokens need it): the
// products stay large enough to run at full speed (N = 8192 bf16 tokens: 16384 columns), and the
// workspace stays a small part of a shard's weight.
constexpr std::size_t kSliceLogitsBytes = std::size_t(256) << 20;
constexpr int64_t kSliceColumnMultiple = 256;
constexpr int kThreads = 256;

std::size_t roundUp(std::size_t value, std::size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

/// Where everything lives in the workspace, and the slices.
struct ShardLayout {
  Region targets, lse, scalars, report, biasSum, logits, accumulator, blas;
  int64_t sliceColumns = 0;  // every slice but the last
  int64_t ld = 0;            // the logits buffer's leading dimension (elements, 16-byte rows)
  std::size_t bytes = 0;
};

ShardLayout shardLayout(const Problem& problem, const Options& options, bool withGradients) {
  const int64_t n = problem.tokens, d = problem.hidden_dim, v = problem.vocab;
  const std::size_t element = std::size_t(dtype_size(problem.dtype));
  ShardLayout layout;
  const std::size_t budget = options.workspace_budget ? options.workspace_budget : kSliceLogitsBytes;
  int64_t columns = int64_t(budget / (std::size_t(n) * element)) / kSliceColumnMultiple * kSliceColumnMultiple;
  layout.sliceColumns = std::min(std::max(columns, kSliceColumnMultiple), v);
  layout.ld = int64_t(roundUp(std::size_t(layout.sliceColumns), 8));
  std::size_t offset = 0;
  auto take = [&](Region& region, std::size_t bytes) {
    region = Region{offset, bytes};
    offset = roundUp(offset + bytes, 256);
  };
  take(layout.targets, std::size_t(n) * sizeof(int32_t));
  take(layout.scalars, sizeof(Scalars));
  take(layout.report, sizeof(LabelErrorReport));
  take(layout.logits, std::size_t(n) * std::size_t(layout.ld) * element);
  take(layout.blas, kCublasWorkspaceBytes);
  if (withGradients) {
    take(layout.lse, std::size_t(n) * sizeof(float));
    take(layout.biasSum, std::size_t(layout.sliceColumns) * sizeof(float));
    // 16-bit storage sums the slices' grad_hidden products in fp32; fp32 storage sums them in place.
    if (problem.dtype != DType::Float32) take(layout.accumulator, std::size_t(n) * std::size_t(d) * sizeof(float));
  }
  layout.bytes = offset;
  return layout;
}

/// A slice of the shard's rows: [first, first + columns).
struct Slice {
  int64_t first, columns;
};

std::vector<Slice> slicesOf(const Problem& problem, const ShardLayout& layout) {
  std::vector<Slice> slices;
  for (int64_t first = 0; first < problem.vocab; first += layout.sliceColumns)
    slices.push_back({first, std::min(layout.sliceColumns, problem.vocab - first)});
  return slices;
}

// ============================== pass 1 ==============================

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

__device__ __forceinline__ void combine(float& m, float& s, float om, float os) {
  const float mx = fmaxf(m, om);
  if (mx == -INFINITY) return;
  s = s * expf(m - mx) + os * expf(om - mx);
  m = mx;
}

struct SliceStatisticsArgs {
  int64_t rows, columns, ld;
  int64_t columnBegin;  // vocabulary column of the buffer's column 0 (the targets are vocabulary columns)
  const void* bias;     // the slice's first bias element, or null
  const int32_t* targets;
  LossParams<float> loss;
  bool first;  // the first slice writes the statistics; later ones merge into them
};

/// One block per buffer row (grid-stride): the slice's partial statistics in fp32, in a fixed order
/// (per-thread strides, a fixed tree), merged into the fp64 statistics by thread 0.
template <typename T>
__global__ void __launch_bounds__(kThreads) sliceStatisticsKernel(const T* buffer, SliceStatisticsArgs a,
                                                                  ShardStatistics out) {
  __shared__ float maxes[kThreads], sums[kThreads], zs[kThreads];
  const T* bias = static_cast<const T*>(a.bias);
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int32_t target = a.targets[r];
    if (target == kIgnored) {  // no target: every statistic 0 (vocab_parallel.h)
      if (a.first && threadIdx.x == 0) out.max[r] = out.sum_exp[r] = out.target[r] = out.logit_sum[r] = 0.0;
      continue;
    }
    const T* row = buffer + r * a.ld;
    float m = -INFINITY, s = 0.0f, sumZ = 0.0f;
    for (int64_t c = threadIdx.x; c < a.columns; c += blockDim.x) {
      const float z = transform_logit(toFloat(row[c]) + (bias ? toFloat(bias[c]) : 0.0f), a.loss);
      sumZ += z;
      combine(m, s, z, 1.0f);
    }
    maxes[threadIdx.x] = m, sums[threadIdx.x] = s, zs[threadIdx.x] = sumZ;
    __syncthreads();
    for (int width = kThreads / 2; width > 0; width /= 2) {
      if (threadIdx.x < width) {
        combine(maxes[threadIdx.x], sums[threadIdx.x], maxes[threadIdx.x + width], sums[threadIdx.x + width]);
        zs[threadIdx.x] += zs[threadIdx.x + width];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      const int64_t local = int64_t(target) - a.columnBegin;
      const bool hit = target >= 0 && local >= 0 && local < a.columns;
      const double zTarget =
          hit ? double(transform_logit(toFloat(row[local]) + (bias ? toFloat(bias[local]) : 0.0f), a.loss)) : 0.0;
      const double pm = maxes[0], ps = sums[0];
      if (a.first) {
        out.max[r] = pm;
        out.sum_exp[r] = ps;
        out.target[r] = target == kOutOfRange ? NAN : zTarget;  // the loss is NaN on every rank (vocab_parallel.h)
        out.logit_sum[r] = zs[0];
      } else {
        const double m0 = out.max[r], mx = fmax(m0, pm);
        if (mx != -INFINITY) out.sum_exp[r] = out.sum_exp[r] * exp(m0 - mx) + ps * exp(pm - mx);
        out.max[r] = mx;
        out.target[r] += zTarget;
        out.logit_sum[r] += zs[0];
      }
    }
    __syncthreads();  // the shared arrays are read before the next row overwrites them
  }
}

// ============================== pass 2 ==============================

/// Block-wide sum in a fixed order; every thread gets the result.
__device__ double blockSum(double value, double* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) scratch[threadIdx.x] += scratch[threadIdx.x + width];
    __syncthreads();
  }
  const double total = scratch[0];
  __syncthreads();
  return total;
}

/// One block: the loss (fixed-order fp64 sum over tokens) from the combined statistics alone, and for
/// None every token's loss. The Mean's divisor: n_items, n_items_value, or the count of valid rows.
__global__ void __launch_bounds__(kThreads) lossKernel(Problem problem, VocabShard shard, Options options,
                                                       GlobalStatistics in, double* loss) {
  __shared__ double scratch[kThreads];
  const LossParams<double> params{options.logit_scale, options.softcap, options.label_smoothing, options.z_loss,
                                  shard.vocab_total};
  double total = 0.0, count = 0.0;
  for (int64_t token = threadIdx.x; token < problem.tokens; token += blockDim.x) {
    const int64_t position = target_position(options.shift, problem.tokens, token);
    const bool valid =
        position != kNoTarget && load_index(problem.labels, problem.label_type, position) != options.ignore_index;
    const double value = valid ? row_loss(in.lse[token], in.target[token], in.logit_sum[token], params) : 0.0;
    if (options.reduction == Reduction::None) loss[token] = value;
    total += value;
    count += valid ? 1.0 : 0.0;
  }
  total = blockSum(total, scratch);
  count = blockSum(count, scratch);
  if (threadIdx.x != 0 || options.reduction == Reduction::None) return;
  double divisor = options.n_items ? double(*options.n_items) : options.n_items_value > 0.0 ? options.n_items_value : count;
  loss[0] = options.reduction == Reduction::Sum ? total : divisor > 0.0 ? total / divisor : 0.0;
}

__global__ void narrowKernel(const double* in, int64_t count, float* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = float(in[i]);
}

/// The state both passes share: the workspace's regions, the stream, the products.
class ShardPass {
public:
  ShardPass(const Problem& problem, const VocabShard& shard, const Options& options, Workspace workspace,
            const Context& context, bool withGradients)
      : problem_(problem), shard_(shard), options_(options), state_(deviceState()), lock_(state_.mutex),
        layout_(shardLayout(problem, options, withGradients)), base_(static_cast<char*>(workspace.data)),
        stream_(static_cast<cudaStream_t>(context.stream)), type_(cudaType(problem.dtype)),
        element_(std::size_t(dtype_size(problem.dtype))) {
    // Targets and the gradient's scalars over the whole vocabulary: labels are vocabulary rows.
    Problem whole = problem;
    whole.vocab = shard.vocab_total;
    launchPrepare(whole, options, targets(), at<Scalars>(layout_.scalars), at<LabelErrorReport>(layout_.report),
                  stream_);
  }

  void statistics(const ShardStatistics& out) {
    const LossParams<float> loss = LossParams<float>::from(options_, shard_.vocab_total);
    for (const Slice& slice : slicesOf(problem_, layout_)) {
      logits(slice);
      SliceStatisticsArgs args{problem_.tokens, slice.columns, layout_.ld, shard_.vocab_begin + slice.first,
                               biasAt(slice), targets(), loss, slice.first == 0};
      withType(problem_.dtype, [&](auto* typed) {
        using T = std::remove_pointer_t<decltype(typed)>;
        sliceStatisticsKernel<T><<<rowGrid(problem_.tokens), kThreads, 0, stream_>>>(
            static_cast<const T*>(static_cast<const void*>(buffer())), args, out);
      });
      LMFUSE_CUDA_CHECK(cudaGetLastError());
    }
  }

  void loss(const GlobalStatistics& in, const ShardOutputs& out) {
    lossKernel<<<1, kThreads, 0, stream_>>>(problem_, shard_, options_, in, out.loss);
    LMFUSE_CUDA_CHECK(cudaGetLastError());
    if (!out.wants_gradients()) return;
    const int64_t n = problem_.tokens, d = problem_.hidden_dim;
    float* lse = at<float>(layout_.lse);
    narrowKernel<<<rowGrid((n + 255) / 256), 256, 0, stream_>>>(in.lse, n, lse);
    LMFUSE_CUDA_CHECK(cudaGetLastError());
    const bool accumulate = problem_.dtype != DType::Float32;
    void* hiddenSum = accumulate ? static_cast<void*>(at<float>(layout_.accumulator)) : out.grad_hidden;
    RowParams rows;
    rows.vocab = shard_.vocab_total;
    rows.ld = layout_.ld;
    rows.rows = n;
    rows.smoothing = float(options_.label_smoothing), rows.softcap = float(options_.softcap);
    rows.logitScale = float(options_.logit_scale), rows.zLoss = float(options_.z_loss);
    rows.bias = problem_.bias;
    rows.biasBegin = shard_.vocab_begin;
    rows.targets = targets();
    rows.scalars = at<Scalars>(layout_.scalars);
    rows.tokenGradScale = options_.reduction == Reduction::None ? options_.grad_scale : nullptr;
    for (const Slice& slice : slicesOf(problem_, layout_)) {
      logits(slice);
      rows.columnBegin = shard_.vocab_begin + slice.first;
      rows.columns = slice.columns;
      launchSliceGradient(problem_.dtype, buffer(), rows, lse, stream_);
      if (out.grad_weight) {
        GemmShape shape{type_, type_, false, true, d, slice.columns, n, problem_.hidden_stride, layout_.ld, d};
        gemm(state_.blas, shape, 1.0f, problem_.hidden, buffer(), 0.0f,
             static_cast<char*>(out.grad_weight) + std::size_t(slice.first) * std::size_t(d) * element_, blas(),
             layout_.blas.bytes, stream_);
      }
      if (out.grad_bias) {
        float* sum = at<float>(layout_.biasSum);
        launchColumnSum(problem_.dtype, buffer(), n, slice.columns, layout_.ld, sum, false, stream_);
        launchConvert(problem_.dtype, sum, 1, slice.columns,
                      static_cast<char*>(out.grad_bias) + std::size_t(slice.first) * element_, slice.columns, nullptr,
                      stream_);
      }
      if (out.grad_hidden) {
        GemmShape shape{type_, CUDA_R_32F, false, false, d, n, slice.columns, problem_.weight_stride, layout_.ld, d};
        gemm(state_.blas, shape, 1.0f, weightRow(slice.first), buffer(), slice.first == 0 ? 0.0f : 1.0f, hiddenSum,
             blas(), layout_.blas.bytes, stream_);
      }
    }
    if (out.grad_hidden && accumulate)
      launchConvert(problem_.dtype, at<float>(layout_.accumulator), n, d, out.grad_hidden, d, nullptr, stream_);
  }

private:
  template <typename T>
  T* at(const Region& region) const {
    return reinterpret_cast<T*>(base_ + region.offset);
  }
  int32_t* targets() const { return at<int32_t>(layout_.targets); }
  char* buffer() const { return at<char>(layout_.logits); }
  char* blas() const { return at<char>(layout_.blas); }
  const char* weightRow(int64_t row) const {
    return static_cast<const char*>(problem_.weight) + std::size_t(row) * std::size_t(problem_.weight_stride) * element_;
  }
  const void* biasAt(const Slice& slice) const {
    return problem_.bias ? static_cast<const char*>(problem_.bias) + std::size_t(slice.first) * element_ : nullptr;
  }

  // The slice's logits [N, columns] = h · W_sliceᵀ into the buffer.
  void logits(const Slice& slice) {
    GemmShape shape{type_, type_, true, false, slice.columns, problem_.tokens, problem_.hidden_dim,
                    problem_.weight_stride, problem_.hidden_stride, layout_.ld};
    gemm(state_.blas, shape, 1.0f, weightRow(slice.first), problem_.hidden, 0.0f, buffer(), blas(),
         layout_.blas.bytes, stream_);
  }

  const Problem& problem_;
  const VocabShard& shard_;
  const Options& options_;
  DeviceState& state_;
  std::lock_guard<std::mutex> lock_;  // one host thread's products and kernels at a time, as backend.cpp
  ShardLayout layout_;
  char* base_;
  cudaStream_t stream_;
  cudaDataType_t type_;
  std::size_t element_;  // bytes of one stored element
};

}  // namespace

std::size_t shard_workspace_size(const Problem& problem, const Options& options, bool with_gradients) {
  return shardLayout(problem, options, with_gradients).bytes;
}

void shard_statistics(const Problem& problem, const VocabShard& shard, const Options& options,
                      const ShardStatistics& statistics, Workspace workspace, const Context& context) {
  ShardPass(problem, shard, options, workspace, context, false).statistics(statistics);
}

void shard_loss(const Problem& problem, const VocabShard& shard, const Options& options,
                const GlobalStatistics& statistics, const ShardOutputs& outputs, Workspace workspace,
                const Context& context) {
  ShardPass(problem, shard, options, workspace, context, outputs.wants_gradients()).loss(statistics, outputs);
}

}  // namespace lmfuse::detail::cuda
