// Suppression comments: `// NOLINT(lmfuse)` on a line of the site, `// NOLINTNEXTLINE(lmfuse)` on
// the line before, and `// NOLINTBEGIN(lmfuse)` ... `// NOLINTEND(lmfuse)` around it, in the
// clang-tidy spelling (a check list holding `lmfuse` or `*`). A bare NOLINT is meant for other
// tools and does not suppress lmfuse. Only comments count: the same text in a string literal or in code
// suppresses nothing.
#pragma once

#include <map>
#include <set>

#include "clang/Basic/SourceManager.h"

namespace lmfuse::rewriter {

class SuppressionIndex {
public:
  explicit SuppressionIndex(const clang::SourceManager &SM) : SM(SM) {}
  /// Whether the line holding Location (expansion location) is suppressed.
  bool isSuppressed(clang::SourceLocation Location);

private:
  const std::set<unsigned> &linesOf(clang::FileID File);
  const clang::SourceManager &SM;
  std::map<clang::FileID, std::set<unsigned>> SuppressedLines;
};

}  // namespace lmfuse::rewriter
