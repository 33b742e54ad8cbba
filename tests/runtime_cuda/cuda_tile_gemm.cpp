// The Hopper tile product (cuda/tile_gemm.h) against an fp64 product of the same bf16 inputs: shapes
// with every edge ragged (m, n, k not multiples of the 128 x 256 x 64 tile, k below one tile, odd n),
// leading dimensions larger than the rows, and more tiles than CTAs (the persistent loop and the ring of
// stages wrap). C is poisoned first: every element of [m, n] must be written, the padding columns
// from n rounded up to 8 (TMA's 16-byte store granule) to ldc never. The gradient epilogue against the
// unfused path it replaces (the plain product, then the slice kernel): bitwise, over slices of a vocabulary
// with every row option and both row maps. The statistics epilogue against fp64 statistics of the
// logits it stored, and the row kernel reading them against its own first pass. The numerators epilogue
// against fp64 numerators of the same sums, capped, with their partials. The weight product Aᵀ·B into each
// of its sinks (bf16, fp32, fp32 added in place, an fp32 addend rounded to bf16) against fp64, with the
// same edges and poison. Skips without a device of compute capability 9.0 or a
// build without the product.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cuda/compaction.h"
#include "cuda/kernels.h"
#include "cuda/tile_gemm.h"
#include "harness.h"

using namespace lmfuse_test;
namespace backend = lmfuse::detail::cuda;

namespace {

struct Case {
  int64_t m, n, k, lda, ldb, ldc;
};

bool tileProductHere() {
  int device = 0;
  if (lmfuse::cuda_available() && cudaGetDevice(&device) == cudaSuccess && backend::tileGemmAvailable(device))
    return true;
  WARN("skipped: no device of compute capability 9.0, or a build without the tile product");
  return false;
}

}  // namespace

