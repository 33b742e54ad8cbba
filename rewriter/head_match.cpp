// Head matching by declaration and type, and the bias of a module head read from its construction.
#include "head_match.h"

#include <algorithm>
#include <vector>

#include "clang/AST/DeclTemplate.h"
#include "clang/AST/RecursiveASTVisitor.h"

#include "module_construction.h"
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

/// Whether a record is Owner or derives from it.
bool derivesFrom(const CXXRecordDecl *Record, const std::string &Owner) {
  if (!Record || !Record->hasDefinition())
    return false;
  if (qualifiedName(Record) == Owner)
    return true;
  return !Record->forallBases([&](const CXXRecordDecl *Base) { return qualifiedName(Base) != Owner; });
}

/// The weight W when E spells its transpose (`W.t()`, `W.transpose(0, 1)`, ...), else null.
const Expr *transposed(const Expr *E, const PatternSet &Patterns, const AstQuery &Query) {
  auto Call = AstQuery::asCall(E);
  if (!Call || !Call->Object)
    return nullptr;
  for (const TransposePattern &Rule : Patterns.WeightTransposes)
    if (Call->Name == Rule.Method && argumentsAre(Call->Args, Rule.Arguments, Query))
      return AstQuery::spelled(Call->Object);
  return nullptr;
}

/// Whether E names a member of the pattern set's parameter owner (a module's parameter).
bool isParameter(const Expr *E, const PatternSet &Patterns) {
  const auto *Member = dyn_cast<MemberExpr>(AstQuery::spelled(E));
  const auto *Field = Member ? dyn_cast<FieldDecl>(Member->getMemberDecl()) : nullptr;
  return Field && derivesFrom(dyn_cast<CXXRecordDecl>(Field->getParent()), Patterns.ParameterOwner);
}

/// The input and operand of E when it calls a product head's callee.
std::optional<std::pair<const Expr *, const Expr *>> productOperands(const CallView &Call,
                                                                     const ProductHeadPattern &Rule,
                                                                     const PatternSet &Patterns,
                                                                     const AstQuery &Query) {
  // Exactly the rule's operands: an overload with more parameters (`matmul(x, w, scale)`, user code in the
  // library's namespace) computes something else.
  const unsigned Arity = Rule.Input < 0 ? Rule.Operand + 1 : std::max(unsigned(Rule.Input), Rule.Operand) + 1;
  if (qualifiedName(Call.Callee) != Rule.Callee || Call.Args.size() != Arity ||
      !isLibraryDeclaration(Call.Callee, Patterns, Query))
    return std::nullopt;
  if (Rule.Input < 0)
    return Call.Object ? std::optional(std::pair(Call.Object, Call.Args[Rule.Operand])) : std::nullopt;
  if (Call.Object || unsigned(Rule.Input) >= Call.Args.size())
    return std::nullopt;
  return std::pair(Call.Args[Rule.Input], Call.Args[Rule.Operand]);
}

}  // namespace

std::optional<std::string> whyNotProductHead(const Expr *E, const PatternSet &Patterns, const AstQuery &Query) {
  auto Call = AstQuery::asCall(E);
  if (!Call)
    return std::nullopt;
  for (const ProductHeadPattern &Rule : Patterns.ProductHeads) {
    auto Operands = productOperands(*Call, Rule, Patterns, Query);
    if (!Operands)
      continue;
    std::string Operand = Query.text(AstQuery::spelled(Operands->second));
    const Expr *Weight = transposed(Operands->second, Patterns, Query);
    if (!Weight)
      return "`" + Call->Name + "` multiplies by `" + Operand +
             "`, which is not spelled as the transpose of a [V, D] weight (`W.t()`, `W.transpose(0, 1)`)";
    if (!isParameter(Weight, Patterns))
      return "`" + Call->Name + "` multiplies by `" + Operand + "`, and `" + Query.text(Weight) +
             "` is not a parameter of a module (an activation in a product is not a head)";
  }
  return std::nullopt;
}

