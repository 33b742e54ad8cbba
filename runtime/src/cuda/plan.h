// Workspace layout and chunk plan of the CUDA backend: pure host arithmetic, a function of the problem
// sizes and options alone (never of pointer values or label contents), so workspace_size() and the call
// always agree. Every region starts on a 256-byte boundary; logits buffers have a leading dimension
// padded to 16 bytes so cuBLASLt can use its vectorised kernels for any vocabulary size.
//
// One logits buffer when the backward GEMMs run: cuBLASLt's GEMMs here are persistent kernels that hold
// every SM, so a second buffer would let nothing overlap (measured, runtime/bench/NOTES.md) and would
// only halve the chunk; longer chunks re-read the fp32 grad_weight accumulator fewer times. Forward-only
// calls without compaction keep two buffers, where the row kernel of one chunk does overlap the next
// forward GEMM.
#pragma once

#include <cstddef>
#include <cstdint>

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

/// One full-vocabulary pass over a token count (all N, or one compaction branch's count).
struct PassPlan {
  int64_t chunkTokens = 0, chunks = 0;
  WeightSinkKind weight = WeightSinkKind::None;
  bool logitsOverAccumulator = false;  // its one chunk's logits span the accumulator's region and the buffer
};

struct Plan {
  bool gradients = false;
  bool lowMemory = false;
  bool ownWeightAccumulator = false;
  bool compact = false;               // only tokens with a label go through the GEMMs (compaction.h)
  int logitsBuffers = 2;              // 1 or 2 full-vocabulary logits buffers (see above)
  int64_t logitsLd = 0;               // leading dimension of the full-vocabulary logits buffers
  int64_t chunkTokens = 0;            // token chunk of the full-vocabulary passes (compaction: the largest)
  int64_t chunks = 0;
  // All N tokens in one chunk and no fp32 accumulator at all (grad_weight written in its dtype): chosen
  // when the logits of N tokens take no more than the accumulator plus a chunk buffer would.
  bool singleChunk = false;
  // Otherwise up to this many tokens run as one chunk whose logits span the fp32 accumulator's region and
  // the logits buffer (contiguous): one chunk needs no accumulator when grad_weight is only overwritten.
  int64_t oneChunkTokens = 0;
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
  std::size_t logitsBufferBytes = 0;  // one logits buffer
  std::size_t sliceBufferBytes = 0;   // LowMemory: one of the two slice buffers (same region as the above)
  std::size_t totalBytes = 0;
};

/// The plan for this problem and these outputs (null: every gradient); throws Error naming workspace_budget or chunk_tokens when they cannot work.
Plan makePlan(const Problem& problem, const Options& options, const Outputs* outputs, bool withGradients);

/// How the full-vocabulary pass runs over its first `tokens` tokens (plan.tokens, or a compaction
/// branch's count): its chunks and where its grad_weight goes.
PassPlan passPlan(const Plan& plan, int64_t tokens);

/// What workspace_size() returns: enough for any combination of requested outputs.
std::size_t workspaceBytes(const Problem& problem, const Options& options, bool withGradients);

std::size_t elementBytes(DType dtype);

/// The fewest balanced chunks of at most maxChunk tokens covering `tokens` (a multiple of 8 tokens when
/// that costs no chunk); used by the plan and by each compaction branch.
void balanceChunks(int64_t tokens, int64_t maxChunk, int64_t& chunk, int64_t& chunks);

}  // namespace lmfuse::detail::cuda
