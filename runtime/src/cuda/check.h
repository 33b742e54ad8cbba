// The one error-checking macro of the CUDA backend: every CUDA runtime and cuBLASLt call goes through
// LMFUSE_CUDA_CHECK, which fails (error.h: LMFUSE_FAIL, so the message reaches the caller prefixed by the
// public function) naming the call, the file and the line. Kernel launches are followed by
// LMFUSE_CUDA_CHECK(cudaGetLastError()).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "error.h"  // defines: LMFUSE_FAIL

namespace lmfuse::detail::cuda {

inline const char* statusName(cudaError_t status) { return cudaGetErrorString(status); }
inline const char* statusName(cublasStatus_t status) { return cublasLtGetStatusString(status); }
inline bool isSuccess(cudaError_t status) { return status == cudaSuccess; }
inline bool isSuccess(cublasStatus_t status) { return status == CUBLAS_STATUS_SUCCESS; }

template <typename Status>
inline void checkStatus(Status status, const char* call, const char* file, int line) {
  if (!isSuccess(status))
    LMFUSE_FAIL("CUDA backend: " << call << " failed: " << statusName(status) << " (" << file << ":" << line << ")");
}

}  // namespace lmfuse::detail::cuda

#define LMFUSE_CUDA_CHECK(call) ::lmfuse::detail::cuda::checkStatus((call), #call, __FILE__, __LINE__)
