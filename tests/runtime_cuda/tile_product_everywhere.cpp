// The backend gives a product to its Hopper tile product only where the product fills most of the
// device's tile slots (tile_gemm.h: tileGemmFill); the tests' problems are far smaller than that. So for
// this whole binary the device's threshold is 0: where the device has the tile product, every bf16
// product of these tests runs it, inside the pipeline as in the [tile_gemm] tests. The lean test also
// runs at the shipped threshold, where its products go to cuBLASLt and the slice kernel.
#define CATCH_CONFIG_EXTERNAL_INTERFACES  // Catch2 v2: the listener interface
#include <catch2/catch.hpp>

#include "cuda/device_state.h"
#include "lmfuse/flce.h"

namespace {

struct TileProductEverywhere : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunStarting(const Catch::TestRunInfo&) override {
    if (!lmfuse::cuda_available()) return;
    lmfuse::detail::cuda::deviceState().tileMinimumFill = 0.0;
    lmfuse::detail::cuda::deviceState().tileWeightMinimumFill = 0.0;
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(TileProductEverywhere)
