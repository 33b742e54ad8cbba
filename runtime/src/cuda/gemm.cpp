// cuBLASLt products with per-shape cached descriptors and algorithm (see gemm.h). The algorithm is the
// heuristic's first choice for 16-byte-aligned operands and the given workspace; it depends only on the
// shape, so every call with that shape runs the same kernels (bitwise reproducible results).
#include "gemm.h"

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

std::unique_ptr<Prepared> prepare(cublasLtHandle_t handle, const GemmShape& s, std::size_t workspaceBytes) {
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
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, p->op, p->a, p->b, p->c, p->c, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  LMFUSE_CUDA_CHECK(status);
  if (found == 0)
    LMFUSE_FAIL("CUDA backend: cuBLASLt has no algorithm for a " << s.m << "x" << s.n << "x" << s.k << " product");
  p->algo = result.algo;
  return p;
}

}  // namespace

void gemm(cublasLtHandle_t handle, const GemmShape& s, float alpha, const void* a, const void* b, float beta,
          void* c, void* workspace, std::size_t workspaceBytes, cudaStream_t stream) {
  if (s.m == 0 || s.n == 0) return;
  static std::mutex mutex;
  static std::map<Key, std::unique_ptr<Prepared>> cache;
  Key key{int(s.abType), int(s.cType), 0, s.transA, s.transB, s.m, s.n, s.k, s.lda, s.ldb, s.ldc, workspaceBytes,
          handle};
  const Prepared* p;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto& slot = cache[key];
    if (!slot) slot = prepare(handle, s, workspaceBytes);
    p = slot.get();
  }
  LMFUSE_CUDA_CHECK(cublasLtMatmul(handle, p->op, &alpha, a, p->a, b, p->b, &beta, c, p->c, c, p->c, &p->algo,
                                   workspace, workspaceBytes, stream));
}

}  // namespace lmfuse::detail::cuda
