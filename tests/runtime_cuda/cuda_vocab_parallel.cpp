// The vocabulary-parallel passes (vocab_parallel.h) on CUDA against the same passes on the CPU, which
// sum in fp64 (the exact path), from the same rounded inputs: 1 to 3 uneven shards in one process with
// the caller's combination written out, fp32 and bf16 storage, the row shift, ignored and out-of-shard
// labels, label smoothing and bias; statistics, loss and every gradient compared norm-wise. Skips
// without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "harness.h"
#include "lmfuse/vocab_parallel.h"

using namespace lmfuse_test;

namespace {

struct Inputs {
  int64_t n, d, v;
  DType dtype;
  std::vector<unsigned char> hidden, weight, bias;
  std::vector<int64_t> labels;
};

Inputs makeInputs(int64_t n, int64_t d, int64_t v, DType dtype) {
  Inputs in{n, d, v, dtype, {}, {}, {}, std::vector<int64_t>(std::size_t(n))};
  auto& g = rng();
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int64_t> label(0, v - 1);
  const std::size_t e = dtypeBytes(dtype);
  in.hidden.resize(std::size_t(n * d) * e);
  in.weight.resize(std::size_t(v * d) * e);
  in.bias.resize(std::size_t(v) * e);
  for (int64_t i = 0; i < n * d; ++i) storeRounded(in.hidden, dtype, std::size_t(i), normal(g));
  for (int64_t i = 0; i < v * d; ++i) storeRounded(in.weight, dtype, std::size_t(i), 0.3f * normal(g));
  for (int64_t i = 0; i < v; ++i) storeRounded(in.bias, dtype, std::size_t(i), 0.5f * normal(g));
  for (auto& l : in.labels) l = unit(g) < 0.2 ? -100 : label(g);
  return in;
}

std::pair<int64_t, int64_t> shardOf(int64_t vocab, int rank, int ranks) {
  int64_t weights = ranks * (ranks + 1) / 2, before = rank * (rank + 1) / 2;
  auto edge = [&](int64_t w) { return vocab * w / weights; };
  return {edge(before), edge(before + rank + 1) - edge(before)};
}

/// Everything one rank's two passes give, decoded to fp64.
struct RankResult {
  std::vector<double> statistics, loss, gradHidden, gradWeight, gradBias;
};

std::vector<double> decode(const std::vector<unsigned char>& raw, DType dtype) {
  std::vector<double> out(raw.size() / dtypeBytes(dtype));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = loadStored(raw, dtype, i);
  return out;
}

std::vector<double> asDoubles(const std::vector<unsigned char>& raw) {
  std::vector<double> out(raw.size() / 8);
  std::memcpy(out.data(), raw.data(), out.size() * 8);
  return out;
}

/// Both passes over `ranks` shards on `device`, combined as a caller's collectives would.
std::vector<RankResult> runShards(const Inputs& in, int ranks, const Options& options, DeviceKind device) {
  const int64_t n = in.n, d = in.d;
  const std::size_t e = dtypeBytes(in.dtype);
  const bool cuda = device == DeviceKind::Cuda;
  // Host copies for the CPU, device copies for CUDA: one set of pointers either way.
  DeviceBuffer hidden(in.hidden.size()), weight(in.weight.size()), bias(in.bias.size()), labels(8 * std::size_t(n));
  if (cuda) {
    hidden.upload(in.hidden.data()), weight.upload(in.weight.data()), bias.upload(in.bias.data());
    labels.upload(in.labels.data());
  }
  auto at = [&](const DeviceBuffer& buffer, const void* host) { return cuda ? buffer.get() : host; };
  std::vector<std::vector<double>> stats(ranks, std::vector<double>(4 * std::size_t(n)));
  std::vector<RankResult> results(ranks);
  Context context{device, nullptr, 1};
  auto shardProblem = [&](int r) {
    const auto [begin, rows] = shardOf(in.v, r, ranks);
    Problem p;
    p.tokens = n, p.hidden_dim = d, p.vocab = rows, p.dtype = in.dtype;
    p.hidden = at(hidden, in.hidden.data());
    p.weight = static_cast<const char*>(at(weight, in.weight.data())) + begin * d * e;
    p.bias = static_cast<const char*>(at(bias, in.bias.data())) + begin * e;
    p.labels = at(labels, in.labels.data());
    return std::make_pair(p, VocabShard{begin, in.v});
  };
  // Each rank's workspace, poisoned, sized for pass 2 with gradients (which serves pass 1 too).
  std::vector<DeviceBuffer> workspaces;
  for (int r = 0; r < ranks && cuda; ++r) {
    const auto [p, shard] = shardProblem(r);
    workspaces.emplace_back(vocab_parallel_workspace_size(p, shard, options, true, context));
    workspaces.back().poison();
  }
  auto workspace = [&](int r) {
    return cuda ? Workspace{workspaces[std::size_t(r)].get(), workspaces[std::size_t(r)].bytes()} : Workspace{};
  };
  for (int r = 0; r < ranks; ++r) {
    const auto [p, shard] = shardProblem(r);
    if (cuda) {
      DeviceBuffer s(4 * 8 * std::size_t(n));
      s.poison();
      double* base = s.as<double>();
      vocab_parallel_statistics(p, shard, options, {base, base + n, base + 2 * n, base + 3 * n}, workspace(r), context);
      TEST_CUDA(cudaDeviceSynchronize());
      stats[r] = asDoubles(s.download());
    } else {
      double* base = stats[r].data();
      vocab_parallel_statistics(p, shard, options, {base, base + n, base + 2 * n, base + 3 * n}, Workspace{}, context);
    }
    results[r].statistics = stats[r];
  }
  std::vector<double> combined(3 * std::size_t(n), 0.0);  // lse, target, logit_sum
  for (int64_t i = 0; i < n; ++i) {
    double max = -INFINITY, sum = 0.0;
    for (int r = 0; r < ranks; ++r) max = std::max(max, stats[r][std::size_t(i)]);
    for (int r = 0; r < ranks; ++r) {
      sum += stats[r][std::size_t(n + i)] * std::exp(stats[r][std::size_t(i)] - max);
      combined[std::size_t(n + i)] += stats[r][std::size_t(2 * n + i)];
      combined[std::size_t(2 * n + i)] += stats[r][std::size_t(3 * n + i)];
    }
    combined[std::size_t(i)] = sum > 0 ? max + std::log(sum) : 0.0;
  }
  DeviceBuffer global(combined.size() * 8);
  if (cuda) global.upload(combined.data());
  const double* g = cuda ? global.as<double>() : combined.data();
  for (int r = 0; r < ranks; ++r) {
    const auto [p, shard] = shardProblem(r);
    const std::size_t rows = std::size_t(p.vocab);
    const std::size_t lossCount = options.reduction == Reduction::None ? std::size_t(n) : 1;
    std::vector<unsigned char> loss(lossCount * 8), gradHidden(std::size_t(n * d) * e), gradWeight(rows * d * e),
        gradBias(rows * e);
    DeviceBuffer dLoss(loss.size()), dHidden(gradHidden.size()), dWeight(gradWeight.size()), dBias(gradBias.size());
    for (DeviceBuffer* b : {&dLoss, &dHidden, &dWeight, &dBias}) b->poison();
    ShardOutputs out{cuda ? dLoss.as<double>() : reinterpret_cast<double*>(loss.data()),
                     cuda ? dHidden.get() : gradHidden.data(), cuda ? dWeight.get() : gradWeight.data(),
                     cuda ? dBias.get() : gradBias.data()};
    vocab_parallel_loss(p, shard, options, {g, g + n, g + 2 * n}, out, workspace(r), context);
    if (cuda) {
      TEST_CUDA(cudaDeviceSynchronize());
      loss = dLoss.download(), gradHidden = dHidden.download(), gradWeight = dWeight.download();
      gradBias = dBias.download();
    }
    results[r].loss = asDoubles(loss);
    results[r].gradHidden = decode(gradHidden, in.dtype);
    results[r].gradWeight = decode(gradWeight, in.dtype);
    results[r].gradBias = decode(gradBias, in.dtype);
  }
  return results;
}

/// ‖a − b‖ / ‖b‖ (absolute when b is all zero); NaN anywhere gives infinity.
double normwise(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double difference = 0, reference = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    difference += (a[i] - b[i]) * (a[i] - b[i]);
    reference += b[i] * b[i];
  }
  return reference > 0 ? std::sqrt(difference / reference) : std::sqrt(difference);
}

}  // namespace

