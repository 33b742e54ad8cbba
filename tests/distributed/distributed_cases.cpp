// One rank of the multi-process tests of <lmfuse/distributed.h>, over a Gloo group on the CPU; started by
// lmfuse_launch (launch.cpp), which appends --rank r --world-size R --store PATH.
//   lmfuse_distributed_cases --suite vocab|data|bad|timeout --rank r --world-size R --store PATH
// Every rank builds the same full problem from one seed, takes its part, runs the distributed call and
// compares with the single-process reference in fp64 (F::linear + F::cross_entropy + the z-loss, autograd):
//   vocab    the vocabulary-parallel loss, fp64 operands, uneven shards: loss and every gradient within
//            1e-10 relative (one fp32 case at 1e-5);
//   data     the data-parallel global mean, fp32 operands (the adapter's dtypes), uneven batch shards whose
//            masks differ per rank: the summed losses and gradients within 1e-5 relative, and the per-rank
//            mean without the group is checked to be wrong (so the group is what makes them agree);
//   bad      disagreeing or invalid arguments: every rank gets an error naming the problem, and the group
//            still works afterwards;
//   timeout  one rank never joins the collective: the other fails within the group's timeout.
// Prints one line per case; exits 1 when any case fails on this rank.
#include <lmfuse/distributed.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace F = torch::nn::functional;

struct Args {
  std::string suite, store;
  int rank = -1, worldSize = 0;
};

int failures = 0;

void report(const std::string& name, bool ok, const std::string& detail) {
  std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.empty() ? "" : ": ", detail.c_str());
  std::fflush(stdout);
  if (!ok) ++failures;
}

std::string text(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return buffer;
}

double relativeError(const torch::Tensor& actual, const torch::Tensor& expected) {
  const torch::Tensor a = actual.to(torch::kDouble), e = expected.to(torch::kDouble);
  const double scale = std::max(e.abs().max().item<double>(), 1e-300);
  return (a - e).abs().max().item<double>() / scale;
}

// ============================== the single-process reference ==============================

struct Setup {
  const char* name;
  int64_t batch, seq, dim, vocab;
  bool bias = false, shift = false;
  int64_t ignoreIndex = -100;
  double smoothing = 0.0, softcap = 0.0, scale = 1.0, zLoss = 0.0;
  lmfuse::Reduction reduction = lmfuse::Reduction::Mean;
  bool nItems = false;       ///< Mean over a given divisor (1.5 × the count) instead of the count
  bool int32Labels = false;
  torch::ScalarType dtype = torch::kDouble;
};

lmfuse::LossOptions lossOptions(const Setup& s) {
  return lmfuse::LossOptions().ignore_index(s.ignoreIndex).label_smoothing(s.smoothing).softcap(s.softcap)
      .logit_scale(s.scale).z_loss(s.zLoss).reduction(s.reduction).shift(s.shift);
}

struct Problem {
  torch::Tensor hidden, weight, bias, labels, upstream;  // fp64 full problem; upstream weights None's losses
};

// Non-uniform operands; a mask that differs from row to row (row b ignores its first b·seq/batch tokens,
// row 0 everything when `emptyFirstRow`), plus scattered ignored tokens.
Problem makeProblem(const Setup& s, uint64_t seed, bool emptyFirstRow = false) {
  torch::manual_seed(seed);
  Problem p;
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  p.hidden = torch::randn({s.batch, s.seq, s.dim}, f64) * (1.0 + torch::rand({s.batch, s.seq, 1}, f64));
  p.weight = torch::randn({s.vocab, s.dim}, f64) * 0.7;
  if (s.bias) p.bias = torch::randn({s.vocab}, f64);
  p.labels = torch::randint(0, s.vocab, {s.batch, s.seq}, torch::kLong);
  p.labels.masked_fill_(torch::rand({s.batch, s.seq}) < 0.2, s.ignoreIndex);
  for (int64_t b = 0; b < s.batch; ++b) p.labels[b].narrow(0, 0, b * s.seq / s.batch).fill_(s.ignoreIndex);
  if (emptyFirstRow) p.labels[0].fill_(s.ignoreIndex);
  // The runtime takes the upstream gradient in fp32 (Options::grad_scale): values exact in fp32.
  p.upstream = (torch::rand({s.batch, s.seq}, f64) + 0.5).to(torch::kFloat).to(torch::kDouble);
  if (s.dtype != torch::kDouble) {  // operands exactly representable in the tested dtype
    for (torch::Tensor* t : {&p.hidden, &p.weight, &p.bias})
      if (t->defined()) *t = t->to(s.dtype).to(torch::kDouble);
  }
  return p;
}

