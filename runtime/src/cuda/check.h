// The one error-checking macro of the CUDA backend: every CUDA runtime and cuBLASLt call goes through
// LMFUSE_CUDA_CHECK, which throws lmfuse::Error naming the call, the file and the line. Kernel launches
// are followed by LMFUSE_CUDA_CHECK(cudaGetLastError()).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "lmfuse/flce.h"

namespace lmfuse::detail::cuda {

inline const char* statusName(cudaError_t status) { return cudaGetErrorString(status); }
inline const char* statusName(cublasStatus_t status) { return cublasLtGetStatusString(status); }
inline bool isSuccess(cudaError_t status) { return status == cudaSuccess; }
inline bool isSuccess(cublasStatus_t status) { return status == CUBLAS_STATUS_SUCCESS; }

template <typename Status>
inline void checkStatus(Status status, const char* call, const char* file, int line) {
  if (!isSuccess(status))
    throw Error(std::string("lmfuse CUDA backend: ") + call + " failed: " + statusName(status) + " (" + file +
                ":" + std::to_string(line) + ")");
}

}  // namespace lmfuse::detail::cuda

#define LMFUSE_CUDA_CHECK(call) ::lmfuse::detail::cuda::checkStatus((call), #call, __FILE__, __LINE__)
