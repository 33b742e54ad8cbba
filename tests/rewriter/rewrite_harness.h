// Shared by the rewriter tests: the stub LibTorch the unit cases parse against, and the
// whitespace normalisation used to compare rewritten code.
#pragma once

#include <string>
#include <vector>

#include "patterns.h"
#include "rewrite.h"

namespace lmfuse::rewriter::testing {

/// The built-in pattern set (loaded once; a failure to load fails the calling test).
const PatternSet &defaultPatterns();
/// Compiler arguments that find the stub <torch/torch.h> and <lmfuse/torch.h>.
std::vector<std::string> stubArgs();
/// Rewrites Code against the stubs.
RewriteResult rewriteWithStubs(const std::string &Code);
/// Code with whitespace collapsed: kept as one space only between two identifier characters.
std::string normalizeWhitespace(const std::string &Code);

}  // namespace lmfuse::rewriter::testing
