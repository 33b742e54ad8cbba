// The runtime alone, on the CPU: the mean cross-entropy of random fp32 hidden states against a random
// head, fused, against the same loss computed here in fp64 (logits formed, log-sum-exp). Exits 1 unless
// they agree within 1e-5 relative.
#include <lmfuse/flce.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  const int64_t tokens = 24, dim = 16, vocab = 53;
  std::mt19937 random(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int64_t> label(0, vocab - 1);
  std::vector<float> hidden(tokens * dim), weight(vocab * dim);
  std::vector<int64_t> labels(tokens);
  for (float& x : hidden) x = normal(random);
  for (float& x : weight) x = 0.3f * normal(random);
  for (int64_t& y : labels) y = label(random);

  lmfuse::Problem problem;
  problem.tokens = tokens;
  problem.hidden_dim = dim;
  problem.vocab = vocab;
  problem.dtype = lmfuse::DType::Float32;
  problem.hidden = hidden.data();
  problem.hidden_stride = dim;
  problem.weight = weight.data();
  problem.weight_stride = dim;
  problem.labels = labels.data();
  lmfuse::Options options;
  lmfuse::Outputs outputs;
  float loss = 0;
  outputs.loss = &loss;
  lmfuse::Context context;
  std::vector<unsigned char> space(lmfuse::workspace_size(problem, options, false, context) + 16);
  lmfuse::Workspace workspace;
  workspace.data = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(space.data()) + 15) & ~std::uintptr_t(15));
  workspace.bytes = space.size() - 16;
  lmfuse::linear_cross_entropy(problem, options, outputs, workspace, context);

  double reference = 0;
  for (int64_t i = 0; i < tokens; ++i) {
    std::vector<double> logits(vocab);
    double top = -INFINITY;
    for (int64_t j = 0; j < vocab; ++j) {
      double x = 0;
      for (int64_t k = 0; k < dim; ++k) x += double(hidden[i * dim + k]) * weight[j * dim + k];
      logits[j] = x;
      top = std::max(top, x);
    }
    double sum = 0;
    for (double x : logits) sum += std::exp(x - top);
    reference += top + std::log(sum) - logits[labels[i]];
  }
  reference /= tokens;
  const double relative = std::fabs(loss - reference) / std::fabs(reference);
  std::printf("fused %.7f fp64 %.7f relative %.3g\n", loss, reference, relative);
  return relative <= 1e-5 ? 0 : 1;
}
