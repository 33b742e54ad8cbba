// What every usage scenario asserts at run time: training took the fused path (lmfuse::fused_call_count()
// grew) and its per-step losses equal those of the original code (the same binary with lmfuse switched
// off) within `rtol`, from the same seed, on fresh random tokens.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include <lmfuse/torch.h>

namespace usage {

struct Batch {
  torch::Tensor idx, targets;
};

inline Batch randomBatch(int64_t vocab, uint64_t seed) {
  torch::manual_seed(seed);
  auto tokens = torch::randint(0, vocab, {4, 17});
  return {tokens.slice(1, 0, 16).contiguous(), tokens.slice(1, 1, 17).contiguous()};
}

inline uint64_t freshSeed() { return std::random_device{}(); }

/// `step(batch)` runs one training step of a model built from `seed` and returns its loss.
using Trainer = std::function<std::vector<double>(uint64_t seed, const Batch& batch, int steps)>;

inline int compareWithOriginal(const Trainer& train, int64_t vocab, double rtol, int steps = 5) {
  const uint64_t seed = freshSeed();
  const Batch batch = randomBatch(vocab, seed);
  lmfuse::set_enabled(true);
  const int64_t before = lmfuse::fused_call_count();
  const std::vector<double> fused = train(seed, batch, steps);
  const int64_t fusedCalls = lmfuse::fused_call_count() - before;
  lmfuse::set_enabled(false);
  const std::vector<double> original = train(seed, batch, steps);
  lmfuse::set_enabled(true);
  bool ok = fusedCalls >= steps && fused.size() == original.size();
  std::printf("seed %llu: %lld fused calls in %d steps\n", static_cast<unsigned long long>(seed),
              static_cast<long long>(fusedCalls), steps);
  for (size_t i = 0; i < fused.size() && i < original.size(); ++i) {
    const double relative = std::fabs(fused[i] - original[i]) / std::fabs(original[i]);
    std::printf("step %zu: fused %.9g original %.9g relative %.3g\n", i + 1, fused[i], original[i], relative);
    ok = ok && relative <= rtol;
  }
  std::printf("%s\n", ok ? "trains through the fused path like the original" : "FAILED");
  return ok ? 0 : 1;
}

/// The usual loop: SGD on the loss `model->forward(idx, targets).second`.
template <typename Model>
Trainer sgdTrainer(std::function<Model()> make, std::function<torch::Tensor(Model&, const Batch&)> lossOf) {
  return [make, lossOf](uint64_t seed, const Batch& batch, int steps) {
    torch::manual_seed(seed);
    Model model = make();
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.5));
    std::vector<double> losses;
    for (int step = 0; step < steps; ++step) {
      optimizer.zero_grad();
      torch::Tensor loss = lossOf(model, batch);
      loss.backward();
      optimizer.step();
      losses.push_back(loss.item<double>());
    }
    return losses;
  };
}

}  // namespace usage