TEST_CASE("the tile product against fp64, every edge ragged", "[cuda][tile_gemm]") {
  if (!tileProductHere()) return;
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

TEST_CASE("the weight product Aᵀ·B into each sink against fp64, every edge ragged", "[cuda][tile_gemm]") {
  if (!tileProductHere()) return;
  const Case cases[] = {
      {1, 1, 1, 8, 8, 8},               // one element, k far below one 64-wide stage
      {200, 300, 72, 208, 304, 304},    // one partial tile pair, k = 1 stage + 8, padded leading dimensions
      {129, 2003, 64, 136, 2008, 2008}, // odd n (a lone last column), one row past a tile
      {2304, 2048, 200, 2304, 2048, 2056},  // 72 cluster tiles (more than a GPU's clusters), 4 stages: both wrap
  };
  const backend::TileSink sinks[] = {backend::TileSink::Bf16, backend::TileSink::Float, backend::TileSink::FloatAdd,
                                     backend::TileSink::Bf16FromFloat};
  const DType bf16 = DType::BFloat16, fp32 = DType::Float32;
  auto& g = rng();
  cudaStream_t stream;
  TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const Case& c : cases) {
    // A [k, lda], B [k, ldb]: the product sums A[q, i] · B[q, j] over q.
    Stored a = randomStored(g, bf16, std::size_t(c.k * c.lda), 1.0);
    Stored b = randomStored(g, bf16, std::size_t(c.k * c.ldb), 1.0);
    DeviceBuffer aDevice(a.raw.size()), bDevice(b.raw.size());
    aDevice.upload(a.raw.data());
    bDevice.upload(b.raw.data());
    std::vector<double> sum(std::size_t(c.m * c.n), 0.0), magnitude(sum.size(), 0.0);
    for (int64_t q = 0; q < c.k; ++q)
      for (int64_t i = 0; i < c.m; ++i) {
        const double x = a.values[q * c.lda + i];
        for (int64_t j = 0; j < c.n; ++j) {
          const double term = x * b.values[q * c.ldb + j];
          sum[i * c.n + j] += term;
          magnitude[i * c.n + j] += std::fabs(term);
        }
      }
    for (backend::TileSink sink : sinks) {
      const bool floatC = sink == backend::TileSink::Float || sink == backend::TileSink::FloatAdd;
      const DType cType = floatC ? fp32 : bf16;
      CAPTURE(c.m, c.n, c.k, c.lda, c.ldb, c.ldc, int(sink));
      DeviceBuffer cDevice(std::size_t(c.m * c.ldc) * dtypeBytes(cType));
      cDevice.poison();
      // FloatAdd's C and Bf16FromFloat's addend: random fp32 values the product is added to (ld = ldc).
      Stored start = randomStored(g, fp32, std::size_t(c.m * c.ldc), 4.0);
      DeviceBuffer addendDevice(start.raw.size());
      backend::TileAddend addend{addendDevice.as<float>(), c.m, c.n, c.ldc};
      if (sink == backend::TileSink::FloatAdd) cDevice.upload(start.raw.data());
      if (sink == backend::TileSink::Bf16FromFloat) addendDevice.upload(start.raw.data());
      const bool adds = sink == backend::TileSink::FloatAdd || sink == backend::TileSink::Bf16FromFloat;
      backend::tileGemmWeight({c.m, c.n, c.k, c.lda, c.ldb, c.ldc}, aDevice.get(), bDevice.get(), cDevice.get(), sink,
                              sink == backend::TileSink::Bf16FromFloat ? &addend : nullptr, stream);
      TEST_CUDA(cudaStreamSynchronize(stream));
      const std::vector<unsigned char> out = cDevice.download();
      // TMA stores whole 16-byte pieces: the columns up to the next 16 bytes may be written, none past them.
      const int64_t piece = floatC ? 4 : 8;
      int64_t wrong = 0, padding = 0;
      std::vector<double> got, want;
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.ldc; ++j) {
          const double value = loadStored(out, cType, std::size_t(i * c.ldc + j));
          if (j >= c.n) {
            if (j >= (c.n + piece - 1) / piece * piece && sink != backend::TileSink::FloatAdd)
              padding += !std::isnan(value);
            if (sink == backend::TileSink::FloatAdd) padding += value != start.values[i * c.ldc + j];
            continue;
          }
          const double exact = sum[i * c.n + j] + (adds ? start.values[i * c.ldc + j] : 0.0);
          // Rounding of the result (bf16: half an ulp, 2^-9; fp32: 2^-24) plus fp32 accumulation of k terms
          // (and of the addend).
          const double bound = std::ldexp(std::fabs(exact), floatC ? -22 : -8) +
                               1e-6 * (double(c.k) * magnitude[i * c.n + j] + std::fabs(exact)) + 1e-30;
          wrong += !(std::fabs(value - exact) <= bound);
          got.push_back(value);
          want.push_back(exact);
        }
      CHECK(wrong == 0);
      CHECK(padding == 0);
      CHECK(relativeError(got, want) < (floatC ? 1e-5 : 4e-3));
    }
  }
  TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_CASE("the weight product's contract errors", "[cuda][tile_gemm]") {
  if (!tileProductHere()) return;
  DeviceBuffer buffer(1 << 16);
  backend::TileAddend misaligned{reinterpret_cast<const float*>(buffer.as<char>() + 4), 8, 8, 8};
  backend::TileAddend wrongShape{buffer.as<float>(), 8, 16, 16};
  const backend::TileGemmShape shape{8, 8, 8, 8, 8, 8};
  CHECK_THROWS_WITH(backend::tileGemmWeight(shape, buffer.get(), buffer.get(), buffer.get(),
                                            backend::TileSink::Bf16FromFloat, nullptr, nullptr),
                    Catch::Contains("exactly when its sink is Bf16FromFloat"));
  CHECK_THROWS_WITH(backend::tileGemmWeight(shape, buffer.get(), buffer.get(), buffer.get(), backend::TileSink::Bf16,
                                            &wrongShape, nullptr),
                    Catch::Contains("exactly when its sink is Bf16FromFloat"));
  for (const backend::TileAddend& addend : {misaligned, wrongShape})
    CHECK_THROWS_WITH(backend::tileGemmWeight(shape, buffer.get(), buffer.get(), buffer.get(),
                                              backend::TileSink::Bf16FromFloat, &addend, nullptr),
                      Catch::Contains("addend needs rows = m, columns = n"));
}

