// CUDA graph conditional nodes (see conditional.h).
#include "conditional.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "check.h"

namespace lmfuse::detail::cuda {

bool eagerConditionals() {
  const char* value = std::getenv("LMFUSE_CUDA_EAGER");
  return value && *value && std::strcmp(value, "0") != 0;
}

Condition newCondition(cudaStream_t stream, const unsigned* value) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  LMFUSE_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph, nullptr, nullptr, nullptr));
  Condition condition;
  condition.value = value;
  if (status != cudaStreamCaptureStatusActive) {
    if (!eagerConditionals())
      LMFUSE_FAIL("CUDA backend: a conditional on a stream that is not being captured (only LMFUSE_CUDA_EAGER "
                  "decides on the host)");
    return condition;
  }
  LMFUSE_CUDA_CHECK(cudaGraphConditionalHandleCreate(&condition.handle, graph, 0, cudaGraphCondAssignDefault));
  condition.graph = true;
  return condition;
}

namespace {

void enqueueConditional(cudaStream_t stream, const Condition& condition, cudaGraphConditionalNodeType type,
                        int parts, cudaStream_t bodyStream, const std::function<void(int, cudaStream_t)>& body) {
  if (!condition.graph) {
    unsigned chosen = 0;
    LMFUSE_CUDA_CHECK(cudaMemcpyAsync(&chosen, condition.value, sizeof chosen, cudaMemcpyDeviceToHost, stream));
    LMFUSE_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (type == cudaGraphCondTypeIf ? chosen != 0 : chosen < unsigned(parts))
      body(type == cudaGraphCondTypeIf ? 0 : int(chosen), stream);
    return;
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* dependencies = nullptr;
  std::size_t count = 0;
  LMFUSE_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph, &dependencies, nullptr, &count));
  if (status != cudaStreamCaptureStatusActive)
    LMFUSE_FAIL("CUDA backend: a graph condition enqueued on a stream that is not being captured");
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = condition.handle;
  params.conditional.type = type;
  params.conditional.size = unsigned(parts);
  cudaGraphNode_t node;
  LMFUSE_CUDA_CHECK(cudaGraphAddNode(&node, graph, dependencies, nullptr, count, &params));
  LMFUSE_CUDA_CHECK(cudaStreamUpdateCaptureDependencies(stream, &node, nullptr, 1, cudaStreamSetCaptureDependencies));
  // The driver fills phGraph_out with the body graphs; a tool that intercepts graph building may not.
  if (!params.conditional.phGraph_out) LMFUSE_FAIL("CUDA backend: the conditional node came back without body graphs");
  for (int part = 0; part < parts; ++part) {
    cudaGraph_t bodyGraph = params.conditional.phGraph_out[part];
    if (!bodyGraph) LMFUSE_FAIL("CUDA backend: the conditional node came back without body graph " << part);
    LMFUSE_CUDA_CHECK(cudaStreamBeginCaptureToGraph(bodyStream, bodyGraph, nullptr, nullptr, 0,
                                                    cudaStreamCaptureModeRelaxed));
    try {
      body(part, bodyStream);
    } catch (...) {
      cudaGraph_t ignored;
      (void)cudaStreamEndCapture(bodyStream, &ignored);
      throw;
    }
    LMFUSE_CUDA_CHECK(cudaStreamEndCapture(bodyStream, &bodyGraph));
  }
}

}  // namespace

void enqueueIf(cudaStream_t stream, const Condition& condition, cudaStream_t bodyStream,
               const std::function<void(cudaStream_t)>& body) {
  enqueueConditional(stream, condition, cudaGraphCondTypeIf, 1, bodyStream,
                     [&](int, cudaStream_t s) { body(s); });
}

void enqueueSwitch(cudaStream_t stream, const Condition& condition, int parts, cudaStream_t bodyStream,
                   const std::function<void(int, cudaStream_t)>& body) {
  enqueueConditional(stream, condition, cudaGraphCondTypeSwitch, parts, bodyStream, body);
}

void recordAsGraph(cudaStream_t stream, cudaStream_t ownStream, RecordedGraphs& cache,
                   const std::vector<unsigned char>& key, const std::function<void(cudaStream_t)>& work) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  LMFUSE_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  if (status == cudaStreamCaptureStatusActive || eagerConditionals()) {
    work(stream);
    return;
  }
  auto& entries = cache.entries;
  auto found = std::find_if(entries.begin(), entries.end(), [&](const auto& entry) { return entry.key == key; });
  if (found != entries.end()) {
    std::rotate(entries.begin(), found, found + 1);  // most recent first
  } else {
    LMFUSE_CUDA_CHECK(cudaStreamBeginCapture(ownStream, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      work(ownStream);
    } catch (...) {
      (void)cudaStreamEndCapture(ownStream, &graph);
      if (graph) cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      throw;
    }
    LMFUSE_CUDA_CHECK(cudaStreamEndCapture(ownStream, &graph));
    cudaGraphExec_t exec = nullptr;
    cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (instantiated != cudaSuccess) (void)cudaGetLastError();  // not sticky: leave no error for later checks
    LMFUSE_CUDA_CHECK(instantiated);
    if (entries.size() == RecordedGraphs::kKept) {
      cudaGraphExecDestroy(entries.back().exec);  // freed once its launches complete
      entries.pop_back();
    }
    entries.insert(entries.begin(), {key, exec});
  }
  LMFUSE_CUDA_CHECK(cudaGraphLaunch(entries.front().exec, stream));
}

}  // namespace lmfuse::detail::cuda
