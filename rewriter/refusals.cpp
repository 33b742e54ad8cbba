// One check per refusal kind, run in the order of the table at the bottom. A check looks only
// at the captured facts and the function's variable uses; it never edits anything.
#include "refusals.h"

#include "effects.h"
#include "pattern_match.h"
#include "raw_tokens.h"
#include "site_capture.h"

#include "clang/AST/ParentMapContext.h"
#include "clang/Analysis/Analyses/ExprMutationAnalyzer.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "llvm/Support/Path.h"

#include <cctype>

using namespace clang;

namespace lmfuse::rewriter {
namespace {

using Check = std::optional<Refusal> (*)(const CapturedSite &, const PatternSet &, const AstQuery &,
                                         const VariableUses &);

/// The refusal Reason when capture stopped short for one of Kinds.
std::optional<Refusal> fromBreak(const std::optional<TraceBreak> &Break, std::initializer_list<BreakKind> Kinds,
                                 ReasonKind Reason) {
  if (Break && llvm::is_contained(Kinds, Break->Kind))
    return Refusal{Reason, Break->Node, Break->Why};
  return std::nullopt;
}

std::optional<Refusal> inMacro(const CapturedSite &Site, const PatternSet &, const AstQuery &Query,
                               const VariableUses &) {
  for (const Stmt *Part : rewrittenParts(Site, /*WithOptionLocals=*/false))
    if (Query.inMacro(Part))
      return Refusal{ReasonKind::InMacro, Part, "this part of the site comes from a macro expansion"};
  if (auto Found = fromBreak(Site.OptionsBreak, {BreakKind::OptionInMacro}, ReasonKind::InMacro))
    return Found;
  // Pieces the rewrite copies (the head's input, the hoisted value) must be written in the file,
  // possibly as a whole macro invocation, never as part of one.
  if (Site.Head && Query.fileRange(AstQuery::spelled(Site.Head->Hidden)->getSourceRange()).isInvalid())
    return Refusal{ReasonKind::InMacro, Site.Head->Call, "the head's input is part of a macro expansion"};
  return std::nullopt;
}

/// The copy says where its lines come from with `#line <n> "<file>"` after each edited block, counting the
/// file's own lines. Where the program's own `#line` directive (or a linemarker) maps the function's lines to
/// another file or line, those directives would replace that mapping from the first edit on: __FILE__ and
/// __LINE__ (an assertion's message, a log line) and diagnostics would name other places than the original.
std::optional<Refusal> lineDirectiveInEffect(const CapturedSite &Site, const PatternSet &, const AstQuery &Query,
                                             const VariableUses &) {
  if (!Site.Body)
    return std::nullopt;
  const SourceManager &SM = Query.sourceManager();
  SourceLocation End = SM.getExpansionLoc(Site.Body->getEndLoc());
  PresumedLoc Mapped = SM.getPresumedLoc(End);
  PresumedLoc Physical = SM.getPresumedLoc(End, /*UseLineDirectives=*/false);
  if (Mapped.isInvalid() || Physical.isInvalid() ||
      (Mapped.getLine() == Physical.getLine() && llvm::StringRef(Mapped.getFilename()) == Physical.getFilename()))
    return std::nullopt;
  return Refusal{ReasonKind::LineDirective, Site.Loss,
                 "a #line directive maps the end of this function (line " + std::to_string(Physical.getLine()) +
                     ") to " + Mapped.getFilename() + ":" + std::to_string(Mapped.getLine()) +
                     ", which the rewritten copy's own #line directives would change (__FILE__, __LINE__)"};
}

/// The first effect in E that the copy would repeat: a write (an assignment, `++` or `--`, built-in or a class's
/// operator), a call of the C or C++ standard library that is not constexpr (`std::exchange`, `printf`, `rand`),
/// or that may write what it is given, constexpr or not (`sv.remove_prefix(1)`, `std::advance(p, 1)`), a tensor
/// function that draws from a random generator (`torch::randint`; the library's other tensor functions are the
/// effect analysis's, as are the program's), a statement expression, or what Clang counts as a side effect
/// without a call (a volatile read). Member initialisers and default arguments E evaluates are looked into.
const Expr *effectIn(const Expr *E, const ASTContext &Context, const EffectPatterns &Rules) {
  if (!E)
    return nullptr;
  struct Finder : RecursiveASTVisitor<Finder> {
    const ASTContext &Context;
    const EffectPatterns &Rules;
    const Expr *Found = nullptr;
    Finder(const ASTContext &Context, const EffectPatterns &Rules) : Context(Context), Rules(Rules) {}
    bool VisitBinaryOperator(BinaryOperator *Operator) { return note(Operator, Operator->isAssignmentOp()); }
    bool VisitUnaryOperator(UnaryOperator *Operator) { return note(Operator, Operator->isIncrementDecrementOp()); }
    bool VisitCXXOperatorCallExpr(CXXOperatorCallExpr *Call) {
      OverloadedOperatorKind Kind = Call->getOperator();
      return note(Call, Call->isAssignmentOp() || Kind == OO_PlusPlus || Kind == OO_MinusMinus);
    }
    bool VisitCallExpr(CallExpr *Call) {
      const FunctionDecl *Callee = Call->getDirectCallee();
      bool Standard = Callee && !isa<CXXMethodDecl>(Callee) && !Callee->isConstexpr() &&
                      (Callee->isInStdNamespace() || Callee->isExternC() || Callee->getBuiltinID() != 0);
      return note(Call, Standard || (Callee && (standardWrite(Callee) || drawsRandom(Callee))));
    }
    // A function of the standard library's, constexpr or not, that may write what it is given: a member that
    // is not const (`remove_prefix`), or a parameter that is a reference or pointer to something not const
    // (`std::char_traits<char>::assign`, `std::advance`). The rule set's accessors (which hand out a reference
    // to what the object holds) and pass-through functions (`std::move`) write nothing.
    bool standardWrite(const FunctionDecl *Callee) const {
      const DeclContext *Around = Callee->getDeclContext();  // a member's class, up to its namespace
      while (Around && !Around->isStdNamespace())
        Around = Around->getParent();
      if (!Around)
        return false;
      std::string Name = Callee->getNameAsString();
      if (const auto *Method = dyn_cast<CXXMethodDecl>(Callee))
        if (Method->isInstance() && !Method->isConst() && !llvm::is_contained(Rules.StandardAccessors, Name))
          return true;
      if (llvm::is_contained(Rules.StandardPassThrough, Name))
        return false;
      return llvm::any_of(Callee->parameters(), [](const ParmVarDecl *Parameter) {
        QualType Type = Parameter->getType();
        QualType Pointee = Type->isPointerType() ? Type->getPointeeType()
                           : Type->isLValueReferenceType() ? Type.getNonReferenceType()
                                                           : QualType();
        return !Pointee.isNull() && !Pointee.isConstQualified() && !Pointee->isFunctionType();
      });
    }
    // Whether Type is the rule set's generator class, or an optional (any class template) of it, by reference
    // or value.
    bool isGenerator(QualType Type) const {
      const CXXRecordDecl *Record = Type.getNonReferenceType()->getAsCXXRecordDecl();
      if (!Record)
        return false;
      if (Record->getName() == Rules.GeneratorType)
        return true;
      if (const auto *Specialization = dyn_cast<ClassTemplateSpecializationDecl>(Record))
        for (const TemplateArgument &Argument : Specialization->getTemplateArgs().asArray())
          if (Argument.getKind() == TemplateArgument::Type && isGenerator(Argument.getAsType()))
            return true;
      return false;
    }
    // A tensor library function that draws from a random generator: it, or a function of its name beside it,
    // takes one (`torch::randint`, `torch::randn`, `at::bernoulli`); each run advances the global generator.
    bool drawsRandom(const FunctionDecl *Callee) const {
      const DeclContext *Around = Callee->getDeclContext()->getRedeclContext();
      const auto *Namespace = dyn_cast<NamespaceDecl>(Around);
      if (Rules.GeneratorType.empty() || !Namespace ||
          !llvm::is_contained(Rules.RandomNamespaces, Namespace->getName()) || !Callee->getIdentifier())
        return false;
      auto TakesGenerator = [&](const FunctionDecl *Function) {
        return llvm::any_of(Function->parameters(),
                            [&](const ParmVarDecl *Parameter) { return isGenerator(Parameter->getType()); });
      };
      if (TakesGenerator(Callee))
        return true;
      for (const NamedDecl *Found : Around->lookup(Callee->getDeclName()))
        if (const auto *Function = Found->getAsFunction(); Function && TakesGenerator(Function))
          return true;
      return false;
    }
    bool VisitStmtExpr(StmtExpr *Statements) { return note(Statements, true); }
    bool VisitCXXDefaultInitExpr(CXXDefaultInitExpr *Default) { return !Found && TraverseStmt(Default->getExpr()); }
    bool VisitCXXDefaultArgExpr(CXXDefaultArgExpr *Default) { return !Found && TraverseStmt(Default->getExpr()); }
    bool note(const Expr *Candidate, bool Repeats) {
      if (Repeats && !Found)
        Found = Candidate;
      return !Found;
    }
  } Search(Context, Rules);
  Search.TraverseStmt(const_cast<Expr *>(E));
  if (Search.Found)
    return Search.Found;
  return E->HasSideEffects(Context, /*IncludePossibleEffects=*/false) ? E : nullptr;
}

/// The rewrite moves the loss (into the fused call's alternative, lines below and columns to the right),
/// copies its logits and labels code into lambdas, spells the labels test again at the head, and moves or
/// copies the head's statement and the chain after it; the options a local holds are read at the loss. Code
/// among them that gives another value where it stands, or each time it is expanded, would compute other
/// shapes, labels or options in the copy (and in its LMFUSE_DISABLE path).
std::optional<Refusal> positionDependent(const CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query,
                                         const VariableUses &) {
  if (std::string Found = Query.compiledFileDependence(); !Found.empty())
    return Refusal{ReasonKind::PositionDependent, Site.Loss,
                   Found + " expands to the file being compiled, which for the rewritten unit is the copy (its path, "
                           "its modification time), not the file written"};
  if (std::string Found = Query.fileNameDependence(Site.Loss->getBeginLoc()); !Found.empty())
    return Refusal{ReasonKind::PositionDependent, Site.Loss, Found};
  // The lines the rewrite edits (the head's statement, with what it inserts above it, and the loss call): code
  // that reads its line there, moved or not, sits lines off in the copy until its next #line.
  std::vector<SourceRange> Edited = {Site.Loss->getSourceRange()};
  if (Site.Producer)
    Edited.push_back(Site.Producer->getSourceRange());
  if (std::string Found = Query.lineDependenceOn(Edited, Site.Body); !Found.empty())
    return Refusal{ReasonKind::PositionDependent, Site.Loss,
                   Found + " shares a line with code the rewrite replaces, where the copy's lines differ from the "
                           "original's"};
  for (const Stmt *Part : rewrittenParts(Site, /*WithOptionLocals=*/true))
    if (std::string Found = Query.positionDependence(Part); !Found.empty())
      return Refusal{ReasonKind::PositionDependent, Part,
                     Found + " in the code the rewrite moves or copies (line " + std::to_string(Query.line(Part->getBeginLoc())) +
                         "), where it would give another value: another line, column or function name, or another "
                         "count of expansions"};
  // The loss's code and the labels test run another number of times in the copy: the test again at the head, the
  // logits code on a stand-in and again where the call computes the original's loss. An effect there (a write,
  // a call of the standard library's: effectIn) would be made that many times.
  for (const Expr *Part : {static_cast<const Expr *>(Site.Loss), Site.Guard.Condition})
    if (const Expr *Code = effectIn(Part, Query.context(), Patterns.Effects))
      return Refusal{ReasonKind::PositionDependent, Code,
                     "`" + Query.text(AstQuery::spelled(Code)) +
                         "` has an effect (a write, a call of the standard library's, a random draw), and the rewritten code runs it "
                         "another number of times than the original: "
                         "the labels test again at the head, the loss's logits code again where the fused call "
                         "computes the original's loss"};
  return std::nullopt;
}

/// What a declaration is, for a refusal's words: `namespace app::lmfuse` (file:line).
std::string declarationDetail(const NamedDecl *Found, const AstQuery &Query) {
  std::string Where = Query.declaredAt(Found);
  if (!Where.empty())
    Where = " (" + Where + ")";
  const char *Kind = isa<NamespaceDecl>(Found)              ? "namespace"
                     : isa<NamespaceAliasDecl>(Found)       ? "namespace alias"
                     : isa<RecordDecl>(Found)               ? "class"
                     : isa<TypedefNameDecl>(Found)          ? "type alias"
                     : isa<TemplateTypeParmDecl>(Found)     ? "template parameter"
                     : isa<TemplateDecl>(Found)             ? "template"
                     : isa<ValueDecl>(Found)                ? "variable or function"
                                                            : "declaration";
  return std::string("the ") + Kind + " `" + Found->getQualifiedNameAsString() + "`" + Where;
}

/// The rewritten code names the replacement's functions and types qualified from their first name
/// (`lmfuse::enabled()`, `torch::Tensor`), as the rule set writes them. In the site's function that first name
/// must find the global namespace: a namespace, class, alias or local of the program of that name that
/// lookup finds first (`namespace app { namespace lmfuse { bool enabled(); } }`) would make the rewritten
/// code call the program's functions, which may compute anything, where it should call the fused loss.
std::optional<Refusal> qualifierCaptured(const CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query,
                                         const VariableUses &) {
  if (!Site.Function)
    return std::nullopt;
  for (const std::string &Head : Patterns.Replacement.leadingQualifiers())
    if (const NamedDecl *Found = Query.nameShadowsGlobalNamespace(Head, Site.Function))
      return Refusal{ReasonKind::NameCaptured, Site.Loss,
                     "the rewritten code writes `" + Head + "::` here, where it would name " +
                         declarationDetail(Found, Query) + ", not the global namespace `::" + Head + "`"};
  // The replacement's functions are found by qualified lookup in their namespace: one the program opens too may
  // hold an overload that resolution prefers to the library's (a template taking any argument), which the
  // rewritten code would call. Only the library's headers (the folder of the replacement's include) open it.
  llvm::StringRef Call = Patterns.Replacement.Call;
  llvm::StringRef Namespace = Call.take_front(Call.find("::"));
  llvm::StringRef LibraryFolder = llvm::StringRef(Patterns.Replacement.Include).split('/').first;
  if (Call.contains("::"))
    if (const NamespaceDecl *Opening = Query.programOpening(Namespace, LibraryFolder)) {
      return Refusal{ReasonKind::NameCaptured, Site.Loss,
                     "the program declares in namespace `" + Namespace.str() + "` (" + Query.declaredAt(Opening) +
                         "), whose functions the rewritten code calls: a declaration of its may be the one they call"};
    }
  return std::nullopt;
}

/// The loss is the rule's by name only: the program declares the function called (an overload it added to
/// the library's namespace), which computes whatever the program wrote.
std::optional<Refusal> lossDeclaredByProgram(const CapturedSite &Site, const PatternSet &Patterns,
                                             const AstQuery &Query, const VariableUses &) {
  const FunctionDecl *Callee = Site.Loss->getDirectCallee();
  if (!Callee || isLibraryDeclaration(Callee, Patterns, Query))
    return std::nullopt;
  return Refusal{ReasonKind::LossUnsupported, Site.Loss,
                 "the `" + qualifiedName(Callee) + "` called here is declared by this program (" +
                     Query.declaredAt(Callee) + "), not by the library"};
}

std::optional<Refusal> softcapped(const CapturedSite &Site, const PatternSet &Patterns, const AstQuery &,
                                  const VariableUses &) {
  if (auto Found = fromBreak(Site.Break, {BreakKind::Capped}, ReasonKind::LogitsSoftcapped))
    return Found;
  // Anything between head and loss, and the loss's own input; the producer's value is the head
  // itself here (a tanh inside the head's argument caps the hidden state, not the logits).
  for (const Stmt *Node : Site.Inspected)
    if (Node != Site.Producer && AstQuery::containsCallNamed(Node, Patterns.Softcap))
      return Refusal{ReasonKind::LogitsSoftcapped, Node, "the logits are capped with tanh"};
  if (AstQuery::containsCallNamed(Site.Input, Patterns.Softcap))
    return Refusal{ReasonKind::LogitsSoftcapped, Site.Input, "the logits are capped with tanh"};
  return std::nullopt;
}

/// The hoist computes the head's input in a statement of its own before the logits statement: only sound
/// where nothing of that statement ran before the input did (one declaration: another declarator's
/// initialiser ran first, and may be what the input reads), and where ending the input's full-expression
/// early destroys no temporary of a class of the program's (its destructor would run before the head).
std::optional<Refusal> hoistChangesOrder(const CapturedSite &Site, const Stmt *Statement, const PatternSet &Patterns,
                                         const AstQuery &Query) {
  if (const auto *Declarations = dyn_cast_or_null<DeclStmt>(Statement); Declarations && !Declarations->isSingleDecl())
    return Refusal{ReasonKind::HeadWrapped, Statement,
                   "the head's input would be computed before the other declarations of its statement, which run "
                   "first in the original"};
  class Temporaries : public RecursiveASTVisitor<Temporaries> {
  public:
    Temporaries(const PatternSet &Patterns, const AstQuery &Query) : Patterns(Patterns), Query(Query) {}
    // A destructor of the program's may do anything; a library's matters where it restores the thread's
    // autograd or autocast mode (a temporary `NoGradGuard()` keeps the head out of the graph).
    bool VisitCXXBindTemporaryExpr(CXXBindTemporaryExpr *Bound) {
      const CXXDestructorDecl *Destructor = Bound->getTemporary()->getDestructor();
      if (Destructor && (!isLibraryDeclaration(Destructor, Patterns, Query) || isModeGuard(Destructor->getParent())))
        Found = Bound;
      return !Found;
    }
    bool isModeGuard(const CXXRecordDecl *Record) const {
      auto Listed = [&](const CXXRecordDecl *Class) {
        return llvm::is_contained(Patterns.Effects.ModeGuards, Class->getName().str());
      };
      return Listed(Record) || (Record->hasDefinition() && !Record->forallBases([&](const CXXRecordDecl *Base) {
                                  return !Listed(Base);
                                }));
    }
    const PatternSet &Patterns;
    const AstQuery &Query;
    const CXXBindTemporaryExpr *Found = nullptr;
  } Finder(Patterns, Query);
  Finder.TraverseStmt(const_cast<Expr *>(Site.Head->Hidden));
  if (Finder.Found)
    return Refusal{ReasonKind::HeadWrapped, Finder.Found,
                   "computing the head's input in a statement of its own would destroy the temporary `" +
                       Finder.Found->getType().getAsString() + "` before the head runs (a destructor of the "
                       "program's, or one that restores the autograd or autocast mode)"};
  return std::nullopt;
}

std::optional<Refusal> headWrapped(const CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query,
                                   const VariableUses &) {
  if (auto Found = fromBreak(Site.Break, {BreakKind::HeadInExpression}, ReasonKind::HeadWrapped))
    return Found;
  if (!Site.Head || !Site.Producer)
    return std::nullopt;
  // The fused call at the loss names the head's input: a variable, or the local it is hoisted
  // into just before the logits statement; either must still be in scope at the loss.
  const Stmt *Statement = Query.enclosingStatement(Site.Producer);
  const Stmt *Block = Statement ? Query.parentStmt(Statement) : nullptr;
  if (Site.HoistHidden && (!Block || !Query.within(Site.Loss, Block)))
    return Refusal{ReasonKind::HeadWrapped, Site.Producer,
                   "the head's input cannot be computed once where the loss can see it"};
  if (Site.HoistHidden)
    if (auto Found = hoistChangesOrder(Site, Statement, Patterns, Query))
      return Found;
  const VarDecl *Hidden = AstQuery::namedVariable(Site.Head->Hidden);
  if (!Site.HoistHidden && Hidden && Hidden->hasLocalStorage() && !isa<ParmVarDecl>(Hidden)) {
    auto Parents = Query.context().getParents(*Hidden);
    const Stmt *Declaration = Parents.empty() ? nullptr : Parents[0].get<DeclStmt>();
    const Stmt *Scope = Declaration ? Query.parentStmt(Declaration) : nullptr;
    if (!Scope || !Query.within(Site.Loss, Scope))
      return Refusal{ReasonKind::HeadWrapped, Site.Producer,
                     "the head's input `" + Hidden->getNameAsString() + "` is out of scope at the loss"};
  }
  return std::nullopt;
}

std::optional<Refusal> notLogProbabilities(const CapturedSite &Site, const PatternSet &, const AstQuery &,
                                           const VariableUses &) {
  return fromBreak(Site.Break, {BreakKind::NotLogProbabilities}, ReasonKind::LossUnsupported);
}

std::optional<Refusal> headNotLinear(const CapturedSite &Site, const PatternSet &, const AstQuery &,
                                     const VariableUses &) {
  if (auto Found = fromBreak(Site.Break, {BreakKind::NoHeadAssignment, BreakKind::NotALinearHead, BreakKind::Normalized},
                                 ReasonKind::HeadNotLinear))
    return Found;
  if (!Site.Head && !Site.Break)
    return Refusal{ReasonKind::HeadNotLinear, Site.Input, "no linear head produces the loss's input"};
  return std::nullopt;
}

std::optional<Refusal> logitsRebound(const CapturedSite &Site, const PatternSet &, const AstQuery &Query,
                                     const VariableUses &Uses) {
  if (auto Found = fromBreak(Site.Break,
                                 {BreakKind::ChangedInPlace, BreakKind::CompoundAssigned, BreakKind::ReboundToChange,
                                  BreakKind::ChangedBeforeLoss},
                                 ReasonKind::LogitsRebound))
    return Found;
  if (!Site.Head || !Site.Producer)
    return std::nullopt;
  // The head's assignment must run whenever the loss does: an assignment under a condition or in
  // a loop that the loss is outside of leaves other values in the logits on some paths.
  for (const Stmt *Ancestor = Query.parentStmt(Site.Producer);; Ancestor = Query.parentStmt(Ancestor)) {
    bool Unconditional = Ancestor && (isa<CompoundStmt>(Ancestor) || isa<ExprWithCleanups>(Ancestor) ||
                                      isa<ImplicitCastExpr>(Ancestor) || isa<MaterializeTemporaryExpr>(Ancestor) ||
                                      isa<CXXBindTemporaryExpr>(Ancestor));
    if (!Unconditional)
      return Refusal{ReasonKind::LogitsRebound, Site.Producer,
                     "the head's assignment does not run on every path that reaches the loss"};
    if (isa<CompoundStmt>(Ancestor) && Query.within(Site.Loss, Ancestor))
      break;
  }
  // A loop that runs the loss again but not the head: the loss must read the head's value every time, so no
  // variable on the way from the head to the loss (declared outside the loop) may be changed inside it,
  // after the loss as much as before (`logits = other;` at the end of the body).
  std::vector<const VarDecl *> Carriers = {Site.Logits};
  for (const ChainStep &Step : Site.Chain)
    Carriers.push_back(Step.Variable);
  for (const Stmt *At = Query.parentStmt(Site.Loss); At && At != Site.Body; At = Query.parentStmt(At)) {
    if (!(isa<ForStmt>(At) || isa<WhileStmt>(At) || isa<DoStmt>(At) || isa<CXXForRangeStmt>(At)) ||
        Query.within(Site.Producer, At))
      continue;
    ExprMutationAnalyzer Analyzer(*At, Query.context());
    for (const VarDecl *Carrier : Carriers) {
      if (!Carrier || (Query.before(At->getBeginLoc(), Carrier->getLocation()) &&
                       Query.before(Carrier->getLocation(), At->getEndLoc())))
        continue;  // declared inside the loop: made anew each time
      if (const Stmt *Mutation = Analyzer.findMutation(Carrier))
        return Refusal{ReasonKind::LogitsRebound, Mutation,
                       "`" + Carrier->getNameAsString() +
                           "` changes inside the loop that computes the loss again, so the loss does not read the "
                           "head's value every time"};
    }
  }
  return std::nullopt;
}

std::optional<Refusal> logitsIndexed(const CapturedSite &Site, const PatternSet &, const AstQuery &,
                                     const VariableUses &) {
  if (auto Found = fromBreak(Site.Break, {BreakKind::Indexed, BreakKind::ReboundToSlice}, ReasonKind::LogitsIndexed))
    return Found;
  // Labels sliced next to shifted logits, by something that is not the labels' shift.
  if (auto Found = fromBreak(Site.LabelsBreak, {BreakKind::Indexed}, ReasonKind::LogitsIndexed))
    return Found;
  if (Site.LogitsShift != Site.LabelsShift)
    return Refusal{ReasonKind::LogitsIndexed, Site.LogitsShift ? Site.Input : Site.Target,
                   Site.LogitsShift ? "the logits are shifted but the labels are not"
                                    : "the labels are shifted but the logits are not"};
  // Counted from the front, the logits' positions and the labels' last dimension are the same dim (the
  // fused call checks the rest against the ranks it is given).
  if (Site.LogitsShift && Site.LogitsShiftDim >= 0 && Site.LabelsShiftDim >= 0 &&
      Site.LogitsShiftDim != Site.LabelsShiftDim)
    return Refusal{ReasonKind::LogitsIndexed, Site.Input,
                   "the logits are shifted along dim " + std::to_string(Site.LogitsShiftDim) + " and the labels along dim " +
                       std::to_string(Site.LabelsShiftDim) + ": with labels shaped as the logits' positions, these are "
                       "never the same positions"};
  return std::nullopt;
}

/// Whether Ref is the object of a method that reads only the tensor's shape, dtype or device.
bool isShapeRead(const DeclRefExpr *Ref, const PatternSet &Patterns, const AstQuery &Query) {
  DynTypedNode Parent = Query.spelledParent(Ref);
  const auto *Member = Parent.get<MemberExpr>();
  if (!Member || !Member->getMemberDecl()->getDeclName().isIdentifier())
    return false;
  return contains(Patterns.Benign.ShapeReads, Member->getMemberDecl()->getName());
}

/// Whether a rebinding of the logits variable (a chain step) runs before Read: past it, the fused
/// path holds an undefined tensor there, not the skipped logits.
bool reboundBefore(const CapturedSite &Site, const DeclRefExpr *Read, const AstQuery &Query) {
  for (const ChainStep &Step : Site.Chain)
    if (Step.Variable == Site.Logits && Query.before(Step.Statement->getBeginLoc(), Read->getBeginLoc()))
      return true;
  return false;
}

/// Whether Ref is handed out unchanged: the whole of a returned value (`return logits;`,
/// `return {logits, loss};`, `return std::make_tuple(logits, loss);`) or the whole right-hand side
/// of a store (`last_logits_ = logits;`). That is the model's output, undefined on the fused path
/// unless lmfuse::return_logits().
bool isHandedOutAsIs(const DeclRefExpr *Ref, const PatternSet &Patterns, const AstQuery &Query) {
  // The program's own constructors and assignments may read the values (`predictions(l.argmax(-1))`);
  // the compiler's and the library's only copy the handle.
  auto copiesOnly = [&](const FunctionDecl *Function) {
    return Function && (!Function->isUserProvided() || isLibraryDeclaration(Function, Patterns, Query));
  };
  DynTypedNode Current = DynTypedNode::create(*static_cast<const Stmt *>(Ref));
  for (int Depth = 0; Depth < 16; ++Depth) {
    auto Parents = Query.context().getParents(Current);
    if (Parents.empty())
      return false;
    const Stmt *Parent = Parents[0].get<Stmt>();
    if (!Parent)
      return false;
    if (isa<ReturnStmt>(Parent))
      return true;
    if (const auto *Assign = dyn_cast<BinaryOperator>(Parent); Assign && Assign->getOpcode() == BO_Assign)
      return AstQuery::spelled(Assign->getRHS()) == Ref;
    if (const auto *Assign = dyn_cast<CXXOperatorCallExpr>(Parent);
        Assign && Assign->getOperator() == OO_Equal && Assign->getNumArgs() == 2)
      return AstQuery::spelled(Assign->getArg(1)) == Ref && copiesOnly(Assign->getDirectCallee());
    bool Transparent = isa<ImplicitCastExpr>(Parent) || isa<MaterializeTemporaryExpr>(Parent) ||
                       isa<CXXBindTemporaryExpr>(Parent) || isa<ExprWithCleanups>(Parent) ||
                       isa<InitListExpr>(Parent) || isa<ParenExpr>(Parent);
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(Parent))
      Transparent = copiesOnly(Construct->getConstructor());
    if (const auto *Call = dyn_cast<CallExpr>(Parent)) {
      const FunctionDecl *Callee = Call->getDirectCallee();
      llvm::StringRef Name = Callee && Callee->getDeclName().isIdentifier() ? Callee->getName() : "";
      Transparent = (Name == "make_tuple" || Name == "make_pair" || Name == "forward_as_tuple" || Name == "tie") &&
                    isLibraryDeclaration(Callee, Patterns, Query);
    }
    if (!Transparent)
      return false;
    Current = Parents[0];
  }
  return false;
}

std::optional<Refusal> logitsUsedElsewhere(const CapturedSite &Site, const PatternSet &Patterns,
                                           const AstQuery &Query, const VariableUses &Uses) {
  std::vector<const VarDecl *> Variables = Site.Aliases;
  if (Site.Logits)
    Variables.push_back(Site.Logits);
  for (const VarDecl *Variable : Variables) {
    for (const DeclRefExpr *Read : Uses.reads(Variable)) {
      // In the loss's input the variable the input starts from is the one the rewrite hands over; another read
      // of it there (a size in a view) runs on the fused path too, where it holds only the logits' shape.
      if (Query.within(Read, Site.Input) &&
          ((Site.InputBase && Query.within(Read, Site.InputBase)) || isShapeRead(Read, Patterns, Query)))
        continue;
      if (Query.within(Read, Site.Input))
        return Refusal{ReasonKind::LogitsUsedElsewhere, Read,
                       "the loss's input reads `" + Variable->getNameAsString() +
                           "` beside the input itself, for more than its shape, where the fused path holds only "
                           "its shape"};
      if (Site.Producer && Query.within(Read, Site.Producer))
        continue;
      bool InChain = false;
      for (const ChainStep &Step : Site.Chain)
        InChain = InChain || Query.within(Read, Step.Statement);
      if (InChain)
        continue;
      // Where the labels are absent the original code runs unchanged.
      if ((Site.Guard.Kind == GuardKind::Branch || Site.Guard.Kind == GuardKind::Unrelated) &&
          Site.Guard.NotTaken && Query.within(Read, Site.Guard.NotTaken))
        continue;
      if (Site.Guard.Kind == GuardKind::EarlyReturn && Query.within(Read, Site.Guard.Construct))
        continue;
      if (Variable == Site.Logits && Query.before(Site.Loss->getBeginLoc(), Read->getBeginLoc()) &&
          isHandedOutAsIs(Read, Patterns, Query))
        continue;
      // A shape read (`logits.size(-1)`) of the head's own variable answers the same on the fused path,
      // where the variable holds lmfuse::skipped_logits, as long as no rebinding came before it.
      if (Variable == Site.Logits && isShapeRead(Read, Patterns, Query) && !reboundBefore(Site, Read, Query))
        continue;
      const Stmt *Statement = Query.enclosingStatement(Read) ? Query.enclosingStatement(Read) : Read;
      if (isHandedOutAsIs(Read, Patterns, Query)) {
        // Handed out before the loss: on the fused path it holds no values yet.
        for (const Stmt *At = Query.parentStmt(Read); At && !isa<CompoundStmt>(At); At = Query.parentStmt(At))
          if (isa<ReturnStmt>(At)) {
            Statement = At;
            break;
          }
        return Refusal{ReasonKind::LogitsUsedElsewhere, Statement,
                       "`" + Variable->getNameAsString() +
                           "` is handed out before the loss is computed, where the fused path holds only its shape"};
      }
      return Refusal{ReasonKind::LogitsUsedElsewhere, Statement,
                     "`" + Variable->getNameAsString() + "` is read by something other than the loss"};
    }
  }
  return std::nullopt;
}

/// Whether a return only hands back values (`return {logits, loss};`) and computes nothing.
bool onlyReturnsValues(const ReturnStmt *Return) {
  class CallFinder : public RecursiveASTVisitor<CallFinder> {
  public:
    bool VisitCallExpr(CallExpr *Call) {
      const FunctionDecl *Callee = Call->getDirectCallee();
      llvm::StringRef Name = Callee && Callee->getDeclName().isIdentifier() ? Callee->getName() : "";
      if (Name != "make_tuple" && Name != "make_pair" && Name != "forward_as_tuple")
        Computes = true;
      return !Computes;
    }
    bool Computes = false;
  } Finder;
  Finder.TraverseStmt(const_cast<Expr *>(Return->getRetValue()));
  return !Finder.Computes;
}

/// Whether E computes only from the logits' shape: shape reads of the head's variable, constants,
/// arithmetic and other locals (a value the skipped logits give as the real ones would).
bool isShapeOnly(const Expr *E, const CapturedSite &Site, const PatternSet &Patterns) {
  E = E->IgnoreImplicit()->IgnoreParens();
  if (const auto *Cleanups = dyn_cast<ExprWithCleanups>(E))
    return isShapeOnly(Cleanups->getSubExpr(), Site, Patterns);
  if (isa<IntegerLiteral>(E) || isa<FloatingLiteral>(E))
    return true;
  if (const auto *Unary = dyn_cast<UnaryOperator>(E))
    return Unary->isArithmeticOp() && isShapeOnly(Unary->getSubExpr(), Site, Patterns);
  if (const auto *Binary = dyn_cast<BinaryOperator>(E))
    return (Binary->isAdditiveOp() || Binary->isMultiplicativeOp()) && isShapeOnly(Binary->getLHS(), Site, Patterns) &&
           isShapeOnly(Binary->getRHS(), Site, Patterns);
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
    const auto *Variable = dyn_cast<VarDecl>(Ref->getDecl());
    return Variable && Variable->hasLocalStorage() && Variable->getType().isConstQualified() &&
           Variable != Site.Logits;
  }
  if (const auto *Call = dyn_cast<CXXMemberCallExpr>(E)) {
    const auto *Object = dyn_cast<DeclRefExpr>(Call->getImplicitObjectArgument()->IgnoreImplicit());
    const CXXMethodDecl *Method = Call->getMethodDecl();
    if (!Object || Object->getDecl() != Site.Logits || !Method || !Method->getDeclName().isIdentifier() ||
        !contains(Patterns.Benign.ShapeReads, Method->getName()))
      return false;
    for (const Expr *Argument : Call->arguments())
      if (!isShapeOnly(Argument, Site, Patterns))
        return false;
    return true;
  }
  return false;
}

