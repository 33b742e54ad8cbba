// The CUDA backend's plan (runtime/src/cuda/plan.h) is host arithmetic, so it is tested on every machine:
// the memory targets at the model shapes the benchmark reports, one logits buffer when the backward
// GEMMs run, and compaction branches that cover every token count within their graph-size bounds.
#include <catch2/catch.hpp>

#include <algorithm>

#include "cuda/plan.h"
#include "split_plan.h"

using lmfuse::detail::cuda::balanceChunks;
using lmfuse::detail::cuda::kMaxCompactChunkBodies;
using lmfuse::detail::cuda::logitsTokenBytes;
using lmfuse::detail::cuda::makePlan;
using lmfuse::detail::cuda::passPlan;
using lmfuse::detail::cuda::PassPlan;
using lmfuse::detail::cuda::WeightSinkKind;
using lmfuse::detail::cuda::workspaceBytes;
using lmfuse::detail::cuda::Plan;
using lmfuse_test::checkSplitLayout;
using lmfuse_test::splitBudget;

namespace {

struct Shape {
  const char* name;
  int64_t n, d, v;
};

lmfuse::Problem problemOf(const Shape& shape) {
  lmfuse::Problem p;
  p.tokens = shape.n;
  p.hidden_dim = shape.d;
  p.vocab = shape.v;
  p.dtype = lmfuse::DType::BFloat16;
  return p;
}

lmfuse::Outputs everyGradient() {
  static float marker;
  lmfuse::Outputs o;
  o.loss = &marker;
  o.grad_hidden = &marker;
  o.grad_weight = &marker;
  return o;
}

constexpr double kGiB = double(1 << 30);

// Chunks summed over every branch, recomputed here from the branch rule of backend.cpp.
int64_t chunkBodies(const Plan& plan, int64_t n) {
  int64_t total = 0;
  for (int64_t r = 0; r < plan.compactBranches; ++r) {
    int64_t chunk = 0, chunks = 0;
    balanceChunks(std::min(n, (r + 1) * plan.compactGranule), plan.chunkTokens, chunk, chunks);
    REQUIRE(chunk <= plan.chunkTokens);  // every branch's chunk fits the logits buffer
    total += chunks;
  }
  return total;
}

}  // namespace

TEST_CASE("the default plan at model shapes: within the accumulator plus 1.5 GiB, one chunk when it fits", "[plan]") {
  struct Expected {
    Shape shape;
    bool singleChunk;
  };
  const Expected expectations[] = {{{"Llama-3-8B", 8192, 4096, 128256}, true},
                                   {{"Gemma-2-2B", 8192, 2304, 256000}, false},
                                   {{"Llama-3-8B, N=32768", 32768, 4096, 128256}, false},
                                   {{"small", 300, 64, 1000}, true}};
  for (const auto& [shape, singleChunk] : expectations) {
    INFO(shape.name);
    const lmfuse::Outputs outputs = everyGradient();
    for (bool compact : {true, false}) {
      INFO("compact " << compact);
      lmfuse::Options options;
      options.compact = compact;
      const Plan plan = makePlan(problemOf(shape), options, &outputs, true);
      CHECK_FALSE(plan.lowMemory);
      CHECK(plan.logitsBuffers == 1);
      CHECK(plan.compact == compact);
      const std::size_t rowBytes = logitsTokenBytes(plan);
      const double accumulatorGiB = double(shape.v) * double(shape.d) * 4 / kGiB;
      CHECK(double(plan.totalBytes) / kGiB <= accumulatorGiB + 1.5);  // the default budget
      REQUIRE(plan.singleChunk == singleChunk);
      if (plan.singleChunk) {
        // Every token in one chunk, grad_weight written in its dtype: no accumulator region at all.
        CHECK(plan.weightAccumulator.bytes == 0);
        CHECK(plan.chunkTokens == shape.n);
        CHECK(plan.logits.bytes >= std::size_t(shape.n) * rowBytes);
        if (compact) CHECK(plan.gatheredTokens == shape.n);
        continue;
      }
      const double beyond = double(plan.totalBytes - plan.weightAccumulator.bytes) / kGiB;
      CHECK(beyond <= 1.5);
      // A count that fits one chunk may span the accumulator's region and the logits buffer, back to back.
      REQUIRE(plan.oneChunkTokens > 0);
      CHECK(plan.logits.offset - (plan.weightAccumulator.offset + plan.weightAccumulator.bytes) < 256);
      CHECK(plan.weightAccumulator.offset + std::size_t(plan.oneChunkTokens) * rowBytes <=
            plan.logits.offset + plan.logits.bytes);
      if (compact) CHECK(plan.gatheredTokens >= std::max(plan.oneChunkTokens, plan.chunkTokens));
      // The chunk is as long as the budget allows: doubling it would break the 1.5 GiB bound.
      const double chunkBytes = double(plan.chunkTokens) * double(rowBytes) / kGiB;
      CHECK(beyond + chunkBytes > 1.5);
    }
  }
}

