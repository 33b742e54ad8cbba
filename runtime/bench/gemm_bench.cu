// lmfuse-gemm-bench: the logits product (C[tokens, V] = H·Wᵀ, bf16, fp32 accumulation) at LLM head shapes
// and at the lean plan's slice widths, through the two products the backend can run: cuBLASLt as the
// backend calls it (gemm.h, 32 MiB workspace) and lmfuse's Hopper tile product (tile_gemm.h), timed in the
// same process on the same inputs. Prints one table: median ms of each over repeats (CUDA events, after
// warm-up, random inputs), TFLOP/s (2·M·N·K), the ratio tile / cuBLASLt, and the largest difference
// between the two outputs relative to the largest cuBLASLt value. A second table times the lean plan's
// slice step, dx of a vocabulary slice from known lse: the tile product then the slice kernel (unfused),
// against the tile product writing dx from its epilogue (fused), beside the bare product and cuBLASLt's
// product then the slice kernel (what the backend runs where the tile product would not fill the device),
// down to the narrowest slices the lean plan makes. A third table times the full-vocabulary step of the
// default and lean passes, the product and then the row kernel (loss, lse, dx in place): with the row
// kernel's own first pass over the logits, against the product's statistics epilogue (tile_gemm.h) and the
// row kernel reading its partials, beside each part alone and the largest lse difference between the two.
// A fourth times the numerators schedule's step at the same shapes (numerators.h): the target logits, the
// product storing the numerators with their statistics, the rows kernel, and the two row scalings (c ⊙ h,
// and grad_hidden in place), against the statistics step of the third table, with the largest lse
// difference between the two.
// A fifth (printed first) times grad_weight's product dxᵀ·h at the shapes the default pass runs it
// (all tokens, or one chunk of them), cuBLASLt as the backend calls it against the tile product's weight
// product (tile_gemm.h: tileGemmWeight), into each sink: bf16, fp32, fp32 += (cuBLASLt's beta 1, the copy
// engine's reduction), and the last chunk's fp32 accumulator plus product to bf16 (cuBLASLt then the
// conversion kernel, against the fused epilogue), with the largest difference of each bf16 pair.
// Environment: LMFUSE_GEMM_BENCH_REPEATS; LMFUSE_GEMM_BENCH_ONLY=weight prints the fifth table alone,
// LMFUSE_GEMM_BENCH_ONLY=logits the first, third and fourth (the full-vocabulary products and steps).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_common.cuh"  // defines: BENCH_CHECK, fillKernel, timeMedian
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/numerators.h"
#include "cuda/tile_gemm.h"

namespace {

using namespace lmfuse_bench;

// max |x - y| over the [rows, cols] matrices (ld) into out[0] (as an int of the float's bits: both ≥ 0),
// max |y| into out[1].
__global__ void compareKernel(const __nv_bfloat16* x, const __nv_bfloat16* y, int64_t rows, int64_t cols, int64_t ld,
                              unsigned* out) {
  float diff = 0, scale = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * cols; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t at = (i / cols) * ld + i % cols;
    const float a = __bfloat162float(x[at]), b = __bfloat162float(y[at]);
    diff = fmaxf(diff, (a == a && b == b) ? fabsf(a - b) : INFINITY);
    scale = fmaxf(scale, fabsf(b));
  }
  atomicMax(out, __float_as_uint(diff));
  atomicMax(out + 1, __float_as_uint(scale));
}

// max |x − y| / max |y| over the [rows, cols] matrices (ld); `scratch` holds two unsigned ints.
float relativeDifference(const __nv_bfloat16* x, const __nv_bfloat16* y, int64_t rows, int64_t cols, int64_t ld,
                         unsigned* scratch, cudaStream_t stream) {
  BENCH_CHECK(cudaMemsetAsync(scratch, 0, 8, stream));
  compareKernel<<<1024, 256, 0, stream>>>(x, y, rows, cols, ld, scratch);
  unsigned bits[2];
  BENCH_CHECK(cudaMemcpyAsync(bits, scratch, 8, cudaMemcpyDeviceToHost, stream));
  BENCH_CHECK(cudaStreamSynchronize(stream));
  float diff, scale;
  std::memcpy(&diff, &bits[0], 4);
  std::memcpy(&scale, &bits[1], 4);
  return diff / scale;
}

