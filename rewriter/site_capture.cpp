// Site capture: follows data flow from the loss call back to the head, and records the guard,
// the labels and the options. Matching is by resolved declaration and type (the pattern set
// names them), never by variable names.
#include "site_capture.h"

#include "clang/AST/DeclTemplate.h"
#include "clang/AST/RecursiveASTVisitor.h"

#include <set>

using namespace clang;

namespace lmfuse::rewriter {
namespace {

std::string qualifiedName(const NamedDecl *Decl) { return Decl ? Decl->getQualifiedNameAsString() : ""; }

/// The last identifier of a spelling: "torch::kFloat" -> "kFloat".
llvm::StringRef lastIdentifier(llvm::StringRef Text) {
  Text = Text.trim();
  size_t Start = Text.find_last_of(":. >");
  return Start == llvm::StringRef::npos ? Text : Text.drop_front(Start + 1);
}

bool isModuleHolderOf(const CXXRecordDecl *Record, const ModuleHeadPattern &Rule) {
  const auto *Specialization = dyn_cast_or_null<ClassTemplateSpecializationDecl>(Record);
  if (!Specialization || qualifiedName(Specialization->getSpecializedTemplate()) != Rule.Holder)
    return false;
  const TemplateArgumentList &Arguments = Specialization->getTemplateArgs();
  if (Arguments.size() < 1 || Arguments[0].getKind() != TemplateArgument::Type)
    return false;
  return qualifiedName(Arguments[0].getAsType()->getAsCXXRecordDecl()) == Rule.Impl;
}

/// Whether the arguments from the first on are the given constants and the rest are defaults.
bool argumentsAre(llvm::ArrayRef<const Expr *> Args, llvm::ArrayRef<int64_t> Expected, const AstQuery &Query) {
  if (Args.size() < Expected.size())
    return false;
  for (size_t I = 0; I < Args.size(); ++I) {
    if (I < Expected.size()) {
      auto Value = Query.integerValue(AstQuery::spelled(Args[I]));
      if (!Value || *Value != Expected[I])
        return false;
    } else if (!isa<CXXDefaultArgExpr>(Args[I])) {
      return false;
    }
  }
  return true;
}

bool isDefaultArgument(const Expr *Arg) { return !Arg || isa<CXXDefaultArgExpr>(Arg); }

class HeadFinder : public RecursiveASTVisitor<HeadFinder> {
public:
  HeadFinder(const PatternSet &Patterns, const AstQuery &Query) : Patterns(Patterns), Query(Query) {}
  bool VisitCallExpr(CallExpr *Call) {
    if (matchHead(Call, Patterns, Query))
      Found = true;
    return !Found;
  }
  const PatternSet &Patterns;
  const AstQuery &Query;
  bool Found = false;
};

bool containsHead(const Stmt *S, const PatternSet &Patterns, const AstQuery &Query) {
  HeadFinder Finder(Patterns, Query);
  Finder.TraverseStmt(const_cast<Stmt *>(S));
  return Finder.Found;
}

/// The walk from the loss back to the head, over one function's variable uses.
class Tracer {
public:
  Tracer(CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query, const VariableUses &Uses)
      : Site(Site), Patterns(Patterns), Query(Query), Uses(Uses) {}