TEST_CASE("forward-only calls without compaction keep two buffers", "[plan]") {
  lmfuse::Options options;
  options.compact = false;
  const Plan plan = makePlan(problemOf({"Llama-3-8B", 8192, 4096, 128256}), options, nullptr, false);
  CHECK(plan.logitsBuffers == 2);
  CHECK(plan.logits.bytes >= 2 * plan.logitsBufferBytes);
}

TEST_CASE("compaction branches cover every count with bounded graphs", "[plan]") {
  const lmfuse::Outputs outputs = everyGradient();
  // (tokens, chunk_tokens): one chunk per branch, several, many (graph bound reached), tiny problems.
  const std::pair<int64_t, int64_t> cases[] = {{8192, 0}, {300, 128}, {1200, 128}, {32768, 0},
                                               {200000, 0}, {3000, 16}, {100, 0}, {1, 0}};
  for (auto [n, chunk] : cases) {
    INFO("tokens " << n << ", chunk_tokens " << chunk);
    lmfuse::Options options;
    options.chunk_tokens = chunk;
    const Plan plan = makePlan(problemOf({"", n, 256, 5000}), options, &outputs, true);
    if (!plan.compact) {
      // Too few branches to pay for the gathers; the call runs uncompacted.
      CHECK(plan.compactBranches == 0);
      continue;
    }
    CHECK(plan.compactGranule % 8 == 0);
    CHECK(plan.compactBranches * plan.compactGranule >= n);        // the last branch holds every token
    CHECK((plan.compactBranches - 1) * plan.compactGranule < n);  // and no branch is empty of purpose
    CHECK(plan.compactBranches >= 4);
    CHECK(plan.compactBranches <= 64);
    CHECK(chunkBodies(plan, n) <= kMaxCompactChunkBodies);
  }
  // At the Llama-3 shape the granule is fine enough that padding costs under 1% of the tokens on average.
  lmfuse::Options options;
  const Plan llama = makePlan(problemOf({"Llama-3-8B", 8192, 4096, 128256}), options, &outputs, true);
  REQUIRE(llama.compact);
  CHECK(llama.compactGranule <= 128);
  CHECK(llama.singleChunk);  // the whole batch in one chunk: no accumulator, no conversion
  // A caller's chunk_tokens is kept: no single chunk, and no chunk spans the accumulator.
  options.chunk_tokens = 1000;
  const Plan chunked = makePlan(problemOf({"Llama-3-8B", 8192, 4096, 128256}), options, &outputs, true);
  CHECK_FALSE(chunked.singleChunk);
  CHECK(chunked.oneChunkTokens == 0);
}

