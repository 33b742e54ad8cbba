// Trains the GPT of model.h on the synthetic corpus with AdamW from a fixed seed and prints one CSV
// line per step: step,loss,ms,peak_mem (peak_mem: peak bytes allocated by LibTorch's CUDA allocator
// during the step on CUDA, the process's peak resident set on the CPU). Built twice from the same
// sources: plain (gpt_train) and through lmfuse_rewrite (gpt_train_fused).
//
//   gpt_train [--steps N] [--device cpu|cuda] [--dtype fp32|bf16] [--vocab V] [--dim D] [--layers L]
//             [--heads H] [--seq T] [--batch B] [--lr X] [--seed S] [--bias] [--head-bias] [--tied]
//             [--params FILE] [--ignore-prefix]
//             [--world-size R --rank r (--store PATH | --port P) [--parallel data|vocab]]
// --ignore-prefix: row b of each batch ignores its first b·T/B targets (prompts of varying length, as in
// fine-tuning), so the ranks' shards hold different numbers of labelled tokens.
// Several processes (<lmfuse/distributed.h>; a FileStore at PATH, or a TCPStore on 127.0.0.1:P; Gloo on
// the CPU, NCCL on CUDA), one per rank, every replica initialised from the same seed:
//   data   rank r trains on its rows of each batch (B split as evenly as it goes); the head's loss is
//          lmfuse::linear_cross_entropy with LossOptions::process_group (the global mean), and the
//          gradients are all-reduced (summed) before each step: the steps of one process on the whole batch;
//   vocab  every rank takes the whole batch and the rows of the head that are its share of the vocabulary,
//          through lmfuse::vocab_parallel_linear_cross_entropy; the head's gradient rows are summed
//          across ranks (each rank fills only its own), the trunk's are already equal on every rank.
// In both modes the trainer computes the final hidden states from the model's modules and calls the loss
// itself (the model's own loss site knows nothing of the group); the printed loss is the whole batch's.
// Rank 0 prints the CSV and writes --params.
// Every option can also come from the environment as GPT_<NAME> (GPT_STEPS=50, GPT_DEVICE=cuda, ...);
// the command line wins. --params writes the final parameters (name, then fp32 values) for comparison.
#include "data.h"
#include "model.h"

#include <lmfuse/distributed.h>

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
  static const char* flags[] = {"bias", "head-bias", "tied", "ignore-prefix"};
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

