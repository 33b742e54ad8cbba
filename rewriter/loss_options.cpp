// Reads the loss call's options as the pattern set maps them.
#include "loss_options.h"

#include <set>

#include "pattern_match.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

std::optional<std::string> reductionOf(const Expr *Value, const PatternSet &Patterns, const AstQuery &Query) {
  const Expr *E = AstQuery::spelled(Value);
  QualType Type = E->getType().getNonReferenceType().getUnqualifiedType();
  std::string TypeName = qualifiedName(Type->getAsCXXRecordDecl());
  for (const ReductionPattern &Reduction : Patterns.Reductions)
    if (!TypeName.empty() && TypeName == Reduction.Type)
      return Reduction.Value;
  if (auto Integer = Query.integerValue(E))
    for (const ReductionPattern &Reduction : Patterns.Reductions)
      if (Reduction.Integer == *Integer)
        return Reduction.Value;
  return std::nullopt;
}

void setOption(CapturedSite &Site, const std::string &Option, const Expr *Value, const PatternSet &Patterns,
               const AstQuery &Query) {
  LossOptionValues &Options = Site.Options;
  const Expr *Spelled = AstQuery::spelled(Value);
  auto Unsupported = [&](std::string Why) {
    if (!Site.OptionsBreak)
      Site.OptionsBreak = TraceBreak{BreakKind::OptionUnsupported, Value, std::move(Why)};
  };
  // A value the rewrite carries must be copied as written: part of a macro expansion has no text of
  // its own (a whole macro invocation, `.ignore_index(PAD)`, is carried as `PAD`).
  std::string Written = Query.text(Value);  // unstripped: `(-1)` from a macro is the invocation
  if ((Option == "ignore_index" || Option == "label_smoothing") && Written.empty()) {
    if (!Site.OptionsBreak)
      Site.OptionsBreak = TraceBreak{BreakKind::OptionInMacro, Value,
                                     "the option `" + Option + "` comes from inside a macro expansion"};
    return;
  }
  if (Option == "ignore_index") {
    if (auto Integer = Query.integerValue(Spelled))
      Options.Effective.IgnoreIndex = *Integer;
    else
      Options.Effective.IgnoreIndexExpression = Written;
    Options.Effective.IgnoreIndexText = Written;
  } else if (Option == "label_smoothing") {
    if (auto Float = Query.floatValue(Spelled))
      Options.Effective.LabelSmoothing = *Float;
    else
      Options.Effective.LabelSmoothingExpression = Written;
    Options.Effective.LabelSmoothingText = Written;
  } else if (Option == "reduction") {
    auto Reduction = reductionOf(Value, Patterns, Query);
    if (!Reduction)
      Unsupported("the reduction `" + Query.text(Spelled) + "` is not known at compile time");
    else if (*Reduction == "none")
      Unsupported("reduction none returns per-token losses in the logits' shape");
    else
      Options.Effective.Reduction = *Reduction;
  } else if (Option == "weight") {
    const Expr *Weight = AstQuery::spelled(Value);
    bool Empty = isa<CXXDefaultArgExpr>(Value) || isNullConstant(Weight, Patterns, Query) ||
                 (isa<InitListExpr>(Weight) && cast<InitListExpr>(Weight)->getNumInits() == 0) ||
                 (isa<CXXConstructExpr>(Weight) && cast<CXXConstructExpr>(Weight)->getNumArgs() == 0);
    if (!Empty)
      Unsupported("class weights `" + Query.text(Weight) + "` are not supported by the fused loss");
  }
}

}  // namespace

void captureOptions(CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query, const VariableUses &Uses) {
  const LossPattern &Rule = *Site.LossRule;
  for (const auto &[Option, Index] : Rule.Positional)
    if (Index >= 0 && static_cast<unsigned>(Index) < Site.Loss->getNumArgs() &&
        !isDefaultArgument(Site.Loss->getArg(Index)))
      setOption(Site, Option, Site.Loss->getArg(Index), Patterns, Query);
  if (Rule.OptionsArgument < 0 || static_cast<unsigned>(Rule.OptionsArgument) >= Site.Loss->getNumArgs() ||
      isDefaultArgument(Site.Loss->getArg(Rule.OptionsArgument)))
    return;
  // Setters apply inner to outer; walking outer to inner, the first value seen is the effective one.
  std::set<std::string> Seen;
  const Expr *E = Site.Loss->getArg(Rule.OptionsArgument);
  for (int Depth = 0; Depth < 64; ++Depth) {
    E = AstQuery::spelled(E);
    if (auto Call = AstQuery::asCall(E); Call && Call->Object) {
      if (contains(Rule.UnsupportedSetters, Call->Name)) {
        if (!Site.OptionsBreak)
          Site.OptionsBreak = TraceBreak{BreakKind::OptionUnsupported, E,
                                         "the option `" + Call->Name + "` is not supported by the fused loss"};
      } else {
        std::string Option;
        for (const auto &[Runtime, Setter] : Rule.Setters)
          if (Setter == Call->Name)
            Option = Runtime;
        if (Option.empty() || Call->Args.size() != 1) {
          if (!Site.OptionsBreak)
            Site.OptionsBreak = TraceBreak{BreakKind::OptionUnsupported, E,
                                           "the option `" + Call->Name + "` has no fused equivalent"};
        } else if (Seen.insert(Option).second) {
          setOption(Site, Option, Call->Args[0], Patterns, Query);
        }
      }
      E = Call->Object;
      continue;
    }
    if (const VarDecl *Variable = AstQuery::namedVariable(E)) {
      llvm::ArrayRef<VariableWrite> Writes = Uses.writes(Variable);
      if (Writes.size() == 1 && Writes[0].Kind == VariableWrite::WriteKind::Declaration) {
        Site.OptionLocals.push_back(Variable);
        E = Writes[0].Value;
        continue;
      }
      if (!Site.OptionsBreak)
        Site.OptionsBreak = TraceBreak{BreakKind::OptionUnsupported, E,
                                       "the options `" + Query.text(E) + "` are not visible where the loss is called"};
      return;
    }
    if (const auto *Cast = dyn_cast<CXXFunctionalCastExpr>(E)) {  // Options{} of an aggregate
      E = Cast->getSubExpr();
      continue;
    }
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(E); Construct && Construct->getNumArgs() == 0)
      return;
    if (const auto *List = dyn_cast<InitListExpr>(E); List && List->getNumInits() == 0)
      return;
    if (!Site.OptionsBreak)
      Site.OptionsBreak = TraceBreak{BreakKind::OptionUnsupported, E,
                                     "the options `" + Query.text(E) + "` cannot be read at compile time"};
    return;
  }
}

}  // namespace lmfuse::rewriter