TEST_CASE("vocabulary-parallel passes on CUDA equal the CPU passes", "[cuda][vocab_parallel]") {
  if (!lmfuse::cuda_available()) {
    WARN("skipped: no CUDA device visible");
    return;
  }
  struct Variant {
    const char* name;
    DType dtype;
    int ranks;
    double smoothing;
    bool shift;
    Reduction reduction;
    double tolerance;  // fp32 sums on the GPU against fp64 on the CPU; bf16 stores the logits and gradients
    int64_t vocab = 517;
    bool slices = false;  // a logits budget of 256 columns: the shards go through in several slices
    double softcap = 0.0, zLoss = 0.0;
  };
  const Variant variants[] = {
      {"fp32, one shard", DType::Float32, 1, 0.0, false, Reduction::Mean, 2e-5},
      {"fp32, three uneven shards, smoothing, shift", DType::Float32, 3, 0.1, true, Reduction::Mean, 2e-5},
      {"bf16, two shards, sum", DType::BFloat16, 2, 0.0, false, Reduction::Sum, 1e-2},
      {"fp32, two shards, per-token losses", DType::Float32, 2, 0.05, false, Reduction::None, 2e-5},
      // Shards of 300, 600 and 900 rows in slices of 256 (the last one partial): statistics merged
      // across slices, grad_hidden summed over them.
      {"fp32, three shards in slices, smoothing, shift", DType::Float32, 3, 0.1, true, Reduction::Mean, 2e-5, 1800, true},
      {"bf16, two shards in slices, softcap, z-loss", DType::BFloat16, 2, 0.0, false, Reduction::Mean, 1e-2, 1800, true,
       30.0, 1e-3},
      {"fp16, three shards in slices, per-token losses", DType::Float16, 3, 0.05, false, Reduction::None, 1e-2, 1800,
       true},
  };
  for (const Variant& variant : variants) {
    DYNAMIC_SECTION(variant.name) {
      const Inputs in = makeInputs(96, 40, variant.vocab, variant.dtype);
      Options options;
      options.label_smoothing = variant.smoothing;
      options.reduction = variant.reduction;
      options.softcap = variant.softcap;
      options.z_loss = variant.zLoss;
      if (variant.slices) options.workspace_budget = std::size_t(96) * 256 * dtypeBytes(variant.dtype);
      if (variant.shift) options.shift = Shift{ShiftKind::Rows, 16, nullptr, IndexType::Int32, 0};
      const auto cpu = runShards(in, variant.ranks, options, DeviceKind::Cpu);
      const auto gpu = runShards(in, variant.ranks, options, DeviceKind::Cuda);
      for (int r = 0; r < variant.ranks; ++r) {
        INFO("rank " << r);
        CHECK(normwise(gpu[r].statistics, cpu[r].statistics) < variant.tolerance);
        CHECK(normwise(gpu[r].loss, cpu[r].loss) < variant.tolerance);
        CHECK(normwise(gpu[r].gradHidden, cpu[r].gradHidden) < variant.tolerance);
        CHECK(normwise(gpu[r].gradWeight, cpu[r].gradWeight) < variant.tolerance);
        CHECK(normwise(gpu[r].gradBias, cpu[r].gradBias) < variant.tolerance);
      }
    }
  }
}

