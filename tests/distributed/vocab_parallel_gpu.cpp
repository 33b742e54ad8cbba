// One rank of the vocabulary-parallel measurement on several GPUs over NCCL (scripts/gpu/multi_gpu.sh starts
// it through lmfuse_launch, which appends --rank r --world-size R --store PATH). Rank r uses GPU r.
//   lmfuse_vocab_parallel_gpu [--tokens N] [--dim D] [--vocab V] [--iters K] [--ignore P] --rank r ...
// Every rank builds the same bf16 problem on its GPU from one seed and runs
//   the one-GPU call   lmfuse::linear_cross_entropy over the whole head (eager, timed with events);
//   the rank's share   lmfuse::vocab_parallel_linear_cross_entropy over its rows, forward + backward,
//                      checked against the one-GPU call, then captured in a CUDA graph and replayed
//                      (no host synchronisation inside: capture would fail);
//   its collectives    the three all-reduces alone (max [N], sums [3, N] fp64, grad_hidden [N, D]), as a graph;
//   its GEMMs          the three plain GEMMs of its shard ([N, D]·[D, V_r], and the two gradients).
// Prints one CSV line per rank. Without CUDA in LibTorch it says so and exits 2.
#include <lmfuse/distributed.h>
#include <torch/torch.h>

#include <cstdio>
#include <string>

#ifdef LMFUSE_DISTRIBUTED_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace {

struct Args {
  int64_t tokens = 8192, dim = 4096, vocab = 128256, iters = 20;
  double ignore = 0.0;
  int rank = 0, worldSize = 1;
  std::string store;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--tokens") args.tokens = std::stoll(value);
    else if (key == "--dim") args.dim = std::stoll(value);
    else if (key == "--vocab") args.vocab = std::stoll(value);
    else if (key == "--iters") args.iters = std::stoll(value);
    else if (key == "--ignore") args.ignore = std::stod(value);
    else if (key == "--rank") args.rank = std::stoi(value);
    else if (key == "--world-size") args.worldSize = std::stoi(value);
    else if (key == "--store") args.store = value;
    else throw std::invalid_argument("unknown argument " + key);
  }
  return args;
}

double relativeError(const torch::Tensor& actual, const torch::Tensor& expected) {
  const torch::Tensor a = actual.to(torch::kDouble), e = expected.to(torch::kDouble);
  return (a - e).abs().max().item<double>() / std::max(e.abs().max().item<double>(), 1e-300);
}

#ifdef LMFUSE_DISTRIBUTED_CUDA
/// Milliseconds per call of `body`, averaged over `iters` calls after one warm-up, between two events.
template <class Body>
double eventMs(int64_t iters, const Body& body) {
  body();
  at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  start.record();
  for (int64_t i = 0; i < iters; ++i) body();
  stop.record();
  stop.synchronize();
  return start.elapsed_time(stop) / static_cast<double>(iters);
}

/// Captures `body` in a CUDA graph on a side stream, then times its replays.
template <class Body>
double graphMs(int64_t iters, const Body& body) {
  at::cuda::CUDAGraph graph;
  {
    const c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool());
    body();  // warm-up on the capture stream (allocator pools, the agreement check already done)
    torch::cuda::synchronize();
    graph.capture_begin();
    body();
    graph.capture_end();
  }
  return eventMs(iters, [&] { graph.replay(); });
}