/// The targets after the causal shift: label t+1 within the row, none for the last position.
torch::Tensor shiftedTargets(const Setup& s, const torch::Tensor& labels) {
  if (!s.shift) return labels;
  torch::Tensor targets = torch::full_like(labels, s.ignoreIndex);
  targets.narrow(1, 0, s.seq - 1).copy_(labels.narrow(1, 1, s.seq - 1));
  return targets;
}

torch::Tensor labelledCount(const Setup& s, const torch::Tensor& labels) {
  return shiftedTargets(s, labels).ne(s.ignoreIndex).sum().to(torch::kDouble);
}

struct Reference {
  torch::Tensor loss, gradHidden, gradWeight, gradBias;
};

/// F::cross_entropy(F::linear(...)) in fp64 with autograd; divisor: the Mean's (undefined = the count).
Reference reference(const Setup& s, const Problem& p, const torch::Tensor& labels, const torch::Tensor& hidden,
                    const torch::Tensor& divisor = {}) {
  torch::Tensor h = hidden.clone().requires_grad_(true), w = p.weight.clone().requires_grad_(true);
  torch::Tensor b = p.bias.defined() ? p.bias.clone().requires_grad_(true) : torch::Tensor();
  torch::Tensor z = s.scale * F::linear(h, w, b);
  if (s.softcap > 0) z = s.softcap * torch::tanh(z / s.softcap);
  const torch::Tensor flat = z.reshape({-1, s.vocab});
  const torch::Tensor targets = shiftedTargets(s, labels).reshape({-1});
  torch::Tensor perToken = F::cross_entropy(flat, targets, F::CrossEntropyFuncOptions().ignore_index(s.ignoreIndex)
                                                               .label_smoothing(s.smoothing).reduction(torch::kNone));
  const torch::Tensor lse = torch::logsumexp(flat, 1);
  perToken = perToken + s.zLoss * lse * lse * targets.ne(s.ignoreIndex).to(torch::kDouble);
  torch::Tensor loss, objective;
  switch (s.reduction) {
    case lmfuse::Reduction::Mean:
      loss = perToken.sum() / (divisor.defined() ? divisor : labelledCount(s, labels));
      objective = loss;
      break;
    case lmfuse::Reduction::Sum:
      loss = objective = perToken.sum();
      break;
    case lmfuse::Reduction::None:
      loss = perToken.view({labels.size(0), labels.size(1)});
      objective = (loss * p.upstream.narrow(0, 0, labels.size(0))).sum();
      break;
  }
  objective.backward();
  return {loss.detach(), h.grad(), w.grad(), b.defined() ? b.grad() : torch::Tensor()};
}

// ============================== vocabulary parallel ==============================

/// Uneven shards: rank r gets a share proportional to r + 2 (at least one row).
std::pair<int64_t, int64_t> shardOf(int64_t vocab, int rank, int ranks) {
  int64_t weights = 0, before = 0;
  for (int r = 0; r < ranks; ++r) weights += r + 2;
  for (int r = 0; r < rank; ++r) before += r + 2;
  auto edge = [&](int64_t w) { return vocab * w / weights; };
  return {edge(before), edge(before + rank + 2) - edge(before)};
}

const std::vector<Setup> kVocabCases = [] {
  std::vector<Setup> cases;
  Setup base{"plain mean", 2, 5, 8, 23};
  cases.push_back(base);
  Setup c = base;
  c.name = "bias, label smoothing, z-loss";
  c.bias = true, c.smoothing = 0.1, c.zLoss = 1e-3;
  cases.push_back(c);
  c = base;
  c.name = "softcap, logit scale, shift";
  c.softcap = 3.0, c.scale = 0.8, c.shift = true;
  cases.push_back(c);
  c = base;
  c.name = "sum, int32 labels, ignore_index -1";
  c.reduction = lmfuse::Reduction::Sum, c.int32Labels = true, c.ignoreIndex = -1;
  cases.push_back(c);
  c = base;
  c.name = "none, shift, every option";
  c.reduction = lmfuse::Reduction::None, c.shift = true, c.bias = true, c.smoothing = 0.2, c.softcap = 5.0,
  c.zLoss = 1e-2;
  cases.push_back(c);
  c = base;
  c.name = "mean over n_items";
  c.nItems = true, c.smoothing = 0.05;
  cases.push_back(c);
  c = base;
  c.name = "fp32 operands, bias, shift";
  c.dtype = torch::kFloat, c.bias = true, c.shift = true;
  cases.push_back(c);
  return cases;
}();

