// The causal shift by meaning: slice, narrow and index calls judged on their dim and bounds, with
// lengths proven to be the sliced tensor's own size.
#include "causal_shift.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/StmtCXX.h"
#include "llvm/ADT/STLExtras.h"

#include "pattern_match.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

/// The variable a tensor expression reads: `x`, `*x`, `x->`, `x.value()`.
const VarDecl *tensorVariable(const Expr *E) {
  E = AstQuery::spelled(E);
  if (const VarDecl *Variable = AstQuery::namedVariable(E))
    return Variable;
  if (const auto *Deref = dyn_cast<UnaryOperator>(E); Deref && Deref->getOpcode() == UO_Deref)
    return AstQuery::namedVariable(Deref->getSubExpr());
  if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(E);
      Operator && (Operator->getOperator() == OO_Star || Operator->getOperator() == OO_Arrow) &&
      Operator->getNumArgs() == 1)
    return AstQuery::namedVariable(Operator->getArg(0));
  if (auto Call = AstQuery::asCall(E); Call && Call->Object && Call->Name == "value" && Call->Args.empty())
    return AstQuery::namedVariable(Call->Object);
  return nullptr;
}

/// The qualified name of the class E has, "" for none.
std::string typeName(const Expr *E) {
  if (const CXXRecordDecl *Record = E->getType().getNonReferenceType()->getAsCXXRecordDecl())
    return qualifiedName(Record);
  return "";
}

/// x.size(d) or x.sizes()[d] on a library tensor.
struct SizeRead {
  const Expr *Tensor = nullptr;
  const VarDecl *Variable = nullptr;  ///< the tensor's variable, when it is one
  std::optional<int64_t> Dim;
};

class ShiftJudge {
public:
  ShiftJudge(ShiftRole Role, const CallView &Call, const PatternSet &Patterns, const AstQuery &Query,
             const VariableUses &Uses)
      : Role(Role), Call(Call), Patterns(Patterns), Rules(Patterns.CausalShift), Query(Query), Uses(Uses),
        Variable(tensorVariable(Call.Object)) {}

  ShiftVerdict judge() {
    ShiftVerdict Verdict;
    Verdict.Object = Call.Object;
    std::string Problem;
    if (Call.Name == Rules.SliceMethod)
      Problem = judgeSlice();
    else if (Call.Name == Rules.NarrowMethod)
      Problem = judgeNarrow();
    else
      Problem = judgeIndex();
    Verdict.Shift = Problem.empty();
    if (Verdict.Shift) {
      Verdict.Length = ProvenLength;
      Verdict.Dim = WrittenDim;
    }
    if (!Verdict.Shift) {
      std::string Verb = Call.Name == Rules.SliceMethod    ? "sliced"
                         : Call.Name == Rules.NarrowMethod ? "narrowed"
                                                           : "indexed";
      Verdict.Why = "the " + role() + " are " + Verb + " with `" + callText() + "`, which is not " +
                    (Role == ShiftRole::Logits ? "all but the last position of their sequence dimension"
                                               : "all but the first position of their last dimension") +
                    ": " + Problem;
    }
    return Verdict;
  }

private:
  std::string role() const { return Role == ShiftRole::Logits ? "logits" : "labels"; }
  std::string sizeAlong(int64_t Dim) const { return "the " + role() + "' size along dim " + std::to_string(Dim); }
  llvm::ArrayRef<int64_t> dims() const { return Role == ShiftRole::Logits ? Rules.LogitsDims : Rules.LabelsDims; }

