// The CUDA passes of the vocabulary-parallel loss in a build without CUDA: each reports that it is not built.
#include "shard.h"

namespace lmfuse::detail::cuda {
namespace {
[[noreturn]] void notBuilt() {
  throw Error("lmfuse: context.device is Cuda, but this lmfuse runtime was built without CUDA");
}
}  // namespace

std::size_t shard_workspace_size(const Problem&, const Options&, bool) { notBuilt(); }
void shard_statistics(const Problem&, const VocabShard&, const Options&, const ShardStatistics&, Workspace,
                      const Context&) {
  notBuilt();
}
void shard_loss(const Problem&, const VocabShard&, const Options&, const GlobalStatistics&, const ShardOutputs&,
                Workspace, const Context&) {
  notBuilt();
}
}  // namespace lmfuse::detail::cuda
