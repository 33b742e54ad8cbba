// The CUDA backend's entry points (lmfuse::detail::cuda in backend.h).
//
// Contract: the call enqueues everything on context.stream (plus one side stream joined back through
// events), allocates nothing, never synchronises and never copies to the host (LMFUSE_CUDA_EAGER apart:
// conditional.h), so it can be captured in a CUDA graph. Tokens go through in chunks: per chunk, the logits product writes the logits into the
// logits buffer (lmfuse's Hopper tile product, tile_gemm.h, for bf16 on a device of compute capability
// 9.0; cuBLASLt otherwise); the row kernel computes loss and lse and overwrites the buffer in place with dx; then cuBLASLt
// accumulates grad_weight in fp32 and computes the chunk's grad_hidden rows. Where the chunk's product is the
// tile product and the loss has no smoothing, softcap, z-loss or bias, the chunk runs the numerators schedule
// instead (numerators.h): the product stores exp(z − z_target), dx is a per-row factor times those, applied to
// the hidden rows of the grad_weight product and to the grad_hidden rows, and no pass over the buffer writes
// dx; a chunk holding a row whose numerators overflow is redone the usual way under a graph IF node, so every
// call that may run it is recorded as a graph (or, with LMFUSE_CUDA_EAGER, has the redo decided on the host). Tokens that fit one chunk
// write grad_weight directly in its dtype (no accumulator, no conversion): when all N tokens fit, the plan
// has no accumulator at all (plan.h: singleChunk); otherwise a count that fits one chunk may use the
// accumulator's region for its logits (plan.h: oneChunkTokens), and a numerators count a little longer may
// still run as one chunk, its numerators split by vocabulary columns between that region and grad_weight's
// own bytes, which are free until its products write them (plan.h: SplitPass). Without room for the
// fp32 [V, D] accumulator (MemoryMode::LowMemory), a first pass computes loss, lse, grad_hidden and
// grad_bias, and a second pass over vocabulary slices recomputes the logits of each slice to accumulate
// grad_weight (the tile product writes those slices as dx straight from its epilogue). When grad_weight is
// given and dense, that low-memory schedule is the lean one (plan.h:
// LeanPass): both passes keep their logits, gathered rows and cuBLASLt workspace inside grad_weight's own
// bytes, which are free until the slices write them, so the workspace holds only per-token arrays and a
// [N, 8] buffer for the last slices; its first pass runs the numerators schedule where the default one
// would (with its redo); it compacts like the default schedule, with one more branch for a
// count of exactly N (the identity order: nothing gathered). Forward-only calls without compaction overlap the row kernel with the next chunk's GEMM on
// a side stream.
// Compaction (Options::compact, the default): a device-side stable order of the tokens with a label, and
// one SWITCH node of a CUDA graph whose branch r runs the whole pass above over the first
// min(N, (r + 1)·granule) gathered tokens, in balanced chunks; a kernel picks the branch from the
// device-side count, so the GEMMs cost what the labelled tokens need (plus under one granule of padding)
// and the host never learns the count. An eager call is recorded as a graph and launched (the graphs of
// the last four distinct argument sets are kept); a call under the caller's capture adds its nodes to the
// caller's graph; with LMFUSE_CUDA_EAGER set, an uncaptured call records nothing and each conditional
// choice is read back by the host (conditional.h), for tools that do not follow conditional nodes.
// Where grad_weight goes is the plan's decision (plan.h: WeightSinkKind, PassPlan); this file follows it.
// The schedule is four named passes: prepare (targets, scalars, compaction order), the full-vocabulary
// pass (per compaction branch), the low-memory slice pass, finish (loss reduction, bias conversion).
// Arguments arrive validated by api.cpp (sizes, pointers, cuBLASLt alignment, workspace size); the
// checks here are the ones only the device can answer. Every failure goes through LMFUSE_FAIL (error.h).
// Results are bitwise reproducible: fixed chunking per token count, fixed cuBLASLt algorithms, a tile
// product whose every tile one CTA sums in a fixed order, no float atomics.
#include <cuda_runtime.h>

#include <climits>
#include <cstring>
#include <type_traits>
#include <utility>
#include <functional>
#include <string>
#include <vector>

#include "backend.h"
#include "call_key.h"
#include "check.h"
#include "compaction.h"
#include "conditional.h"
#include "device_state.h"
#include "error.h"
#include "error_report.h"
#include "gemm.h"
#include "kernels.h"
#include "numerators.h"
#include "plan.h"
#include "storage.h"
#include "tile_gemm.h"

namespace lmfuse::detail::cuda {
namespace {

char* at(Workspace workspace, const Region& region) { return static_cast<char*>(workspace.data) + region.offset; }

// TMA's rule for the tile product's operands: 16-byte aligned addresses.
bool tmaAligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// What api.cpp cannot check: that every pointer is device memory, and cudaMalloc's alignment of the
// workspace (its regions are laid out on 256-byte boundaries).
void requireDevice(const void* pointer, const char* name) {
  if (!pointer) return;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    (void)cudaGetLastError();
    LMFUSE_FAIL(name << " is not a pointer the CUDA runtime knows");
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    LMFUSE_FAIL(name << " is host memory, but context.device is Cuda: pass device memory");
}

void validateForDevice(const Problem& problem, const Options& options, const Outputs& outputs,
                       Workspace workspace) {
  if (reinterpret_cast<uintptr_t>(workspace.data) % 256 != 0)
    LMFUSE_FAIL("workspace.data must be 256-byte aligned (cudaMalloc's alignment)");
  requireDevice(problem.hidden, "problem.hidden");
  requireDevice(problem.weight, "problem.weight");
  requireDevice(problem.bias, "problem.bias");
  requireDevice(problem.labels, "problem.labels");
  requireDevice(options.shift.cu_seqlens, "options.shift.cu_seqlens");
  requireDevice(options.n_items, "options.n_items");
  requireDevice(options.grad_scale, "options.grad_scale");
  requireDevice(outputs.loss, "outputs.loss");
  requireDevice(outputs.lse, "outputs.lse");
  requireDevice(outputs.grad_hidden, "outputs.grad_hidden");
  requireDevice(outputs.grad_weight, "outputs.grad_weight");
  requireDevice(outputs.grad_weight_accumulate, "outputs.grad_weight_accumulate");
  requireDevice(outputs.grad_bias, "outputs.grad_bias");
  requireDevice(workspace.data, "workspace.data");
}

// One unit of pipelined work: a token range, and a vocabulary range (the whole vocabulary, or a slice).
struct Item {
  int64_t firstToken, tokens, firstColumn, columns;
  bool lastOfSlice;
};

std::vector<Item> tokenChunks(int64_t tokens, int64_t chunk, int64_t firstColumn, int64_t columns) {
  std::vector<Item> items;
  for (int64_t t = 0; t < tokens; t += chunk)
    items.push_back({t, std::min(chunk, tokens - t), firstColumn, columns, t + chunk >= tokens});
  return items;
}

// Runs items through the logits buffers. One buffer (buffers[1] null): the steps of each item in order
// on `main`. Two buffers: forward GEMM on `main`, row kernel on the side stream, backward GEMMs on `main`,
// so the side stream's kernel for item k+1 overlaps the GEMMs of k.
struct Pipeline {
  using Step = std::function<void(const Item&, void*, cudaStream_t)>;
  DeviceState& state;
  cudaStream_t main;
  char* buffers[2];
  Step forward;   // main stream
  Step rows;      // side stream (main with one buffer); empty: nothing between the GEMMs
  Step backward;  // main stream; empty: forward only

