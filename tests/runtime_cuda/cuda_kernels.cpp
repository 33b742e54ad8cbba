// Every kernel of the CUDA backend that uses shared memory or a barrier, launched directly on a stream:
// outside any CUDA graph and without cuBLASLt, so compute-sanitizer's racecheck and synccheck (which stop
// at the graphs' conditional nodes and at cuBLASLt's Hopper kernels, scripts/gpu/runtime.sh) see them.
// Each result is checked against the same computation on the host.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>

#include "cuda/compaction.h"
#include "cuda/conditional.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/numerators.h"
#include "harness.h"

using namespace lmfuse_test;
namespace backend = lmfuse::detail::cuda;

namespace {

std::vector<int64_t> downloadInt64(const DeviceBuffer& buffer) {
  std::vector<unsigned char> raw = buffer.download();
  std::vector<int64_t> out(raw.size() / 8);
  std::memcpy(out.data(), raw.data(), out.size() * 8);
  return out;
}

}  // namespace

TEST_CASE("each backend kernel on its own stream, outside graphs, against the host", "[cuda][kernels]") {
  if (!lmfuse::cuda_available()) {
    WARN("skipped: no CUDA device visible");
    return;
  }
  const int64_t n = 1500, d = 72, v = 1003, ld = 1008;  // odd vocabulary, 16-byte padded rows
  const DType dtype = DType::BFloat16;
  auto& g = rng();
  std::uniform_int_distribution<int64_t> label(0, v - 1);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<int64_t> labels(n);
  for (auto& l : labels) l = unit(g) < 0.3 ? -100 : label(g);
  DeviceBuffer labelsDevice(n * 8);
  labelsDevice.upload(labels.data());
  cudaStream_t stream;
  TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // Targets, count and scalars (one block of 1024 threads, shared-memory reduction).
  lmfuse::Problem problem;
  problem.tokens = n;
  problem.hidden_dim = d;
  problem.vocab = v;
  problem.dtype = dtype;
  problem.labels = labelsDevice.get();
  problem.label_type = IndexType::Int64;
  lmfuse::Options options;
  DeviceBuffer targets(n * 4), scalars(sizeof(backend::Scalars)), report(256), rowLoss(n * 4), lse(n * 4), order(n * 8);
  for (DeviceBuffer* b : {&targets, &scalars, &report, &rowLoss, &lse, &order}) b->poison();
  backend::launchPrepare(problem, options, targets.as<int32_t>(), scalars.as<backend::Scalars>(),
                         report.as<lmfuse::detail::LabelErrorReport>(), stream);
  // The stable order of the labelled tokens (one block, shared-memory scan).
  backend::launchCompact(targets.as<int32_t>(), n, order.as<int64_t>(), scalars.as<backend::Scalars>(),
                         rowLoss.as<float>(), lse.as<float>(), nullptr, nullptr, stream);
  TEST_CUDA(cudaStreamSynchronize(stream));
  std::vector<int64_t> wantOrder;
  for (int64_t i = 0; i < n; ++i)
    if (labels[i] != -100) wantOrder.push_back(i);
  const int64_t count = int64_t(wantOrder.size());
  backend::Scalars s;
  TEST_CUDA(cudaMemcpy(&s, scalars.get(), sizeof s, cudaMemcpyDeviceToHost));
  CHECK(s.validCount == count);
  CHECK(s.compactCount == count);
  std::vector<int64_t> gotOrder = downloadInt64(order);
  for (int64_t j = 0; j < n; ++j) REQUIRE(gotOrder[j] == (j < count ? wantOrder[j] : -1));

  // Gather the labelled rows and scatter them back.
  Stored hidden = randomStored(g, dtype, std::size_t(n * d), 1.0);
  DeviceBuffer hiddenDevice(hidden.raw.size()), gathered(std::size_t(n * d) * 2), scattered(hidden.raw.size());
  hiddenDevice.upload(hidden.raw.data());
  gathered.poison();
  TEST_CUDA(cudaMemset(scattered.get(), 0, scattered.bytes()));
  backend::launchGatherRows(dtype, hiddenDevice.get(), d, order.as<int64_t>(), 0, n, d, gathered.get(), stream);
  backend::launchScatterRows(dtype, gathered.get(), order.as<int64_t>(), 0, n, d, scattered.get(), d, stream);
  backend::launchZeroIgnoredRows(dtype, targets.as<int32_t>(), n, d, hiddenDevice.get(), d, stream);
  TEST_CUDA(cudaStreamSynchronize(stream));
  CHECK(scattered.download() == hiddenDevice.download());  // labelled rows back in place, the others zero

  // Row kernel over the labelled rows' logits (shared-memory block reduction), then the slice kernel
  // over slices of other copies: each slice's dx is the row kernel's, bitwise, and the columns around it
  // keep their logits. The widths give the slice kernel 64 threads per row (8 rows a block), 32 with a
  // tail of single elements (16 rows a block), and the whole block.
  Stored logits = randomStored(g, dtype, std::size_t(count * ld), 3.0);
  DeviceBuffer rows(logits.raw.size());
  rows.upload(logits.raw.data());
  struct SliceCase {
    int64_t first, columns;
  };
  const SliceCase sliceCases[] = {{200, 304}, {8, 20}, {0, v}};
  std::vector<DeviceBuffer> slices;
  for (std::size_t i = 0; i < std::size(sliceCases); ++i) {
    slices.emplace_back(logits.raw.size());
    slices.back().upload(logits.raw.data());
  }
  // A copy from pageable memory may still be under way when cudaMemcpy returns; `stream` does not wait for it.
  TEST_CUDA(cudaDeviceSynchronize());
  backend::RowParams p;
  p.vocab = v;
  p.columns = v;
  p.ld = ld;
  p.rows = count;
  p.rowTokens = order.as<int64_t>();
  p.targets = targets.as<int32_t>();
  p.scalars = scalars.as<backend::Scalars>();
  backend::launchRowLoss(dtype, rows.get(), p, true, nullptr, rowLoss.as<float>(), lse.as<float>(), nullptr, nullptr, stream);
  for (std::size_t i = 0; i < slices.size(); ++i) {
    backend::RowParams sp = p;
    sp.columnBegin = sliceCases[i].first;
    sp.columns = sliceCases[i].columns;
    backend::launchSliceGradient(dtype, static_cast<char*>(slices[i].get()) + sliceCases[i].first * 2, sp,
                                 lse.as<float>(), stream);
  }
  DeviceBuffer columnSum(v * 4), loss(4);
  backend::launchColumnSum(dtype, rows.get(), count, v, ld, columnSum.as<float>(), false, stream);
  backend::launchReduceLoss(rowLoss.as<float>(), n, scalars.as<backend::Scalars>(), loss.as<float>(), stream);
  TEST_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> gotLse = floatsToDoubles(lse.download()), gotRowLoss = floatsToDoubles(rowLoss.download());
  double wantLoss = 0;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t token = wantOrder[r];
    double m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < v; ++c) m = std::max(m, logits.values[r * ld + c]);
    for (int64_t c = 0; c < v; ++c) sum += std::exp(logits.values[r * ld + c] - m);
    const double wantLse = m + std::log(sum);
    REQUIRE(std::abs(gotLse[token] - wantLse) <= 1e-4 * std::max(1.0, std::abs(wantLse)));
    wantLoss += wantLse - logits.values[r * ld + labels[token]];
  }
  const std::vector<unsigned char> dx = rows.download();
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const SliceCase& c = sliceCases[i];
    INFO("slice of " << c.columns << " columns from " << c.first);
    const std::vector<unsigned char> sliced = slices[i].download();
    int64_t differ = 0, firstRow = -1, firstColumn = -1;
    for (int64_t r = 0; r < count; ++r)
      for (int64_t column = 0; column < ld; ++column) {
        const bool inside = column >= c.first && column < c.first + c.columns;
        const unsigned char* want = inside ? &dx[2 * (r * ld + column)] : &logits.raw[2 * (r * ld + column)];
        if (std::memcmp(want, &sliced[2 * (r * ld + column)], 2) == 0) continue;
        if (differ++ == 0) firstRow = r, firstColumn = column;
      }
    INFO(differ << " elements differ, the first at row " << firstRow << " of " << count << ", column " << firstColumn);
    CHECK(differ == 0);
  }
  // Softmax minus one-hot sums to zero over each row; the column sums add up to about zero too.
  const std::vector<double> sums = floatsToDoubles(columnSum.download());
  double total = 0, wantColumn0 = 0;
  for (int64_t r = 0; r < count; ++r) wantColumn0 += loadStored(dx, dtype, std::size_t(r * ld));
  for (double c : sums) total += c;
  CHECK(std::abs(total) <= 1e-2);
  CHECK(std::abs(sums[0] - wantColumn0) <= 1e-5);
  float gotLoss;
  TEST_CUDA(cudaMemcpy(&gotLoss, loss.get(), 4, cudaMemcpyDeviceToHost));
  CHECK(std::abs(gotLoss - wantLoss / double(count)) <= 1e-4 * std::abs(wantLoss / double(count)));
  (void)gotRowLoss;

  // Conversion of an fp32 accumulator (with the fp32 add) and the in-place scale.
  const int64_t cr = 37, cc = 100;
  std::vector<float> acc(cr * cc), base(cr * cc, 1.0f);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  for (auto& a : acc) a = value(g);
  DeviceBuffer accDevice(acc.size() * 4), out(acc.size() * 2), also(acc.size() * 4), factor(4);
  accDevice.upload(acc.data());
  also.upload(base.data());
  const float two = 2.0f;
  factor.upload(&two);
  backend::launchConvert(dtype, accDevice.as<float>(), cr, cc, out.get(), cc, also.as<float>(), stream);
  backend::launchScale(dtype, out.get(), cr, cc, cc, factor.as<float>(), stream);
  TEST_CUDA(cudaStreamSynchronize(stream));
  const std::vector<unsigned char> converted = out.download();
  const std::vector<double> added = floatsToDoubles(also.download());
  std::vector<unsigned char> scratch(2);
  for (std::size_t i = 0; i < acc.size(); ++i) {
    REQUIRE(loadStored(converted, dtype, i) == 2.0 * storeRounded(scratch, dtype, 0, acc[i]));
    REQUIRE(added[i] == double(1.0f + acc[i]));
  }
  TEST_CUDA(cudaStreamDestroy(stream));
}

