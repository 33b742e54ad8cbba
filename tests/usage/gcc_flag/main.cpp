// A plain fp32 training of a target that has a GCC-only compile option.
#include <torch/torch.h>

#include "train_check.h"

namespace F = torch::nn::functional;

struct TinyLMImpl : torch::nn::Module {
  TinyLMImpl(int64_t vocab, int64_t dim)
      : embed(register_module("embed", torch::nn::Embedding(vocab, dim))),
        mix(register_module("mix", torch::nn::Linear(dim, dim))),
        lm_head(register_module("lm_head", torch::nn::Linear(dim, vocab))) {}

  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& idx, c10::optional<torch::Tensor> targets) {
    auto h = torch::tanh(mix(embed(idx)));
    auto logits = lm_head(h);
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

int main() {
  const int64_t vocab = 59;
  auto train = usage::sgdTrainer<TinyLM>([&] { return TinyLM(vocab, 24); },
                                         [](TinyLM& model, const usage::Batch& batch) {
                                           return model->forward(batch.idx, batch.targets).second;
                                         });
  return usage::compareWithOriginal(train, vocab, 1e-5);
}
