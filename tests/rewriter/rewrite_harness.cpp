// Test support for the rewriter tables.
#include "rewrite_harness.h"

#include <catch2/catch.hpp>
#include <cctype>

namespace lmfuse::rewriter::testing {

const PatternSet &defaultPatterns() {
  static const PatternSet Patterns = [] {
    auto Loaded = loadDefaultPatterns();
    if (!Loaded)
      FAIL("the built-in patterns do not load: " << llvm::toString(Loaded.takeError()));
    return *Loaded;
  }();
  return Patterns;
}

std::vector<std::string> stubArgs() {
  return {"-std=c++17", "-isystem", LMFUSE_REWRITER_STUBS};
}

RewriteResult rewriteWithStubs(const std::string &Code) {
  return rewriteSource(Code, stubArgs(), defaultPatterns(), "model.cpp");
}

std::string normalizeWhitespace(const std::string &Code) {
  auto IsWord = [](char C) { return std::isalnum(static_cast<unsigned char>(C)) || C == '_'; };
  std::string Out;
  bool PendingSpace = false;
  for (char C : Code) {
    if (std::isspace(static_cast<unsigned char>(C))) {
      PendingSpace = true;
      continue;
    }
    if (PendingSpace && !Out.empty() && IsWord(Out.back()) && IsWord(C))
      Out += ' ';
    PendingSpace = false;
    Out += C;
  }
  return Out;
}

}  // namespace lmfuse::rewriter::testing
