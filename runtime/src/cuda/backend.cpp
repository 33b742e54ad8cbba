// The CUDA backend's entry points (lmfuse::detail::cuda in backend.h).
//
// Contract: the call enqueues everything on context.stream (plus one side stream joined back through
// events), allocates nothing, never synchronises and never copies to the host, so it can be captured in
// a CUDA graph. Tokens go through in chunks: per chunk, cuBLASLt writes the logits into the logits
// buffer; the row kernel computes loss and lse and overwrites the buffer in place with dx; then cuBLASLt
// accumulates grad_weight in fp32 and computes the chunk's grad_hidden rows. Tokens that fit one chunk
// write grad_weight directly in its dtype (no accumulator, no conversion): when all N tokens fit, the plan
// has no accumulator at all (plan.h: singleChunk); otherwise a count that fits one chunk may use the
// accumulator's region for its logits (plan.h: oneChunkTokens). Without room for the
// fp32 [V, D] accumulator (MemoryMode::LowMemory), a first pass computes loss, lse, grad_hidden and
// grad_bias, and a second pass over vocabulary slices recomputes the logits of each slice to accumulate
// grad_weight. Forward-only calls without compaction overlap the row kernel with the next chunk's GEMM on
// a side stream.
// Compaction (Options::compact, the default): a device-side stable order of the tokens with a label, and
// one SWITCH node of a CUDA graph whose branch r runs the whole pass above over the first
// min(N, (r + 1)·granule) gathered tokens, in balanced chunks; a kernel picks the branch from the
// device-side count, so the GEMMs cost what the labelled tokens need (plus under one granule of padding)
// and the host never learns the count. An eager call is recorded as a graph and launched (the graphs of
// the last four distinct argument sets are kept); a call under the caller's capture adds its nodes to the
// caller's graph.
// Results are bitwise reproducible: fixed chunking per token count, fixed cuBLASLt algorithms, no float
// atomics.
#include <cuda_runtime.h>

#include <climits>
#include <cstring>
#include <type_traits>
#include <utility>
#include <functional>
#include <string>
#include <vector>

#include "backend.h"
#include "check.h"
#include "compaction.h"
#include "conditional.h"
#include "device_state.h"
#include "error_report.h"
#include "gemm.h"
#include "kernels.h"
#include "plan.h"

