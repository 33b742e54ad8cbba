// The model, with internal linkage: each unit that includes it runs its own compiled copy, so each can
// say which code it compiled. The site starts suppressed; the test removes the NOLINT.
#pragma once

#include <torch/torch.h>

#include <lmfuse/torch.h>

namespace {

struct TinyImpl : torch::nn::Module {
  TinyImpl() : lm_head(register_module("lm_head", torch::nn::Linear(8, 11))) {}

  torch::Tensor forward(const torch::Tensor& h, const torch::Tensor& labels) {
    auto logits = lm_head(h);  // NOLINT(lmfuse)
    return torch::nn::functional::cross_entropy(logits, labels);
  }

  torch::nn::Linear lm_head{nullptr};
};
TORCH_MODULE(Tiny);

// Whether this unit's copy of the model ran the fused loss.
inline bool runsFused() {
  const int64_t before = lmfuse::fused_call_count();
  Tiny()->forward(torch::randn({4, 8}), torch::randint(0, 11, {4}));
  return lmfuse::fused_call_count() > before;
}

}  // namespace