  void traceLogits(const Expr *E, SourceLocation Point) {
    E = stripLogitsWrappers(E);
    if (auto Head = matchHead(E, Patterns, Query)) {
      Site.Head = Head;
      return;
    }
    const VarDecl *Variable = AstQuery::namedVariable(E);
    if (!Variable || !Variable->hasLocalStorage() || isa<ParmVarDecl>(Variable)) {
      classify(E);
      return;
    }
    llvm::ArrayRef<VariableWrite> Writes = Uses.writes(Variable);
    int ProducerIndex = -1;
    for (int I = 0; I < static_cast<int>(Writes.size()); ++I) {
      const VariableWrite &Write = Writes[I];
      if (!Query.before(Write.Node->getBeginLoc(), Point))
        break;
      bool Fresh = Write.Kind == VariableWrite::WriteKind::Declaration ||
                   (Write.Kind == VariableWrite::WriteKind::Assignment && !AstQuery::mentions(Write.Value, Variable));
      if (Fresh)
        ProducerIndex = I;
    }
    if (ProducerIndex < 0) {
      breakAt(ReasonKind::HeadNotLinear, E, "`" + Variable->getNameAsString() +
                                                "` is not assigned the output of a head in this function");
      return;
    }
    // Everything written to the variable between its producer and the point of use.
    for (size_t I = ProducerIndex + 1; I < Writes.size(); ++I) {
      const VariableWrite &Write = Writes[I];
      if (!Query.before(Write.Node->getBeginLoc(), Point))
        break;
      Site.Inspected.push_back(Write.Node);
      inspectRebinding(Write, Variable);
    }
    const VariableWrite &Producer = Writes[ProducerIndex];
    Site.Inspected.push_back(Producer.Node);
    const Expr *Core = stripLogitsWrappers(Producer.Value);
    if (auto Head = matchHead(Core, Patterns, Query)) {
      Site.Head = Head;
      Site.Producer = Producer.Node;
      Site.ProducerValue = Producer.Value;
      Site.Logits = Variable;
      return;
    }
    const VarDecl *Source = AstQuery::namedVariable(Core);
    if (Source && Source->hasLocalStorage() && !isa<ParmVarDecl>(Source) && Source != Variable) {
      // An alias: `auto flat = logits.view(...)`; follow it to the variable it was made from.
      Site.Aliases.push_back(Variable);
      Site.Chain.insert(Site.Chain.begin(), ChainStep{Producer.Node, Producer.Value, Variable});
      traceLogits(Core, Producer.Node->getBeginLoc());
      return;
    }
    Site.Logits = Variable;
    Site.Producer = Producer.Node;
    Site.ProducerValue = Producer.Value;
    classify(Core);
  }

  const Expr *stripLogitsWrappers(const Expr *E) {
    const BenignPatterns &Benign = Patterns.Benign;
    while (true) {
      E = AstQuery::spelled(E);
      auto Call = AstQuery::asCall(E);
      if (!Call || !Call->Object)
        return E;
      if (contains(Benign.Reshapes, Call->Name)) {
        E = Call->Object;
      } else if (contains(Benign.UpcastMethods, Call->Name) && Call->Args.empty()) {
        addCast("." + Call->Name + "()");
        E = Call->Object;
      } else if (Call->Name == Benign.CastMethod && !Call->Args.empty() &&
                 contains(Benign.UpcastTypes, lastIdentifier(Query.text(AstQuery::spelled(Call->Args[0]))))) {
        addCast("." + Call->Name + "(" + Query.text(AstQuery::spelled(Call->Args[0])) + ")");
        E = Call->Object;
      } else if (Call->Name == Benign.ShiftMethod && !Site.LogitsShift &&
                 argumentsAre(Call->Args, Benign.ShiftLogitsArguments, Query)) {
        Site.LogitsShift = true;
        E = Call->Object;
      } else {
        return E;
      }
    }
  }

private:
  void addCast(std::string Cast) {
    if (Site.Casts.empty())
      Site.Casts.push_back(std::move(Cast));
  }

  void breakAt(ReasonKind Reason, const Stmt *Node, std::string Why) {
    if (!Site.Break)
      Site.Break = TraceBreak{Reason, Node, std::move(Why)};
  }

