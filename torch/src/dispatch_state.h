// What LibTorch's dispatcher would do with a call on these operands, on this thread: whether the runtime can read
// their values from memory, whether autograd records a graph, whether the JIT tracer records the operators. The
// adapter (adapter.cpp) and the choice of LibTorch's own operators (original_loss.cpp) decide with these.
#pragma once

#include <torch/types.h>

namespace lmfuse::torch_detail {

/// True for an undefined tensor or one whose values the runtime can read from its memory: a strided CPU or CUDA
/// tensor with storage. Not: a functionalization or functorch wrapper, a Python subclass, an efficient zero
/// tensor (its memory is none: all zeros), a meta tensor (no values). LibTorch's own kernels compute on those.
bool valuesInMemory(const torch::Tensor& tensor);

/// True while the JIT tracer records LibTorch's operators called here: tracing, and not inside an operator the
/// tracer recorded as a whole (torch.ops.lmfuse.linear_cross_entropy, traced from Python, is one node; its
/// body runs with the tracer's dispatch key excluded). The runtime computes through no operator it records.
bool tracerRecordsHere();

/// Whether LibTorch's operators on these tensors (any may be undefined) reach autograd's kernels here, which
/// record the graph: the dispatcher computes each call's keys as the tensors' keys less the thread's excluded
/// ones, and a guard in the caller (at::AutoDispatchBelowADInplaceOrView, at::AutoDispatchBelowAutograd, an
/// ExcludeDispatchKeyGuard of autograd's keys) excludes them with grad mode still on. The original then records
/// no graph; neither may the fused call.
bool autogradRecords(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace lmfuse::torch_detail