/// Whether a statement of the labels branch belongs to the site (or is a harmless declaration).
bool belongsToSite(const Stmt *Statement, const CapturedSite &Site, const PatternSet &Patterns,
                   const AstQuery &Query) {
  if (const auto *Return = dyn_cast<ReturnStmt>(Statement); Return && onlyReturnsValues(Return))
    return true;
  if (isa<NullStmt>(Statement) || Query.within(Site.Loss, Statement) ||
      (Site.Producer && Query.within(Site.Producer, Statement)))
    return true;
  for (const ChainStep &Step : Site.Chain)
    if (Query.within(Step.Statement, Statement))
      return true;
  if (const auto *Declarations = dyn_cast<DeclStmt>(Statement)) {
    for (const Decl *D : Declarations->decls()) {
      if (isa<NamespaceAliasDecl>(D) || isa<UsingDirectiveDecl>(D) || isa<UsingDecl>(D))
        continue;
      const auto *Variable = dyn_cast<VarDecl>(D);
      if (Variable &&
          (llvm::is_contained(Site.LabelLocals, Variable) || llvm::is_contained(Site.OptionLocals, Variable) ||
           llvm::is_contained(Site.ShiftLengths, Variable)))
        continue;
      if (Variable && Variable->getInit() && isShapeOnly(Variable->getInit(), Site, Patterns))
        continue;  // `const auto B = logits.size(0), T = ...;`: the same on both paths
      return false;
    }
    return true;
  }
  return false;
}

