// Site capture: follows data flow from the loss call back to the head through benign wrappers,
// rebindings and aliases, then gathers the guard, the labels and the options. Matching is by
// resolved declaration and type (the pattern set names them), never by variable names.
#include "site_capture.h"

#include "clang/AST/RecursiveASTVisitor.h"

#include "causal_shift.h"
#include "labels_trace.h"
#include "loss_options.h"
#include "pattern_match.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

/// The walk from the loss back to the head, over one function's variable uses.
class Tracer {
public:
  Tracer(CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query, const VariableUses &Uses)
      : Site(Site), Patterns(Patterns), Query(Query), Uses(Uses) {}

  void traceLogits(const Expr *E, SourceLocation Point) {
    E = stripLogitsWrappers(E);
    if (!Site.InputBase)
      Site.InputBase = E;
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
      breakAt(BreakKind::NoHeadAssignment, E, "`" + Variable->getNameAsString() +
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
      // An alias: `auto flat = logits.view(...)`; follow it to the variable it was made from, as it was
      // where the alias was made. A reference (`const auto &flat = logits`) reads that variable where the
      // reference is read: what is written to it up to there counts.
      Site.Aliases.push_back(Variable);
      Site.Chain.insert(Site.Chain.begin(), ChainStep{Producer.Node, Producer.Value, Variable, Core});
      traceLogits(Core, Variable->getType()->isReferenceType() ? Point : Producer.Node->getBeginLoc());
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
      // An nll_loss takes log-probabilities: one log_softmax over the class dimension is part of it.
      if (Call && Site.LossRule->InputLogSoftmax && !Site.LogSoftmax &&
          contains(Patterns.LogSoftmax.Callees, qualifiedName(Call->Callee)) &&
          isLibraryDeclaration(Call->Callee, Patterns, Query)) {
        if (!acceptLogSoftmax(*Call))
          return E;
        Site.LogSoftmax = E;
        E = Call->Object ? Call->Object : Call->Args[0];
        continue;
      }
      if (!Call || !Call->Object)
        return E;
      if (contains(Benign.Reshapes, Call->Name)) {
        if (!keepsClassesLast(*Call))
          return E;  // not a benign wrapper: the loss's input is then not the logits (refused as such)
        // A shift of reshaped logits (`logits.view({-1, V}).slice(-2, 0, -1)`) runs across the rows of the
        // batch; the fused call's shift stays within each row.
        if (Site.LogitsShift && changesShape(*Call)) {
          breakAt(BreakKind::Indexed, E,
                  "the logits are shifted after `" + Call->Name +
                      "`: that shift runs across the rows, the fused call's within each row");
          return E;
        }
        E = Call->Object;
      } else if (contains(Benign.UpcastMethods, Call->Name) && Call->Args.empty()) {
        addCast("." + Call->Name + "()");
        E = Call->Object;
      } else if (Call->Name == Benign.CastMethod && !Call->Args.empty() &&
                 isUpcastType(AstQuery::spelled(Call->Args[0]))) {
        addUpcast(AstQuery::spelled(Call->Args[0]));
        E = Call->Object;
      } else if (auto Shift = matchCausalShift(E, ShiftRole::Logits, Patterns, Query, Uses);
                 Shift && Shift->Shift && !Site.LogitsShift) {
        Site.LogitsShift = true;
        Site.LogitsShiftDim = Shift->Dim;
        if (Shift->Length)
          Site.ShiftLengths.push_back(Shift->Length);
        E = Call->Object;
      } else {
        return E;
      }
    }
  }

