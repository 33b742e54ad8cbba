// Workspace layout and chunk plan of the CUDA backend: pure host arithmetic, a function of the problem
// sizes and options alone (never of pointer values or label contents), so workspace_size() and the call
// always agree. Every region starts on a 256-byte boundary; logits buffers have a leading dimension
// padded to 16 bytes so cuBLASLt can use its vectorised kernels for any vocabulary size. A logits buffer
// holding T tokens holds their T logits rows, then (bf16) T rows of the rows' partial statistics: apart,
// so the rows keep the leading dimension every GEMM over them is fast at (a wider row cost more than the
// statistics saved, runtime/bench/NOTES.md v26).
//
// One logits buffer when the backward GEMMs run: cuBLASLt's GEMMs here are persistent kernels that hold
// every SM, so a second buffer would let nothing overlap (measured, runtime/bench/NOTES.md) and would
// only halve the chunk; longer chunks re-read the fp32 grad_weight accumulator fewer times. Forward-only
// calls without compaction keep two buffers, where the row kernel of one chunk does overlap the next
// forward GEMM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lmfuse/flce.h"

namespace lmfuse::detail::cuda {

constexpr std::size_t kDefaultBudget = std::size_t(4) << 30;        // Options::workspace_budget == 0
constexpr std::size_t kDefaultLowMemoryBudget = std::size_t(512) << 20;
// At the default budget the memory beyond the fp32 grad_weight accumulator stays under 1.5 GiB.
constexpr std::size_t kDefaultBeyondAccumulator = std::size_t(1536) << 20;
constexpr std::size_t kCublasWorkspaceBytes = std::size_t(32) << 20;
constexpr int64_t kChunkFloorTokens = 1024;  // below this the grad_weight GEMM stops being compute-bound
constexpr int64_t kSliceAlignment = 128;     // vocabulary slices start on multiples of this
// Compaction records the call once per branch: branch r runs the first min(N, (r + 1)·granule) gathered
// tokens. More branches waste fewer padded tokens (granule / 2 on average) but make a larger graph.
constexpr int64_t kMaxCompactBranches = 64;
constexpr int64_t kMinCompactGranule = 64;
constexpr int64_t kMaxCompactChunkBodies = 384;  // chunks summed over every branch
constexpr int64_t kMinCompactBranches = 4;       // below this compaction would save too little to pay
// Lean low-memory plan (see LeanPass): the narrowest vocabulary slice that runs in grad_weight's own
// free rows before the last ones run from a workspace buffer of this many columns for all N tokens.
constexpr int64_t kLeanResidueColumns = 8;  // 16-byte rows in bf16/fp16
// Slices over the gathered hidden rows stop below this width (or V/32 for small vocabularies); the rest
// runs over all N tokens.
constexpr int64_t kLeanGatheredMinSlice = 512;
// A borrowed cuBLASLt workspace is taken only where the free region is this many times its size.
constexpr std::size_t kLeanBlasRoom = 4;

struct Region {
  std::size_t offset = 0;
  std::size_t bytes = 0;
};

/// Where a pass's grad_weight GEMMs write: decided here, once, and only followed by backend.cpp.
enum class WeightSinkKind : int {
  None,         // no grad_weight in this pass (none asked, or the low-memory slice pass computes it)
  Output,       // straight into grad_weight in its storage type: beta 0 for the first chunk, 1 after, so only
                //   for one chunk or fp32 storage (ParamGradKind::Float32, or an fp32 problem: grad_weight is
                //   its own accumulator); grad_weight_accumulate, when given too, gets a second GEMM (beta 1)
  Accumulate,   // only grad_weight_accumulate: every chunk adds to it (beta 1)
  Accumulator,  // the workspace's fp32 accumulator (beta 0, then 1), converted once into grad_weight (and
                //   added to grad_weight_accumulate when given)
};

/// A numerators pass in one chunk whose buffer does not fit the accumulator's region and the logits buffer
/// but does with grad_weight's bytes beside them (those bytes are free until grad_weight's products write
/// them): vocabulary columns [0, columnsA) of its numerators (part A) in the workspace, the rest (part B) at
/// the start of grad_weight, inside the bytes of its rows [0, columnsA), which are written last; u'·W in
/// fp32 (for grad_hidden) inside the bytes of rows [columnsA, V), written after it is read. Offsets from
/// the start of the workspace (rows, part A) or of grad_weight (part B, staging). Each part holds its
/// tokens' rows, then their partial statistics (kernels.h: RowPartials). The order that keeps every
/// buffer intact until read is backend.cpp's: products, rows, grad_hidden, rows [columnsA, V), rows [0, columnsA).
struct SplitPass {
  int64_t columnsA = 0;  // 0: no split; else a multiple of kRowStatisticsColumns, so part A's ld
  int64_t ldB = 0;
  std::size_t rowsOffset = 0;     // the pass's hidden rows: gathered (compaction) or c ⊙ h, [tokens, D]
  std::size_t aOffset = 0;
  std::size_t bOffset = 0;        // in grad_weight
  std::size_t stagingOffset = 0;  // in grad_weight; fp32 [tokens, D]
};

/// One full-vocabulary pass over a token count (all N, or one compaction branch's count).
struct PassPlan {
  int64_t chunkTokens = 0, chunks = 0;
  WeightSinkKind weight = WeightSinkKind::None;
  bool logitsOverAccumulator = false;  // its one chunk's logits span the accumulator's region and the buffer
  // Where the backend can run it (both parts' products are the tile product), the pass runs as this one
  // split chunk instead of the chunks above; a row whose numerators overflow redoes the pass as those chunks.
  SplitPass split;
};

/// One vocabulary slice of the lean plan's grad_weight pass: grad_weight rows [first, first + columns)
/// = dxᵀ·h over the slice's logits, recomputed into a buffer of `ld` columns.
struct LeanSlice {
  int64_t first = 0, columns = 0, ld = 0;
  bool gathered = false;        // over the gathered hidden rows (h_c, `tokens` of them), else all N tokens
  bool inWorkspace = false;     // buffer in the workspace's residue region, else at bufferOffset of grad_weight
  std::size_t bufferOffset = 0;
  std::size_t blasOffset = 0, blasBytes = 0;  // cuBLASLt workspace inside grad_weight; 0 bytes: none
};

/// The lean low-memory plan for one token count (all N, or one compaction branch's): everything beyond a
/// few small arrays lives inside the grad_weight output, whose bytes are free until the slices write them.
/// Pass A (token chunks, full vocabulary): optionally gathered hidden rows at gatheredOffset, logits at
/// logitsOffset (dx in place, or the numerators u' where Plan::numerators), grad_hidden = dx·W or c ⊙ (u'·W)
/// (into the gathered rows' place, then scattered, or straight into grad_hidden). Pass B: the gathered hidden rows h_c at hcOffset (the last bytes of
/// grad_weight) while the slices' rows and buffers stay below it, then slices over all N tokens with
/// buffers in the unwritten rows above the slice, then the last rows from the workspace's residue buffer.
struct LeanPass {
  int64_t tokens = 0;
  bool gather = false;
  int64_t chunkTokens = 0, chunks = 0;
  std::size_t gatheredOffset = 0, logitsOffset = 0, blasOffset = 0, blasBytes = 0;
  std::size_t hcOffset = 0;
  std::vector<LeanSlice> slices;
};

struct Plan {
  bool gradients = false;
  bool lowMemory = false;
  // Lean low-memory plan (LeanPass): grad_weight is given and dense, so its bytes are the scratch space.
  bool lean = false;
  // Compaction under the lean plan: one more branch (index compactBranches) for a count of exactly N,
  // whose order is the identity, so it gathers nothing.
  bool identityBranch = false;
  std::size_t borrowedBytes = 0;  // lean: grad_weight's bytes
  int64_t leanChunkCap = 0;       // lean: Options::chunk_tokens, 0 for none
  int64_t tokens = 0, hiddenDim = 0, vocab = 0;
  std::size_t elementSize = 0, paramElementSize = 0;
  bool ownWeightAccumulator = false;
  bool compact = false;               // only tokens with a label go through the GEMMs (compaction.h)
  int logitsBuffers = 2;              // 1 or 2 full-vocabulary logits buffers (see above)
  int64_t logitsLd = 0;               // leading dimension of the full-vocabulary logits buffers
  // bf16: the bytes of one token's partial row statistics, a float2 per kRowStatisticsColumns logits
  // (kernels.h: RowPartials), written by the tile product where it computes the row's logits; a buffer of
  // T tokens keeps them after its T logits rows. 0: none (fp16 and fp32 never run the tile product).
  std::size_t statisticsBytes = 0;
  // The full-vocabulary pass may run the numerators schedule (bf16 gradients without smoothing, softcap,
  // z-loss or bias; not the low-memory slice pass): its per-chunk regions are laid out. The backend runs it
  // where the chunk's product is the tile product (backend.cpp), the lean plan's pass A included (its
  // grad_hidden = c ⊙ (u'·W) scaled from the chunk's rows; pass B's slices write dx from the lse as always).
  bool numerators = false;
  int64_t chunkTokens = 0;            // token chunk of the full-vocabulary passes (compaction: the largest)
  int64_t chunks = 0;
  // All N tokens in one chunk and no fp32 accumulator at all (grad_weight written in its dtype): chosen
  // when the logits of N tokens take no more than the accumulator plus a chunk buffer would.
  bool singleChunk = false;
  // Otherwise up to this many tokens run as one chunk whose logits span the fp32 accumulator's region and
  // the logits buffer (contiguous): one chunk needs no accumulator when grad_weight is only overwritten.
  int64_t oneChunkTokens = 0;
  // Split passes (SplitPass) may borrow grad_weight, these bytes of it: a dense half-type grad_weight given
  // with numerators and an accumulator; 0 otherwise. splitStaging: grad_hidden is asked for too.
  std::size_t splitBorrowBytes = 0;
  bool splitStaging = false;
  int64_t gatheredTokens = 0;         // compaction: rows of the gathered and compact grad_hidden buffers
  int64_t compactGranule = 0;         // compaction: branch r covers min(N, (r + 1)·granule) tokens
  int64_t compactBranches = 0;
  // grad_weight's sink in the chunked full pass (PassPlan may pick Output for a pass of one chunk), and in
  // the low-memory slice pass.
  WeightSinkKind weightSink = WeightSinkKind::None;
  WeightSinkKind sliceWeightSink = WeightSinkKind::None;
  // LowMemory only: the grad_weight pass over vocabulary slices.
  int64_t sliceVocab = 0;
  int64_t slices = 0;
  int64_t sliceChunkTokens = 0;
  int64_t sliceChunks = 0;

