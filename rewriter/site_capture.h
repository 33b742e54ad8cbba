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
#include "patterns.h"
#include "site.h"

namespace lmfuse::rewriter {

/// Where and why the trace from the loss to the head stopped short.
struct TraceBreak {
  ReasonKind Reason = ReasonKind::None;
  const clang::Stmt *Node = nullptr;  ///< the offending statement or expression
  std::string Why;                    ///< what it does, e.g. "multiplies the logits"
};

enum class HeadKind { Module, Function };

struct HeadCall {
  HeadKind Kind = HeadKind::Module;
  const clang::Expr *Call = nullptr;    ///< the head call as spelled
  const clang::Expr *Hidden = nullptr;  ///< its input argument
  const clang::Expr *Object = nullptr;  ///< module heads: the module holder expression
  std::string Text;                     ///< "lm_head" (module) or the call text (function)
  std::string Weight;                   ///< "lm_head->weight", or the weight argument
  std::string Bias;                     ///< "lm_head->bias", the bias argument, or "" when absent
};

/// A statement that rebinds or aliases the logits on the way to the loss (`logits =
/// logits.view(...)`, `auto flat = logits.view(...)`): on the fused path it must not run on the
/// undefined logits, so its value gets the same condition as the head.
struct ChainStep {
  const clang::Stmt *Statement = nullptr;
  const clang::Expr *Value = nullptr;
  const clang::VarDecl *Variable = nullptr;
};

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

/// Whether Call is a head under Patterns (a torch::nn::Linear call or a functional linear).
std::optional<HeadCall> matchHead(const clang::Expr *Call, const PatternSet &Patterns,
                                  const AstQuery &Query);

CapturedSite captureSite(const clang::CallExpr *Loss, const LossPattern &Rule,
                         const PatternSet &Patterns, const AstQuery &Query, const VariableUses &Uses);

}  // namespace lmfuse::rewriter