  void issueFront(const std::vector<Item>& items, std::size_t k) {
    void* buffer = buffers[k % 2];
    forward(items[k], buffer, main);
    LMFUSE_CUDA_CHECK(cudaEventRecord(state.forked, main));
    LMFUSE_CUDA_CHECK(cudaStreamWaitEvent(state.side, state.forked, 0));
    if (rows) rows(items[k], buffer, state.side);
    LMFUSE_CUDA_CHECK(cudaEventRecord(state.rowsDone[k % 2], state.side));
  }

  void run(const std::vector<Item>& items) {
    if (items.empty()) return;
    if (!buffers[1]) {
      for (const Item& item : items) {
        forward(item, buffers[0], main);
        if (rows) rows(item, buffers[0], main);
        if (backward) backward(item, buffers[0], main);
      }
      return;
    }
    issueFront(items, 0);
    for (std::size_t k = 0; k < items.size(); ++k) {
      if (k + 1 < items.size()) {
        // Without backward GEMMs on the main stream, buffer (k+1)%2 is free once the side stream's
        // kernel for item k-1 is done.
        if (!backward && k >= 1) LMFUSE_CUDA_CHECK(cudaStreamWaitEvent(main, state.rowsDone[(k + 1) % 2], 0));
        issueFront(items, k + 1);
      }
      if (backward) {
        LMFUSE_CUDA_CHECK(cudaStreamWaitEvent(main, state.rowsDone[k % 2], 0));
        backward(items[k], buffers[k % 2], main);
      }
    }
    if (!backward) {  // join the side stream back into the main stream
      LMFUSE_CUDA_CHECK(cudaStreamWaitEvent(main, state.rowsDone[(items.size() - 1) % 2], 0));
    }
  }
};

// The schedule of one call: the buffers of the workspace, and the passes that enqueue the work on `main`
// (the caller's stream, or the stream recording it as a graph when compacting) and the side stream.
class Schedule {
public:
  Schedule(DeviceState& state, const Problem& problem, const Options& options, const Outputs& outputs,
           Workspace workspace, const Plan& plan)
      : state_(state), problem_(problem), options_(options), outputs_(outputs), plan_(plan),
        gradients_(outputs.wants_gradients()), e_(elementBytes(problem.dtype)), type_(cudaType(problem.dtype)),
        paramDType_(param_grad_dtype(problem.dtype, outputs.param_grads)),
        hiddenLd_(plan.compact ? problem.hidden_dim : problem.hidden_stride),
        userLoss_(options.reduction == Reduction::None ? outputs.loss : nullptr),
        report_(reinterpret_cast<LabelErrorReport*>(at(workspace, plan.report))),
        scalars_(reinterpret_cast<Scalars*>(at(workspace, plan.scalars))),
        targets_(reinterpret_cast<int32_t*>(at(workspace, plan.targets))),
        rowLoss_(reinterpret_cast<float*>(at(workspace, plan.rowLoss))),
        lse_(reinterpret_cast<float*>(at(workspace, plan.lse))),
        biasAccumulator_(reinterpret_cast<float*>(at(workspace, plan.biasAccumulator))),
        weightAccumulator_(reinterpret_cast<float*>(at(workspace, plan.weightAccumulator))),
        order_(reinterpret_cast<int64_t*>(at(workspace, plan.order))), gathered_(at(workspace, plan.gathered)),
        compactGradHidden_(at(workspace, plan.compactGradHidden)), residue_(at(workspace, plan.residue)),
        rowScale_(reinterpret_cast<float*>(at(workspace, plan.rowScale))), workspace_(static_cast<char*>(workspace.data)),
        scaledHidden_(plan.compact ? gathered_ : at(workspace, plan.scaledHidden)),
        logits_(at(workspace, plan.logits)),
        blasWorkspace_(at(workspace, plan.cublas)) {
    params_.vocab = problem.vocab;
    params_.smoothing = float(options.label_smoothing);
    params_.softcap = float(options.softcap);
    params_.logitScale = float(options.logit_scale);
    params_.zLoss = float(options.z_loss);
    params_.bias = problem.bias;
    params_.targets = targets_;
    params_.scalars = scalars_;
    params_.tokenGradScale = options.reduction == Reduction::None ? options.grad_scale : nullptr;
    params_.rowTokens = plan.compact ? order_ : nullptr;
  }

  void run(cudaStream_t main) {
    const Condition branch = prepare(main);
    if (plan_.lean) {
      if (plan_.compact)
        enqueueSwitch(main, branch, int(plan_.compactBranches) + 1, state_.body, [&](int r, cudaStream_t body) {
          // The last branch is the count of exactly N: the order is the identity, nothing to gather.
          if (r == plan_.compactBranches) leanPasses(problem_.tokens, false, body);
          else leanPasses(std::min(problem_.tokens, (r + 1) * plan_.compactGranule), true, body);
        });
      else
        leanPasses(problem_.tokens, false, main);
      finish(main);
      return;
    }
    if (plan_.compact)
      enqueueSwitch(main, branch, int(plan_.compactBranches), state_.body, [&](int r, cudaStream_t body) {
        fullPass(std::min(problem_.tokens, (r + 1) * plan_.compactGranule), body);
      });
    else
      fullPass(problem_.tokens, main);
    if (plan_.sliceWeightSink != WeightSinkKind::None) slicePass(main);
    finish(main);
  }

private:
  // Targets and scalars; when compacting, the order of the tokens with a label, the outputs of the
  // others, and the branch the device picks from its count.
  Condition prepare(cudaStream_t main) {
    launchPrepare(problem_, options_, targets_, scalars_, report_, main);
    Condition branch;
    if (!plan_.compact) return branch;
    launchCompact(targets_, problem_.tokens, order_, scalars_, rowLoss_, lse_, outputs_.lse, userLoss_, main);
    if (gradients_ && outputs_.grad_hidden)
      launchZeroIgnoredRows(problem_.dtype, targets_, problem_.tokens, problem_.hidden_dim, outputs_.grad_hidden,
                            outputs_.grad_hidden_stride, main);
    branch = newCondition(main, &scalars_->branch);
    launchSelectBranch(branch, plan_.compactGranule, plan_.compactBranches, plan_.identityBranch ? problem_.tokens : 0,
                       scalars_, main);
    return branch;
  }