  void breakAt(BreakKind Kind, const Stmt *Node, std::string Why) {
    if (!Site.Break)
      Site.Break = TraceBreak{Kind, Node, std::move(Why)};
  }

private:
  /// Whether a reshape of the logits provably leaves the classes as the last of two dimensions, where
  /// cross_entropy reads them as the fused call does: `view`/`reshape` to exactly two sizes the last of
  /// which is not inferred (`{-1, V}`), `flatten(0, 1)` or `flatten(0, -2)`, or a reshape without arguments
  /// that keeps the shape (`contiguous()`). `view({B, V, -1})` would move the classes to dimension 1.
  bool keepsClassesLast(const CallView &Call) const {
    if (Call.Name == "flatten")
      return argumentsAre(Call.Args, {0, 1}, Query) || argumentsAre(Call.Args, {0, -2}, Query);
    if (!changesShape(Call))
      return true;
    // view/reshape given one written argument, a braced list of sizes.
    if ((Call.Name != "view" && Call.Name != "reshape") ||
        !argumentsAre(llvm::ArrayRef(Call.Args).drop_front(), {}, Query))
      return false;
    const std::string Written = Query.text(AstQuery::spelled(Call.Args[0]));
    llvm::StringRef List = llvm::StringRef(Written).trim();
    if (!List.consume_front("{") || !List.consume_back("}"))
      return false;
    // The braced list's elements, split at the commas outside brackets.
    std::vector<llvm::StringRef> Sizes;
    int Depth = 0;
    size_t Start = 0;
    for (size_t I = 0; I <= List.size(); ++I) {
      char C = I < List.size() ? List[I] : ',';
      if (C == '(' || C == '{' || C == '[')
        ++Depth;
      else if (C == ')' || C == '}' || C == ']')
        --Depth;
      else if (C == ',' && Depth == 0) {
        Sizes.push_back(List.slice(Start, I).trim());
        Start = I + 1;
      }
    }
    return Sizes.size() == 2 && !Sizes[1].empty() && !Sizes[1].starts_with("-");
  }

  /// Whether a log_softmax call is over the class dimension, with at most an upcast (its dtype);
  /// records the upcast, or the break that says why not.
  bool acceptLogSoftmax(const CallView &Call) {
    const LogSoftmaxPattern &Rule = Patterns.LogSoftmax;
    size_t DimIndex = Call.Object ? 0 : 1;  // a method's object is its input
    if (DimIndex >= Call.Args.size()) {
      breakAt(BreakKind::NotLogProbabilities, Call.Call, "`" + Call.Name + "` names no dimension");
      return false;
    }
    // The dimension, through the options class it may be converted to (F::log_softmax(x, -1)) and
    // that class's dtype setter (F::LogSoftmaxFuncOptions(-1).dtype(torch::kFloat)).
    const Expr *Dim = AstQuery::spelled(Call.Args[DimIndex]);
    const Expr *Dtype = nullptr;
    for (int Depth = 0; Depth < 8; ++Depth) {
      if (auto Setter = AstQuery::asCall(Dim); Setter && Setter->Object && Setter->Name == Rule.DtypeSetter &&
                                                 Setter->Args.size() == 1) {
        Dtype = AstQuery::spelled(Setter->Args[0]);
        Dim = AstQuery::spelled(Setter->Object);
      } else if (const auto *Cast = dyn_cast<CXXFunctionalCastExpr>(Dim)) {
        Dim = AstQuery::spelled(Cast->getSubExpr());
      } else if (const auto *Construct = dyn_cast<CXXConstructExpr>(Dim); Construct && Construct->getNumArgs() == 1) {
        Dim = AstQuery::spelled(Construct->getArg(0));
      } else {
        break;
      }
    }
    if (DimIndex + 1 < Call.Args.size() && !isDefaultArgument(Call.Args[DimIndex + 1]) &&
        !isNullConstant(Call.Args[DimIndex + 1], Patterns, Query))
      Dtype = AstQuery::spelled(Call.Args[DimIndex + 1]);
    auto Value = Query.integerValue(Dim);
    if (!Value || !llvm::is_contained(Rule.Dims, *Value)) {
      breakAt(BreakKind::NotLogProbabilities, Call.Call,
              "`" + Call.Name + "` runs over dimension `" + Query.text(Dim) +
                  "`, which is not provably the class dimension (write -1)");
      return false;
    }
    if (Dtype) {
      if (!isUpcastType(Dtype)) {
        breakAt(BreakKind::NotLogProbabilities, Call.Call,
                "`" + Call.Name + "` computes in `" + Query.text(Dtype) + "`, which is not an upcast");
        return false;
      }
      addUpcast(Dtype);
    }
    return true;
  }

