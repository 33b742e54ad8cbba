// The CUDA backend of a build without CUDA: every entry point reports that it is not built.
#include "backend.h"
#include "error.h"

namespace lmfuse::detail::cuda {
namespace {
[[noreturn]] void notBuilt() {
  LMFUSE_FAIL("context.device is Cuda, but this lmfuse runtime was built without CUDA");
}
}  // namespace

bool available() { return false; }
std::size_t workspace_size(const Problem&, const Options&, bool) { notBuilt(); }
std::size_t workspace_size(const Problem&, const Options&, const Outputs&) { notBuilt(); }
void linear_cross_entropy(const Problem&, const Options&, const Outputs&, Workspace, const Context&) { notBuilt(); }
void scale_grads(const Problem&, const Outputs&, const float*, const Context&) { notBuilt(); }
void check(Workspace, const Context&) { notBuilt(); }
}  // namespace lmfuse::detail::cuda