// The two kinds of CUDA graph the backend builds, each reduced to one backend kernel, so that the
// sanitizers' behaviour on graphs can be told apart from their behaviour on the backend's kernels: a
// plain captured graph, and a captured SWITCH node whose branch a kernel picks (compaction's mechanism).
namespace {

struct GraphFixture {
  cudaStream_t stream = nullptr, body = nullptr;
  DeviceBuffer values{64 * 4}, factors{4 * 4}, scalars{sizeof(backend::Scalars)};
  GraphFixture() {
    TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TEST_CUDA(cudaStreamCreateWithFlags(&body, cudaStreamNonBlocking));
    const float f[4] = {2.0f, 3.0f, 4.0f, 5.0f};
    factors.upload(f);
  }
  ~GraphFixture() {
    cudaStreamDestroy(stream);
    cudaStreamDestroy(body);
  }
  void reset() {
    std::vector<float> ones(64, 1.0f);
    values.upload(ones.data());
  }
  // Instantiates and launches what `record` enqueues under capture on `stream`; returns values[0].
  template <class F>
  float launch(F&& record) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    record();
    TEST_CUDA(cudaStreamEndCapture(stream, &graph));
    TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    TEST_CUDA(cudaGraphLaunch(exec, stream));
    TEST_CUDA(cudaStreamSynchronize(stream));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    std::vector<double> got = floatsToDoubles(values.download());
    return float(got[0]);
  }
};

}  // namespace

