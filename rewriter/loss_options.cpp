// Reads the loss call's options as the pattern set maps them.
#include "loss_options.h"

#include <set>
#include <tuple>

#include "module_construction.h"
#include "pattern_match.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

/// The reduction a value names, by its type (`torch::kSum`) or its integer (`at::Reduction::Sum`); one decided by
/// type is added to DecidedByType.
std::optional<std::string> reductionOf(const Expr *Value, const PatternSet &Patterns, const AstQuery &Query,
                                       std::vector<const Expr *> &DecidedByType) {
  const Expr *E = AstQuery::spelled(Value);
  QualType Type = E->getType().getNonReferenceType().getUnqualifiedType();
  std::string TypeName = qualifiedName(Type->getAsCXXRecordDecl());
  for (const ReductionPattern &Reduction : Patterns.Reductions)
    if (!TypeName.empty() && TypeName == Reduction.Type) {
      DecidedByType.push_back(E);
      return Reduction.Value;
    }
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
    Site.CopiedToLoss.push_back(Value);
  } else if (Option == "label_smoothing") {
    if (auto Float = Query.floatValue(Spelled))
      Options.Effective.LabelSmoothing = *Float;
    else
      Options.Effective.LabelSmoothingExpression = Written;
    Options.Effective.LabelSmoothingText = Written;
    Site.CopiedToLoss.push_back(Value);
  } else if (Option == "reduction") {
    auto Reduction = reductionOf(Value, Patterns, Query, Options.DecidedByType);
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

/// Reads fluent setters from an options expression: setters apply inner to outer, so walking outer to
/// inner the first value seen is the effective one. Follows an options local declared once and used only
/// here: the fused call passes the values its initialiser set, so any other use (a setter called on it
/// later, a reference to it) would be lost, and a value known only at run time would be read again at
/// the loss instead of where the local was made.
void readSetters(CapturedSite &Site, const Expr *E, const LossPattern &Rule, const PatternSet &Patterns,
                 const AstQuery &Query, const VariableUses &Uses) {
  std::set<std::string> Seen;
  const VarDecl *Local = nullptr;  // the options local followed, if any
  PatchedOptions AtLocal;          // the options read before following it (from the loss's own expression)
  const Expr *LocalRead = nullptr; // the loss's read of that local
  const Expr *Written = nullptr;   // the made options' functional cast (`Options{}`), if any
  auto Break = [&](const Expr *Node, std::string Why) {
    if (!Site.OptionsBreak)
      Site.OptionsBreak = TraceBreak{BreakKind::OptionUnsupported, Node, std::move(Why)};
  };
  for (int Depth = 0; Depth < 64; ++Depth) {
    E = AstQuery::spelled(E);
    if (auto Call = AstQuery::asCall(E); Call && Call->Object) {
      if (contains(Rule.UnsupportedSetters, Call->Name)) {
        Break(E, "the option `" + Call->Name + "` is not supported by the fused loss");
      } else {
        std::string Option;
        for (const auto &[Runtime, Setter] : Rule.Setters)
          if (Setter == Call->Name)
            Option = Runtime;
        if (!isLibraryDeclaration(Call->Callee, Patterns, Query))
          Break(E, "the option `" + Call->Name + "` is set by `" + qualifiedName(Call->Callee) +
                       "`, which this program declares (" + Query.declaredAt(Call->Callee) +
                       "): the fused call would pass the value written here, not what the program's setter stores");
        else if (Option.empty() || Call->Args.size() != 1)
          Break(E, "the option `" + Call->Name + "` has no fused equivalent");
        else if (Seen.insert(Option).second)
          setOption(Site, Option, Call->Args[0], Patterns, Query);
      }
      E = Call->Object;
      continue;
    }
    if (const VarDecl *Variable = AstQuery::namedVariable(E)) {
      llvm::ArrayRef<VariableWrite> Writes = Uses.writes(Variable);
      const std::string Name = Query.text(E);
      if (Local) {
        Break(E, "the options `" + Local->getNameAsString() + "` are made from a second options local, `" + Name +
                     "`; the rewrite follows one (set every option where `" + Local->getNameAsString() + "` is made)");
        break;
      }
      if (Writes.empty() || Writes[0].Kind != VariableWrite::WriteKind::Declaration) {
        Break(E, "the options `" + Name + "` are not a local made in this function, so their values where the "
                     "loss runs are not known");
        break;
      }
      if (Writes.size() != 1) {
        Break(E, "the options `" + Name + "` are changed on line " +
                     std::to_string(Query.line(Writes[1].Node->getBeginLoc())) +
                     ", after they are made; the fused call would pass the values they were made with");
        break;
      }
      if (llvm::ArrayRef<const DeclRefExpr *> Reads = Uses.reads(Variable); Reads.size() != 1) {
        const DeclRefExpr *Other = Reads.front() == E ? Reads.back() : Reads.front();
        Break(E, "the options `" + Name + "` are also used on line " +
                     std::to_string(Query.line(Other->getBeginLoc())) +
                     ", which the fused call would not see");
        break;
      }
      Site.OptionLocals.push_back(Variable);
      Local = Variable;
      LocalRead = E;
      AtLocal = Site.Options.Effective;
      E = Writes[0].Value;
      continue;
    }
    if (const auto *Cast = dyn_cast<CXXFunctionalCastExpr>(E)) {  // Options{} of an aggregate
      Written = Cast;
      E = Cast->getSubExpr();
      continue;
    }
    const auto *Construct = dyn_cast<CXXConstructExpr>(E);
    const auto *List = dyn_cast<InitListExpr>(E);
    if ((Construct && Construct->getNumArgs() == 0) || (List && List->getNumInits() == 0)) {
      // The options made here are the defaults only where their class is the library's: a class of the
      // program's (a subclass of the options) may set any option in its constructor or its members' initialisers.
      const CXXRecordDecl *Class = E->getType()->getAsCXXRecordDecl();
      if (Class && !isLibraryDeclaration(Class, Patterns, Query)) {
        Break(E, "the options are a `" + qualifiedName(Class) + "`, a class this program declares (" +
                     Query.declaredAt(Class) +
                     "), which may set any option where it is made; the fused call would pass the library's defaults");
        break;
      }
      // The object the setters are called on, as written: a compiler that reads its type otherwise (through a
      // type alias) would call other setters (edit_plan.h: analysedExpressions asserts its type).
      if (!Written || Query.text(Written).empty())
        Written = Query.text(E).empty() && LocalRead ? LocalRead : E;
      Site.Options.Objects.push_back(Written);
      break;
    }
    Break(E, "the options `" + Query.text(E) + "` cannot be read at compile time");
    break;
  }
  if (!Local)
    return;
  const PatchedOptions &Now = Site.Options.Effective;
  for (auto [Read, Before] : {std::pair(&Now.IgnoreIndexExpression, &AtLocal.IgnoreIndexExpression),
                              std::pair(&Now.LabelSmoothingExpression, &AtLocal.LabelSmoothingExpression)})
    if (!Read->empty() && *Read != *Before)
      Break(Site.Loss, "`" + *Read + "` is read where the options `" + Local->getNameAsString() +
                           "` are made (line " + std::to_string(Query.line(Local->getLocation())) +
                           "), and the fused call would read it again at the loss");
}

/// The options argument of a module construction (`CrossEntropyLoss(opts)`, also inside
/// `register_module("name", ...)`): null for a default module. Empty is set for an empty holder
/// (`CrossEntropyLoss{nullptr}`), which configures nothing; Unknown for anything else.
const Expr *constructionOptions(const Expr *Value, const PatternSet &Patterns, const AstQuery &Query, bool &Empty,
                                bool &Unknown) {
  const Expr *E = AstQuery::spelled(Value);
  if (auto Call = AstQuery::asCall(E); Call && Call->Name == "register_module" && Call->Args.size() == 2)
    E = AstQuery::spelled(Call->Args[1]);
  if (const auto *Cast = dyn_cast<CXXFunctionalCastExpr>(E))
    E = AstQuery::spelled(Cast->getSubExpr());
  const auto *Construct = dyn_cast<CXXConstructExpr>(E);
  if (!Construct || Construct->getNumArgs() > 1) {
    Unknown = true;
    return nullptr;
  }
  if (Construct->getNumArgs() == 0)
    return nullptr;
  if (isNullConstant(Construct->getArg(0), Patterns, Query)) {
    Empty = true;
    return nullptr;
  }
  return Construct->getArg(0);
}

/// A module loss: its options as constructed (for the audit, and to refuse what the fused loss cannot
/// honour), and the expression the rewritten call reads them from when the loss runs.
void captureModuleOptions(CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query,
                          const VariableUses &Uses) {
  const LossPattern &Rule = *Site.LossRule;
  auto View = AstQuery::asCall(Site.Loss);
  // The candidate matchers bind only m(x, y) on a holder and m->forward / m.forward: both have an access.
  const std::string Access = moduleAccess(*View, Query).value_or(Query.objectText(View->Object) + "->");
  const std::string Module = llvm::StringRef(Access).drop_back(Access.back() == '.' ? 1 : 2).str();
  Site.ModuleOptions = Patterns.Replacement.ModuleOptions + "(" + Access + Rule.OptionsMember +
                       (Rule.WeightMember.empty() ? "" : ", " + Access + Rule.WeightMember) + ")";
  auto Fail = [&](std::string Why) {
    if (!Site.OptionsBreak)
      Site.OptionsBreak = TraceBreak{BreakKind::OptionUnsupported, Site.Loss,
                                     "the options of the loss module `" + Module + "` cannot be determined: " + Why};
  };
  const ValueDecl *Holder = moduleDeclaration(View->Object);
  if (!Holder)
    return Fail("it is not a variable or a member");
  if (const auto *Variable = dyn_cast<VarDecl>(Holder); Variable && Variable->isLocalVarDecl())
    Site.OptionLocals.push_back(Variable);
  ModuleConstructions Found = constructionsOf(Holder, Query);
  if (!Found.Unseen.empty())
    return Fail(Found.Unseen);
  // Every construction must configure the same options; each is read like a loss call's options.
  std::optional<PatchedOptions> Agreed;
  const Expr *AgreedAt = nullptr;
  auto Agree = [&](const PatchedOptions &Options, const Expr *At) {
    auto Key = [](const PatchedOptions &O) {
      return std::tie(O.IgnoreIndex, O.LabelSmoothing, O.Reduction, O.IgnoreIndexText, O.LabelSmoothingText);
    };
    if (!Agreed) {
      Agreed = Options, AgreedAt = At;
      return true;
    }
    if (Key(*Agreed) == Key(Options))
      return true;
    std::string Lines = AgreedAt && At ? " (lines " + std::to_string(Query.line(AgreedAt->getBeginLoc())) + " and " +
                                             std::to_string(Query.line(At->getBeginLoc())) + ")"
                                       : "";
    Fail("it is constructed with different options" + Lines);
    return false;
  };
  if (Found.DefaultConstructed && !Agree(PatchedOptions(), nullptr))
    return;
  for (const Expr *Value : Found.Values) {
    bool Empty = false, Unknown = false;
    const Expr *Options = constructionOptions(Value, Patterns, Query, Empty, Unknown);
    if (Unknown)
      return Fail("it is made by `" + Query.text(AstQuery::spelled(Value)) + "`");
    if (Empty)
      continue;
    CapturedSite Scratch;
    Scratch.LossRule = Site.LossRule;
    if (Options)
      readSetters(Scratch, Options, Rule, Patterns, Query, Uses);
    if (Scratch.OptionsBreak) {
      Site.OptionsBreak = Scratch.OptionsBreak;
      return;
    }
    if (!Agree(Scratch.Options.Effective, Value))
      return;
  }
  if (!Agreed)
    return Fail("no construction of it is visible here");
  Site.Options.Effective = *Agreed;
}

}  // namespace

void captureOptions(CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query, const VariableUses &Uses) {
  const LossPattern &Rule = *Site.LossRule;
  if (Rule.isModule())
    return captureModuleOptions(Site, Patterns, Query, Uses);
  for (const auto &[Option, Index] : Rule.Positional)
    if (Index >= 0 && static_cast<unsigned>(Index) < Site.Loss->getNumArgs() &&
        !isDefaultArgument(Site.Loss->getArg(Index)))
      setOption(Site, Option, Site.Loss->getArg(Index), Patterns, Query);
  if (Rule.OptionsArgument >= 0 && static_cast<unsigned>(Rule.OptionsArgument) < Site.Loss->getNumArgs() &&
      !isDefaultArgument(Site.Loss->getArg(Rule.OptionsArgument)))
    readSetters(Site, Site.Loss->getArg(Rule.OptionsArgument), Rule, Patterns, Query, Uses);
}

}  // namespace lmfuse::rewriter
