// Refusal analysis: decides whether a captured site may be rewritten, and is the one place that does.
// Each refusal kind is one check over the captured facts (captured_site.h: capture records where a
// trace stopped and why, never a reason); the checks run in a fixed order (in-macro first, then the
// softcap, which takes precedence over every other change to the logits) and the first that fires
// is the site's one reason.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "ast_query.h"
#include "patterns.h"
#include "site.h"
#include "captured_site.h"
#include "edit_plan.h"

#include "clang/Tooling/Core/Replacement.h"
#include "llvm/ADT/ArrayRef.h"

namespace lmfuse::rewriter {

struct Refusal {
  ReasonKind Reason = ReasonKind::None;
  const clang::Stmt *Node = nullptr;  ///< the offending code
  std::string Why;                    ///< what it does, without the location
};

/// The first reason, in order, that forbids rewriting the site; none when it may be rewritten.
std::optional<Refusal> findRefusal(const CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query,
                                   const VariableUses &Uses);

/// The checks of the edits planned for a site that passed findRefusal (Edits: edit_plan.h's planSiteEdits): a
/// preprocessor directive inside the code an edit replaces (it would move with the text or be read twice) is
/// refused `in-macro`; a name the rewrite writes of its own (OwnWords, edit_plan.h's ownWords: `lmfuse`,
/// `enabled`, an option's setter, a stand-in, the head's `weight`) that is a macro of the program where it is
/// written would make the rewritten code other code than planned, refused `name-captured`, as findRefusal
/// refuses a `lmfuse::` or `torch::` that lookup would find elsewhere; so is a written name that is neither
/// one of those nor a word of the program's code the edits copy. What the call asserts (Analysed,
/// edit_plan.h) copies the program's code read elsewhere to the loss: a name in it that finds another
/// declaration there (a local of the loss's block shadowing a constant of the shift) is refused `name-captured`.
std::optional<Refusal> findEditRefusal(const CapturedSite &Site, llvm::ArrayRef<clang::tooling::Replacement> Edits,
                                       const std::set<std::string> &OwnWords,
                                       llvm::ArrayRef<AnalysedExpression> Analysed, const AstQuery &Query);

}  // namespace lmfuse::rewriter
