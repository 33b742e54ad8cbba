// fp32 model trained with its forward under CPU autocast (bf16), as torch.autocast("cpu") does it: the
// head's F::linear runs in bf16, cross_entropy in fp32. Fused and original runs are compared at bf16's
// tolerance (the original rounds the logits to bf16, the fused path never forms them); the fused loss and
// the head weight's gradient must have the original's dtypes (fp32).
#include <torch/torch.h>

#include <ATen/autocast_mode.h>

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

// What `with torch.autocast("cpu", dtype=torch.bfloat16):` does around a forward.
struct CpuAutocast {
  CpuAutocast() {
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(torch::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~CpuAutocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_cpu_enabled(false);
  }
};

int main() {
  const int64_t vocab = 67;
  bool dtypesOk = true;
  auto train = usage::sgdTrainer<TinyLM>([&] { return TinyLM(vocab, 32); },
                                         [&](TinyLM& model, const usage::Batch& batch) {
                                           torch::Tensor loss;
                                           {
                                             CpuAutocast autocast;
                                             loss = model->forward(batch.idx, batch.targets).second;
                                           }
                                           dtypesOk = dtypesOk && loss.scalar_type() == torch::kFloat;
                                           return loss;
                                         });
  const int status = usage::compareWithOriginal(train, vocab, 2e-2);
  // The head weight's gradient lands in the fp32 parameter's gradient, as the original's does.
  torch::manual_seed(1);
  TinyLM model(vocab, 32);
  const usage::Batch batch = usage::randomBatch(vocab, usage::freshSeed());
  {
    CpuAutocast autocast;
    model->forward(batch.idx, batch.targets).second.backward();
  }
  dtypesOk = dtypesOk && model->lm_head->weight.grad().scalar_type() == torch::kFloat;
  std::printf("dtypes %s\n", dtypesOk ? "as the original's" : "WRONG");
  return status == 0 && dtypesOk ? 0 : 1;
}
