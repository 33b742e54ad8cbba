// Launch helpers shared by the .cu files of the CUDA backend (device code only; no state).
// Contract: rowGrid never returns 0 (a launch of zero blocks is an error) and caps the grid at 8192 blocks,
// which the grid-stride kernels cover; withType maps a runtime DType onto the storage type a kernel is
// instantiated for.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "lmfuse/flce.h"

namespace lmfuse::detail::cuda {

/// Blocks for a grid-stride kernel with one block per row.
inline unsigned rowGrid(int64_t rows) { return unsigned(rows < 1 ? 1 : rows > 8192 ? 8192 : rows); }

/// Calls f with a null pointer of the storage type of dtype, to pick a template instantiation.
template <typename F>
void withType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: f(static_cast<float*>(nullptr)); break;
    case DType::Float16: f(static_cast<__half*>(nullptr)); break;
    case DType::BFloat16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
  }
}

}  // namespace lmfuse::detail::cuda
