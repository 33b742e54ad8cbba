// A training loop that reads the logits the model returns (an accuracy), after reading their shape.
#include <torch/torch.h>

#include <cstdio>

namespace F = torch::nn::functional;

struct HeadImpl : torch::nn::Module {
  HeadImpl() : lm_head(register_module("lm_head", torch::nn::Linear(16, 37))) {}

  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (labels.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), labels->view(-1));
    }
    return {logits, loss};
  }

  torch::nn::Linear lm_head{nullptr};
};
TORCH_MODULE(Head);

int main() {
  Head head;
  auto x = torch::randn({3, 5, 16});
  auto labels = torch::randint(0, 37, {3, 5});
  auto [logits, loss] = head->forward(x, labels);
  loss.backward();
  const bool shapeOk = logits.dim() == 3 && logits.size(0) == 3 && logits.size(1) == 5 && logits.size(-1) == 37 &&
                       logits.numel() == 3 * 5 * 37 && logits.dtype() == torch::kFloat && logits.device().is_cpu();
  std::printf("shape %s\n", shapeOk ? "ok" : "WRONG");
  std::fflush(stdout);
  const double accuracy = (logits.argmax(-1) == labels).to(torch::kFloat).mean().item<double>();
  std::printf("accuracy %.3f\n", accuracy);
  return shapeOk ? 0 : 1;
}