TEST_CASE("the gradient epilogue writes the slice kernel's dx, bitwise", "[cuda][tile_gemm]") {
  if (!tileProductHere()) return;
  struct GradientCase {
    const char* name;
    int64_t first, columns;  // the slice of the vocabulary
    int64_t k;
    bool compact, perToken, bias, softcap;  // with a bias or a softcap, also scale, smoothing and z-loss
  };
  // The epilogue has one code path per (softcap, bias) pair: each is here. Every CTA takes several tiles
  // (its rows' terms are staged anew for each), at k of 10 stages and of 3.
  const GradientCase cases[] = {
      {"whole vocabulary, plain rows", 0, 5003, 640, false, false, false, false},
      {"a slice, compacted rows, bias and softcap", 200, 4531, 640, true, false, true, true},
      {"the last slice, per-token gradient scale (Reduction::None), bias", 1600, 3403, 136, false, true, true, false},
      {"a first slice, compacted rows, softcap", 0, 3260, 136, true, false, false, true},
  };
  const int64_t n = 2100, v = 5003, vPadded = 5008;
  const DType bf16 = DType::BFloat16;
  auto& g = rng();
  cudaStream_t stream;
  TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const GradientCase& c : cases) {
    CAPTURE(c.name);
    const int64_t k = c.k;
    // Labels: 30% ignored, one out of range (its row is zero, like an ignored one).
    std::uniform_int_distribution<int64_t> label(0, v - 1);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<int64_t> labels(n);
    for (auto& l : labels) l = unit(g) < 0.3 ? -100 : label(g);
    labels[n / 2] = v + 5;
    lmfuse::Problem problem;
    problem.tokens = n;
    problem.hidden_dim = k;
    problem.vocab = v;
    problem.dtype = bf16;
    problem.label_type = IndexType::Int64;
    lmfuse::Options options;
    options.reduction = c.perToken ? Reduction::None : Reduction::Mean;
    DeviceBuffer labelsDevice(n * 8), targets(n * 4), scalars(sizeof(backend::Scalars)), report(256), order(n * 8),
        rowLoss(n * 4), lse(n * 4), gradScale(n * 4), bias(v * 2);
    labelsDevice.upload(labels.data());
    problem.labels = labelsDevice.get();
    backend::launchPrepare(problem, options, targets.as<int32_t>(), scalars.as<backend::Scalars>(),
                           report.as<lmfuse::detail::LabelErrorReport>(), stream);
    backend::launchCompact(targets.as<int32_t>(), n, order.as<int64_t>(), scalars.as<backend::Scalars>(),
                           rowLoss.as<float>(), lse.as<float>(), nullptr, nullptr, stream);
    std::vector<float> scales(n);
    for (auto& s : scales) s = float(0.5 + unit(g));
    gradScale.upload(scales.data());
    Stored biasValues = randomStored(g, bf16, std::size_t(v), 0.5);
    bias.upload(biasValues.raw.data());

    backend::RowParams rows;
    rows.vocab = v;
    rows.rows = n;
    rows.targets = targets.as<int32_t>();
    rows.scalars = scalars.as<backend::Scalars>();
    if (c.compact) rows.rowTokens = order.as<int64_t>();  // past the labelled count: -1, a zero row
    if (c.perToken) rows.tokenGradScale = gradScale.as<float>();
    if (c.bias) rows.bias = bias.get();
    if (c.softcap) rows.softcap = 30.0f;
    if (c.bias || c.softcap) {
      rows.logitScale = 0.5f;
      rows.smoothing = 0.1f;
      rows.zLoss = 1e-3f;
    }
    // Every row's lse over the whole vocabulary, from the plain product.
    Stored hidden = randomStored(g, bf16, std::size_t(n * k), 1.0);
    Stored weight = randomStored(g, bf16, std::size_t(v * k), 0.15);
    DeviceBuffer hiddenDevice(hidden.raw.size()), weightDevice(weight.raw.size()), logits(std::size_t(n * vPadded) * 2);
    hiddenDevice.upload(hidden.raw.data());
    weightDevice.upload(weight.raw.data());
    // Poisoned: an element the product missed would make its row's lse NaN. (compute-sanitizer's initcheck
    // does not count the product's TMA stores as writes: without this it reports every read of them.)
    logits.poison();
    backend::tileGemm({n, v, k, k, k, vPadded}, hiddenDevice.get(), weightDevice.get(), logits.get(), stream);
    backend::RowParams full = rows;
    full.columns = v;
    full.ld = vPadded;
    backend::launchRowLoss(bf16, logits.get(), full, false, nullptr, rowLoss.as<float>(), lse.as<float>(), nullptr,
                           nullptr, stream);

    // The slice: unfused (product, then the slice kernel) and fused (the epilogue), into poisoned buffers.
    const int64_t ldc = (c.columns + 7) / 8 * 8 + 8;
    backend::RowParams slice = rows;
    slice.columnBegin = c.first;
    slice.columns = c.columns;
    slice.ld = ldc;
    const void* weightRows = static_cast<const char*>(weightDevice.get()) + std::size_t(c.first * k) * 2;
    const backend::TileGemmShape shape{n, c.columns, k, k, k, ldc};
    DeviceBuffer unfused(std::size_t(n * ldc) * 2), fused(std::size_t(n * ldc) * 2);
    unfused.poison();
    fused.poison();
    backend::tileGemm(shape, hiddenDevice.get(), weightRows, unfused.get(), stream);
    backend::launchSliceGradient(bf16, unfused.get(), slice, lse.as<float>(), stream);
    const backend::TileGradient epilogue{slice, lse.as<float>()};
    backend::tileGemm(shape, hiddenDevice.get(), weightRows, fused.get(), stream, &epilogue);
    TEST_CUDA(cudaStreamSynchronize(stream));
    const std::vector<unsigned char> want = unfused.download(), got = fused.download();
    const std::vector<double> lseValues = floatsToDoubles(lse.download());
    int64_t badLse = 0;
    for (int64_t token = 0; token < n; ++token) badLse += !std::isfinite(lseValues[token]);
    CHECK(badLse == 0);
    int64_t differ = 0, nonzero = 0, padding = 0;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t j = 0; j < ldc; ++j) {
        const std::size_t at = std::size_t(r * ldc + j);
        if (j >= (c.columns + 7) / 8 * 8) padding += !std::isnan(loadStored(got, bf16, at));
        if (j >= c.columns) continue;
        differ += std::memcmp(&want[2 * at], &got[2 * at], 2) != 0;
        nonzero += loadStored(want, bf16, at) != 0.0;
      }
    }
    CHECK(differ == 0);
    CHECK(padding == 0);
    CHECK(nonzero > n * c.columns / 2);  // most rows have a target: a dx of zeros would not pass
  }
  // The epilogue covers the product's rows and columns exactly.
  backend::TileGradient mismatched;
  mismatched.rows.rows = 3;
  mismatched.rows.columns = 5;
  CHECK_THROWS_WITH(backend::tileGemm({4, 5, 8, 8, 8, 8}, nullptr, nullptr, nullptr, stream, &mismatched),
                    Catch::Contains("rows = m, columns = n"));
  TEST_CUDA(cudaStreamDestroy(stream));
}

