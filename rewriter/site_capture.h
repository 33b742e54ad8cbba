// Site capture: from one candidate loss call, trace the logits back through benign wrappers and
// rebinding aliases to the head, find the guard that tests the labels, the labels as the loss
// reached them, and the effective loss options. Capture records what it saw (including where the
// trace broke off); it decides nothing: refusals.h turns the facts into at most one reason.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"

#include "ast_query.h"
#include "head_match.h"
#include "labels_guard.h"
#include "patterns.h"
#include "site.h"

namespace lmfuse::rewriter {

/// Where and why the trace from the loss to the head stopped short.
struct TraceBreak {
  ReasonKind Reason = ReasonKind::None;
  const clang::Stmt *Node = nullptr;  ///< the offending statement or expression
  std::string Why;                    ///< what it does, e.g. "multiplies the logits"
};

/// A statement that rebinds or aliases the logits on the way to the loss (`logits =
/// logits.view(...)`, `auto flat = logits.view(...)`): on the fused path it must not run on the
/// undefined logits, so its value gets the same condition as the head.
struct ChainStep {
  const clang::Stmt *Statement = nullptr;
  const clang::Expr *Value = nullptr;
  const clang::VarDecl *Variable = nullptr;
};

struct LossOptionValues {
  PatchedOptions Effective;        ///< values known at compile time (defaults otherwise)
  std::string IgnoreIndexText;     ///< source text to emit ("" = default)
  std::string LabelSmoothingText;  ///< source text to emit ("" = default)
};

struct CapturedSite {
  const clang::CallExpr *Loss = nullptr;
  const LossPattern *LossRule = nullptr;
  const clang::FunctionDecl *Function = nullptr;
  const clang::Stmt *Body = nullptr;
  const clang::Expr *Input = nullptr;   ///< the loss's logits argument
  const clang::Expr *Target = nullptr;  ///< the loss's labels argument

  std::optional<HeadCall> Head;
  /// The statement that stores the head's output (null when the head call is inline in the loss).
  const clang::Stmt *Producer = nullptr;
  const clang::Expr *ProducerValue = nullptr;  ///< its initialiser or right-hand side
  const clang::VarDecl *Logits = nullptr;      ///< the variable the head's output is stored in
  std::vector<ChainStep> Chain;                ///< rebindings and aliases, producer to loss
  std::vector<const clang::VarDecl *> Aliases; ///< variables other than Logits on the chain
  std::vector<const clang::Stmt *> Inspected;  ///< everything between head and loss (softcap scan)
  std::vector<std::string> Casts;              ///< upcasts to append to the fused result
  std::string UpcastType;                      ///< the dtype argument of a `.to(T)` upcast, as written
  bool LogitsShift = false;
  /// The head's input is not a plain variable unchanged until the loss: the rewrite evaluates it
  /// once into a local before the logits statement instead of duplicating it.
  bool HoistHidden = false;
  bool LabelsShift = false;
  std::optional<TraceBreak> Break;

  LabelsGuard Guard;
  std::string LabelsText;                      ///< labels for the runtime ("" when not derived)
  const clang::VarDecl *LabelsRoot = nullptr;  ///< the variable the labels come from
  std::vector<const clang::VarDecl *> LabelLocals;  ///< unwrapped labels locals (`auto y = *labels;`)
  std::optional<TraceBreak> LabelsBreak;

  LossOptionValues Options;
  std::vector<const clang::VarDecl *> OptionLocals;  ///< options held in a local (`auto opts = ...;`)
  std::optional<TraceBreak> OptionsBreak;
};

/// Captures the site of one candidate loss call.
CapturedSite captureSite(const clang::CallExpr *Loss, const LossPattern &Rule,
                         const PatternSet &Patterns, const AstQuery &Query, const VariableUses &Uses);

}  // namespace lmfuse::rewriter
