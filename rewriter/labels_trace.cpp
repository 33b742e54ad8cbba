// Traces the loss target back to the labels variable.
#include "labels_trace.h"

#include "causal_shift.h"
#include "pattern_match.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

/// The labels as the loss reached them, traced to the variable they come from.
struct LabelsTrace {
  const VarDecl *Root = nullptr;
  std::string Text;  ///< what to pass to the runtime
  bool Shift = false;
  int64_t ShiftDim = 0;  ///< the dim the shift is written on
  const Expr *Base = nullptr;  ///< where the chain of views, casts and shift of the traced expression starts
  bool Arrow = false;          ///< the chain reaches Base through `->`
  const Expr *TextFrom = nullptr;  ///< the code Text spells (a shift local's initialiser's, for unshifted labels)
  /// The arguments of the cast and move Text repeats (`kLong` of `.to(kLong)`, `dev` of `.to(dev)`).
  std::vector<const Expr *> StepsFrom;
};

/// The text of Call's device argument when Call moves the labels to a device (`.to(logits.device())`,
/// `.to(torch::kCUDA)`: the cast method with one written argument of a device type), else "". The fused
/// path evaluates that argument again, so it must give the same value: a name, a member, or a shape read
/// of the library (`logits.device()`, which the skipped logits answer) on one.
std::optional<std::string> deviceMove(const CallView &Call, const PatternSet &Patterns, const AstQuery &Query) {
  if (Call.Name != Patterns.Benign.CastMethod)
    return std::nullopt;
  std::vector<const Expr *> Written;
  for (const Expr *Argument : Call.Args)
    if (!isDefaultArgument(Argument))
      Written.push_back(Argument);
  if (Written.size() != 1)
    return std::nullopt;
  const Expr *Device = AstQuery::spelled(Written[0]);
  QualType Type = Device->getType().getNonReferenceType().getCanonicalType().getUnqualifiedType();
  const auto *Named = Type->getAsTagDecl();
  if (!Named || !contains(Patterns.Benign.LabelDeviceTypes, qualifiedName(Named)))
    return std::nullopt;
  const Expr *Read = Device;
  if (auto Shape = AstQuery::asCall(Device); Shape && Shape->Object && Shape->Args.empty() &&
                                             contains(Patterns.Benign.ShapeReads, Shape->Name) &&
                                             isLibraryDeclaration(Shape->Callee, Patterns, Query))
    Read = Shape->Object;
  if (notReevaluable(Read, Patterns, Query))
    return std::nullopt;
  return Query.text(Device);
}

/// Whether every write of a labels local after its declaration and before the loss only reshapes it
/// (`shift_labels = shift_labels.view(-1)`): it then holds its declaration's labels at the loss.
bool onlyReshapedAfterDeclaration(const VarDecl *Variable, llvm::ArrayRef<VariableWrite> Writes,
                                  const CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query) {
  for (const VariableWrite &Write : Writes.drop_front()) {
    if (!Query.before(Write.Node->getBeginLoc(), Site.Loss->getBeginLoc()))
      break;
    if (Write.Kind != VariableWrite::WriteKind::Assignment || !Write.Value)
      return false;
    const Expr *E = AstQuery::spelled(Write.Value);
    while (auto Call = AstQuery::asCall(E)) {
      if (!Call->Object || !contains(Patterns.Benign.Reshapes, Call->Name))
        break;
      E = AstQuery::spelled(Call->Object);
    }
    if (AstQuery::namedVariable(E) != Variable)
      return false;
  }
  return true;
}