struct Shape {
  const char* name;
  int64_t m, n, k;  // tokens, vocabulary columns, hidden
};

namespace backend = lmfuse::detail::cuda;

// The row parameters of an m × n logits buffer (leading dimension ld) in which every token is labelled (label
// i·7919 mod n), mean reduction, with the device arrays they point to.
struct LabelledRows {
  backend::RowParams params;
  LabelledRows(int64_t m, int64_t n, int64_t ld) {
    int32_t* targets;
    backend::Scalars* scalars;
    BENCH_CHECK(cudaMalloc(&targets, std::size_t(m) * 4));
    BENCH_CHECK(cudaMalloc(&scalars, sizeof(backend::Scalars)));
    std::vector<int32_t> hostTargets(m);
    for (int64_t i = 0; i < m; ++i) hostTargets[i] = int32_t((i * 7919) % n);
    const backend::Scalars hostScalars{1.0f / float(m), 1.0f / float(m), m, m};
    BENCH_CHECK(cudaMemcpy(targets, hostTargets.data(), hostTargets.size() * 4, cudaMemcpyHostToDevice));
    BENCH_CHECK(cudaMemcpy(scalars, &hostScalars, sizeof hostScalars, cudaMemcpyHostToDevice));
    params.vocab = n;
    params.columns = n;
    params.ld = ld;
    params.rows = m;
    params.targets = targets;
    params.scalars = scalars;
  }
  LabelledRows(const LabelledRows&) = delete;
  LabelledRows& operator=(const LabelledRows&) = delete;
  ~LabelledRows() {
    cudaFree(const_cast<int32_t*>(params.targets));
    cudaFree(const_cast<backend::Scalars*>(params.scalars));
  }
};

}  // namespace

struct WeightShape {
  const char* name;
  int64_t v, d, tokens;
};