TEST_CASE("workspace_size covers the plan of every combination of outputs, forward only too", "[plan]") {
  static float marker;
  const Shape shapes[] = {{"Llama-3-8B", 8192, 4096, 128256}, {"Gemma-2-2B", 8192, 2304, 256000},
                          {"odd", 777, 96, 1003}};
  for (const Shape& shape : shapes) {
    for (lmfuse::MemoryMode memory : {lmfuse::MemoryMode::Auto, lmfuse::MemoryMode::LowMemory}) {
      for (bool compact : {true, false}) {
        lmfuse::Options options;
        options.memory = memory;
        options.compact = compact;
        const std::size_t reported = workspaceBytes(problemOf(shape), options, true);
        // grad_hidden, grad_weight, grad_weight_accumulate, grad_bias, fp32 parameter gradients
        for (int mask = 1; mask < 32; ++mask) {
          lmfuse::Outputs outputs;
          outputs.loss = &marker;
          if (mask & 16) outputs.param_grads = lmfuse::ParamGradKind::Float32;
          if (mask & 1) outputs.grad_hidden = &marker;
          if (mask & 2) outputs.grad_weight = &marker;
          if (mask & 4) outputs.grad_weight_accumulate = &marker;
          if (mask & 8) outputs.grad_bias = &marker;
          INFO(shape.name << ", low memory " << (memory == lmfuse::MemoryMode::LowMemory) << ", compact " << compact
                          << ", outputs mask " << mask);
          CHECK(makePlan(problemOf(shape), options, &outputs, true).totalBytes <= reported);
        }
        // Forward only: its own size, and a workspace sized for gradients serves it too.
        const std::size_t forwardOnly = makePlan(problemOf(shape), options, nullptr, false).totalBytes;
        CHECK(forwardOnly <= workspaceBytes(problemOf(shape), options, false));
        CHECK(forwardOnly <= reported);
      }
    }
  }
}

TEST_CASE("a tight budget: chunks with the accumulator, and one chunk over its region for small counts", "[plan]") {
  // The budget of the "tight budget" cases of cuda_vs_reference.cpp, at their shape.
  const lmfuse::Outputs outputs = everyGradient();
  lmfuse::Options options;
  options.workspace_budget = (std::size_t(32) << 20) + (std::size_t(480) << 10);
  options.memory = lmfuse::MemoryMode::Accumulate;  // Auto would pick LowMemory under so small a budget
  for (auto dtype : {lmfuse::DType::BFloat16, lmfuse::DType::Float16}) {  // fp32 rows are twice as long
    lmfuse::Problem problem = problemOf({"default test shape", 300, 64, 1000});
    problem.dtype = dtype;
    const Plan plan = makePlan(problem, options, &outputs, true);
    INFO("chunk " << plan.chunkTokens << ", one chunk up to " << plan.oneChunkTokens);
    CHECK_FALSE(plan.lowMemory);
    CHECK_FALSE(plan.singleChunk);
    CHECK(plan.weightAccumulator.bytes > 0);
    CHECK(plan.chunkTokens < 150);  // 5% ignored: several chunks
    CHECK(plan.oneChunkTokens > 150);  // 50% ignored: usually one chunk over the accumulator's region
    CHECK(plan.oneChunkTokens < 300);
    CHECK(plan.totalBytes <= options.workspace_budget);
  }
}

TEST_CASE("fp32 parameter gradients of a bf16 problem: grad_weight is its own accumulator", "[plan]") {
  const Shape shapes[] = {{"Llama-3-8B", 8192, 4096, 128256}, {"Gemma-2-2B", 8192, 2304, 256000},
                          {"small", 300, 64, 1000}};
  for (const Shape& shape : shapes) {
    for (lmfuse::MemoryMode memory : {lmfuse::MemoryMode::Auto, lmfuse::MemoryMode::LowMemory}) {
      INFO(shape.name << ", low memory " << (memory == lmfuse::MemoryMode::LowMemory));
      lmfuse::Options options;
      options.memory = memory;
      lmfuse::Outputs mixed = everyGradient();
      mixed.param_grads = lmfuse::ParamGradKind::Float32;
      const Plan plan = makePlan(problemOf(shape), options, &mixed, true);
      // No [V, D] (or [slice, D]) accumulator anywhere in the workspace.
      CHECK(plan.weightAccumulator.bytes == 0);
      CHECK_FALSE(plan.ownWeightAccumulator);
      if (plan.lowMemory) {
        CHECK(plan.weightSink == WeightSinkKind::None);
        CHECK(plan.sliceWeightSink == WeightSinkKind::Output);
        continue;
      }
      CHECK(plan.sliceWeightSink == WeightSinkKind::None);
      // Whatever the count, every pass writes straight into grad_weight, chunk after chunk.
      for (int64_t tokens : {int64_t(1), shape.n / 2, shape.n}) {
        const PassPlan pass = passPlan(plan, tokens);
        CHECK(pass.weight == WeightSinkKind::Output);
        CHECK_FALSE(pass.logitsOverAccumulator);
        CHECK(pass.chunks * pass.chunkTokens >= tokens);
      }
      // Within the default 1.5 GiB beyond an accumulator it does not have.
      CHECK(double(plan.totalBytes) / kGiB <= 1.5);
    }
  }
}

