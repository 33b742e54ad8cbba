// The tokens of a stretch of a file as Clang's raw lexer reads them: no macro expanded, no directive run,
// comments skipped (or kept, on request), line splices joined and digraphs read as the tokens they spell.
// The analyses that look at the text itself (what a spelling names where it is written, a directive
// between two statements, the markers in comments) all read it this way, so they all agree on what the
// compiler sees.
#pragma once

#include "clang/Basic/LangOptions.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Token.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace lmfuse::rewriter {

enum class Comments { Skip, Keep };

/// Calls Visit with each token of File that begins at or after offset Begin and before offset End, in order,
/// until Visit returns false (an End past the file's end reads to its end). A file the source manager cannot
/// read visits nothing.
void forEachRawToken(const clang::SourceManager &SM, const clang::LangOptions &Language, clang::FileID File,
                     unsigned Begin, unsigned End, llvm::function_ref<bool(const clang::Token &)> Visit,
                     Comments Mode = Comments::Skip);

/// Calls Visit with each token of Text, a piece of code that is in no file (text the rewrite writes), until
/// Visit returns false. Tokens have no meaningful location.
void forEachRawTokenOf(llvm::StringRef Text, const clang::LangOptions &Language,
                       llvm::function_ref<bool(const clang::Token &)> Visit);

}  // namespace lmfuse::rewriter
