// Matching helpers shared by head, guard, labels and options capture.
#include "pattern_match.h"

#include "clang/AST/ExprCXX.h"

using namespace clang;

namespace lmfuse::rewriter {

std::string qualifiedName(const NamedDecl *Decl) { return Decl ? Decl->getQualifiedNameAsString() : ""; }

llvm::StringRef lastIdentifier(llvm::StringRef Text) {
  Text = Text.trim();
  size_t Start = Text.find_last_of(":. >");
  return Start == llvm::StringRef::npos ? Text : Text.drop_front(Start + 1);
}

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

bool changesShape(const CallView &Reshape) {
  return Reshape.Name == "flatten" || !llvm::all_of(Reshape.Args, isDefaultArgument);
}

bool isNullConstant(const Expr *E, const PatternSet &Patterns, const AstQuery &Query) {
  E = AstQuery::spelled(E);
  return isa<CXXNullPtrLiteralExpr>(E) || contains(Patterns.Guards.NullConstants, Query.text(E));
}

bool inLibraryNamespace(const clang::Decl *D, const PatternSet &Patterns) {
  const clang::NamespaceDecl *Outermost = nullptr;
  for (const clang::DeclContext *Context = D->getDeclContext(); Context; Context = Context->getParent())
    if (const auto *Namespace = llvm::dyn_cast<clang::NamespaceDecl>(Context);
        Namespace && !Namespace->isInline() && !Namespace->isAnonymousNamespace())
      Outermost = Namespace;
  return Outermost && contains(Patterns.Effects.LibraryNamespaces, Outermost->getName());
}

/// The first call of the program's code (a conversion operator, a converting constructor) among the
/// implicit nodes AstQuery::spelled looks through from E to what is written, or null.
static const Expr *implicitProgramCall(const Expr *E, const PatternSet &Patterns, const AstQuery &Query) {
  const Expr *Written = AstQuery::spelled(E);
  for (const Stmt *Node = E; Node && Node != Written;) {
    const FunctionDecl *Callee = nullptr;
    if (const auto *Call = dyn_cast<CallExpr>(Node))
      Callee = Call->getDirectCallee();
    else if (const auto *Construct = dyn_cast<CXXConstructExpr>(Node))
      Callee = Construct->getConstructor();
    if (Callee && !Callee->isTrivial() && !isLibraryDeclaration(Callee, Patterns, Query))
      return cast<Expr>(Node);
    auto Children = Node->children();
    Node = Children.empty() ? nullptr : *Children.begin();
  }
  return nullptr;
}

const Expr *notReevaluable(const Expr *E, const PatternSet &Patterns, const AstQuery &Query) {
  if (const Expr *Hidden = implicitProgramCall(E, Patterns, Query))
    return Hidden;
  E = AstQuery::spelled(E);
  if (E->getType().isVolatileQualified())
    return E;
  if (isa<DeclRefExpr, CXXThisExpr, IntegerLiteral, FloatingLiteral, CXXBoolLiteralExpr, CXXNullPtrLiteralExpr>(E))
    return nullptr;
  if (const auto *Member = dyn_cast<MemberExpr>(E))
    return isa<CXXMethodDecl>(Member->getMemberDecl()) ? E : notReevaluable(Member->getBase(), Patterns, Query);
  if (const auto *Unary = dyn_cast<UnaryOperator>(E)) {
    UnaryOperatorKind Kind = Unary->getOpcode();
    bool Pure = Kind == UO_Deref || Kind == UO_AddrOf || Kind == UO_Minus || Kind == UO_Plus;
    return Pure ? notReevaluable(Unary->getSubExpr(), Patterns, Query) : E;
  }
  if (const auto *Subscript = dyn_cast<ArraySubscriptExpr>(E)) {
    if (const Expr *Found = notReevaluable(Subscript->getBase(), Patterns, Query))
      return Found;
    return notReevaluable(Subscript->getIdx(), Patterns, Query);
  }
  auto Call = AstQuery::asCall(E);
  if (!Call || !isLibraryDeclaration(Call->Callee, Patterns, Query))
    return E;
  const auto *Operator = dyn_cast<CXXOperatorCallExpr>(E);
  bool Accessor = Operator ? (Operator->getOperator() == OO_Arrow || Operator->getOperator() == OO_Star ||
                              Operator->getOperator() == OO_Subscript)
                           : Call->Args.empty() && contains(Patterns.Effects.Accessors, Call->Name);
  if (!Accessor)
    return E;
  if (Call->Object)
    if (const Expr *Found = notReevaluable(Call->Object, Patterns, Query))
      return Found;
  for (const Expr *Argument : Call->Args)
    if (const Expr *Found = notReevaluable(Argument, Patterns, Query))
      return Found;
  return nullptr;
}

bool isLibraryDeclaration(const clang::Decl *D, const PatternSet &Patterns, const AstQuery &Query) {
  return D && inLibraryNamespace(D, Patterns) && !Query.declaredByProgram(D);
}

}  // namespace lmfuse::rewriter
