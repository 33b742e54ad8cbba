// A small Llama in the LibTorch 2.x C++ frontend, written the way public 2.x ports write it: RMSNorm
// through at::rms_norm and attention through at::scaled_dot_product_attention (neither exists in
// LibTorch 1.13), rotary embeddings, a SwiGLU MLP, std::optional targets and a C++20 configuration with
// designated initialisers. Input of the libtorch2.model.* tests: its two loss sites must be patched
// against the 2.x headers, and against 1.13 the unit is one parse error. Parsed, never built.
#include <torch/torch.h>

#include <concepts>
#include <optional>
#include <utility>
#include <vector>

namespace F = torch::nn::functional;

struct LlamaConfig {
  int64_t vocab_size = 32000;
  int64_t dim = 256;
  int64_t n_layers = 2;
  int64_t n_heads = 8;
  int64_t n_kv_heads = 4;
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
};

template <typename T>
concept PositiveExtent = std::integral<T>;

struct RMSNormImpl : torch::nn::Module {
  RMSNormImpl(int64_t dim, double eps) : eps(eps) { weight = register_parameter("weight", torch::ones({dim})); }
  torch::Tensor forward(const torch::Tensor &x) { return at::rms_norm(x, {weight.size(0)}, weight, eps); }
  double eps;
  torch::Tensor weight;
};
TORCH_MODULE(RMSNorm);

// cos and sin of the rotary angles, [T, head_dim / 2].
std::pair<torch::Tensor, torch::Tensor> rotaryTables(PositiveExtent auto seq_len, int64_t head_dim, double theta) {
  auto inv_freq = 1.0 / torch::pow(theta, torch::arange(0, head_dim, 2, torch::kFloat) / head_dim);
  auto angles = torch::outer(torch::arange(seq_len, torch::kFloat), inv_freq);
  return {angles.cos(), angles.sin()};
}

torch::Tensor applyRotary(const torch::Tensor &x, const torch::Tensor &cos, const torch::Tensor &sin) {
  auto halves = x.unflatten(-1, {-1, 2});
  auto even = halves.select(-1, 0), odd = halves.select(-1, 1);
  return torch::stack({even * cos - odd * sin, even * sin + odd * cos}, -1).flatten(-2);
}

struct AttentionImpl : torch::nn::Module {
  explicit AttentionImpl(const LlamaConfig &c)
      : n_heads(c.n_heads), n_kv_heads(c.n_kv_heads), head_dim(c.dim / c.n_heads),
        wq(torch::nn::LinearOptions(c.dim, c.n_heads * head_dim).bias(false)),
        wk(torch::nn::LinearOptions(c.dim, c.n_kv_heads * head_dim).bias(false)),
        wv(torch::nn::LinearOptions(c.dim, c.n_kv_heads * head_dim).bias(false)),
        wo(torch::nn::LinearOptions(c.n_heads * head_dim, c.dim).bias(false)) {
    register_module("wq", wq);
    register_module("wk", wk);
    register_module("wv", wv);
    register_module("wo", wo);
  }

  torch::Tensor forward(const torch::Tensor &x, const torch::Tensor &cos, const torch::Tensor &sin) {
    const auto B = x.size(0), T = x.size(1);
    auto q = applyRotary(wq(x).view({B, T, n_heads, head_dim}), cos, sin).transpose(1, 2);
    auto k = applyRotary(wk(x).view({B, T, n_kv_heads, head_dim}), cos, sin).transpose(1, 2);
    auto v = wv(x).view({B, T, n_kv_heads, head_dim}).transpose(1, 2);
    const auto groups = n_heads / n_kv_heads;
    k = k.repeat_interleave(groups, 1);
    v = v.repeat_interleave(groups, 1);
    auto y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
    return wo(y.transpose(1, 2).contiguous().view({B, T, -1}));
  }

  int64_t n_heads, n_kv_heads, head_dim;
  torch::nn::Linear wq, wk, wv, wo;
};
TORCH_MODULE(Attention);

struct FeedForwardImpl : torch::nn::Module {
  FeedForwardImpl(int64_t dim, int64_t hidden)
      : w1(torch::nn::LinearOptions(dim, hidden).bias(false)), w2(torch::nn::LinearOptions(hidden, dim).bias(false)),
        w3(torch::nn::LinearOptions(dim, hidden).bias(false)) {
    register_module("w1", w1);
    register_module("w2", w2);
    register_module("w3", w3);
  }
  torch::Tensor forward(const torch::Tensor &x) { return w2(F::silu(w1(x)) * w3(x)); }
  torch::nn::Linear w1, w2, w3;
};
TORCH_MODULE(FeedForward);

struct TransformerBlockImpl : torch::nn::Module {
  explicit TransformerBlockImpl(const LlamaConfig &c)
      : attention(c), feed_forward(c.dim, 4 * c.dim), attention_norm(c.dim, c.norm_eps), ffn_norm(c.dim, c.norm_eps) {
    register_module("attention", attention);
    register_module("feed_forward", feed_forward);
    register_module("attention_norm", attention_norm);
    register_module("ffn_norm", ffn_norm);
  }
  torch::Tensor forward(const torch::Tensor &x, const torch::Tensor &cos, const torch::Tensor &sin) {
    auto h = x + attention(attention_norm(x), cos, sin);
    return h + feed_forward(ffn_norm(h));
  }
  Attention attention;
  FeedForward feed_forward;
  RMSNorm attention_norm, ffn_norm;
};
TORCH_MODULE(TransformerBlock);

struct LlamaImpl : torch::nn::Module {
  explicit LlamaImpl(const LlamaConfig &c)
      : config(c), tok_embeddings(c.vocab_size, c.dim), norm(c.dim, c.norm_eps),
        output(torch::nn::LinearOptions(c.dim, c.vocab_size).bias(false)) {
    register_module("tok_embeddings", tok_embeddings);
    for (int64_t i = 0; i < c.n_layers; ++i)
      layers.push_back(register_module("layers." + std::to_string(i), TransformerBlock(c)));
    register_module("norm", norm);
    register_module("output", output);
  }

  torch::Tensor hidden(const torch::Tensor &tokens) {
    auto [cos, sin] = rotaryTables(tokens.size(1), config.dim / config.n_heads, config.rope_theta);
    auto h = tok_embeddings(tokens);
    for (auto &layer : layers)
      h = layer(h, cos, sin);
    return norm(h);
  }

  // Next-token targets given by the caller (-1 = padding): the loss is fused with the output head.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor &tokens,
                                                  const std::optional<torch::Tensor> &targets = std::nullopt) {
    auto h = hidden(tokens);
    auto logits = output(h);
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(-1));
    }
    return {logits, loss};
  }

  // Tied embeddings with the causal shift inside the loss, as Hugging Face ports write it.
  torch::Tensor tied_loss(const torch::Tensor &tokens) {
    auto h = hidden(tokens);
    auto logits = F::linear(h, tok_embeddings->weight);
    auto shift_logits = logits.slice(1, 0, -1).contiguous();
    auto shift_labels = tokens.slice(1, 1).contiguous();
    return F::cross_entropy(shift_logits.view({-1, shift_logits.size(-1)}), shift_labels.view(-1));
  }

  LlamaConfig config;
  torch::nn::Embedding tok_embeddings;
  std::vector<TransformerBlock> layers;
  RMSNorm norm;
  torch::nn::Linear output;
};
TORCH_MODULE(Llama);

// A tiny configuration, spelled the C++20 way.
Llama makeTinyLlama() { return Llama(LlamaConfig{.vocab_size = 512, .dim = 64, .n_layers = 2, .n_heads = 4}); }