// The weight-product table (see the top of this file).
void weightTable(cublasLtHandle_t handle, void* workspace, std::size_t workspaceBytes, unsigned* compare, int repeats,
                 cudaStream_t stream) {
  const WeightShape shapes[] = {{"Llama-3-8B, all 8192 tokens", 128256, 4096, 8192},
                                {"Llama-3-8B N=32768, chunk of 8192", 128256, 4096, 8192},
                                {"Qwen-2.5-7B, chunk of 4096", 152064, 3584, 4096},
                                {"Gemma-2-2B, all 8192 tokens", 256000, 2304, 8192},
                                {"Gemma-2-2B, chunk of 4096", 256000, 2304, 4096}};
  std::printf("| grad_weight product (V, D, tokens) | bf16: cuBLASLt / tile ms | fp32: cuBLASLt / tile ms | "
              "fp32 +=: cuBLASLt / tile ms | last chunk to bf16: cuBLASLt + convert / tile ms | tile / cuBLASLt: bf16, "
              "fp32, +=, last | max diff / max value: bf16, last |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const WeightShape& s : shapes) {
    __nv_bfloat16 *dx, *h, *out1, *out2;
    float *acc1, *acc2;
    const std::size_t outCount = std::size_t(s.v * s.d);
    BENCH_CHECK(cudaMalloc(&dx, std::size_t(s.tokens * s.v) * 2));
    BENCH_CHECK(cudaMalloc(&h, std::size_t(s.tokens * s.d) * 2));
    BENCH_CHECK(cudaMalloc(&out1, outCount * 2));
    BENCH_CHECK(cudaMalloc(&out2, outCount * 2));
    BENCH_CHECK(cudaMalloc(&acc1, outCount * 4));
    BENCH_CHECK(cudaMalloc(&acc2, outCount * 4));
    fillKernel<<<1024, 256, 0, stream>>>(dx, s.tokens * s.v, 1e-3f, 3);
    fillKernel<<<1024, 256, 0, stream>>>(h, s.tokens * s.d, 1.0f, 4);
    BENCH_CHECK(cudaGetLastError());
    // The backend's weightGemm in cuBLAS's column-major terms: C[D, V] = H(as stored)·dx(as stored)ᵀ.
    auto blasShape = [&](cudaDataType_t out) {
      return backend::GemmShape{CUDA_R_16BF, out, false, true, s.d, s.v, s.tokens, s.d, s.v, s.d};
    };
    const backend::TileGemmShape tile{s.v, s.d, s.tokens, s.v, s.d, s.d};
    const backend::TileAddend addend{acc2, s.v, s.d, s.d};
    auto blas = [&](cudaDataType_t type, void* out, float beta) {
      backend::gemm(handle, blasShape(type), 1.0f, h, dx, beta, out, workspace, workspaceBytes, stream);
    };
    auto tileInto = [&](backend::TileSink sink, void* out) {
      backend::tileGemmWeight(tile, dx, h, out, sink, sink == backend::TileSink::Bf16FromFloat ? &addend : nullptr,
                              stream);
    };
    // The same accumulator under both last-chunk paths, compared before the timing changes it.
    blas(CUDA_R_32F, acc1, 0.0f);
    BENCH_CHECK(cudaMemcpyAsync(acc2, acc1, outCount * 4, cudaMemcpyDeviceToDevice, stream));
    blas(CUDA_R_32F, acc1, 1.0f);
    backend::launchConvert(lmfuse::DType::BFloat16, acc1, s.v, s.d, out1, s.d, nullptr, stream);
    tileInto(backend::TileSink::Bf16FromFloat, out2);
    const float lastDifference = relativeDifference(out2, out1, s.v, s.d, s.d, compare, stream);
    blas(CUDA_R_16BF, out1, 0.0f);
    tileInto(backend::TileSink::Bf16, out2);
    const float bf16Difference = relativeDifference(out2, out1, s.v, s.d, s.d, compare, stream);
    float ms[8];
    ms[0] = timeMedian([&] { blas(CUDA_R_16BF, out1, 0.0f); }, repeats, stream, 3);
    ms[1] = timeMedian([&] { tileInto(backend::TileSink::Bf16, out2); }, repeats, stream, 3);
    ms[2] = timeMedian([&] { blas(CUDA_R_32F, acc1, 0.0f); }, repeats, stream, 3);
    ms[3] = timeMedian([&] { tileInto(backend::TileSink::Float, acc1); }, repeats, stream, 3);
    ms[4] = timeMedian([&] { blas(CUDA_R_32F, acc1, 1.0f); }, repeats, stream, 3);
    ms[5] = timeMedian([&] { tileInto(backend::TileSink::FloatAdd, acc1); }, repeats, stream, 3);
    ms[6] = timeMedian(
        [&] {
          blas(CUDA_R_32F, acc1, 1.0f);
          backend::launchConvert(lmfuse::DType::BFloat16, acc1, s.v, s.d, out1, s.d, nullptr, stream);
        },
        repeats, stream, 3);
    ms[7] = timeMedian([&] { tileInto(backend::TileSink::Bf16FromFloat, out2); }, repeats, stream, 3);
    std::printf("| %s (%lld, %lld, %lld) | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | %.3f, %.3f, %.3f, "
                "%.3f | %.2e, %.2e |\n",
                s.name, (long long)s.v, (long long)s.d, (long long)s.tokens, ms[0], ms[1], ms[2], ms[3], ms[4], ms[5],
                ms[6], ms[7], ms[1] / ms[0], ms[3] / ms[2], ms[5] / ms[4], ms[7] / ms[6], bf16Difference, lastDifference);
    std::fflush(stdout);
    for (void* p : {(void*)dx, (void*)h, (void*)out1, (void*)out2, (void*)acc1, (void*)acc2}) cudaFree(p);
  }
  std::printf("\n");
}