  void addCast(std::string Cast) {
    if (Site.Casts.empty())
      Site.Casts.push_back(std::move(Cast));
  }

  /// A dtype the rule set names as an upcast (`torch::kFloat`), read as a constant: the fused call spells it
  /// again at the loss, where a variable named so could hold another value.
  bool isUpcastType(const Expr *Type) const {
    return contains(Patterns.Benign.UpcastTypes, lastIdentifier(Query.text(Type))) &&
           Type->isCXX11ConstantExpr(Query.context());
  }
  /// An upcast to Type (`.to(torch::kFloat)`, or a log_softmax's dtype): the fused loss gets that dtype.
  void addUpcast(const Expr *Type) {
    std::string Text = Query.text(Type);
    if (Site.Casts.empty()) {
      Site.UpcastType = Text;
      Site.CopiedToLoss.push_back(Type);
    }
    addCast("." + Patterns.Benign.CastMethod + "(" + Text + ")");
  }

  void inspectRebinding(const VariableWrite &Write, const VarDecl *Variable) {
    std::string Name = Variable->getNameAsString();
    if (Write.Kind == VariableWrite::WriteKind::InPlaceCall) {
      breakAt(BreakKind::ChangedInPlace, Write.Node, "`" + Write.Method + "` changes `" + Name + "` in place");
      return;
    }
    if (Write.Kind == VariableWrite::WriteKind::CompoundAssignment) {
      breakAt(BreakKind::CompoundAssigned, Write.Node, "a compound assignment changes `" + Name + "`");
      return;
    }
    const Expr *Core = stripLogitsWrappers(Write.Value);
    if (AstQuery::namedVariable(Core) == Variable) {
      Site.Chain.push_back(ChainStep{Write.Node, Write.Value, Variable, Core});
      return;
    }
    auto Call = AstQuery::asCall(Core);
    if (Call && (contains(Patterns.Indexing, Call->Name) ||
                 matchCausalShift(Core, ShiftRole::Logits, Patterns, Query, Uses)))
      breakAt(BreakKind::ReboundToSlice, Write.Node, "`" + Name + "` is re-bound to a slice of itself");
    else
      breakAt(BreakKind::ReboundToChange, Write.Node, "`" + Name + "` is re-bound to a changed value");
  }

  /// Names why an expression that should have been the head's output is not.
  void classify(const Expr *E) {
    auto Call = AstQuery::asCall(E);
    if (AstQuery::containsCallNamed(E, Patterns.Softcap)) {
      breakAt(BreakKind::Capped, E, "the logits are capped with tanh");
    } else if (auto Why = whyNotProductHead(E, Patterns, Query)) {
      breakAt(BreakKind::NotALinearHead, E, *Why);
    } else if (auto Why = whyNotModuleHead(E, Patterns, Query)) {
      breakAt(BreakKind::NotALinearHead, E, *Why);
    } else if (Call && contains(Patterns.Normalizers, Call->Name)) {
      breakAt(BreakKind::Normalized, E, "`" + Call->Name + "` is applied to the head's output");
    } else if (Call &&
               (contains(Patterns.Indexing, Call->Name) ||
                matchCausalShift(E, ShiftRole::Logits, Patterns, Query, Uses)) &&
               (containsHead(E, Patterns, Query) || holdsHeadOutput(E))) {
      // A slice that is not the causal shift (or a second one) says which bound is wrong.
      auto Shift = matchCausalShift(E, ShiftRole::Logits, Patterns, Query, Uses);
      if (Shift && !Shift->Shift)
        breakAt(BreakKind::Indexed, E, Shift->Why);
      else if (Shift)
        breakAt(BreakKind::Indexed, E, "the logits are shifted twice");
      else
        breakAt(BreakKind::Indexed, E, "the logits are indexed with `" + Call->Name + "`");
    } else if (containsHead(E, Patterns, Query)) {
      breakAt(BreakKind::HeadInExpression, E, "the head call is part of a larger expression");
    } else if (auto [Variable, Write] = headInputOverwritten(E); Variable) {
      breakAt(BreakKind::ChangedBeforeLoss, Write->Node,
              "`" + Variable->getNameAsString() +
                  "` is the head's input and is re-bound to its output: the fused call reads the head's input "
                  "at the loss, where `" + Variable->getNameAsString() + "` no longer holds it");
    } else if (holdsHeadOutput(E)) {
      breakAt(BreakKind::ChangedBeforeLoss, E, "the logits are changed before they reach the loss");
    } else {
      breakAt(BreakKind::NotALinearHead, E, "the logits are not produced by a torch::nn::Linear, a functional linear or a product with a weight's transpose");
    }
  }

