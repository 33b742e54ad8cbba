// The rewriter's entry points: analyse a parsed translation unit into site records and edits,
// and (for tests and small tools) parse a source string and return the rewritten text.
// Edits are produced for patched sites only, never touch a macro expansion, and leave the
// original computation in place as the fallback selected at run time.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "clang/AST/ASTContext.h"
#include "clang/Lex/Preprocessor.h"
#include "clang/Tooling/Core/Replacement.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include "patterns.h"
#include "site.h"

namespace lmfuse::rewriter {

struct TranslationUnitResult {
  std::vector<SiteRecord> Sites;                    ///< every candidate site of the main file and its headers
  std::vector<clang::tooling::Replacement> Edits;   ///< for patched sites only; none touch a macro expansion
};

/// Pure analysis over a translation unit that parsed without errors. Sites in the library's system
/// headers are not candidates (a program file included as a system header is the program's). Sites are sorted by file, line and column. ProgramRoot is the folder of the
/// program's own files (the edit root; "" = the main file's folder): what they declare is never the
/// library's (AstQuery::declaredByProgram). Preprocessor is the unit's, alive with its macro history.
TranslationUnitResult analyzeTranslationUnit(clang::ASTContext &Context, clang::Preprocessor &Preprocessor,
                                             const PatternSet &Patterns, const std::string &ProgramRoot = "");

/// Convenience for tests: parse Code (with extra virtual files, e.g. stub headers) and return
/// the rewritten main file plus the sites. Parsed is false (and Code unchanged) when the source
/// has compile errors; Diagnostics holds the compiler's messages either way. The rewritten code is parsed
/// again as the tool does before it writes (without its library-header checks): where it does not compile, its
/// patched sites are failed `reparse-failed`; where a site's copies read otherwise (respelling.h), that site is
/// refused and the others failed; either way Code is returned unchanged.
struct RewriteResult {
  std::string Code;
  std::vector<SiteRecord> Sites;
  bool Parsed = false;
  std::string Diagnostics;
};
RewriteResult rewriteSource(llvm::StringRef Code, llvm::ArrayRef<std::string> Args,
                            const PatternSet &Patterns, llvm::StringRef FileName = "input.cpp",
                            const std::map<std::string, std::string> &VirtualFiles = {});

}  // namespace lmfuse::rewriter