namespace lmfuse::detail::cuda {
namespace {

char* at(Workspace workspace, const Region& region) { return static_cast<char*>(workspace.data) + region.offset; }

cudaDataType_t cudaType(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float16: return CUDA_R_16F;
    default: return CUDA_R_16BF;
  }
}

[[noreturn]] void invalid(const std::string& message) { throw Error("lmfuse (CUDA): " + message); }

void requireAligned(const void* pointer, int64_t stride, std::size_t elementSize, const char* name) {
  if (!pointer) return;
  if (reinterpret_cast<uintptr_t>(pointer) % 16 != 0)
    invalid(std::string(name) + " must be 16-byte aligned for cuBLASLt");
  if ((std::size_t(stride) * elementSize) % 16 != 0)
    invalid(std::string(name) + " has a row stride of " + std::to_string(stride) + " elements (" +
            std::to_string(std::size_t(stride) * elementSize) +
            " bytes); the CUDA backend needs rows on 16-byte boundaries (a multiple of " +
            std::to_string(16 / elementSize) + " elements)");
}

void requireDevice(const void* pointer, const char* name) {
  if (!pointer) return;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    (void)cudaGetLastError();
    invalid(std::string(name) + " is not a pointer the CUDA runtime knows");
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    invalid(std::string(name) + " is host memory, but context.device is Cuda: pass device memory");
}

struct Strides {
  int64_t hidden, weight, gradHidden, gradWeight;
};

Strides stridesOf(const Problem& problem, const Outputs& outputs) {
  const int64_t d = problem.hidden_dim;
  return {problem.hidden_stride ? problem.hidden_stride : d, problem.weight_stride ? problem.weight_stride : d,
          outputs.grad_hidden_stride ? outputs.grad_hidden_stride : d,
          outputs.grad_weight_stride ? outputs.grad_weight_stride : d};
}

void validateForDevice(const Problem& problem, const Options& options, const Outputs& outputs,
                       Workspace workspace, const Plan& plan) {
  const std::size_t e = elementBytes(problem.dtype);
  const Strides strides = stridesOf(problem, outputs);
  requireAligned(problem.hidden, strides.hidden, e, "problem.hidden");
  requireAligned(problem.weight, strides.weight, e, "problem.weight");
  requireAligned(outputs.grad_hidden, strides.gradHidden, e, "outputs.grad_hidden");
  requireAligned(outputs.grad_weight, strides.gradWeight, e, "outputs.grad_weight");
  requireAligned(outputs.grad_weight_accumulate, problem.hidden_dim, 4, "outputs.grad_weight_accumulate");
  if (reinterpret_cast<uintptr_t>(workspace.data) % 256 != 0)
    invalid("workspace.data must be 256-byte aligned (cudaMalloc's alignment)");
  if (workspace.bytes < plan.totalBytes)
    invalid("workspace too small: workspace.bytes is " + std::to_string(workspace.bytes) + ", this call needs " +
            std::to_string(plan.totalBytes) + " (query workspace_size())");
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

// Runs items through the logits buffers. One buffer (buffers[1] null): the steps of each item in order
// on `main`. Two buffers: forward GEMM on `main`, row kernel on the side stream, backward GEMMs on `main`,
// so the side stream's kernel for item k+1 overlaps the GEMMs of k.
struct Pipeline {
  using Step = std::function<void(const Item&, void*, cudaStream_t)>;
  DeviceState& state;
  cudaStream_t main;
  char* buffers[2];
  Step forward;   // main stream
  Step rows;      // side stream (main with one buffer)
  Step backward;  // main stream; empty: forward only

  void issueFront(const std::vector<Item>& items, std::size_t k) {
    void* buffer = buffers[k % 2];
    forward(items[k], buffer, main);
    LMFUSE_CUDA_CHECK(cudaEventRecord(state.forked, main));
    LMFUSE_CUDA_CHECK(cudaStreamWaitEvent(state.side, state.forked, 0));
    rows(items[k], buffer, state.side);
    LMFUSE_CUDA_CHECK(cudaEventRecord(state.rowsDone[k % 2], state.side));
  }

  void run(const std::vector<Item>& items) {
    if (items.empty()) return;
    if (!buffers[1]) {
      for (const Item& item : items) {
        forward(item, buffers[0], main);
        rows(item, buffers[0], main);
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

std::vector<Item> tokenChunks(int64_t tokens, int64_t chunk, int64_t firstColumn, int64_t columns) {
  std::vector<Item> items;
  for (int64_t t = 0; t < tokens; t += chunk)
    items.push_back({t, std::min(chunk, tokens - t), firstColumn, columns, t + chunk >= tokens});
  return items;
}

// Everything the recorded graph of a call depends on: sizes, options, every pointer (as bytes).
std::vector<unsigned char> callKey(const Problem& problem, const Options& options, const Outputs& outputs,
                                   Workspace workspace) {
  static_assert(std::is_trivially_copyable<Problem>::value && std::is_trivially_copyable<Options>::value &&
                    std::is_trivially_copyable<Outputs>::value && std::is_trivially_copyable<Workspace>::value,
                "the key copies the argument structs");
  std::vector<unsigned char> key(sizeof problem + sizeof options + sizeof outputs + sizeof workspace, 0);
  unsigned char* at = key.data();
  for (auto [data, size] : {std::pair<const void*, std::size_t>{&problem, sizeof problem}, {&options, sizeof options},
                            {&outputs, sizeof outputs}, {&workspace, sizeof workspace}}) {
    std::memcpy(at, data, size);
    at += size;
  }
  return key;
}

// Enqueues the whole call on `main` (the caller's stream, or the stream recording it as a graph when
// compacting) and the side stream.
void issue(DeviceState& state, const Problem& problem, const Options& options, const Outputs& outputs,
           Workspace workspace, const Plan& plan, cudaStream_t main) {
  const bool gradients = outputs.wants_gradients();
  const int64_t n = problem.tokens, d = problem.hidden_dim, v = problem.vocab;
  const std::size_t e = elementBytes(problem.dtype);
  const Strides strides = stridesOf(problem, outputs);
  const cudaDataType_t type = cudaType(problem.dtype);
  const char* hidden = static_cast<const char*>(problem.hidden);
  const char* weight = static_cast<const char*>(problem.weight);

  auto* report = reinterpret_cast<LabelErrorReport*>(at(workspace, plan.report));
  auto* scalars = reinterpret_cast<Scalars*>(at(workspace, plan.scalars));
  auto* targets = reinterpret_cast<int32_t*>(at(workspace, plan.targets));
  auto* rowLoss = reinterpret_cast<float*>(at(workspace, plan.rowLoss));
  auto* lse = reinterpret_cast<float*>(at(workspace, plan.lse));
  auto* biasAccumulator = reinterpret_cast<float*>(at(workspace, plan.biasAccumulator));
  auto* weightAccumulator = reinterpret_cast<float*>(at(workspace, plan.weightAccumulator));
  auto* order = reinterpret_cast<int64_t*>(at(workspace, plan.order));
  char* gathered = at(workspace, plan.gathered);
  char* compactGradHidden = at(workspace, plan.compactGradHidden);
  void* blasWorkspace = at(workspace, plan.cublas);
  const bool wantsBias = gradients && outputs.grad_bias;
  const bool wantsWeight = gradients && (outputs.grad_weight || outputs.grad_weight_accumulate);
  float* userLoss = options.reduction == Reduction::None ? outputs.loss : nullptr;

  launchPrepare(problem, options, targets, scalars, report, main);

  // Compaction: the order of the tokens with a label, outputs of the others, and the branch to run.
  cudaGraphConditionalHandle branch{};
  if (plan.compact) {
    launchCompact(targets, n, order, scalars, rowLoss, lse, outputs.lse, userLoss, main);
    if (gradients && outputs.grad_hidden)
      launchZeroIgnoredRows(problem.dtype, targets, n, d, outputs.grad_hidden, strides.gradHidden, main);
    branch = newCondition(capturingGraph(main));
    launchSelectBranch(branch, plan.compactGranule, plan.compactBranches, scalars, main);
  }

  RowParams params;
  params.vocab = v;
  params.smoothing = float(options.label_smoothing);
  params.softcap = float(options.softcap);
  params.logitScale = float(options.logit_scale);
  params.zLoss = float(options.z_loss);
  params.bias = problem.bias;
  params.targets = targets;
  params.scalars = scalars;
  params.tokenGradScale = options.reduction == Reduction::None ? options.grad_scale : nullptr;
  params.rowTokens = plan.compact ? order : nullptr;

  // The hidden rows of an item: in place, or gathered when compacting.
  auto hiddenRows = [&](const Item& item) -> const char* {
    if (!plan.compact) return hidden + std::size_t(item.firstToken) * strides.hidden * e;
    return gathered;
  };
  const int64_t hiddenLd = plan.compact ? d : strides.hidden;
  auto forwardGemm = [&](const Item& item, void* buffer, int64_t ld, cudaStream_t stream) {
    GemmShape shape{type, type, true, false, item.columns, item.tokens, d, strides.weight, hiddenLd, ld};
    gemm(state.blas, shape, 1.0f, weight + std::size_t(item.firstColumn) * strides.weight * e, hiddenRows(item), 0.0f,
         buffer, blasWorkspace, kCublasWorkspaceBytes, stream);
  };
  // grad_weight rows of the item's columns (+)= dxᵀ·h, into an fp32 accumulator or, with outType = the
  // dtype, straight into grad_weight.
  auto weightGemm = [&](const Item& item, const void* buffer, int64_t ld, void* out, cudaDataType_t outType,
                        int64_t outLd, float beta, cudaStream_t stream) {
    GemmShape shape{type, outType, false, true, d, item.columns, item.tokens, hiddenLd, ld, outLd};
    gemm(state.blas, shape, 1.0f, hiddenRows(item), buffer, beta, out, blasWorkspace, kCublasWorkspaceBytes, stream);
  };

  // Pass over token chunks of the full vocabulary: loss, lse, dx, grad_hidden, grad_bias (and grad_weight
  // when its fp32 accumulator fits), over the first `tokens` tokens (gathered ones when compacting).
  char* logits = at(workspace, plan.logits);
  const bool weightInFullPass = wantsWeight && !plan.lowMemory;
  // One chunk needs no fp32 accumulator when grad_weight is only overwritten: its GEMM writes the dtype.
  const bool directWeightWhenOneChunk =
      weightInFullPass && plan.ownWeightAccumulator && !outputs.grad_weight_accumulate;
  auto fullPass = [&](int64_t tokens, cudaStream_t stream) {
    int64_t chunk = plan.chunkTokens, chunks = plan.chunks;
    char* buffers[2] = {logits, plan.logitsBuffers == 2 ? logits + plan.logitsBufferBytes : nullptr};
    if (plan.singleChunk) {
      chunk = tokens;
      chunks = 1;
    } else if (directWeightWhenOneChunk && tokens <= plan.oneChunkTokens) {
      // One chunk over the accumulator's region and the logits buffer (plan.h): no accumulator needed.
      chunk = tokens;
      chunks = 1;
      buffers[0] = reinterpret_cast<char*>(weightAccumulator);
      buffers[1] = nullptr;
    } else if (plan.compact) {
      balanceChunks(tokens, plan.chunkTokens, chunk, chunks);
    }
    // One chunk writes grad_weight in its dtype (and, for a single-chunk plan, a second GEMM adds the same
    // product to grad_weight_accumulate when that is given too).
    const bool directWeight =
        weightInFullPass && outputs.grad_weight && (plan.singleChunk || (directWeightWhenOneChunk && chunks == 1));
    Pipeline full{state, stream, {buffers[0], buffers[1]}, {}, {}, {}};
    full.forward = [&](const Item& item, void* buffer, cudaStream_t s) {
      if (plan.compact)
        launchGatherRows(problem.dtype, hidden, strides.hidden, order, item.firstToken, item.tokens, d, gathered, s);
      forwardGemm(item, buffer, plan.logitsLd, s);
    };
    full.rows = [&](const Item& item, void* buffer, cudaStream_t s) {
      RowParams p = params;
      p.columns = v;
      p.ld = plan.logitsLd;
      p.firstToken = item.firstToken;
      p.rows = item.tokens;
      launchRowLoss(problem.dtype, buffer, p, gradients, rowLoss, lse, outputs.lse, userLoss, s);
      if (wantsBias)
        launchColumnSum(problem.dtype, buffer, item.tokens, v, plan.logitsLd, biasAccumulator, item.firstToken > 0, s);
    };
    if (gradients && (outputs.grad_hidden || weightInFullPass)) {
      full.backward = [&](const Item& item, void* buffer, cudaStream_t s) {
        if (directWeight) {
          weightGemm(item, buffer, plan.logitsLd, outputs.grad_weight, type, strides.gradWeight, 0.0f, s);
          if (outputs.grad_weight_accumulate)
            weightGemm(item, buffer, plan.logitsLd, outputs.grad_weight_accumulate, CUDA_R_32F, d, 1.0f, s);
        } else if (weightInFullPass && plan.ownWeightAccumulator)
          weightGemm(item, buffer, plan.logitsLd, weightAccumulator, CUDA_R_32F, d, item.firstToken == 0 ? 0.0f : 1.0f, s);
        else if (weightInFullPass)
          weightGemm(item, buffer, plan.logitsLd, outputs.grad_weight_accumulate, CUDA_R_32F, d, 1.0f, s);
        if (outputs.grad_hidden) {
          char* rows = plan.compact ? compactGradHidden
                                    : static_cast<char*>(outputs.grad_hidden) +
                                          std::size_t(item.firstToken) * strides.gradHidden * e;
          const int64_t ld = plan.compact ? d : strides.gradHidden;
          GemmShape shape{type, type, false, false, d, item.tokens, v, strides.weight, plan.logitsLd, ld};
          gemm(state.blas, shape, 1.0f, weight, buffer, 0.0f, rows, blasWorkspace, kCublasWorkspaceBytes, s);
          if (plan.compact)
            launchScatterRows(problem.dtype, compactGradHidden, order, item.firstToken, item.tokens, d,
                              outputs.grad_hidden, strides.gradHidden, s);
        }
      };
    }
    full.run(tokenChunks(tokens, chunk, 0, v));
    if (weightInFullPass && plan.ownWeightAccumulator && !directWeight)
      launchConvert(problem.dtype, weightAccumulator, v, d, outputs.grad_weight, strides.gradWeight,
                    outputs.grad_weight_accumulate, stream);
  };
  if (plan.compact)
    enqueueSwitch(main, branch, int(plan.compactBranches), state.body, [&](int r, cudaStream_t body) {
      fullPass(std::min(n, (r + 1) * plan.compactGranule), body);
    });
  else
    fullPass(n, main);

  // Low memory: grad_weight slice by slice, logits recomputed, dx from the lse of the first pass.
  if (wantsWeight && plan.lowMemory) {
    Pipeline sliced{state, main, {logits, logits + plan.sliceBufferBytes}, {}, {}, {}};
    std::vector<Item> items;
    for (int64_t s = 0; s < plan.slices; ++s) {
      const int64_t first = s * plan.sliceVocab, columns = std::min(plan.sliceVocab, v - first);
      for (const Item& item : tokenChunks(n, plan.sliceChunkTokens, first, columns)) items.push_back(item);
    }
    sliced.forward = [&](const Item& item, void* buffer, cudaStream_t stream) {
      forwardGemm(item, buffer, plan.sliceVocab, stream);
    };
    sliced.rows = [&](const Item& item, void* buffer, cudaStream_t stream) {
      RowParams p = params;
      p.columnBegin = item.firstColumn;
      p.columns = item.columns;
      p.ld = plan.sliceVocab;
      p.firstToken = item.firstToken;
      p.rows = item.tokens;
      launchSliceGradient(problem.dtype, buffer, p, lse, stream);
    };
    sliced.backward = [&](const Item& item, void* buffer, cudaStream_t stream) {
      if (plan.ownWeightAccumulator) {
        weightGemm(item, buffer, plan.sliceVocab, weightAccumulator, CUDA_R_32F, d, item.firstToken == 0 ? 0.0f : 1.0f,
                   stream);
        if (item.lastOfSlice)
          launchConvert(problem.dtype, weightAccumulator, item.columns, d,
                        static_cast<char*>(outputs.grad_weight) + std::size_t(item.firstColumn) * strides.gradWeight * e,
                        strides.gradWeight,
                        outputs.grad_weight_accumulate ? outputs.grad_weight_accumulate + item.firstColumn * d : nullptr,
                        stream);
      } else {
        weightGemm(item, buffer, plan.sliceVocab, outputs.grad_weight_accumulate + item.firstColumn * d, CUDA_R_32F, d,
                   1.0f, stream);
      }
    };
    sliced.run(items);
  }

  if (options.reduction != Reduction::None) launchReduceLoss(rowLoss, n, scalars, outputs.loss, main);
  if (wantsBias) launchConvert(problem.dtype, biasAccumulator, 1, v, outputs.grad_bias, v, nullptr, main);
}

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

void linear_cross_entropy(const Problem& problem, const Options& options, const Outputs& outputs,
                          Workspace workspace, const Context& context) {
  const bool gradients = outputs.wants_gradients();
  const Plan plan = makePlan(problem, options, &outputs, gradients);
  validateForDevice(problem, options, outputs, workspace, plan);

  DeviceState& state = deviceState();
  std::lock_guard<std::mutex> lock(state.mutex);
  cudaStream_t callerStream = static_cast<cudaStream_t>(context.stream);
  if (plan.compact)
    recordAsGraph(callerStream, state.capture, state.recorded, callKey(problem, options, outputs, workspace),
                  [&](cudaStream_t main) { issue(state, problem, options, outputs, workspace, plan, main); });
  else
    issue(state, problem, options, outputs, workspace, plan, callerStream);
}

void scale_grads(const Problem& problem, const Outputs& outputs, const float* upstream, const Context& context) {
  cudaStream_t stream = static_cast<cudaStream_t>(context.stream);
  const Strides strides = stridesOf(problem, outputs);
  if (outputs.grad_hidden)
    launchScale(problem.dtype, outputs.grad_hidden, problem.tokens, problem.hidden_dim, strides.gradHidden, upstream,
                stream);
  if (outputs.grad_weight)
    launchScale(problem.dtype, outputs.grad_weight, problem.vocab, problem.hidden_dim, strides.gradWeight, upstream,
                stream);
  if (outputs.grad_bias) launchScale(problem.dtype, outputs.grad_bias, 1, problem.vocab, problem.vocab, upstream, stream);
}

void check(Workspace workspace, const Context& context) {
  cudaStream_t stream = static_cast<cudaStream_t>(context.stream);
  LabelErrorReport report{};
  LMFUSE_CUDA_CHECK(cudaMemcpyAsync(&report, workspace.data, sizeof report, cudaMemcpyDeviceToHost, stream));
  LMFUSE_CUDA_CHECK(cudaStreamSynchronize(stream));
  throw_if_reported("lmfuse::check", report);
}

}  // namespace lmfuse::detail::cuda
