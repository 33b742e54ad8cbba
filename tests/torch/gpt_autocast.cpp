// Mixed-precision training of the example GPT (examples/gpt/model.h, the rewritten model.cpp): fp32
// parameters, the forward under autocast (bf16, on the CPU or CUDA), AdamW, the same random batches. It
// trains twice from the same seed in one process: through the fused path, then with lmfuse switched off
// (the original code under the same autocast state), and prints both runs' per-step losses as CSV
// (run,step,loss) on stdout and a summary on stderr. Exits 1 when the fused run did not take the fused
// path at every step, when a loss or the head's gradient dtype differs from the original's, or when a
// step's loss differs by more than --rtol relative (default 2e-2: the original rounds its logits to bf16,
// the fused path never forms them).
//   gpt_autocast [--device cpu|cuda] [--steps N] [--vocab V] [--dim D] [--layers L] [--heads H] [--seq T]
//                [--batch B] [--seed S] [--rtol X]
#include <torch/torch.h>
#include <torch/version.h>

#include <ATen/autocast_mode.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <lmfuse/torch.h>

#include "model.h"

namespace {

// Autocast on or off for one device type; the API moved in LibTorch 2.4.
void setAutocast(c10::DeviceType device, bool on) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  at::autocast::set_autocast_enabled(device, on);
  if (on) at::autocast::set_autocast_dtype(device, torch::kBFloat16);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(on);
    if (on) at::autocast::set_autocast_gpu_dtype(torch::kBFloat16);
  } else {
    at::autocast::set_cpu_enabled(on);
    if (on) at::autocast::set_autocast_cpu_dtype(torch::kBFloat16);
  }
#endif
}

// What `with torch.autocast(device, dtype=torch.bfloat16):` does, for the scope of the object.
struct Autocast {
  explicit Autocast(c10::DeviceType device) : device(device) {
    setAutocast(device, true);
    at::autocast::increment_nesting();
  }
  ~Autocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    setAutocast(device, false);
  }
  c10::DeviceType device;
};

struct Settings {
  std::map<std::string, std::string> values;
  std::string text(const std::string& name, const std::string& fallback) const {
    auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
  int64_t number(const std::string& name, int64_t fallback) const { return std::stoll(text(name, std::to_string(fallback))); }
};

struct Run {
  std::vector<double> losses;
  bool dtypesOk = true;
  int64_t fusedCalls = 0;
};

Run train(const GPTConfig& config, const torch::Device& device, int64_t steps, int64_t batch, uint64_t seed) {
  Run run;
  torch::manual_seed(seed);
  GPT model(config);
  model->to(device);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(3e-3));
  const int64_t before = lmfuse::fused_call_count();
  for (int64_t step = 0; step < steps; ++step) {
    torch::manual_seed(seed + 1000 + step);  // the same batches in both runs
    auto tokens = torch::randint(0, config.vocab_size, {batch, config.block_size + 1}).to(device);
    auto idx = tokens.slice(1, 0, -1).contiguous(), targets = tokens.slice(1, 1).contiguous();
    optimizer.zero_grad();
    torch::Tensor loss;
    {
      Autocast autocast(device.type());
      loss = model->forward(idx, targets).second;
    }
    loss.backward();
    torch::Tensor headWeight = config.tie_weights ? model->wte->weight : model->lm_head->weight;
    run.dtypesOk = run.dtypesOk && loss.scalar_type() == torch::kFloat &&
                   headWeight.grad().scalar_type() == torch::kFloat;
    optimizer.step();
    run.losses.push_back(loss.item<double>());
  }
  run.fusedCalls = lmfuse::fused_call_count() - before;
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strncmp(argv[i], "--", 2) != 0) {
      std::fprintf(stderr, "gpt_autocast: unexpected argument %s\n", argv[i]);
      return 2;
    }
    settings.values[argv[i] + 2] = argv[i + 1];
  }
  GPTConfig config;
  config.vocab_size = settings.number("vocab", 1024);
  config.n_embd = settings.number("dim", 64);
  config.n_layer = settings.number("layers", 2);
  config.n_head = settings.number("heads", 4);
  config.block_size = settings.number("seq", 64);
  const int64_t steps = settings.number("steps", 10), batch = settings.number("batch", 4);
  const uint64_t seed = static_cast<uint64_t>(settings.number("seed", 20261123));
  const double rtol = std::stod(settings.text("rtol", "2e-2"));
  const torch::Device device(settings.text("device", "cpu"));

  lmfuse::set_enabled(true);
  const Run fused = train(config, device, steps, batch, seed);
  lmfuse::set_enabled(false);
  const Run original = train(config, device, steps, batch, seed);
  lmfuse::set_enabled(true);

  std::printf("run,step,loss\n");
  double worst = 0;
  for (int64_t step = 0; step < steps; ++step) {
    std::printf("fused,%lld,%.9g\noriginal,%lld,%.9g\n", static_cast<long long>(step + 1), fused.losses[step],
                static_cast<long long>(step + 1), original.losses[step]);
    worst = std::max(worst, std::fabs(fused.losses[step] - original.losses[step]) / std::fabs(original.losses[step]));
  }
  const bool ok = fused.fusedCalls >= steps && original.fusedCalls == 0 && fused.dtypesOk && original.dtypesOk &&
                  worst <= rtol;
  std::fprintf(stderr,
               "bf16 autocast on %s, %lld steps: step-1 loss fused %.7f / original %.7f, worst relative difference "
               "%.3g (tolerance %.3g); %lld fused calls; dtypes %s: %s\n",
               device.str().c_str(), static_cast<long long>(steps), fused.losses[0], original.losses[0], worst, rtol,
               static_cast<long long>(fused.fusedCalls), fused.dtypesOk && original.dtypesOk ? "fp32 loss and head gradient" : "WRONG",
               ok ? "fused trains as the original" : "FAILED");
  return ok ? 0 : 1;
}