void vocabSuite(const Args& args, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  uint64_t seed = 100;
  for (const Setup& s : kVocabCases) {
    const Problem p = makeProblem(s, ++seed);
    const torch::Tensor divisor = s.nItems ? labelledCount(s, p.labels) * 1.5 : torch::Tensor();
    const Reference ref = reference(s, p, p.labels, p.hidden, divisor);
    const auto [begin, rows] = shardOf(s.vocab, args.rank, args.worldSize);

    torch::Tensor h = p.hidden.to(s.dtype).requires_grad_(true);
    torch::Tensor w = p.weight.narrow(0, begin, rows).to(s.dtype).requires_grad_(true);
    torch::Tensor b = s.bias ? p.bias.narrow(0, begin, rows).to(s.dtype).requires_grad_(true) : torch::Tensor();
    lmfuse::LossOptions options = lossOptions(s);
    if (s.nItems) options.n_items(divisor.to(torch::kFloat));
    const torch::Tensor labels = s.int32Labels ? p.labels.to(torch::kInt) : p.labels;
    std::string detail;
    bool ok = true;
    try {
      torch::Tensor loss = lmfuse::vocab_parallel_linear_cross_entropy(h, w, b, labels, group, options);
      (s.reduction == lmfuse::Reduction::None ? (loss * p.upstream.to(s.dtype)).sum() : loss).backward();
      const double tolerance = s.dtype == torch::kDouble ? 1e-10 : 1e-5;
      const std::vector<std::pair<const char*, double>> errors = {
          {"loss", relativeError(loss, ref.loss)},
          {"grad_hidden", relativeError(h.grad(), ref.gradHidden)},
          {"grad_weight", relativeError(w.grad(), ref.gradWeight.narrow(0, begin, rows))},
          {"grad_bias", s.bias ? relativeError(b.grad(), ref.gradBias.narrow(0, begin, rows)) : 0.0}};
      for (const auto& [what, error] : errors) {
        detail += std::string(detail.empty() ? "" : ", ") + what + " " + text(error);
        ok = ok && error <= tolerance;
      }
      detail += " (rows " + std::to_string(begin) + "+" + std::to_string(rows) + " of " + std::to_string(s.vocab) +
                ", tolerance " + text(tolerance) + ")";
    } catch (const std::exception& error) {
      ok = false;
      detail = error.what();
    }
    report(std::string("vocab parallel: ") + s.name, ok, detail);
  }
}

// ============================== data parallel ==============================

/// Uneven batch shards: rank r gets rows [first, first + count) with counts differing by rank.
std::pair<int64_t, int64_t> rowsOf(int64_t batch, int rank, int ranks) { return shardOf(batch, rank, ranks); }

const std::vector<Setup> kDataCases = [] {
  std::vector<Setup> cases;
  Setup base{"mean", 7, 6, 8, 19};
  base.dtype = torch::kFloat;
  cases.push_back(base);
  Setup c = base;
  c.name = "shift, bias, label smoothing, z-loss";
  c.shift = true, c.bias = true, c.smoothing = 0.1, c.zLoss = 1e-3;
  cases.push_back(c);
  c = base;
  c.name = "softcap, ignore_index -1";
  c.softcap = 4.0, c.ignoreIndex = -1;
  cases.push_back(c);
  return cases;
}();

