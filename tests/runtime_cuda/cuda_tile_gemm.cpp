// The Hopper tile product (cuda/tile_gemm.h) against an fp64 product of the same bf16 inputs: shapes
// with every edge ragged (m, n, k not multiples of the 128 x 256 x 64 tile, k below one tile, odd n),
// leading dimensions larger than the rows, and more tiles than CTAs (the persistent loop and the ring of
// stages wrap). C is poisoned first: every element of [m, n] must be written, the padding columns
// from n rounded up to 8 (TMA's 16-byte store granule) to ldc never. Skips without a device of compute capability 9.0 or a build without the product.
#include <catch2/catch.hpp>

#include <cmath>

#include "cuda/tile_gemm.h"
#include "harness.h"

using namespace lmfuse_test;
namespace backend = lmfuse::detail::cuda;

namespace {

struct Case {
  int64_t m, n, k, lda, ldb, ldc;
};

}  // namespace

TEST_CASE("the tile product against fp64, every edge ragged", "[cuda][tile_gemm]") {
  int device = 0;
  if (!lmfuse::cuda_available() || cudaGetDevice(&device) != cudaSuccess || !backend::tileGemmAvailable(device)) {
    WARN("skipped: no device of compute capability 9.0, or a build without the tile product");
    return;
  }
  const Case cases[] = {
      {1, 1, 1, 8, 8, 8},             // one element, k far below one 64-wide stage
      {200, 300, 72, 72, 80, 304},    // one partial tile pair, k = 1 stage + 8
      {129, 2003, 64, 64, 64, 2008},  // odd n (a lone last column), one row past a tile
      {1000, 257, 136, 144, 136, 264},
      {640, 4096, 520, 520, 528, 4096},  // 5 x 16 tiles (more than the CTAs of a GPU), 9 stages: the ring wraps
      {2304, 512, 64, 64, 64, 512},      // 18 row blocks: 9 cluster rows, two groups of the tile order
  };
  auto& g = rng();
  cudaStream_t stream;
  TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const Case& c : cases) {
    CAPTURE(c.m, c.n, c.k, c.lda, c.ldb, c.ldc);
    const DType bf16 = DType::BFloat16;
    Stored a = randomStored(g, bf16, std::size_t(c.m * c.lda), 1.0);
    Stored b = randomStored(g, bf16, std::size_t(c.n * c.ldb), 1.0);
    DeviceBuffer aDevice(a.raw.size()), bDevice(b.raw.size()), cDevice(std::size_t(c.m * c.ldc) * 2);
    aDevice.upload(a.raw.data());
    bDevice.upload(b.raw.data());
    cDevice.poison();
    backend::TileGemmShape shape{c.m, c.n, c.k, c.lda, c.ldb, c.ldc};
    backend::tileGemm(shape, aDevice.get(), bDevice.get(), cDevice.get(), stream);
    TEST_CUDA(cudaStreamSynchronize(stream));
    const std::vector<unsigned char> out = cDevice.download();
    int64_t wrong = 0, padding = 0;
    double worst = 0;
    std::vector<double> got, want;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.ldc; ++j) {
        const double value = loadStored(out, bf16, std::size_t(i * c.ldc + j));
        if (j >= c.n) {
          // TMA stores whole 16-byte pieces: the columns up to the next multiple of 8 may be written.
          if (j >= (c.n + 7) / 8 * 8) padding += !std::isnan(value);  // never written: still the poison
          continue;
        }
        double sum = 0, magnitude = 0;
        for (int64_t k = 0; k < c.k; ++k) {
          sum += a.values[i * c.lda + k] * b.values[j * c.ldb + k];
          magnitude += std::fabs(a.values[i * c.lda + k] * b.values[j * c.ldb + k]);
        }
        // bf16 rounding of the result (half an ulp: 2^-9 relative) plus fp32 accumulation of k terms.
        const double bound = std::ldexp(std::fabs(sum), -8) + 1e-6 * double(c.k) * magnitude + 1e-30;
        const double error = std::fabs(value - sum);
        worst = std::max(worst, std::isnan(error) ? INFINITY : error / bound);
        wrong += !(error <= bound);
        got.push_back(value);
        want.push_back(sum);
      }
    }
    CHECK(wrong == 0);
    CHECK(padding == 0);
    CHECK(relativeError(got, want) < 4e-3);
    INFO("worst error / bound " << worst);
  }
  TEST_CUDA(cudaStreamDestroy(stream));
}