  void inspectRebinding(const VariableWrite &Write, const VarDecl *Variable) {
    std::string Name = Variable->getNameAsString();
    if (Write.Kind == VariableWrite::WriteKind::InPlaceCall) {
      breakAt(ReasonKind::LogitsRebound, Write.Node, "`" + Write.Method + "` changes `" + Name + "` in place");
      return;
    }
    if (Write.Kind == VariableWrite::WriteKind::CompoundAssignment) {
      breakAt(ReasonKind::LogitsRebound, Write.Node, "a compound assignment changes `" + Name + "`");
      return;
    }
    const Expr *Core = stripLogitsWrappers(Write.Value);
    if (AstQuery::namedVariable(Core) == Variable) {
      Site.Chain.push_back(ChainStep{Write.Node, Write.Value, Variable});
      return;
    }
    auto Call = AstQuery::asCall(Core);
    if (Call && (contains(Patterns.Indexing, Call->Name) || Call->Name == Patterns.Benign.ShiftMethod))
      breakAt(ReasonKind::LogitsIndexed, Write.Node, "`" + Name + "` is re-bound to a slice of itself");
    else
      breakAt(ReasonKind::LogitsRebound, Write.Node, "`" + Name + "` is re-bound to a changed value");
  }

  /// Names why an expression that should have been the head's output is not.
  void classify(const Expr *E) {
    auto Call = AstQuery::asCall(E);
    if (AstQuery::containsCallNamed(E, Patterns.Softcap)) {
      breakAt(ReasonKind::LogitsSoftcapped, E, "the logits are capped with tanh");
    } else if (Call && contains(Patterns.Normalizers, Call->Name)) {
      breakAt(ReasonKind::HeadNotLinear, E, "`" + Call->Name + "` is applied to the head's output");
    } else if (Call && (contains(Patterns.Indexing, Call->Name) || Call->Name == Patterns.Benign.ShiftMethod) &&
               (containsHead(E, Patterns, Query) || holdsHeadOutput(E))) {
      breakAt(ReasonKind::LogitsIndexed, E, "the logits are indexed with `" + Call->Name + "`");
    } else if (containsHead(E, Patterns, Query)) {
      breakAt(ReasonKind::HeadWrapped, E, "the head call is part of a larger expression");
    } else if (holdsHeadOutput(E)) {
      breakAt(ReasonKind::LogitsRebound, E, "the logits are changed before they reach the loss");
    } else {
      breakAt(ReasonKind::HeadNotLinear, E, "the logits are not produced by a torch::nn::Linear or a functional linear");
    }
  }

  /// Whether E reads a local whose value came straight from a head.
  bool holdsHeadOutput(const Expr *E) {
    class RefFinder : public RecursiveASTVisitor<RefFinder> {
    public:
      bool VisitDeclRefExpr(DeclRefExpr *Ref) {
        if (auto *Variable = dyn_cast<VarDecl>(Ref->getDecl()))
          Variables.push_back(Variable);
        return true;
      }
      std::vector<const VarDecl *> Variables;
    } Finder;
    Finder.TraverseStmt(const_cast<Expr *>(E));
    for (const VarDecl *Variable : Finder.Variables)
      for (const VariableWrite &Write : Uses.writes(Variable))
        if (Write.Value && Query.before(Write.Node->getBeginLoc(), E->getBeginLoc()) &&
            matchHead(stripLogitsWrappers(Write.Value), Patterns, Query))
          return true;
    return false;
  }