// ShiftedOutside: the labels traced so far (outside E) are already shifted.
std::optional<LabelsTrace> traceLabelsFrom(const Expr *E, CapturedSite &Site, const PatternSet &Patterns,
                                           const AstQuery &Query, const VariableUses &Uses, int Depth = 0,
                                           bool ShiftedOutside = false) {
  const BenignPatterns &Benign = Patterns.Benign;
  LabelsTrace Trace;
  std::string Cast;
  const Expr *CastTo = nullptr;     // the cast's argument
  const Expr *MoveFrom = nullptr;   // the move's argument
  const Expr *Move = nullptr;       // the device move, which the labels passed make first
  std::string MoveTo;               // its argument
  const Expr *Innermost = nullptr;  // the step applied to the labels themselves
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
      // A shift of reshaped labels (`labels.view(-1).slice(-1, 1)`) runs across the rows of the batch; the
      // fused call's shift stays within each row of the labels it is given.
      if ((Trace.Shift || ShiftedOutside) && changesShape(*Call)) {
        if (!Site.LabelsBreak)
          Site.LabelsBreak = TraceBreak{BreakKind::Indexed, E,
                                        "the labels are shifted after `" + Call->Name +
                                            "`: that shift runs across the rows, the fused call's within each row"};
        break;
      }
    } else if (Call->Name == Benign.CastMethod && !Call->Args.empty() &&
               contains(Benign.LabelCastTypes, lastIdentifier(Query.text(AstQuery::spelled(Call->Args[0])))) &&
               AstQuery::spelled(Call->Args[0])->isCXX11ConstantExpr(Query.context())) {
      std::string This = "." + Call->Name + "(" + Query.text(AstQuery::spelled(Call->Args[0])) + ")";
      if (Cast.empty()) {
        Cast = This;
        CastTo = AstQuery::spelled(Call->Args[0]);
      } else if (This != Cast) {
        // The labels passed on keep one cast, the outer one: an inner cast to another type (a narrowing
        // `.to(kInt)` inside `.to(kLong)`) would be dropped, and the values it changes with it.
        if (!Site.LabelsBreak)
          Site.LabelsBreak = TraceBreak{BreakKind::LabelsNotTraced, E,
                                        "the labels are cast twice (`" + This + "`, then `" + Cast +
                                            "`): the fused call would keep only the outer cast"};
        break;
      }
    } else if (auto Device = deviceMove(*Call, Patterns, Query)) {
      if (Move) {
        if (!Site.LabelsBreak)
          Site.LabelsBreak = TraceBreak{BreakKind::LabelsNotTraced, E,
                                        "the labels are moved twice (`.to(" + *Device + ")`, then `.to(" + MoveTo +
                                            ")`): the fused call would keep only one move"};
        return std::nullopt;
      }
      Move = E;
      MoveTo = *Device;
      for (const Expr *Argument : Call->Args)
        if (!isDefaultArgument(Argument)) {
          MoveFrom = AstQuery::spelled(Argument);
          break;
        }
    } else if (auto Shift = matchCausalShift(E, ShiftRole::Labels, Patterns, Query, Uses)) {
      if (!Shift->Shift || Trace.Shift) {
        // Sliced labels next to shifted logits: name what keeps the slice from being the shift.
        if (Site.LogitsShift && !Site.LabelsBreak)
          Site.LabelsBreak =
              TraceBreak{BreakKind::Indexed, E, Shift->Shift ? "the labels are shifted twice" : Shift->Why};
        break;
      }
      Trace.Shift = true;
      Trace.ShiftDim = Shift->Dim;
      if (Shift->Length)
        Site.ShiftLengths.push_back(Shift->Length);
    } else {
      break;
    }
    Innermost = E;
    E = Call->Object;
    ThroughPointer = Arrow;
  }

  // The root: *labels, labels->..., labels.value(), a labels tensor, or a local unwrapped from them.
  const Expr *Core = AstQuery::spelled(E);
  Trace.Base = Core;
  Trace.TextFrom = Core;
  Trace.Arrow = ThroughPointer;
  if (const auto *Deref = dyn_cast<UnaryOperator>(Core); Deref && Deref->getOpcode() == UO_Deref) {
    Trace.Root = AstQuery::namedVariable(Deref->getSubExpr());
    Trace.Text = Query.text(Core);
  } else if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Core);
             Operator && (Operator->getOperator() == OO_Star || Operator->getOperator() == OO_Arrow) &&
             Operator->getNumArgs() == 1) {
    Trace.Root = AstQuery::namedVariable(Operator->getArg(0));
    Trace.Text = "*" + Query.text(AstQuery::spelled(Operator->getArg(0)));
    if (Operator->getOperator() == OO_Arrow) {  // an implicit `operator->`: its range holds the arrow
      Trace.Base = AstQuery::spelled(Operator->getArg(0));
      Trace.Arrow = true;
    }
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
        !Writes.empty() && Writes[0].Kind == VariableWrite::WriteKind::Declaration &&
        onlyReshapedAfterDeclaration(Variable, Writes, Site, Patterns, Query)) {
      auto Inner = traceLabelsFrom(Writes[0].Value, Site, Patterns, Query, Uses, Depth + 1, Trace.Shift || ShiftedOutside);
      if (!Inner) {
        // Name where the trace stopped: the local's initialiser, not the loss's use of the local.
        if (!Site.LabelsBreak)
          Site.LabelsBreak =
              TraceBreak{BreakKind::LabelsNotTraced, Writes[0].Node,
                         "`" + Variable->getNameAsString() + "` is made from `" +
                             Query.text(AstQuery::spelled(Writes[0].Value)) +
                             "`, which is not the labels (or a view, cast or unwrapped optional of them) that the "
                             "fused call could be given in its place"};
        return std::nullopt;
      }
      Site.LabelLocals.push_back(Variable);
      Trace.Root = Inner->Root;
      if (Inner->Shift && Trace.Shift) {
        // Shifted where the local is made and again where it is read: two positions dropped.
        if (!Site.LabelsBreak)
          Site.LabelsBreak = TraceBreak{BreakKind::Indexed, Writes[0].Node, "the labels are shifted twice"};
        return std::nullopt;
      }
      if (Inner->Shift) {
        // The fused call reads the unshifted labels at the loss, where the local read them at its
        // declaration: they must not be re-bound in between, nor the variables a cast or move of them reads.
        std::vector<const VarDecl *> Read = {Inner->Root};
        for (const Expr *Step : Inner->StepsFrom) {
          if (auto Shape = AstQuery::asCall(Step); Shape && Shape->Object && Shape->Args.empty())
            Step = AstQuery::spelled(Shape->Object);
          if (const VarDecl *Variable = AstQuery::namedVariable(Step))
            Read.push_back(Variable);
        }
        for (const VarDecl *Changed : Read)
          for (const VariableWrite &Write : Uses.writes(Changed))
            if (Query.before(Writes[0].Node->getBeginLoc(), Write.Node->getBeginLoc()) &&
                Query.before(Write.Node->getBeginLoc(), Site.Loss->getBeginLoc())) {
              if (!Site.LabelsBreak)
                Site.LabelsBreak = TraceBreak{BreakKind::Indexed, Write.Node,
                                              "`" + Changed->getNameAsString() + "` is re-bound after `" +
                                                  Variable->getNameAsString() +
                                                  "` was shifted from it, and the fused call would read it at the loss"};
              return std::nullopt;
            }
        Trace.Shift = true;
        Trace.ShiftDim = Inner->ShiftDim;
        Trace.Text = Inner->Text;
        Trace.TextFrom = Inner->TextFrom;
        Trace.StepsFrom = Inner->StepsFrom;
      }
    }
  }
  if (!Trace.Root || Trace.Text.empty())
    return std::nullopt;
  std::string Steps = (Move ? ".to(" + MoveTo + ")" : "") + Cast;
  if (!Steps.empty())
    Trace.Text = (Trace.Text[0] == '*' ? "(" + Trace.Text + ")" : Trace.Text) + Steps;
  for (const Expr *Step : {MoveFrom, CastTo})
    if (Step)
      Trace.StepsFrom.push_back(Step);
  if (Move && Move == Innermost) {
    // The labels passed are moved first, as the original moved them: the labels code the fused call runs
    // (once, on the labels) starts from those, not moving them again. A move after other steps stays in
    // that code, which runs from the labels themselves: a move keeps the order of the elements, so the
    // labels passed, moved first, hold what the original's hold.
    Trace.Base = Move;
    Trace.Arrow = false;
  }
  return Trace;
}

}  // namespace

void traceLabels(CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query, const VariableUses &Uses) {
  auto Trace = traceLabelsFrom(Site.Target, Site, Patterns, Query, Uses);
  if (!Trace && Site.LabelsBreak)
    return;
  if (!Trace) {
    Site.LabelsBreak = TraceBreak{BreakKind::LabelsNotTraced, Site.Target,
                                  "the loss target `" + Query.text(Site.Target) +
                                      "` is not a variable (or a view, cast or unwrapped optional of one) that "
                                      "the fused call could be given as its labels"};
    return;
  }
  Site.LabelsRoot = Trace->Root;
  Site.LabelsText = Trace->Text;
  Site.LabelsTextFrom = Trace->TextFrom;
  Site.CopiedToLoss.insert(Site.CopiedToLoss.end(), Trace->StepsFrom.begin(), Trace->StepsFrom.end());
  Site.LabelsShift = Trace->Shift;
  Site.LabelsShiftDim = Trace->ShiftDim;
  Site.TargetBase = Trace->Base;
  Site.TargetBaseArrow = Trace->Arrow;
}

}  // namespace lmfuse::rewriter
