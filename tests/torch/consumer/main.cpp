// The consumer project's model and check: a head with a loss site that lmfuse_rewrite() patches (and one
// it refuses, for the EXPECT_PATCHED failure of the package test); the
// program computes the loss and the head's gradient with the fused path and with LMFUSE's switch off
// (the original code) and exits 1 unless they agree.
#include <torch/torch.h>

#include <cstdio>

#include <lmfuse/torch.h>  // the switches; the rewritten copy includes it too

namespace F = torch::nn::functional;

struct HeadImpl : torch::nn::Module {
  HeadImpl() : lm_head(register_module("lm_head", torch::nn::Linear(32, 101))) {}

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

// A site lmfuse must refuse (logits-softcapped): the fused call would not see the cap.
struct CappedHeadImpl : torch::nn::Module {
  CappedHeadImpl() : lm_head(register_module("lm_head", torch::nn::Linear(32, 101))) {}

  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(x);
    logits = 30.0 * torch::tanh(logits / 30.0);
    torch::Tensor loss;
    if (labels.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), labels->view(-1));
    }
    return {logits, loss};
  }

  torch::nn::Linear lm_head{nullptr};
};

int main() {
  torch::manual_seed(7);
  Head head;
  auto x = torch::randn({4, 8, 32});
  auto labels = torch::randint(0, 101, {4, 8});
  auto run = [&](bool fused) {
    lmfuse::set_enabled(fused);
    head->zero_grad();
    auto [logits, loss] = head->forward(x, labels);
    loss.backward();
    return std::make_tuple(logits.defined() && !lmfuse::is_skipped_logits(logits), loss.item<double>(),
                           head->lm_head->weight.grad().clone());
  };
  auto [fusedLogits, fusedLoss, fusedGrad] = run(true);
  const int64_t fusedCalls = lmfuse::fused_call_count();
  auto [plainLogits, plainLoss, plainGrad] = run(false);
  const double gradError = (fusedGrad - plainGrad).abs().max().item<double>();
  std::printf("fused loss %.7f (logits %s, %lld fused calls), plain loss %.7f, max weight-gradient difference %.3g\n",
              fusedLoss, fusedLogits ? "built" : "skipped", static_cast<long long>(fusedCalls), plainLoss, gradError);
  const bool ok = fusedCalls == 1 && !fusedLogits && plainLogits && lmfuse::fused_call_count() == 1 &&
                  std::abs(fusedLoss - plainLoss) < 1e-5 * plainLoss && gradError < 1e-5;
  return ok ? 0 : 1;
}
