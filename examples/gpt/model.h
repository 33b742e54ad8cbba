// A small GPT in the LibTorch C++ frontend, written the way public LibTorch ports of nanoGPT write it:
// token + position embeddings, pre-norm blocks (causal self-attention, GELU MLP), a final LayerNorm and
// a vocabulary head; forward(idx, targets) returns {logits, loss}.
// The head is `lm_head` (a torch::nn::Linear, with or without bias) or, with tie_weights, the token
// embedding through F::linear(x, wte->weight). model.cpp holds the two loss sites lmfuse rewrites.
#pragma once

#include <torch/torch.h>

#include <utility>

struct GPTConfig {
  int64_t vocab_size = 1024;
  int64_t block_size = 64;
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_embd = 64;
  /// Biases in the attention and MLP Linears (GPT-2: true). Off by default, as in nanoGPT's `bias=False`:
  /// the key bias has a zero gradient in exact arithmetic (softmax ignores a per-row constant), so with
  /// it AdamW turns rounding noise into updates and no two correct implementations agree on it.
  bool bias = false;
  bool head_bias = false;   ///< lm_head with a bias
  bool tie_weights = false; ///< logits through the token embedding (no lm_head)
};

struct CausalSelfAttentionImpl : torch::nn::Module {
  explicit CausalSelfAttentionImpl(const GPTConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

  int64_t n_head;
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

struct MLPImpl : torch::nn::Module {
  explicit MLPImpl(const GPTConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
};
TORCH_MODULE(MLP);

struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const GPTConfig& config);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  CausalSelfAttention attn{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

struct GPTImpl : torch::nn::Module {
  explicit GPTImpl(const GPTConfig& config);
  /// idx [B, T] token ids; targets [B, T] next-token ids (-1 = ignored). Returns {logits, loss}; loss
  /// is undefined without targets.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& idx,
                                                  c10::optional<torch::Tensor> targets = c10::nullopt);

  /// The target that marks a position the loss leaves out (data.h's document separators).
  static constexpr int64_t kIgnoreIndex = -1;

  GPTConfig config;
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList h;
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear lm_head{nullptr};

private:
  std::pair<torch::Tensor, torch::Tensor> tiedForward(const torch::Tensor& x,
                                                      const c10::optional<torch::Tensor>& targets);
};
TORCH_MODULE(GPT);
