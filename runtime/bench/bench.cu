// lmfuse-bench: times the fused linear + cross-entropy (forward + backward, bf16) at the head shapes of
// Llama-3-8B, Gemma-2-2B, a long batch and Qwen-2.5-7B (index 3, not in the default list), beside the three plain cuBLAS GEMMs the unfused computation
// needs (logits = H·Wᵀ, grad_H = dZ·W, grad_W = dZᵀ·H) measured in the same run. Prints one table:
// median milliseconds over repeats (CUDA events, after warm-up), TFLOP/s counted as 6·N·D·V, the
// workspace (the only device memory the call uses beyond inputs and returned gradients) and the same less
// the size of an fp32 [V, D] grad_weight accumulator (the default budget is that plus 1.5 GiB, whether or
// not the plan holds one), the time against the GEMMs of the labelled tokens alone, the
// first call's wall time (graph recording included), and the loss error against an fp64 CPU reference on a subset
// of tokens. Inputs are random (never zeros). Environment: LMFUSE_BENCH_SHAPES (comma list of indices),
// LMFUSE_BENCH_CHUNKS (extra rows with these chunk_tokens), LMFUSE_BENCH_BUDGETS (extra rows with these
// workspace_budget values, in GiB), LMFUSE_BENCH_REPEATS, LMFUSE_BENCH_IGNORED
// (comma list of ignored-label fractions, default 0), LMFUSE_BENCH_PARTS (also time forward only and
// forward + grad_hidden, to place the time; their TFLOP/s count 2 and 4 · N·D·V). The "fp32 grad_weight"
// rows are mixed precision: bf16 hidden and weight, grad_weight in fp32 (ParamGradKind::Float32).
// LMFUSE_BENCH_MODES (comma list: default, no compaction, low-memory, low-memory uncompacted, fp32
// grad_weight) keeps only those rows.
// The "low-memory" rows run the lean plan (grad_weight given and dense: its bytes are the scratch space).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.cuh"  // defines: BENCH_CHECK, fillKernel, uniform, mix, timeMedian
#include "lmfuse/flce.h"

namespace {

using namespace lmfuse_bench;

__global__ void labelKernel(int64_t* labels, int64_t count, int64_t vocab, float ignored, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    bool skip = (uniform(seed ^ 0x5555, i) * 0.5f + 0.5f) < ignored;
    labels[i] = skip ? -100 : int64_t(mix(seed + i) % uint64_t(vocab));
  }
}

struct Shape {
  const char* name;
  int64_t n, d, v;
};
const Shape kShapes[] = {{"Llama-3-8B", 8192, 4096, 128256},
                         {"Gemma-2-2B", 8192, 2304, 256000},
                         {"Llama-3-8B N=32768", 32768, 4096, 128256},
                         {"Qwen-2.5-7B", 16384, 3584, 152064}};

std::vector<double> listFromEnv(const char* name, std::vector<double> fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  std::vector<double> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) values.push_back(std::stod(item));
  return values;
}

double bf16ToDouble(__nv_bfloat16 value) { return double(__bfloat162float(value)); }

// fp64 loss of the given tokens (plain cross-entropy, no options), from host copies of H and W.
std::vector<double> referenceLoss(const std::vector<__nv_bfloat16>& h, const std::vector<__nv_bfloat16>& w,
                                  const std::vector<int64_t>& labels, const std::vector<int64_t>& tokens, int64_t d,
                                  int64_t v) {
  std::vector<double> loss(tokens.size());
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    workers.emplace_back([&, t] {
      const int64_t i = tokens[t];
      std::vector<double> hi(d);
      for (int64_t k = 0; k < d; ++k) hi[k] = bf16ToDouble(h[i * d + k]);
      std::vector<double> z(v);
      double m = -INFINITY;
      for (int64_t j = 0; j < v; ++j) {
        double x = 0;
        const __nv_bfloat16* wj = &w[j * d];
        for (int64_t k = 0; k < d; ++k) x += hi[k] * bf16ToDouble(wj[k]);
        z[j] = x;
        m = std::max(m, x);
      }
      double s = 0;
      for (double x : z) s += std::exp(x - m);
      loss[t] = m + std::log(s) - z[labels[i]];
    });
  }
  for (auto& worker : workers) worker.join();
  return loss;
}