/// [first, first + count) of `total` items for `rank` of `ranks`, the remainder going to the first ranks.
std::pair<int64_t, int64_t> shareOf(int64_t total, int rank, int ranks) {
  const int64_t base = total / ranks, extra = total % ranks;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

/// What GPTImpl::forward computes before its head: embeddings, blocks, final LayerNorm.
torch::Tensor finalHidden(GPT& model, const torch::Tensor& idx) {
  auto pos = torch::arange(idx.size(1), idx.options().dtype(torch::kLong));
  auto x = model->wte(idx) + model->wpe(pos);
  for (const auto& block : *model->h) x = block->as<Block>()->forward(x);
  return model->ln_f(x);
}

/// The training run's share of a process group; absent (world size 1 without a store) = one process.
struct Distributed {
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  int rank = 0, size = 1;
  bool vocab = false;  ///< vocabulary-parallel head, else data parallel

  void sum(torch::Tensor& tensor) const {
    std::vector<torch::Tensor> tensors{tensor};
    group->allreduce(tensors)->wait();
  }
};

/// One step's loss (the whole batch's) with the gradients of this rank, already combined across ranks.
torch::Tensor distributedStep(GPT& model, const Distributed& dist, const torch::Tensor& idx,
                              const torch::Tensor& targets) {
  const bool tied = model->config.tie_weights;
  torch::Tensor weight = tied ? model->wte->weight : model->lm_head->weight;
  torch::Tensor bias = !tied && model->config.head_bias ? model->lm_head->bias : torch::Tensor();
  auto options = lmfuse::LossOptions().ignore_index(-1).dtype(torch::kFloat);
  torch::Tensor loss;
  if (dist.vocab) {
    if (tied) throw std::invalid_argument("--parallel vocab needs an untied head (the embedding is not split)");
    const auto [begin, rows] = shareOf(weight.size(0), dist.rank, dist.size);
    loss = lmfuse::vocab_parallel_linear_cross_entropy(finalHidden(model, idx), weight.narrow(0, begin, rows),
                                                       bias.defined() ? bias.narrow(0, begin, rows) : bias, targets,
                                                       dist.group, options);
    loss.backward();
    for (torch::Tensor* head : {&weight, &bias})  // each rank filled only its rows
      if (head->defined()) dist.sum(head->mutable_grad());
    return loss.detach();
  }
  const auto [first, count] = shareOf(idx.size(0), dist.rank, dist.size);
  loss = lmfuse::linear_cross_entropy(finalHidden(model, idx.narrow(0, first, count)), weight, bias,
                                      targets.narrow(0, first, count),
                                      options.process_group(lmfuse::distributed_group(dist.group)));
  loss.backward();
  for (auto& parameter : model->parameters())
    if (parameter.grad().defined()) dist.sum(parameter.mutable_grad());
  torch::Tensor total = loss.detach().to(torch::kFloat).clone();  // each rank's share of the global mean
  dist.sum(total);
  return total;
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
  const bool ignorePrefix = settings.flag("ignore-prefix");
  Distributed dist;
  dist.size = static_cast<int>(settings.integer("world-size", 1));
  dist.rank = static_cast<int>(settings.integer("rank", 0));
  const std::string storePath = settings.text("store", "");
  if (dist.size > 1 || !storePath.empty()) {
    lmfuse::GroupOptions group;
    group.world_size = dist.size;
    group.rank = dist.rank;
    group.store_path = storePath;
    group.tcp_port = static_cast<int>(settings.integer("port", 29500));
    group.backend = device.is_cuda() ? lmfuse::GroupBackend::Nccl : lmfuse::GroupBackend::Gloo;
    if (device.is_cuda()) device = torch::Device(torch::kCUDA, dist.rank);  // one GPU per rank
    dist.group = lmfuse::make_group(group);
    const std::string parallel = settings.text("parallel", "data");
    if (parallel != "data" && parallel != "vocab") throw std::invalid_argument("--parallel must be data or vocab");
    dist.vocab = parallel == "vocab";
  }
  const bool printer = dist.rank == 0;

  torch::manual_seed(seed);
  GPT model(config);
  model->to(device, dtypeName == "bf16" ? torch::kBFloat16 : torch::kFloat);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(lr).weight_decay(0.1));
  const SyntheticCorpus corpus(config.vocab_size, std::max<int64_t>(1 << 16, 4 * steps * batch * config.block_size),
                               seed);

  if (printer) std::printf("step,loss,ms,peak_mem\n");
  for (int64_t step = 1; step <= steps; ++step) {
    auto [idx, targets] = corpus.batch(step, batch, config.block_size);
    if (ignorePrefix)
      for (int64_t row = 0; row < batch; ++row) targets[row].narrow(0, 0, row * config.block_size / batch).fill_(-1);
    idx = idx.to(device);
    targets = targets.to(device);
    startStep(device);
    const auto start = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    torch::Tensor loss;
    if (dist.group) {
      loss = distributedStep(model, dist, idx, targets);
    } else {
      loss = model->forward(idx, targets).second;
      loss.backward();
    }
    optimizer.step();
    const float value = loss.item<float>();
    endStep(device);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (printer) std::printf("%lld,%.9g,%.3f,%lld\n", static_cast<long long>(step), static_cast<double>(value), ms,
                static_cast<long long>(peakMemory(device)));
    std::fflush(stdout);
  }
  if (!paramsPath.empty() && printer) writeParameters(model, paramsPath);
  return 0;
} catch (const std::exception& error) {
  std::fprintf(stderr, "gpt_train: %s\n", error.what());
  return 1;
}
