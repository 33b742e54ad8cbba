// Internal: the interface every backend implements. The public API (api.cpp) validates arguments once,
// then forwards to exactly one backend; a backend may assume its arguments are valid.
#pragma once

#include "lmfuse/flce.h"

namespace lmfuse::detail {

// Bytes at the start of every workspace that hold the out-of-range-label report:
// int64 first offending token (INT64_MAX when none), int64 its label. Backends reset it each call.
constexpr std::size_t kErrorReportBytes = 256;

namespace cpu {
std::size_t workspace_size(const Problem&, const Options&, bool with_gradients);
void linear_cross_entropy(const Problem&, const Options&, const Outputs&, Workspace, const Context&);
void scale_grads(const Problem&, const Outputs&, const float* upstream, const Context&);
void check(Workspace, const Context&);
}  // namespace cpu

namespace cuda {
bool available();
std::size_t workspace_size(const Problem&, const Options&, bool with_gradients);
std::size_t workspace_size(const Problem&, const Options&, const Outputs&);  // for exactly these outputs
void linear_cross_entropy(const Problem&, const Options&, const Outputs&, Workspace, const Context&);
void scale_grads(const Problem&, const Outputs&, const float* upstream, const Context&);
void check(Workspace, const Context&);
}  // namespace cuda

}  // namespace lmfuse::detail
