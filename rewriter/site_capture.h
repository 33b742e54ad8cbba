// Site capture: from one candidate loss call, trace the logits back through benign wrappers and
// rebinding aliases to the head, find the guard that tests the labels, the labels as the loss
// reached them, and the effective loss options. Capture records what it saw (including where the
// trace broke off); it decides nothing: refusals.h turns the facts into at most one reason.
#pragma once

#include "clang/AST/Expr.h"

#include "ast_query.h"
#include "captured_site.h"
#include "patterns.h"

namespace lmfuse::rewriter {

/// Captures the site of one candidate loss call.
CapturedSite captureSite(const clang::CallExpr *Loss, const LossPattern &Rule,
                         const PatternSet &Patterns, const AstQuery &Query, const VariableUses &Uses);

/// The parts of the site the rewrite edits, moves or copies: the loss call and its arguments, the head's
/// statement and call, the labels test it repeats at the head, the chain of statements between; with
/// WithOptionLocals, also the initialisers of the option locals whose values it reads at the loss. Parts the
/// site does not have are left out.
std::vector<const clang::Stmt *> rewrittenParts(const CapturedSite &Site, bool WithOptionLocals);

}  // namespace lmfuse::rewriter
