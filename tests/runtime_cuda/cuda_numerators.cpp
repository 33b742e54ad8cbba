// The numerators schedule (runtime/src/cuda/numerators.h) inside the call: that it runs where the plan
// allows it (the logits buffer holds the target-relative numerators, not dx), that a row whose numerators
// overflow has its chunk redone the usual way, and that an ignored row's overflow needs no redo; each result
// against the fp64 reference. Needs the tile product (compute capability 9.0); skips elsewhere.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "cuda/device_state.h"
#include "cuda/kernels.h"
#include "cuda/plan.h"
#include "scenario.h"

using namespace lmfuse_test;
namespace rt = lmfuse::detail::cuda;

namespace {

bool skipWithoutTileProduct() {
  if (lmfuse::cuda_available() && rt::deviceState().tileProduct) return false;
  WARN("skipped: no device that runs the tile product");
  return true;
}

Spec numeratorsSpec() {
  Spec spec;
  spec.n = 300;
  spec.d = 64;
  spec.v = 1000;
  spec.options.chunk_tokens = 0;    // one chunk: the buffer holds every token after the call
  spec.options.compact = false;     // buffer row r is token r
  return spec;
}

// The plan of the call the scenario makes (its outputs decide the layout).
rt::Plan planOf(const Scenario& scenario) {
  const lmfuse::Outputs outputs = scenario.outputs();
  return rt::makePlan(scenario.problem(), scenario.options(), &outputs, true);
}

rt::Scalars scalarsAfter(const Scenario& scenario) {
  const rt::Plan plan = planOf(scenario);
  std::vector<unsigned char> bytes(sizeof(rt::Scalars));
  TEST_CUDA(cudaMemcpy(bytes.data(), static_cast<const char*>(scenario.workspace().data) + plan.scalars.offset,
                       bytes.size(), cudaMemcpyDeviceToHost));
  rt::Scalars scalars;
  std::memcpy(&scalars, bytes.data(), sizeof scalars);
  return scalars;
}

void checkAgainstReference(const Result& got, const Reference& want) {
  compare("loss", got.loss, want.loss, 5e-3);
  compare("lse", got.lse, want.lse, 5e-3);
  compare("grad_hidden", got.gradHidden, want.gradHidden, 2e-2);
  compare("grad_weight", got.gradWeight, want.gradWeight, 2e-2);
}

}  // namespace

TEST_CASE("the numerators schedule runs where the plan allows it: the buffer holds u', not dx", "[cuda][numerators]") {
  if (skipWithoutTileProduct()) return;
  Scenario scenario(numeratorsSpec());
  const rt::Plan plan = planOf(scenario);
  REQUIRE(plan.numerators);
  REQUIRE(plan.singleChunk);
  Result got = scenario.run();
  checkAgainstReference(got, scenario.expected());
  CHECK(scalarsAfter(scenario).redone == 0);

  // Each labelled row of the buffer: u_v = exp(z_v − z_y) for v ≠ y, and 1 − Σu at the target.
  const Spec& spec = scenario.spec();
  const int64_t d = spec.d, v = spec.v;
  std::vector<unsigned char> buffer(std::size_t(spec.n * plan.logitsLd) * 2);
  TEST_CUDA(cudaMemcpy(buffer.data(), static_cast<const char*>(scenario.workspace().data) + plan.logits.offset,
                       buffer.size(), cudaMemcpyDeviceToHost));
  const auto& h = scenario.hiddenValues();
  const auto& w = scenario.weightValues();
  int64_t rows = 0;
  double worst = 0.0;
  for (int64_t r = 0; r < spec.n; ++r) {
    const int64_t y = scenario.labels()[r];
    if (y < 0) continue;
    ++rows;
    std::vector<double> z(v);
    for (int64_t c = 0; c < v; ++c) {
      double sum = 0.0;
      for (int64_t k = 0; k < d; ++k) sum += h[r * d + k] * w[c * d + k];
      z[c] = sum;
    }
    double total = 0.0;
    for (int64_t c = 0; c < v; ++c) total += std::exp(z[c] - z[y]);
    for (int64_t c = 0; c < v; ++c) {
      const double want = c == y ? 1.0 - total : std::exp(z[c] - z[y]);
      const double stored = loadStored(buffer, DType::BFloat16, std::size_t(r * plan.logitsLd + c));
      worst = std::max(worst, std::abs(stored - want) / std::max(std::abs(want), 1e-30));
    }
  }
  REQUIRE(rows > 0);
  CHECK(worst < 5e-3);  // their bf16 rounding: from the fp32 sums, not from bf16 logits (up to |z|·2^-9 more)
}

TEST_CASE("a labelled row whose numerators overflow has its chunk redone the usual way", "[cuda][numerators][redo]") {
  if (skipWithoutTileProduct()) return;
  for (bool compact : {false, true}) {
    INFO((compact ? "compacted, chunks of 128" : "one chunk, not compacted"));
    Spec spec = numeratorsSpec();
    spec.loudToken = 7;
    spec.loudScale = 24.0;  // its logit at V / 2 about 120, the others within about ±50: far beyond the cap's 66.5
    spec.options.compact = compact;
    spec.options.chunk_tokens = compact ? 128 : 0;
    Scenario scenario(spec);
    Result got = scenario.run();
    checkAgainstReference(got, scenario.expected());
    CHECK(scalarsAfter(scenario).redone == 1);  // the loud token's chunk, no other
  }
}

TEST_CASE("an ignored row's huge logits are capped without a redo", "[cuda][numerators]") {
  if (skipWithoutTileProduct()) return;
  Spec spec = numeratorsSpec();
  spec.loudToken = 7;
  spec.loudScale = 24.0;
  spec.loudTokenLabelled = false;  // its numerators reach the cap, but its c is 0
  Scenario scenario(spec);
  Result got = scenario.run();
  checkAgainstReference(got, scenario.expected());
  CHECK(scalarsAfter(scenario).redone == 0);
  for (int64_t k = 0; k < spec.d; ++k) CHECK(got.gradHidden[std::size_t(7 * spec.d + k)] == 0.0);
}
