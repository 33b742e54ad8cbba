// Release builds (-DNDEBUG from the configuration's flags) scale the hidden states after the head: the fused
// call must read them as the head did, so the tool must parse with this unit's own command.
#include <torch/torch.h>

struct UnityHeadImpl : torch::nn::Module {
  UnityHeadImpl() : lm_head(register_module("lm_head", torch::nn::Linear(8, 11))) {}

  torch::Tensor forward(torch::Tensor h, const torch::Tensor& labels) {
    auto logits = lm_head(h);
#ifdef NDEBUG
    h = h * 3.0;
#endif
    return torch::nn::functional::cross_entropy(logits, labels);
  }

  torch::nn::Linear lm_head{nullptr};
};
TORCH_MODULE(UnityHead);

double unityLoss() { return UnityHead()->forward(torch::randn({4, 8}), torch::randint(0, 11, {4})).item<double>(); }