TEST_CASE("the plan chooses where grad_weight goes, for every pass", "[plan]") {
  static float marker;
  const lmfuse::Problem llama = problemOf({"Llama-3-8B", 8192, 4096, 128256});
  const lmfuse::Problem gemma = problemOf({"Gemma-2-2B", 8192, 2304, 256000});
  lmfuse::Outputs weight = everyGradient(), accumulateOnly, both = everyGradient(), hiddenOnly;
  accumulateOnly.loss = hiddenOnly.loss = &marker;
  accumulateOnly.grad_weight_accumulate = both.grad_weight_accumulate = &marker;
  hiddenOnly.grad_hidden = &marker;
  const lmfuse::Options defaults;
  struct Row {
    const char* name;
    const lmfuse::Problem& problem;
    const lmfuse::Outputs& outputs;
    int64_t tokens;
    WeightSinkKind sink;
    bool overAccumulator;
  };
  const Row rows[] = {
      {"all tokens fit one chunk: written in the dtype", llama, weight, 8192, WeightSinkKind::Output, false},
      {"one chunk, grad_weight_accumulate too (a second GEMM)", llama, both, 8192, WeightSinkKind::Output, false},
      {"several chunks: the fp32 accumulator", gemma, weight, 8192, WeightSinkKind::Accumulator, false},
      {"a count that fits one chunk: over the accumulator's region", gemma, weight, 3000, WeightSinkKind::Output, true},
      {"grad_weight_accumulate too: the conversion adds, no second GEMM", gemma, both, 3000,
       WeightSinkKind::Accumulator, false},
      {"grad_weight_accumulate only: added to, chunk after chunk", gemma, accumulateOnly, 8192,
       WeightSinkKind::Accumulate, false},
      {"no weight gradient", gemma, hiddenOnly, 8192, WeightSinkKind::None, false},
  };
  for (const Row& row : rows) {
    INFO(row.name);
    const Plan plan = makePlan(row.problem, defaults, &row.outputs, true);
    const PassPlan pass = passPlan(plan, row.tokens);
    CHECK(pass.weight == row.sink);
    CHECK(pass.logitsOverAccumulator == row.overAccumulator);
    // Output beyond one chunk only where grad_weight is fp32 (here it is bf16).
    if (pass.weight == WeightSinkKind::Output) CHECK(pass.chunks == 1);
    CHECK(pass.chunks * pass.chunkTokens >= row.tokens);
  }
}

TEST_CASE("workspace_size for given outputs: fp32 parameter gradients need no accumulator", "[plan]") {
  lmfuse::Context cuda;
  cuda.device = lmfuse::DeviceKind::Cuda;
  const lmfuse::Options defaults;
  for (const Shape& shape : {Shape{"Llama-3-8B", 8192, 4096, 128256}, Shape{"Gemma-2-2B", 8192, 2304, 256000}}) {
    INFO(shape.name);
    const lmfuse::Problem problem = problemOf(shape);
    lmfuse::Outputs bf16 = everyGradient(), mixed = everyGradient();
    mixed.param_grads = lmfuse::ParamGradKind::Float32;
    const std::size_t forAny = lmfuse::workspace_size(problem, defaults, true, cuda);
    const std::size_t forBf16 = lmfuse::workspace_size(problem, defaults, bf16, cuda);
    const std::size_t forMixed = lmfuse::workspace_size(problem, defaults, mixed, cuda);
    CHECK(forBf16 <= forAny);
    CHECK(forMixed < forBf16);
    CHECK(double(forMixed) / kGiB <= 1.5);  // the default budget beyond an accumulator it does not hold
    CHECK(forMixed == makePlan(problem, defaults, &mixed, true).totalBytes);
  }
}