  CapturedSite &Site;
  const PatternSet &Patterns;
  const AstQuery &Query;
  const VariableUses &Uses;
};

// ---- guard ----------------------------------------------------------------------------------

struct GuardTest {
  const VarDecl *Labels = nullptr;
  bool Present = true;   ///< the condition is true when the labels are present
  std::string Positive;  ///< source text of the presence test
};

bool isNullConstant(const Expr *E, const PatternSet &Patterns, const AstQuery &Query) {
  E = AstQuery::spelled(E);
  return isa<CXXNullPtrLiteralExpr>(E) || contains(Patterns.Guards.NullConstants, Query.text(E));
}

std::optional<GuardTest> parseGuard(const Expr *Condition, const PatternSet &Patterns, const AstQuery &Query) {
  const Expr *E = AstQuery::spelled(Condition);
  if (const auto *Not = dyn_cast<UnaryOperator>(E); Not && Not->getOpcode() == UO_LNot) {
    auto Inner = parseGuard(Not->getSubExpr(), Patterns, Query);
    if (Inner)
      Inner->Present = !Inner->Present;
    return Inner;
  }
  // labels != nullptr, labels == c10::nullopt
  const Expr *Left = nullptr, *Right = nullptr;
  bool Equal = false;
  if (const auto *Binary = dyn_cast<BinaryOperator>(E); Binary && Binary->isEqualityOp()) {
    Left = Binary->getLHS(), Right = Binary->getRHS(), Equal = Binary->getOpcode() == BO_EQ;
  } else if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(E);
             Operator && Operator->getNumArgs() == 2 &&
             (Operator->getOperator() == OO_EqualEqual || Operator->getOperator() == OO_ExclaimEqual)) {
    Left = Operator->getArg(0), Right = Operator->getArg(1), Equal = Operator->getOperator() == OO_EqualEqual;
  }
  if (Left && Right) {
    if (isNullConstant(Left, Patterns, Query))
      std::swap(Left, Right);
    const VarDecl *Labels = AstQuery::namedVariable(Left);
    if (!Labels || !isNullConstant(Right, Patterns, Query))
      return std::nullopt;
    std::string Positive = Query.text(AstQuery::spelled(Left)) + " != " + Query.text(AstQuery::spelled(Right));
    return GuardTest{Labels, !Equal, Positive};
  }
  // labels.has_value(), labels.defined()
  if (auto Call = AstQuery::asCall(E); Call && Call->Object && Call->Args.empty() &&
                                       contains(Patterns.Guards.Methods, Call->Name)) {
    if (const VarDecl *Labels = AstQuery::namedVariable(Call->Object))
      return GuardTest{Labels, true, Query.text(E)};
    return std::nullopt;
  }
  // if (labels) on an optional or a pointer
  if (const VarDecl *Labels = AstQuery::namedVariable(E)) {
    QualType Type = Labels->getType().getNonReferenceType();
    if (!Type->isBooleanType() && !Type->isIntegralOrEnumerationType())
      return GuardTest{Labels, true, Query.text(E)};
  }
  return std::nullopt;
}

bool endsInReturn(const Stmt *S) {
  if (isa_and_nonnull<ReturnStmt>(S))
    return true;
  if (const auto *Block = dyn_cast_or_null<CompoundStmt>(S))
    return !Block->body_empty() && isa<ReturnStmt>(Block->body_back());
  return false;
}

LabelsGuard findGuard(const CallExpr *Loss, const Stmt *Body, const PatternSet &Patterns, const AstQuery &Query) {
  const Stmt *Previous = Loss;
  for (const Stmt *Parent = Query.parentStmt(Loss); Parent; Previous = Parent, Parent = Query.parentStmt(Parent)) {
    if (const auto *If = dyn_cast<IfStmt>(Parent)) {
      if (Previous == If->getCond() || Previous == If->getInit() || Previous == If->getConditionVariableDeclStmt())
        continue;
      bool InThen = Previous == If->getThen();
      const Stmt *Taken = InThen ? If->getThen() : If->getElse();
      const Stmt *NotTaken = InThen ? If->getElse() : If->getThen();
      auto Test = parseGuard(If->getCond(), Patterns, Query);
      if (Test && Test->Present == InThen)
        return LabelsGuard{GuardKind::Branch, If, Taken, NotTaken, Test->Labels, Test->Positive};
      std::string Condition = Query.text(AstQuery::spelled(If->getCond()));
      return LabelsGuard{GuardKind::Unrelated, If, Taken, NotTaken, nullptr,
                         InThen ? Condition : "!(" + Condition + ")"};
    }
    if (const auto *Block = dyn_cast<CompoundStmt>(Parent)) {
      // An earlier `if (!labels) return ...;` in this block guards everything after it.
      for (const Stmt *Statement : Block->body()) {
        if (Statement == Previous)
          break;
        const auto *If = dyn_cast<IfStmt>(Statement);
        if (!If || If->getElse() || !endsInReturn(If->getThen()))
          continue;
        auto Test = parseGuard(If->getCond(), Patterns, Query);
        if (Test && !Test->Present)
          return LabelsGuard{GuardKind::EarlyReturn, If, nullptr, nullptr, Test->Labels, Test->Positive};
      }
    }
    if (Parent == Body || isa<LambdaExpr>(Parent))
      break;
  }
  return LabelsGuard{};
}

// ---- labels ---------------------------------------------------------------------------------

/// The labels as the loss reached them, traced to the variable they come from.
struct LabelsTrace {
  const VarDecl *Root = nullptr;
  std::string Text;  ///< what to pass to the runtime
  bool Shift = false;
};

std::optional<LabelsTrace> traceLabelsFrom(const Expr *E, CapturedSite &Site, const PatternSet &Patterns,
                                           const AstQuery &Query, const VariableUses &Uses, int Depth = 0) {
  const BenignPatterns &Benign = Patterns.Benign;
  LabelsTrace Trace;
  std::string Cast;
  bool ThroughPointer = false;
  while (true) {
    E = AstQuery::spelled(E);
    auto Call = AstQuery::asCall(E);
    if (!Call || !Call->Object)
      break;
    bool Arrow = false;
    if (const auto *Member = dyn_cast<CXXMemberCallExpr>(E))
      if (const auto *Callee = dyn_cast<MemberExpr>(Member->getCallee()->IgnoreParens()))
        Arrow = Callee->isArrow();
    if (contains(Benign.Reshapes, Call->Name)) {
    } else if (Call->Name == Benign.CastMethod && !Call->Args.empty() &&
               contains(Benign.LabelCastTypes, lastIdentifier(Query.text(AstQuery::spelled(Call->Args[0]))))) {
      if (Cast.empty())
        Cast = "." + Call->Name + "(" + Query.text(AstQuery::spelled(Call->Args[0])) + ")";
    } else if (Call->Name == Benign.ShiftMethod && !Trace.Shift &&
               argumentsAre(Call->Args, Benign.ShiftLabelsArguments, Query)) {
      Trace.Shift = true;
    } else {
      break;
    }
    E = Call->Object;
    ThroughPointer = Arrow;
  }

  // The root: *labels, labels->..., labels.value(), a labels tensor, or a local unwrapped from them.
  const Expr *Core = AstQuery::spelled(E);
  if (const auto *Deref = dyn_cast<UnaryOperator>(Core); Deref && Deref->getOpcode() == UO_Deref) {
    Trace.Root = AstQuery::namedVariable(Deref->getSubExpr());
    Trace.Text = Query.text(Core);
  } else if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Core);
             Operator && (Operator->getOperator() == OO_Star || Operator->getOperator() == OO_Arrow) &&
             Operator->getNumArgs() == 1) {
    Trace.Root = AstQuery::namedVariable(Operator->getArg(0));
    Trace.Text = "*" + Query.text(AstQuery::spelled(Operator->getArg(0)));
  } else if (auto Call = AstQuery::asCall(Core); Call && Call->Object && Call->Name == "value" && Call->Args.empty()) {
    Trace.Root = AstQuery::namedVariable(Call->Object);
    Trace.Text = Query.text(Core);
  } else if (const VarDecl *Variable = AstQuery::namedVariable(Core)) {
    Trace.Root = Variable;
    Trace.Text = ThroughPointer ? "*" + Query.text(Core) : Query.text(Core);
    llvm::ArrayRef<VariableWrite> Writes = Uses.writes(Variable);
    // A local unwrapped from the labels (`auto y = *labels;`): keep the local, but trace where it
    // came from; a local that holds shifted labels is replaced by the unshifted labels.
    if (Depth < 8 && Variable != Site.Guard.Labels && Variable->hasLocalStorage() && !isa<ParmVarDecl>(Variable) &&
        Writes.size() == 1 && Writes[0].Kind == VariableWrite::WriteKind::Declaration) {
      auto Inner = traceLabelsFrom(Writes[0].Value, Site, Patterns, Query, Uses, Depth + 1);
      if (!Inner)
        return std::nullopt;
      Site.LabelLocals.push_back(Variable);
      Trace.Root = Inner->Root;
      if (Inner->Shift) {
        Trace.Shift = true;
        Trace.Text = Inner->Text;
      }
    }
  }
  if (!Trace.Root || Trace.Text.empty())
    return std::nullopt;
  if (!Cast.empty())
    Trace.Text = (Trace.Text[0] == '*' ? "(" + Trace.Text + ")" : Trace.Text) + Cast;
  return Trace;
}

