// Shapes the rewrite cannot see, checked when the model runs. A head line that reshapes its output
// returns skipped logits of the reshaped shape. A loss given 3-D logits without a reshape reads their
// classes from dimension 1 (here T == V, so the original runs and computes another loss than one row of
// V classes per token): the fused call computes that loss as the original does, and prints the value
// LMFUSE_DISABLE=1 (the original) prints.
#include <torch/torch.h>

#include <cstdio>

namespace F = torch::nn::functional;

constexpr int64_t kBatch = 2, kTime = 7, kDim = 16, kVocab = 7;

struct FlatHeadImpl : torch::nn::Module {
  FlatHeadImpl() : lm_head(register_module("lm_head", torch::nn::Linear(kDim, kVocab))) {}

  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& labels) {
    auto logits = lm_head(x).view({-1, kVocab});
    auto loss = F::cross_entropy(logits, labels.view(-1));
    return {logits, loss};
  }

  torch::nn::Linear lm_head{nullptr};
};
TORCH_MODULE(FlatHead);

struct ClassesOnDimOneImpl : torch::nn::Module {
  ClassesOnDimOneImpl() : lm_head(register_module("lm_head", torch::nn::Linear(kDim, kVocab))) {}

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& labels) {
    auto logits = lm_head(x);
    return F::cross_entropy(logits, labels);
  }

  torch::nn::Linear lm_head{nullptr};
};
TORCH_MODULE(ClassesOnDimOne);

int main() {
  torch::manual_seed(0);
  auto x = torch::randn({kBatch, kTime, kDim});
  auto labels = torch::randint(0, kVocab, {kBatch, kTime});

  FlatHead flat;
  auto [logits, loss] = flat->forward(x, labels);
  const bool flatOk = logits.dim() == 2 && logits.size(0) == kBatch * kTime && logits.size(1) == kVocab;
  std::printf("reshaped shape %s\n", flatOk ? "ok" : "WRONG");
  std::fflush(stdout);

  ClassesOnDimOne onDimOne;
  const double value = onDimOne->forward(x, labels).item<double>();
  std::printf("loss over dimension 1: %.6f\n", value);
  return flatOk ? 0 : 1;
}