  /// The locals E reads.
  static std::vector<const VarDecl *> variablesIn(const Expr *E) {
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
    return Finder.Variables;
  }

  /// Whether E reads a local whose value came straight from a head.
  bool holdsHeadOutput(const Expr *E) {
    for (const VarDecl *Variable : variablesIn(E))
      for (const VariableWrite &Write : Uses.writes(Variable))
        if (Write.Value && Query.before(Write.Node->getBeginLoc(), E->getBeginLoc()) &&
            matchHead(stripLogitsWrappers(Write.Value), Patterns, Query))
          return true;
    return false;
  }

  /// A local E reads that an earlier write re-bound from the head's input to the head's output
  /// (`x = lm_head(x)`), and that write; nulls when there is none.
  std::pair<const VarDecl *, const VariableWrite *> headInputOverwritten(const Expr *E) {
    for (const VarDecl *Variable : variablesIn(E))
      for (const VariableWrite &Write : Uses.writes(Variable)) {
        if (!Write.Value || !Query.before(Write.Node->getBeginLoc(), E->getBeginLoc()))
          continue;
        if (std::optional<HeadCall> Head = matchHead(stripLogitsWrappers(Write.Value), Patterns, Query);
            Head && Head->Hidden && llvm::is_contained(variablesIn(Head->Hidden), Variable))
          return {Variable, &Write};
      }
    return {nullptr, nullptr};
  }

  CapturedSite &Site;
  const PatternSet &Patterns;
  const AstQuery &Query;
  const VariableUses &Uses;
};

}  // namespace

CapturedSite captureSite(const CallExpr *Loss, const LossPattern &Rule, const PatternSet &Patterns,
                         const AstQuery &Query, const VariableUses &Uses) {
  CapturedSite Site;
  Site.Loss = Loss;
  Site.LossRule = &Rule;
  Site.Function = Query.enclosingFunction(Loss);
  Site.Body = Site.Function ? Site.Function->getBody() : nullptr;
  // Arguments as the loss sees them: a module's call operator has the module as its first operand.
  auto View = AstQuery::asCall(Loss);
  Site.Input = View->Args[Rule.Input];
  Site.Target = View->Args[Rule.Target];
  Site.Guard = findGuard(Loss, Site.Body, Patterns, Query);

  Tracer Trace(Site, Patterns, Query, Uses);
  Trace.traceLogits(Site.Input, Loss->getBeginLoc());
  if (Rule.InputLogSoftmax && !Site.LogSoftmax)
    Trace.breakAt(BreakKind::NotLogProbabilities, Site.Input,
                  "`" + Query.text(Site.Input) + "` reaches " + Rule.Callee +
                      " without log_softmax over the class dimension; it takes log-probabilities, not logits");
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

std::vector<const Stmt *> rewrittenParts(const CapturedSite &Site, bool WithOptionLocals) {
  std::vector<const Stmt *> Parts = {Site.Loss, Site.Input, Site.Target, Site.Producer};
  if (Site.Head)
    Parts.push_back(Site.Head->Call);
  Parts.push_back(Site.Guard.Condition);
  for (const ChainStep &Step : Site.Chain)
    Parts.push_back(Step.Statement);
  if (WithOptionLocals)
    for (const VarDecl *Local : Site.OptionLocals)
      Parts.push_back(Local->getInit());
  llvm::erase(Parts, nullptr);
  return Parts;
}

}  // namespace lmfuse::rewriter
