// The guard of a site: the condition under which the loss runs. A branch that tests the labels
// (`labels.has_value()`, `labels.defined()`, `labels`, `labels != nullptr`, negated in an else), an
// earlier `if (!labels) return ...;`, a condition that does not test the labels, or none.
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
  Branch,       ///< the loss is in the then-branch of an if that tests the labels
  EarlyReturn,  ///< an earlier `if (!labels) return ...;` in the same block
  Unrelated,    ///< the loss is under a condition that does not test the labels
};

struct LabelsGuard {
  GuardKind Kind = GuardKind::None;
  const clang::IfStmt *If = nullptr;
  const clang::Stmt *Taken = nullptr;      ///< Branch/Unrelated: the branch of If that holds the loss
  const clang::Stmt *NotTaken = nullptr;   ///< Branch/Unrelated: the other branch (may be null)
  const clang::VarDecl *Labels = nullptr;  ///< the guarded variable
  std::string Positive;                    ///< the condition under which the loss runs, as source text
};

/// The guard of the loss call within the function body Body.
LabelsGuard findGuard(const clang::CallExpr *Loss, const clang::Stmt *Body, const PatternSet &Patterns,
                      const AstQuery &Query);

/// Whether Statement can run on a path where the loss does not (it sits before the guard): code
/// placed there must repeat the guard's test.
bool runsWithoutLoss(const clang::Stmt *Statement, const LabelsGuard &Guard, const AstQuery &Query);

}  // namespace lmfuse::rewriter
