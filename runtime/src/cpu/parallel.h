// The CPU reference's only parallel construct: a static OpenMP loop over independent items. Each item
// computes its own sums in a fixed order and no value is combined across threads, so results are
// bitwise the same for every thread count (and without OpenMP).
#pragma once

#include <cstdint>

#include "lmfuse/flce.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace lmfuse::detail::cpu {

/// context.threads, or every available thread when it is 0.
inline int resolve_threads(const Context& context) {
#if defined(_OPENMP)
  return context.threads > 0 ? context.threads : omp_get_max_threads();
#else
  (void)context;
  return 1;
#endif
}

/// Below this many multiply-adds in a whole loop, starting threads costs more than it saves (and on a
/// loaded machine a parallel region can wait long for its threads).
constexpr int64_t kMinParallelWork = int64_t(1) << 16;

/// body(i) for i in [begin, end), each item costing about `item_work` multiply-adds; items must not
/// write to memory another item reads or writes.
template <class Body>
void parallel_for(int64_t begin, int64_t end, int threads, int64_t item_work, const Body& body) {
#if defined(_OPENMP)
  if (threads > 1 && end - begin > 1 && (end - begin) * item_work >= kMinParallelWork) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = begin; i < end; ++i) body(i);
    return;
  }
#else
  (void)threads;
  (void)item_work;
#endif
  for (int64_t i = begin; i < end; ++i) body(i);
}

}  // namespace lmfuse::detail::cpu
