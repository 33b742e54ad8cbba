// cuBLASLt products with per-shape cached descriptors and algorithm (see gemm.h). The algorithm is the
// heuristic's first choice for 16-byte-aligned operands and the given workspace; it depends only on the
// shape, so every call with that shape runs the same kernels (bitwise reproducible results).
#include "gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "check.h"

namespace lmfuse::detail::cuda {
namespace {

using Key = std::tuple<int, int, int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, std::size_t,
                       cublasLtHandle_t>;

struct Prepared {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Prepared() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

struct Operands {
  float alpha, beta;
  const void *a, *b;
  void* c;
  void* workspace;
  std::size_t workspaceBytes;
  cudaStream_t stream;
};

// Environment LMFUSE_GEMM_TUNE=1: the first product of each shape times the heuristic's candidates on the
// real operands and keeps the fastest. That first call synchronises the host, so it happens only outside
// stream capture and only when C is not read (beta == 0, so the timed runs destroy nothing); the choice
// then holds for the process (results are reproducible within it, not necessarily across processes).
bool tuningRequested() {
  const char* value = std::getenv("LMFUSE_GEMM_TUNE");
  return value && *value && *value != '0';
}

float timeAlgo(cublasLtHandle_t handle, const Prepared& p, const cublasLtMatmulAlgo_t& algo, const Operands& o) {
  cudaEvent_t start, stop;
  LMFUSE_CUDA_CHECK(cudaEventCreate(&start));
  LMFUSE_CUDA_CHECK(cudaEventCreate(&stop));
  auto launch = [&] {
    return cublasLtMatmul(handle, p.op, &o.alpha, o.a, p.a, o.b, p.b, &o.beta, o.c, p.c, o.c, p.c, &algo, o.workspace,
                          o.workspaceBytes, o.stream);
  };
  float best = INFINITY;
  if (launch() == CUBLAS_STATUS_SUCCESS) {
    for (int repeat = 0; repeat < 3; ++repeat) {
      LMFUSE_CUDA_CHECK(cudaEventRecord(start, o.stream));
      launch();
      LMFUSE_CUDA_CHECK(cudaEventRecord(stop, o.stream));
      LMFUSE_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      LMFUSE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      best = std::min(best, ms);
    }
  }
  (void)cudaGetLastError();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

std::unique_ptr<Prepared> prepare(cublasLtHandle_t handle, const GemmShape& s, const Operands& o, bool tune) {
  const std::size_t workspaceBytes = o.workspaceBytes;
  auto p = std::make_unique<Prepared>();
  LMFUSE_CUDA_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  LMFUSE_CUDA_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LMFUSE_CUDA_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  // Stored shapes: op(A) is m×k, so A is k×m when transposed.
  LMFUSE_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->a, s.abType, s.transA ? s.k : s.m, s.transA ? s.m : s.k, s.lda));
  LMFUSE_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->b, s.abType, s.transB ? s.n : s.k, s.transB ? s.k : s.n, s.ldb));
  LMFUSE_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->c, s.cType, s.m, s.n, s.ldc));

  cublasLtMatmulPreference_t preference = nullptr;
  LMFUSE_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  uint32_t alignment = 16;
  LMFUSE_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspaceBytes, sizeof workspaceBytes));
  for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    LMFUSE_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment, sizeof alignment));
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, p->op, p->a, p->b, p->c, p->c, preference,
                                                         tune ? kCandidates : 1, results, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  LMFUSE_CUDA_CHECK(status);
  if (found == 0)
    throw Error("lmfuse CUDA backend: cuBLASLt has no algorithm for a " + std::to_string(s.m) + "x" +
                std::to_string(s.n) + "x" + std::to_string(s.k) + " product");
  p->algo = results[0].algo;
  if (tune && found > 1) {
    float best = INFINITY;
    for (int i = 0; i < found; ++i) {
      float ms = timeAlgo(handle, *p, results[i].algo, o);
      if (ms < best) { best = ms; p->algo = results[i].algo; }
    }
  }
  return p;
}

}  // namespace

void gemm(cublasLtHandle_t handle, const GemmShape& s, float alpha, const void* a, const void* b, float beta,
          void* c, void* workspace, std::size_t workspaceBytes, cudaStream_t stream) {
  if (s.m == 0 || s.n == 0) return;
  static std::mutex mutex;
  static std::map<Key, std::unique_ptr<Prepared>> cache;
  auto keyFor = [&](bool tuned) {
    return Key{int(s.abType), int(s.cType), tuned ? 1 : 0, s.transA, s.transB, s.m, s.n, s.k, s.lda, s.ldb, s.ldc,
               workspaceBytes, handle};
  };
  const Prepared* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (tuningRequested()) {
      auto tuned = cache.find(keyFor(true));
      if (tuned != cache.end()) {
        p = tuned->second.get();
      } else if (beta == 0.0f) {
        cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
        LMFUSE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
        if (capture == cudaStreamCaptureStatusNone) {
          auto& slot = cache[keyFor(true)];
          slot = prepare(handle, s, Operands{alpha, beta, a, b, c, workspace, workspaceBytes, stream}, true);
          p = slot.get();
        }
      }
    }
    if (!p) {
      auto& slot = cache[keyFor(false)];
      if (!slot) slot = prepare(handle, s, Operands{alpha, beta, a, b, c, workspace, workspaceBytes, stream}, false);
      p = slot.get();
    }
  }
  LMFUSE_CUDA_CHECK(cublasLtMatmul(handle, p->op, &alpha, a, p->a, b, p->b, &beta, c, p->c, c, p->c, &p->algo,
                                   workspace, workspaceBytes, stream));
}

}  // namespace lmfuse::detail::cuda
