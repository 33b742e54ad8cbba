// The numerators schedule (runtime/src/cuda/numerators.h) inside the call: that it runs where the plan
// allows it (the logits buffer holds the target-relative numerators, not dx), that a row whose numerators
// overflow has its chunk redone the usual way, and that an ignored row's overflow needs no redo; a pass split
// between the workspace and grad_weight's bytes (plan.h: SplitPass), and its redo; each result against the
// fp64 reference. Needs the tile product (compute capability 9.0); skips elsewhere.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cuda/device_state.h"
#include "cuda/kernels.h"
#include "cuda/plan.h"
#include "scenario.h"
#include "split_plan.h"

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

void checkAgainstReference(const Result& got, const Reference& want, bool gradHidden = true) {
  compare("loss", got.loss, want.loss, 5e-3);
  compare("lse", got.lse, want.lse, 5e-3);
  if (gradHidden) compare("grad_hidden", got.gradHidden, want.gradHidden, 2e-2);
  compare("grad_weight", got.gradWeight, want.gradWeight, 2e-2);
}

// The call with its conditional choices made on the host (conditional.h: eager conditionals; nothing
// recorded), then recorded as a graph: bitwise the same result, `redone` chunks redone each time. Returns the
// eager call's result.
Result eagerThenGraph(Scenario& scenario, unsigned redone) {
  auto& kept = recordedGraphsCleared();
  Result eager;
  {
    ScopedEnvironment eagerCalls("LMFUSE_CUDA_EAGER", "1");
    eager = scenario.run();
    CHECK(kept.empty());
    CHECK(scalarsAfter(scenario).redone == redone);
  }
  if (graphsSkipped()) return eager;
  ScopedEnvironment graphCalls("LMFUSE_CUDA_EAGER", nullptr);
  requireBitwiseEqual(eager, scenario.run());
  CHECK(kept.size() == 1);
  CHECK(scalarsAfter(scenario).redone == redone);
  return eager;
}