TEST_CASE("a plain captured graph of a backend kernel", "[cuda][graph][plain]") {
  if (!lmfuse::cuda_available()) return;
  GraphFixture f;
  f.reset();
  CHECK(f.launch([&] { backend::launchScale(DType::Float32, f.values.get(), 1, 64, 64, f.factors.as<float>(), f.stream); }) ==
        2.0f);
}

TEST_CASE("a graph whose SWITCH node's branch a kernel picks", "[cuda][graph][conditional]") {
  if (!lmfuse::cuda_available()) return;
  GraphFixture f;
  for (long long count : {1LL, 70LL, 150LL}) {  // granule 64, three branches: 0, 1, 2
    INFO("count " << count);
    backend::Scalars s{};
    s.compactCount = count;
    f.scalars.upload(&s);
    f.reset();
    const float got = f.launch([&] {
      backend::Scalars* scalars = f.scalars.as<backend::Scalars>();
      const backend::Condition branch = backend::newCondition(f.stream, &scalars->branch);
      REQUIRE(branch.graph);
      backend::launchSelectBranch(branch, 64, 3, 0, scalars, f.stream);
      backend::enqueueSwitch(f.stream, branch, 3, f.body, [&](int r, cudaStream_t s) {
        backend::launchScale(DType::Float32, f.values.get(), 1, 64, 64, f.factors.as<float>() + r, s);
      });
    });
    CHECK(got == float(2 + (count - 1) / 64));
  }
}