namespace {

// Every region of one lean pass lies inside grad_weight where nothing it still needs lives: pass A's
// gathered rows, logits and cuBLASLt workspace in order; each slice's buffer and workspace after its own
// rows and before the gathered hidden rows (or grad_weight's end); the slices cover [0, V) in order.
void checkLeanPass(const Plan& plan, int64_t tokens, bool gather) {
  using lmfuse::detail::cuda::leanPass;
  using lmfuse::detail::cuda::LeanPass;
  const LeanPass pass = leanPass(plan, tokens, gather);
  const std::size_t e = plan.elementSize, d = std::size_t(plan.hiddenDim), big = plan.borrowedBytes;
  const std::size_t rowBytes = d * plan.paramElementSize;
  INFO("tokens " << tokens << ", gather " << gather << ", chunk " << pass.chunkTokens << " x " << pass.chunks);
  REQUIRE(pass.chunkTokens >= 1);
  CHECK(pass.chunks * pass.chunkTokens >= tokens);
  CHECK((pass.chunks - 1) * pass.chunkTokens < tokens);
  if (gather) CHECK(pass.gatheredOffset + std::size_t(pass.chunkTokens) * d * e <= pass.logitsOffset);
  const std::size_t logitsEnd = pass.logitsOffset + std::size_t(pass.chunkTokens) * logitsTokenBytes(plan);
  CHECK(logitsEnd <= big);
  if (pass.blasBytes) CHECK(logitsEnd <= pass.blasOffset);
  CHECK(pass.blasOffset + pass.blasBytes <= big);
  CHECK(pass.logitsOffset % 256 == 0);
  CHECK(pass.blasOffset % 256 == 0);
  int64_t next = 0;
  int stage = 0;  // 0 gathered slices, 1 slices over all N, 2 residue
  bool anyGathered = false;
  for (const auto& slice : pass.slices) {
    INFO("slice " << slice.first << " + " << slice.columns << " (ld " << slice.ld << ")");
    REQUIRE(slice.first == next);
    REQUIRE(slice.columns >= 1);
    CHECK(slice.ld >= slice.columns);
    CHECK(std::size_t(slice.ld) * e % 16 == 0);
    next += slice.columns;
    const int sliceStage = slice.inWorkspace ? 2 : slice.gathered ? 0 : 1;
    CHECK(sliceStage >= stage);
    stage = sliceStage;
    const int64_t count = slice.gathered ? tokens : plan.tokens;
    if (slice.inWorkspace) {
      CHECK(slice.ld == lmfuse::detail::cuda::kLeanResidueColumns);
      CHECK(plan.residue.bytes >= std::size_t(count) * std::size_t(slice.ld) * e);
      CHECK(slice.blasBytes == 0);
      continue;
    }
    CHECK((gather || !slice.gathered));
    anyGathered = anyGathered || slice.gathered;
    const std::size_t limit = slice.gathered ? pass.hcOffset : big;
    CHECK(slice.bufferOffset % 256 == 0);
    CHECK(slice.bufferOffset >= std::size_t(slice.first + slice.columns) * rowBytes);
    CHECK(slice.bufferOffset + std::size_t(count) * std::size_t(slice.ld) * e <= slice.blasOffset);
    CHECK(slice.blasOffset + slice.blasBytes <= limit);
  }
  CHECK(next == plan.vocab);
  if (anyGathered) {
    CHECK(pass.hcOffset % 256 == 0);
    CHECK(pass.hcOffset + std::size_t(tokens) * d * e <= big);
  }
}

}  // namespace