std::optional<Refusal> labelsBranchNontrivial(const CapturedSite &Site, const PatternSet &Patterns,
                                              const AstQuery &Query,
                                              const VariableUses &) {
  std::vector<const Stmt *> Statements;
  if (Site.Guard.Kind == GuardKind::Branch) {
    const Stmt *Then = Site.Guard.Taken;
    if (const auto *Block = dyn_cast<CompoundStmt>(Then))
      Statements.assign(Block->body_begin(), Block->body_end());
    else
      Statements.push_back(Then);
  } else if (Site.Guard.Kind == GuardKind::EarlyReturn) {
    const auto *Block = dyn_cast_or_null<CompoundStmt>(Query.parentStmt(Site.Guard.Construct));
    bool After = false;
    for (const Stmt *Statement : Block ? Block->body() : llvm::ArrayRef<Stmt *>()) {
      if (After && !isa<ReturnStmt>(Statement))
        Statements.push_back(Statement);
      After = After || Statement == Site.Guard.Construct;
    }
  }
  for (const Stmt *Statement : Statements)
    if (!belongsToSite(Statement, Site, Patterns, Query))
      return Refusal{ReasonKind::LabelsBranchNontrivial, Statement,
                     "the labels branch does more than compute the loss"};
  return std::nullopt;
}

