// Trains the GPT of model.h on the synthetic corpus with AdamW from a fixed seed and prints one CSV
// line per step: step,loss,ms,peak_mem (peak_mem: peak bytes allocated by LibTorch's CUDA allocator
// during the step on CUDA, the process's peak resident set on the CPU). Built twice from the same
// sources: plain (gpt_train) and through lmfuse_rewrite (gpt_train_fused).
//
//   gpt_train [--steps N] [--device cpu|cuda] [--dtype fp32|bf16] [--vocab V] [--dim D] [--layers L]
//             [--heads H] [--seq T] [--batch B] [--lr X] [--seed S] [--bias] [--head-bias] [--tied]
//             [--params FILE]
// Every option can also come from the environment as GPT_<NAME> (GPT_STEPS=50, GPT_DEVICE=cuda, ...);
// the command line wins. --params writes the final parameters (name, then fp32 values) for comparison.
#include "data.h"
#include "model.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>

#ifdef LMFUSE_EXAMPLE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>  // defines: the allocator's peak statistics
#include <torch/cuda.h>
#endif

namespace {

struct Settings {
  std::map<std::string, std::string> values;

  std::string text(const std::string& name, const std::string& fallback) const {
    auto it = values.find(name);
    if (it != values.end()) return it->second;
    std::string env = "GPT_" + name;
    for (char& c : env) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const char* value = std::getenv(env.c_str());
    return value ? value : fallback;
  }
  int64_t integer(const std::string& name, int64_t fallback) const {
    return std::stoll(text(name, std::to_string(fallback)));
  }
  bool flag(const std::string& name) const { return text(name, "0") == "1"; }
};

Settings parseArguments(int argc, char** argv) {
  static const char* flags[] = {"bias", "head-bias", "tied"};
  Settings settings;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + arg + "'");
    arg = arg.substr(2);
    bool isFlag = false;
    for (const char* f : flags) isFlag = isFlag || arg == f;
    if (isFlag) {
      settings.values[arg] = "1";
    } else {
      if (i + 1 >= argc) throw std::invalid_argument("--" + arg + " needs a value");
      settings.values[arg] = argv[++i];
    }
  }
  return settings;
}

int64_t peakMemory(const torch::Device& device) {
#ifdef LMFUSE_EXAMPLE_CUDA
  if (device.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[0].peak;  // index 0: StatType::AGGREGATE
  }
#endif
  (void)device;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

void startStep(const torch::Device& device) {
#ifdef LMFUSE_EXAMPLE_CUDA
  if (device.is_cuda()) {
    torch::cuda::synchronize(device.index());
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
  }
#endif
  (void)device;
}

void endStep(const torch::Device& device) {
#ifdef LMFUSE_EXAMPLE_CUDA
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
#endif
  (void)device;
}

void writeParameters(GPT& model, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + path);
  for (const auto& p : model->named_parameters()) {
    auto values = p.value().detach().to(torch::kCPU, torch::kFloat).contiguous();
    const std::string& name = p.key();
    const uint32_t nameLength = static_cast<uint32_t>(name.size());
    const int64_t count = values.numel();
    out.write(reinterpret_cast<const char*>(&nameLength), sizeof nameLength);
    out.write(name.data(), nameLength);
    out.write(reinterpret_cast<const char*>(&count), sizeof count);
    out.write(reinterpret_cast<const char*>(values.data_ptr<float>()), count * static_cast<int64_t>(sizeof(float)));
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const Settings settings = parseArguments(argc, argv);
  GPTConfig config;
  config.vocab_size = settings.integer("vocab", 1024);
  config.n_embd = settings.integer("dim", 64);
  config.n_layer = settings.integer("layers", 2);
  config.n_head = settings.integer("heads", 4);
  config.block_size = settings.integer("seq", 32);
  config.bias = settings.flag("bias");
  config.head_bias = settings.flag("head-bias");
  config.tie_weights = settings.flag("tied");
  const int64_t steps = settings.integer("steps", 20);
  const int64_t batch = settings.integer("batch", 8);
  const double lr = std::stod(settings.text("lr", "0.001"));
  const uint64_t seed = static_cast<uint64_t>(settings.integer("seed", 1234));
  const std::string dtypeName = settings.text("dtype", "fp32");
  if (dtypeName != "fp32" && dtypeName != "bf16") throw std::invalid_argument("--dtype must be fp32 or bf16");
  torch::Device device(settings.text("device", "cpu"));
  if (device.is_cuda() && !device.has_index()) device = torch::Device(torch::kCUDA, 0);  // the allocator's stats need one
  const std::string paramsPath = settings.text("params", "");

  torch::manual_seed(seed);
  GPT model(config);
  model->to(device, dtypeName == "bf16" ? torch::kBFloat16 : torch::kFloat);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(lr).weight_decay(0.1));
  const SyntheticCorpus corpus(config.vocab_size, std::max<int64_t>(1 << 16, 4 * steps * batch * config.block_size),
                               seed);

  std::printf("step,loss,ms,peak_mem\n");
  for (int64_t step = 1; step <= steps; ++step) {
    auto [idx, targets] = corpus.batch(step, batch, config.block_size);
    idx = idx.to(device);
    targets = targets.to(device);
    startStep(device);
    const auto start = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    auto [logits, loss] = model->forward(idx, targets);
    loss.backward();
    optimizer.step();
    const float value = loss.item<float>();
    endStep(device);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("%lld,%.9g,%.3f,%lld\n", static_cast<long long>(step), static_cast<double>(value), ms,
                static_cast<long long>(peakMemory(device)));
    std::fflush(stdout);
  }
  if (!paramsPath.empty()) writeParameters(model, paramsPath);
  return 0;
} catch (const std::exception& error) {
  std::fprintf(stderr, "gpt_train: %s\n", error.what());
  return 1;
}