namespace {

/// The first class between Record and Stop (Record included, Stop not) that declares one of Names, as
/// "`Class` declares `name`": then a member the fused call names, or the overload a call resolves to, is the
/// program's and not the library's that the rule describes (a subclass of `LinearImpl` with its own `weight`;
/// one that adds a `forward` beside `using LinearImpl::forward`, which a compiler may choose where Clang chose
/// the Impl's).
std::optional<std::string> declaredBelow(const CXXRecordDecl *Record, const std::string &Stop,
                                         const std::vector<DeclarationName> &Names) {
  if (!Record || !Record->hasDefinition() || qualifiedName(Record) == Stop)
    return std::nullopt;
  for (const DeclarationName &Name : Names)
    if (!Record->lookup(Name).empty())
      return "`" + Record->getNameAsString() + "` declares `" + Name.getAsString() + "`";
  for (const CXXBaseSpecifier &Base : Record->bases())
    if (auto Found = declaredBelow(Base.getType()->getAsCXXRecordDecl(), Stop, Names))
      return Found;
  return std::nullopt;
}

/// A call of a module head's `forward` or of its holder's call operator, as the fused call would read it.
struct ModuleCall {
  std::string Access;  ///< the module as the fused call spells it before `weight` (`lm_head->`)
  /// A member of the program's between the object's class and the library's (declaredBelow): for
  /// `object->forward(h)`, a `weight`, `bias`, `forward` or call operator; for `head(h)` on a subclass of the
  /// holder, a call operator.
  std::optional<std::string> ProgramMember;
  /// A method call on a subclass of the library's class: HeadCall's LookedUpIn, Library and Members.
  const CXXRecordDecl *LookedUpIn, *Library;
  std::vector<std::string> Members;
};

std::optional<ModuleCall> moduleCall(const Expr *E, const CallView &Call, const ModuleHeadPattern &Rule,
                                     const AstQuery &Query) {
  const auto *Method = dyn_cast<CXXMethodDecl>(Call.Callee);
  if (!Method || Call.Args.empty())
    return std::nullopt;
  const auto *Operator = dyn_cast<CXXOperatorCallExpr>(E);
  bool HolderCall = Operator && Operator->getOperator() == OO_Call && isModuleHolderOf(Method->getParent(), Rule);
  bool MethodCall = isa<CXXMemberCallExpr>(E) && Method->getNameAsString() == Rule.Method &&
                    qualifiedName(Method->getParent()) == Rule.Impl;
  std::optional<std::string> Access = HolderCall || MethodCall ? moduleAccess(Call, Query) : std::nullopt;
  if (!Access)
    return std::nullopt;
  ASTContext &Context = Method->getASTContext();
  DeclarationName CallOperator = Context.DeclarationNames.getCXXOperatorName(OO_Call);
  auto Identifier = [&](const std::string &Name) { return DeclarationName(&Context.Idents.get(Name)); };
  ModuleCall Found{*Access, std::nullopt, nullptr, nullptr, {}};
  if (HolderCall) {
    QualType ObjectType = Operator->getArg(0)->IgnoreParenImpCasts()->getType().getNonReferenceType();
    Found.ProgramMember =
        declaredBelow(ObjectType->getAsCXXRecordDecl(), qualifiedName(Method->getParent()), {CallOperator});
  } else {
    // The object forward is called on (through `->`, a smart pointer's or a holder's, its pointee).
    QualType ObjectType =
        cast<CXXMemberCallExpr>(E)->getImplicitObjectArgument()->IgnoreParenImpCasts()->getType().getNonReferenceType();
    if (ObjectType->isPointerType())
      ObjectType = ObjectType->getPointeeType();
    const CXXRecordDecl *Object = ObjectType->getAsCXXRecordDecl();
    Found.ProgramMember = declaredBelow(Object, Rule.Impl,
                                        {Identifier(Rule.Weight), Identifier(Rule.Bias), Identifier(Rule.Method),
                                         CallOperator});
    if (Object && Object != Method->getParent()) {
      Found.LookedUpIn = Object;
      Found.Library = Method->getParent();
      // The members the library's class declares once each (an overload set has no one member pointer).
      for (const std::string &Member : {Rule.Method, Rule.Weight, Rule.Bias})
        if (auto Declared = Found.Library->lookup(Identifier(Member));
            Declared.isSingleResult() && !isa<FunctionTemplateDecl>(Declared.front()))
          Found.Members.push_back(Member);
    }
  }
  return Found;
}

}  // namespace

