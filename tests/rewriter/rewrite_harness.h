// Shared by the rewriter tests: the case tables' model and verbs, the stub LibTorch the cases parse
// against, and the whitespace normalisation used to compare rewritten code.
#pragma once

#include <string>
#include <vector>

#include "patterns.h"
#include "rewrite.h"

namespace lmfuse::rewriter::testing {

enum class Verb { RewritesTo, RefusesWith, LeavesUnchanged, Suppresses };

struct Case {
  const char *Name;
  const char *Before;  ///< the model's members and methods (inside `struct Model`)
  Verb Kind;
  const char *Expected;  ///< RewritesTo: the rewritten members; RefusesWith: the reason code
};

// Every case is a method (or a few) of one model (ModelOpen ... ModelClose); the stub headers
// declare LibTorch. A table's verbs: "rewrites to" compares the whole rewritten file
// (whitespace-normalised), then checks that the output re-parses and that rewriting it again changes
// nothing (already_patched); "refuses with" expects one unmatched site with that reason and the source
// unchanged; "leaves unchanged" expects no candidate site; "suppresses" expects one suppressed site.
extern const char *const Prelude;
extern const char *const PatchedPrelude;
extern const char *const ModelOpen;
extern const char *const ModelClose;

/// The case's members inside the model, with the preludes.
std::string source(const char *Members, bool Patched);

/// The main table of rewrite_cases_test.cpp, the accepted shift spellings of shift_cases_test.cpp and
/// the other head and loss spellings of form_cases_test.cpp (the mutation test starts from all three).
llvm::ArrayRef<Case> rewriteCases();
llvm::ArrayRef<Case> shiftCases();
llvm::ArrayRef<Case> formCases();

/// A refusal and what its detail must say (the reason alone does not show the analysis saw the cause).
struct Refused {
  Case Item;  ///< Kind is Verb::RefusesWith
  const char *Says;
};

/// Runs one case of a table under its verb (Catch assertions).
void checkCase(const Case &Item);
/// Runs a refusal case, then checks that its one site's detail contains Says.
void checkRefused(const Refused &Refusal);
/// One line per site, for failure messages.
std::string describeSites(const RewriteResult &Result);

/// The built-in pattern set (loaded once; a failure to load fails the calling test).
const PatternSet &defaultPatterns();
/// Compiler arguments that find the stub <torch/torch.h> and <lmfuse/torch.h>.
std::vector<std::string> stubArgs();
/// Rewrites Code against the stubs.
RewriteResult rewriteWithStubs(const std::string &Code);
/// Code with whitespace collapsed: kept as one space only between two identifier characters.
std::string normalizeWhitespace(const std::string &Code);

}  // namespace lmfuse::rewriter::testing
