// Finds the constructions of a module holder: initialisers and assignments, by declaration.
#include "module_construction.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/RecursiveASTVisitor.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

/// Assignments `holder = value` in a body.
class Assignments : public RecursiveASTVisitor<Assignments> {
public:
  Assignments(const ValueDecl *Holder, std::vector<const Expr *> &Values) : Holder(Holder), Values(Values) {}
  bool shouldVisitLambdaBody() const { return true; }
  bool VisitCXXOperatorCallExpr(CXXOperatorCallExpr *Operator) {
    if (Operator->getOperator() == OO_Equal && Operator->getNumArgs() == 2 &&
        moduleDeclaration(Operator->getArg(0)) == Holder)
      Values.push_back(Operator->getArg(1));
    return true;
  }

private:
  const ValueDecl *Holder;
  std::vector<const Expr *> &Values;
};

/// Whether an initialiser was written (not the implicit default construction of a member or local).
bool written(const Expr *Init) {
  const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(Init ? Init->IgnoreImplicit() : nullptr);
  return Init && !(Construct && Construct->getNumArgs() == 0 && !Construct->getParenOrBraceRange().isValid() &&
                   !isa<CXXTemporaryObjectExpr>(Construct));
}

}  // namespace

const ValueDecl *moduleDeclaration(const Expr *Module) {
  const Expr *Spelled = AstQuery::spelled(Module);
  if (const auto *Arrow = dyn_cast_or_null<CXXOperatorCallExpr>(Spelled); Arrow && Arrow->getOperator() == OO_Arrow)
    Spelled = AstQuery::spelled(Arrow->getArg(0));
  if (const auto *Member = dyn_cast_or_null<MemberExpr>(Spelled))
    return Member->getMemberDecl();
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(Spelled))
    return Ref->getDecl();
  return nullptr;
}

std::optional<std::string> moduleAccess(const CallView &Call, const AstQuery &Query) {
  const auto *Member = dyn_cast<CXXMemberCallExpr>(Call.Call);
  if (!Member)  // the holder's call operator
    return Call.Object ? std::optional(Query.objectText(Call.Object) + "->") : std::nullopt;
  const auto *Callee = dyn_cast<MemberExpr>(Member->getCallee()->IgnoreParens());
  if (!Callee)
    return std::nullopt;
  const Expr *Base = Callee->getBase()->IgnoreImplicit();
  if (const auto *Arrow = dyn_cast<CXXOperatorCallExpr>(Base); Arrow && Arrow->getOperator() == OO_Arrow)
    return Query.objectText(Arrow->getArg(0)) + "->";  // m->forward(x) through the holder
  return Query.objectText(Base) + (Callee->isArrow() ? "->" : ".");
}

ModuleConstructions constructionsOf(const ValueDecl *Holder, const AstQuery &Query) {
  ModuleConstructions Found;
  Assignments Assigned(Holder, Found.Values);
  if (const auto *Variable = dyn_cast<VarDecl>(Holder)) {
    if (written(Variable->getInit()))
      Found.Values.push_back(Variable->getInit());
    else if (!isa<ParmVarDecl>(Variable))
      Found.DefaultConstructed = true;
    if (isa<ParmVarDecl>(Variable))
      Found.Unseen = "it is a parameter";
    if (const auto *Function = dyn_cast_or_null<FunctionDecl>(Variable->getDeclContext()); Function && Function->getBody())
      Assigned.TraverseStmt(Function->getBody());
    else if (!Variable->hasLocalStorage())
      Found.Unseen = "it is not a local of a function defined here";
    return Found;
  }
  const auto *Field = dyn_cast<FieldDecl>(Holder);
  const auto *Record = Field ? dyn_cast<CXXRecordDecl>(Field->getParent()) : nullptr;
  if (!Record) {
    Found.Unseen = "it is neither a variable nor a member";
    return Found;
  }
  bool InClass = Field->hasInClassInitializer() && Field->getInClassInitializer() &&
                 written(Field->getInClassInitializer());
  bool AnyConstructor = false;
  for (const CXXConstructorDecl *Constructor : Record->ctors()) {
    if (Constructor->isImplicit() || Constructor->isCopyOrMoveConstructor())
      continue;
    AnyConstructor = true;
    const FunctionDecl *Definition = nullptr;
    if (!Constructor->hasBody(Definition)) {
      Found.Unseen = "a constructor of " + Record->getNameAsString() + " is not defined in this file";
      continue;
    }
    bool Initialised = false;
    for (const CXXCtorInitializer *Init : cast<CXXConstructorDecl>(Definition)->inits())
      if (Init->getMember() == Field && Init->isWritten()) {
        Found.Values.push_back(Init->getInit());
        Initialised = true;
      }
    if (!Initialised && !InClass)
      Found.DefaultConstructed = true;
    Assigned.TraverseStmt(Definition->getBody());
  }
  if (InClass)
    Found.Values.push_back(Field->getInClassInitializer());
  else if (!AnyConstructor)
    Found.DefaultConstructed = true;
  return Found;
}

}  // namespace lmfuse::rewriter