std::optional<std::string> whyNotModuleHead(const Expr *E, const PatternSet &Patterns, const AstQuery &Query) {
  E = AstQuery::spelled(E);
  auto Call = AstQuery::asCall(E);
  if (!Call)
    return std::nullopt;
  for (const ModuleHeadPattern &Rule : Patterns.ModuleHeads)
    if (auto Found = moduleCall(E, *Call, Rule, Query); Found && Found->ProgramMember)
      return *Found->ProgramMember + " of its own: the fused call computes the library's linear map from its `" +
             Rule.Weight + "` and `" + Rule.Bias + "`, which the program's member may change (or another compiler "
             "may resolve the call to)";
  return std::nullopt;
}

std::optional<HeadCall> matchHead(const Expr *E, const PatternSet &Patterns, const AstQuery &Query) {
  E = AstQuery::spelled(E);
  auto Call = AstQuery::asCall(E);
  if (!Call)
    return std::nullopt;
  for (const ModuleHeadPattern &Rule : Patterns.ModuleHeads) {
    std::optional<ModuleCall> Module = moduleCall(E, *Call, Rule, Query);
    if (!Module || Module->ProgramMember)
      continue;  // whyNotModuleHead names a program member
    const std::string &Object = Module->Access;
    HeadCall Head;
    Head.Kind = HeadKind::Module;
    Head.Call = E;
    Head.Object = Call->Object;
    Head.Hidden = Call->Args[0];
    Head.Text = llvm::StringRef(Object).drop_back(Object.back() == '.' ? 1 : 2).str();
    Head.Weight = Object + Rule.Weight;
    Head.Bias = Object + Rule.Bias;
    Head.Copied = {Call->Object};
    Head.LookedUpIn = Module->LookedUpIn;
    Head.Library = Module->Library;
    Head.Members = Module->Members;
    return Head;
  }
  std::string Callee = qualifiedName(Call->Callee);
  for (const FunctionHeadPattern &Rule : Patterns.FunctionHeads) {
    if (Callee != Rule.Callee || Call->Object || Call->Args.size() <= std::max(Rule.Input, Rule.Weight) ||
        !isLibraryDeclaration(Call->Callee, Patterns, Query))
      continue;
    HeadCall Head;
    Head.Kind = HeadKind::Function;
    Head.Call = E;
    Head.Hidden = Call->Args[Rule.Input];
    Head.Text = Query.text(E);
    Head.Weight = Query.argumentText(Call->Args[Rule.Weight]);
    Head.Copied = {Call->Args[Rule.Weight]};
    if (Rule.Bias < Call->Args.size() && !isDefaultArgument(Call->Args[Rule.Bias]) &&
        !isNullConstant(Call->Args[Rule.Bias], Patterns, Query)) {
      Head.Bias = Query.argumentText(Call->Args[Rule.Bias]);
      Head.Copied.push_back(Call->Args[Rule.Bias]);
    }
    return Head;
  }
  for (const ProductHeadPattern &Rule : Patterns.ProductHeads) {
    auto Operands = productOperands(*Call, Rule, Patterns, Query);
    const Expr *Weight = Operands ? transposed(Operands->second, Patterns, Query) : nullptr;
    if (!Weight || !isParameter(Weight, Patterns))
      continue;
    HeadCall Head;
    Head.Kind = HeadKind::Function;
    Head.Call = E;
    Head.Hidden = Operands->first;
    Head.Text = Query.text(E);
    Head.Weight = Query.argumentText(Weight);
    Head.Copied = {Weight};
    Head.HiddenRank = Rule.HiddenRank;
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
  const ValueDecl *Holder = moduleDeclaration(Object);
  if (!Holder)
    return true;
  // Without a bias only where every construction the file shows disables it: one that keeps it (`head_bias ?
  // Linear(D, V) : Linear(LinearOptions(D, V).bias(false))`) leaves it to the run, which the fused call follows.
  const std::vector<const Expr *> &Values = constructionsOf(Holder, Query).Values;
  return Values.empty() ||
         std::any_of(Values.begin(), Values.end(), [&](const Expr *Value) { return !disablesBias(Value, Query); });
}

}  // namespace lmfuse::rewriter