  Region report, scalars, targets, rowLoss, lse, biasAccumulator, weightAccumulator, cublas, logits;
  Region order, gathered, compactGradHidden;  // compaction: token order, gathered [chunk, D], grad [chunk, D]
  Region residue;                              // lean: [N, kLeanResidueColumns] logits of the last slices
  // The numerators schedule (numerators.h): each buffer row's gradient factor c (taken whenever the loss
  // allows numerators), and without compaction a chunk's c ⊙ h rows (with it, the gathered rows are scaled
  // in place).
  Region rowScale, scaledHidden;
  std::size_t logitsBufferBytes = 0;  // one logits buffer
  std::size_t sliceBufferBytes = 0;   // LowMemory: one of the two slice buffers (same region as the above)
  std::size_t totalBytes = 0;
};

/// The plan for this problem and these outputs (null: every gradient); throws Error naming workspace_budget or chunk_tokens when they cannot work.
Plan makePlan(const Problem& problem, const Options& options, const Outputs* outputs, bool withGradients);

/// How the full-vocabulary pass runs over its first `tokens` tokens (plan.tokens, or a compaction
/// branch's count): its chunks and where its grad_weight goes.
PassPlan passPlan(const Plan& plan, int64_t tokens);

/// The lean plan's passes over `tokens` tokens, gathered (a compaction branch) or not (all N in order).
LeanPass leanPass(const Plan& plan, int64_t tokens, bool gather);

/// What workspace_size() returns: enough for any combination of requested outputs.
std::size_t workspaceBytes(const Problem& problem, const Options& options, bool withGradients);

std::size_t elementBytes(DType dtype);

/// The bytes of one row's partial statistics over `columns` logits (a float2 per kRowStatisticsColumns).
std::size_t partialStatisticsBytes(int64_t columns);

/// The bytes one token takes in a logits buffer: its logits row and its partial statistics.
std::size_t logitsTokenBytes(const Plan& plan);

/// The fewest balanced chunks of at most maxChunk tokens covering `tokens` (a multiple of 8 tokens when
/// that costs no chunk); used by the plan and by each compaction branch.
void balanceChunks(int64_t tokens, int64_t maxChunk, int64_t& chunk, int64_t& chunks);

}  // namespace lmfuse::detail::cuda