int run(const Args& args) {
  const c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(args.rank));
  const torch::Device device(torch::kCUDA, args.rank);
  lmfuse::GroupOptions groupOptions;
  groupOptions.world_size = args.worldSize;
  groupOptions.rank = args.rank;
  groupOptions.store_path = args.store;
  groupOptions.backend = lmfuse::GroupBackend::Nccl;
  groupOptions.timeout = std::chrono::seconds(600);
  const auto group = lmfuse::make_group(groupOptions);

  torch::manual_seed(20261123);  // the same problem on every GPU
  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16).device(device);
  const torch::Tensor hiddenData = torch::randn({args.tokens, args.dim}, bf16);
  const torch::Tensor weightData = torch::randn({args.vocab, args.dim}, bf16) * 0.02;
  torch::Tensor labels = torch::randint(0, args.vocab, {args.tokens}, torch::TensorOptions().dtype(torch::kLong).device(device));
  labels.masked_fill_(torch::rand({args.tokens}, torch::TensorOptions().device(device)) < args.ignore, -100);
  const int64_t base = args.vocab / args.worldSize, extra = args.vocab % args.worldSize;
  const int64_t begin = args.rank * base + std::min<int64_t>(args.rank, extra), rows = base + (args.rank < extra);

  // The one-GPU call over the whole head: the reference and the time to beat.
  torch::Tensor h1 = hiddenData.clone().requires_grad_(true), w1 = weightData.clone().requires_grad_(true);
  auto single = [&] {
    h1.mutable_grad() = torch::Tensor();
    w1.mutable_grad() = torch::Tensor();
    lmfuse::linear_cross_entropy(h1, w1, {}, labels).backward();
  };
  const double singleMs = eventMs(args.iters, single);
  const torch::Tensor loss1 = lmfuse::linear_cross_entropy(h1.detach(), w1.detach(), {}, labels);

  // The rank's share, checked once eagerly, then captured. The eager loss goes out of scope before the
  // capture: a live autograd graph keeps its gradient accumulators on the stream it ran on, and the
  // captured backward would then make the legacy stream wait on the capturing one.
  torch::Tensor h = hiddenData.clone().requires_grad_(true);
  torch::Tensor w = weightData.narrow(0, begin, rows).clone().requires_grad_(true);
  double lossError = 0, hiddenError = 0, weightError = 0;
  {
    const torch::Tensor loss = lmfuse::vocab_parallel_linear_cross_entropy(h, w, {}, labels, group);
    loss.backward();
    lossError = relativeError(loss, loss1);
    hiddenError = relativeError(h.grad(), h1.grad());
    weightError = relativeError(w.grad(), w1.grad().narrow(0, begin, rows));
  }
  const double parallelMs = graphMs(args.iters, [&] {
    lmfuse::vocab_parallel_linear_cross_entropy(h, w, {}, labels, group).backward();  // grads accumulate: timing only
  });

  // The collectives alone, and the three GEMMs of the shard.
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble).device(device);
  torch::Tensor maxes = torch::zeros({args.tokens}, f64), sums = torch::zeros({3, args.tokens}, f64);
  torch::Tensor gradHidden = torch::zeros({args.tokens, args.dim}, bf16);
  const double collectivesMs = graphMs(args.iters, [&] {
    std::vector<torch::Tensor> a{maxes}, b{sums}, c{gradHidden};
    c10d::AllreduceOptions maxOptions;
    maxOptions.reduceOp = c10d::ReduceOp::MAX;
    group->allreduce(a, maxOptions)->wait();
    group->allreduce(b)->wait();
    group->allreduce(c)->wait();
  });
  const torch::Tensor dz = torch::randn({args.tokens, rows}, bf16);
  const torch::Tensor wShard = weightData.narrow(0, begin, rows);
  const double gemmMs = graphMs(args.iters, [&] {
    torch::mm(hiddenData, wShard.t());
    torch::mm(dz, wShard);
    torch::mm(dz.t(), hiddenData);
  });

  if (args.rank == 0)
    std::printf("rank,gpus,tokens,dim,vocab,rows,one_gpu_ms,rank_ms,collectives_ms,rank_gemms_ms,loss_rel,grad_hidden_rel,grad_weight_rel\n");
  std::fflush(stdout);
  std::vector<torch::Tensor> barrier{torch::zeros({1}, f64)};
  group->allreduce(barrier)->wait();
  std::printf("%d,%d,%lld,%lld,%lld,%lld,%.3f,%.3f,%.3f,%.3f,%.3g,%.3g,%.3g\n", args.rank, args.worldSize,
              static_cast<long long>(args.tokens), static_cast<long long>(args.dim), static_cast<long long>(args.vocab),
              static_cast<long long>(rows), singleMs, parallelMs, collectivesMs, gemmMs, lossError, hiddenError,
              weightError);
  std::fflush(stdout);
  return 0;
}
#else
int run(const Args&) {
  std::fprintf(stderr, "lmfuse_vocab_parallel_gpu: this LibTorch has no CUDA\n");
  return 2;
}
#endif

}  // namespace

int main(int argc, char** argv) try {
  return run(parse(argc, argv));
} catch (const std::exception& error) {
  std::fprintf(stderr, "lmfuse_vocab_parallel_gpu: %s\n", error.what());
  return 1;
}
