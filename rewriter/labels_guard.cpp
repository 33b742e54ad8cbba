// Finds and parses the guard of a loss call: walks up from the loss to the innermost if or ?:, or back
// through the enclosing blocks to an early return on absent labels.
#include "labels_guard.h"

#include "pattern_match.h"

#include "clang/AST/RecursiveASTVisitor.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

struct GuardTest {
  const VarDecl *Labels = nullptr;
  bool Present = true;  ///< the condition is true when the labels are present
};

/// The condition as the rewrite writes it again at the head (after `&&`): its own text, converted to bool as the
/// `if` or `?:` converted it, negated where the loss runs when it is false. Only built-in operators then apply
/// to what the rewrite writes around it: a program's `operator&&` or `operator!` for the labels' type (an
/// optional, a pointer) cannot take the written `&&` or `!`, and an equality the program wrote is evaluated as
/// it wrote it, never turned into another operator.
/// The test and, inside it, the program's code it repeats (the condition, or the operand of its `!`).
struct RepeatedTest {
  std::string Text;
  const Expr *Repeated = nullptr;
  unsigned RepeatedAt = 0;  ///< where Repeated's text starts in Text
};
RepeatedTest asTest(const Expr *Condition, bool Holds, const AstQuery &Query) {
  const Expr *Spelled = AstQuery::spelled(Condition);
  if (const auto *Not = dyn_cast<UnaryOperator>(Spelled); Not && Not->getOpcode() == UO_LNot && !Holds)
    return asTest(Not->getSubExpr(), true, Query);  // the built-in `!` undone: `labels.has_value()`, not `!(!...)`
  std::string Text = Query.text(Spelled);
  std::string Before;
  if (Spelled->getType()->isBooleanType()) {
    bool Simple = Text.find_first_of(" !?&|<>=,") == std::string::npos;
    Before = Holds ? (Simple ? "" : "(") : "!(";
  } else {
    Before = Holds ? "static_cast<bool>(" : "!static_cast<bool>(";
  }
  return {Before + Text + (Before.empty() ? "" : ")"), Spelled, static_cast<unsigned>(Before.size())};
}

LabelsGuard makeGuard(GuardKind Kind, const Stmt *Construct, const Expr *Condition, const Stmt *Taken,
                      const Stmt *NotTaken, const VarDecl *Labels, bool Holds, const AstQuery &Query) {
  RepeatedTest Test = asTest(Condition, Holds, Query);
  return LabelsGuard{Kind, Construct, Condition, Taken, NotTaken, Labels, Test.Text, Test.Repeated, Test.RepeatedAt};
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
    return GuardTest{Labels, !Equal};
  }
  // labels.has_value(), labels.defined()
  if (auto Call = AstQuery::asCall(E); Call && Call->Object && Call->Args.empty() &&
                                       contains(Patterns.Guards.Methods, Call->Name)) {
    if (const VarDecl *Labels = AstQuery::namedVariable(Call->Object))
      return GuardTest{Labels, true};
    return std::nullopt;
  }
  // if (labels) on an optional or a pointer
  if (const VarDecl *Labels = AstQuery::namedVariable(E)) {
    QualType Type = Labels->getType().getNonReferenceType();
    if (!Type->isBooleanType() && !Type->isIntegralOrEnumerationType())
      return GuardTest{Labels, true};
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

/// Whether a method of the translation unit overrides Method (a call of Method may then run it).
bool overriddenInUnit(const CXXMethodDecl *Method, ASTContext &Context) {
  class Overrides : public RecursiveASTVisitor<Overrides> {
  public:
    explicit Overrides(const CXXMethodDecl *Method) : Method(Method->getCanonicalDecl()) {}
    bool shouldVisitTemplateInstantiations() const { return true; }
    bool VisitCXXMethodDecl(CXXMethodDecl *Candidate) {
      Found = Found || overrides(Candidate);
      return !Found;
    }
    bool overrides(const CXXMethodDecl *Candidate) const {
      for (const CXXMethodDecl *Base : Candidate->overridden_methods())
        if (Base->getCanonicalDecl() == Method || overrides(Base))
          return true;
      return false;
    }
    const CXXMethodDecl *Method;
    bool Found = false;
  } Finder(Method);
  Finder.TraverseDecl(Context.getTranslationUnitDecl());
  return Finder.Found;
}

/// The guard a branch of If-or-?: Construct gives the loss (InThen: the loss is in its first branch).
LabelsGuard branchGuard(const Stmt *Construct, const Expr *Condition, bool InThen, const Stmt *Taken,
                        const Stmt *NotTaken, const PatternSet &Patterns, const AstQuery &Query) {
  auto Test = parseGuard(Condition, Patterns, Query);
  if (Test && Test->Present == InThen)
    return makeGuard(GuardKind::Branch, Construct, Condition, Taken, NotTaken, Test->Labels, InThen, Query);
  return makeGuard(GuardKind::Unrelated, Construct, Condition, Taken, NotTaken, nullptr, InThen, Query);
}

}  // namespace

