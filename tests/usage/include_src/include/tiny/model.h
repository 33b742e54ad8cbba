// The model, defined in its header: forward (the loss site) is inline in every unit that includes it.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace F = torch::nn::functional;

struct TinyLMImpl : torch::nn::Module {
  TinyLMImpl(int64_t vocab, int64_t dim)
      : embed(register_module("embed", torch::nn::Embedding(vocab, dim))),
        mix(register_module("mix", torch::nn::Linear(dim, dim))),
        lm_head(register_module("lm_head", torch::nn::Linear(dim, vocab))) {}

  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& idx, c10::optional<torch::Tensor> targets) {
    auto h = torch::tanh(mix(embed(idx)));
    auto logits = lm_head(h);
#ifdef TINY_SOFTCAP  // a flag the rewrite was not analysed with: its carried mirror must be refused under it
    logits = 30.0 * torch::tanh(logits / 30.0);
#endif
#if __has_include("tiny_cap.h")  // absent where the mirror is made; a build that finds it must be refused
    logits = 30.0 * torch::tanh(logits / 30.0);
#endif
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1));
    }
    return {logits, loss};
  }

  torch::nn::Embedding embed{nullptr};
  torch::nn::Linear mix{nullptr}, lm_head{nullptr};
};
TORCH_MODULE(TinyLM);

/// Trains the model fused and unfused and compares (src/train.cpp); the process's exit status.
int runScenario();

// The flag tested above goes with the model: how the unit ends no longer tells whether it was given, only
// how the unit started does (tests/torch/usage_test.cmake builds a carried mirror under -DTINY_SOFTCAP).
#undef TINY_SOFTCAP