TEST_CASE("vocabulary-parallel passes on CUDA check their workspace and alignment", "[cuda][vocab_parallel]") {
  if (!lmfuse::cuda_available()) {
    WARN("skipped: no CUDA device visible");
    return;
  }
  const Inputs in = makeInputs(64, 40, 300, DType::BFloat16);
  DeviceBuffer hidden(in.hidden.size()), weight(in.weight.size()), labels(8 * 64), stats(4 * 8 * 64);
  hidden.upload(in.hidden.data()), weight.upload(in.weight.data()), labels.upload(in.labels.data());
  Problem p;
  p.tokens = 64, p.hidden_dim = 40, p.vocab = 300, p.dtype = DType::BFloat16;
  p.hidden = hidden.get(), p.weight = weight.get(), p.labels = labels.get();
  const VocabShard shard{0, 300};
  Options options;
  const Context context{DeviceKind::Cuda, nullptr, 1};
  double* s = stats.as<double>();
  const ShardStatistics out{s, s + 64, s + 128, s + 192};
  const std::size_t forward = vocab_parallel_workspace_size(p, shard, options, false, context);
  const std::size_t backward = vocab_parallel_workspace_size(p, shard, options, true, context);
  CHECK(forward > 0);
  CHECK(backward > forward);  // the lse and the fp32 sum of grad_hidden
  CHECK(vocab_parallel_workspace_size(p, shard, options, true, Context{}) == 0);  // the CPU uses none
  DeviceBuffer workspace(forward);
  REQUIRE_THROWS_WITH(vocab_parallel_statistics(p, shard, options, out, Workspace{workspace.get(), forward - 1}, context),
                      Catch::Contains("lmfuse::vocab_parallel_statistics: workspace.bytes (") &&
                          Catch::Contains("see workspace_size"));
  REQUIRE_THROWS_WITH(vocab_parallel_statistics(p, shard, options, out, Workspace{}, context),
                      Catch::Contains("workspace.data is null"));
  Problem shifted = p;
  shifted.weight = static_cast<const char*>(weight.get()) + 2;  // one bf16 element in
  REQUIRE_THROWS_WITH(vocab_parallel_statistics(shifted, shard, options, out, Workspace{workspace.get(), forward}, context),
                      Catch::Contains("problem.weight (") && Catch::Contains("is not 16-byte aligned"));
  vocab_parallel_statistics(p, shard, options, out, Workspace{workspace.get(), forward}, context);
  TEST_CUDA(cudaDeviceSynchronize());
}