std::optional<Refusal> labelsMismatch(const CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query,
                                      const VariableUses &) {
  if (auto Found = fromBreak(Site.LabelsBreak, {BreakKind::LabelsNotTraced}, ReasonKind::LabelsMismatch))
    return Found;
  const LabelsGuard &Guard = Site.Guard;
  if ((Guard.Kind == GuardKind::Branch || Guard.Kind == GuardKind::EarlyReturn) && Site.LabelsRoot != Guard.Labels)
    return Refusal{ReasonKind::LabelsMismatch, Site.Target,
                   "the loss target `" + Query.text(Site.Target) + "` does not come from the guarded `" +
                       Guard.Labels->getNameAsString() + "`"};
  // The rewrite reads the labels itself (`*labels` for a `labels->` of the original, the variable handed to the
  // fused call): through a class of the program's, its own operators (an `operator*` beside the library
  // optional's `->`) or conversions would run where the original ran others.
  if (Site.TargetBase) {
    const Expr *Labels = AstQuery::spelled(Site.TargetBase);
    const CXXRecordDecl *Record = Labels->getType().getNonReferenceType()->getAsCXXRecordDecl();
    if (Record && !isLibraryDeclaration(Record, Patterns, Query))
      return Refusal{ReasonKind::LabelsMismatch, Site.Target,
                     "the labels `" + Query.text(Labels) + "` are a `" + Record->getNameAsString() +
                         "`, a class of the program's: the rewritten call reads them through its operators, which "
                         "may give otherwise than the ones the original used"};
  }
  if (Guard.Kind == GuardKind::Unrelated && Site.Producer && !Query.within(Site.Producer, Guard.Taken) &&
      !repeatableCondition(Guard.Condition, Patterns, Query))
    return Refusal{ReasonKind::LabelsMismatch, Guard.Condition,
                   "the loss runs under `" + Query.text(Guard.Condition) +
                       "`, which is not a presence test of the labels, and the rewrite cannot repeat it at the "
                       "head (it calls a function that is not a presence test or a pure method of the library, "
                       "or writes)"};
  return std::nullopt;
}

