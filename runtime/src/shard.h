// Internal: the backends' passes of the vocabulary-parallel loss (vocab_parallel.h). vocab_parallel.cpp
// validates once and forwards to exactly one backend, so these may assume valid, dense-resolved arguments.
#pragma once

#include <cstddef>

#include "lmfuse/vocab_parallel.h"

namespace lmfuse::detail {

namespace cpu {
void shard_statistics(const Problem&, const VocabShard&, const Options&, const ShardStatistics&, const Context&);
void shard_loss(const Problem&, const VocabShard&, const Options&, const GlobalStatistics&, const ShardOutputs&,
                const Context&);
}  // namespace cpu

namespace cuda {
/// Bytes of workspace pass 1 (with_gradients false) or pass 2 with gradients needs (shard.cu).
std::size_t shard_workspace_size(const Problem&, const Options&, bool with_gradients);
void shard_statistics(const Problem&, const VocabShard&, const Options&, const ShardStatistics&, Workspace,
                      const Context&);
void shard_loss(const Problem&, const VocabShard&, const Options&, const GlobalStatistics&, const ShardOutputs&,
                Workspace, const Context&);
}  // namespace cuda

}  // namespace lmfuse::detail