  // Over the first `tokens` tokens (gathered ones when compacting): loss, lse, dx, grad_hidden, grad_bias, and
  // grad_weight into the pass's sink; as one split chunk where passPlan() gives one and both its products are
  // the tile product, else in the chunks of passPlan().
  void fullPass(int64_t tokens, cudaStream_t stream) {
    const PassPlan pass = passPlan(plan_, tokens);
    if (splitRuns(tokens, pass.split)) {
      splitPass(tokens, pass, stream);
      return;
    }
    chunkedPass(tokens, pass, plan_.numerators, stream);
  }

  // The chunks of `pass`. A chunk whose product is the tile product runs the numerators schedule where
  // `numerators` allows it (numeratorsRun).
  void chunkedPass(int64_t tokens, const PassPlan& pass, bool numerators, cudaStream_t stream) {
    const int64_t v = problem_.vocab, d = problem_.hidden_dim;
    const auto numeratorsRun = [&](bool backward, const RowPartials& partials) {
      return numerators && backward && partials.data;
    };
    char* buffers[2] = {logits_, plan_.logitsBuffers == 2 ? logits_ + plan_.logitsBufferBytes : nullptr};
    if (pass.logitsOverAccumulator) buffers[0] = reinterpret_cast<char*>(weightAccumulator_);
    if (pass.chunks == 1) buffers[1] = nullptr;
    const bool backward = gradients_ && (outputs_.grad_hidden || pass.weight != WeightSinkKind::None);
    bool converted = false;  // the last chunk's product wrote grad_weight from the accumulator
    Pipeline full{state_, stream, {buffers[0], buffers[1]}, {}, {}, {}};
    full.forward = [&](const Item& item, void* buffer, cudaStream_t s) {
      if (plan_.compact)
        launchGatherRows(problem_.dtype, problem_.hidden, problem_.hidden_stride, order_, item.firstToken, item.tokens,
                         d, gathered_, s);
      const RowPartials partials = rowStatistics(hiddenRows(item), hiddenLd_, item.tokens, buffer, gradients_);
      if (numeratorsRun(backward, partials)) {
        launchTargetLogits(hiddenRows(item), hiddenLd_, problem_.weight, problem_.weight_stride, d, rowParams(item),
                           lse_, scalars_, s);
        forwardGemm(item, buffer, plan_.logitsLd, s, nullptr, &partials, lse_);
        return;
      }
      forwardGemm(item, buffer, plan_.logitsLd, s, nullptr, partials.data ? &partials : nullptr);
    };
    full.rows = [&](const Item& item, void* buffer, cudaStream_t s) {
      const RowParams p = rowParams(item);
      const RowPartials partials = rowStatistics(hiddenRows(item), hiddenLd_, item.tokens, buffer, gradients_);
      if (numeratorsRun(backward, partials)) {
        numeratorRows(item, buffer, partials, s);
        return;
      }
      launchRowLoss(problem_.dtype, buffer, p, gradients_, partials.data ? &partials : nullptr, rowLoss_, lse_,
                    outputs_.lse, userLoss_, s);
      if (gradients_ && outputs_.grad_bias)
        launchColumnSum(problem_.dtype, buffer, item.tokens, v, plan_.logitsLd, biasAccumulator_, item.firstToken > 0, s);
    };
    if (backward) {
      full.backward = [&](const Item& item, void* buffer, cudaStream_t s) {
        const RowPartials partials = rowStatistics(hiddenRows(item), hiddenLd_, item.tokens, buffer, gradients_);
        if (numeratorsRun(backward, partials)) {
          // dx = c · u': grad_weight = u'ᵀ·(c ⊙ h), grad_hidden = c ⊙ (u'·W) (numerators.h).
          converted = weightGemms(pass.weight, item, buffer, plan_.logitsLd, 0, weightAccumulator_, s, scaledHidden_,
                                  problem_.hidden_dim);
          if (outputs_.grad_hidden) {
            // u'·W into the compact rows (or the chunk's own grad_hidden rows), then scaled into place.
            char* rows = plan_.compact ? compactGradHidden_ : gradHiddenRows(item);
            const int64_t ld = plan_.compact ? d : outputs_.grad_hidden_stride;
            hiddenGemm(item, buffer, rows, ld, s);
            const RowParams tokens = rowParams(item);
            launchScaleRows(rows, ld, rowScale_, plan_.compact ? &tokens : nullptr, item.tokens, d,
                            plan_.compact ? outputs_.grad_hidden : rows, outputs_.grad_hidden_stride, s);
          }
          return;
        }
        converted = weightGemms(pass.weight, item, buffer, plan_.logitsLd, 0, weightAccumulator_, s, hiddenRows(item),
                                hiddenLd_);
        if (outputs_.grad_hidden) gradHiddenGemm(item, buffer, s);
      };
    }
    full.run(tokenChunks(tokens, pass.chunkTokens, 0, v));
    if (pass.weight == WeightSinkKind::Accumulator && !converted) convertAccumulator(weightAccumulator_, 0, v, stream);
  }

  // The row parameters of a full-vocabulary item's buffer.
  RowParams rowParams(const Item& item) const {
    RowParams p = params_;
    p.columns = problem_.vocab;
    p.ld = plan_.logitsLd;
    p.firstToken = item.firstToken;
    p.rows = item.tokens;
    return p;
  }