/// An `#include` (`#include_next`, `#import`) between A and B, in A's file, as "`#include` on line N", or ""
/// when none: the file it includes may declare names or define macros that the text spelled again at the
/// other location would then read. Read as the lexer reads the file (comments skipped, line splices joined,
/// `%:` for `#`). Macros changed between them are macroMeaningChanged's (ast_query.h).
std::string includeBetween(SourceLocation A, SourceLocation B, const AstQuery &Query) {
  const SourceManager &SM = Query.sourceManager();
  A = SM.getExpansionLoc(A);
  B = SM.getExpansionLoc(B);
  if (SM.isBeforeInTranslationUnit(B, A))
    std::swap(A, B);
  auto [File, Begin] = SM.getDecomposedLoc(A);
  auto [EndFile, End] = SM.getDecomposedLoc(B);
  if (File != EndFile)
    return "";
  std::string Found;
  std::optional<SourceLocation> DirectiveHash;  // a `#` that begins a line, just read
  forEachRawToken(SM, Query.context().getLangOpts(), File, Begin, End, [&](const Token &Word) {
    if (DirectiveHash && Word.is(tok::raw_identifier) && !Word.isAtStartOfLine() &&
        (Word.getRawIdentifier() == "include" || Word.getRawIdentifier() == "include_next" ||
         Word.getRawIdentifier() == "import"))
      Found = "`#" + Word.getRawIdentifier().str() + "` on line " + std::to_string(Query.line(*DirectiveHash));
    DirectiveHash.reset();
    if (Word.is(tok::hash) && Word.isAtStartOfLine())
      DirectiveHash = Word.getLocation();
    return Found.empty();
  });
  return Found;
}