void dataSuite(const Args& args, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  uint64_t seed = 200;
  const auto handle = lmfuse::distributed_group(group);
  auto sum = [&](torch::Tensor t) {  // over the ranks, in fp64
    std::vector<torch::Tensor> tensors{t.to(torch::kDouble).contiguous()};
    group->allreduce(tensors)->wait();
    return tensors[0];
  };
  for (const Setup& s : kDataCases) {
    // true: row 0 has no labelled token, and with 3 ranks rank 0 (which holds only row 0) has none at all.
    for (bool emptyFirstRow : {false, true}) {
      const Problem p = makeProblem(s, ++seed, emptyFirstRow);
      const Reference ref = reference(s, p, p.labels, p.hidden);
      const auto [first, count] = rowsOf(s.batch, args.rank, args.worldSize);
      const torch::Tensor labels = p.labels.narrow(0, first, count);
      torch::Tensor h = p.hidden.narrow(0, first, count).to(torch::kFloat).requires_grad_(true);
      torch::Tensor w = p.weight.to(torch::kFloat).requires_grad_(true);
      torch::Tensor b = s.bias ? p.bias.to(torch::kFloat).requires_grad_(true) : torch::Tensor();
      std::string detail;
      bool ok = true;
      try {
        torch::Tensor loss = lmfuse::linear_cross_entropy(h, w, b, labels, lossOptions(s).process_group(handle));
        loss.backward();
        const std::vector<std::pair<const char*, double>> errors = {
            {"loss", relativeError(sum(loss), ref.loss)},
            {"grad_hidden (own rows)", relativeError(h.grad(), ref.gradHidden.narrow(0, first, count))},
            {"grad_weight", relativeError(sum(w.grad()), ref.gradWeight)},
            {"grad_bias", s.bias ? relativeError(sum(b.grad()), ref.gradBias) : 0.0}};
        for (const auto& [what, error] : errors) {
          detail += std::string(detail.empty() ? "" : ", ") + what + " " + text(error);
          ok = ok && error <= 1e-5;
        }
        // Without the group each rank divides by its own count: the summed gradients are then wrong.
        if (args.worldSize > 1) {
          torch::Tensor wLocal = p.weight.to(torch::kFloat).requires_grad_(true);
          lmfuse::linear_cross_entropy(h.detach(), wLocal, b.defined() ? b.detach() : b, labels, lossOptions(s))
              .backward();
          const double localError = relativeError(sum(wLocal.grad()) / args.worldSize, ref.gradWeight);
          detail += ", per-rank means averaged: grad_weight " + text(localError);
          ok = ok && localError > 1e-3;
        }
      } catch (const std::exception& error) {
        ok = false;
        detail = error.what();
      }
      report(std::string("data parallel: ") + s.name + (emptyFirstRow ? ", row 0 unlabelled" : ""), ok, detail);
    }
  }
}

// ============================== bad input ==============================

/// Runs `call` on this rank and requires an error containing `expected` (which may depend on the rank).
void expectError(const std::string& name, const std::function<void()>& call, const std::string& expected) {
  try {
    call();
    report("bad input: " + name, false, "no error");
  } catch (const c10::Error& error) {
    const std::string text = error.what_without_backtrace();
    report("bad input: " + name, text.find(expected) != std::string::npos,
           "expected \"" + expected + "\", got \"" + text.substr(0, 300) + "\"");
  }
}

