// Split passes (runtime/src/cuda/plan.h: SplitPass) for the tests: that a split's regions keep every buffer
// intact until the backend's order reads it, and the budget that makes a small problem split.
#pragma once

#include <catch2/catch.hpp>

#include "cuda/kernels.h"
#include "cuda/plan.h"

namespace lmfuse_test {

// The layout rules of a split pass over `tokens` tokens, checked from the plan's numbers alone: the rows and
// part A inside the accumulator's region and the logits buffer, part B inside the bytes of grad_weight's
// rows [0, columnsA), the fp32 staging rows inside those of rows [columnsA, V).
inline void checkSplitLayout(const lmfuse::detail::cuda::Plan& plan, int64_t tokens,
                             const lmfuse::detail::cuda::SplitPass& split, bool staging) {
  using lmfuse::detail::cuda::kRowStatisticsColumns;
  const std::size_t t = std::size_t(tokens), d = std::size_t(plan.hiddenDim);
  const int64_t va = split.columnsA, vb = plan.vocab - va;
  REQUIRE(va > 0);
  REQUIRE(vb > 0);
  CHECK(va % kRowStatisticsColumns == 0);
  CHECK(split.ldB >= vb);
  CHECK(split.ldB % 8 == 0);
  const std::size_t regionEnd = plan.logits.offset + plan.logits.bytes;
  CHECK(split.rowsOffset >= plan.weightAccumulator.offset);
  CHECK(split.rowsOffset + t * d * 2 <= split.aOffset);
  const std::size_t aBytes = t * std::size_t(va) * 2 + t * std::size_t(va / kRowStatisticsColumns) * 8;
  CHECK(split.aOffset + aBytes <= regionEnd);
  const std::size_t weightRow = d * 2;
  const std::size_t bBytes = t * std::size_t(split.ldB) * 2 +
                             t * std::size_t((vb + kRowStatisticsColumns - 1) / kRowStatisticsColumns) * 8;
  CHECK(split.bOffset + bBytes <= std::size_t(va) * weightRow);
  if (staging) {
    CHECK(split.stagingOffset >= std::size_t(va) * weightRow);
    CHECK(split.stagingOffset + t * d * 4 <= std::size_t(plan.vocab) * weightRow);
  }
  CHECK(split.aOffset % 256 == 0);
  CHECK(split.stagingOffset % 256 == 0);
}

// The smallest workspace budget (in 4 KiB steps from `from`) whose plan runs all N tokens of this problem as
// a split pass; 0 when none up to `to`.
inline std::size_t splitBudget(const lmfuse::Problem& problem, lmfuse::Options options,
                               const lmfuse::Outputs& outputs, std::size_t from, std::size_t to) {
  options.memory = lmfuse::MemoryMode::Accumulate;
  for (std::size_t budget = from; budget <= to; budget += 4096) {
    options.workspace_budget = budget;
    try {
      const auto plan = lmfuse::detail::cuda::makePlan(problem, options, &outputs, true);
      if (lmfuse::detail::cuda::passPlan(plan, problem.tokens).split.columnsA > 0) return budget;
    } catch (const lmfuse::Error&) {  // a budget below the plan's minimum
    }
  }
  return 0;
}

}  // namespace lmfuse_test