int main() {
  int device = 0;
  BENCH_CHECK(cudaGetDevice(&device));
  if (!backend::tileGemmAvailable(device)) {
    std::printf("lmfuse-gemm-bench: this device or build has no tile product (needs compute capability 9.0)\n");
    return 1;
  }
  const char* repeatsText = std::getenv("LMFUSE_GEMM_BENCH_REPEATS");
  const int repeats = repeatsText ? std::max(1, std::atoi(repeatsText)) : 10;
  const Shape shapes[] = {{"Llama-3-8B logits", 8192, 128256, 4096},
                          {"Gemma-2-2B logits", 8192, 256000, 2304},
                          {"Qwen-2.5-7B logits", 16384, 152064, 3584},
                          {"Llama-3-8B, 4096 tokens", 4096, 128256, 4096},
                          {"Llama-3 lean slice 4608", 8192, 4608, 4096},
                          {"Llama-3 lean slice 1024", 8192, 1024, 4096}};
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasLtHandle_t handle;
  BENCH_CHECK(cublasLtCreate(&handle));
  void* workspace = nullptr;
  const std::size_t workspaceBytes = std::size_t(32) << 20;
  BENCH_CHECK(cudaMalloc(&workspace, workspaceBytes));
  unsigned* compare = nullptr;
  BENCH_CHECK(cudaMalloc(&compare, 8));
  const char* only = std::getenv("LMFUSE_GEMM_BENCH_ONLY");
  const bool logitsOnly = only && std::string(only) == "logits";
  if (!logitsOnly) weightTable(handle, workspace, workspaceBytes, compare, repeats, stream);
  if (only && std::string(only) == "weight") return 0;
  std::printf("| product (M tokens, N columns, K) | cuBLASLt ms | tile ms | cuBLASLt TFLOP/s | tile TFLOP/s | tile / cuBLASLt | max diff / max value |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const Shape& s : shapes) {
    const int64_t ldc = (s.n + 7) / 8 * 8;
    __nv_bfloat16 *h, *w, *c1, *c2;
    BENCH_CHECK(cudaMalloc(&h, std::size_t(s.m * s.k) * 2));
    BENCH_CHECK(cudaMalloc(&w, std::size_t(s.n * s.k) * 2));
    BENCH_CHECK(cudaMalloc(&c1, std::size_t(s.m * ldc) * 2));
    BENCH_CHECK(cudaMalloc(&c2, std::size_t(s.m * ldc) * 2));
    fillKernel<<<1024, 256, 0, stream>>>(h, s.m * s.k, 1.0f, 1);
    fillKernel<<<1024, 256, 0, stream>>>(w, s.n * s.k, 0.05f, 2);
    BENCH_CHECK(cudaGetLastError());
    // The backend's forward product in cuBLAS's column-major terms: C[V, tokens] = Wᵀ(as stored)·H.
    backend::GemmShape blas{CUDA_R_16BF, CUDA_R_16BF, true, false, s.n, s.m, s.k, s.k, s.k, ldc};
    const float blasMs = timeMedian([&] { backend::gemm(handle, blas, 1.0f, w, h, 0.0f, c1, workspace, workspaceBytes, stream); },
                                  repeats, stream, 3);
    backend::TileGemmShape tile{s.m, s.n, s.k, s.k, s.k, ldc};
    const float tileMs = timeMedian([&] { backend::tileGemm(tile, h, w, c2, stream); }, repeats, stream, 3);
    const float difference = relativeDifference(c2, c1, s.m, s.n, ldc, compare, stream);
    const double flop = 2.0 * double(s.m) * double(s.n) * double(s.k);
    std::printf("| %s (%lld, %lld, %lld) | %.3f | %.3f | %.0f | %.0f | %.3f | %.2e |\n", s.name, (long long)s.m,
                (long long)s.n, (long long)s.k, blasMs, tileMs, flop / blasMs * 1e-9, flop / tileMs * 1e-9,
                tileMs / blasMs, difference);
    std::fflush(stdout);
    cudaFree(h);
    cudaFree(w);
    cudaFree(c1);
    cudaFree(c2);
  }

  // The lean slice step: every token labelled, lse near the rows' true values. Slices as the lean plan
  // makes them: geometrically narrower towards the end of the vocabulary, over all N tokens or the
  // gathered labelled ones (M = 7373 and 4096: 10% and 50% ignored).
  const Shape slices[] = {{"Llama-3 lean slice", 8192, 4608, 4096}, {"Llama-3 lean slice", 8192, 1024, 4096},
                          {"Llama-3 lean slice", 8192, 768, 4096},  {"Llama-3 lean slice", 8192, 512, 4096},
                          {"Llama-3 lean slice", 8192, 384, 4096},  {"Llama-3 lean slice", 8192, 256, 4096},
                          {"Llama-3 lean slice", 8192, 128, 4096},  {"Llama-3 lean slice", 8192, 64, 4096},
                          {"Llama-3 gathered slice", 7373, 512, 4096}, {"Llama-3 gathered slice", 4096, 1024, 4096},
                          {"Llama-3 gathered slice", 4096, 512, 4096}, {"Gemma-2 lean slice", 8192, 4608, 2304},
                          {"Gemma-2 lean slice", 8192, 1024, 2304}, {"Gemma-2 lean slice", 8192, 512, 2304},
                          {"Gemma-2 lean slice", 8192, 256, 2304},  {"Gemma-2 lean slice", 8192, 128, 2304}};
  if (!logitsOnly) {
    std::printf("\n| dx of a slice (M tokens, N columns, K) | product ms | product + slice kernel ms | fused ms | "
                "fused / unfused | epilogue ms | cuBLASLt + slice kernel ms | fused / cuBLASLt | backend runs | "
                "max diff / max value |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  }
  for (const Shape& s : slices) {
    if (logitsOnly) break;
    const int64_t ldc = (s.n + 7) / 8 * 8;
    __nv_bfloat16 *h, *w, *c1, *c2;
    float* lse;
    BENCH_CHECK(cudaMalloc(&h, std::size_t(s.m * s.k) * 2));
    BENCH_CHECK(cudaMalloc(&w, std::size_t(s.n * s.k) * 2));
    BENCH_CHECK(cudaMalloc(&c1, std::size_t(s.m * ldc) * 2));
    BENCH_CHECK(cudaMalloc(&c2, std::size_t(s.m * ldc) * 2));
    BENCH_CHECK(cudaMalloc(&lse, std::size_t(s.m) * 4));
    fillKernel<<<1024, 256, 0, stream>>>(h, s.m * s.k, 1.0f, 3);
    fillKernel<<<1024, 256, 0, stream>>>(w, s.n * s.k, 0.05f, 4);
    std::vector<float> hostLse(s.m, std::log(float(s.n)) + 1.0f);
    BENCH_CHECK(cudaMemcpy(lse, hostLse.data(), hostLse.size() * 4, cudaMemcpyHostToDevice));
    const LabelledRows labelled(s.m, s.n, ldc);
    const backend::RowParams& rows = labelled.params;
    const backend::TileGradient epilogue{rows, lse};
    const backend::TileGemmShape tile{s.m, s.n, s.k, s.k, s.k, ldc};
    const float productMs = timeMedian([&] { backend::tileGemm(tile, h, w, c1, stream); }, repeats, stream, 3);
    const float unfusedMs = timeMedian(
        [&] {
          backend::tileGemm(tile, h, w, c1, stream);
          backend::launchSliceGradient(lmfuse::DType::BFloat16, c1, rows, lse, stream);
        },
        repeats, stream, 3);
    const float fusedMs = timeMedian([&] { backend::tileGemm(tile, h, w, c2, stream, &epilogue); }, repeats, stream, 3);
    const float difference = relativeDifference(c2, c1, s.m, s.n, ldc, compare, stream);
    // cuBLASLt as the lean plan runs it on a slice: a borrowed workspace only from 1024 columns (plan.cpp).
    const bool borrows = s.n >= 1024;
    const backend::GemmShape blas{CUDA_R_16BF, CUDA_R_16BF, true, false, s.n, s.m, s.k, s.k, s.k, ldc};
    const float blasMs = timeMedian(
        [&] {
          backend::gemm(handle, blas, 1.0f, w, h, 0.0f, c1, borrows ? workspace : nullptr, borrows ? workspaceBytes : 0,
                        stream);
          backend::launchSliceGradient(lmfuse::DType::BFloat16, c1, rows, lse, stream);
        },
        repeats, stream, 3);
    std::printf("| %s (%lld, %lld, %lld) | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s | %.2e |\n", s.name,
                (long long)s.m, (long long)s.n, (long long)s.k, productMs, unfusedMs, fusedMs, fusedMs / unfusedMs,
                fusedMs - productMs, blasMs, fusedMs / blasMs,
                backend::tileGemmFill(device, s.m, s.n) >= backend::kTileGemmMinimumFill ? "fused" : "cuBLASLt",
                difference);
    std::fflush(stdout);
    for (void* p : {(void*)h, (void*)w, (void*)c1, (void*)c2, (void*)lse}) cudaFree(p);
  }

  // The full-vocabulary step: product, then the row kernel writing dx; rows laid out as the plan lays them
  // out (plan.h: statisticsBytes: the partials after the M logits rows), every token labelled.
  const Shape full[] = {{"Llama-3-8B", 8192, 128256, 4096},
                        {"Llama-3-8B, 4096 tokens (lean pass A)", 4096, 128256, 4096},
                        {"Gemma-2-2B, 2731 tokens (a chunk)", 2731, 256000, 2304},
                        {"Qwen-2.5-7B, 5462 tokens (a chunk)", 5462, 152064, 3584}};
  std::printf("\n| product + row kernel (M tokens, V, K) | tile ms | tile + statistics ms | statistics / tile | "
              "row kernel ms | row kernel from partials ms | step ms | step with statistics ms | "
              "with / without | max lse diff |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<std::string> numeratorRows;  // the fourth table, printed after the third
  for (const Shape& s : full) {
    const int64_t ldc = (s.n + 7) / 8 * 8;
    const int64_t statisticsBytes = (s.n + backend::kRowStatisticsColumns - 1) / backend::kRowStatisticsColumns * 8;
    __nv_bfloat16 *h, *w, *c;
    float *lse, *lse2, *rowLoss;
    BENCH_CHECK(cudaMalloc(&h, std::size_t(s.m * s.k) * 2));
    BENCH_CHECK(cudaMalloc(&w, std::size_t(s.n * s.k) * 2));
    BENCH_CHECK(cudaMalloc(&c, std::size_t(s.m * ldc) * 2 + std::size_t(s.m * statisticsBytes)));
    BENCH_CHECK(cudaMalloc(&lse, std::size_t(s.m) * 4));
    BENCH_CHECK(cudaMalloc(&lse2, std::size_t(s.m) * 4));
    BENCH_CHECK(cudaMalloc(&rowLoss, std::size_t(s.m) * 4));
    fillKernel<<<1024, 256, 0, stream>>>(h, s.m * s.k, 1.0f, 5);
    fillKernel<<<1024, 256, 0, stream>>>(w, s.n * s.k, 0.05f, 6);
    const LabelledRows labelled(s.m, s.n, ldc);
    const backend::RowParams& rows = labelled.params;
    backend::TileStatistics statistics;
    statistics.rows = rows;
    statistics.partials = reinterpret_cast<char*>(c) + std::size_t(s.m * ldc) * 2;
    statistics.stride = statisticsBytes;
    const backend::RowPartials partials{statistics.partials, statistics.stride};
    const backend::TileGemmShape tile{s.m, s.n, s.k, s.k, s.k, ldc};
    const lmfuse::DType bf16 = lmfuse::DType::BFloat16;
    const float tileMs = timeMedian([&] { backend::tileGemm(tile, h, w, c, stream); }, repeats, stream, 3);
    const float statisticsMs =
        timeMedian([&] { backend::tileGemm(tile, h, w, c, stream, nullptr, &statistics); }, repeats, stream, 3);
    // The row kernels alone run on whatever the buffer holds by then (dx of dx after the first): the bytes
    // they move are the same.
    const float rowMs = timeMedian(
        [&] { backend::launchRowLoss(bf16, c, rows, true, nullptr, rowLoss, lse, nullptr, nullptr, stream); }, repeats,
        stream, 3);
    const float rowPartialsMs = timeMedian(
        [&] { backend::launchRowLoss(bf16, c, rows, true, &partials, rowLoss, lse, nullptr, nullptr, stream); },
        repeats, stream, 3);
    const float stepMs = timeMedian(
        [&] {
          backend::tileGemm(tile, h, w, c, stream);
          backend::launchRowLoss(bf16, c, rows, true, nullptr, rowLoss, lse, nullptr, nullptr, stream);
        },
        repeats, stream, 3);
    const float stepStatisticsMs = timeMedian(
        [&] {
          backend::tileGemm(tile, h, w, c, stream, nullptr, &statistics);
          backend::launchRowLoss(bf16, c, rows, true, &partials, rowLoss, lse2, nullptr, nullptr, stream);
        },
        repeats, stream, 3);
    std::vector<float> a(s.m), b(s.m);
    BENCH_CHECK(cudaMemcpy(a.data(), lse, a.size() * 4, cudaMemcpyDeviceToHost));
    BENCH_CHECK(cudaMemcpy(b.data(), lse2, b.size() * 4, cudaMemcpyDeviceToHost));
    float lseDifference = 0;
    for (int64_t i = 0; i < s.m; ++i) lseDifference = std::max(lseDifference, std::fabs(a[i] - b[i]));
    std::printf("| %s (%lld, %lld, %lld) | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2e |\n", s.name,
                (long long)s.m, (long long)s.n, (long long)s.k, tileMs, statisticsMs, statisticsMs / tileMs, rowMs,
                rowPartialsMs, stepMs, stepStatisticsMs, stepStatisticsMs / stepMs, lseDifference);
    std::fflush(stdout);

    // The numerators step on the same inputs. The rows kernel writes lse over the shift, so each timed
    // repeat that runs it shifts the next product's numerators: the bytes and instructions are the same.
    float *shift, *rowScale;
    __nv_bfloat16 *scaled, *gradHidden;
    BENCH_CHECK(cudaMalloc(&shift, std::size_t(s.m) * 4));
    BENCH_CHECK(cudaMalloc(&rowScale, std::size_t(s.m) * 4));
    BENCH_CHECK(cudaMalloc(&scaled, std::size_t(s.m * s.k) * 2));
    BENCH_CHECK(cudaMalloc(&gradHidden, std::size_t(s.m * s.k) * 2));
    auto* scalars = const_cast<backend::Scalars*>(rows.scalars);
    backend::TileStatistics numerators = statistics;
    numerators.shift = shift;
    auto target = [&] { backend::launchTargetLogits(h, s.k, w, s.k, s.k, rows, shift, scalars, stream); };
    auto numeratorRowsStep = [&] {
      backend::launchNumeratorRows(c, rows, partials, shift, rowScale, rowLoss, nullptr, nullptr, scalars, stream);
    };
    auto scalings = [&] {
      backend::launchScaleRows(h, s.k, rowScale, nullptr, s.m, s.k, scaled, s.k, stream);
      backend::launchScaleRows(gradHidden, s.k, rowScale, nullptr, s.m, s.k, gradHidden, s.k, stream);
    };
    target();
    const float numeratorsMs =
        timeMedian([&] { backend::tileGemm(tile, h, w, c, stream, nullptr, &numerators); }, repeats, stream, 3);
    const float targetMs = timeMedian(target, repeats, stream, 3);
    const float numeratorRowsMs = timeMedian(numeratorRowsStep, repeats, stream, 3);
    const float scalingsMs = timeMedian(scalings, repeats, stream, 3);
    const float stepNumeratorsMs = timeMedian(
        [&] {
          target();
          backend::tileGemm(tile, h, w, c, stream, nullptr, &numerators);
          numeratorRowsStep();
          scalings();
        },
        repeats, stream, 3);
    BENCH_CHECK(cudaMemcpy(a.data(), shift, a.size() * 4, cudaMemcpyDeviceToHost));  // lse of the last step
    float numeratorsLseDifference = 0;
    for (int64_t i = 0; i < s.m; ++i) numeratorsLseDifference = std::max(numeratorsLseDifference, std::fabs(a[i] - b[i]));
    char line[512];
    std::snprintf(line, sizeof line, "| %s (%lld, %lld, %lld) | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2e |\n",
                  s.name, (long long)s.m, (long long)s.n, (long long)s.k, statisticsMs, numeratorsMs,
                  numeratorsMs / statisticsMs, targetMs, numeratorRowsMs, scalingsMs, stepStatisticsMs, stepNumeratorsMs,
                  stepNumeratorsMs / stepStatisticsMs, numeratorsLseDifference);
    numeratorRows.push_back(line);
    for (void* p : {(void*)h, (void*)w, (void*)c, (void*)lse, (void*)lse2, (void*)rowLoss, (void*)shift, (void*)rowScale,
                    (void*)scaled, (void*)gradHidden})
      cudaFree(p);
  }
  std::printf("\n| numerators step (M tokens, V, K) | tile + statistics ms | tile + numerators ms | numerators / statistics | "
              "target logits ms | numerator rows ms | row scalings ms | step with statistics ms | step with numerators ms | "
              "numerators / statistics step | max lse diff |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& line : numeratorRows) std::printf("%s", line.c_str());
  return 0;
}