TEST_CASE("the lean low-memory plan: a workspace under 1 MiB at model shapes, every branch inside grad_weight", "[plan]") {
  const Shape shapes[] = {{"Llama-3-8B", 8192, 4096, 128256}, {"Gemma-2-2B", 8192, 2304, 256000},
                          {"Qwen-2.5-7B", 16384, 3584, 152064}, {"test", 300, 64, 1000}, {"odd", 777, 96, 1003},
                          {"long vocabulary", 80, 32, 100003}};
  for (const Shape& shape : shapes) {
    for (bool fp32Params : {false, true}) {
      for (bool compact : {true, false}) {
        INFO(shape.name << ", fp32 parameter gradients " << fp32Params << ", compact " << compact);
        lmfuse::Options options;
        options.memory = lmfuse::MemoryMode::LowMemory;
        options.compact = compact;
        lmfuse::Outputs outputs = everyGradient();
        if (fp32Params) outputs.param_grads = lmfuse::ParamGradKind::Float32;
        const lmfuse::Problem problem = problemOf(shape);
        const Plan plan = makePlan(problem, options, &outputs, true);
        REQUIRE(plan.lean);
        CHECK(plan.lowMemory);
        CHECK(plan.weightAccumulator.bytes == 0);
        CHECK(plan.borrowedBytes == std::size_t(shape.v) * std::size_t(shape.d) * (fp32Params ? 4 : 2));
        if (shape.n >= 8192) {
          CHECK(plan.compact == compact);
          CHECK(double(plan.totalBytes) < double(1 << 20));  // the token arrays and the residue buffer
        }
        CHECK(plan.residue.bytes >= std::size_t(shape.n) * lmfuse::detail::cuda::kLeanResidueColumns * 2);
        if (!plan.compact) {
          checkLeanPass(plan, shape.n, false);
          continue;
        }
        CHECK(plan.identityBranch);
        for (int64_t r = 0; r < plan.compactBranches; ++r) checkLeanPass(plan, std::min(shape.n, (r + 1) * plan.compactGranule), true);
        checkLeanPass(plan, shape.n, false);  // the identity branch
      }
    }
  }
}

TEST_CASE("the lean plan's size is what workspace_size reports for these outputs; without grad_weight nothing is borrowed", "[plan]") {
  static float marker;
  lmfuse::Context cuda;
  cuda.device = lmfuse::DeviceKind::Cuda;
  lmfuse::Options options;
  options.memory = lmfuse::MemoryMode::LowMemory;
  for (const Shape& shape : {Shape{"Llama-3-8B", 8192, 4096, 128256}, Shape{"Gemma-2-2B", 8192, 2304, 256000}}) {
    INFO(shape.name);
    const lmfuse::Problem problem = problemOf(shape);
    lmfuse::Outputs all = everyGradient(), accumulateToo = everyGradient(), accumulateOnly, noWeight, strided = everyGradient();
    accumulateToo.grad_weight_accumulate = &marker;
    accumulateOnly.loss = noWeight.loss = &marker;
    accumulateOnly.grad_weight_accumulate = &marker;
    noWeight.grad_hidden = &marker;
    strided.grad_weight_stride = shape.d + 8;
    for (const lmfuse::Outputs* lean : {&all, &accumulateToo}) {
      const std::size_t size = lmfuse::workspace_size(problem, options, *lean, cuda);
      CHECK(size == makePlan(problem, options, lean, true).totalBytes);
      CHECK(double(size) < double(1 << 20));
      CHECK(makePlan(problem, options, lean, true).lean);
    }
    CHECK_FALSE(makePlan(problem, options, &accumulateOnly, true).lean);
    CHECK_FALSE(makePlan(problem, options, &noWeight, true).lean);
    CHECK_FALSE(makePlan(problem, options, &strided, true).lean);
    CHECK_FALSE(makePlan(problem, options, nullptr, false).lean);
    // A budget below the lean plan's arrays is refused, naming the budget.
    lmfuse::Options tight = options;
    tight.workspace_budget = 4096;
    CHECK_THROWS_WITH(makePlan(problem, tight, &all, true), Catch::Contains("workspace_budget"));
  }
}

