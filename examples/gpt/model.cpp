// The GPT of model.h. GPTImpl::forward and GPTImpl::tiedForward are the two loss sites: the logits
// statement and F::cross_entropy behind the targets guard, left exactly as a LibTorch user writes them.
#include "model.h"

#include <cmath>
#include <limits>

namespace F = torch::nn::functional;

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GPTConfig& config) : n_head(config.n_head) {
  c_attn = register_module("c_attn", torch::nn::Linear(torch::nn::LinearOptions(config.n_embd, 3 * config.n_embd).bias(config.bias)));
  c_proj = register_module("c_proj", torch::nn::Linear(torch::nn::LinearOptions(config.n_embd, config.n_embd).bias(config.bias)));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hs = C / n_head;
  auto qkv = c_attn(x).split(C, 2);
  auto q = qkv[0].view({B, T, n_head, hs}).transpose(1, 2);
  auto k = qkv[1].view({B, T, n_head, hs}).transpose(1, 2);
  auto v = qkv[2].view({B, T, n_head, hs}).transpose(1, 2);
  auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hs)));
  // Built per call, not a registered buffer: Module::to(dtype) would turn a bool buffer into floats.
  auto future = torch::ones({T, T}, x.options().dtype(torch::kBool)).triu(1);
  att = att.masked_fill(future, -std::numeric_limits<float>::infinity());
  att = F::softmax(att, F::SoftmaxFuncOptions(-1));
  auto y = torch::matmul(att, v).transpose(1, 2).contiguous().view({B, T, C});
  return c_proj(y);
}

MLPImpl::MLPImpl(const GPTConfig& config) {
  c_fc = register_module("c_fc", torch::nn::Linear(torch::nn::LinearOptions(config.n_embd, 4 * config.n_embd).bias(config.bias)));
  c_proj = register_module("c_proj", torch::nn::Linear(torch::nn::LinearOptions(4 * config.n_embd, config.n_embd).bias(config.bias)));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) { return c_proj(F::gelu(c_fc(x))); }

BlockImpl::BlockImpl(const GPTConfig& config) {
  ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd})));
  attn = register_module("attn", CausalSelfAttention(config));
  ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd})));
  mlp = register_module("mlp", MLP(config));
}

torch::Tensor BlockImpl::forward(torch::Tensor x) {
  x = x + attn(ln_1(x));
  x = x + mlp(ln_2(x));
  return x;
}

GPTImpl::GPTImpl(const GPTConfig& cfg) : config(cfg) {
  wte = register_module("wte", torch::nn::Embedding(config.vocab_size, config.n_embd));
  wpe = register_module("wpe", torch::nn::Embedding(config.block_size, config.n_embd));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) h->push_back(Block(config));
  ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd})));
  if (!config.tie_weights) {
    lm_head = register_module(
        "lm_head", torch::nn::Linear(torch::nn::LinearOptions(config.n_embd, config.vocab_size).bias(config.head_bias)));
  }
  // GPT-2 initialisation: N(0, 0.02) weights, zero biases.
  torch::NoGradGuard noGrad;
  for (auto& p : named_parameters()) {
    if (p.key().find("bias") != std::string::npos) p.value().zero_();
    else if (p.key().find("ln_") == std::string::npos) p.value().normal_(0.0, 0.02);
  }
}

std::pair<torch::Tensor, torch::Tensor> GPTImpl::forward(const torch::Tensor& idx,
                                                         c10::optional<torch::Tensor> targets) {
  const int64_t T = idx.size(1);
  TORCH_CHECK(T <= config.block_size, "sequence of ", T, " tokens exceeds block_size ", config.block_size);
  auto pos = torch::arange(T, idx.options().dtype(torch::kLong));
  auto x = wte(idx) + wpe(pos);
  for (const auto& block : *h) x = block->as<Block>()->forward(x);
  x = ln_f(x);
  if (config.tie_weights) return tiedForward(x, targets);

  auto logits = lm_head->forward(x);
  torch::Tensor loss;
  if (targets.has_value()) {
    // The loss in fp32 whatever the training dtype, as mixed-precision training does.
    loss = F::cross_entropy(logits.view({-1, logits.size(-1)}).to(torch::kFloat), targets->view(-1),
                            F::CrossEntropyFuncOptions().ignore_index(-1));
  }
  return {logits, loss};
}

std::pair<torch::Tensor, torch::Tensor> GPTImpl::tiedForward(const torch::Tensor& x,
                                                             const c10::optional<torch::Tensor>& targets) {
  if (targets.has_value()) {
    auto logits = F::linear(x, wte->weight);
    auto loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets.value().view(-1),
                                 F::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex));
    return {logits, loss};
  }
  // Inference: only the last position's logits are needed.
  auto logits = F::linear(x.slice(1, -1), wte->weight);
  return {logits, torch::Tensor()};
}
