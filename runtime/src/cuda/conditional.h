// CUDA graph conditional nodes for work whose size is known only on the device (compaction): the call
// is recorded into a graph (the caller's, when its stream is being captured; otherwise one of our own,
// launched on the caller's stream at the end), and each skippable piece of work becomes the body of an
// IF node whose condition a kernel earlier in the same graph sets. No host synchronisation.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <vector>

namespace lmfuse::detail::cuda {

/// The graph `stream` is being captured into (the stream must be capturing).
cudaGraph_t capturingGraph(cudaStream_t stream);

/// A new condition of `graph`, 0 at every launch until a kernel sets it.
cudaGraphConditionalHandle newCondition(cudaGraph_t graph);

/// Appends to `stream`'s capture an IF node on `condition` whose body is what `body` enqueues on
/// `bodyStream` (captured into the node's body graph); later work on `stream` depends on the node.
void enqueueIf(cudaStream_t stream, cudaGraphConditionalHandle condition, cudaStream_t bodyStream,
               const std::function<void(cudaStream_t)>& body);

/// Appends a SWITCH node on `condition` with `parts` bodies; body j is what `body(j, bodyStream)`
/// enqueues. A condition of `parts` or more runs no body.
void enqueueSwitch(cudaStream_t stream, cudaGraphConditionalHandle condition, int parts, cudaStream_t bodyStream,
                   const std::function<void(int, cudaStream_t)>& body);

/// The graphs recorded for the last few distinct eager calls, most recent first, each reused while a call
/// repeats its arguments (key): training loops repeat one call with the same buffers, or alternate
/// between a few when the allocator hands buffers back in turn, and recording + instantiation costs
/// host time (about 1–2.5 ms at the Llama-3 head with 64 compaction branches).
struct RecordedGraphs {
  static constexpr std::size_t kKept = 4;
  struct Entry {
    std::vector<unsigned char> key;
    cudaGraphExec_t exec = nullptr;
  };
  std::vector<Entry> entries;
};

/// Records everything `work` enqueues on `stream`: directly when the caller is capturing `stream`,
/// else into a graph captured on `ownStream` (or a kept one whose key matches) launched on `stream`.
void recordAsGraph(cudaStream_t stream, cudaStream_t ownStream, RecordedGraphs& cache,
                   const std::vector<unsigned char>& key, const std::function<void(cudaStream_t)>& work);

}  // namespace lmfuse::detail::cuda
