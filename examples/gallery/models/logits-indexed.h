// Refused, logits-indexed: the vocabulary is padded to a multiple of 64 and the loss reads a slice.
#pragma once
#include "common.h"

namespace gallery {
struct PaddedVocabImpl : torch::nn::Module {
  PaddedVocabImpl(int64_t dim, int64_t vocab)
      : vocab_size(vocab),
        lm_head(register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(dim, (vocab + 63) / 64 * 64).bias(false)))) {}

  LogitsAndLoss forward(const torch::Tensor& x, c10::optional<torch::Tensor> targets) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (targets.has_value()) {
      auto real = logits.slice(-1, 0, vocab_size);
      loss = F::cross_entropy(real.reshape({-1, vocab_size}), targets->view(-1));
    }
    return {logits, loss};
  }

  int64_t vocab_size;
  torch::nn::Linear lm_head;
};
}  // namespace gallery