void traceLabels(CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query, const VariableUses &Uses) {
  auto Trace = traceLabelsFrom(Site.Target, Site, Patterns, Query, Uses);
  if (!Trace) {
    Site.LabelsBreak = TraceBreak{ReasonKind::LabelsMismatch, Site.Target,
                                  "the loss target `" + Query.text(Site.Target) + "` is not a labels variable"};
    return;
  }
  Site.LabelsRoot = Trace->Root;
  Site.LabelsText = Trace->Text;
  Site.LabelsShift = Trace->Shift;
}

// ---- options --------------------------------------------------------------------------------

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
      Site.OptionsBreak = TraceBreak{ReasonKind::LossUnsupported, Value, std::move(Why)};
  };
  if (Option == "ignore_index") {
    if (auto Integer = Query.integerValue(Spelled))
      Options.Effective.IgnoreIndex = *Integer;
    else
      Options.Effective.IgnoreIndexExpression = Query.text(Spelled);
    Options.IgnoreIndexText = Query.text(Spelled);
  } else if (Option == "label_smoothing") {
    if (auto Float = Query.floatValue(Spelled))
      Options.Effective.LabelSmoothing = *Float;
    else
      Options.Effective.LabelSmoothingExpression = Query.text(Spelled);
    Options.LabelSmoothingText = Query.text(Spelled);
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
          Site.OptionsBreak = TraceBreak{ReasonKind::LossUnsupported, E,
                                         "the option `" + Call->Name + "` is not supported by the fused loss"};
      } else {
        std::string Option;
        for (const auto &[Runtime, Setter] : Rule.Setters)
          if (Setter == Call->Name)
            Option = Runtime;
        if (Option.empty() || Call->Args.size() != 1) {
          if (!Site.OptionsBreak)
            Site.OptionsBreak = TraceBreak{ReasonKind::LossUnsupported, E,
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
        Site.OptionsBreak = TraceBreak{ReasonKind::LossUnsupported, E,
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
      Site.OptionsBreak = TraceBreak{ReasonKind::LossUnsupported, E,
                                     "the options `" + Query.text(E) + "` cannot be read at compile time"};
    return;
  }
}

// ---- module bias --------------------------------------------------------------------------

/// Expressions that construct or assign a module holder: a local's initialiser, a member's
/// in-class initialiser, its constructor initialisers, and assignments in constructor bodies.
class HolderConstruction : public RecursiveASTVisitor<HolderConstruction> {
public:
  explicit HolderConstruction(const ValueDecl *Holder) : Holder(Holder) {}
  bool VisitCXXOperatorCallExpr(CXXOperatorCallExpr *Operator) {
    if (Operator->getOperator() == OO_Equal && Operator->getNumArgs() == 2 && assigns(Operator->getArg(0)))
      Values.push_back(Operator->getArg(1));
    return true;
  }
  bool assigns(const Expr *Target) const {
    Target = AstQuery::spelled(Target);
    if (const auto *Member = dyn_cast<MemberExpr>(Target))
      return Member->getMemberDecl() == Holder;
    if (const auto *Ref = dyn_cast<DeclRefExpr>(Target))
      return Ref->getDecl() == Holder;
    return false;
  }
  const ValueDecl *Holder;
  std::vector<const Expr *> Values;
};

/// Whether a value sets the option `bias` to false (`LinearOptions(d, v).bias(false)`).
bool disablesBias(const Expr *Value, const AstQuery &Query) {
  class BiasFinder : public RecursiveASTVisitor<BiasFinder> {
  public:
    explicit BiasFinder(const AstQuery &Query) : Query(Query) {}
    bool VisitCXXMemberCallExpr(CXXMemberCallExpr *Call) {
      const CXXMethodDecl *Method = Call->getMethodDecl();
      if (Method && Method->getDeclName().isIdentifier() && Method->getName() == "bias" && Call->getNumArgs() == 1)
        if (auto Value = Query.integerValue(AstQuery::spelled(Call->getArg(0))); Value && *Value == 0)
          Found = true;
      return !Found;
    }
    const AstQuery &Query;
    bool Found = false;
  } Finder(Query);
  Finder.TraverseStmt(const_cast<Expr *>(Value));
  return Finder.Found;
}

bool moduleHasBias(const Expr *Object, const AstQuery &Query) {
  const Expr *Spelled = AstQuery::spelled(Object);
  if (const auto *Arrow = dyn_cast_or_null<CXXOperatorCallExpr>(Spelled); Arrow && Arrow->getOperator() == OO_Arrow)
    Spelled = AstQuery::spelled(Arrow->getArg(0));  // m->forward(x): the holder behind operator->
  const ValueDecl *Holder = nullptr;
  if (const auto *Member = dyn_cast_or_null<MemberExpr>(Spelled))
    Holder = Member->getMemberDecl();
  else if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(Spelled))
    Holder = Ref->getDecl();
  if (!Holder)
    return true;
  HolderConstruction Construction(Holder);
  if (const auto *Variable = dyn_cast<VarDecl>(Holder); Variable && Variable->getInit())
    Construction.Values.push_back(Variable->getInit());
  if (const auto *Field = dyn_cast<FieldDecl>(Holder)) {
    if (Field->hasInClassInitializer() && Field->getInClassInitializer())
      Construction.Values.push_back(Field->getInClassInitializer());
    if (const auto *Record = dyn_cast<CXXRecordDecl>(Field->getParent()))
      for (const CXXConstructorDecl *Constructor : Record->ctors()) {
        const FunctionDecl *Definition = nullptr;
        if (!Constructor->hasBody(Definition))
          continue;
        for (const CXXCtorInitializer *Init : cast<CXXConstructorDecl>(Definition)->inits())
          if (Init->getMember() == Field && Init->isWritten())
            Construction.Values.push_back(Init->getInit());
        Construction.TraverseStmt(Definition->getBody());
      }
  }
  for (const Expr *Value : Construction.Values)
    if (disablesBias(Value, Query))
      return false;
  return true;
}

}  // namespace