  // The hidden rows of a split pass's products: gathered into the split's rows when compacting.
  const char* splitHidden(const SplitPass& split) const {
    return plan_.compact ? workspace_ + split.rowsOffset : static_cast<const char*>(problem_.hidden);
  }
  int64_t splitHiddenLd() const { return plan_.compact ? problem_.hidden_dim : problem_.hidden_stride; }
  const char* weightRow(int64_t row) const {
    return static_cast<const char*>(problem_.weight) + std::size_t(row) * problem_.weight_stride * e_;
  }

  // Whether a split pass runs: planned, and both parts' products are the tile product (numerators need it).
  bool splitRuns(int64_t tokens, const SplitPass& split) const {
    if (split.columnsA == 0 || !gradients_) return false;
    const char* h = splitHidden(split);
    char* const gradWeight = static_cast<char*>(outputs_.grad_weight);
    return tileProductRuns(weightRow(0), h, splitHiddenLd(), tokens, split.columnsA, workspace_ + split.aOffset,
                           split.columnsA) &&
           tileProductRuns(weightRow(split.columnsA), h, splitHiddenLd(), tokens, problem_.vocab - split.columnsA,
                           gradWeight + split.bOffset, split.ldB);
  }

  // One chunk of numerators over `tokens` tokens in two parts (plan.h: SplitPass): products into both parts,
  // the rows' c from both; where a row overflowed, the pass is redone as the chunks of `pass` the usual way
  // (a SWITCH node: branch 1); else c ⊙ h, grad_hidden = c ⊙ (u'_A·W_A + u'_B·W_B) summed in fp32, then
  // grad_weight rows [columnsA, V) from part B and rows [0, columnsA) from part A, in that order, so each
  // borrowed buffer is read before the rows over it are written.
  void splitPass(int64_t tokens, const PassPlan& pass, cudaStream_t s) {
    const SplitPass& split = pass.split;
    const int64_t d = problem_.hidden_dim, va = split.columnsA, vb = problem_.vocab - va;
    const std::size_t pe = elementBytes(paramDType_);
    char* const rows = workspace_ + split.rowsOffset;
    char* const a = workspace_ + split.aOffset;
    char* const gradWeight = static_cast<char*>(outputs_.grad_weight);
    char* const b = gradWeight + split.bOffset;
    float* const staging = reinterpret_cast<float*>(gradWeight + split.stagingOffset);
    const char* const h = splitHidden(split);
    const int64_t ldh = splitHiddenLd();
    if (plan_.compact)
      launchGatherRows(problem_.dtype, problem_.hidden, problem_.hidden_stride, order_, 0, tokens, d, rows, s);
    const RowParams p = rowParams(Item{0, tokens, 0, problem_.vocab, true});
    launchTargetLogits(h, ldh, problem_.weight, problem_.weight_stride, d, p, lse_, scalars_, s);
    const RowPartials partialsA{a + std::size_t(tokens) * std::size_t(va) * e_, int64_t(partialStatisticsBytes(va))};
    const RowPartials partialsB{b + std::size_t(tokens) * std::size_t(split.ldB) * e_,
                                int64_t(partialStatisticsBytes(vb))};
    logitsGemm(weightRow(0), h, ldh, tokens, va, a, va, blasWorkspace_, kCublasWorkspaceBytes, s, nullptr, &partialsA,
               lse_);
    logitsGemm(weightRow(va), h, ldh, tokens, vb, b, split.ldB, blasWorkspace_, kCublasWorkspaceBytes, s, nullptr,
               &partialsB, lse_);
    RowParams partA = p;
    partA.columns = va;
    partA.ld = va;
    const NumeratorTail tail{b, split.ldB, partialsB};
    launchNumeratorRows(a, partA, partialsA, lse_, rowScale_, rowLoss_, outputs_.lse, userLoss_, scalars_, s, &tail);
    const Condition redo = newCondition(s, &scalars_->redo);
    launchRedoCondition(redo, scalars_, s);
    enqueueSwitch(s, redo, 2, state_.redoBody, [&](int redone, cudaStream_t body) {
      if (redone) {
        chunkedPass(tokens, pass, false, body);
        return;
      }
      // c ⊙ h: in place over the gathered rows, or from the caller's rows into the split's.
      launchScaleRows(h, ldh, rowScale_, nullptr, tokens, d, rows, d, body);
      if (outputs_.grad_hidden) {
        GemmShape shapeA{type_, CUDA_R_32F, false, false, d, tokens, va, problem_.weight_stride, va, d};
        gemm(state_.blas, shapeA, 1.0f, weightRow(0), a, 0.0f, staging, blasWorkspace_, kCublasWorkspaceBytes, body);
        GemmShape shapeB{type_, CUDA_R_32F, false, false, d, tokens, vb, problem_.weight_stride, split.ldB, d};
        gemm(state_.blas, shapeB, 1.0f, weightRow(va), b, 1.0f, staging, blasWorkspace_, kCublasWorkspaceBytes, body);
        launchScaleFloatRows(staging, d, rowScale_, plan_.compact ? &p : nullptr, tokens, d, outputs_.grad_hidden,
                             outputs_.grad_hidden_stride, body);
      }
      // cuBLASLt's products here: through the tile product's weight product, Gemma-2's split pass (D = 2304)
      // measured 0.2–0.5 ms slower on an H200 (NOTES.md v34).
      const cudaDataType_t out = cudaType(paramDType_);
      weightGemm(Item{0, tokens, va, vb, true}, b, split.ldB, rows, d,
                 gradWeight + std::size_t(va) * std::size_t(outputs_.grad_weight_stride) * pe, out,
                 outputs_.grad_weight_stride, 0.0f, body);
      weightGemm(Item{0, tokens, 0, va, true}, a, va, rows, d, gradWeight, out, outputs_.grad_weight_stride, 0.0f, body);
    });
  }

  // A numerators chunk's rows (numerators.h): loss, lse and c from the numerators, the target's numerator
  // replaced; where a row overflowed, the chunk redone the usual way under an IF node (its product and
  // statistics, the row pass writing dx, c = 1); then the c ⊙ h rows of grad_weight's product.
  void numeratorRows(const Item& item, void* buffer, const RowPartials& partials, cudaStream_t s) {
    const RowParams p = rowParams(item);
    launchNumeratorRows(buffer, p, partials, lse_, rowScale_, rowLoss_, outputs_.lse, userLoss_, scalars_, s);
    const Condition redo = newCondition(s, &scalars_->redo);
    launchRedoCondition(redo, scalars_, s);
    enqueueIf(s, redo, state_.redoBody, [&](cudaStream_t body) {
      forwardGemm(item, buffer, plan_.logitsLd, body, nullptr, &partials);
      launchRowLoss(problem_.dtype, buffer, p, true, &partials, rowLoss_, lse_, outputs_.lse, userLoss_, body);
      launchUnitScale(rowScale_, item.tokens, body);
    });
    launchScaleRows(hiddenRows(item), hiddenLd_, rowScale_, nullptr, item.tokens, problem_.hidden_dim, scaledHidden_,
                    problem_.hidden_dim, s);
  }

