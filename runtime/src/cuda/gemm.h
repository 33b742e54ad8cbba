// cuBLASLt matrix products of the CUDA backend, in cuBLAS's column-major terms:
//   C[m, n] = alpha · op(A)[m, k] · op(B)[k, n] + beta · C,  fp32 accumulation (never TF32).
// Descriptors and the chosen algorithm are cached per shape (pointer-free key), so a call costs one
// cublasLtMatmul; the workspace is the caller's. Pointers and leading dimensions must be 16-byte aligned
// (the backend checks the user's arguments; its own buffers are 256-byte aligned).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "lmfuse/flce.h"  // defines: DType

namespace lmfuse::detail::cuda {

/// The cuBLASLt data type of a storage dtype.
inline cudaDataType_t cudaType(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float16: return CUDA_R_16F;
    default: return CUDA_R_16BF;
  }
}

struct GemmShape {
  cudaDataType_t abType = CUDA_R_16BF;  // A and B
  cudaDataType_t cType = CUDA_R_16BF;   // C and D
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

/// Enqueues the product on `stream`; beta == 0 means C is not read.
void gemm(cublasLtHandle_t handle, const GemmShape& shape, float alpha, const void* a, const void* b, float beta,
          void* c, void* workspace, std::size_t workspaceBytes, cudaStream_t stream);

}  // namespace lmfuse::detail::cuda