LabelsGuard findGuard(const CallExpr *Loss, const Stmt *Body, const PatternSet &Patterns, const AstQuery &Query) {
  const Stmt *Previous = Loss;
  for (const Stmt *Parent = Query.parentStmt(Loss); Parent; Previous = Parent, Parent = Query.parentStmt(Parent)) {
    if (const auto *If = dyn_cast<IfStmt>(Parent)) {
      if (Previous == If->getCond() || Previous == If->getInit() || Previous == If->getConditionVariableDeclStmt())
        continue;
      bool InThen = Previous == If->getThen();
      return branchGuard(If, If->getCond(), InThen, InThen ? If->getThen() : If->getElse(),
                         InThen ? If->getElse() : If->getThen(), Patterns, Query);
    }
    if (const auto *Choice = dyn_cast<ConditionalOperator>(Parent)) {
      if (Previous == Choice->getCond())
        continue;
      bool InThen = Previous == Choice->getTrueExpr();
      return branchGuard(Choice, Choice->getCond(), InThen, InThen ? Choice->getTrueExpr() : Choice->getFalseExpr(),
                         InThen ? Choice->getFalseExpr() : Choice->getTrueExpr(), Patterns, Query);
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
          return makeGuard(GuardKind::EarlyReturn, If, If->getCond(), nullptr, nullptr, Test->Labels, false, Query);
      }
    }
    if (Parent == Body || isa<LambdaExpr>(Parent))
      break;
  }
  return LabelsGuard{};
}

bool repeatableCondition(const Expr *Condition, const PatternSet &Patterns, const AstQuery &Query) {
  auto Repeatable = [&](const Expr *Part) { return repeatableCondition(Part, Patterns, Query); };
  const Expr *E = Condition->IgnoreParens();
  if (parseGuard(E, Patterns, Query))
    return true;
  if (const auto *Full = dyn_cast<FullExpr>(E))
    return Repeatable(Full->getSubExpr());
  if (const auto *Temporary = dyn_cast<MaterializeTemporaryExpr>(E))
    return Repeatable(Temporary->getSubExpr());
  // Built-in operators and conversions only: an overloaded operator, a conversion operator or a converting
  // constructor runs code that may write or throw, and clang's side-effect test trusts a function the
  // program marks `pure`, which may read a global the program changes between head and loss.
  if (const auto *Cast = dyn_cast<CastExpr>(E))
    return !Cast->getConversionFunction() && Repeatable(Cast->getSubExpr());
  if (const auto *Binary = dyn_cast<BinaryOperator>(E))
    return !Binary->isAssignmentOp() && !Binary->isCompoundAssignmentOp() && Binary->getOpcode() != BO_Comma &&
           Repeatable(Binary->getLHS()) && Repeatable(Binary->getRHS());
  if (const auto *Unary = dyn_cast<UnaryOperator>(E))
    return !Unary->isIncrementDecrementOp() && Unary->getOpcode() != UO_Coawait && Repeatable(Unary->getSubExpr());
  if (const auto *Choice = dyn_cast<ConditionalOperator>(E))
    return Repeatable(Choice->getCond()) && Repeatable(Choice->getTrueExpr()) && Repeatable(Choice->getFalseExpr());
  if (const auto *Subscript = dyn_cast<ArraySubscriptExpr>(E))
    return Repeatable(Subscript->getBase()) && Repeatable(Subscript->getIdx());
  if (isa<CXXThisExpr, IntegerLiteral, FloatingLiteral, CXXBoolLiteralExpr, CXXNullPtrLiteralExpr, CharacterLiteral>(E))
    return true;
  if (E->getType().isVolatileQualified())
    return false;
  if (const auto *Name = dyn_cast<DeclRefExpr>(E))
    return isa<VarDecl, EnumConstantDecl>(Name->getDecl());
  if (const auto *Member = dyn_cast<MemberExpr>(E))
    return isa<FieldDecl>(Member->getMemberDecl()) && Repeatable(Member->getBase());
  // `labels->` and `*labels` of the library's optional (guards.accessors): they hand out what it holds and write
  // nothing. Only the unary forms: a binary `operator*` of the library computes.
  if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(E)) {
    const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Operator->getDirectCallee());
    return Method && Operator->getNumArgs() == 1 && isLibraryDeclaration(Method, Patterns, Query) &&
           contains(Patterns.Guards.Accessors, Method->getNameAsString()) && Repeatable(Operator->getArg(0));
  }
  if (const auto *Call = dyn_cast<CXXMemberCallExpr>(E)) {
    const CXXMethodDecl *Method = Call->getMethodDecl();
    if (!Method || !Method->getIdentifier() || !isLibraryDeclaration(Method, Patterns, Query))
      return false;
    std::string Name = Method->getName().str();
    if (!contains(Patterns.Guards.Methods, Name) && !contains(Patterns.Guards.PureMethods, Name))
      return false;
    // A virtual method (`Module::is_training`) runs what the object's class makes of it.
    if (Method->isVirtual() && overriddenInUnit(Method, Query.context()))
      return false;
    return Repeatable(Call->getImplicitObjectArgument()) && llvm::all_of(Call->arguments(), Repeatable);
  }
  return false;
}

bool runsWithoutLoss(const Stmt *Statement, const LabelsGuard &Guard, const AstQuery &Query) {
  switch (Guard.Kind) {
  case GuardKind::None:
    return false;
  case GuardKind::Branch:
  case GuardKind::Unrelated:
    return !Query.within(Statement, Guard.Taken);
  case GuardKind::EarlyReturn:
    return !Query.before(Guard.Construct->getEndLoc(), Statement->getBeginLoc());
  }
  return false;
}

}  // namespace lmfuse::rewriter