// Eager conditionals (conditional.h): on a stream that is not being captured, the kernel still decides and
// the host enqueues only the chosen body, on that stream; an IF's body runs for a nonzero value only.
TEST_CASE("an eager SWITCH and IF run the body the kernel picked", "[cuda][kernels]") {
  if (!lmfuse::cuda_available()) return;
  GraphFixture f;
  backend::Scalars* scalars = f.scalars.as<backend::Scalars>();
  {
    ScopedEnvironment graphsOnly("LMFUSE_CUDA_EAGER", nullptr);  // without the variable, never on the host
    CHECK_THROWS_WITH(backend::newCondition(f.stream, &scalars->branch), Catch::Contains("not being captured"));
  }
  ScopedEnvironment eagerCalls("LMFUSE_CUDA_EAGER", "1");
  for (long long count : {1LL, 70LL, 150LL, 0LL}) {
    INFO("count " << count);
    backend::Scalars s{};
    s.compactCount = count;
    s.redo = count > 100 ? 1u : 0u;
    f.scalars.upload(&s);
    f.reset();
    const backend::Condition branch = backend::newCondition(f.stream, &scalars->branch);
    REQUIRE_FALSE(branch.graph);
    backend::launchSelectBranch(branch, 64, 3, 0, scalars, f.stream);
    std::vector<int> ran;
    backend::enqueueSwitch(f.stream, branch, 3, f.body, [&](int r, cudaStream_t on) {
      ran.push_back(r);
      CHECK(on == f.stream);
      backend::launchScale(DType::Float32, f.values.get(), 1, 64, 64, f.factors.as<float>() + r, on);
    });
    const int want = count > 0 ? int((count - 1) / 64) : 0;
    CHECK(ran == std::vector<int>{want});
    const backend::Condition redo = backend::newCondition(f.stream, &scalars->redo);
    REQUIRE_FALSE(redo.graph);
    backend::launchRedoCondition(redo, scalars, f.stream);
    bool redone = false;
    backend::enqueueIf(f.stream, redo, f.body, [&](cudaStream_t on) {
      redone = true;
      CHECK(on == f.stream);
      backend::launchScale(DType::Float32, f.values.get(), 1, 64, 64, f.factors.as<float>() + 3, on);
    });
    TEST_CUDA(cudaStreamSynchronize(f.stream));
    CHECK(redone == (count > 100));
    const std::vector<double> got = floatsToDoubles(f.values.download());
    CHECK(got[0] == double(2 + want) * (redone ? 5.0 : 1.0));
    backend::Scalars after{};
    std::memcpy(&after, f.scalars.download().data(), sizeof after);
    CHECK(after.redone == (redone ? 1u : 0u));
  }
}

// What the sanitizers meet beyond the backend's own kernels, each alone: one cuBLASLt product (Hopper
// GEMM kernels, no lmfuse kernel, no graph), and a whole call that records no graph (uncompacted), in the
// default and the lean low-memory schedules.
TEST_CASE("one cuBLASLt product of the backend, eagerly", "[cuda][gemm]") {
  if (!lmfuse::cuda_available()) return;
  const int64_t m = 1024, n = 2048, k = 512;
  auto& g = rng();
  Stored a = randomStored(g, DType::BFloat16, std::size_t(m * k), 1.0), b = randomStored(g, DType::BFloat16, std::size_t(k * n), 1.0);
  DeviceBuffer da(a.raw.size()), db(b.raw.size()), dc(std::size_t(m * n) * 4), workspace(std::size_t(32) << 20);
  da.upload(a.raw.data());
  db.upload(b.raw.data());
  dc.poison();  // initcheck does not see the stores of cuBLASLt's Hopper kernels (runtime/bench/NOTES.md)
  cublasLtHandle_t handle;
  REQUIRE(cublasLtCreate(&handle) == CUBLAS_STATUS_SUCCESS);
  // C[m, n] = Aᵀ·B with A stored k × m and B k × n (column-major), fp32 out.
  backend::GemmShape shape{CUDA_R_16BF, CUDA_R_32F, true, false, m, n, k, k, k, m};
  backend::gemm(handle, shape, 1.0f, da.get(), db.get(), 0.0f, dc.get(), workspace.get(), workspace.bytes(), nullptr);
  TEST_CUDA(cudaDeviceSynchronize());
  const std::vector<double> c = floatsToDoubles(dc.download());
  for (int64_t i : {int64_t(0), m - 1}) {
    for (int64_t j : {int64_t(0), n - 1}) {
      double want = 0;
      for (int64_t l = 0; l < k; ++l) want += a.values[i * k + l] * b.values[j * k + l];
      CHECK(std::abs(c[j * m + i] - want) <= 1e-3 * (1 + std::abs(want)));
    }
  }
  cublasLtDestroy(handle);
}