void badSuite(const Args& args, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  const int last = args.worldSize - 1;
  const bool isLast = args.rank == last;
  Setup s{"bad", 2, 4, 6, 17};
  const Problem p = makeProblem(s, 300);
  const auto [begin, rows] = shardOf(s.vocab, args.rank, args.worldSize);
  const torch::Tensor w = p.weight.narrow(0, begin, rows);
  auto vocab = [&](const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& labels,
                   const lmfuse::LossOptions& options, int64_t vocabBegin = -1) {
    lmfuse::vocab_parallel_linear_cross_entropy(hidden, weight, {}, labels, group, options, vocabBegin);
  };
  const std::string everyRank = "lmfuse::vocab_parallel_linear_cross_entropy: the ranks disagree on ";

  expectError("options differ (label_smoothing)", [&] {
    vocab(p.hidden, w, p.labels, lmfuse::LossOptions().label_smoothing(isLast ? 0.1 : 0.0));
  }, everyRank + "label_smoothing (");
  expectError("options differ (shift)", [&] {
    vocab(p.hidden, w, p.labels, lmfuse::LossOptions().shift(isLast));
  }, everyRank + "shift (");
  expectError("token counts differ", [&] {
    vocab(isLast ? p.hidden.narrow(0, 0, 1) : p.hidden, w, isLast ? p.labels.narrow(0, 0, 1) : p.labels, {});
  }, everyRank + "tokens (");
  // Explicit ranges that overlap: every rank claims to start at row 0.
  expectError("vocabulary ranges overlap", [&] {
    vocab(p.hidden, w, p.labels, {}, 0);
  }, args.worldSize > 1 ? "the vocabulary shards do not tile" : "");
  expectError("vocabulary range with a gap", [&] {
    vocab(p.hidden, w, p.labels, {}, begin + (isLast ? 1 : 0));
  }, "the vocabulary shards do not tile");
  // Rank 0's shard has the wrong hidden dimension: it names its argument, the others name rank 0.
  expectError("one rank's weight shard is malformed", [&] {
    vocab(p.hidden, args.rank == 0 ? torch::randn({rows, s.dim + 1}, torch::kDouble) : w, p.labels, {});
  }, args.rank == 0 ? "weight_shard must be [V_rank, 6]" : "rank 0 of " + std::to_string(args.worldSize) +
                                                              " was given invalid arguments");
  const auto handle = lmfuse::distributed_group(group);
  const torch::Tensor h32 = p.hidden.to(torch::kFloat), w32 = p.weight.to(torch::kFloat);
  expectError("data parallel: ignore_index differs", [&] {
    lmfuse::linear_cross_entropy(h32, w32, {}, p.labels,
                                 lmfuse::LossOptions().ignore_index(isLast ? -1 : -100).process_group(handle));
  }, "lmfuse::linear_cross_entropy (process_group): the ranks disagree on ignore_index (");
  expectError("data parallel: Sum with a process group", [&] {
    lmfuse::linear_cross_entropy(h32, w32, {}, p.labels,
                                 lmfuse::LossOptions().reduction(lmfuse::Reduction::Sum).process_group(handle));
  }, "process_group sets the divisor of a Mean");
  // After every refusal above the group is still in step: a correct call goes through on every rank.
  bool ok = true;
  std::string detail;
  try {
    const Reference ref = reference(s, p, p.labels, p.hidden);
    const torch::Tensor loss = lmfuse::vocab_parallel_linear_cross_entropy(p.hidden, w, {}, p.labels, group);
    const double error = relativeError(loss, ref.loss);
    ok = error <= 1e-10;
    detail = "loss " + std::to_string(error);
  } catch (const std::exception& error) {
    ok = false;
    detail = error.what();
  }
  report("bad input: the group works after the refusals", ok, detail);
}

// ============================== a collective that never completes ==============================

void timeoutSuite(const Args& args, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  Setup s{"timeout", 1, 4, 4, 9};
  const Problem p = makeProblem(s, 400);
  const auto [begin, rows] = shardOf(s.vocab, args.rank, args.worldSize);
  if (args.rank != 0) {  // never joins; stays alive past rank 0's timeout so the failure is the timeout
    std::this_thread::sleep_for(std::chrono::seconds(6));
    report("timeout: the absent rank", true, "");
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  bool failed = false;
  std::string detail;
  try {
    lmfuse::vocab_parallel_linear_cross_entropy(p.hidden, p.weight.narrow(0, begin, rows), {}, p.labels, group);
  } catch (const std::exception& error) {
    failed = true;
    detail = std::string(error.what()).substr(0, 200);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report("timeout: the waiting rank fails instead of hanging", failed && seconds < 5.0,
         text(seconds) + " s: " + detail);
}

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--suite") args.suite = value;
    else if (key == "--rank") args.rank = std::stoi(value);
    else if (key == "--world-size") args.worldSize = std::stoi(value);
    else if (key == "--store") args.store = value;
    else throw std::invalid_argument("unknown argument " + key);
  }
  if (args.rank < 0 || args.worldSize < 1 || args.store.empty() || args.suite.empty())
    throw std::invalid_argument("needs --suite, --rank, --world-size and --store (see lmfuse_launch)");
  return args;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  at::set_num_threads(1);  // ranks share the machine's cores
  lmfuse::GroupOptions options;
  options.world_size = args.worldSize;
  options.rank = args.rank;
  options.store_path = args.store;
  options.timeout = std::chrono::seconds(args.suite == "timeout" ? 1 : 60);
  const auto group = lmfuse::make_group(options);
  if (args.suite == "vocab") vocabSuite(args, group);
  else if (args.suite == "data") dataSuite(args, group);
  else if (args.suite == "bad") badSuite(args, group);
  else if (args.suite == "timeout") timeoutSuite(args, group);
  else throw std::invalid_argument("unknown suite " + args.suite);
  std::printf("rank %d of %d: %d failure(s)\n", args.rank, args.worldSize, failures);
  return failures == 0 ? 0 : 1;
} catch (const std::exception& error) {
  std::fprintf(stderr, "lmfuse_distributed_cases: %s\n", error.what());
  return 1;
}
