// Workspace layout and chunk plan of the CUDA backend (see plan.h). Chunks are balanced: the tokens
// are split into the fewest chunks the budget allows, all of (nearly) the same size, so no tiny tail
// chunk runs its GEMMs at low efficiency.
#include "plan.h"

#include "error.h"    // defines: LMFUSE_FAIL
#include "kernels.h"  // defines: kRowStatisticsColumns
#include "storage.h"  // defines: param_grad_dtype

#include <algorithm>
#include <string>

namespace lmfuse::detail::cuda {
namespace {

constexpr std::size_t kAlign = 256;

std::size_t alignUp(std::size_t value, std::size_t to) { return (value + to - 1) / to * to; }
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

class Layout {
public:
  Region take(std::size_t bytes) {
    Region region{end_, bytes};
    end_ = alignUp(end_ + bytes, kAlign);
    return region;
  }
  std::size_t end() const { return end_; }

private:
  std::size_t end_ = 0;
};

// Chunks summed over every compaction branch of this granule.
int64_t branchChunks(int64_t tokens, int64_t granule, int64_t maxChunk) {
  int64_t total = 0;
  for (int64_t covered = granule;; covered += granule) {
    total += ceilDiv(std::min(covered, tokens), maxChunk);
    if (covered >= tokens) return total;
  }
}

// The finest granule (fewest padded tokens) whose branches stay within the graph-size bounds; 0 when
// compaction would have too few branches to pay for itself.
int64_t compactGranule(int64_t tokens, int64_t maxChunk) {
  for (int64_t branches = std::min(kMaxCompactBranches, ceilDiv(tokens, kMinCompactGranule));
       branches >= kMinCompactBranches; branches /= 2) {
    const int64_t granule = ceilDiv(ceilDiv(tokens, branches), 8) * 8;
    if (branchChunks(tokens, granule, maxChunk) <= kMaxCompactChunkBodies) return granule;
  }
  return 0;
}

std::size_t alignDown(std::size_t value, std::size_t to) { return value / to * to; }

// A cuBLASLt workspace borrowed from grad_weight, where the free region is large enough to spare it.
std::size_t leanBlasBytes(std::size_t freeBytes) {
  return freeBytes >= kLeanBlasRoom * kCublasWorkspaceBytes ? kCublasWorkspaceBytes : 0;
}

// The most tokens one pass-A chunk holds inside grad_weight: logits (and gathered rows) of each token,
// and `blas` bytes of cuBLASLt workspace.
int64_t leanChunkLimit(const Plan& plan, bool gather, std::size_t blas) {
  const std::size_t e = plan.elementSize;
  const std::size_t perToken = logitsTokenBytes(plan) + (gather ? std::size_t(plan.hiddenDim) * e : 0);
  // Alignment slack only where a region starts after another.
  const std::size_t slack = (gather ? kAlign : 0) + (blas ? kAlign : 0);
  if (plan.borrowedBytes < blas + slack + perToken) return 0;
  int64_t limit = int64_t((plan.borrowedBytes - blas - slack) / perToken);
  if (plan.leanChunkCap > 0) limit = std::min(limit, plan.leanChunkCap);
  return limit;
}

// Pass A's borrowed cuBLASLt workspace, whenever grad_weight has room for it (measured against borrowing
// none where it costs a chunk, and against smaller ones for narrow slices: runtime/bench/NOTES.md).
std::size_t passABlasBytes(const Plan& plan) { return leanBlasBytes(plan.borrowedBytes); }

int64_t leanChunkLimit(const Plan& plan, bool gather) {
  return leanChunkLimit(plan, gather, passABlasBytes(plan));
}

// The widest slice from vocabulary row `first` whose grad_weight rows, logits buffer (tokens × ld) and
// cuBLASLt workspace all end by byte `limit` of grad_weight; false when it would be narrower than
// minColumns (and than what is left of the vocabulary).
bool fitSlice(const Plan& plan, int64_t first, std::size_t limit, int64_t tokens, int64_t minColumns,
              LeanSlice& slice) {
  const std::size_t rowBytes = std::size_t(plan.hiddenDim) * plan.paramElementSize, e = plan.elementSize;
  const std::size_t start = std::size_t(first) * rowBytes;
  const int64_t remaining = plan.vocab - first;
  if (limit <= start + 3 * kAlign) return false;
  const std::size_t free = limit - start - 3 * kAlign;
  for (std::size_t blas : {leanBlasBytes(free), std::size_t(0)}) {
    if (blas && free <= blas) continue;
    int64_t columns = int64_t((free - blas) / (rowBytes + std::size_t(tokens) * e));
    columns = columns >= 256 ? columns / 128 * 128 : columns / kLeanResidueColumns * kLeanResidueColumns;
    if (columns >= remaining) columns = remaining;
    if (blas && columns < 1024 && columns < remaining) continue;  // narrow slices borrow no cuBLASLt workspace
    if (columns <= 0 || (columns < minColumns && columns < remaining)) return false;
    LeanSlice s;
    s.first = first;
    s.columns = columns;
    s.ld = int64_t(alignUp(std::size_t(columns), std::size_t(kLeanResidueColumns)));
    s.bufferOffset = alignUp(start + std::size_t(columns) * rowBytes, kAlign);
    s.blasOffset = alignUp(s.bufferOffset + std::size_t(tokens) * std::size_t(s.ld) * e, kAlign);
    s.blasBytes = blas;
    if (s.blasOffset + blas > limit) return false;
    slice = s;
    return true;
  }
  return false;
}

// The split of a numerators pass over `tokens` tokens (plan.h: SplitPass): part A as wide as the accumulator's
// region and the logits buffer hold after the pass's hidden rows, narrowed where grad_weight's rows
// [columnsA, V) are too few bytes for the fp32 staging rows; none (columnsA 0) where part B would not fit
// inside the bytes of rows [0, columnsA), or where part A would hold the whole vocabulary.
SplitPass splitLayout(const Plan& plan, int64_t tokens) {
  const std::size_t t = std::size_t(tokens), d = std::size_t(plan.hiddenDim), e = plan.elementSize;
  const std::size_t rowBytes = d * plan.paramElementSize;  // one grad_weight row
  const std::size_t start = plan.weightAccumulator.offset, end = plan.logits.offset + plan.logits.bytes;
  SplitPass split;
  split.rowsOffset = start;
  split.aOffset = alignUp(start + t * d * e, kAlign);
  const std::size_t blockBytes = t * (std::size_t(kRowStatisticsColumns) * e + 8);  // 256 columns + a partial
  if (split.aOffset >= end) return {};
  int64_t columnsA = std::min<int64_t>(int64_t((end - split.aOffset) / blockBytes), plan.vocab / kRowStatisticsColumns) *
                     kRowStatisticsColumns;
  if (plan.splitStaging) {
    // The staging rows start on the first 256-byte boundary after row columnsA's bytes.
    const std::size_t staging = t * d * 4;
    if (staging > plan.splitBorrowBytes) return {};
    const std::size_t lastStart = alignDown(plan.splitBorrowBytes - staging, kAlign);
    columnsA = std::min<int64_t>(columnsA, int64_t(lastStart / rowBytes) / kRowStatisticsColumns * kRowStatisticsColumns);
  }
  if (columnsA <= 0 || columnsA >= plan.vocab) return {};
  const int64_t columnsB = plan.vocab - columnsA;
  split.ldB = ceilDiv(columnsB, 8) * 8;
  const std::size_t bBytes = t * (std::size_t(split.ldB) * e + partialStatisticsBytes(columnsB));
  if (bBytes > std::size_t(columnsA) * rowBytes) return {};
  split.columnsA = columnsA;
  split.bOffset = 0;
  split.stagingOffset = alignUp(std::size_t(columnsA) * rowBytes, kAlign);
  return split;
}

[[noreturn]] void budgetTooSmall(std::size_t budget, std::size_t needed, const char* what) {
  LMFUSE_FAIL("options.workspace_budget of " << budget << " bytes is too small for " << what << " (needs at least "
                                             << needed << " bytes)");
}

}  // namespace

std::size_t elementBytes(DType dtype) { return dtype == DType::Float32 ? 4 : 2; }

std::size_t partialStatisticsBytes(int64_t columns) {
  return std::size_t(ceilDiv(columns, kRowStatisticsColumns)) * 8;
}

std::size_t logitsTokenBytes(const Plan& plan) {
  return std::size_t(plan.logitsLd) * plan.elementSize + plan.statisticsBytes;
}

void balanceChunks(int64_t tokens, int64_t maxChunk, int64_t& chunk, int64_t& chunks) {
  maxChunk = std::max<int64_t>(1, std::min(maxChunk, tokens));
  chunks = ceilDiv(tokens, maxChunk);
  chunk = ceilDiv(tokens, chunks);
  int64_t rounded = ceilDiv(chunk, 8) * 8;
  if (rounded <= maxChunk && ceilDiv(tokens, rounded) == chunks) chunk = rounded;
  chunks = ceilDiv(tokens, chunk);
}

Plan makePlan(const Problem& problem, const Options& options, const Outputs* outputs, bool withGradients) {
  const int64_t n = problem.tokens, d = problem.hidden_dim, v = problem.vocab;
  const std::size_t e = elementBytes(problem.dtype);
  const int64_t padTo = int64_t(16 / e);
  Plan plan;
  plan.gradients = withGradients;
  plan.elementSize = e;
  plan.logitsLd = ceilDiv(v, padTo) * padTo;
  if (problem.dtype == DType::BFloat16) plan.statisticsBytes = partialStatisticsBytes(v);

  // With outputs unknown, gradients mean "every gradient" (workspaceBytes() takes the maximum over cases).
  const bool wantsOutput = withGradients && (!outputs || outputs->grad_weight);
  const bool wantsAccumulate = withGradients && outputs && outputs->grad_weight_accumulate;
  const bool wantsWeight = wantsOutput || wantsAccumulate;
  // grad_weight in fp32 is its own accumulator; in a half type it needs one unless one chunk writes it.
  const bool fp32Output =
      param_grad_dtype(problem.dtype, outputs ? outputs->param_grads : ParamGradKind::ProblemDType) == DType::Float32;
  const bool ownsWeight = wantsOutput && !fp32Output;
  const bool wantsBias = withGradients && (!outputs || outputs->grad_bias);
  // The numerators schedule (numerators.h) where the loss allows it: dx is a per-row factor times the
  // numerators only without smoothing, softcap, z-loss and bias; the tile product stores them (bf16).
  const bool numeratorsAllowed = withGradients && problem.dtype == DType::BFloat16 && !problem.bias &&
                                 options.label_smoothing == 0.0 && options.softcap == 0.0 && options.z_loss == 0.0;

  Layout layout;
  plan.report = layout.take(256);
  plan.scalars = layout.take(256);
  plan.targets = layout.take(std::size_t(n) * 4);
  plan.rowLoss = layout.take(std::size_t(n) * 4);
  plan.lse = layout.take(std::size_t(n) * 4);
  if (wantsBias) plan.biasAccumulator = layout.take(std::size_t(v) * 4);
  if (numeratorsAllowed) plan.rowScale = layout.take(std::size_t(n) * 4);
  // Beyond the regions taken so far: the cuBLASLt workspace, the compaction order, alignment slack, and
  // the bias accumulator even when this call has none, so the chunk (and the plan's size) never grows
  // past the plan for every output that workspace_size() reports.
  const std::size_t unusedBias = wantsBias ? 0 : alignUp(std::size_t(v) * 4, kAlign);
  const std::size_t fixed = layout.end() + unusedBias + kCublasWorkspaceBytes + std::size_t(n) * 8 + 8 * kAlign;
  const std::size_t accumulatorBytes = ownsWeight ? std::size_t(v) * std::size_t(d) * 4 : 0;
  const std::size_t rowBytes = logitsTokenBytes(plan);
  const std::size_t minChunk = std::size_t(std::min<int64_t>(n, kChunkFloorTokens));

  MemoryMode mode = options.memory;
  std::size_t budget = options.workspace_budget;
  if (mode == MemoryMode::Auto) {
    // The fp32 accumulator of an fp32 [V, D] gradient, counted only when this call needs one.
    const std::size_t autoAccumulator = std::size_t(v) * std::size_t(d) * 4;
    std::size_t autoBudget = budget ? budget : kDefaultBudget;
    mode = fixed + autoAccumulator + 2 * minChunk * rowBytes <= autoBudget ? MemoryMode::Accumulate
                                                                          : MemoryMode::LowMemory;
  }
  // Low-memory mode keeps its small default budget for every pass, with or without grad_weight.
  if (mode == MemoryMode::LowMemory && budget == 0) budget = kDefaultLowMemoryBudget;
  plan.lowMemory = withGradients && wantsWeight && mode == MemoryMode::LowMemory;
  const WeightSinkKind sink = ownsWeight ? WeightSinkKind::Accumulator
                              : wantsOutput ? WeightSinkKind::Output
                              : wantsAccumulate ? WeightSinkKind::Accumulate
                                                : WeightSinkKind::None;
  plan.weightSink = plan.lowMemory ? WeightSinkKind::None : sink;
  plan.sliceWeightSink = plan.lowMemory ? sink : WeightSinkKind::None;
  plan.tokens = n;
  plan.hiddenDim = d;
  plan.vocab = v;
  plan.paramElementSize = elementBytes(
      param_grad_dtype(problem.dtype, outputs ? outputs->param_grads : ParamGradKind::ProblemDType));

  // The lean plan: grad_weight given and dense, so its bytes hold the logits until the slices write it.
  const bool denseWeight =
      wantsOutput && outputs && (outputs->grad_weight_stride == 0 || outputs->grad_weight_stride == d);
  if (plan.lowMemory && denseWeight) {
    plan.borrowedBytes = std::size_t(v) * std::size_t(d) * plan.paramElementSize;
    plan.leanChunkCap = options.chunk_tokens > 0 ? options.chunk_tokens : 0;
    const int64_t gatheredLimit = leanChunkLimit(plan, options.compact);
    if (gatheredLimit >= std::min<int64_t>(n, 8)) {
      plan.lean = true;
      plan.numerators = numeratorsAllowed;  // pass A's chunks (rowScale is laid out above)
      plan.sliceWeightSink = WeightSinkKind::Output;  // each slice's rows written once, in grad_weight's type
      plan.compactGranule = options.compact ? compactGranule(n, gatheredLimit) : 0;
      plan.compact = plan.compactGranule > 0;
      plan.identityBranch = plan.compact;
      if (plan.compact) {
        plan.compactBranches = ceilDiv(n, plan.compactGranule);
        plan.order = layout.take(std::size_t(n) * 8);
      }
      plan.residue = layout.take(std::size_t(n) * kLeanResidueColumns * e);
      plan.totalBytes = layout.end();
      if (options.workspace_budget && options.workspace_budget < plan.totalBytes)
        budgetTooSmall(options.workspace_budget, plan.totalBytes, "the lean low-memory plan's token arrays");
      return plan;
    }
    plan.borrowedBytes = 0;
    plan.leanChunkCap = 0;
  }

  std::size_t logitsRegion = 0;
  if (!plan.lowMemory) {
    std::size_t available;
    if (budget == 0) {
      available = std::min(kDefaultBudget - std::min(kDefaultBudget, fixed + accumulatorBytes),
                           kDefaultBeyondAccumulator - std::min(kDefaultBeyondAccumulator, fixed));
      if (available < 2 * rowBytes) available = 2 * rowBytes;  // default budget never refuses a problem
    } else {
      if (budget < fixed + accumulatorBytes + 2 * rowBytes)
        budgetTooSmall(budget, fixed + accumulatorBytes + 2 * rowBytes,
                       "two logits rows and the fp32 grad_weight accumulator (try MemoryMode::LowMemory)");
      available = budget - fixed - accumulatorBytes;
    }
    // One buffer with gradients or compaction (plan.h), two for a plain forward-only call.
    plan.logitsBuffers = withGradients || options.compact ? 1 : 2;
    plan.numerators = numeratorsAllowed;
    // Per token of a chunk beside its logits: with compaction, a gathered hidden row and a compact
    // grad_hidden row (the numerators scale both in place); with numerators and no compaction, the scaled
    // hidden row (grad_hidden is scaled in the output itself).
    const std::size_t sideRowBytes =
        (options.compact ? 2 * std::size_t(d) * e : plan.numerators ? std::size_t(d) * e : 0);
    // Tokens that fit one chunk need no fp32 accumulator (grad_weight is written in its dtype), so that
    // chunk may fill the accumulator's region and the logits buffer after it: same workspace, one
    // chunk. Gathered rows are reserved for that many tokens. Not when the caller sets chunk_tokens.
    int64_t oneChunk = 0;
    if (ownsWeight && options.chunk_tokens <= 0) {
      oneChunk = int64_t(std::min<std::size_t>(std::size_t(n), (accumulatorBytes + available) / rowBytes));
      if (sideRowBytes) oneChunk = std::min<int64_t>(oneChunk, int64_t(available / 2 / sideRowBytes));
    }
    // When all N tokens fit that way, the plan is one chunk and nothing else: no accumulator region at
    // all, so the workspace is only what the logits and gathered rows of N tokens take (less than the
    // accumulator plus the chunk buffer it replaces).
    plan.singleChunk =
        oneChunk >= n && std::size_t(n) * (rowBytes + sideRowBytes) <= accumulatorBytes + available;
    int64_t maxChunk = n;
    if (!plan.singleChunk) {
      const std::size_t perToken = std::size_t(plan.logitsBuffers) * rowBytes;
      maxChunk = options.chunk_tokens > 0 ? options.chunk_tokens
                 : oneChunk > 0       ? int64_t((available - std::size_t(oneChunk) * sideRowBytes) / perToken)
                                      : int64_t(available / (perToken + sideRowBytes));
      maxChunk = std::max<int64_t>(1, std::min(maxChunk, n));
    }
    plan.gatheredTokens = std::max(maxChunk, oneChunk);
    plan.compactGranule = options.compact ? compactGranule(n, maxChunk) : 0;
    plan.compact = plan.compactGranule > 0;
    if (plan.compact || plan.singleChunk) {
      // Each compaction branch balances its own token count over chunks of at most maxChunk (backend.cpp).
      plan.chunkTokens = maxChunk;
      plan.chunks = ceilDiv(n, maxChunk);
      if (plan.compact) plan.compactBranches = ceilDiv(n, plan.compactGranule);
    } else {
      balanceChunks(n, maxChunk, plan.chunkTokens, plan.chunks);
    }
    plan.logitsBufferBytes = alignUp(std::size_t(plan.chunkTokens) * rowBytes, kAlign);
    logitsRegion = std::size_t(plan.logitsBuffers) * plan.logitsBufferBytes;
    plan.ownWeightAccumulator = ownsWeight && !plan.singleChunk;
    if (plan.singleChunk) {
      plan.oneChunkTokens = n;
      plan.weightSink = WeightSinkKind::Output;
    } else if (oneChunk > 0 && !wantsAccumulate) {
      // (With grad_weight_accumulate too, the accumulator's conversion adds to it: no second GEMM.)
      plan.oneChunkTokens = std::min<int64_t>(oneChunk, int64_t((accumulatorBytes + logitsRegion) / rowBytes));
      if (plan.numerators && denseWeight) {
        plan.splitBorrowBytes = std::size_t(v) * std::size_t(d) * plan.paramElementSize;
        plan.splitStaging = !outputs || outputs->grad_hidden;
      }
    }
  } else {
    if (budget < fixed + 2 * rowBytes) budgetTooSmall(budget, fixed + 2 * rowBytes, "two logits rows");
    const std::size_t available = budget - fixed;
    // Pass 1 (loss, lse, grad_hidden, grad_bias) over token chunks of the full vocabulary.
    int64_t maxChunk = options.chunk_tokens > 0 ? options.chunk_tokens : int64_t(available / (2 * rowBytes));
    balanceChunks(n, maxChunk, plan.chunkTokens, plan.chunks);
    plan.logitsBufferBytes = alignUp(std::size_t(plan.chunkTokens) * rowBytes, kAlign);
    // Pass 2 (grad_weight) over vocabulary slices: an fp32 [slice, D] accumulator plus two [tokens, slice]
    // logits buffers. Prefer long token chunks (compute-bound GEMMs), then the widest slice that fits.
    int64_t sliceTokens = options.chunk_tokens > 0 ? std::min(n, options.chunk_tokens) : std::min<int64_t>(n, 4096);
    int64_t slice = 0;
    for (;;) {
      std::size_t perColumn = (ownsWeight ? std::size_t(d) * 4 : 0) + 2 * std::size_t(sliceTokens) * e;
      slice = int64_t(available / perColumn) / kSliceAlignment * kSliceAlignment;
      if (slice >= kSliceAlignment || sliceTokens == 1) break;
      sliceTokens = std::max<int64_t>(1, sliceTokens / 2);
    }
    if (slice < kSliceAlignment)
      budgetTooSmall(budget, fixed + std::size_t(kSliceAlignment) * (std::size_t(d) * 4 + 2 * e),
                     "one vocabulary slice of the low-memory grad_weight pass");
    slice = std::min(slice, ceilDiv(v, kSliceAlignment) * kSliceAlignment);
    plan.slices = ceilDiv(v, slice);
    plan.sliceVocab = ceilDiv(ceilDiv(v, plan.slices), kSliceAlignment) * kSliceAlignment;
    plan.slices = ceilDiv(v, plan.sliceVocab);
    balanceChunks(n, sliceTokens, plan.sliceChunkTokens, plan.sliceChunks);
    plan.sliceBufferBytes = alignUp(std::size_t(plan.sliceChunkTokens) * std::size_t(plan.sliceVocab) * e, kAlign);
    // The two passes run one after the other, so they share one region: pass 1's two logits buffers, or
    // pass 2's two slice buffers followed by its [slice, D] accumulator.
    const std::size_t sliceAccumulator = ownsWeight ? std::size_t(plan.sliceVocab) * std::size_t(d) * 4 : 0;
    logitsRegion = std::max(2 * plan.logitsBufferBytes, 2 * plan.sliceBufferBytes + sliceAccumulator);
    plan.ownWeightAccumulator = ownsWeight;
  }

  if (plan.compact) {
    plan.order = layout.take(std::size_t(n) * 8);
    const std::size_t rowsBytes = std::size_t(plan.gatheredTokens) * std::size_t(d) * e;
    plan.gathered = layout.take(rowsBytes);
    plan.compactGradHidden = layout.take(rowsBytes);
  }
  if (plan.numerators && !plan.compact)
    plan.scaledHidden = layout.take(std::size_t(std::max(plan.gatheredTokens, plan.chunkTokens)) * std::size_t(d) * e);
  plan.cublas = layout.take(kCublasWorkspaceBytes);
  // The accumulator directly before the logits buffer: one chunk may span both (oneChunkTokens).
  if (plan.ownWeightAccumulator && !plan.lowMemory)
    plan.weightAccumulator = layout.take(std::size_t(v) * std::size_t(d) * 4);
  plan.logits = layout.take(logitsRegion);
  if (plan.ownWeightAccumulator && plan.lowMemory)
    plan.weightAccumulator = {plan.logits.offset + 2 * plan.sliceBufferBytes,
                              std::size_t(plan.sliceVocab) * std::size_t(d) * 4};
  plan.totalBytes = layout.end();
  return plan;
}

LeanPass leanPass(const Plan& plan, int64_t tokens, bool gather) {
  LeanPass pass;
  pass.tokens = tokens;
  pass.gather = gather;
  const std::size_t e = plan.elementSize, d = std::size_t(plan.hiddenDim), big = plan.borrowedBytes;
  // Pass A: gathered rows (reused for the compact grad_hidden rows), logits, cuBLASLt workspace.
  pass.blasBytes = passABlasBytes(plan);
  balanceChunks(tokens, std::max<int64_t>(1, leanChunkLimit(plan, gather, pass.blasBytes)), pass.chunkTokens,
                pass.chunks);
  pass.gatheredOffset = 0;
  pass.logitsOffset = gather ? alignUp(std::size_t(pass.chunkTokens) * d * e, kAlign) : 0;
  pass.blasOffset =
      pass.blasBytes ? alignUp(pass.logitsOffset + std::size_t(pass.chunkTokens) * logitsTokenBytes(plan), kAlign) : 0;
  // Pass B, first over the gathered rows h_c kept in grad_weight's last bytes, ...
  int64_t first = 0;
  LeanSlice slice;
  const std::size_t hc = std::size_t(tokens) * d * e;
  if (gather && hc + 4 * kAlign < big) {
    pass.hcOffset = alignDown(big - hc, kAlign);
    const int64_t minSlice = std::min<int64_t>(kLeanGatheredMinSlice, int64_t(alignUp(std::size_t(plan.vocab / 32), 16)));
    while (first < plan.vocab && fitSlice(plan, first, pass.hcOffset, tokens, std::max<int64_t>(16, minSlice), slice)) {
      slice.gathered = true;
      pass.slices.push_back(slice);
      first += slice.columns;
    }
  }
  // ... then over all N tokens (dx of ignored tokens is zero) with the rest of grad_weight free, ...
  while (first < plan.vocab && fitSlice(plan, first, big, plan.tokens, kLeanResidueColumns, slice)) {
    pass.slices.push_back(slice);
    first += slice.columns;
  }
  // ... and the last rows from the workspace's residue buffer.
  for (; first < plan.vocab; first += kLeanResidueColumns) {
    LeanSlice residue;
    residue.first = first;
    residue.columns = std::min(kLeanResidueColumns, plan.vocab - first);
    residue.ld = kLeanResidueColumns;
    residue.inWorkspace = true;
    pass.slices.push_back(residue);
  }
  return pass;
}

PassPlan passPlan(const Plan& plan, int64_t tokens) {
  PassPlan pass;
  pass.weight = plan.weightSink;
  if (plan.singleChunk) {
    pass.chunkTokens = tokens;
    pass.chunks = 1;
    return pass;
  }
  if (plan.weightSink == WeightSinkKind::Accumulator && tokens <= plan.oneChunkTokens) {
    // One chunk over the accumulator's region and the logits buffer (plan.h): no accumulator needed.
    pass.chunkTokens = tokens;
    pass.chunks = 1;
    pass.weight = WeightSinkKind::Output;
    pass.logitsOverAccumulator = true;
    return pass;
  }
  if (plan.compact) {
    balanceChunks(tokens, plan.chunkTokens, pass.chunkTokens, pass.chunks);
  } else {
    pass.chunkTokens = plan.chunkTokens;
    pass.chunks = plan.chunks;
  }
  if (plan.weightSink == WeightSinkKind::Accumulator && plan.splitBorrowBytes > 0) pass.split = splitLayout(plan, tokens);
  return pass;
}

std::size_t workspaceBytes(const Problem& problem, const Options& options, bool withGradients) {
  if (!withGradients) return makePlan(problem, options, nullptr, false).totalBytes;
  // The call plans for the gradients it is actually given; this is the largest of those plans.
  static float marker;
  Outputs everything, accumulateOnly, noWeight;
  everything.grad_weight = &marker;
  everything.grad_bias = &marker;
  accumulateOnly.grad_weight_accumulate = &marker;
  accumulateOnly.grad_bias = &marker;
  noWeight.grad_hidden = &marker;
  noWeight.grad_bias = &marker;
  // A workspace sized for gradients also serves a forward-only call on the same problem.
  std::size_t bytes = makePlan(problem, options, nullptr, false).totalBytes;
  for (const Outputs* outputs : {&everything, &accumulateOnly, &noWeight})
    bytes = std::max(bytes, makePlan(problem, options, outputs, true).totalBytes);
  return bytes;
}

}  // namespace lmfuse::detail::cuda