  // Low memory: grad_weight slice by slice, logits recomputed, dx from the lse of the full pass.
  void slicePass(cudaStream_t main) {
    const int64_t v = problem_.vocab;
    Pipeline sliced{state_, main, {logits_, logits_ + plan_.sliceBufferBytes}, {}, {}, {}};
    std::vector<Item> items;
    for (int64_t s = 0; s < plan_.slices; ++s) {
      const int64_t first = s * plan_.sliceVocab, columns = std::min(plan_.sliceVocab, v - first);
      for (const Item& item : tokenChunks(problem_.tokens, plan_.sliceChunkTokens, first, columns)) items.push_back(item);
    }
    sliced.forward = [&](const Item& item, void* buffer, cudaStream_t stream) {
      RowParams p = params_;
      p.columnBegin = item.firstColumn;
      p.columns = item.columns;
      p.ld = plan_.sliceVocab;
      p.firstToken = item.firstToken;
      p.rows = item.tokens;
      forwardGemm(item, buffer, plan_.sliceVocab, stream, &p);
    };
    sliced.backward = [&](const Item& item, void* buffer, cudaStream_t stream) {
      // The slice accumulator holds the slice's rows only: its row 0 is the slice's first column.
      const bool converted = weightGemms(plan_.sliceWeightSink, item, buffer, plan_.sliceVocab, item.firstColumn,
                                         weightAccumulator_, stream, hiddenRows(item), hiddenLd_);
      if (plan_.sliceWeightSink == WeightSinkKind::Accumulator && item.lastOfSlice && !converted)
        convertAccumulator(weightAccumulator_, item.firstColumn, item.columns, stream);
    };
    sliced.run(items);
  }

  // The lean plan over `tokens` tokens (plan.h: LeanPass), all of its scratch inside grad_weight.
  void leanPasses(int64_t tokens, bool gather, cudaStream_t stream) {
    const LeanPass pass = leanPass(plan_, tokens, gather);
    const int64_t v = problem_.vocab, d = problem_.hidden_dim, n = problem_.tokens;
    char* const borrowed = static_cast<char*>(outputs_.grad_weight);
    const char* const hidden = static_cast<const char*>(problem_.hidden);
    const std::size_t pe = elementBytes(paramDType_);
    // Pass A: loss, lse, grad_hidden, grad_bias over token chunks; the numerators schedule where the plan
    // allows it and the chunk's product is the tile product (as chunkedPass: no row pass over the logits).
    char* const rows = borrowed + pass.gatheredOffset;
    char* const logits = borrowed + pass.logitsOffset;
    void* const blasA = pass.blasBytes ? borrowed + pass.blasOffset : nullptr;
    const bool dx = outputs_.grad_hidden || outputs_.grad_bias;
    for (int64_t t = 0; t < tokens; t += pass.chunkTokens) {
      const int64_t count = std::min(pass.chunkTokens, tokens - t);
      const char* h = hidden + std::size_t(t) * problem_.hidden_stride * e_;
      int64_t ldh = problem_.hidden_stride;
      if (gather) {
        launchGatherRows(problem_.dtype, hidden, problem_.hidden_stride, order_, t, count, d, rows, stream);
        h = rows;
        ldh = d;
      }
      RowParams p = params_;
      p.columns = v;
      p.ld = plan_.logitsLd;
      p.firstToken = t;
      p.rows = count;
      p.rowTokens = gather ? order_ : nullptr;
      const RowPartials partials = rowStatistics(h, ldh, count, logits, dx);
      const bool numerators = plan_.numerators && partials.data;
      // The chunk's logits with their partials, and loss, lse (and dx where asked) by the row pass.
      const auto logitsAndRows = [&](cudaStream_t s) {
        logitsGemm(problem_.weight, h, ldh, count, v, logits, plan_.logitsLd, blasA, pass.blasBytes, s, nullptr,
                   partials.data ? &partials : nullptr, nullptr, t, &p);
        launchRowLoss(problem_.dtype, logits, p, dx, partials.data ? &partials : nullptr, rowLoss_, lse_, outputs_.lse,
                      userLoss_, s);
      };
      if (numerators) {
        launchTargetLogits(h, ldh, problem_.weight, problem_.weight_stride, d, p, lse_, scalars_, stream);
        logitsGemm(problem_.weight, h, ldh, count, v, logits, plan_.logitsLd, blasA, pass.blasBytes, stream, nullptr,
                   &partials, lse_, t, &p);
        launchNumeratorRows(logits, p, partials, lse_, rowScale_, rowLoss_, outputs_.lse, userLoss_, scalars_, stream);
        const Condition redo = newCondition(stream, &scalars_->redo);
        launchRedoCondition(redo, scalars_, stream);
        enqueueIf(stream, redo, state_.redoBody, [&](cudaStream_t body) {
          logitsAndRows(body);
          launchUnitScale(rowScale_, count, body);
        });
      } else {
        logitsAndRows(stream);
      }
      if (outputs_.grad_bias)
        launchColumnSum(problem_.dtype, logits, count, v, plan_.logitsLd, biasAccumulator_, t > 0, stream);
      if (!outputs_.grad_hidden) continue;
      char* out = gather ? rows : static_cast<char*>(outputs_.grad_hidden) + std::size_t(t) * outputs_.grad_hidden_stride * e_;
      const int64_t ldOut = gather ? d : outputs_.grad_hidden_stride;
      GemmShape backward{type_, type_, false, false, d, count, v, problem_.weight_stride, plan_.logitsLd, ldOut};
      gemm(state_.blas, backward, 1.0f, problem_.weight, logits, 0.0f, out, blasA, pass.blasBytes, stream);
      if (numerators)  // grad_hidden = c ⊙ (u'·W), scattered to the rows' tokens when gathered
        launchScaleRows(out, ldOut, rowScale_, gather ? &p : nullptr, count, d,
                        gather ? outputs_.grad_hidden : out, gather ? outputs_.grad_hidden_stride : ldOut, stream);
      else if (gather)
        launchScatterRows(problem_.dtype, rows, order_, t, count, d, outputs_.grad_hidden, outputs_.grad_hidden_stride,
                          stream);
    }
    // Pass B: grad_weight slice by slice, logits recomputed, dx from pass A's lse.
    char* const gathered = borrowed + pass.hcOffset;
    bool haveGathered = false;
    for (const LeanSlice& slice : pass.slices) {
      if (slice.gathered && !haveGathered) {
        launchGatherRows(problem_.dtype, hidden, problem_.hidden_stride, order_, 0, tokens, d, gathered, stream);
        haveGathered = true;
      }
      const int64_t count = slice.gathered ? tokens : n;
      const char* h = slice.gathered ? gathered : hidden;
      const int64_t ldh = slice.gathered ? d : problem_.hidden_stride;
      char* buffer = slice.inWorkspace ? residue_ : borrowed + slice.bufferOffset;
      void* blas = slice.blasBytes ? borrowed + slice.blasOffset : nullptr;
      RowParams p = params_;
      p.columnBegin = slice.first;
      p.columns = slice.columns;
      p.ld = slice.ld;
      p.firstToken = 0;
      p.rows = count;
      p.rowTokens = slice.gathered ? order_ : nullptr;
      logitsGemm(weightRow(slice.first), h, ldh, count, slice.columns, buffer, slice.ld, blas, slice.blasBytes,
                 stream, &p);
      GemmShape weight{type_, cudaType(paramDType_), false, true, d, slice.columns, count, ldh, slice.ld, d};
      gemm(state_.blas, weight, 1.0f, h, buffer, 0.0f, borrowed + std::size_t(slice.first) * std::size_t(d) * pe, blas,
           slice.blasBytes, stream);
      if (outputs_.grad_weight_accumulate) {
        GemmShape add{type_, CUDA_R_32F, false, true, d, slice.columns, count, ldh, slice.ld, d};
        gemm(state_.blas, add, 1.0f, h, buffer, 1.0f, outputs_.grad_weight_accumulate + slice.first * d, blas,
             slice.blasBytes, stream);
      }
    }
  }

