// --export-fixes: the verified edits as clang-tidy's fixes YAML (tooling::TranslationUnitDiagnostics),
// which clang-apply-replacements applies. One diagnostic per rewritten file carries that file's edits.
#pragma once

#include <string>
#include <vector>

#include "driver.h"

namespace lmfuse::tool {

/// Writes the YAML with writeFileAtomically() (complete or not at all); the error names Path.
llvm::Error exportFixes(llvm::StringRef Path, llvm::StringRef MainSourceFile, llvm::StringRef BuildDirectory,
                        const std::vector<rewriter::FileRewrite> &Rewrites);

}  // namespace lmfuse::tool