TEST_CASE("the numerators regions: laid out where the loss allows numerators, apart from every other region", "[plan]") {
  const Shape shapes[] = {{"Llama-3-8B", 8192, 4096, 128256}, {"Gemma-2-2B", 8192, 2304, 256000}, {"small", 300, 64, 1000}};
  const lmfuse::Outputs outputs = everyGradient();
  for (const Shape& shape : shapes) {
    for (bool compact : {true, false}) {
      INFO(shape.name << ", compact " << compact);
      lmfuse::Options options;
      options.compact = compact;
      const Plan plan = makePlan(problemOf(shape), options, &outputs, true);
      REQUIRE(plan.numerators);
      CHECK(plan.rowScale.bytes >= std::size_t(shape.n) * 4);
      // Compacting, the numerators scale the gathered rows in place; otherwise a chunk's c ⊙ h rows.
      const std::size_t rows = std::size_t(std::max(plan.gatheredTokens, plan.chunkTokens));
      if (compact) CHECK(plan.gathered.bytes >= rows * std::size_t(shape.d) * 2);
      else CHECK(plan.scaledHidden.bytes >= rows * std::size_t(shape.d) * 2);
      const lmfuse::detail::cuda::Region regions[] = {
          plan.report, plan.scalars, plan.targets, plan.rowLoss, plan.lse, plan.cublas, plan.weightAccumulator,
          plan.logits, plan.order, plan.gathered, plan.compactGradHidden, plan.rowScale, plan.scaledHidden};
      for (const auto& a : regions)
        for (const auto& b : regions) {
          if (&a == &b || a.bytes == 0 || b.bytes == 0) continue;
          CHECK((a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset));
        }
      for (const auto& region : regions) CHECK(region.offset + region.bytes <= plan.totalBytes);
    }
  }
  // Where dx is not a per-row factor times the numerators, or nothing runs backward: none.
  const Shape small{"small", 300, 64, 1000};
  struct Case {
    const char* name;
    void (*edit)(lmfuse::Problem&, lmfuse::Options&);
  };
  static float bias;
  const Case cases[] = {
      {"label smoothing", [](lmfuse::Problem&, lmfuse::Options& o) { o.label_smoothing = 0.1; }},
      {"softcap", [](lmfuse::Problem&, lmfuse::Options& o) { o.softcap = 30.0; }},
      {"z-loss", [](lmfuse::Problem&, lmfuse::Options& o) { o.z_loss = 1e-4; }},
      {"bias", [](lmfuse::Problem& p, lmfuse::Options&) { p.bias = &bias; }},
      {"fp32", [](lmfuse::Problem& p, lmfuse::Options&) { p.dtype = lmfuse::DType::Float32; }},
      {"fp16", [](lmfuse::Problem& p, lmfuse::Options&) { p.dtype = lmfuse::DType::Float16; }},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    lmfuse::Problem problem = problemOf(small);
    lmfuse::Options options;
    c.edit(problem, options);
    const Plan plan = makePlan(problem, options, &outputs, true);
    CHECK_FALSE(plan.numerators);
    CHECK(plan.scaledHidden.bytes == 0);
  }
  // Low memory: the lean plan's pass A runs them (its rows scaled in place, no c ⊙ h rows); the slice pass
  // of a grad_weight with a leading dimension of its own (no lean plan) does not.
  for (int64_t stride : {int64_t(0), small.d + 8}) {
    INFO("low memory, grad_weight stride " << stride);
    lmfuse::Options options;
    options.memory = lmfuse::MemoryMode::LowMemory;
    lmfuse::Outputs strided = outputs;
    strided.grad_weight_stride = stride;
    const Plan plan = makePlan(problemOf(small), options, &strided, true);
    CHECK(plan.lean == (stride == 0));
    CHECK(plan.numerators == plan.lean);
    CHECK(plan.rowScale.bytes >= std::size_t(small.n) * 4);
    CHECK(plan.scaledHidden.bytes == 0);
  }
  const Plan forward = makePlan(problemOf(small), lmfuse::Options{}, nullptr, false);
  CHECK_FALSE(forward.numerators);
  CHECK(forward.rowScale.bytes == 0);
}

