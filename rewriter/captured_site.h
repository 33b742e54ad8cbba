// The captured-site record: what site capture (site_capture.h) found for one candidate loss call —
// the head, the logits' way to the loss, the guard, the labels and the options — and where a trace
// stopped short. Facts only: refusals.h is the one place that turns them into a reason.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"

#include "head_match.h"
#include "labels_guard.h"
#include "patterns.h"
#include "site.h"

namespace lmfuse::rewriter {

/// What capture saw where a trace stopped short: a fact, not a verdict (refusals.cpp decides which
/// refusal, if any, each fact leads to).
enum class BreakKind {
  NoHeadAssignment,   ///< the variable is not assigned a head's output in this function
  NotALinearHead,     ///< the logits come from something other than a head
  Normalized,         ///< a normaliser (softmax, ...) is applied to the head's output
  Capped,             ///< a tanh cap is applied to the logits
  HeadInExpression,   ///< the head call is part of a larger expression
  Indexed,            ///< the logits are indexed or sliced (other than the causal shift)
  ReboundToSlice,     ///< the logits variable is re-bound to a slice of itself
  ChangedInPlace,     ///< an in-place method changes the logits
  CompoundAssigned,   ///< a compound assignment changes the logits
  ReboundToChange,    ///< the logits variable is re-bound to a changed value
  ChangedBeforeLoss,  ///< the logits are changed on the way to the loss
  LabelsNotTraced,    ///< the loss target is not a labels variable, view, cast or unwrap
  OptionUnsupported,  ///< a loss option the fused call cannot honour
  OptionInMacro,      ///< an option's value lies inside a macro expansion
  NotLogProbabilities,  ///< an nll_loss input is not log_softmax of the logits over the class dimension
};

/// Where and why the trace from the loss to the head (or to the labels, or through the options)
/// stopped short.
struct TraceBreak {
  BreakKind Kind = BreakKind::NotALinearHead;
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
  const clang::Expr *Base = nullptr;  ///< the variable the value is computed from, inside Value
};

struct LossOptionValues {
  PatchedOptions Effective;  ///< the options as the rewritten call passes them (loss_option_table.h)
  /// Option arguments whose type decided an option (`.reduction(torch::kSum)`): the rewritten call asserts
  /// their types (edit_plan.h: analysedExpressions), since it passes the option the analysis read from them.
  std::vector<const clang::Expr *> DecidedByType;
  /// The options objects the setters read are called on, as written (`Opts()`, `Opts{}`, the local `opts` of
  /// `Opts opts;`): of the library's class in Clang's reading, asserted where written through a type alias.
  std::vector<const clang::Expr *> Objects;
};

struct CapturedSite {
  const clang::CallExpr *Loss = nullptr;
  const LossPattern *LossRule = nullptr;
  const clang::FunctionDecl *Function = nullptr;
  const clang::Stmt *Body = nullptr;
  const clang::Expr *Input = nullptr;   ///< the loss's logits argument
  const clang::Expr *Target = nullptr;  ///< the loss's labels argument
  /// Inside Input, what its reshapes, casts and shift start from: the head call, or a variable
  /// holding the logits (the head's, or an alias on the chain).
  const clang::Expr *InputBase = nullptr;

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
  int64_t LogitsShiftDim = 0;  ///< the dim the logits' shift is written on (ShiftVerdict::Dim)
  /// nll_loss: the log_softmax call between the logits and the loss (LossRule->InputLogSoftmax).
  const clang::Expr *LogSoftmax = nullptr;
  /// The head's input is not a plain variable unchanged until the loss: the rewrite evaluates it
  /// once into a local before the logits statement instead of duplicating it.
  bool HoistHidden = false;
  bool LabelsShift = false;
  int64_t LabelsShiftDim = 0;  ///< the dim the labels' shift is written on
  /// Locals holding the length a shift was proven with (`const auto T = logits.size(1);`).
  std::vector<const clang::VarDecl *> ShiftLengths;
  std::optional<TraceBreak> Break;

  LabelsGuard Guard;
  std::string LabelsText;                      ///< labels for the runtime ("" when not derived)
  /// The code LabelsText spells again at the loss: the loss's own, or (for labels a local shifted) the code
  /// the local was made from, written before the loss.
  const clang::Expr *LabelsTextFrom = nullptr;
  /// Where the chain of views, casts and shift of the loss's labels argument starts (the labels, a local
  /// holding them, `*labels`, `labels.value()`), and whether the chain reaches it through `->`.
  const clang::Expr *TargetBase = nullptr;
  bool TargetBaseArrow = false;
  const clang::VarDecl *LabelsRoot = nullptr;  ///< the variable the labels come from
  std::vector<const clang::VarDecl *> LabelLocals;  ///< unwrapped labels locals (`auto y = *labels;`)
  std::optional<TraceBreak> LabelsBreak;

  LossOptionValues Options;
  /// A module loss: what the rewritten call passes as its options, read from the module when the loss
  /// runs (`lmfuse::module_loss_options(criterion->options)`); "" for a function loss.
  std::string ModuleOptions;
  /// Options held in a local (`auto opts = ...;`), and a loss module held in a local.
  std::vector<const clang::VarDecl *> OptionLocals;
  std::optional<TraceBreak> OptionsBreak;
  /// The program's code the fused call writes again as it is written, besides the head's parts and the labels
  /// (an upcast's dtype, the labels' cast type and device, an option's value): compared where it is written in
  /// the re-parse (respelling.h).
  std::vector<const clang::Expr *> CopiedToLoss;
};

}  // namespace lmfuse::rewriter