// The share of its waves' tile slots a product fills (the backend's choice between the tile product and
// cuBLASLt): one tile is 1 / (resident CTAs); a full wave fills all; one row more starts a second wave.
TEST_CASE("the tile product's fill of its waves", "[cuda][tile_gemm]") {
  if (!tileProductHere()) return;
  int device = 0;
  TEST_CUDA(cudaGetDevice(&device));
  const double one = backend::tileGemmFill(device, 128, 256);
  REQUIRE(one > 0.0);
  REQUIRE(one <= 0.5);  // at least one cluster of two CTAs
  const int64_t ctas = std::llround(1.0 / one);
  CHECK(backend::tileGemmFill(device, 64, 256) == Approx(one / 2));
  CHECK(backend::tileGemmFill(device, 128 * ctas, 256) == Approx(1.0));
  CHECK(backend::tileGemmFill(device, 128, 256 * ctas) == Approx(1.0));
  CHECK(backend::tileGemmFill(device, 128 * ctas + 1, 256) == Approx(double(128 * ctas + 1) / double(256 * ctas)));
  CHECK(backend::tileGemmFill(device, 8192, 128256) > 0.95);
  CHECK(backend::tileGemmFill(device, 0, 256) == 0.0);
}

// The statistics epilogue: the product it stores is bitwise the plain product's; each row's (max, Σ exp)
// per 256 columns matches fp64 statistics of those stored logits (with bias, scale and softcap), the
// float2s land where the plan puts them (after the m logits rows, plan.h) and nothing past them or past
// the logits is written; the row kernel reading them gives
// the lse, loss and dx of its own first pass, with and without label smoothing (Σ z then comes from the
// gradient pass).
TEST_CASE("the statistics epilogue: row partials against fp64, the row kernel from them", "[cuda][tile_gemm]") {
  if (!tileProductHere()) return;
  struct StatisticsCase {
    int64_t m, n, k;
    bool bias, softcap;
    float smoothing;
  };
  const StatisticsCase cases[] = {
      {2100, 5003, 576, false, false, 0.0f},  // 9 x 20 cluster tiles: each consumer takes several, and
                                              // every step of a tile's statistics runs under the next
                                              // tile's nine k-blocks
      {2100, 3003, 136, true, false, 0.0f},   // tiles of three k-blocks, two for some consumers: the steps
                                              // left run before the epilogue
      {1000, 2003, 640, true, true, 0.1f},    // a last block of 211 columns, every transform
      {129, 257, 64, true, false, 0.0f},      // a last block of one column, a row past a tile
  };
  const DType bf16 = DType::BFloat16;
  auto& g = rng();
  cudaStream_t stream;
  TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const StatisticsCase& c : cases) {
    CAPTURE(c.m, c.n, c.k, c.bias, c.softcap, c.smoothing);
    const int64_t blocks = (c.n + 255) / 256, first = (c.n + 7) / 8 * 8;
    const int64_t ldc = first + 8;  // 8 columns to spare
    // The plan's layout: m logits rows, then m rows of float2 partials, and 64 bytes to spare.
    const std::size_t logitsBytes = std::size_t(c.m * ldc) * 2, statisticsBytes = std::size_t(blocks) * 8;
    const std::size_t bufferBytes = logitsBytes + std::size_t(c.m) * statisticsBytes + 64;
    Stored hidden = randomStored(g, bf16, std::size_t(c.m * c.k), 1.0);
    Stored weight = randomStored(g, bf16, std::size_t(c.n * c.k), 0.3);
    Stored biasValues = randomStored(g, bf16, std::size_t(c.n), 0.5);
    DeviceBuffer hiddenDevice(hidden.raw.size()), weightDevice(weight.raw.size()), bias(biasValues.raw.size()),
        plain(bufferBytes), withStatistics(bufferBytes);
    hiddenDevice.upload(hidden.raw.data());
    weightDevice.upload(weight.raw.data());
    bias.upload(biasValues.raw.data());
    plain.poison();
    withStatistics.poison();
    TEST_CUDA(cudaDeviceSynchronize());  // the uploads and memsets, before the non-blocking stream's work

    backend::RowParams rows;
    rows.vocab = c.n;
    rows.columns = c.n;
    rows.rows = c.m;
    rows.ld = ldc;
    if (c.bias) rows.bias = bias.get();
    if (c.softcap) {
      rows.softcap = 5.0f;
      rows.logitScale = 2.0f;
    }
    rows.smoothing = c.smoothing;
    backend::TileStatistics statistics;
    statistics.rows = rows;
    statistics.partials = withStatistics.as<char>() + logitsBytes;
    statistics.stride = int64_t(statisticsBytes);
    const backend::TileGemmShape shape{c.m, c.n, c.k, c.k, c.k, ldc};
    backend::tileGemm(shape, hiddenDevice.get(), weightDevice.get(), plain.get(), stream);
    backend::tileGemm(shape, hiddenDevice.get(), weightDevice.get(), withStatistics.get(), stream, nullptr, &statistics);
    TEST_CUDA(cudaStreamSynchronize(stream));
    const std::vector<unsigned char> want = plain.download(), got = withStatistics.download();

    int64_t differ = 0, untouched = 0, wrongMax = 0, wrongSum = 0;
    for (int64_t r = 0; r < c.m; ++r) {
      for (int64_t j = 0; j < c.n; ++j) differ += std::memcmp(&want[2 * (r * ldc + j)], &got[2 * (r * ldc + j)], 2) != 0;
      for (int64_t j = first; j < ldc; ++j) untouched += std::isnan(loadStored(got, bf16, std::size_t(r * ldc + j)));
      for (int64_t b = 0; b < blocks; ++b) {
        double m = -INFINITY, sum = 0;
        std::vector<double> z;
        for (int64_t j = b * 256; j < std::min(c.n, (b + 1) * 256); ++j) {
          double x = loadStored(got, bf16, std::size_t(r * ldc + j)) + (c.bias ? biasValues.values[j] : 0.0);
          x *= rows.logitScale;
          if (c.softcap) x = rows.softcap * std::tanh(x / rows.softcap);
          z.push_back(x);
          m = std::max(m, x);
        }
        for (double x : z) sum += std::exp(x - m);
        float partial[2];
        std::memcpy(partial, &got[logitsBytes + std::size_t(r) * statisticsBytes + std::size_t(b) * 8], 8);
        wrongMax += !(std::fabs(partial[0] - m) <= 1e-5 * (1 + std::fabs(m)));
        wrongSum += !(std::fabs(partial[1] - sum) <= 1e-4 * sum);
      }
    }
    CHECK(differ == 0);
    CHECK(untouched == c.m * (ldc - first));
    CHECK(std::all_of(got.end() - 64, got.end(), [](unsigned char byte) { return byte == 0xff; }));
    CHECK(wrongMax == 0);
    CHECK(wrongSum == 0);

    // The row kernel from these partials against its own first pass over the same logits: targets from
    // labels with a tenth ignored, the gradient written (and, without smoothing, forward only too).
    std::uniform_int_distribution<int64_t> label(0, c.n - 1);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<int64_t> labels(c.m);
    for (auto& l : labels) l = unit(g) < 0.1 ? -100 : label(g);
    lmfuse::Problem problem;
    problem.tokens = c.m;
    problem.hidden_dim = c.k;
    problem.vocab = c.n;
    problem.dtype = bf16;
    problem.label_type = IndexType::Int64;
    DeviceBuffer labelsDevice(c.m * 8), targets(c.m * 4), scalars(sizeof(backend::Scalars)), report(256);
    labelsDevice.upload(labels.data());
    TEST_CUDA(cudaDeviceSynchronize());
    problem.labels = labelsDevice.get();
    backend::launchPrepare(problem, lmfuse::Options{}, targets.as<int32_t>(), scalars.as<backend::Scalars>(),
                           report.as<lmfuse::detail::LabelErrorReport>(), stream);
    rows.targets = targets.as<int32_t>();
    rows.scalars = scalars.as<backend::Scalars>();
    for (bool gradient : {true, false}) {
      if (!gradient && c.smoothing != 0.0f) continue;  // a forward-only pass with smoothing reads its rows
      CAPTURE(gradient);
      DeviceBuffer ownLogits(got.size()), fromLogits(got.size()), ownLse(c.m * 4), fromLse(c.m * 4),
          ownLoss(c.m * 4), fromLoss(c.m * 4);
      ownLogits.upload(got.data());
      fromLogits.upload(got.data());
      TEST_CUDA(cudaDeviceSynchronize());
      backend::RowPartials fromPartials{fromLogits.as<char>() + logitsBytes, int64_t(statisticsBytes)};
      backend::launchRowLoss(bf16, ownLogits.get(), rows, gradient, nullptr, ownLoss.as<float>(), ownLse.as<float>(),
                             nullptr, nullptr, stream);
      backend::launchRowLoss(bf16, fromLogits.get(), rows, gradient, &fromPartials, fromLoss.as<float>(),
                             fromLse.as<float>(), nullptr, nullptr, stream);
      TEST_CUDA(cudaStreamSynchronize(stream));
      const std::vector<double> lseOwn = floatsToDoubles(ownLse.download()), lseFrom = floatsToDoubles(fromLse.download());
      const std::vector<double> lossOwn = floatsToDoubles(ownLoss.download()),
                                lossFrom = floatsToDoubles(fromLoss.download());
      CHECK(relativeError(lseFrom, lseOwn) < 1e-6);
      CHECK(relativeError(lossFrom, lossOwn) < 1e-5);
      int64_t nonzeroLoss = 0;
      for (double l : lossOwn) nonzeroLoss += l != 0.0;
      CHECK(nonzeroLoss > c.m / 2);
      if (!gradient) continue;
      const std::vector<double> dxOwn = toDoubles(ownLogits.download(), bf16, std::size_t(c.m * c.n), c.n, ldc),
                                dxFrom = toDoubles(fromLogits.download(), bf16, std::size_t(c.m * c.n), c.n, ldc);
      CHECK(relativeError(dxFrom, dxOwn) < 1e-3);
    }
  }
  TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_CASE("the numerators epilogue: exp(scale·z − shift) of the fp32 sums, capped, and their partials, against fp64",
          "[cuda][tile_gemm]") {
  if (!tileProductHere()) return;
  struct NumeratorsCase {
    int64_t m, n, k;
    float logitScale;
  };
  const NumeratorsCase cases[] = {
      {2100, 5003, 576, 1.0f},  // several tiles per consumer, a last block of 139 columns
      {2100, 3003, 128, 1.0f},  // two k-blocks (fewer than the ring's stages), a last block of 187 columns
      {129, 257, 64, 2.0f},     // a last block of one column, a row past a tile, a logit scale
  };
  const DType bf16 = DType::BFloat16;
  const double cap = std::exp2(double(backend::kNumeratorExponentCap));
  auto& g = rng();
  std::uniform_real_distribution<float> unitShift(-3.0f, 3.0f);
  cudaStream_t stream;
  TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const NumeratorsCase& c : cases) {
    CAPTURE(c.m, c.n, c.k, c.logitScale);
    const int64_t blocks = (c.n + 255) / 256, ldc = (c.n + 7) / 8 * 8;
    const std::size_t logitsBytes = std::size_t(c.m * ldc) * 2, statisticsBytes = std::size_t(blocks) * 8;
    Stored hidden = randomStored(g, bf16, std::size_t(c.m * c.k), 1.0);
    Stored weight = randomStored(g, bf16, std::size_t(c.n * c.k), 0.3);
    std::vector<float> shift(c.m);
    for (auto& s : shift) s = unitShift(g);
    shift[5] = -200.0f;  // every numerator of row 5 beyond the cap
    DeviceBuffer hiddenDevice(hidden.raw.size()), weightDevice(weight.raw.size()), shiftDevice(shift.size() * 4),
        out(logitsBytes + std::size_t(c.m) * statisticsBytes);
    hiddenDevice.upload(hidden.raw.data());
    weightDevice.upload(weight.raw.data());
    shiftDevice.upload(shift.data());
    out.poison();
    TEST_CUDA(cudaDeviceSynchronize());
    backend::TileStatistics numerators;
    numerators.rows.vocab = c.n;
    numerators.rows.columns = c.n;
    numerators.rows.rows = c.m;
    numerators.rows.ld = ldc;
    numerators.rows.logitScale = c.logitScale;
    numerators.partials = out.as<char>() + logitsBytes;
    numerators.stride = int64_t(statisticsBytes);
    numerators.shift = shiftDevice.as<float>();
    backend::tileGemm({c.m, c.n, c.k, c.k, c.k, ldc}, hiddenDevice.get(), weightDevice.get(), out.get(), stream,
                      nullptr, &numerators);
    TEST_CUDA(cudaStreamSynchronize(stream));
    const std::vector<unsigned char> got = out.download();

    int64_t wrongValue = 0, wrongMax = 0, wrongSum = 0, capped = 0;
    for (int64_t r = 0; r < c.m; ++r)
      for (int64_t b = 0; b < blocks; ++b) {
        double most = 0, sum = 0;
        for (int64_t j = b * 256; j < std::min(c.n, (b + 1) * 256); ++j) {
          double z = 0;
          for (int64_t q = 0; q < c.k; ++q) z += hidden.values[r * c.k + q] * weight.values[j * c.k + q];
          const double want = std::min(std::exp(double(c.logitScale) * z - double(shift[r])), cap);
          const double stored = loadStored(got, bf16, std::size_t(r * ldc + j));
          wrongValue += !(std::fabs(stored - want) <= 5e-3 * want);
          capped += stored >= cap * (1.0 - 1.0 / 256);
          most = std::max(most, want);
          sum += want;
        }
        float partial[2];
        std::memcpy(partial, &got[logitsBytes + std::size_t(r) * statisticsBytes + std::size_t(b) * 8], 8);
        wrongMax += !(std::fabs(partial[0] - most) <= 5e-3 * most);
        wrongSum += !(std::fabs(partial[1] - sum) <= 5e-3 * sum);
      }
    CHECK(wrongValue == 0);
    CHECK(wrongMax == 0);
    CHECK(wrongSum == 0);
    CHECK(capped >= c.n);  // row 5 at least
  }
  TEST_CUDA(cudaStreamDestroy(stream));
}