/// The detail of a name of Text that would mean another thing at Where (AstQuery::renamedAt): a local read
/// there out of scope (`{ auto &W = …; logits = F::linear(x, W); }`, the loss after the block), or a local,
/// alias, class or `using` declared in scope there that hides what it names (`if (auto h = other; labels)`).
std::string renamingDetail(const AstQuery::Renamed &Found, const std::string &Text, const std::string &Where,
                           const AstQuery &Query) {
  std::string Name = "`" + Found.Name + "`";
  std::string Prefix = "the fused path would spell `" + Text + "` again " + Where + ", where " + Name;
  if (!Found.There)
    return Prefix + " (line " + std::to_string(Query.line(Found.Read->getLocation())) +
           ") is out of scope and the name may mean another";
  if (isa<UsingDirectiveDecl>(Found.There))
    return Prefix + " may be another declaration, brought in by the `using namespace` on line " +
           std::to_string(Query.line(Found.There->getLocation()));
  return Prefix + " names the declaration on line " + std::to_string(Query.line(Found.There->getLocation()));
}

std::optional<Refusal> guardOutOfReach(const CapturedSite &Site, const PatternSet &, const AstQuery &Query,
                                       const VariableUses &) {
  if (!Site.Producer || !runsWithoutLoss(Site.Producer, Site.Guard, Query))
    return std::nullopt;
  // The logits statement repeats the guard's test: every name it reads must mean there what it means at the
  // guard (a local declared after the head, or one of a block around the head that hides the guard's, would not).
  if (auto Found = Query.renamedAt(Site.Guard.Condition, Site.Producer))
    return Refusal{ReasonKind::LabelsMismatch, Site.Guard.Condition,
                   renamingDetail(*Found, Query.text(AstQuery::spelled(Site.Guard.Condition)), "at the head", Query)};
  if (std::string Macro = Query.macroMeaningChanged(Site.Guard.Condition, Site.Producer->getBeginLoc()); !Macro.empty())
    return Refusal{ReasonKind::LabelsMismatch, Site.Guard.Condition,
                   "the fused path would spell `" + Query.text(AstQuery::spelled(Site.Guard.Condition)) +
                       "` again at the head, where `" + Macro +
                       "` is not the macro it is in the test (a #define, #undef or macro pragma between them)"};
  if (std::string Include = includeBetween(Site.Guard.Condition->getBeginLoc(), Site.Producer->getBeginLoc(), Query);
      !Include.empty())
    return Refusal{ReasonKind::LabelsMismatch, Site.Guard.Condition,
                   "the fused path would spell `" + Query.text(AstQuery::spelled(Site.Guard.Condition)) +
                       "` again at the head, and the " + Include + " between them may change what it means"};
  return std::nullopt;
}

/// The labels a local shifted (`auto y = targets.slice(1, 1);`) are passed unshifted, their code spelled again at
/// the loss: every name it looks up must find there what it found where the local was made, and no macro of
/// it or `#include` may come between (a local `targets` in the loss's block would hand the fused call others).
std::optional<Refusal> labelsSpelledAgain(const CapturedSite &Site, const PatternSet &, const AstQuery &Query,
                                          const VariableUses &) {
  const Expr *Labels = Site.LabelsTextFrom;
  if (!Labels || Query.within(Labels, Site.Loss))
    return std::nullopt;
  const std::string Text = Query.text(AstQuery::spelled(Labels));
  if (auto Found = Query.renamedAt(Labels, Site.Loss))
    return Refusal{ReasonKind::LabelsMismatch, Labels, renamingDetail(*Found, Text, "at the loss", Query)};
  if (std::string Macro = Query.macroMeaningChanged(Labels, Site.Loss->getBeginLoc()); !Macro.empty())
    return Refusal{ReasonKind::LabelsMismatch, Labels,
                   "the fused path would spell `" + Text + "` again at the loss, where `" + Macro +
                       "` is not the macro it is where the labels were shifted (a #define, #undef or macro pragma "
                       "between them)"};
  if (std::string Include = includeBetween(Labels->getBeginLoc(), Site.Loss->getBeginLoc(), Query); !Include.empty())
    return Refusal{ReasonKind::LabelsMismatch, Labels,
                   "the fused path would spell `" + Text + "` again at the loss, and the " + Include +
                       " between them may change what it means"};
  return std::nullopt;
}

/// The construct that may keep the loss from running on a path from the head's statement, other than the
/// labels test the rewrite repeats at the head (null when none): another `if` around it, a branch of `?:`,
/// the right side of `&&` / `||`, the body of a loop that may run no time, a `switch`, a `try`.
const Stmt *unrepeatedCondition(const CapturedSite &Site, const AstQuery &Query) {
  const Stmt *Statement = Query.enclosingStatement(Site.Producer);
  const Stmt *Block = Statement ? Query.parentStmt(Statement) : nullptr;
  const Stmt *Child = Site.Loss;
  for (const Stmt *At = Query.parentStmt(Child); At && At != Block && At != Site.Body;
       Child = At, At = Query.parentStmt(At)) {
    if (const auto *If = dyn_cast<IfStmt>(At)) {
      if (If != Site.Guard.Construct && Child != If->getCond() && Child != If->getInit())
        return If;
    } else if (const auto *Choice = dyn_cast<AbstractConditionalOperator>(At)) {
      if (Choice != Site.Guard.Construct && Child != Choice->getCond())
        return Choice;
    } else if (const auto *Logical = dyn_cast<BinaryOperator>(At)) {
      if (Logical->isLogicalOp() && Child == Logical->getRHS())
        return Logical;
    } else if (const auto *For = dyn_cast<ForStmt>(At)) {
      if (Child != For->getInit())
        return For;
    } else if (isa<WhileStmt, CXXForRangeStmt, SwitchStmt, CaseStmt, DefaultStmt, CXXTryStmt, CXXCatchStmt>(At)) {
      return At;
    }
  }
  // A `try` around the head's statement and the loss alike: an exception caught there after the head (the
  // loss's own, for a label out of range) goes on after its handler with the logits skipped.
  for (const Stmt *At = Block; At && At != Site.Body; At = Query.parentStmt(At))
    if (isa<CXXTryStmt>(At))
      return At;
  // A `break` or `continue` between the head and the loss that leaves a loop (or switch) holding the loss
  // skips it: `do { if (!train) break; loss = ...; } while (false);`, or the head and a `continue` in a loop.
  class Jumps : public RecursiveASTVisitor<Jumps> {
  public:
    Jumps(const CapturedSite &Site, const AstQuery &Query) : Site(Site), Query(Query) {}
    bool VisitBreakStmt(BreakStmt *Jump) { return visit(Jump); }
    bool VisitContinueStmt(ContinueStmt *Jump) { return visit(Jump); }
    bool visit(const Stmt *Jump) {
      if (!Query.before(Site.Producer->getEndLoc(), Jump->getBeginLoc()) ||
          !Query.before(Jump->getBeginLoc(), Site.Loss->getBeginLoc()))
        return true;
      const Stmt *Target = Query.parentStmt(Jump);
      while (Target && !isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt, SwitchStmt>(Target))
        Target = Query.parentStmt(Target);
      if (Target && (!isa<SwitchStmt>(Target) || isa<BreakStmt>(Jump)) && Query.within(Site.Loss, Target))
        Found = Jump;
      return !Found;
    }
    const CapturedSite &Site;
    const AstQuery &Query;
    const Stmt *Found = nullptr;
  } Finder(Site, Query);
  Finder.TraverseStmt(const_cast<Stmt *>(Site.Body));
  return Finder.Found;
}

