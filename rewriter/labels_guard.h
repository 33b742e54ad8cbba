// The guard of a site: the condition under which the loss runs. A branch (of an `if` or a `?:`) that tests
// the labels (`labels.has_value()`, `labels.defined()`, `labels`, `labels != nullptr`, negated in an else),
// an earlier `if (!labels) return ...;`, a condition that does not test the labels, or none.
#pragma once

#include <string>

#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"

#include "ast_query.h"
#include "patterns.h"

namespace lmfuse::rewriter {

enum class GuardKind {
  None,         ///< the loss is not under any condition
  Branch,       ///< the loss is in the branch of an if or a ?: taken when the labels are present
  EarlyReturn,  ///< an earlier `if (!labels) return ...;` in the same block
  Unrelated,    ///< the loss is in a branch of an if or a ?: whose condition is not a presence test
};

struct LabelsGuard {
  GuardKind Kind = GuardKind::None;
  const clang::Stmt *Construct = nullptr;  ///< the if or ?: whose branch holds the loss, or the early return's if
  const clang::Expr *Condition = nullptr;  ///< Construct's condition
  const clang::Stmt *Taken = nullptr;      ///< Branch/Unrelated: the branch of Construct that holds the loss
  const clang::Stmt *NotTaken = nullptr;   ///< Branch/Unrelated: the other branch (may be null)
  const clang::VarDecl *Labels = nullptr;  ///< the guarded variable
  std::string Positive;  ///< the condition under which the loss runs, as source text that can follow `&&` (asTest)
  const clang::Expr *Repeated = nullptr;  ///< the program's code Positive repeats (Condition, or its `!`'s operand)
  unsigned RepeatedAt = 0;                ///< where Repeated's text starts in Positive
};

/// The guard of the loss call within the function body Body.
LabelsGuard findGuard(const clang::CallExpr *Loss, const clang::Stmt *Body, const PatternSet &Patterns,
                      const AstQuery &Query);

/// Whether Condition can be evaluated again at the head, before the head runs, with the same value and no
/// other effect, given that nothing it reads changes in between (the effect analysis checks that):
/// builtin operators over variables and members, presence tests of the labels and the pattern set's pure
/// library methods (`is_training()`, when no class of the unit overrides it); nothing that calls the
/// program's code, writes, reads a volatile, or
/// can throw (a shape read of an undefined tensor would throw before the head instead of after it).
bool repeatableCondition(const clang::Expr *Condition, const PatternSet &Patterns, const AstQuery &Query);

/// Whether Statement can run on a path where the loss does not (it sits before the guard): code
/// placed there must repeat the guard's test.
bool runsWithoutLoss(const clang::Stmt *Statement, const LabelsGuard &Guard, const AstQuery &Query);

}  // namespace lmfuse::rewriter
