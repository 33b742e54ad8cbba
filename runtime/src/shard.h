// Internal: the backends' passes of the vocabulary-parallel loss (vocab_parallel.h). vocab_parallel.cpp
// validates once and forwards to exactly one backend, so these may assume valid, dense-resolved arguments.
#pragma once

#include "lmfuse/vocab_parallel.h"

namespace lmfuse::detail {

namespace cpu {
void shard_statistics(const Problem&, const VocabShard&, const Options&, const ShardStatistics&, const Context&);
void shard_loss(const Problem&, const VocabShard&, const Options&, const GlobalStatistics&, const ShardOutputs&,
                const Context&);
}  // namespace cpu

namespace cuda {
void shard_statistics(const Problem&, const VocabShard&, const Options&, const ShardStatistics&, const Context&);
void shard_loss(const Problem&, const VocabShard&, const Options&, const GlobalStatistics&, const ShardOutputs&,
                const Context&);
}  // namespace cuda

}  // namespace lmfuse::detail
