// The model reads the wrapped settings (<cfg.h>: the project's wrapper, then the vendor's). The program
// fails unless the wrapper ran once.
#include <cfg.h>
#include <torch/torch.h>

struct NextImpl : torch::nn::Module {
  NextImpl() : lm_head(register_module("lm_head", torch::nn::Linear(8, 11))) {}

  torch::Tensor forward(const torch::Tensor& h, const torch::Tensor& labels) {
    auto logits = lm_head(h * (VENDOR_HIDDEN_SCALE * app_scale_registrations()));
    return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), labels.view(-1));
  }

  torch::nn::Linear lm_head{nullptr};
};
TORCH_MODULE(Next);

int main() {
  Next model;
  auto loss = model->forward(torch::randn({4, 8}), torch::randint(0, 11, {4}));
  return app_scale_registrations() == 1 && loss.item<double>() > 0 ? 0 : 1;
}