struct Row {
  std::string shape, mode;
  double ignored;
  int64_t chunk;
  float ms, gemmMs;
  double tflops, workspaceGiB, beyondAccumulatorGiB, lossError, measuredExtraGiB;
  double labelled;  // fraction of tokens with a label
  double firstCallMs;  // host wall time of the first call, synchronised (records the graph when compacting)
};

}  // namespace

int run() {
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int repeats = std::getenv("LMFUSE_BENCH_REPEATS") ? std::atoi(std::getenv("LMFUSE_BENCH_REPEATS")) : 10;
  std::vector<double> shapeIndices = listFromEnv("LMFUSE_BENCH_SHAPES", {0, 1, 2});
  std::vector<double> chunks = listFromEnv("LMFUSE_BENCH_CHUNKS", {});
  std::vector<double> budgets = listFromEnv("LMFUSE_BENCH_BUDGETS", {});
  std::vector<double> ignoredFractions = listFromEnv("LMFUSE_BENCH_IGNORED", {0.0});
  std::printf("lmfuse-bench on %s (%d SMs), bf16, forward+backward, median of %d\n", prop.name,
              prop.multiProcessorCount, repeats);
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t blas;
  BENCH_CHECK(cublasCreate(&blas));
  BENCH_CHECK(cublasSetStream(blas, stream));
  std::vector<Row> rows;

  for (double index : shapeIndices) {
    const Shape shape = kShapes[int(index)];
    const int64_t n = shape.n, d = shape.d, v = shape.v;
    const double flops = 6.0 * double(n) * double(d) * double(v);
    __nv_bfloat16 *h, *w, *gh, *gw;
    int64_t* labels;
    float* loss;
    BENCH_CHECK(cudaMalloc(&h, n * d * 2));
    BENCH_CHECK(cudaMalloc(&w, v * d * 2));
    BENCH_CHECK(cudaMalloc(&gh, n * d * 2));
    BENCH_CHECK(cudaMalloc(&gw, v * d * 2));
    BENCH_CHECK(cudaMalloc(&labels, n * 8));
    BENCH_CHECK(cudaMalloc(&loss, n * 4));
    fillKernel<<<4096, 256, 0, stream>>>(h, n * d, 1.0f, 1);
    fillKernel<<<4096, 256, 0, stream>>>(w, v * d, 2.0f / std::sqrt(float(d)), 2);
    BENCH_CHECK(cudaGetLastError());

    // The three plain cuBLAS GEMMs at full size (bf16 in and out, fp32 accumulation).
    float gemmMs;
    {
      __nv_bfloat16* z;
      BENCH_CHECK(cudaMalloc(&z, n * v * 2));
      fillKernel<<<4096, 256, 0, stream>>>(z, n * v, 1e-3f, 3);
      const float one = 1.0f, zero = 0.0f;
      gemmMs = timeMedian(
          [&] {
            // logits[N, V] = H·Wᵀ ; grad_H[N, D] = Z·W ; grad_W[V, D] = Zᵀ·H (column-major views)
            BENCH_CHECK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, int(v), int(n), int(d), &one, w, CUDA_R_16BF,
                                     int(d), h, CUDA_R_16BF, int(d), &zero, z, CUDA_R_16BF, int(v), CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
            BENCH_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, int(d), int(n), int(v), &one, w, CUDA_R_16BF,
                                     int(d), z, CUDA_R_16BF, int(v), &zero, gh, CUDA_R_16BF, int(d), CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
            BENCH_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, int(d), int(v), int(n), &one, h, CUDA_R_16BF,
                                     int(d), z, CUDA_R_16BF, int(v), &zero, gw, CUDA_R_16BF, int(d), CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
          },
          repeats, stream);
      BENCH_CHECK(cudaFree(z));
    }

    std::vector<__nv_bfloat16> hostH(n * d), hostW(v * d);
    BENCH_CHECK(cudaMemcpy(hostH.data(), h, n * d * 2, cudaMemcpyDeviceToHost));
    BENCH_CHECK(cudaMemcpy(hostW.data(), w, v * d * 2, cudaMemcpyDeviceToHost));

    for (double ignored : ignoredFractions) {
      labelKernel<<<256, 256, 0, stream>>>(labels, n, v, float(ignored), 4);
      BENCH_CHECK(cudaGetLastError());
      std::vector<int64_t> hostLabels(n);
      BENCH_CHECK(cudaMemcpy(hostLabels.data(), labels, n * 8, cudaMemcpyDeviceToHost));
      // Loss error subset: 16 valid tokens spread over the batch.
      std::vector<int64_t> subset;
      for (int64_t i = 0; i < n && subset.size() < 16; i += n / 64)
        if (hostLabels[i] != -100) subset.push_back(i);
      std::vector<double> want = referenceLoss(hostH, hostW, hostLabels, subset, d, v);
      const double labelled =
          double(std::count_if(hostLabels.begin(), hostLabels.end(), [](int64_t l) { return l != -100; })) / double(n);

      // parts: 0 = forward+backward, 1 = forward only, 2 = loss + grad_hidden (no grad_weight GEMM).
      struct Variant {
        const char* mode;
        lmfuse::MemoryMode memory;
        int64_t chunk;
        int parts;
        bool compact = true;
        bool fp32Params = false;
        double budgetGiB = 0.0;  // Options::workspace_budget in GiB; 0 for the default
      };
      std::vector<Variant> variants = {{"default", lmfuse::MemoryMode::Auto, 0, 0},
                                       {"no compaction", lmfuse::MemoryMode::Auto, 0, 0, false},
                                       {"low-memory", lmfuse::MemoryMode::LowMemory, 0, 0},
                                       {"low-memory uncompacted", lmfuse::MemoryMode::LowMemory, 0, 0, false},
                                       {"fp32 grad_weight", lmfuse::MemoryMode::Auto, 0, 0, true, true}};
      if (const char* modes = std::getenv("LMFUSE_BENCH_MODES")) {  // e.g. "default,low-memory"
        const std::string wanted = std::string(",") + modes + ",";
        variants.erase(std::remove_if(variants.begin(), variants.end(),
                                      [&](const Variant& v) {
                                        return wanted.find(std::string(",") + v.mode + ",") == std::string::npos;
                                      }),
                       variants.end());
      }
      for (double c : chunks) variants.push_back({"chunk", lmfuse::MemoryMode::Accumulate, int64_t(c), 0});
      for (double b : budgets) variants.push_back({"budget", lmfuse::MemoryMode::Auto, 0, 0, true, false, b});

      if (std::getenv("LMFUSE_BENCH_PARTS")) {
        variants.push_back({"forward only", lmfuse::MemoryMode::Auto, 0, 1});
        variants.push_back({"no grad_weight", lmfuse::MemoryMode::Auto, 0, 2});
      }
      for (const Variant& variant : variants) {
        lmfuse::Problem problem;
        problem.tokens = n;
        problem.hidden_dim = d;
        problem.vocab = v;
        problem.dtype = lmfuse::DType::BFloat16;
        problem.hidden = h;
        problem.weight = w;
        problem.labels = labels;
        lmfuse::Options options;
        options.memory = variant.memory;
        options.chunk_tokens = variant.chunk;
        options.workspace_budget = std::size_t(variant.budgetGiB * double(std::size_t(1) << 30));
        options.compact = variant.compact;
        lmfuse::Outputs outputs;
        outputs.loss = loss;
        if (variant.parts != 1) outputs.grad_hidden = gh;
        float* gw32 = nullptr;  // mixed precision: the fp32 gradient, the caller's memory
        if (variant.fp32Params) {
          BENCH_CHECK(cudaMalloc(&gw32, v * d * 4));
          outputs.param_grads = lmfuse::ParamGradKind::Float32;
        }
        if (variant.parts == 0) outputs.grad_weight = gw32 ? static_cast<void*>(gw32) : gw;
        lmfuse::Context context;
        context.device = lmfuse::DeviceKind::Cuda;
        context.stream = stream;
        std::size_t freeBefore = 0, freeAfter = 0, total = 0;
        BENCH_CHECK(cudaDeviceSynchronize());
        BENCH_CHECK(cudaMemGetInfo(&freeBefore, &total));
        const std::size_t bytes = lmfuse::workspace_size(problem, options, outputs, context);  // for these outputs
        void* workspace;
        BENCH_CHECK(cudaMalloc(&workspace, bytes));
        const auto firstStart = std::chrono::steady_clock::now();
        lmfuse::linear_cross_entropy(problem, options, outputs, {workspace, bytes}, context);
        BENCH_CHECK(cudaStreamSynchronize(stream));
        const double firstCallMs =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - firstStart).count();
        float ms = timeMedian([&] { lmfuse::linear_cross_entropy(problem, options, outputs, {workspace, bytes}, context); },
                              repeats, stream);
        BENCH_CHECK(cudaDeviceSynchronize());
        BENCH_CHECK(cudaMemGetInfo(&freeAfter, &total));
        lmfuse::check({workspace, bytes}, context);

        // Per-token losses of the same call (forward only, Reduction::None) for the error column, in a
        // workspace sized for that call (the timed call's was sized for its own outputs).
        lmfuse::Options perToken = options;
        perToken.reduction = lmfuse::Reduction::None;
        lmfuse::Outputs forward;
        forward.loss = loss;
        const std::size_t forwardBytes = lmfuse::workspace_size(problem, perToken, forward, context);
        if (forwardBytes > bytes) {
          BENCH_CHECK(cudaFree(workspace));
          BENCH_CHECK(cudaMalloc(&workspace, forwardBytes));
        }
        lmfuse::linear_cross_entropy(problem, perToken, forward, {workspace, std::max(bytes, forwardBytes)}, context);
        std::vector<float> got(n);
        BENCH_CHECK(cudaMemcpyAsync(got.data(), loss, n * 4, cudaMemcpyDeviceToHost, stream));
        BENCH_CHECK(cudaStreamSynchronize(stream));
        double diff = 0, norm = 0;
        for (std::size_t t = 0; t < subset.size(); ++t) {
          diff += (got[subset[t]] - want[t]) * (got[subset[t]] - want[t]);
          norm += want[t] * want[t];
        }
        BENCH_CHECK(cudaFree(workspace));
        if (gw32) BENCH_CHECK(cudaFree(gw32));

        const bool lowMemory = variant.memory == lmfuse::MemoryMode::LowMemory || variant.parts == 1 ||
                               variant.parts == 2 || variant.fp32Params;
        const double accumulator = lowMemory ? 0.0 : double(v) * double(d) * 4.0;
        const double gib = double(1u << 30);
        Row row;
        row.shape = shape.name;
        if (variant.chunk) row.mode = "chunk " + std::to_string(variant.chunk);
        else if (variant.budgetGiB > 0) {
          char label[32];
          std::snprintf(label, sizeof label, "budget %.2f GiB", variant.budgetGiB);
          row.mode = label;
        }
        else row.mode = variant.mode;
        const double partFlops = variant.parts == 1 ? flops / 3 : variant.parts == 2 ? flops * 2 / 3 : flops;
        row.ignored = ignored;
        row.chunk = variant.chunk;
        row.ms = ms;
        row.gemmMs = gemmMs;
        row.tflops = partFlops / (ms * 1e-3) / 1e12;
        row.workspaceGiB = double(bytes) / gib;
        row.beyondAccumulatorGiB = (double(bytes) - accumulator) / gib;
        row.measuredExtraGiB = (double(freeBefore) - double(freeAfter)) / gib;
        row.lossError = std::sqrt(diff / norm);
        row.labelled = labelled;
        row.firstCallMs = firstCallMs;
        rows.push_back(row);
        std::printf("  %-20s %-12s ignored %3.0f%%: %8.2f ms (GEMMs %8.2f ms)\n", row.shape.c_str(), row.mode.c_str(),
                    100 * ignored, ms, gemmMs);
        std::fflush(stdout);
      }
    }
    for (void* p : {(void*)h, (void*)w, (void*)gh, (void*)gw, (void*)labels, (void*)loss}) BENCH_CHECK(cudaFree(p));
  }

  // "vs labelled GEMMs": ms / (labelled fraction · the three full GEMMs), the time the GEMMs of the labelled
  // tokens alone would take (issue target: ≤ 1.1 for every fraction).
  std::printf("\n| shape | mode | ignored | ms | TFLOP/s | 3 GEMMs ms | ratio | vs labelled GEMMs | first call ms "
              "| workspace GiB | workspace − fp32 [V, D] GiB | measured extra GiB | loss rel err |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %.0f%% | %.2f | %.0f | %.2f | %.3f | %.3f | %.1f | %.4f | %.4f | %.4f | %.1e |\n",
                r.shape.c_str(), r.mode.c_str(), 100 * r.ignored, r.ms, r.tflops, r.gemmMs, r.ms / r.gemmMs,
                r.ms / (r.labelled * r.gemmMs), r.firstCallMs, r.workspaceGiB, r.beyondAccumulatorGiB,
                r.measuredExtraGiB, r.lossError);
  return 0;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {  // lmfuse::Error names the option at fault (a budget too small, ...)
    std::fprintf(stderr, "lmfuse-bench: %s\n", e.what());
    return 1;
  }
}
