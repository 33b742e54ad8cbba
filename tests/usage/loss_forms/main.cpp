// Models whose head or loss is written in the other accepted spellings: a tied head as
// torch::matmul(h, wte->weight.t()) with a CrossEntropyLoss member (options from its construction), an
// untied head parameter as h.mm(W.t()) with nll_loss over log_softmax, an NLLLoss module, one sequence
// ([T] tokens) shifted along dim 0, and the loss chosen by `?:` while training with the logits returned and
// the labels moved to the logits' device.
// Each trains through the fused path with the original's losses.
#include <torch/torch.h>

#include "train_check.h"

namespace F = torch::nn::functional;

// GPT-2 style: tied embeddings, the loss module configured in the constructor.
struct TiedImpl : torch::nn::Module {
  TiedImpl(int64_t vocab, int64_t dim)
      : wte(register_module("wte", torch::nn::Embedding(vocab, dim))),
        mix(register_module("mix", torch::nn::Linear(dim, dim))),
        criterion(torch::nn::CrossEntropyLossOptions().ignore_index(3).label_smoothing(0.1)) {}

  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& idx, c10::optional<torch::Tensor> targets) {
    auto h = torch::tanh(mix(wte(idx)));
    auto logits = torch::matmul(h, wte->weight.t());
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = criterion(logits.view({-1, logits.size(-1)}), targets->view(-1));
    }
    return {logits, loss};
  }

  torch::nn::Embedding wte{nullptr};
  torch::nn::Linear mix{nullptr};
  torch::nn::CrossEntropyLoss criterion;
};
TORCH_MODULE(Tied);

// Char-RNN style: an untied output matrix registered as a parameter, nll_loss over log-probabilities.
struct UntiedImpl : torch::nn::Module {
  UntiedImpl(int64_t vocab, int64_t dim)
      : embed(register_module("embed", torch::nn::Embedding(vocab, dim))),
        out(register_parameter("out", torch::randn({vocab, dim}) * 0.2)) {}

  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& targets) {
    auto h = torch::tanh(embed(idx)).view({-1, out.size(1)});
    auto logits = h.mm(out.transpose(0, 1));
    return F::nll_loss(F::log_softmax(logits, -1), targets.view(-1),
                       F::NLLLossFuncOptions().ignore_index(7));
  }

  torch::nn::Embedding embed{nullptr};
  torch::Tensor out;
};
TORCH_MODULE(Untied);

// The NLLLoss module, registered, over x.log_softmax(-1) kept in a local.
struct ModuleNllImpl : torch::nn::Module {
  ModuleNllImpl(int64_t vocab, int64_t dim)
      : embed(register_module("embed", torch::nn::Embedding(vocab, dim))),
        lm_head(register_module("lm_head", torch::nn::Linear(dim, vocab))) {
    nll = register_module("nll", torch::nn::NLLLoss(torch::nn::NLLLossOptions().ignore_index(5)));
  }

  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& targets) {
    auto logits = lm_head(embed(idx));
    auto logp = logits.log_softmax(-1);
    return nll(logp.view({-1, logp.size(-1)}), targets.view(-1));
  }

  torch::nn::Embedding embed{nullptr};
  torch::nn::Linear lm_head{nullptr};
  torch::nn::NLLLoss nll{nullptr};
};
TORCH_MODULE(ModuleNll);

// One sequence at a time: [T] tokens, the causal shift written on dim 0 (the rewrite hands the fused call
// that dim, which it checks against the ranks it is given).
struct OneSequenceImpl : torch::nn::Module {
  OneSequenceImpl(int64_t vocab, int64_t dim)
      : embed(register_module("embed", torch::nn::Embedding(vocab, dim))),
        lm_head(register_module("lm_head", torch::nn::Linear(dim, vocab))) {}

  torch::Tensor forward(const torch::Tensor& tokens) {
    auto logits = lm_head(torch::tanh(embed(tokens)));
    return F::cross_entropy(logits.slice(0, 0, -1), tokens.slice(0, 1));
  }

  torch::nn::Embedding embed{nullptr};
  torch::nn::Linear lm_head{nullptr};
};
TORCH_MODULE(OneSequence);

// The loss only while training, chosen by ?:, the logits returned, the labels moved to the logits' device
// (as Hugging Face ports write it): the head repeats the condition, so in eval mode (or without targets)
// the logits it returns are computed.
struct TrainOnlyImpl : torch::nn::Module {
  TrainOnlyImpl(int64_t vocab, int64_t dim)
      : embed(register_module("embed", torch::nn::Embedding(vocab, dim))),
        lm_head(register_module("lm_head", torch::nn::Linear(dim, vocab))) {}

  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& idx, const c10::optional<torch::Tensor>& targets) {
    auto logits = lm_head(torch::tanh(embed(idx)));
    auto loss = targets.has_value() && is_training()
                    ? F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->to(logits.device()).view(-1))
                    : torch::Tensor();
    return {logits, loss};
  }

  torch::nn::Embedding embed{nullptr};
  torch::nn::Linear lm_head{nullptr};
};
TORCH_MODULE(TrainOnly);

// In eval mode the patched model returns the original's logits (not skipped ones) and no loss.
int evalLogitsComputed(int64_t vocab) {
  TrainOnly model(vocab, 24);
  model->eval();
  const usage::Batch batch = usage::randomBatch(vocab, usage::freshSeed());
  auto [logits, loss] = model->forward(batch.idx, batch.targets);
  lmfuse::set_enabled(false);
  auto original = model->forward(batch.idx, batch.targets).first;
  lmfuse::set_enabled(true);
  const bool ok = !loss.defined() && torch::equal(logits, original);
  std::printf("eval mode: %s\n", ok ? "the logits are computed, no loss" : "FAILED");
  return ok ? 0 : 1;
}

int main() {
  const int64_t vocab = 47;
  int failures = 0;
  failures += usage::compareWithOriginal(
      usage::sgdTrainer<Tied>([&] { return Tied(vocab, 24); },
                              [](Tied& model, const usage::Batch& batch) {
                                return model->forward(batch.idx, batch.targets).second;
                              }),
      vocab, 1e-5);
  failures += usage::compareWithOriginal(
      usage::sgdTrainer<Untied>([&] { return Untied(vocab, 24); },
                                [](Untied& model, const usage::Batch& batch) {
                                  return model->forward(batch.idx, batch.targets);
                                }),
      vocab, 1e-5);
  failures += usage::compareWithOriginal(
      usage::sgdTrainer<ModuleNll>([&] { return ModuleNll(vocab, 24); },
                                   [](ModuleNll& model, const usage::Batch& batch) {
                                     return model->forward(batch.idx, batch.targets);
                                   }),
      vocab, 1e-5);
  failures += usage::compareWithOriginal(
      usage::sgdTrainer<OneSequence>([&] { return OneSequence(vocab, 24); },
                                     [](OneSequence& model, const usage::Batch& batch) {
                                       return model->forward(batch.idx.select(0, 0));
                                     }),
      vocab, 1e-5);
  failures += usage::compareWithOriginal(
      usage::sgdTrainer<TrainOnly>([&] { return TrainOnly(vocab, 24); },
                                   [](TrainOnly& model, const usage::Batch& batch) {
                                     return model->forward(batch.idx, batch.targets).second;
                                   }),
      vocab, 1e-5);
  failures += evalLogitsComputed(vocab);
  return failures == 0 ? 0 : 1;
}