// The largest relative error of the stored numerators u' against fp64: buffer row r holds token
// tokenOfRow[r] (labelled rows only are checked) over the columns [0, columns), `ld` bf16 elements a row:
// u_v = exp(z_v − z_y) for v ≠ y, and 1 − Σu at the target. `rows` counts the rows checked.
double worstNumeratorError(const Scenario& scenario, const std::vector<unsigned char>& buffer, int64_t ld,
                           int64_t columns, const std::vector<int64_t>& tokenOfRow, int64_t& rows) {
  const int64_t d = scenario.spec().d, v = scenario.spec().v;
  const auto& h = scenario.hiddenValues();
  const auto& w = scenario.weightValues();
  double worst = 0.0;
  rows = 0;
  for (std::size_t r = 0; r < tokenOfRow.size(); ++r) {
    const int64_t token = tokenOfRow[r], y = scenario.labels()[token];
    if (y < 0) continue;
    ++rows;
    std::vector<double> z(v);
    for (int64_t c = 0; c < v; ++c) {
      double sum = 0.0;
      for (int64_t k = 0; k < d; ++k) sum += h[token * d + k] * w[c * d + k];
      z[c] = sum;
    }
    double total = 0.0;
    for (int64_t c = 0; c < v; ++c) total += std::exp(z[c] - z[y]);
    for (int64_t c = 0; c < columns; ++c) {
      const double want = c == y ? 1.0 - total : std::exp(z[c] - z[y]);
      const double stored = loadStored(buffer, DType::BFloat16, r * std::size_t(ld) + std::size_t(c));
      worst = std::max(worst, std::abs(stored - want) / std::max(std::abs(want), 1e-30));
    }
  }
  return worst;
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

  // Each labelled row of the buffer holds u' (buffer row r is token r).
  const Spec& spec = scenario.spec();
  std::vector<unsigned char> buffer(std::size_t(spec.n * plan.logitsLd) * 2);
  TEST_CUDA(cudaMemcpy(buffer.data(), static_cast<const char*>(scenario.workspace().data) + plan.logits.offset,
                       buffer.size(), cudaMemcpyDeviceToHost));
  std::vector<int64_t> tokenOfRow(std::size_t(spec.n));
  for (int64_t t = 0; t < spec.n; ++t) tokenOfRow[std::size_t(t)] = t;
  int64_t rows = 0;
  const double worst = worstNumeratorError(scenario, buffer, plan.logitsLd, spec.v, tokenOfRow, rows);
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
    checkAgainstReference(eagerThenGraph(scenario, 1), scenario.expected());  // the loud token's chunk, no other
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

namespace {

// A problem whose pass of all its tokens runs split (plan.h: SplitPass) under the budget splitBudget finds.
Spec splitSpec(bool compact, bool gradHidden) {
  Spec spec;
  spec.n = 300;
  spec.d = 64;
  spec.v = 4000;
  spec.gradHidden = gradHidden;
  spec.options.compact = compact;
  spec.options.memory = lmfuse::MemoryMode::Accumulate;
  return spec;
}

// The budget and pass of a split spec; requires that the pass of its labelled tokens is split.
rt::PassPlan splitPassOf(Spec& spec) {
  Scenario probe(spec);
  const lmfuse::Outputs outputs = probe.outputs();
  spec.options.workspace_budget =
      splitBudget(probe.problem(), probe.options(), outputs, std::size_t(32) << 20, std::size_t(40) << 20);
  REQUIRE(spec.options.workspace_budget > 0);
  lmfuse::Options options = probe.options();
  options.workspace_budget = spec.options.workspace_budget;
  const rt::Plan plan = rt::makePlan(probe.problem(), options, &outputs, true);
  int64_t tokens = spec.n;
  if (plan.compact) {  // the branch of the labelled count: its first multiple of the granule, at most N
    int64_t labelled = 0;
    for (int64_t label : probe.labels()) labelled += label >= 0;
    tokens = std::min(spec.n, (labelled + plan.compactGranule - 1) / plan.compactGranule * plan.compactGranule);
  }
  const rt::PassPlan pass = rt::passPlan(plan, tokens);
  REQUIRE(pass.split.columnsA > 0);
  return pass;
}

// The split pass of splitSpec(compact, ·), with and without grad_hidden: results against fp64, and part A's
// numerators left in the workspace.
void checkSplitPass(bool compact) {
  for (bool gradHidden : {true, false}) {
    INFO((compact ? "compacted" : "not compacted") << ", grad_hidden " << gradHidden);
    Spec spec = splitSpec(compact, gradHidden);
    const rt::PassPlan pass = splitPassOf(spec);
    Scenario scenario(spec);
    Result got = eagerThenGraph(scenario, 0);  // the split's SWITCH at 0, chosen on the host and in the graph
    checkAgainstReference(got, scenario.expected(), gradHidden);

    // Part A, left in the workspace: u' of buffer row r (the r-th labelled token when compacting) over the
    // columns [0, columnsA), which only the split pass writes there (the chunks would leave fp32 sums).
    const int64_t va = pass.split.columnsA;
    std::vector<int64_t> tokenOfRow;
    for (int64_t t = 0; t < spec.n; ++t)
      if (!compact || scenario.labels()[t] >= 0) tokenOfRow.push_back(t);
    std::vector<unsigned char> part(tokenOfRow.size() * std::size_t(va) * 2);
    TEST_CUDA(cudaMemcpy(part.data(), static_cast<const char*>(scenario.workspace().data) + pass.split.aOffset,
                         part.size(), cudaMemcpyDeviceToHost));
    int64_t checked = 0;
    const double worst = worstNumeratorError(scenario, part, va, va, tokenOfRow, checked);
    REQUIRE(checked > 0);
    CHECK(worst < 5e-3);
  }
}

}  // namespace

TEST_CASE("a split pass: numerators in the workspace and in grad_weight's bytes, against fp64", "[cuda][numerators]") {
  if (skipWithoutTileProduct()) return;
  checkSplitPass(false);
  checkSplitPass(true);  // the split's SWITCH node nested in compaction's
}

TEST_CASE("a split pass with an overflowing labelled row is redone as chunks the usual way",
          "[cuda][numerators][redo]") {
  if (skipWithoutTileProduct()) return;
  for (bool compact : {false, true}) {
    INFO((compact ? "compacted" : "not compacted"));
    Spec spec = splitSpec(compact, true);
    spec.loudToken = 7;
    spec.loudScale = 24.0;
    (void)splitPassOf(spec);
    Scenario scenario(spec);
    checkAgainstReference(eagerThenGraph(scenario, 1), scenario.expected());  // the loud token's chunk, no other
  }
}

TEST_CASE("the lean plan's first pass runs the numerators schedule, redoing a chunk whose labelled row overflows",
          "[cuda][numerators][lean][redo]") {
  if (skipWithoutTileProduct()) return;
  struct Case {
    const char* name;
    bool loud, gradHidden;
  };
  const Case cases[] = {{"no overflow", false, true}, {"an overflowing row", true, true},
                        {"an overflowing row, no grad_hidden", true, false}};
  for (bool compact : {false, true})
    for (const Case& c : cases) {
      INFO((compact ? "compacted" : "not compacted") << ", " << c.name);
      Spec spec = numeratorsSpec();
      spec.options.memory = lmfuse::MemoryMode::LowMemory;
      spec.options.chunk_tokens = 128;  // pass A in chunks of 128 tokens: the loud one's chunk redone alone
      spec.options.compact = compact;
      spec.gradHidden = c.gradHidden;
      if (c.loud) {
        spec.loudToken = 7;
        spec.loudScale = 24.0;
      }
      Scenario scenario(spec);
      const rt::Plan plan = planOf(scenario);
      REQUIRE(plan.lean);
      REQUIRE(plan.numerators);
      // A redo happens only where pass A ran the numerators: the plain schedule never counts one.
      checkAgainstReference(eagerThenGraph(scenario, c.loud ? 1 : 0), scenario.expected(), c.gradHidden);
    }
}
