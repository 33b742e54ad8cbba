// Per-device reusable CUDA objects (see device_state.h).
#include "device_state.h"

#include <map>
#include <memory>

#include "check.h"
#include "tile_gemm.h"

namespace lmfuse::detail::cuda {

DeviceState& deviceState() {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<DeviceState>> states;
  int device = 0;
  LMFUSE_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = states[device];
  if (!slot) {
    auto state = std::make_unique<DeviceState>();
    LMFUSE_CUDA_CHECK(cublasLtCreate(&state->blas));
    for (cudaStream_t* stream : {&state->side, &state->capture, &state->body, &state->redoBody})
      LMFUSE_CUDA_CHECK(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
    LMFUSE_CUDA_CHECK(cudaEventCreateWithFlags(&state->forked, cudaEventDisableTiming));
    for (auto& event : state->rowsDone) LMFUSE_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    state->device = device;
    state->tileProduct = tileGemmAvailable(device);
    slot = std::move(state);
  }
  return *slot;
}

}  // namespace lmfuse::detail::cuda
