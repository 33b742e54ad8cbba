// Results that must not depend on how the work is cut: chunk size, memory schedule, thread count.
// The reference sums in a fixed order whatever the cut, so these are bitwise comparisons (stronger
// than the 1e-12 the contract promises).
#include <catch2/catch.hpp>

#include "expect.h"
#include "harness.h"

namespace lmfuse::test {
namespace {

Case invariance_case(std::mt19937_64& rng, int64_t tokens, int64_t dim, int64_t vocab) {
  int64_t n = tokens;
  Case c = random_case(rng, n, dim, vocab, DType::Float32, true, 0.3);
  c.options.softcap = 1.7;
  c.options.label_smoothing = 0.05;
  c.options.z_loss = 1e-3;
  c.options.shift.kind = ShiftKind::Segments;
  c.cu_seqlens = {0, n / 3, n / 3, n - 1};
  c.accumulate_init.assign(std::size_t(c.vocab * c.dim), 0.25f);
  c.store();
  return c;
}

Case invariance_case(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> tokens(7, 20), dim(3, 17), vocab(5, 40);
  return invariance_case(rng, tokens(rng), dim(rng), vocab(rng));
}

const Wants kAll{true, true, true, true, true};

}  // namespace

TEST_CASE("Chunk size does not change the result", "[runtime][cpu]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (Reduction reduction : {Reduction::Mean, Reduction::None}) {
    Case c = invariance_case(rng);
    c.options.reduction = reduction;
    Result whole = run_runtime(c, RunConfig{kAll, 0, c.tokens});
    for (int64_t chunk : {int64_t(1), int64_t(3), c.tokens + 5}) {
      INFO("chunk_tokens " << chunk << ", N=" << c.tokens);
      require_bitwise(run_runtime(c, RunConfig{kAll, 0, chunk}), whole);
    }
    // A budget too small for more than a token or two picks small chunks by itself.
    RunConfig tiny{kAll, 0, 0, MemoryMode::Auto, 64};
    require_bitwise(run_runtime(c, tiny), whole);
    require_matches(whole, brute_force(c, kAll), c.dtype);
  }
}

TEST_CASE("Low-memory vocabulary slices give the accumulating schedule's result", "[runtime][cpu]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  Case c = invariance_case(rng);
  Result accumulate = run_runtime(c, RunConfig{kAll, 0, 4, MemoryMode::Accumulate});
  // With a budget of a few hundred bytes the slice holds a single vocabulary row.
  for (std::size_t budget : {std::size_t(1), std::size_t(4096), std::size_t(1) << 30}) {
    INFO("budget " << budget);
    require_bitwise(run_runtime(c, RunConfig{kAll, 0, 3, MemoryMode::LowMemory, budget}), accumulate);
  }
  Wants bias_only{false, false, false, true, false};
  require_bitwise(run_runtime(c, RunConfig{bias_only, 0, 2, MemoryMode::LowMemory, 1}),
                  run_runtime(c, RunConfig{bias_only, 0, 5, MemoryMode::Accumulate}));

  // Mixed precision: the fp32 parameter gradients of a bf16 problem, the same in both schedules and
  // within fp32 rounding of the fp64 brute force (a bf16 round trip would be 2^16 times further).
  Case half = random_case(rng, 9, 5, 11, DType::BFloat16, true);
  Wants mixed = kAll;
  mixed.fp32_param_grads = true;
  Result mixed_accumulate = run_runtime(half, RunConfig{mixed, 0, 4, MemoryMode::Accumulate});
  require_bitwise(run_runtime(half, RunConfig{mixed, 0, 3, MemoryMode::LowMemory, 1}), mixed_accumulate);
  require_matches(mixed_accumulate, brute_force(half, mixed), DType::BFloat16, DType::Float32);
}

TEST_CASE("Thread count does not change a single bit", "[runtime][cpu]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  // Large enough that every loop of the reference passes the work threshold of a parallel region
  // (cpu/parallel.h) in the fused schedule; with 48-token chunks and a 128 KiB budget the sliced
  // schedule takes vocabulary slices of about 54 rows, whose logits and accumulator loops pass it too.
  Case c = invariance_case(rng, 48, 40, 200);
  Result one = run_runtime(c, RunConfig{kAll, 1});
  for (int threads : {2, 3, 0}) {
    INFO("threads " << threads);
    require_bitwise(run_runtime(c, RunConfig{kAll, threads}), one);
    require_bitwise(run_runtime(c, RunConfig{kAll, threads, 48, MemoryMode::LowMemory, std::size_t(1) << 17}), one);
  }
}

TEST_CASE("workspace_size follows the budget and the memory mode", "[runtime][cpu]") {
  Problem problem;
  problem.tokens = 4096;
  problem.hidden_dim = 512;
  problem.vocab = 32000;
  Options options;
  Context context;
  std::size_t forward = workspace_size(problem, options, false, context);
  std::size_t fused = workspace_size(problem, options, true, context);
  REQUIRE(forward <= (std::size_t(256) << 20));  // the default CPU budget
  REQUIRE(fused <= (std::size_t(256) << 20));
  options.memory = MemoryMode::LowMemory;
  options.workspace_budget = std::size_t(8) << 20;
  std::size_t low = workspace_size(problem, options, true, context);
  REQUIRE(low <= options.workspace_budget);
  REQUIRE(low < std::size_t(problem.vocab * problem.hidden_dim) * sizeof(double));
  options.memory = MemoryMode::Accumulate;  // the accumulator is kept whatever the budget
  REQUIRE(workspace_size(problem, options, true, context) >= std::size_t(problem.vocab * problem.hidden_dim) * 8);
  options.memory = MemoryMode::Auto;
  options.chunk_tokens = 1;
  options.workspace_budget = 0;
  REQUIRE(workspace_size(problem, options, false, context) < std::size_t(problem.vocab + problem.hidden_dim) * 8 + 4096);
}

}  // namespace lmfuse::test
