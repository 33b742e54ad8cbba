// Chunk and slice sizes from options.chunk_tokens / options.workspace_budget / options.memory, and the
// workspace layout that follows. Sizes are computed with overflow checks: a problem whose workspace
// cannot be addressed is an Error, not a wrapped size.
#include "plan.h"

#include <algorithm>

#include "../backend.h"
#include "../error.h"

namespace lmfuse::detail::cpu {
namespace {

constexpr const char* kFunction = "lmfuse::workspace_size (CPU)";
constexpr std::size_t kAlignment = 64;

std::size_t multiply(std::size_t a, std::size_t b) {
  std::size_t product = 0;
  LMFUSE_REQUIRE(kFunction, !__builtin_mul_overflow(a, b, &product),
                 "the workspace of this problem (" << a << " × " << b << " bytes) does not fit in size_t");
  return product;
}

std::size_t add(std::size_t a, std::size_t b) {
  std::size_t sum = 0;
  LMFUSE_REQUIRE(kFunction, !__builtin_add_overflow(a, b, &sum), "the workspace of this problem does not fit in size_t");
  return sum;
}

// Appends a region of `bytes` at the next aligned offset of `cursor`; returns its offset.
std::size_t reserve(std::size_t& cursor, std::size_t bytes) {
  std::size_t offset = add(cursor, kAlignment - 1) / kAlignment * kAlignment;
  cursor = add(offset, bytes);
  return offset;
}

int64_t clamp_count(std::size_t available, std::size_t per_item, int64_t most) {
  std::size_t count = per_item == 0 ? std::size_t(most) : available / per_item;
  return int64_t(std::max<std::size_t>(1, std::min<std::size_t>(count, std::size_t(most))));
}

}  // namespace

Plan make_plan(const Problem& problem, const Options& options, bool with_gradients) {
  const std::size_t tokens = std::size_t(problem.tokens), dim = std::size_t(problem.hidden_dim),
                    vocab = std::size_t(problem.vocab), word = sizeof(double);
  const std::size_t budget = options.workspace_budget ? options.workspace_budget : kDefaultBudget;

  // Bytes per chunk token: its logits row, hidden row, grad_hidden row and three row scalars.
  std::size_t per_token = add(multiply(vocab, word), multiply(with_gradients ? 2 * dim : dim, word));
  per_token = add(per_token, 3 * word);
  const std::size_t per_vocab_row = multiply(dim + 1, word);  // one row of the [slice, D + 1] accumulator
  const std::size_t full_accumulator = multiply(vocab, per_vocab_row);
  const std::size_t overhead = kErrorReportBytes + 16 * kAlignment;

  Plan plan;
  if (!with_gradients) {
    plan.chunk_tokens = clamp_count(budget > overhead ? budget - overhead : 0, per_token, problem.tokens);
  } else {
    // Fused when asked, or (Auto) when the accumulator plus a modest chunk fits the budget.
    std::size_t modest_chunk = multiply(std::min<std::size_t>(tokens, 256), per_token);
    plan.fused = options.memory == MemoryMode::Accumulate ||
                 (options.memory == MemoryMode::Auto && add(add(full_accumulator, modest_chunk), overhead) <= budget);
    if (plan.fused) {
      std::size_t used = add(full_accumulator, overhead);
      plan.chunk_tokens = clamp_count(budget > used ? budget - used : 0, per_token, problem.tokens);
      plan.vocab_slice = problem.vocab;
    } else {
      // Half of what is left after the lse store for chunks, the rest for the slice accumulator.
      std::size_t used = add(multiply(tokens, word), overhead);
      std::size_t left = budget > used ? budget - used : 0;
      plan.chunk_tokens = clamp_count(left / 2, per_token, problem.tokens);
      if (options.chunk_tokens > 0) plan.chunk_tokens = std::min(options.chunk_tokens, problem.tokens);
      std::size_t chunk_bytes = multiply(std::size_t(plan.chunk_tokens), per_token);
      plan.vocab_slice = clamp_count(left > chunk_bytes ? left - chunk_bytes : 0, per_vocab_row, problem.vocab);
    }
  }
  if (options.chunk_tokens > 0) plan.chunk_tokens = std::min(options.chunk_tokens, problem.tokens);

  const std::size_t chunk = std::size_t(plan.chunk_tokens);
  std::size_t cursor = kErrorReportBytes;
  plan.logits = reserve(cursor, multiply(multiply(chunk, vocab), word));
  plan.hidden = reserve(cursor, multiply(multiply(chunk, dim), word));
  if (with_gradients) plan.grad_hidden = reserve(cursor, multiply(multiply(chunk, dim), word));
  plan.row_token = reserve(cursor, multiply(chunk, word));
  plan.row_label = reserve(cursor, multiply(chunk, word));
  plan.row_loss = reserve(cursor, multiply(chunk, word));
  if (with_gradients) {
    if (!plan.fused) plan.lse_store = reserve(cursor, multiply(tokens, word));
    plan.weight_gradient = reserve(cursor, multiply(multiply(std::size_t(plan.vocab_slice), dim), word));
    plan.bias_gradient = reserve(cursor, multiply(std::size_t(plan.vocab_slice), word));
  }
  plan.total = cursor;
  return plan;
}

}  // namespace lmfuse::detail::cpu