/// How unrepeatedCondition's construct keeps the loss from running, for a refusal's detail.
std::string conditionText(const Stmt *Condition, const AstQuery &Query) {
  if (const auto *If = dyn_cast<IfStmt>(Condition))
    return "under `if (" + Query.text(If->getCond()) + ")`";
  if (const auto *Choice = dyn_cast<AbstractConditionalOperator>(Condition))
    return "in a branch of `" + Query.text(Choice->getCond()) + " ? ... : ...`";
  if (const auto *Logical = dyn_cast<BinaryOperator>(Condition))
    return "after `" + Query.text(Logical->getLHS()) + " " + Logical->getOpcodeStr().str() + "`";
  if (isa<CXXTryStmt, CXXCatchStmt>(Condition))
    return "in a `try` block (an exception caught before it skips it)";
  if (isa<SwitchStmt, CaseStmt, DefaultStmt>(Condition))
    return "in a case of a `switch`";
  if (isa<BreakStmt, ContinueStmt>(Condition))
    return std::string("where the `") + (isa<BreakStmt>(Condition) ? "break" : "continue") + "` before it does not leave";
  return "in a loop that may run no time or leave before it";
}

/// The head's statement sets the logits on every path, and repeats only the labels test: where the loss is
/// kept from running by anything else, the logits stay skipped there, so they must not reach anything but
/// the site (handed out as the model's output, read where the labels are absent) or shape reads.
std::optional<Refusal> lossConditionNotRepeated(const CapturedSite &Site, const PatternSet &Patterns,
                                                const AstQuery &Query, const VariableUses &Uses) {
  if (!Site.Head || !Site.Producer)
    return std::nullopt;
  const Stmt *Condition = unrepeatedCondition(Site, Query);
  if (!Condition)
    return std::nullopt;
  std::vector<const VarDecl *> Carriers = Site.Aliases;
  if (Site.Logits)
    Carriers.push_back(Site.Logits);
  // In a `try` around the loss, what follows the loss in the try block runs only once the loss is done.
  const auto *Try = dyn_cast<CXXTryStmt>(Condition);
  for (const VarDecl *Carrier : Carriers)
    for (const DeclRefExpr *Read : Uses.reads(Carrier)) {
      bool InSite = Query.within(Read, Site.Input) || Query.within(Read, Site.Producer);
      for (const ChainStep &Step : Site.Chain)
        InSite = InSite || Query.within(Read, Step.Statement);
      if (Try && Query.within(Read, Try->getTryBlock()) && Query.before(Site.Loss->getEndLoc(), Read->getBeginLoc()))
        continue;
      if (InSite || (Carrier == Site.Logits && isShapeRead(Read, Patterns, Query)))
        continue;
      return Refusal{ReasonKind::LabelsMismatch, Condition,
                     "the loss runs only " + conditionText(Condition, Query) +
                         ", which the rewrite does not repeat at the head, and `" + Carrier->getNameAsString() +
                         "` is used on the paths where it does not run: there it would hold no values"};
    }
  return std::nullopt;
}

std::optional<Refusal> inputsModified(const CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query,
                                      const VariableUses &) {
  if (auto Change = findInputChange(Site, Patterns, Query))
    return Refusal{ReasonKind::InputsModified, Change->Statement, Change->Why};
  return std::nullopt;
}

/// The fused call evaluates the head's module, weight and bias expressions (and its input, unless
/// hoisted) again at the loss: each must give there what it gave at the head (what may change them in
/// between is inputsModified's), so none may have a side effect, nor name a declaration hidden there.
std::optional<Refusal> headPartsReevaluated(const CapturedSite &Site, const PatternSet &Patterns,
                                            const AstQuery &Query, const VariableUses &) {
  if (!Site.Head)
    return std::nullopt;
  // A part of a class of the program's becomes a tensor through the program's code (a conversion operator or
  // constructor) wherever it is passed, once at the head in the original and again at the loss when rewritten.
  std::vector<const Expr *> Parts = Site.Head->Copied;
  Parts.push_back(Site.Head->Hidden);
  for (const Expr *Part : Parts) {
    const Expr *Written = AstQuery::spelled(Part);
    const CXXRecordDecl *Record = Written->getType().getNonReferenceType()->getAsCXXRecordDecl();
    if (Record && !isLibraryDeclaration(Record, Patterns, Query))
      return Refusal{ReasonKind::InputsModified, Site.Head->Call,
                     "`" + Query.text(Written) + "` is a `" + Record->getNameAsString() +
                         "`, a class of the program's: the code that makes a tensor of it would run again at the loss"};
  }
  for (const Expr *Part : Site.Head->Copied)
    if (const Expr *Found = notReevaluable(Part, Patterns, Query))
      return Refusal{ReasonKind::InputsModified, Site.Head->Call,
                     "the fused call would evaluate `" + Query.text(AstQuery::spelled(Part)) +
                         "` again at the loss, where `" + Query.text(Found) + "` may give another value"};
  std::vector<const Expr *> Spelled = Site.Head->Copied;
  if (Site.Producer && !Site.HoistHidden)
    Spelled.push_back(Site.Head->Hidden);
  for (const Expr *Part : Spelled)
    if (auto Found = Query.renamedAt(Part, Site.Loss))
      return Refusal{ReasonKind::InputsModified, Site.Head->Call,
                     renamingDetail(*Found, Query.text(AstQuery::spelled(Part)), "at the loss", Query)};
  for (const Expr *Part : Spelled)
    if (std::string Macro = Query.macroMeaningChanged(Part, Site.Loss->getBeginLoc()); !Macro.empty())
      return Refusal{ReasonKind::InputsModified, Site.Head->Call,
                     "the fused path would spell `" + Query.text(AstQuery::spelled(Part)) + "` again at the loss, where `" +
                         Macro + "` is not the macro it is at the head (a #define, #undef or macro pragma between them)"};
  if (std::string Include = includeBetween(Site.Head->Call->getEndLoc(), Site.Loss->getBeginLoc(), Query);
      !Include.empty())
    return Refusal{ReasonKind::InputsModified, Site.Head->Call,
                   "the fused path would spell the head's parts again at the loss, and the " + Include +
                       " between them may change what they mean"};
  return std::nullopt;
}

std::optional<Refusal> lossUnsupported(const CapturedSite &Site, const PatternSet &, const AstQuery &,
                                       const VariableUses &) {
  return fromBreak(Site.OptionsBreak, {BreakKind::OptionUnsupported}, ReasonKind::LossUnsupported);
}