std::optional<HeadCall> matchHead(const Expr *E, const PatternSet &Patterns, const AstQuery &Query) {
  E = AstQuery::spelled(E);
  auto Call = AstQuery::asCall(E);
  if (!Call)
    return std::nullopt;
  const auto *Method = dyn_cast<CXXMethodDecl>(Call->Callee);
  for (const ModuleHeadPattern &Rule : Patterns.ModuleHeads) {
    if (!Method || Call->Args.empty())
      continue;
    std::string Object;
    if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(E);
        Operator && Operator->getOperator() == OO_Call && isModuleHolderOf(Method->getParent(), Rule)) {
      Object = Query.text(AstQuery::spelled(Call->Object)) + "->";  // m(x): the holder's operator()
    } else if (const auto *Member = dyn_cast<CXXMemberCallExpr>(E);
               Member && Method->getNameAsString() == Rule.Method && qualifiedName(Method->getParent()) == Rule.Impl) {
      const auto *Callee = dyn_cast<MemberExpr>(Member->getCallee()->IgnoreParens());
      if (!Callee)
        continue;
      const Expr *Base = Callee->getBase()->IgnoreImplicit();
      if (const auto *Arrow = dyn_cast<CXXOperatorCallExpr>(Base); Arrow && Arrow->getOperator() == OO_Arrow)
        Object = Query.text(AstQuery::spelled(Arrow->getArg(0))) + "->";  // m->forward(x) on the holder
      else
        Object = Query.text(AstQuery::spelled(Base)) + (Callee->isArrow() ? "->" : ".");
    } else {
      continue;
    }
    HeadCall Head;
    Head.Kind = HeadKind::Module;
    Head.Call = E;
    Head.Object = Call->Object;
    Head.Hidden = Call->Args[0];
    Head.Text = llvm::StringRef(Object).drop_back(Object.back() == '.' ? 1 : 2).str();
    Head.Weight = Object + Rule.Weight;
    Head.Bias = Object + Rule.Bias;
    return Head;
  }
  std::string Callee = qualifiedName(Call->Callee);
  for (const FunctionHeadPattern &Rule : Patterns.FunctionHeads) {
    if (Callee != Rule.Callee || Call->Object || Call->Args.size() <= std::max(Rule.Input, Rule.Weight))
      continue;
    HeadCall Head;
    Head.Kind = HeadKind::Function;
    Head.Call = E;
    Head.Hidden = Call->Args[Rule.Input];
    Head.Text = Query.text(E);
    Head.Weight = Query.text(AstQuery::spelled(Call->Args[Rule.Weight]));
    if (Rule.Bias < Call->Args.size() && !isDefaultArgument(Call->Args[Rule.Bias]) &&
        !isNullConstant(Call->Args[Rule.Bias], Patterns, Query))
      Head.Bias = Query.text(AstQuery::spelled(Call->Args[Rule.Bias]));
    return Head;
  }
  return std::nullopt;
}