  void finish(cudaStream_t main) {
    if (options_.reduction != Reduction::None) launchReduceLoss(rowLoss_, problem_.tokens, scalars_, outputs_.loss, main);
    if (gradients_ && outputs_.grad_bias)
      launchConvert(paramDType_, biasAccumulator_, 1, problem_.vocab, outputs_.grad_bias, problem_.vocab, nullptr, main);
  }

  // The hidden rows of an item: in place, or gathered when compacting.
  const char* hiddenRows(const Item& item) const {
    if (plan_.compact) return gathered_;
    return static_cast<const char*>(problem_.hidden) + std::size_t(item.firstToken) * problem_.hidden_stride * e_;
  }

  void forwardGemm(const Item& item, void* buffer, int64_t ld, cudaStream_t stream,
                   const RowParams* gradient = nullptr, const RowPartials* statistics = nullptr,
                   const float* numeratorShift = nullptr) {
    logitsGemm(weightRow(item.firstColumn), hiddenRows(item), hiddenLd_, item.tokens, item.columns, buffer, ld,
               blasWorkspace_, kCublasWorkspaceBytes, stream, gradient, statistics, numeratorShift, item.firstToken);
  }

  // Whether logitsGemm runs lmfuse's Hopper tile product: where the device has it, the operands are bf16
  // and meet TMA's alignment and the product is wide enough to fill the device (it matches or beats
  // cuBLASLt there, NOTES.md v21 and v23). The choice depends only on the arguments, so a repeated call
  // runs the same kernels.
  bool tileProductRuns(const void* weightRows, const void* hidden, int64_t hiddenLd, int64_t tokens, int64_t columns,
                       const void* out, int64_t ld) const {
    return state_.tileProduct && problem_.dtype == DType::BFloat16 && tmaAligned(weightRows) && tmaAligned(hidden) &&
           tmaAligned(out) && problem_.weight_stride % 8 == 0 && hiddenLd % 8 == 0 && ld % 8 == 0 &&
           tileGemmFill(state_.device, tokens, columns) >= state_.tileMinimumFill;
  }

  // The partial row statistics of a full-vocabulary logits buffer of `tokens` rows over `hidden`, after
  // the buffer's `tokens` logits rows (plan.h: statisticsBytes): written by the product where it is the tile
  // product and the row pass can use them (it writes dx, or no label smoothing needs Σ z); none (null
  // data) otherwise, and the row pass makes its own first pass over the logits.
  RowPartials rowStatistics(const void* hidden, int64_t hiddenLd, int64_t tokens, void* buffer,
                            bool writeGradient) const {
    if (plan_.statisticsBytes == 0 || (!writeGradient && options_.label_smoothing != 0.0) ||
        !tileProductRuns(problem_.weight, hidden, hiddenLd, tokens, problem_.vocab, buffer, plan_.logitsLd))
      return {};
    return {static_cast<const char*>(buffer) + std::size_t(tokens) * std::size_t(plan_.logitsLd) * e_,
            int64_t(plan_.statisticsBytes)};
  }

  // logits[tokens, columns] (leading dimension ld) = hidden rows · weight rowsᵀ; given the rows' `gradient`
  // parameters, dx of those logits from lse_ instead (launchSliceGradient's result). The tile product where
  // tileProductRuns, with dx written by its epilogue, and the row statistics too where asked
  // (rowStatistics: full-vocabulary products only), with numeratorShift the numerators in the logits' place
  // (numerators.h; only where the tile product runs; row r is token firstToken + r, or its compaction
  // order's: statisticsRows' rowTokens where given, else the call's); otherwise cuBLASLt, then the slice kernel.
  void logitsGemm(const void* weightRows, const void* hidden, int64_t hiddenLd, int64_t tokens, int64_t columns,
                  void* out, int64_t ld, void* blasWorkspace, std::size_t blasBytes, cudaStream_t stream,
                  const RowParams* gradient = nullptr, const RowPartials* statistics = nullptr,
                  const float* numeratorShift = nullptr, int64_t firstToken = 0,
                  const RowParams* statisticsRows = nullptr) {
    const int64_t d = problem_.hidden_dim;
    if (tileProductRuns(weightRows, hidden, hiddenLd, tokens, columns, out, ld)) {
      const TileGradient epilogue{gradient ? *gradient : RowParams{}, lse_};
      TileStatistics rows;
      if (statistics) {
        rows.rows = statisticsRows ? *statisticsRows : params_;
        rows.rows.columns = columns;
        rows.rows.rows = tokens;
        rows.rows.firstToken = firstToken;
        rows.partials = const_cast<char*>(statistics->data);
        rows.stride = statistics->stride;
        rows.shift = numeratorShift;
      }
      tileGemm(TileGemmShape{tokens, columns, d, hiddenLd, problem_.weight_stride, ld}, hidden, weightRows, out,
               stream, gradient ? &epilogue : nullptr, statistics ? &rows : nullptr);
      return;
    }
    if (numeratorShift) LMFUSE_FAIL("CUDA backend: the numerators epilogue needs the tile product");
    GemmShape shape{type_, type_, true, false, columns, tokens, d, problem_.weight_stride, hiddenLd, ld};
    gemm(state_.blas, shape, 1.0f, weightRows, hidden, 0.0f, out, blasWorkspace, blasBytes, stream);
    if (gradient) launchSliceGradient(problem_.dtype, out, *gradient, lse_, stream);
  }