TEST_CASE("a count too long for one chunk runs split between the workspace and grad_weight's bytes", "[plan]") {
  static float marker;
  const lmfuse::Problem gemma = problemOf({"Gemma-2-2B", 8192, 2304, 256000});
  lmfuse::Outputs weightOnly;
  weightOnly.loss = &marker;
  weightOnly.grad_weight = &marker;
  for (bool compact : {true, false})
    for (const lmfuse::Outputs& outputs : {everyGradient(), weightOnly}) {
      const bool staging = outputs.grad_hidden != nullptr;
      INFO("compact " << compact << ", grad_hidden " << staging);
      lmfuse::Options options;
      options.compact = compact;
      const Plan plan = makePlan(gemma, options, &outputs, true);
      REQUIRE_FALSE(plan.singleChunk);
      CHECK(plan.splitBorrowBytes == std::size_t(256000) * 2304 * 2);
      for (int64_t tokens : {int64_t(8192), plan.oneChunkTokens + 8}) {
        INFO(tokens << " tokens");
        const PassPlan pass = passPlan(plan, tokens);
        checkSplitLayout(plan, tokens, pass.split, staging);
        // The chunks a redo runs: the default plan's, into the accumulator.
        CHECK(pass.weight == WeightSinkKind::Accumulator);
        CHECK(pass.chunks > 1);
        CHECK(pass.chunks * pass.chunkTokens >= tokens);
      }
      // A count that fits one chunk over the accumulator's region needs no split.
      const PassPlan fits = passPlan(plan, plan.oneChunkTokens);
      CHECK(fits.logitsOverAccumulator);
      CHECK(fits.split.columnsA == 0);
    }

  // Where the pass cannot split: no numerators, no dense half-type grad_weight to borrow, or too few of its bytes.
  struct Case {
    const char* name;
    Shape shape;
    void (*edit)(lmfuse::Options&, lmfuse::Outputs&);
  };
  const Case cases[] = {
      {"Llama-3: one chunk for every token", {"Llama-3-8B", 8192, 4096, 128256}, [](lmfuse::Options&, lmfuse::Outputs&) {}},
      {"Qwen-2.5: part B would not fit grad_weight", {"Qwen-2.5-7B", 16384, 3584, 152064},
       [](lmfuse::Options&, lmfuse::Outputs&) {}},
      {"label smoothing", {"Gemma-2-2B", 8192, 2304, 256000},
       [](lmfuse::Options& o, lmfuse::Outputs&) { o.label_smoothing = 0.1; }},
      {"chunk_tokens given", {"Gemma-2-2B", 8192, 2304, 256000},
       [](lmfuse::Options& o, lmfuse::Outputs&) { o.chunk_tokens = 2048; }},
      {"fp32 grad_weight", {"Gemma-2-2B", 8192, 2304, 256000},
       [](lmfuse::Options&, lmfuse::Outputs& g) { g.param_grads = lmfuse::ParamGradKind::Float32; }},
      {"grad_weight_accumulate too", {"Gemma-2-2B", 8192, 2304, 256000},
       [](lmfuse::Options&, lmfuse::Outputs& g) { g.grad_weight_accumulate = &marker; }},
      {"strided grad_weight", {"Gemma-2-2B", 8192, 2304, 256000},
       [](lmfuse::Options&, lmfuse::Outputs& g) { g.grad_weight_stride = 2304 + 64; }},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    lmfuse::Options options;
    lmfuse::Outputs outputs = everyGradient();
    c.edit(options, outputs);
    const Plan plan = makePlan(problemOf(c.shape), options, &outputs, true);
    CHECK(passPlan(plan, c.shape.n).split.columnsA == 0);
  }

  // The small problem of the CUDA split tests (cuda_numerators.cpp) splits under some budget.
  lmfuse::Problem small = problemOf({"split test shape", 300, 64, 4000});
  const lmfuse::Outputs outputs = everyGradient();
  for (bool compact : {true, false}) {
    INFO("small, compact " << compact);
    lmfuse::Options options;
    options.compact = compact;
    const std::size_t budget = splitBudget(small, options, outputs, std::size_t(32) << 20, std::size_t(40) << 20);
    REQUIRE(budget > 0);
    options.workspace_budget = budget;
    options.memory = lmfuse::MemoryMode::Accumulate;
    const Plan plan = makePlan(small, options, &outputs, true);
    CHECK(plan.oneChunkTokens < 300);
    checkSplitLayout(plan, 300, passPlan(plan, 300).split, true);
    CHECK(plan.totalBytes <= budget);
  }
}
