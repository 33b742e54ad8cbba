// Head matching by declaration and type, and the bias of a module head read from its construction.
#include "head_match.h"

#include <vector>

#include "clang/AST/DeclTemplate.h"
#include "clang/AST/RecursiveASTVisitor.h"

#include "pattern_match.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

bool isModuleHolderOf(const CXXRecordDecl *Record, const ModuleHeadPattern &Rule) {
  const auto *Specialization = dyn_cast_or_null<ClassTemplateSpecializationDecl>(Record);
  if (!Specialization || qualifiedName(Specialization->getSpecializedTemplate()) != Rule.Holder)
    return false;
  const TemplateArgumentList &Arguments = Specialization->getTemplateArgs();
  if (Arguments.size() < 1 || Arguments[0].getKind() != TemplateArgument::Type)
    return false;
  return qualifiedName(Arguments[0].getAsType()->getAsCXXRecordDecl()) == Rule.Impl;
}

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

bool containsHead(const Stmt *S, const PatternSet &Patterns, const AstQuery &Query) {
  HeadFinder Finder(Patterns, Query);
  Finder.TraverseStmt(const_cast<Stmt *>(S));
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

}  // namespace lmfuse::rewriter
