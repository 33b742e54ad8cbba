// CUDA graph conditional nodes for work whose size is known only on the device (compaction): the call
// is recorded into a graph (the caller's, when its stream is being captured; otherwise one of our own,
// launched on the caller's stream at the end), and each skippable piece of work becomes the body of an
// IF or SWITCH node whose condition a kernel earlier in the same graph sets. No host synchronisation.
// Eager conditionals (LMFUSE_CUDA_EAGER set, for a call whose stream is not being captured): nothing is
// recorded; each choice is a device word (the one the deciding kernel sets the graph condition from), which
// the host reads back (one synchronisation of the caller's stream per choice, with the device state's lock
// held) before it enqueues only the chosen body, on the caller's stream. The same kernels run in the same
// order on the same data, so the results are bitwise those of the graph; what changes is that profilers and
// sanitizers that do not follow a conditional node's bodies (Nsight Compute, compute-sanitizer's racecheck
// and synccheck) see every kernel. A debugging mode: it waits for the device at every choice.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <vector>

namespace lmfuse::detail::cuda {

/// True when LMFUSE_CUDA_EAGER is set to anything but "" or "0" (read at each call).
bool eagerConditionals();

/// A choice the device makes: its kernel sets `handle` (a graph condition, 0 at every launch until set)
/// when `graph` from the device word `value`, which an eager choice reads back instead.
struct Condition {
  cudaGraphConditionalHandle handle = 0;
  bool graph = false;
  const unsigned* value = nullptr;
};

/// A condition of the graph `stream` is being captured into, or, with eager conditionals, an eager one
/// where it is not captured (without them that is an error: the call would synchronise). `value`: the
/// device word the choice is made from.
Condition newCondition(cudaStream_t stream, const unsigned* value);

/// Appends an IF node on `condition` to `stream`'s capture, whose body is what `body` enqueues on
/// `bodyStream` (captured into the node's body graph); later work on `stream` depends on the node. Eager:
/// enqueues `body` on `stream` itself when the value is not 0.
void enqueueIf(cudaStream_t stream, const Condition& condition, cudaStream_t bodyStream,
               const std::function<void(cudaStream_t)>& body);

/// As enqueueIf, a SWITCH node with `parts` bodies; body j is what `body(j, bodyStream)` enqueues. A value
/// of `parts` or more runs no body.
void enqueueSwitch(cudaStream_t stream, const Condition& condition, int parts, cudaStream_t bodyStream,
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
/// else into a graph captured on `ownStream` (or a kept one whose key matches) launched on `stream`; with
/// eager conditionals, runs `work` on the uncaptured `stream` and records nothing.
void recordAsGraph(cudaStream_t stream, cudaStream_t ownStream, RecordedGraphs& cache,
                   const std::vector<unsigned char>& key, const std::function<void(cudaStream_t)>& work);

}  // namespace lmfuse::detail::cuda