CapturedSite captureSite(const CallExpr *Loss, const LossPattern &Rule, const PatternSet &Patterns,
                         const AstQuery &Query, const VariableUses &Uses) {
  CapturedSite Site;
  Site.Loss = Loss;
  Site.LossRule = &Rule;
  Site.Function = Query.enclosingFunction(Loss);
  Site.Body = Site.Function ? Site.Function->getBody() : nullptr;
  Site.Input = Loss->getArg(Rule.Input);
  Site.Target = Loss->getArg(Rule.Target);
  Site.Guard = findGuard(Loss, Site.Body, Patterns, Query);

  Tracer Trace(Site, Patterns, Query, Uses);
  Trace.traceLogits(Site.Input, Loss->getBeginLoc());
  traceLabels(Site, Patterns, Query, Uses);
  captureOptions(Site, Patterns, Query, Uses);
  if (Site.Head && Site.Producer) {
    const VarDecl *Hidden = AstQuery::namedVariable(Site.Head->Hidden);
    bool Changed = !Hidden;
    if (Hidden)
      for (const VariableWrite &Write : Uses.writes(Hidden))
        if (Query.before(Site.Producer->getBeginLoc(), Write.Node->getBeginLoc()) &&
            Query.before(Write.Node->getBeginLoc(), Loss->getBeginLoc()))
          Changed = true;
    Site.HoistHidden = Changed;
  }
  Site.Options.Effective.Shift = Site.LogitsShift;
  Site.Options.Effective.Bias = Site.Head && !Site.Head->Bias.empty() &&
                                (Site.Head->Kind != HeadKind::Module || moduleHasBias(Site.Head->Object, Query));
  return Site;
}

}  // namespace lmfuse::rewriter