  /// `slice(1, 0, -1)`: the call from its method name on.
  std::string callText() const {
    SourceLocation Begin = Call.Call->getBeginLoc();
    if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call.Call))
      if (const auto *Callee = dyn_cast<MemberExpr>(Member->getCallee()->IgnoreParens()))
        Begin = Callee->getMemberLoc();
    std::string Text = Query.text(SourceRange(Begin, Call.Call->getEndLoc()));
    return Text.empty() ? Call.Name + "(...)" : Text;
  }

  std::string text(const Expr *E) const { return Query.text(AstQuery::spelled(E)); }
  /// A tensor as a person would name it: its variable (`labels` for `labels->`), else its text.
  std::string tensorName(const Expr *E) const {
    const VarDecl *Named = tensorVariable(E);
    return Named ? Named->getNameAsString() : text(E);
  }

  /// The dim as written, or a problem.
  std::string checkDim(const Expr *Arg, int64_t &Dim) const {
    std::optional<int64_t> Value = isDefaultArgument(Arg) ? std::optional<int64_t>(0)
                                                          : Query.integerValue(AstQuery::spelled(Arg));
    if (!Value)
      return "its dim `" + text(Arg) + "` is not a constant";
    Dim = WrittenDim = *Value;
    if (!llvm::is_contained(dims(), Dim)) {
      std::string Allowed;
      for (int64_t D : dims())
        Allowed += (Allowed.empty() ? "" : ", ") + std::to_string(D);
      return "dim " + std::to_string(Dim) + " is not one the rewrite takes for the " + role() + "' " +
             (Role == ShiftRole::Logits ? "positions" : "last dimension") + " (" + Allowed + ")";
    }
    return "";
  }

  /// Whether an optional<int64_t> argument is absent: defaulted, or None / nullopt.
  bool isNone(const Expr *Arg) const {
    if (isDefaultArgument(Arg))
      return true;
    const Expr *E = AstQuery::spelled(Arg);
    return contains(Rules.NoneTypes, typeName(E));
  }

  std::optional<int64_t> constant(const Expr *Arg) const {
    return isDefaultArgument(Arg) ? std::nullopt : Query.integerValue(AstQuery::spelled(Arg));
  }

  /// Problem with a step: absent or 1.
  std::string checkStep(const Expr *Step) const {
    if (isNone(Step))
      return "";
    auto Value = constant(Step);
    if (Value && *Value == 1)
      return "";
    return "its step is `" + text(Step) + "`, not 1";
  }

  /// The bounds of a slice of dim Dim (absent bounds are null): the logits' `0:-1` (or `0:T - 1`),
  /// the labels' `1:` (or `1:L`). "" when they are the shift.
  std::string checkBounds(int64_t Dim, const Expr *Start, const Expr *Stop, const Expr *Step) const {
    auto StartValue = Start && !isNone(Start) ? constant(Start) : std::optional<int64_t>(0);
    if (Role == ShiftRole::Logits) {
      if (!StartValue || *StartValue != 0)
        return "it starts at `" + text(Start) + "`, not 0";
      if (!Stop || isNone(Stop))
        return "it keeps the last position";
      if (auto StopValue = constant(Stop)) {
        if (*StopValue != -1)
          return "it stops at `" + text(Stop) + "`, not -1";
      } else if (std::string Problem = proveSize(Stop, Dim, 1); !Problem.empty()) {
        return Problem;
      }
    } else {
      if (!StartValue || *StartValue != 1)
        return "it starts at `" + (Start && !isNone(Start) ? text(Start) : std::string("0")) + "`, not 1";
      if (Stop && !isNone(Stop))
        if (std::string Problem = proveSize(Stop, Dim, 0); !Problem.empty())
          return Problem;
    }
    return Step ? checkStep(Step) : "";
  }

  std::string judgeSlice() const {
    int64_t Dim = 0;
    const Expr *DimArg = Call.Args.empty() ? nullptr : Call.Args[0];
    if (std::string Problem = checkDim(DimArg, Dim); !Problem.empty())
      return Problem;
    auto Arg = [&](size_t I) -> const Expr * { return I < Call.Args.size() ? Call.Args[I] : nullptr; };
    return checkBounds(Dim, Arg(1), Arg(2), Arg(3));
  }

  std::string judgeNarrow() const {
    if (Call.Args.size() != 3)
      return "it is not narrow(dim, start, length)";
    int64_t Dim = 0;
    if (std::string Problem = checkDim(Call.Args[0], Dim); !Problem.empty())
      return Problem;
    int64_t Wanted = Role == ShiftRole::Logits ? 0 : 1;
    auto Start = constant(Call.Args[1]);
    if (!Start || *Start != Wanted)
      return "it starts at `" + text(Call.Args[1]) + "`, not " + std::to_string(Wanted);
    return proveSize(Call.Args[2], Dim, 1);
  }

  // ---- index({...}) ----------------------------------------------------------------------------

  enum class IndexKind { FullSlice, Slice, Ellipsis, Other };
  struct IndexElement {
    IndexKind Kind = IndexKind::Other;
    const Expr *Written = nullptr;
    const Expr *Start = nullptr, *Stop = nullptr, *Step = nullptr;  ///< Slice's arguments (null: absent)
  };

  /// The braced list an index call is given, or null.
  static const InitListExpr *indexList(const Expr *Arg) {
    const Expr *E = Arg;
    for (int Depth = 0; E && Depth < 8; ++Depth) {
      E = E->IgnoreImplicit()->IgnoreParens();
      if (const auto *List = dyn_cast<InitListExpr>(E))
        return List;
      if (const auto *Init = dyn_cast<CXXStdInitializerListExpr>(E))
        E = Init->getSubExpr();
      else if (const auto *Construct = dyn_cast<CXXConstructExpr>(E); Construct && Construct->getNumArgs() >= 1)
        E = Construct->getArg(0);
      else if (const auto *Cleanups = dyn_cast<ExprWithCleanups>(E))
        E = Cleanups->getSubExpr();
      else
        return nullptr;
    }
    return nullptr;
  }

  IndexElement element(const Expr *Written) const {
    IndexElement Element;
    Element.Written = Written;
    // Look through the conversion to TensorIndex (implicit, or written as TensorIndex(...)).
    const Expr *E = AstQuery::spelled(Written);
    for (int Depth = 0; E && Depth < 4 && typeName(E) == Rules.IndexType; ++Depth) {
      if (const auto *Cast = dyn_cast<CastExpr>(E))
        E = AstQuery::spelled(Cast->getSubExpr());
      else if (const auto *Construct = dyn_cast<CXXConstructExpr>(E); Construct && Construct->getNumArgs() >= 1)
        E = AstQuery::spelled(Construct->getArg(0));
      else
        break;
    }
    if (const auto *String = dyn_cast<StringLiteral>(E)) {
      if (String->getString() == Rules.EllipsisLiteral)
        Element.Kind = IndexKind::Ellipsis;
      return Element;
    }
    std::string Type = typeName(E);
    if (contains(Rules.EllipsisTypes, Type)) {
      Element.Kind = IndexKind::Ellipsis;
      return Element;
    }
    if (Type != Rules.SliceType)
      return Element;  // an integer, a bool, a tensor, None (a new dim), ...
    const Expr *Inner = E;
    while (true) {
      Inner = Inner->IgnoreImplicit()->IgnoreParens();
      if (const auto *Cast = dyn_cast<CXXFunctionalCastExpr>(Inner))
        Inner = Cast->getSubExpr();
      else
        break;
    }
    const auto *Construct = dyn_cast<CXXConstructExpr>(Inner);
    if (!Construct)
      return Element;  // a Slice held in a variable: its bounds are not written here
    auto Arg = [&](unsigned I) -> const Expr * {
      return I < Construct->getNumArgs() && !isNone(Construct->getArg(I)) ? Construct->getArg(I) : nullptr;
    };
    Element.Start = Arg(0);
    Element.Stop = Arg(1);
    Element.Step = Arg(2);
    auto Start = Element.Start ? constant(Element.Start) : std::optional<int64_t>(0);
    auto Step = Element.Step ? constant(Element.Step) : std::optional<int64_t>(1);
    bool Full = Start && *Start == 0 && !Element.Stop && Step && *Step == 1;
    Element.Kind = Full ? IndexKind::FullSlice : IndexKind::Slice;
    return Element;
  }

  std::string judgeIndex() const {
    const InitListExpr *List = Call.Args.size() == 1 ? indexList(Call.Args[0]) : nullptr;
    if (!List)
      return "its indices are not a braced list of Slice, None and Ellipsis";
    std::vector<IndexElement> Elements;
    for (const Expr *Written : List->inits())
      Elements.push_back(element(Written));
    int Sliced = -1, Ellipsis = -1;
    for (int I = 0; I < static_cast<int>(Elements.size()); ++I) {
      const IndexElement &Element = Elements[I];
      if (Element.Kind == IndexKind::Other && typeName(AstQuery::spelled(Element.Written)) == Rules.SliceType)
        return "its slice `" + text(Element.Written) + "` is not written in place, so its bounds are unknown";
      if (Element.Kind == IndexKind::Other)
        return "its index `" + text(Element.Written) + "` is not a Slice or an ellipsis";
      if (Element.Kind == IndexKind::Ellipsis) {
        if (Ellipsis >= 0)
          return "it has two ellipses";
        Ellipsis = I;
      }
      if (Element.Kind == IndexKind::Slice) {
        if (Sliced >= 0)
          return "it slices two dims";
        Sliced = I;
      }
    }
    if (Sliced < 0)
      return "it keeps every position";
    // The dim the slice lands on: its position, or counted from the end when an ellipsis precedes it.
    int64_t Dim = Ellipsis >= 0 && Ellipsis < Sliced ? -static_cast<int64_t>(Elements.size() - Sliced)
                                                     : static_cast<int64_t>(Sliced);
    if (!llvm::is_contained(dims(), Dim)) {
      std::string Allowed;
      for (int64_t D : dims())
        Allowed += (Allowed.empty() ? "" : ", ") + std::to_string(D);
      return "its slice `" + text(Elements[Sliced].Written) + "` lands on dim " + std::to_string(Dim) +
             ", not one the rewrite takes for the " + role() + "' " +
             (Role == ShiftRole::Logits ? "positions" : "last dimension") + " (" + Allowed + ")";
    }
    WrittenDim = Dim;
    const IndexElement &Slice = Elements[Sliced];
    return checkBounds(Dim, Slice.Start, Slice.Stop, Slice.Step);
  }

  // ---- the proof of a length -------------------------------------------------------------------

  std::optional<SizeRead> sizeRead(const Expr *E) const {
    auto Read = AstQuery::asCall(E);
    if (!Read || !Read->Object || !isLibraryDeclaration(Read->Callee, Patterns, Query))
      return std::nullopt;
    SizeRead Found;
    if (Read->Name == Rules.SizeMethod && Read->Args.size() == 1) {
      Found.Tensor = Read->Object;
      Found.Dim = Query.integerValue(AstQuery::spelled(Read->Args[0]));
    } else if (Read->Name == "operator[]" && Read->Args.size() == 1) {
      auto Sizes = AstQuery::asCall(Read->Object);
      if (!Sizes || !Sizes->Object || Sizes->Name != Rules.SizesMethod || !Sizes->Args.empty() ||
          !isLibraryDeclaration(Sizes->Callee, Patterns, Query))
        return std::nullopt;
      Found.Tensor = Sizes->Object;
      Found.Dim = Query.integerValue(AstQuery::spelled(Read->Args[0]));
      if (Found.Dim && *Found.Dim < 0)
        Found.Dim.reset();  // sizes()[-1] indexes an ArrayRef with a size_t: not a dim counted from the end
    } else {
      return std::nullopt;
    }
    Found.Variable = tensorVariable(Found.Tensor);
    return Found;
  }

  /// The loops around the call that do not also hold Point: a write anywhere in one of them may run
  /// between Point and the call on a later iteration.
  std::vector<const Stmt *> loopsAroundCallOnly(SourceLocation Point) const {
    std::vector<const Stmt *> Loops;
    for (const Stmt *At = Query.parentStmt(Call.Call); At; At = Query.parentStmt(At))
      if ((isa<ForStmt>(At) || isa<WhileStmt>(At) || isa<DoStmt>(At) || isa<CXXForRangeStmt>(At)) &&
          !Query.within(Point, At))
        Loops.push_back(At);
    return Loops;
  }

  /// Whether Node may run after Point and before the call: between them in the source, or anywhere in
  /// a loop around the call that does not also hold Point.
  bool runsBetween(const Stmt *Node, SourceLocation Point, llvm::ArrayRef<const Stmt *> Loops) const {
    SourceLocation At = Node->getBeginLoc();
    if (Query.before(Point, At) && Query.before(At, Call.Call->getBeginLoc()))
      return true;
    for (const Stmt *Loop : Loops)
      if (Query.within(Node, Loop))
        return true;
    return false;
  }

  /// Whether a mention hands the variable out to be changed elsewhere. A tensor is a handle: every copy
  /// shares its shape, and its in-place methods (`unsqueeze_`, `resize_`) are const. So a local copy or
  /// reference of it (`auto y = labels;`, `const auto &y = labels;`), a pointer, a by-value argument,
  /// any argument of a user function (which may call those methods, whatever the parameter type), and a
  /// library argument bound to a non-const reference or of a call named `..._` all count.
  bool handsOutForWriting(const DeclRefExpr *Mention) const {
    const Expr *Child = Mention;
    auto Parents = Query.context().getParents(*Child);
    while (!Parents.empty() && (Parents[0].get<ParenExpr>() || Parents[0].get<ImplicitCastExpr>())) {
      const auto *Cast = Parents[0].get<ImplicitCastExpr>();
      if (Cast && Cast->getCastKind() != CK_NoOp && Cast->getCastKind() != CK_DerivedToBase)
        return false;  // a value read
      Child = Parents[0].get<Expr>();
      Parents = Query.context().getParents(*Child);
    }
    if (Parents.empty())
      return false;
    auto WritableReference = [](QualType Type) {
      return Type->isReferenceType() && !Type.getNonReferenceType().isConstQualified();
    };
    if (Parents[0].get<VarDecl>())
      return true;  // a copy or a reference, const or not: either reaches the in-place methods
    if (const auto *Unary = Parents[0].get<UnaryOperator>())
      return Unary->getOpcode() == UO_AddrOf;
    const FunctionDecl *Callee = nullptr;
    std::vector<const Expr *> Args;
    if (const auto *Invocation = Parents[0].get<CallExpr>()) {
      Callee = Invocation->getDirectCallee();
      unsigned First = isa<CXXOperatorCallExpr>(Invocation) && isa_and_nonnull<CXXMethodDecl>(Callee) ? 1 : 0;
      for (unsigned I = First; I < Invocation->getNumArgs(); ++I)
        Args.push_back(Invocation->getArg(I));
    } else if (const auto *Construct = Parents[0].get<CXXConstructExpr>()) {
      // A copy (`Tensor y(labels)`, a by-value argument) shares the tensor; other constructors are
      // judged like calls.
      if (Construct->getConstructor()->isCopyOrMoveConstructor())
        return true;
      Callee = Construct->getConstructor();
      for (const Expr *Arg : Construct->arguments())
        Args.push_back(Arg);
    } else {
      return false;
    }
    for (unsigned I = 0; I < Args.size(); ++I) {
      if (Args[I] != Child)
        continue;
      if (!Callee || I >= Callee->getNumParams() || !isLibraryDeclaration(Callee, Patterns, Query))
        return true;
      const IdentifierInfo *Name = Callee->getIdentifier();
      return WritableReference(Callee->getParamDecl(I)->getType()) || (Name && Name->getName().ends_with("_"));
    }
    return false;  // the object of a call: its in-place methods are recorded as writes
  }

  /// The line of the first statement that may change Target after Point and before the call, if any:
  /// a write of it, or a mention that hands it out to be changed.
  std::optional<unsigned> changedBetween(const VarDecl *Target, SourceLocation Point) const {
    std::vector<const Stmt *> Loops = loopsAroundCallOnly(Point);
    for (const VariableWrite &Write : Uses.writes(Target)) {
      if (Query.within(Call.Call, Write.Node))
        continue;  // `logits = logits.slice(1, 0, T - 1)`: the write is of the call's result
      if (runsBetween(Write.Node, Point, Loops))
        return Query.line(Write.Node->getBeginLoc());
    }
    for (const DeclRefExpr *Mention : Uses.reads(Target))
      if (!Query.within(Mention, Call.Call) && runsBetween(Mention, Point, Loops) && handsOutForWriting(Mention))
        return Query.line(Mention->getBeginLoc());
    return std::nullopt;
  }

  /// "" when Value is proven to be the sliced tensor's size along Dim minus Minus; else why not.
  std::string proveSize(const Expr *Value, int64_t Dim, int64_t Minus) const {
    const Expr *E = AstQuery::spelled(Value);
    std::string Wanted = sizeAlong(Dim) + (Minus == 1 ? " minus one" : "");
    const Expr *Base = E;
    if (Minus != 0) {
      const auto *Difference = dyn_cast<BinaryOperator>(E);
      auto Subtracted = Difference && Difference->getOpcode() == BO_Sub
                            ? Query.integerValue(AstQuery::spelled(Difference->getRHS()))
                            : std::nullopt;
      if (!Subtracted || *Subtracted != Minus)
        return "`" + text(E) + "` is not " + Wanted;
      Base = AstQuery::spelled(Difference->getLHS());
    }
    if (auto Read = sizeRead(Base))
      return checkRead(*Read, text(Base), Dim, Call.Call->getBeginLoc());
    const VarDecl *Length = AstQuery::namedVariable(Base);
    if (!Length)
      return "`" + text(E) + "` is not " + Wanted;
    std::string Name = "`" + Length->getNameAsString() + "`";
    llvm::ArrayRef<VariableWrite> Writes = Uses.writes(Length);
    if (!Length->hasLocalStorage() || isa<ParmVarDecl>(Length) || Writes.empty() ||
        Writes[0].Kind != VariableWrite::WriteKind::Declaration)
      return Name + " is not a local initialised from " + sizeAlong(Dim);
    auto Read = sizeRead(AstQuery::spelled(Writes[0].Value));
    if (!Read)
      return Name + " is `" + text(Writes[0].Value) + "`, not " + sizeAlong(Dim);
    if (Writes.size() > 1)
      return Name + " is not proven to be " + sizeAlong(Dim) + ": it is assigned again at line " +
             std::to_string(Query.line(Writes[1].Node->getBeginLoc()));
    // Every other mention must only read its value (no reference or address that could change it).
    if (!Length->getType().isConstQualified())
      for (const DeclRefExpr *Mention : Uses.reads(Length)) {
        auto Parents = Query.context().getParents(*Mention);
        const auto *Cast = Parents.empty() ? nullptr : Parents[0].get<ImplicitCastExpr>();
        if (!Cast || Cast->getCastKind() != CK_LValueToRValue)
          return Name + " is not proven to be " + sizeAlong(Dim) + ": it may be changed through line " +
                 std::to_string(Query.line(Mention->getBeginLoc()));
      }
    if (std::string Problem = checkRead(*Read, text(Writes[0].Value), Dim, Length->getLocation()); !Problem.empty())
      return Name + " is not " + sizeAlong(Dim) + ": " + Problem;
    ProvenLength = Length;
    return "";
  }

  /// Whether a size read, made at Point, is the sliced tensor's size along Dim at the call.
  std::string checkRead(const SizeRead &Read, const std::string &Text, int64_t Dim, SourceLocation Point) const {
    if (!Variable)
      return "the sliced " + role() + " are not a variable, so `" + Text + "` is not proven to be their size";
    if (Read.Variable != Variable)
      return "`" + Text + "` is the size of `" + tensorName(Read.Tensor) + "`, not of `" + tensorName(Call.Object) +
             "`";
    if (!Read.Dim || *Read.Dim != Dim)
      return "`" + Text + "` is the size along another dim than " + std::to_string(Dim);
    if (Point != Call.Call->getBeginLoc())
      if (auto Line = changedBetween(Variable, Point))
        return "`" + Variable->getNameAsString() + "` is changed at line " + std::to_string(*Line) +
               ", after its size was read";
    return "";
  }

  ShiftRole Role;
  const CallView &Call;
  const PatternSet &Patterns;
  const CausalShiftPatterns &Rules;
  const AstQuery &Query;
  const VariableUses &Uses;
  const VarDecl *Variable;  ///< the sliced tensor's variable, when it is one
  mutable const VarDecl *ProvenLength = nullptr;
  mutable int64_t WrittenDim = 0;  ///< the dim the call slices, as written
};

}  // namespace

std::optional<ShiftVerdict> matchCausalShift(const Expr *E, ShiftRole Role, const PatternSet &Patterns,
                                             const AstQuery &Query, const VariableUses &Uses) {
  auto Call = AstQuery::asCall(E);
  const CausalShiftPatterns &Rules = Patterns.CausalShift;
  if (!Call || !Call->Object ||
      (Call->Name != Rules.SliceMethod && Call->Name != Rules.NarrowMethod && Call->Name != Rules.IndexMethod) ||
      !isLibraryDeclaration(Call->Callee, Patterns, Query))
    return std::nullopt;
  return ShiftJudge(Role, *Call, Patterns, Query, Uses).judge();
}

}  // namespace lmfuse::rewriter
