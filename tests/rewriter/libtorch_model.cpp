// A small GPT in the LibTorch C++ frontend, written the way public ports write it: the input of
// the rewriter's integration test (parsed against the real LibTorch headers, never built).
#include <torch/torch.h>

#include <tuple>

namespace F = torch::nn::functional;

struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t d_model) : ln(torch::nn::LayerNormOptions({d_model})), fc(d_model, d_model) {
    register_module("ln", ln);
    register_module("fc", fc);
  }
  torch::Tensor forward(const torch::Tensor &x) { return x + F::gelu(fc(ln(x))); }
  torch::nn::LayerNorm ln;
  torch::nn::Linear fc;
};
TORCH_MODULE(Block);

struct GPTImpl : torch::nn::Module {
  GPTImpl(int64_t vocab, int64_t d_model)
      : wte(vocab, d_model), block(d_model), ln_f(torch::nn::LayerNormOptions({d_model})),
        lm_head(torch::nn::LinearOptions(d_model, vocab).bias(false)) {
    register_module("wte", wte);
    register_module("block", block);
    register_module("ln_f", ln_f);
    register_module("lm_head", lm_head);
  }

  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor &idx,
                                                   const c10::optional<torch::Tensor> &targets = c10::nullopt) {
    auto x = ln_f(block(wte(idx)));
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(-1));
    }
    return {logits, loss};
  }

  // Tied embeddings with the causal shift, as Hugging Face ports write it.
  torch::Tensor tied_loss(const torch::Tensor &hidden, const torch::Tensor &labels) {
    auto logits = F::linear(hidden, wte->weight);
    auto shift_logits = logits.slice(1, 0, -1).contiguous();
    auto shift_labels = labels.slice(1, 1).contiguous();
    return F::cross_entropy(shift_logits.view({-1, shift_logits.size(-1)}), shift_labels.view(-1).to(torch::kLong),
                            F::CrossEntropyFuncOptions().label_smoothing(0.1).reduction(torch::kSum));
  }

  // Gemma-style soft cap: must be refused.
  torch::Tensor capped_loss(const torch::Tensor &hidden, const torch::Tensor &labels) {
    auto logits = lm_head(hidden);
    logits = torch::tanh(logits / 30.0) * 30.0;
    return F::cross_entropy(logits.view({-1, logits.size(-1)}), labels.view(-1));
  }

  // GPT-2 ports: the tied head as a product with the embedding's transpose, a CrossEntropyLoss module.
  torch::Tensor product_loss(const torch::Tensor &hidden, const torch::Tensor &labels) {
    auto logits = torch::matmul(hidden, wte->weight.t());
    return criterion(logits.view({-1, logits.size(-1)}), labels.view(-1));
  }

  // Char-RNN tutorials: nll_loss over log_softmax, the head as x.mm(W.t()).
  torch::Tensor nll_step(const torch::Tensor &hidden, const torch::Tensor &labels) {
    auto logits = hidden.mm(lm_head->weight.t());
    return torch::nll_loss(torch::log_softmax(logits, -1), labels);
  }

  // Hugging Face ports: the labels moved to the logits' device, the loss only while training, chosen by ?:
  // with the logits returned.
  std::tuple<torch::Tensor, torch::Tensor> moved_loss(const torch::Tensor &hidden,
                                                      const c10::optional<torch::Tensor> &labels) {
    auto logits = lm_head(hidden);
    auto loss = labels.has_value() && is_training()
                    ? F::cross_entropy(logits.view({-1, logits.size(-1)}), labels->to(logits.device()).view(-1))
                    : torch::Tensor();
    return {logits, loss};
  }

  torch::nn::Embedding wte;
  Block block;
  torch::nn::LayerNorm ln_f;
  torch::nn::Linear lm_head;
  torch::nn::CrossEntropyLoss criterion{torch::nn::CrossEntropyLossOptions().ignore_index(-1)};
};
TORCH_MODULE(GPT);
