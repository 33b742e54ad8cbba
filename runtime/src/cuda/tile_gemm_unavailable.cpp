// tile_gemm.h for builds whose LMFUSE_CUDA_ARCHITECTURES does not name 90: the product is never available.
#include "tile_gemm.h"

#include "error.h"  // defines: LMFUSE_FAIL

namespace lmfuse::detail::cuda {

bool tileGemmAvailable(int) { return false; }

double tileGemmFill(int, int64_t, int64_t) { return 0.0; }

namespace {
[[noreturn]] void unavailable() {
  LMFUSE_FAIL("CUDA backend: this build has no Hopper tile product (LMFUSE_CUDA_ARCHITECTURES does not name 90)");
}
}  // namespace

void tileGemm(const TileGemmShape&, const void*, const void*, void*, cudaStream_t, const TileGradient*,
              const TileStatistics*) {
  unavailable();
}

void tileGemmWeight(const TileGemmShape&, const void*, const void*, void*, TileSink, const TileAddend*, cudaStream_t) {
  unavailable();
}

}  // namespace lmfuse::detail::cuda