  // grad_weight rows [firstColumn, firstColumn + item.columns) (+)= dxᵀ·h into `out` (ld outLd, outType), h the
  // item's `hidden` rows (ld hiddenLd).
  void weightGemm(const Item& item, const void* buffer, int64_t ld, const void* hidden, int64_t hiddenLd, void* out,
                  cudaDataType_t outType, int64_t outLd, float beta, cudaStream_t stream) {
    const int64_t d = problem_.hidden_dim;
    GemmShape shape{type_, outType, false, true, d, item.columns, item.tokens, hiddenLd, ld, outLd};
    gemm(state_.blas, shape, 1.0f, hidden, buffer, beta, out, blasWorkspace_, kCublasWorkspaceBytes, stream);
  }

  // Whether an item's grad_weight product dxᵀ·h (dx `buffer` with ld `ld`, h `hidden` with hiddenLd) into
  // `out` (ld outLd) runs as the tile product's weight product (tile_gemm.h: tileGemmWeight): where the device
  // has it, the operands are bf16, every pointer and leading dimension meets TMA's alignment and the product
  // fills the device's waves to kTileGemmWeightMinimumFill. It runs at cuBLASLt's speed into bf16 and fp32
  // (0.91–1.06x), adds to the fp32 accumulator in place without reading it into the SMs, and converts the
  // accumulator in the last chunk's epilogue (NOTES.md v34). Depends only on the arguments, like tileProductRuns.
  bool weightTileRuns(const Item& item, const void* buffer, int64_t ld, const void* hidden, int64_t hiddenLd,
                      const void* out, int64_t outLd) const {
    return state_.tileProduct && problem_.dtype == DType::BFloat16 && tmaAligned(buffer) && tmaAligned(hidden) &&
           tmaAligned(out) && ld % 8 == 0 && hiddenLd % 8 == 0 && outLd % 8 == 0 &&
           tileGemmFill(state_.device, item.columns, problem_.hidden_dim) >= state_.tileWeightMinimumFill;
  }

  // The item's grad_weight product (vocabulary rows from firstColumn) over `hidden` rows (ld hiddenLd) into
  // the sink; `accumulator` is the fp32 accumulator's row for firstColumn. Returns whether the product also
  // wrote grad_weight's rows from the accumulator (the item is the last of its tokens and the tile product's
  // epilogue converted): then no conversion pass follows.
  bool weightGemms(WeightSinkKind sink, const Item& item, const void* buffer, int64_t ld, int64_t firstColumn,
                   float* accumulator, cudaStream_t stream, const void* hidden, int64_t hiddenLd) {
    const int64_t d = problem_.hidden_dim;
    const bool first = item.firstToken == 0;  // the first chunk overwrites
    const float beta = first ? 0.0f : 1.0f;
    float* accumulate = outputs_.grad_weight_accumulate ? outputs_.grad_weight_accumulate + firstColumn * d : nullptr;
    char* gradWeight = static_cast<char*>(outputs_.grad_weight) +
                       std::size_t(firstColumn) * outputs_.grad_weight_stride * elementBytes(paramDType_);
    const TileGemmShape tile{item.columns, d, item.tokens, ld, hiddenLd, d};
    TileGemmShape toGradWeight = tile;
    toGradWeight.ldc = outputs_.grad_weight_stride;
    const bool bf16Out = paramDType_ == DType::BFloat16;
    // fp32 += the product: the copy engine's reduction where the tile product runs.
    auto add = [&](float* into) {
      if (weightTileRuns(item, buffer, ld, hidden, hiddenLd, into, d))
        tileGemmWeight(tile, buffer, hidden, into, TileSink::FloatAdd, nullptr, stream);
      else
        weightGemm(item, buffer, ld, hidden, hiddenLd, into, CUDA_R_32F, d, 1.0f, stream);
    };
    switch (sink) {
      case WeightSinkKind::None: return false;
      case WeightSinkKind::Output:
        if (first && bf16Out && weightTileRuns(item, buffer, ld, hidden, hiddenLd, gradWeight, toGradWeight.ldc))
          tileGemmWeight(toGradWeight, buffer, hidden, gradWeight, TileSink::Bf16, nullptr, stream);
        else
          weightGemm(item, buffer, ld, hidden, hiddenLd, gradWeight, cudaType(paramDType_), outputs_.grad_weight_stride,
                     beta, stream);
        if (accumulate) add(accumulate);
        return false;
      case WeightSinkKind::Accumulate:
        add(accumulate);
        return false;
      case WeightSinkKind::Accumulator:
        if (!weightTileRuns(item, buffer, ld, hidden, hiddenLd, accumulator, d)) {
          weightGemm(item, buffer, ld, hidden, hiddenLd, accumulator, CUDA_R_32F, d, beta, stream);
          return false;
        }
        // The last chunk: grad_weight = round(accumulator + its product), unless grad_weight_accumulate also
        // wants the fp32 sum (convertAccumulator adds it there).
        if (item.lastOfSlice && bf16Out && !accumulate &&
            weightTileRuns(item, buffer, ld, hidden, hiddenLd, gradWeight, toGradWeight.ldc)) {
          const TileAddend sum{accumulator, item.columns, d, d};
          tileGemmWeight(toGradWeight, buffer, hidden, gradWeight, first ? TileSink::Bf16 : TileSink::Bf16FromFloat,
                         first ? nullptr : &sum, stream);
          return true;
        }
        tileGemmWeight(tile, buffer, hidden, accumulator, first ? TileSink::Float : TileSink::FloatAdd, nullptr, stream);
        return false;
    }
    return false;
  }

