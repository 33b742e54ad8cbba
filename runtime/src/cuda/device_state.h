// Per-device objects the CUDA backend reuses across calls: the cuBLASLt handle, the side stream that runs
// the cross-entropy kernels beside the GEMMs, the events that order the two, and whether the device runs
// the tile product. Created on a device's
// first call (outside any capture, ideally), never freed before exit; guarded by a mutex so two host
// threads never interleave the event records of their calls.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <mutex>

#include "conditional.h"
#include "tile_gemm.h"  // defines: kTileGemmMinimumFill

namespace lmfuse::detail::cuda {

struct DeviceState {
  cublasLtHandle_t blas = nullptr;
  cudaStream_t side = nullptr;
  cudaStream_t capture = nullptr;  // records an uncaptured call as a graph (compaction needs graph conditionals)
  cudaStream_t body = nullptr;     // captures the bodies of conditional nodes
  cudaStream_t redoBody = nullptr;  // captures a numerators chunk's redo (an IF node, maybe inside a body)
  cudaEvent_t forked = nullptr;        // main -> side: the inputs of the next kernel are ready
  cudaEvent_t rowsDone[2] = {nullptr, nullptr};  // side -> main: logits buffer k is ready for the GEMMs
  RecordedGraphs recorded;  // the last few distinct eager compacting calls, as graphs
  int device = 0;
  bool tileProduct = false;  // the device runs lmfuse's Hopper tile product (tile_gemm.h)
  // The least tileGemmFill at which a product runs there. Tests lower it to 0, so that their small
  // problems run the tile product inside the pipeline too; recorded graphs are keyed on it.
  double tileMinimumFill = kTileGemmMinimumFill;
  double tileWeightMinimumFill = kTileGemmWeightMinimumFill;  // the same for the weight product
  std::mutex mutex;
};

/// The state of the current device.
DeviceState& deviceState();

}  // namespace lmfuse::detail::cuda
