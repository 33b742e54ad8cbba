// The runtime's vocabulary-parallel passes (vocab_parallel.h) without LibTorch or processes: a table of
// cases whose vocabulary is split into 1 to 4 uneven shards in one process, with the caller's combination
// (max, rescaled sums, lse) written out here, against the fp64 brute force of tests/runtime (harness.h),
// which materialises every logit. Covers what the LibTorch adapter cannot reach: packed segments with
// int32 / int64 cu_seqlens, n_items through a pointer and as a value, per-token upstream gradients, bf16
// storage, the empty mean; and the shard's argument errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>

#include "expect.h"
#include "harness.h"
#include "lmfuse/vocab_parallel.h"

namespace lmfuse::test {
namespace {

/// Sorted boundaries in [0, tokens] (empty segments allowed, a tail of tokens past the last one).
std::vector<int64_t> segmentsOf(std::mt19937_64& rng, int64_t tokens) {
  std::vector<int64_t> bounds{0};
  std::uniform_int_distribution<int64_t> step(0, 5);
  while (bounds.back() < tokens - 2) bounds.push_back(std::min(tokens - 1, bounds.back() + step(rng)));
  return bounds;
}

/// Shard r of `ranks`: rows proportional to r + 1.
std::pair<int64_t, int64_t> shardOf(int64_t vocab, int rank, int ranks) {
  int64_t weights = ranks * (ranks + 1) / 2, before = rank * (rank + 1) / 2;
  auto edge = [&](int64_t w) { return vocab * w / weights; };
  return {edge(before), edge(before + rank + 1) - edge(before)};
}

/// Both passes over `ranks` shards, combined as a caller's collectives would; outputs decoded to fp64.
Result runShards(const Case& c, int ranks) {
  const Problem full = c.problem();
  Options options = c.bound_options();
  const int64_t n = c.tokens, d = c.dim, element = c.dtype == DType::Float32 ? 4 : 2;
  std::vector<std::vector<double>> stats(ranks, std::vector<double>(4 * std::size_t(n)));
  auto shardProblem = [&](int r) {
    const auto [begin, rows] = shardOf(c.vocab, r, ranks);
    Problem p = full;
    p.vocab = rows;
    p.weight = static_cast<const char*>(full.weight) + begin * (full.weight_stride ? full.weight_stride : d) * element;
    if (full.bias) p.bias = static_cast<const char*>(full.bias) + begin * element;
    return std::make_pair(p, VocabShard{begin, c.vocab});
  };
  for (int r = 0; r < ranks; ++r) {
    double* s = stats[r].data();
    const auto [p, shard] = shardProblem(r);
    vocab_parallel_statistics(p, shard, options, {s, s + n, s + 2 * n, s + 3 * n}, Workspace{}, Context{});
  }
  std::vector<double> lse(n), target(n, 0.0), logitSum(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double max = -INFINITY, sum = 0.0;
    for (int r = 0; r < ranks; ++r) max = std::max(max, stats[r][i]);
    for (int r = 0; r < ranks; ++r) {
      sum += stats[r][n + i] * std::exp(stats[r][i] - max);
      target[i] += stats[r][2 * n + i];
      logitSum[i] += stats[r][3 * n + i];
    }
    lse[i] = max + std::log(sum);
  }
  const bool none = options.reduction == Reduction::None;
  Result result;
  result.grad_hidden.assign(std::size_t(n * d), 0.0);
  for (int r = 0; r < ranks; ++r) {
    const auto [p, shard] = shardProblem(r);
    std::vector<double> loss(none ? n : 1);
    std::vector<unsigned char> gradHidden(std::size_t(n * d * element)), gradWeight(std::size_t(p.vocab * d * element)),
        gradBias(std::size_t(p.vocab * element));
    ShardOutputs out{loss.data(), gradHidden.data(), gradWeight.data(), p.bias ? gradBias.data() : nullptr};
    vocab_parallel_loss(p, shard, options, {lse.data(), target.data(), logitSum.data()}, out, Workspace{}, Context{});
    if (r == 0) result.loss = loss;
    REQUIRE(loss == (r == 0 ? result.loss : loss));
    for (int64_t i = 0; i < n * d; ++i) result.grad_hidden[i] += decode(gradHidden, c.dtype, i);
    for (int64_t i = 0; i < p.vocab * d; ++i) result.grad_weight.push_back(decode(gradWeight, c.dtype, i));
    if (p.bias)
      for (int64_t i = 0; i < p.vocab; ++i) result.grad_bias.push_back(decode(gradBias, c.dtype, i));
  }
  return result;
}

struct Row {
  const char* name;
  DType dtype;
  bool bias;
  std::function<void(Case&, std::mt19937_64&)> edit;
};

}  // namespace

TEST_CASE("vocabulary-parallel passes equal the fp64 brute force for every split", "[vocab_parallel]") {
  const std::vector<Row> table = {
      {"mean", DType::Float32, false, [](Case&, auto&) {}},
      {"bias, smoothing, z-loss, softcap, scale", DType::Float32, true,
       [](Case& c, auto&) {
         c.options.label_smoothing = 0.15, c.options.z_loss = 1e-2, c.options.softcap = 2.5, c.options.logit_scale = 0.7;
       }},
      {"sum, upstream gradient", DType::Float32, true,
       [](Case& c, auto&) { c.options.reduction = Reduction::Sum, c.grad_scale = {0.75f}; }},
      {"none, per-token upstream, shift rows", DType::Float32, false,
       [](Case& c, auto& rng) {
         c.options.reduction = Reduction::None, c.options.shift.kind = ShiftKind::Rows, c.options.shift.seq_len = 4;
         std::uniform_real_distribution<float> u(0.5f, 1.5f);
         for (int64_t i = 0; i < c.tokens; ++i) c.grad_scale.push_back(u(rng));
       }},
      {"packed segments, int32 cu_seqlens", DType::Float32, true,
       [](Case& c, auto& rng) {
         c.options.shift.kind = ShiftKind::Segments, c.options.shift.cu_seqlens_type = IndexType::Int32;
         c.cu_seqlens = segmentsOf(rng, c.tokens);
       }},
      {"packed segments, int64 cu_seqlens, smoothing", DType::Float32, false,
       [](Case& c, auto& rng) {
         c.options.shift.kind = ShiftKind::Segments, c.options.shift.cu_seqlens_type = IndexType::Int64;
         c.cu_seqlens = segmentsOf(rng, c.tokens), c.options.label_smoothing = 0.1;
       }},
      {"n_items through a pointer", DType::Float32, false, [](Case& c, auto&) { c.n_items_pointer = true, c.n_items_host = 29.0f; }},
      {"n_items_value", DType::Float32, true, [](Case& c, auto&) { c.options.n_items_value = 7.5; }},
      {"empty mean (every label ignored)", DType::Float32, true,
       [](Case& c, auto&) {
         for (int64_t& label : c.labels) label = c.options.ignore_index;
       }},
      {"bf16 storage", DType::BFloat16, true, [](Case& c, auto&) { c.options.label_smoothing = 0.05; }},
  };
  std::mt19937_64 rng(fresh_seed());
  for (const Row& row : table) {
    for (int ranks = 1; ranks <= 4; ++ranks) {
      Case c = random_case(rng, 24, 7, 29, row.dtype, row.bias);
      c.options.chunk_tokens = 0;
      row.edit(c, rng);
      c.store();
      Wants wants;
      wants.lse = false;
      const Result expected = brute_force(c, wants);
      const Result actual = runShards(c, ranks);
      INFO(row.name << ", " << ranks << " shard(s)");
      // fp32: each output rounded once (sums in fp64), grad_hidden a sum of the shards' rounded shares.
      const double u = unit_roundoff(row.dtype);
      require_close("loss", actual.loss, expected.loss, 1e-12, 1e-12);
      require_close("grad_hidden", actual.grad_hidden, expected.grad_hidden, 4 * ranks * u, 4 * ranks * u);
      require_close("grad_weight", actual.grad_weight, expected.grad_weight, 2 * u, 2 * u);
      require_close("grad_bias", actual.grad_bias, expected.grad_bias, 2 * u, 2 * u);
    }
  }
}

TEST_CASE("vocabulary-parallel passes name a bad shard", "[vocab_parallel]") {
  std::mt19937_64 rng(fresh_seed());
  Case c = random_case(rng, 6, 4, 9, DType::Float32, false);
  c.store();
  std::vector<double> s(24);
  ShardStatistics out{s.data(), s.data() + 6, s.data() + 12, s.data() + 18};
  const Problem p = c.problem();
  REQUIRE_THROWS_WITH(vocab_parallel_statistics(p, VocabShard{3, 10}, c.bound_options(), out, Workspace{}, Context{}),
                      Catch::Contains("shard.vocab_begin (3) + problem.vocab (9) exceeds shard.vocab_total (10)"));
  REQUIRE_THROWS_WITH(vocab_parallel_statistics(p, VocabShard{-1, 9}, c.bound_options(), out, Workspace{}, Context{}),
                      Catch::Contains("shard.vocab_begin (-1) is negative"));
  Context cuda;
  cuda.device = DeviceKind::Cuda;
  REQUIRE_THROWS_WITH(vocab_parallel_statistics(p, VocabShard{0, 9, true}, c.bound_options(), out, Workspace{}, cuda),
                      Catch::Contains("shard.float64 is set but context.device is not Cpu"));
  REQUIRE_THROWS_WITH(vocab_parallel_statistics(p, VocabShard{0, 9}, c.bound_options(), {s.data(), nullptr, s.data(), s.data()},
                                                Workspace{}, Context{}),
                      Catch::Contains("statistics.max, sum_exp, target and logit_sum are all required"));
}

}  // namespace lmfuse::test