  // grad_weight rows [first, first + rows) from the fp32 accumulator (which starts at row `first`), and
  // added to grad_weight_accumulate when given.
  void convertAccumulator(const float* accumulator, int64_t first, int64_t rows, cudaStream_t stream) {
    const int64_t d = problem_.hidden_dim;
    launchConvert(paramDType_, accumulator, rows, d,
                  static_cast<char*>(outputs_.grad_weight) +
                      std::size_t(first) * outputs_.grad_weight_stride * elementBytes(paramDType_),
                  outputs_.grad_weight_stride,
                  outputs_.grad_weight_accumulate ? outputs_.grad_weight_accumulate + first * d : nullptr, stream);
  }

  // The user's grad_hidden rows of an item's tokens (not compacting).
  char* gradHiddenRows(const Item& item) const {
    return static_cast<char*>(outputs_.grad_hidden) + std::size_t(item.firstToken) * outputs_.grad_hidden_stride * e_;
  }

  // rows[item.tokens, D] (ld) = dx·W over the full-vocabulary buffer (cuBLASLt: the tile product's own A·B
  // measured slower in the pipeline, NOTES.md v34).
  void hiddenGemm(const Item& item, const void* buffer, void* rows, int64_t ld, cudaStream_t stream) {
    const int64_t d = problem_.hidden_dim;
    GemmShape shape{type_, type_, false, false, d, item.tokens, problem_.vocab, problem_.weight_stride, plan_.logitsLd, ld};
    gemm(state_.blas, shape, 1.0f, problem_.weight, buffer, 0.0f, rows, blasWorkspace_, kCublasWorkspaceBytes, stream);
  }

  // The item's grad_hidden rows = dx·W, scattered back to their tokens when compacting.
  void gradHiddenGemm(const Item& item, const void* buffer, cudaStream_t stream) {
    const int64_t d = problem_.hidden_dim;
    char* rows = plan_.compact ? compactGradHidden_ : gradHiddenRows(item);
    const int64_t ld = plan_.compact ? d : outputs_.grad_hidden_stride;
    hiddenGemm(item, buffer, rows, ld, stream);
    if (plan_.compact)
      launchScatterRows(problem_.dtype, compactGradHidden_, order_, item.firstToken, item.tokens, d,
                        outputs_.grad_hidden, outputs_.grad_hidden_stride, stream);
  }

  DeviceState& state_;
  const Problem& problem_;
  const Options& options_;
  const Outputs& outputs_;
  const Plan& plan_;
  const bool gradients_;
  const std::size_t e_;
  const cudaDataType_t type_;
  const DType paramDType_;
  const int64_t hiddenLd_;
  float* const userLoss_;
  LabelErrorReport* const report_;
  Scalars* const scalars_;
  int32_t* const targets_;
  float* const rowLoss_;
  float* const lse_;
  float* const biasAccumulator_;
  float* const weightAccumulator_;
  int64_t* const order_;
  char* const gathered_;
  char* const compactGradHidden_;
  char* const residue_;
  float* const rowScale_;
  char* const workspace_;
  char* const scaledHidden_;  // c ⊙ h rows of a numerators chunk: the gathered rows themselves when compacting
  char* const logits_;
  void* const blasWorkspace_;
  RowParams params_;
};

}  // namespace

bool available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
}

std::size_t workspace_size(const Problem& problem, const Options& options, bool with_gradients) {
  return workspaceBytes(problem, options, with_gradients);
}

std::size_t workspace_size(const Problem& problem, const Options& options, const Outputs& outputs) {
  return makePlan(problem, options, &outputs, outputs.wants_gradients()).totalBytes;
}

void linear_cross_entropy(const Problem& problem, const Options& options, const Outputs& outputs,
                          Workspace workspace, const Context& context) {
  const Plan plan = makePlan(problem, options, &outputs, outputs.wants_gradients());
  validateForDevice(problem, options, outputs, workspace);

  DeviceState& state = deviceState();
  std::lock_guard<std::mutex> lock(state.mutex);
  Schedule schedule(state, problem, options, outputs, workspace, plan);
  cudaStream_t callerStream = static_cast<cudaStream_t>(context.stream);
  // Compaction's SWITCH and the numerators' redo need graph conditionals (or host decisions: LMFUSE_CUDA_EAGER).
  if (plan.compact || plan.numerators)
    recordAsGraph(callerStream, state.capture, state.recorded,
                  callKey(problem, options, outputs, workspace, state.tileMinimumFill, state.tileWeightMinimumFill),
                  [&](cudaStream_t main) { schedule.run(main); });
  else
    schedule.run(callerStream);
}

void scale_grads(const Problem& problem, const Outputs& outputs, const float* upstream, const Context& context) {
  cudaStream_t stream = static_cast<cudaStream_t>(context.stream);
  const DType params = param_grad_dtype(problem.dtype, outputs.param_grads);
  if (outputs.grad_hidden)
    launchScale(problem.dtype, outputs.grad_hidden, problem.tokens, problem.hidden_dim, outputs.grad_hidden_stride,
                upstream, stream);
  if (outputs.grad_weight)
    launchScale(params, outputs.grad_weight, problem.vocab, problem.hidden_dim, outputs.grad_weight_stride, upstream,
                stream);
  if (outputs.grad_bias) launchScale(params, outputs.grad_bias, 1, problem.vocab, problem.vocab, upstream, stream);
}

void check(Workspace workspace, const Context& context) {
  cudaStream_t stream = static_cast<cudaStream_t>(context.stream);
  // Reading the report waits for the stream, which a stream being captured into a CUDA graph must not do
  // (the capture would be invalidated): said before anything is queued.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  LMFUSE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    LMFUSE_FAIL("the labels cannot be checked on a stream being captured into a CUDA graph (the check waits for "
                "the stream); leave LMFUSE_CHECK_LABELS unset for captured calls");
  LabelErrorReport report{};
  LMFUSE_CUDA_CHECK(cudaMemcpyAsync(&report, workspace.data, sizeof report, cudaMemcpyDeviceToHost, stream));
  LMFUSE_CUDA_CHECK(cudaStreamSynchronize(stream));
  throw_if_reported("lmfuse::check", report);
}

}  // namespace lmfuse::detail::cuda