/// The site's function differentiates with a graph of the gradient (a second_order call whose create_graph
/// argument is not the constant `false`): the fused loss's backward would throw where the original's runs.
std::optional<Refusal> differentiatedTwice(const CapturedSite &Site, const PatternSet &Patterns,
                                           const AstQuery &Query, const VariableUses &) {
  if (Patterns.SecondOrder.empty() || !Site.Body)
    return std::nullopt;
  struct Finder : RecursiveASTVisitor<Finder> {
    const PatternSet &Patterns;
    const AstQuery &Query;
    const CallExpr *Found = nullptr;
    Finder(const PatternSet &P, const AstQuery &Q) : Patterns(P), Query(Q) {}
    bool VisitCallExpr(CallExpr *Call) {
      const FunctionDecl *Callee = Call->getDirectCallee();
      if (!Callee || Found)
        return !Found;
      const std::string Name = qualifiedName(Callee);
      for (const SecondOrderPattern &Rule : Patterns.SecondOrder) {
        if (Name != Rule.Callee || Rule.CreateGraph >= Call->getNumArgs() ||
            !isLibraryDeclaration(Callee, Patterns, Query))
          continue;
        const Expr *CreateGraph = Call->getArg(Rule.CreateGraph);
        bool Value = true;
        if (isa<CXXDefaultArgExpr>(CreateGraph) ||
            (!CreateGraph->isValueDependent() &&
             CreateGraph->EvaluateAsBooleanCondition(Value, Query.context()) && !Value))
          continue;
        Found = Call;
        return false;
      }
      return true;
    }
  } Search(Patterns, Query);
  Search.TraverseStmt(const_cast<Stmt *>(Site.Body));
  if (!Search.Found)
    return std::nullopt;
  return Refusal{ReasonKind::LossUnsupported, Search.Found,
                 "`" + Query.text(Search.Found) +
                     "` differentiates with create_graph: the fused loss's gradients are values, not graphs "
                     "(its backward throws under create_graph)"};
}

// The order is the precedence: a site in a macro, under a #line mapping, reading its own place, or where the
// rewrite's names mean other things, is never
// analysed further, a loss the program declares is not the library's whatever else holds, a softcap wins over
// every other change to the logits, and option problems only matter for an otherwise good site.
constexpr Check Checks[] = {inMacro,        lineDirectiveInEffect, positionDependent, qualifierCaptured, lossDeclaredByProgram, softcapped,           headWrapped,            notLogProbabilities,
                            headNotLinear,
                            logitsRebound,  logitsIndexed,        logitsUsedElsewhere,    labelsBranchNontrivial,
                            labelsMismatch, labelsSpelledAgain, guardOutOfReach, lossConditionNotRepeated, headPartsReevaluated, inputsModified,
                            differentiatedTwice, lossUnsupported};

}  // namespace

std::optional<Refusal> findRefusal(const CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query,
                                   const VariableUses &Uses) {
  for (Check Run : Checks)
    if (auto Found = Run(Site, Patterns, Query, Uses))
      return Found;
  return std::nullopt;
}

std::optional<Refusal> findEditRefusal(const CapturedSite &Site, llvm::ArrayRef<tooling::Replacement> Edits,
                                       const std::set<std::string> &OwnWords,
                                       llvm::ArrayRef<AnalysedExpression> Analysed, const AstQuery &Query) {
  const SourceManager &SM = Query.sourceManager();
  const LangOptions &Language = Query.context().getLangOpts();
  // What the fused call asserts copies code read elsewhere (a constant of the shift at the head, the options'
  // object where the options local is made) to the loss: each name in it must find there what it found where
  // it was read, or the build's compiler would check another expression (and fail the build on a true one).
  for (const AnalysedExpression &Item : Analysed) {
    if (!Item.Source)
      continue;
    auto Captured = [&](const std::string &Why) {
      return Refusal{ReasonKind::NameCaptured, Site.Loss,
                     "the rewritten call checks `" + Query.text(Item.Source) + "`, read on line " +
                         std::to_string(Query.line(Item.Source->getBeginLoc())) + ", at the loss on line " +
                         std::to_string(Query.line(Site.Loss->getBeginLoc())) + ", where " + Why};
    };
    if (std::string Macro = Query.macroMeaningChanged(Item.Source, Site.Loss->getBeginLoc()); !Macro.empty())
      return Captured("`" + Macro + "` is another macro than where it was read (a #define, #undef or macro pragma "
                      "between them)");
    auto Meaning = [&](const NamedDecl *Found) {
      if (!Found)
        return std::string("what it names outside the function");
      if (isa<UsingDirectiveDecl>(Found))
        return "what the `using namespace` on line " + std::to_string(Query.line(Found->getLocation())) +
               " may bring in";
      return declarationDetail(Found, Query);
    };
    if (auto Found = Query.renamedAt(Item.Source, Site.Loss))
      return Captured("`" + Found->Name + "` names " + Meaning(Found->There) + ", not " + Meaning(Found->Read));
  }
  // The program's own words: every name in the code the rewrite moves or copies, whose macros the move checks
  // compare where they are written and where they go (macroMeaningChanged). A word of the written text is a
  // copy of those only if it is one of them and not one the rewrite also writes of its own (`weight` of the
  // `lm_head->weight` it spells, where the loss's copied code reads `lm_head->weight.size(0)` too).
  std::set<std::string> ProgramWords;
  std::vector<const Stmt *> Parts = rewrittenParts(Site, /*WithOptionLocals=*/true);
  for (const VarDecl *Local : Site.LabelLocals)
    Parts.push_back(Local->getInit());
  for (const Stmt *Part : Parts) {
    CharSourceRange Range = Query.fileRange(Part->getSourceRange());
    if (Range.isInvalid())
      continue;
    auto [File, Begin] = SM.getDecomposedLoc(Range.getBegin());
    forEachRawToken(SM, Language, File, Begin, SM.getFileOffset(Range.getEnd()), [&](const Token &Word) {
      if (Word.is(tok::raw_identifier))
        ProgramWords.insert(Word.getRawIdentifier().str());
      return true;
    });
  }
  FileID File = SM.getFileID(SM.getExpansionLoc(Site.Loss->getBeginLoc()));
  for (const tooling::Replacement &Edit : Edits) {
    SourceLocation At = SM.getComposedLoc(File, Edit.getOffset());
    std::optional<Refusal> Found;
    // A directive inside the code an edit replaces would go with the text that moves (above a hoisted head,
    // into a lambda), changing what the names after it mean there, or be run twice.
    forEachRawToken(SM, Language, File, Edit.getOffset(), Edit.getOffset() + Edit.getLength(), [&](const Token &Word) {
      if (Word.is(tok::hash) && Word.isAtStartOfLine())
        Found = Refusal{ReasonKind::InMacro, Site.Loss,
                        "a preprocessor directive on line " + std::to_string(Query.line(Word.getLocation())) +
                            " lies inside code the rewrite replaces, where it would move with the text or be "
                            "read twice"};
      return !Found;
    });
    if (Found)
      return Found;
    forEachRawTokenOf(Edit.getReplacementText(), Language, [&](const Token &Word) {
      if (!Word.is(tok::raw_identifier))
        return true;
      std::string Name = Word.getRawIdentifier().str();
      bool Own = OwnWords.count(Name);
      if ((Own || !ProgramWords.count(Name)) && Query.isMacroAt(Name, At))
        Found = Refusal{ReasonKind::NameCaptured, Site.Loss,
                        "the rewritten code writes `" + Name + "` on line " + std::to_string(Query.line(At)) +
                            ", where it is a macro of the program"};
      else if (!Own && !ProgramWords.count(Name))
        // A word from neither list: the planner wrote a name ownWords does not know, whose macro the check above
        // could miss at another site (where the program spells it too). Refused rather than trusted.
        Found = Refusal{ReasonKind::NameCaptured, Site.Loss,
                        "the rewritten code writes `" + Name + "` on line " + std::to_string(Query.line(At)) +
                            ", which is neither the program's nor one the rewrite lists as its own"};
      return !Found;
    });
    if (Found)
      return Found;
  }
  return std::nullopt;
}

}  // namespace lmfuse::rewriter
