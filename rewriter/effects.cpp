// Effect analysis between a site's head and its loss (see effects.h for what counts as a change).
#include "effects.h"

#include <functional>
#include <set>

#include "clang/AST/ParentMapContext.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Analysis/Analyses/ExprMutationAnalyzer.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include "head_match.h"
#include "labels_guard.h"
#include "pattern_match.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

/// The types among template arguments, those of a parameter pack (`std::tuple<int, Box>`,
/// `std::make_unique<T, Args...>`) included.
std::vector<QualType> typesAmong(llvm::ArrayRef<TemplateArgument> Arguments) {
  std::vector<QualType> Types;
  for (const TemplateArgument &Argument : Arguments)
    if (Argument.getKind() == TemplateArgument::Type)
      Types.push_back(Argument.getAsType());
    else if (Argument.getKind() == TemplateArgument::Pack)
      for (QualType Inner : typesAmong(Argument.pack_elements()))
        Types.push_back(Inner);
  return Types;
}

/// The types among the template arguments of a class template's specialisation (Record); none for any
/// other class.
std::vector<QualType> typeArguments(const CXXRecordDecl *Record) {
  const auto *Specialization = dyn_cast<ClassTemplateSpecializationDecl>(Record);
  return Specialization ? typesAmong(Specialization->getTemplateArgs().asArray()) : std::vector<QualType>();
}

/// A value the analysis tracks: a variable, a member of `this` (its FieldDecl), or `this` itself
/// (the enclosing class's declaration stands for it).
using Root = const Decl *;

/// Whether a value of type T can give access to tensor storage: a tensor, anything holding one
/// (containers, optionals, modules, closures), or a non-const pointer or reference to anything.
class StorageTypes {
public:
  bool reaches(QualType Type, int Depth = 0) {
    if (Type.isNull() || Type->isDependentType() || Depth > 8)
      return true;
    if (const auto *Reference = Type->getAs<ReferenceType>()) {
      QualType Pointee = Reference->getPointeeType();
      return !Pointee.isConstQualified() || reaches(Pointee, Depth + 1);
    }
    if (Type->isPointerType()) {
      QualType Pointee = Type->getPointeeType();
      return !Pointee.isConstQualified() || reaches(Pointee, Depth + 1);
    }
    if (const ArrayType *Array = Type->getAsArrayTypeUnsafe())
      return reaches(Array->getElementType(), Depth + 1);
    if (Type->isBuiltinType() || Type->isEnumeralType() || Type->isFunctionType() || Type->isMemberPointerType())
      return false;
    const CXXRecordDecl *Record = Type->getAsCXXRecordDecl();
    if (!Record)
      return !Type->isScalarType();
    Record = Record->getDefinition();
    if (!Record)
      return true;  // incomplete: nothing is known of what it holds
    auto Known = Memo.find(Record);
    if (Known != Memo.end())
      return Known->second;
    Memo[Record] = false;  // a type that holds itself through a pointer is decided by its other members
    bool Result = holdsStorage(Record, Depth);
    Memo[Record] = Result;
    return Result;
  }

private:
  bool holdsStorage(const CXXRecordDecl *Record, int Depth) {
    std::string Name = Record->getQualifiedNameAsString();
    if (Name == "at::Tensor" || Name == "at::TensorBase" || Name == "c10::TensorImpl" || Name == "c10::Storage")
      return true;
    for (QualType Argument : typeArguments(Record))
      if (reaches(Argument, Depth + 1))
        return true;
    for (const FieldDecl *Field : Record->fields())
      if (reaches(Field->getType(), Depth + 1))
        return true;
    for (const CXXBaseSpecifier &Base : Record->bases())
      if (reaches(Base.getType(), Depth + 1))
        return true;
    if (Record->isLambda())
      for (const LambdaCapture &Capture : Record->captures())
        if (Capture.capturesThis() || Capture.getCaptureKind() == LCK_ByRef)
          return true;
    return false;
  }

  llvm::DenseMap<const CXXRecordDecl *, bool> Memo;
};

/// Every root an expression mentions, with the node that mentions it.
struct Mention {
  Root Of;
  const Expr *Node;
};

class MentionCollector : public RecursiveASTVisitor<MentionCollector> {
public:
  explicit MentionCollector(Root This) : This(This) {}
  bool shouldVisitLambdaBody() const { return true; }
  bool shouldVisitImplicitCode() const { return true; }
  bool VisitDeclRefExpr(DeclRefExpr *Ref) {
    const ValueDecl *Value = Ref->getDecl();
    if (const auto *Binding = dyn_cast<BindingDecl>(Value))
      Value = Binding->getDecomposedDecl() ? Binding->getDecomposedDecl() : Value;
    if (isa<VarDecl>(Value))
      Found.push_back({Value, Ref});
    return true;
  }
  bool VisitMemberExpr(MemberExpr *Member) {
    if (isa<CXXThisExpr>(Member->getBase()->IgnoreParenImpCasts()) && isa<FieldDecl>(Member->getMemberDecl()))
      Found.push_back({Member->getMemberDecl(), Member});
    return true;
  }
  bool VisitCXXThisExpr(CXXThisExpr *Expression) {
    if (This)
      Found.push_back({This, Expression});
    return true;
  }
  Root This;
  std::vector<Mention> Found;
};

/// The whole analysis of one site.
class InputChangeFinder {
public:
  InputChangeFinder(const CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query)
      : Site(Site), Effects(Patterns.Effects), Patterns(Patterns), Query(Query),
        SM(Query.sourceManager()) {
    if (const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Site.Function); Method && Method->isInstance())
      This = Method->getParent();
  }

  std::optional<InputChange> run() {
    if (!Site.Head || !Site.Body)
      return std::nullopt;
    if (auto Jump = findGoto())
      return Jump;
    if (auto Captured = lambdaCapture())
      return Captured;
    collectProtected();
    if (auto Own = headAssignment())
      return Own;
    collectTaint();
    buildRegion();
    if (auto Hidden = modeGuardHidden())
      return Hidden;
    if (auto Scope = modeGuardScopeEndsBetween())
      return Scope;
    return scanRegion();
  }

private:
  // ---- what must not change ----------------------------------------------------------------------

  /// The head call's own mentions (its input, module, weight and bias) and, when the rewrite repeats
  /// the guard's test at the head, the guard's.
  void collectProtected() {
    for (const Mention &Found : mentions(Site.Head->Call, /*ThroughStorage=*/false))
      Protected.insert(Found.Of);
    if (Site.Producer && Site.Guard.Condition && runsWithoutLoss(Site.Producer, Site.Guard, Query))
      for (const Mention &Found : mentions(Site.Guard.Condition, false))
        Protected.insert(Found.Of);
    // A hoisted input is read once, at the head: rebinding its variables later changes nothing.
    if (Site.HoistHidden)
      for (const Mention &Found : mentions(Site.Head->Hidden, false))
        HoistedRoots.insert(Found.Of);
    // A local reference or pointer the fused call reads again at the loss (`const auto &w = wte;`, `auto *wp =
    // &wte;`) reads there what it was bound to: rebinding or swapping that is rebinding the input.
    for (bool Added = true; Added;) {
      Added = false;
      for (Root Of : std::vector<Root>(Protected.begin(), Protected.end())) {
        const auto *Variable = dyn_cast<VarDecl>(Of);
        if (!Variable || isa<ParmVarDecl>(Variable) || !Variable->hasLocalStorage() || !Variable->getInit() ||
            !(Variable->getType()->isReferenceType() || Variable->getType()->isPointerType()) || readOnceAtHead(Of))
          continue;
        for (const Mention &Found : mentions(Variable->getInit(), false))
          Added |= Protected.insert(Found.Of).second;
      }
    }
    for (Root Of : Protected)
      if (isa<FieldDecl>(Of) && This)
        Protected.insert(This);
  }

  /// The head's own assignment (`out = lm_head(x)`) writes its target after the head has read its inputs, before
  /// the region begins: a target that is an input the fused call reads again at the loss, or a reference that
  /// names one (`torch::Tensor &out = x;`) or may name one (a reference the caller binds), changes that input.
  std::optional<InputChange> headAssignment() {
    if (!Site.Logits || !Site.Producer || isa<DeclStmt>(Site.Producer))
      return std::nullopt;
    std::string Target = Site.Logits->getNameAsString();
    std::set<Root> Named = {Site.Logits};
    for (bool Added = true; Added;) {
      Added = false;
      for (Root Of : std::vector<Root>(Named.begin(), Named.end())) {
        const auto *Variable = dyn_cast<VarDecl>(Of);
        // A reference, and a pointer it is bound through (`torch::Tensor &out = *p;`), name what they were
        // initialised from; one the caller binds, or code the analysis does not read gives, may name anything.
        if (!Variable || !(Variable->getType()->isReferenceType() || Variable->getType()->isPointerType()))
          continue;
        if (!Variable->hasLocalStorage() || isa<ParmVarDecl>(Variable) || !Variable->getInit() ||
            givenByUnreadCode(Variable->getInit()))
          return change(Site.Producer, "the head's output is assigned through `" + Target +
                                           "`, a reference that may name " + inputs() +
                                           ", which the fused call reads again at the loss");
        for (const Mention &Found : mentions(Variable->getInit(), false))
          Added |= Named.insert(Found.Of).second;
      }
    }
    for (Root Of : Named)
      if (Protected.count(Of) && !readOnceAtHead(Of))
        return change(Site.Producer, "the head's output is assigned to `" + Target + "`" +
                                         (Of == Site.Logits ? "" : ", which names `" + nameOf(Of) + "`") +
                                         ", an input the fused call reads again at the loss");
    return std::nullopt;
  }

  /// Roots that may share storage with a protected input: the inputs, every parameter, member and
  /// global that can hold storage (the caller may have made them aliases), and every local that gets
  /// its value from one of them, in any order (the analysis is flow-insensitive).
  void collectTaint() {
    for (Root Of : Protected)
      Tainted.insert(Of);
    if (This && Types.reaches(Query.context().getRecordType(cast<CXXRecordDecl>(This))))
      Tainted.insert(This);
    for (const Mention &Found : mentions(Site.Body, false)) {
      const auto *Variable = dyn_cast<VarDecl>(Found.Of);
      bool NonLocal = isa<FieldDecl>(Found.Of) || (Variable && (isa<ParmVarDecl>(Variable) || !Variable->hasLocalStorage()));
      if (NonLocal && Types.reaches(cast<ValueDecl>(Found.Of)->getType()))
        Tainted.insert(Found.Of);
    }
    // Sharing storage goes both ways: a value made from another (`h = x.view(...)`, `h = hs[0]`,
    // `h = torch::from_blob(buffer.data(), ...)`) shares it with what it was made from, so a write to
    // `x`, `hs` or `buffer` reaches the input as surely as a write to `h`.
    std::vector<std::pair<const Expr *, std::vector<Root>>> Flows = collectFlows();
    for (Root Of : FromUnreadCode)
      if (!isExcluded(Of))
        Tainted.insert(Of);
    for (bool Changed = true; Changed;) {
      Changed = false;
      for (const auto &[From, Into] : Flows) {
        if (reachedRoot(From))
          for (Root Target : Into)
            if (!isExcluded(Target) && Tainted.insert(Target).second)
              Changed = true;
        if (llvm::any_of(Into, [&](Root Target) { return isTainted(Target); }))
          for (const Mention &Source : mentions(From, /*ThroughStorage=*/true))
            if (!isExcluded(Source.Of) && Tainted.insert(Source.Of).second)
              Changed = true;
      }
    }
  }

  /// Value flows into locals: initialisers, assignments, range-for loops, and arguments handed to code
  /// that may store one argument into another (user code, or non-const reference parameters).
  std::vector<std::pair<const Expr *, std::vector<Root>>> collectFlows() {
    class FlowCollector : public RecursiveASTVisitor<FlowCollector> {
    public:
      explicit FlowCollector(InputChangeFinder &Finder) : Finder(Finder) {}
      bool shouldVisitLambdaBody() const { return true; }
      bool VisitVarDecl(VarDecl *Variable) {
        if (const Expr *Init = Variable->getInit()) {
          Flows.push_back({Init, {Variable}});
          if (Finder.givenByUnreadCode(Init))
            Finder.FromUnreadCode.push_back(Variable);
        }
        return true;
      }
      bool VisitCXXForRangeStmt(CXXForRangeStmt *Loop) {
        if (Loop->getRangeInit() && Loop->getLoopVariable()) {
          Flows.push_back({Loop->getRangeInit(), {Loop->getLoopVariable()}});
          if (Finder.givenByUnreadCode(Loop->getRangeInit()))
            Finder.FromUnreadCode.push_back(Loop->getLoopVariable());
        }
        return true;
      }
      // A constructor the analysis does not read may store into a non-const reference or pointer it is given
      // (`Grab grab(alias);`).
      bool VisitCXXConstructExpr(CXXConstructExpr *Construct) {
        const CXXConstructorDecl *Constructor = Construct->getConstructor();
        if (!Constructor || !Finder.unreadCode(Construct))
          return true;
        for (unsigned I = 0; I < Construct->getNumArgs() && I < Constructor->getNumParams(); ++I) {
          QualType Type = Constructor->getParamDecl(I)->getType();
          if ((Type->isReferenceType() || Type->isPointerType()) && !Type->getPointeeType().isConstQualified())
            for (Root Local : Finder.locals(Construct->getArg(I)))
              Finder.FromUnreadCode.push_back(Local);
        }
        return true;
      }
      // An assignment's target may be a member or a global, which then shares storage with what it is
      // given (`cache_ = x.view(...)`): the value's sources are reached through it.
      bool VisitBinaryOperator(BinaryOperator *Operator) {
        if (Operator->isAssignmentOp())
          assigned(Operator->getLHS(), Operator->getRHS());
        return true;
      }
      void assigned(const Expr *Target, const Expr *Value) {
        Flows.push_back({Value, Finder.roots(Target)});
        if (Finder.givenByUnreadCode(Value))
          for (Root Local : Finder.locals(Target))
            Finder.FromUnreadCode.push_back(Local);
      }
      bool VisitCallExpr(CallExpr *Call) {
        if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Call);
            Operator && Operator->isAssignmentOp() && Operator->getNumArgs() == 2) {
          assigned(Operator->getArg(0), Operator->getArg(1));
          return true;
        }
        // Arguments that a callee may store into each other: every argument flows into the locals of
        // every argument that is not taken by value or const reference.
        std::vector<Root> Into;
        for (const Expr *Argument : Finder.changeableArguments(Call))
          for (Root Local : Finder.locals(Argument))
            Into.push_back(Local);
        // Code the analysis does not read may store into them anything it reaches (`lookup_hidden(out)`
        // setting `out = g_h`).
        if (Finder.unreadCode(Call))
          Finder.FromUnreadCode.insert(Finder.FromUnreadCode.end(), Into.begin(), Into.end());
        // A non-const method (or user code) may keep its arguments in its object (`v.push_back(h)`); so may a
        // method that writes its object (`a.set_(h)`, `a.set_data(h)`: `a` then shares `h`'s storage, though
        // a tensor's methods are const), and any method of a library container that holds storage through its
        // type arguments (`c10::List<Tensor>`, whose const `push_back` stores into the list its copies share).
        const auto *Member = dyn_cast<CXXMemberCallExpr>(Call);
        const auto *Method = Member ? Member->getMethodDecl() : nullptr;
        if (Method && (!Method->isConst() || !Finder.isLibrary(Method) || Finder.writesByName(Method) ||
                       Finder.holdsThroughTypeArguments(Method->getParent())))
          for (Root Local : Finder.locals(Member->getImplicitObjectArgument()))
            Into.push_back(Local);
        if (Into.empty())
          return true;
        for (const Expr *Argument : Call->arguments())
          Flows.push_back({Argument, Into});
        if (Member)
          Flows.push_back({Member->getImplicitObjectArgument(), Into});
        return true;
      }
      InputChangeFinder &Finder;
      std::vector<std::pair<const Expr *, std::vector<Root>>> Flows;
    } Collector(*this);
    Collector.TraverseStmt(const_cast<Stmt *>(Site.Body));
    return std::move(Collector.Flows);
  }

  /// Whether a call or construction runs code the analysis does not read: the program's (a function, a
  /// lambda, an operator or constructor of its own, or an implicit one whose members have code), one it cannot
  /// name (through a pointer), or the library's running code of the program it is given (`std::invoke(f)`,
  /// a `std::function`'s call).
  bool unreadCode(const Expr *Node) const {
    if (const auto *Call = dyn_cast<CallExpr>(Node)) {
      const FunctionDecl *Callee = Call->getDirectCallee();
      return !Callee || !isLibrary(Callee) || !programCodeRunBy(Call).empty();
    }
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(Node)) {
      const CXXConstructorDecl *Constructor = Construct->getConstructor();
      if (!Constructor)
        return true;
      if (isLibrary(Constructor))
        return !programCodeRunBy(Construct).empty();
      return Constructor->isUserProvided() ||
             !programCodeOfMembers(Constructor->getParent(), Reach::Instantiated).empty();
    }
    return false;
  }

  /// Whether Value's value may come from code the analysis does not read (`hidden_view()`, a program function
  /// returning a view of a global): a call of it whose result can hold storage carries to Value's top. Such code
  /// may hand out a handle to any tensor it reaches, an input's too.
  bool givenByUnreadCode(const Expr *Value) {
    class Calls : public RecursiveASTVisitor<Calls> {
    public:
      bool VisitCallExpr(CallExpr *Call) {
        Found.push_back(Call);
        return true;
      }
      bool VisitCXXConstructExpr(CXXConstructExpr *Construct) {
        Found.push_back(Construct);
        return true;
      }
      std::vector<const Expr *> Found;
    } Collector;
    Collector.TraverseStmt(const_cast<Expr *>(Value));
    return llvm::any_of(Collector.Found, [&](const Expr *Call) {
      return unreadCode(Call) && carriesToTop(Call, Value, /*Address=*/false);
    });
  }

  /// The thread_local variables of namespace or class scope defined in the unit with an initialiser that is
  /// not constant: the first use of any of them in a thread runs them all. Found once, when a use is met.
  const std::vector<const VarDecl *> &threadLocalsInitialisedOnUse() {
    if (ThreadLocalsFound)
      return ThreadLocals;
    ThreadLocalsFound = true;
    class Collector : public RecursiveASTVisitor<Collector> {
    public:
      bool TraverseFunctionDecl(FunctionDecl *) { return true; }  // block-scope ones are initialised where declared
      bool TraverseCXXMethodDecl(CXXMethodDecl *) { return true; }
      bool VisitVarDecl(VarDecl *Variable) {
        if (Variable->getTLSKind() != VarDecl::TLS_None && !Variable->isLocalVarDecl() &&
            !Variable->getDeclContext()->isDependentContext() && Variable->isThisDeclarationADefinition() &&
            Variable->getInit() && !Variable->getInit()->isValueDependent() &&
            !Variable->hasConstantInitialization())
          Found.push_back(Variable);
        return true;
      }
      std::vector<const VarDecl *> Found;
    } Walk;
    Walk.TraverseDecl(Query.context().getTranslationUnitDecl());
    ThreadLocals = std::move(Walk.Found);
    return ThreadLocals;
  }

  /// Whether a library call writes what it is given by its name alone: in place (`_`, `_out`) or a writer.
  bool writesByName(const FunctionDecl *Callee) {
    if (!Callee)
      return false;
    std::string Name = calleeName(Callee);
    return llvm::StringRef(Name).ends_with("_") || llvm::StringRef(Name).ends_with("_out") ||
           contains(Effects.Writers, Name);
  }

  /// Whether Record is a class template's specialisation given a type that can hold storage (`c10::List<Tensor>`).
  bool holdsThroughTypeArguments(const CXXRecordDecl *Record) {
    return Record && llvm::any_of(typeArguments(Record), [&](QualType Type) { return Types.reaches(Type); });
  }

  /// The input (or value that may share storage with one) that E gives access to, if any. An input of
  /// a type without storage (a flag the guard tests) is reached by any mention (`&flag`, `*p`).
  std::optional<Root> reachedRoot(const Expr *E) {
    if (!E)
      return std::nullopt;
    for (const Mention &Found : mentions(E, false))
      if (Protected.count(Found.Of) && !readOnceAtHead(Found.Of) && !holdsStorage(Found.Of))
        return Found.Of;
    for (const Mention &Found : mentions(E, true))
      if (isTainted(Found.Of))
        return Found.Of;
    return std::nullopt;
  }
  bool holdsStorage(Root Of) {
    if (const auto *Value = dyn_cast<ValueDecl>(Of))
      return Types.reaches(Value->getType());
    return true;
  }

  bool isExcluded(Root Of) const {
    // The logits are the head's fresh output: the logits checks decide what may happen to them.
    return Of == Site.Logits || llvm::is_contained(Site.Aliases, Of);
  }
  bool isTainted(Root Of) const { return Tainted.count(Of) && !isExcluded(Of); }

  /// Every root an expression mentions (as an assignment's target).
  std::vector<Root> roots(const Expr *E) {
    std::vector<Root> Found;
    for (const Mention &Each : mentions(E, false))
      Found.push_back(Each.Of);
    return Found;
  }

  /// The locals an expression mentions (as assignment targets or changeable arguments).
  std::vector<Root> locals(const Expr *E) {
    std::vector<Root> Found;
    for (const Mention &Each : mentions(E, false))
      if (const auto *Variable = dyn_cast<VarDecl>(Each.Of); Variable && Variable->hasLocalStorage())
        Found.push_back(Variable);
    return Found;
  }

  /// Mentions of roots in E; with ThroughStorage, only those whose value can reach E's value through
  /// expressions that can hold storage (`x.size(0)` does not carry x; `x.view(-1)` and `&x` do).
  std::vector<Mention> mentions(const Stmt *S, bool ThroughStorage) {
    MentionCollector Collector(This);
    if (S)
      Collector.TraverseStmt(const_cast<Stmt *>(S));
    if (!ThroughStorage)
      return std::move(Collector.Found);
    std::vector<Mention> Kept;
    for (const Mention &Found : Collector.Found)
      if (carriesToTop(Found.Node, S, /*Address=*/isTainted(Found.Of) && !holdsStorage(Found.Of)))
        Kept.push_back(Found);
    return Kept;
  }

  /// Whether Node's value can reach Top's through expressions that can hold storage. An address converted
  /// to an integer (`reinterpret_cast<std::uintptr_t>(h.data_ptr())`) is carried on by the integer, by
  /// arithmetic on it, and by a variable of integer type that holds one (Address), and reaches storage again
  /// when it is converted back to a pointer.
  bool carriesToTop(const Expr *Node, const Stmt *Top, bool Address) {
    if (!Address && !Types.reaches(Node->getType()))
      return false;
    DynTypedNode Current = DynTypedNode::create(*static_cast<const Stmt *>(Node));
    for (const Stmt *At = Node; At != Top;) {
      auto Parents = Query.context().getParents(Current);
      if (Parents.empty())
        return true;
      const Stmt *Parent = Parents[0].get<Stmt>();
      if (!Parent) {
        if (Parents[0].get<VarDecl>() || Parents[0].get<FieldDecl>())
          return true;  // an initialiser (Top was the VarDecl's init) or a lambda's capture field
        Current = Parents[0];
        continue;
      }
      if (isa<LambdaExpr>(Parent) || isa<StmtExpr>(Parent))
        return true;  // a closure holds what it captures; a statement expression anything
      if (const auto *Value = dyn_cast<Expr>(Parent)) {
        if (const auto *Cast = dyn_cast<CastExpr>(Value); Cast && Cast->getCastKind() == CK_PointerToIntegral)
          Address = true;
        else if (!Value->getType()->isIntegralOrEnumerationType())
          Address = false;  // the integer is read as something else (`float(addr)`), or turned back into a pointer
        bool Method = Value->getType()->isSpecificPlaceholderType(BuiltinType::BoundMember);
        if (!Method && !Address && !Types.reaches(Value->getType()))
          return false;
        if (const auto *Call = dyn_cast<CallExpr>(Value); Call && isFreshResult(Call))
          return false;
      }
      At = Parent;
      Current = Parents[0];
    }
    return true;
  }

  /// A library call of the rule set's fresh results that returns a tensor by value and is given no writing
  /// option: `operator*` of an optional or a pointer, or an iterator's `operator-`, share the name and return
  /// what they refer to.
  bool isFreshResult(const CallExpr *Call) const {
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (!Callee || !isLibrary(Callee) || !contains(Effects.FreshResults, calleeName(Callee)))
      return false;
    // `F::relu(h, F::ReLUFuncOptions().inplace(true))` writes h and returns it.
    if (setsWritingOption(Call))
      return false;
    QualType Result = Callee->getReturnType();
    const CXXRecordDecl *Record = Result->isReferenceType() ? nullptr : Result->getAsCXXRecordDecl();
    return Record && isTensorType(Record);
  }

  // ---- where: from the head to the loss ------------------------------------------------------------

  void buildRegion() {
    Region.push_back({Site.Head->Call->getEndLoc(), Site.Loss->getEndLoc()});
    // The rest of the loss's full-expression: its other operands are unsequenced with the loss call (or
    // sequenced before it), wherever they are written (`cross_entropy(...) + decay()`).
    const Stmt *Full = Site.Loss;
    for (const Stmt *Parent = Query.parentStmt(Full); Parent && isa<Expr>(Parent); Parent = Query.parentStmt(Parent))
      Full = Parent;
    Region.push_back({Full->getBeginLoc(), Full->getEndLoc()});
    // A loop that runs the loss but not the head runs all of its body between one head and the next loss.
    for (const Stmt *At = Query.parentStmt(Site.Loss); At && At != Site.Body; At = Query.parentStmt(At))
      if ((isa<ForStmt>(At) || isa<WhileStmt>(At) || isa<DoStmt>(At) || isa<CXXForRangeStmt>(At)) &&
          !Query.within(Site.Head->Call, At))
        Region.push_back({At->getBeginLoc(), At->getEndLoc()});
  }

  bool inRegion(const Stmt *Node) const {
    SourceLocation At = SM.getExpansionLoc(Node->getBeginLoc());
    for (const SourceRange &Range : Region) {
      SourceLocation Begin = SM.getExpansionLoc(Range.getBegin());
      SourceLocation End = SM.getExpansionRange(Range.getEnd()).getEnd();
      if (SM.isBeforeInTranslationUnit(Begin, At) && !SM.isBeforeInTranslationUnit(End, At))
        return true;
    }
    return false;
  }

  // ---- what may change them ------------------------------------------------------------------------

  std::optional<InputChange> scanRegion() {
    class Scanner : public RecursiveASTVisitor<Scanner> {
    public:
      explicit Scanner(InputChangeFinder &Finder) : Finder(Finder) {}
      bool shouldVisitLambdaBody() const { return true; }
      // The semantic form too: a brace list's implicit conversions call the program's conversion operators
      // (`torch::zeros({width})`).
      bool shouldVisitImplicitCode() const { return true; }
      bool VisitStmt(Stmt *Node) {
        if (!Found && (MadeHere || (Finder.inRegion(Node) && !Finder.Query.within(Site().Loss, Node))))
          Found = Finder.changeAt(Node);
        return !Found;
      }
      // A member's default initialiser of a class of the program runs where the object is made
      // (`Tok t{};`), though its code is written in the class: it is looked at as code of the place it runs.
      bool TraverseCXXDefaultInitExpr(CXXDefaultInitExpr *Default) {
        bool Here = MadeHere || (Finder.inRegion(Default) && !Finder.Query.within(Site().Loss, Default));
        if (Found || !Here || Finder.isLibrary(Default->getField()))
          return RecursiveASTVisitor::TraverseCXXDefaultInitExpr(Default);
        ++MadeHere;
        TraverseStmt(Default->getExpr());
        --MadeHere;
        // Named where the object is made, which is what lies between the head and the loss.
        if (Found && !MadeHere && Found->Statement != Default) {
          Found->Why = "the default initialiser of `" + Default->getField()->getQualifiedNameAsString() +
                       "`, run where the object is made: " + Found->Why;
          const Stmt *Made = Default;  // the code that makes the object, as written (`Tok{}`)
          while (Made && Finder.Query.text(Made).empty())
            Made = Finder.Query.parentStmt(Made);
          Found->Statement = Made ? Made : Default;
        }
        return !Found;
      }
      // The elements a list leaves out of an array are made by its filler (`Tok ts[3]{};`), which is not among
      // the list's children.
      bool VisitInitListExpr(InitListExpr *List) {
        return !List->hasArrayFiller() || madeHere(List, List->getArrayFiller());
      }
      // C++20's parenthesised form (`Tok ts[2](Tok{5});`) likewise.
      bool VisitCXXParenListInitExpr(CXXParenListInitExpr *List) {
        return !List->getArrayFiller() || madeHere(List, List->getArrayFiller());
      }
      // A structured binding of a tuple-like class calls its `get<i>` (a member, or one found by
      // argument-dependent lookup) in the initialisers of the variables it holds, which are not among the
      // declaration's children.
      bool VisitBindingDecl(BindingDecl *Binding) {
        const VarDecl *Holding = Binding->getHoldingVar();
        return !Holding || !Holding->getInit() || madeHere(Holding->getInit(), Holding->getInit());
      }
      // A thread_local variable of namespace or class scope is initialised on its first use in each thread:
      // the Itanium ABI's wrapper runs the initialisers of every such variable of its unit there (`__tls_init`),
      // so a use between the head and the loss runs them all.
      bool VisitDeclRefExpr(DeclRefExpr *Ref) { return threadLocalUse(Ref, dyn_cast<VarDecl>(Ref->getDecl())); }
      bool VisitMemberExpr(MemberExpr *Member) {  // a static member through an object (`stats_.steps`)
        return threadLocalUse(Member, dyn_cast<VarDecl>(Member->getMemberDecl()));
      }
      bool threadLocalUse(const Expr *Use, const VarDecl *Variable) {
        if (Found || !Variable || Variable->getTLSKind() == VarDecl::TLS_None || Variable->isLocalVarDecl() ||
            !(MadeHere || (Finder.inRegion(Use) && !Finder.Query.within(Site().Loss, Use))))
          return !Found;
        const VarDecl *Definition = Variable->getDefinition();
        if (!Definition) {
          Found = Finder.change(Use, "`" + Variable->getNameAsString() + "` is a thread_local variable whose "
                                     "initialiser, run on its first use in each thread, this unit does not see");
          return false;
        }
        if (!needsThreadInit(Definition))
          return true;
        for (const VarDecl *Initialised : Finder.threadLocalsInitialisedOnUse()) {
          if (!madeHere(Use, Initialised->getInit())) {
            Found->Why = "the initialiser of the thread_local `" + Initialised->getNameAsString() +
                         "`, run on the first use of `" + Variable->getNameAsString() + "` in each thread: " +
                         Found->Why;
            return false;
          }
        }
        return true;
      }
      static bool needsThreadInit(const VarDecl *Definition) {
        const CXXRecordDecl *Record = Definition->getType()->getAsCXXRecordDecl();
        return (Definition->getInit() && !Definition->hasConstantInitialization()) ||
               (Record && Record->hasDefinition() && !Record->hasTrivialDestructor());
      }
      /// Looks at Code, which runs where Where is, as code of that place when that place is between the head and
      /// the loss; false once something is found.
      bool madeHere(const Stmt *Where, const Expr *Code) {
        if (Found)
          return false;
        if (MadeHere || (Finder.inRegion(Where) && !Finder.Query.within(Site().Loss, Where))) {
          ++MadeHere;
          TraverseStmt(const_cast<Expr *>(Code));
          --MadeHere;
        }
        return !Found;
      }
      const CapturedSite &Site() const { return Finder.Site; }
      InputChangeFinder &Finder;
      std::optional<InputChange> Found;
      int MadeHere = 0;  ///< inside a default initialiser run between the head and the loss
    } Visitor(*this);
    Visitor.TraverseStmt(const_cast<Stmt *>(Site.Body));
    if (Visitor.Found)
      return Visitor.Found;
    return mutationOfProtectedVariables();
  }

  // ---- the thread's autograd and autocast mode ------------------------------------------------------

  /// The mode guard's class named by Type (a library class listed in the pattern set), or "".
  std::string modeGuard(QualType Type) const {
    const CXXRecordDecl *Record = Type.getNonReferenceType()->getAsCXXRecordDecl();
    if (!Record || !isLibrary(Record))
      return "";
    return contains(Effects.ModeGuards, Record->getName().str()) ? Record->getName().str() : "";
  }

  /// What a value of Type holds of the thread's mode: one of the rule set's guards, through references,
  /// pointers, arrays, a library template's arguments (`c10::optional<NoGradGuard>`,
  /// `std::unique_ptr<InferenceMode>`, `std::vector<AutoGradMode>`) and the members and bases of the
  /// program's classes and closures; or, through the same but the program's classes, a library holder that
  /// hides the type of what it holds (`std::shared_ptr<void>`, `std::any`, `std::function`), which may be
  /// a guard. Either switches the mode when reset, reassigned or destroyed.
  struct HeldMode {
    std::string Guard;   ///< the guard's class
    std::string Hider;   ///< the hiding holder's type, when no guard is seen
    bool none() const { return Guard.empty() && Hider.empty(); }
    /// As a refusal names it, after "holds".
    std::string phrase() const {
      return !Guard.empty() ? "the mode guard `" + Guard + "`"
                            : "a `" + Hider + "` (which hides the type of what it holds: a mode guard, perhaps)";
    }
  };

  HeldMode modeGuardHeld(QualType Type) const {
    if (Type.isNull())
      return {};
    Type = Type.getNonReferenceType();
    if (std::string Guard = modeGuard(Type); !Guard.empty())
      return {Guard, ""};
    if (Type->isPointerType())
      return modeGuardHeld(Type->getPointeeType());
    if (const clang::Type *Element = Type->getArrayElementTypeNoTypeQual(); Element && Type->isArrayType())
      return modeGuardHeld(QualType(Element, 0));
    const CXXRecordDecl *Record = Type->getAsCXXRecordDecl();
    if (!Record || !(Record = Record->getDefinition()))
      return {};
    if (auto Known = GuardMemo.find(Record); Known != GuardMemo.end())
      return Known->second;
    GuardMemo[Record] = {};  // a class that holds itself through a pointer is decided by its other members
    HeldMode Held = modeHeldBy(Record, Type);
    GuardMemo[Record] = Held;
    return Held;
  }

  HeldMode modeHeldBy(const CXXRecordDecl *Record, QualType Type) const {
    bool Library = isLibrary(Record);
    if (Library && hidesItsType(Record))
      return {"", Type.getCanonicalType().getUnqualifiedType().getAsString(Query.context().getPrintingPolicy())};
    for (QualType Argument : typeArguments(Record))
      if (HeldMode Held = modeGuardHeld(Argument); !Held.none())
        return Held;
    if (Library)
      return {};
    // A class of the program (a closure too): its members and bases are destroyed with it. Only guards
    // count here: a model's `std::function` activation member does not make every use of the model one.
    for (const FieldDecl *Field : Record->fields())
      if (HeldMode Held = modeGuardHeld(Field->getType()); !Held.Guard.empty())
        return {Held.Guard, ""};
    for (const CXXBaseSpecifier &Base : Record->bases())
      if (HeldMode Held = modeGuardHeld(Base.getType()); !Held.Guard.empty())
        return {Held.Guard, ""};
    // A base of a class of the program that holds one: a value of it may be that class (made elsewhere and
    // handed over as a `std::unique_ptr<Base>`).
    if (auto Derived = guardHoldingDerived().find(Record); Derived != guardHoldingDerived().end())
      return {Derived->second, ""};
    return {};
  }

  /// The program's classes that a class of the program derived from them holds a mode guard in, each with
  /// the guard's class. Computed once per finder, over the program's classes.
  const llvm::DenseMap<const CXXRecordDecl *, std::string> &guardHoldingDerived() const {
    if (DerivedComputed)
      return DerivedHolders;
    DerivedComputed = true;  // while it is computed, classes are judged by their own members and bases
    std::vector<const CXXRecordDecl *> Holders;
    for (const CXXRecordDecl *Record : programIndex().Classes)
      if (!Record->bases().empty() && !modeGuardHeld(Query.context().getRecordType(Record)).Guard.empty())
        Holders.push_back(Record);
    for (const CXXRecordDecl *Holder : Holders) {
      std::string Guard = modeGuardHeld(Query.context().getRecordType(Holder)).Guard;
      Holder->forallBases([&](const CXXRecordDecl *Base) {
        DerivedHolders.try_emplace(Base, Guard);
        return true;
      });
    }
    GuardMemo.clear();  // judged before the bases were known
    return DerivedHolders;
  }

  /// The program's code that a library class may run, or let run, without naming it in its type, for a
  /// refusal ("the code a `future` holds ..."), or "": code it holds and runs (the rule set's
  /// `code_holders`), or code of another thread, which a class that threads synchronise through lets run in
  /// between (`thread_synchronisers`).
  std::string codeBehind(const CXXRecordDecl *Record) const {
    if (!Record->getIdentifier() || !isLibrary(Record))
      return "";
    std::string Name = Record->getName().str();
    if (contains(Effects.CodeHolders, Name))
      return "the code a `" + Name + "` holds (the program's, perhaps)";
    if (contains(Effects.ThreadSynchronisers, Name))
      return "code of the program on another thread, which a `" + Name + "` lets run in between";
    return "";
  }

  /// Whether a library class hides the type of what it holds: one the rule set lists (`std::any`,
  /// `std::function`), or a class template given `void` (`std::shared_ptr<void>`).
  bool hidesItsType(const CXXRecordDecl *Record) const {
    if (Record->getIdentifier() && contains(Effects.TypeHidingHolders, Record->getName().str()))
      return true;
    return llvm::any_of(typeArguments(Record), [](QualType Argument) { return Argument->isVoidType(); });
  }

  /// Whether Type is an options class with one of the rule set's writing options (a setter of that name).
  bool hasWritingOption(QualType Type) const {
    const CXXRecordDecl *Record = Type.getNonReferenceType()->getAsCXXRecordDecl();
    if (!Record || !Record->hasDefinition())
      return false;
    for (const CXXMethodDecl *Method : Record->methods())
      if (Method->getIdentifier() && contains(Effects.WritingOptions, Method->getName().str()))
        return true;
    return false;
  }

  /// Whether an options value is made where it is passed: a construction, a default argument, or a chain of
  /// setters on one (whose writing options the visitor below reads). Anything else (a variable, a parameter,
  /// a call's result) holds options whose values the analysis does not know.
  static bool madeAtCall(const Expr *Value) {
    Value = AstQuery::spelled(Value);
    while (const auto *Setter = dyn_cast<CXXMemberCallExpr>(Value))
      Value = AstQuery::spelled(Setter->getImplicitObjectArgument());
    if (const auto *Bound = dyn_cast<MaterializeTemporaryExpr>(Value))
      Value = AstQuery::spelled(Bound->getSubExpr());
    return isa<CXXConstructExpr, CXXDefaultArgExpr, InitListExpr, CXXFunctionalCastExpr>(Value);
  }

  /// Whether an argument of Call sets one of the rule set's writing options (`.inplace(true)`,
  /// `ReLUFuncOptions(true)`, `.max_norm(1.0)`) to anything but a literal `false`, or is options of a class
  /// that has one, made elsewhere (`F::embedding(ids, w, options)`): their value is not known here.
  bool setsWritingOption(const CallExpr *Call) const {
    class Finder : public RecursiveASTVisitor<Finder> {
    public:
      explicit Finder(const EffectPatterns &Effects) : Effects(Effects) {}
      static bool literalFalse(const Expr *Value) {
        const auto *Literal = dyn_cast<CXXBoolLiteralExpr>(Value->IgnoreParenImpCasts());
        return Literal && !Literal->getValue();
      }
      bool VisitCXXMemberCallExpr(CXXMemberCallExpr *Member) {
        const CXXMethodDecl *Method = Member->getMethodDecl();
        if (Method && Method->getIdentifier() && contains(Effects.WritingOptions, Method->getName().str()) &&
            !(Member->getNumArgs() == 1 && literalFalse(Member->getArg(0))))
          Found = true;
        return !Found;
      }
      bool VisitCXXConstructExpr(CXXConstructExpr *Construct) {
        const CXXConstructorDecl *Constructor = Construct->getConstructor();
        for (unsigned I = 0; Constructor && I < Construct->getNumArgs() && I < Constructor->getNumParams(); ++I) {
          const ParmVarDecl *Parameter = Constructor->getParamDecl(I);
          const Expr *Value = Construct->getArg(I);
          if (Parameter->getIdentifier() && contains(Effects.WritingOptions, Parameter->getName().str()) &&
              !isa<CXXDefaultArgExpr>(Value) && !literalFalse(Value))
            Found = true;
        }
        return !Found;
      }
      const EffectPatterns &Effects;
      bool Found = false;
    } Visitor(Effects);
    for (unsigned I = 0; I < Call->getNumArgs() && !Visitor.Found; ++I) {
      const Expr *Argument = Call->getArg(I);
      if (hasWritingOption(Argument->getType()) && !madeAtCall(Argument))
        return true;
      Visitor.TraverseStmt(const_cast<Expr *>(Argument));
    }
    return Visitor.Found;
  }

  /// A value holding a mode guard converted, anywhere in the site's function, to a type that holds none
  /// (`std::unique_ptr<Base> p = std::make_unique<Frozen>()`, a `void *`): the guard lives on where the
  /// analysis cannot follow it, and its release may fall between the head and the loss.
  std::optional<InputChange> modeGuardHidden() {
    class Finder : public RecursiveASTVisitor<Finder> {
    public:
      explicit Finder(InputChangeFinder &Outer) : Outer(Outer) {}
      bool VisitCastExpr(CastExpr *Cast) {
        check(Cast, Cast->getSubExpr());
        return !Found;
      }
      bool VisitCXXConstructExpr(CXXConstructExpr *Construct) {
        for (const Expr *Argument : Construct->arguments())
          check(Construct, Argument);
        return !Found;
      }
      void check(const Expr *Converted, const Expr *From) {
        QualType To = Converted->getType().getNonReferenceType();
        if (Found || !(To->isRecordType() || To->isPointerType()) || To->isDependentType())
          return;
        HeldMode Held = Outer.modeGuardHeld(From->getType());
        if (Held.Guard.empty() || !Outer.modeGuardHeld(To).none())
          return;
        Found = Outer.change(Converted, "`" + Outer.Query.text(AstQuery::spelled(From)) + "` holds " + Held.phrase() +
                                            " and is converted to a `" + To.getAsString() +
                                            "`, which hides it: its release may fall between the head and the "
                                            "loss, where the fused call would run under another mode");
      }
      InputChangeFinder &Outer;
      std::optional<InputChange> Found;
    } Visitor(*this);
    Visitor.TraverseStmt(const_cast<Stmt *>(Site.Body));
    return Visitor.Found;
  }

  /// A mode guard that lives at the head but ends before the loss (declared in a block that holds the head
  /// and not the loss): the head ran under its mode and the fused call at the loss would not.
  std::optional<InputChange> modeGuardScopeEndsBetween() {
    class Finder : public RecursiveASTVisitor<Finder> {
    public:
      explicit Finder(InputChangeFinder &Outer) : Outer(Outer) {}
      bool VisitDeclStmt(DeclStmt *Statement) {
        for (const Decl *Declared : Statement->decls())
          if (const auto *Variable = dyn_cast<VarDecl>(Declared); Variable && !Found) {
            HeldMode Held = Outer.modeGuardHeld(Variable->getType());
            const Stmt *Block = Outer.Query.parentStmt(Statement);
            bool EndsBetween = Block && Outer.Query.within(Outer.Site.Head->Call, Block) &&
                               !Outer.Query.within(Outer.Site.Loss, Block);
            if (!Held.none() && EndsBetween &&
                Outer.Query.before(Variable->getLocation(), Outer.Site.Head->Call->getBeginLoc()))
              Found = Outer.change(Statement, "`" + Variable->getNameAsString() + "` holds " + Held.phrase() +
                                                  ", which may set the autograd or autocast mode of the head, and "
                                                  "its block ends before the loss, where the fused call would run");
            // Its block ends between the head and the loss (it holds the head, or lies between them), so its
            // destructor runs there: the program's code, not looked into.
            const CXXRecordDecl *Record = Variable->getType()->getAsCXXRecordDecl();
            const CXXDestructorDecl *Destructor = Record && Record->hasDefinition() ? Record->getDestructor() : nullptr;
            SourceLocation BlockEnd = Block ? Block->getEndLoc() : SourceLocation();
            bool DestroyedBetween = Block && Variable->hasLocalStorage() &&
                                    Outer.Query.before(Outer.Site.Head->Call->getBeginLoc(), BlockEnd) &&
                                    Outer.Query.before(BlockEnd, Outer.Site.Loss->getBeginLoc());
            if (!Found && DestroyedBetween && Outer.programDestructor(Destructor))
              Found = Outer.change(Statement, "the destructor of `" + Variable->getNameAsString() +
                                                  "` runs between the head and the loss, and may change what the "
                                                  "fused call reads or the mode it runs under");
            if (std::string Code = !Found && DestroyedBetween ? Outer.programCodeCarried(Variable) : "";
                !Code.empty())
              Found = Outer.change(Statement, "`" + Variable->getNameAsString() +
                                                  "` is destroyed between the head and the loss, which may run " + Code);
            if (std::string Code = !Found && DestroyedBetween ? Outer.codeAtScopeEnd(Variable) : ""; !Code.empty())
              Found = Outer.change(Statement, "the block of `" + Variable->getNameAsString() +
                                                  "` ends between the head and the loss, which runs " + Code);
          }
        return !Found;
      }
      InputChangeFinder &Outer;
      std::optional<InputChange> Found;
    } Visitor(*this);
    Visitor.TraverseStmt(const_cast<Stmt *>(Site.Body));
    return Visitor.Found;
  }

  // ---- code of the program that library code runs --------------------------------------------------

  /// How library code comes by a value, which decides what of the program's code it may run through it.
  enum class Reach {
    Given,         ///< handed the value, perhaps as a library base: it calls what can be called (a callable,
                   ///< a function pointer, an override of a library virtual function)
    Instantiated,  ///< its code is instantiated for the value's type (a template argument of the callee or of
                   ///< a library class): it may also construct, assign, compare, hash, swap and destroy it
    Destroyed,     ///< the value is destroyed: what its destruction runs (destructors)
    Held,          ///< kept by a library object, which destroys it and may call it (a deleter, a callback)
  };

  /// The code of the program that library code may run through a value of Type, named for a refusal ("the
  /// callable `Cmp`", "`Config`'s copy constructor"), or "" when none. Followed through references,
  /// pointers, arrays, a library class's template arguments (`std::vector<Config>`, `std::map<K, V, Cmp>`,
  /// `std::unique_ptr<T, decltype(restore)>`) and, where the library copies or destroys a class of the
  /// program, its members and bases.
  std::string programCodeIn(QualType Type, Reach How, int Depth = 0) const {
    if (Type.isNull() || Type->isDependentType() || Depth > 6)
      return "";
    Type = Type.getNonReferenceType();
    if (Type->isFunctionPointerType() || Type->isFunctionType())
      return How == Reach::Destroyed ? "" : "a function of the program";
    if (Type->isPointerType() || Type->isMemberPointerType())
      return Type->isMemberFunctionPointerType() ? "a member function of the program"
                                                 : programCodeIn(Type->getPointeeType(), How, Depth + 1);
    if (const clang::Type *Element = Type->getArrayElementTypeNoTypeQual(); Element && Type->isArrayType())
      return programCodeIn(QualType(Element, 0), How, Depth + 1);
    const CXXRecordDecl *Record = Type->getAsCXXRecordDecl();
    if (!Record || !(Record = Record->getDefinition()))
      return "";
    if (isLibrary(Record)) {
      if (std::string Code = codeBehind(Record); !Code.empty())
        return Code;
      // A library class is instantiated for its template arguments; its own code is the library's, but a
      // class of the program derived from it may override what it calls (`torch::nn::Module` handed over).
      if (How == Reach::Given)
        if (auto Overrider = programOverriders().find(Record); Overrider != programOverriders().end())
          return Overrider->second;
      if (How == Reach::Held)
        if (std::string Code = derivedDestruction(Record); !Code.empty())
          return Code;
      for (QualType Argument : typeArguments(Record))
        if (std::string Code = programCodeIn(Argument, kept(How), Depth + 1); !Code.empty())
          return Code;
      return "";
    }
    auto Key = std::make_pair(Record, static_cast<int>(How));
    if (auto Known = CodeMemo.find(Key); Known != CodeMemo.end())
      return Known->second;
    CodeMemo[Key] = "";  // a class that holds itself through a pointer is decided by its other members
    std::string Code = programCodeOfClass(Record, How, Depth);
    CodeMemo[Key] = Code;
    return Code;
  }

  /// How a library class reaches its template arguments: instantiated for them, or, when it is only
  /// destroyed, keeping them (a deleter it holds is called).
  static Reach kept(Reach How) {
    return How == Reach::Given || How == Reach::Instantiated ? Reach::Instantiated : Reach::Held;
  }

  std::string programCodeOfClass(const CXXRecordDecl *Record, Reach How, int Depth) const {
    std::string Name = Record->isLambda() ? "a lambda" : "`" + Record->getNameAsString() + "`";
    // Destroying a callable does not call it; a deleter or callback a library class holds is called.
    if (How != Reach::Destroyed && isCallable(QualType(Record->getTypeForDecl(), 0)))
      return Record->isLambda() ? "a lambda" : "the callable " + Name;
    if (How == Reach::Given || How == Reach::Instantiated)
      if (auto Override = overrideOfLibrary(Record); !Override.empty())
        return Override;
    if (How == Reach::Given)
      return "";
    if (const CXXDestructorDecl *Destructor = Record->getDestructor(); programDestructor(Destructor))
      return Name + "'s destructor";
    if (std::string Code = How == Reach::Held ? derivedDestruction(Record) : ""; !Code.empty())
      return Code;
    if (How == Reach::Instantiated) {
      // Library templates call a class's members by name as well as its special members and operators (an
      // allocator's allocate, a clock's now, a conversion to the element type): any method of its own counts.
      for (const Decl *Member : Record->decls()) {
        const auto *Method = dyn_cast<CXXMethodDecl>(Member);
        if (const auto *Template = dyn_cast<FunctionTemplateDecl>(Member))
          Method = dyn_cast<CXXMethodDecl>(Template->getTemplatedDecl());
        if (Method && !isa<CXXDestructorDecl>(Method) && hasCodeOfItsOwn(Method))
          return Name + "'s " + (isa<CXXConstructorDecl>(Method) ? std::string("constructor")
                                 : isa<CXXConversionDecl>(Method) ? "conversion to `" + Method->getReturnType().getAsString() + "`"
                                                                  : "`" + calleeName(Method) + "`");
      }
      const CXXRecordDecl *Pattern = Record;
      if (const auto *Specialization = dyn_cast<ClassTemplateSpecializationDecl>(Record))
        Pattern = Specialization->getSpecializedTemplate()->getTemplatedDecl();
      for (const CXXRecordDecl *Class : {Record, Pattern})
        if (auto Operated = programIndex().Operated.find(Class); Operated != programIndex().Operated.end())
          return Operated->second;
    }
    return programCodeOfMembers(Record, How == Reach::Held ? Reach::Destroyed : How, Depth);
  }

  /// What destroying a value of Record may run where its destructor is virtual: a class of the program derived
  /// from it (`std::unique_ptr<torch::nn::Module>` holding a module of the program's) with a destructor or an
  /// `operator delete` of its own, or members whose destruction runs the program's code; "" when none.
  std::string derivedDestruction(const CXXRecordDecl *Record) const {
    if (!(Record = Record->getDefinition()) || !Record->getDestructor() || !Record->getDestructor()->isVirtual())
      return "";
    if (auto Known = DerivedMemo.find(Record); Known != DerivedMemo.end())
      return Known->second;
    DerivedMemo[Record] = "";  // a derived class's members of the base's type are decided by its other members
    std::string Code;
    for (const CXXRecordDecl *Class : programIndex().Classes) {
      if (Class == Record || !Class->isDerivedFrom(Record))
        continue;
      std::string Name = "`" + Class->getNameAsString() + "`";
      if (programDestructor(Class->getDestructor()))
        Code = Name + "'s destructor";
      else if (llvm::any_of(Class->methods(), [&](const CXXMethodDecl *Method) {
                 OverloadedOperatorKind Kind = Method->getOverloadedOperator();
                 return (Kind == OO_Delete || Kind == OO_Array_Delete) && programFunction(Method);
               }))
        Code = Name + "'s `operator delete`";
      else if (std::string Members = programCodeOfMembers(Class, Reach::Destroyed); !Members.empty())
        Code = Members + ", as a member of " + Name;
      if (!Code.empty()) {
        Code += " (a `" + Record->getNameAsString() + "` destroyed may be a " + Name + ")";
        break;
      }
    }
    DerivedMemo[Record] = Code;
    return Code;
  }

  /// The code of the program that making, copying, comparing or destroying a value of Record runs through
  /// its members and bases (what its implicit special members call), and, making one, its members' default
  /// initialisers. A pointer member is copied, not what it points to.
  std::string programCodeOfMembers(const CXXRecordDecl *Record, Reach How, int Depth = 0) const {
    if (Depth > 6 || !(Record = Record->getDefinition()))
      return "";
    if (How == Reach::Instantiated)
      for (const FieldDecl *Field : Record->fields())
        if (const Expr *Init = Field->getInClassInitializer(); Init && runsCode(Init, Depth))
          return "the default initialiser of `" + Field->getQualifiedNameAsString() + "`";
    for (const FieldDecl *Field : Record->fields())
      if (!Field->getType()->isPointerType() && !Field->getType()->isReferenceType())
        if (std::string Code = programCodeIn(Field->getType(), How, Depth + 1); !Code.empty())
          return Code;
    for (const CXXBaseSpecifier &Base : Record->bases())
      if (std::string Code = programCodeIn(Base.getType(), How, Depth + 1); !Code.empty())
        return Code;
    return "";
  }

  /// Whether evaluating E may run code or write anything: a call of a function that is not constexpr, a
  /// constructor of the program's, an allocation, an assignment, `++` or `--`, a statement expression, an
  /// atomic builtin, a volatile read.
  bool runsCode(const Expr *E, int Depth) const {
    class Finder : public RecursiveASTVisitor<Finder> {
    public:
      Finder(const InputChangeFinder &Outer, int Depth) : Outer(Outer), Depth(Depth) {}
      bool shouldVisitImplicitCode() const { return true; }
      // A constexpr function run at run time may still write what it is given (`std::exchange`), or, the
      // program's, anything it reaches: a call counts unless it is a constant expression, or the library's
      // constexpr function that writes nothing it is given.
      bool VisitCallExpr(CallExpr *Call) {
        const FunctionDecl *Callee = Call->getDirectCallee();
        bool Constant = !Call->isValueDependent() && Call->isCXX11ConstantExpr(Outer.Query.context());
        return !(Found |= !Constant && (!Callee || !Callee->isConstexpr() || !Outer.isLibrary(Callee) ||
                                        writesWhatItIsGiven(Callee)));
      }
      static bool writesWhatItIsGiven(const FunctionDecl *Callee) {
        if (const auto *Method = dyn_cast<CXXMethodDecl>(Callee); Method && Method->isInstance() && !Method->isConst())
          return true;
        return llvm::any_of(Callee->parameters(), [](const ParmVarDecl *Parameter) {
          QualType Type = Parameter->getType();
          return ((Type->isReferenceType() || Type->isPointerType()) && !Type->getPointeeType().isConstQualified()) ||
                 isWritingHandle(Type);  // an iterator taken by value (`std::fill`)
        });
      }
      bool VisitCXXConstructExpr(CXXConstructExpr *Construct) {
        const CXXConstructorDecl *Constructor = Construct->getConstructor();
        Found |= !Constructor ||
                 (!Outer.isLibrary(Constructor) &&
                  ((Constructor->isUserProvided() && !Constructor->isConstexpr()) ||
                   !Outer.programCodeOfMembers(Constructor->getParent(), Reach::Instantiated, Depth + 1).empty()));
        return !Found;
      }
      bool VisitStmt(Stmt *Node) {
        const auto *Binary = dyn_cast<BinaryOperator>(Node);
        const auto *Unary = dyn_cast<UnaryOperator>(Node);
        Found |= isa<CXXNewExpr, CXXDeleteExpr, StmtExpr, AtomicExpr, CXXThrowExpr>(Node) ||
                 (Binary && Binary->isAssignmentOp()) || (Unary && Unary->isIncrementDecrementOp());
        return !Found;
      }
      const InputChangeFinder &Outer;
      int Depth;
      bool Found = false;
    } Search(*this, Depth);
    Search.TraverseStmt(const_cast<Expr *>(E));
    return Search.Found || E->HasSideEffects(Query.context(), /*IncludePossibleEffects=*/false);
  }

  /// The code of the program that releasing a value of Type (assigning it, resetting it, clearing it,
  /// destroying it) may run without its type naming it, for a refusal, or "": a deleter a `std::shared_ptr`
  /// was made with (the pattern set's `deleter_holders`), or the destructor of what a holder that hides its
  /// type holds (`type_hiding_holders`); through a library class's template arguments (`std::vector<
  /// std::shared_ptr<int>>`) and the members and bases of the program's classes.
  std::string hiddenReleaseCode(QualType Type, int Depth = 0, bool Held = false) const {
    if (Type.isNull() || Type->isDependentType() || Depth > 6)
      return "";
    // Held by a library class (`std::unique_ptr<torch::nn::Module>`): destroyed through its class's destructor,
    // which a class of the program derived from it may override.
    if (const CXXRecordDecl *Class = Held ? Type.getNonReferenceType()->getAsCXXRecordDecl() : nullptr)
      if (std::string Code = derivedDestruction(Class); !Code.empty())
        return Code;
    Type = Type.getNonReferenceType();
    if (const clang::Type *Element = Type->getArrayElementTypeNoTypeQual(); Element && Type->isArrayType())
      return hiddenReleaseCode(QualType(Element, 0), Depth + 1);
    const CXXRecordDecl *Record = Type->getAsCXXRecordDecl();
    if (!Record || !(Record = Record->getDefinition()))
      return "";
    if (isLibrary(Record)) {
      // An iterator refers to the holders of its container (a template argument), and releases none.
      if (!Record->lookup(&Record->getASTContext().Idents.get("iterator_category")).empty())
        return "";
      if (Record->getIdentifier() &&
          (contains(Effects.DeleterHolders, Record->getName().str()) || hidesItsType(Record)))
        return "a deleter or destructor of the program's that a `" + Record->getName().str() +
               "` may have been made with (its type does not name it)";
      for (QualType Argument : typeArguments(Record))
        if (std::string Code = hiddenReleaseCode(Argument, Depth + 1, /*Held=*/true); !Code.empty())
          return Code;
      return "";
    }
    for (const FieldDecl *Field : Record->fields())
      if (!Field->getType()->isPointerType() && !Field->getType()->isReferenceType())
        if (std::string Code = hiddenReleaseCode(Field->getType(), Depth + 1); !Code.empty())
          return Code;
    for (const CXXBaseSpecifier &Base : Record->bases())
      if (std::string Code = hiddenReleaseCode(Base.getType(), Depth + 1); !Code.empty())
        return Code;
    return "";
  }

  /// hiddenReleaseCode for the value E names, of its own class (`std::shared_ptr`) or of the library base it is
  /// converted to (`std::__shared_ptr`, whose `reset` it calls).
  std::string releasedThrough(const Expr *E) const {
    std::string Code = hiddenReleaseCode(E->getType());
    return Code.empty() ? hiddenReleaseCode(E->IgnoreParenImpCasts()->getType()) : Code;
  }

  /// What the end of a local's block runs besides its own destructor (which the caller looks at), for a
  /// refusal, or "": a cleanup function of the program's (`__attribute__((cleanup(f)))`), the destructor of a
  /// temporary its initialiser binds to it (`const Tracker &t = Tracker();`), or code a value of its type may
  /// release without naming it (a `std::shared_ptr` made elsewhere with a deleter).
  std::string codeAtScopeEnd(const VarDecl *Variable) const {
    if (const auto *Cleanup = Variable->getAttr<CleanupAttr>(); Cleanup && programFunction(Cleanup->getFunctionDecl()))
      return "its cleanup function `" + Cleanup->getFunctionDecl()->getNameAsString() + "`";
    class Extended : public RecursiveASTVisitor<Extended> {
    public:
      explicit Extended(const VarDecl *Variable) : Variable(Variable) {}
      bool VisitMaterializeTemporaryExpr(MaterializeTemporaryExpr *Temporary) {
        if (Temporary->getExtendingDecl() == Variable)
          Types.push_back(Temporary->getType());
        return true;
      }
      const VarDecl *Variable;
      std::vector<QualType> Types;
    } Bound(Variable);
    if (const Expr *Init = Variable->getInit())
      Bound.TraverseStmt(const_cast<Expr *>(Init));
    for (QualType Type : Bound.Types) {
      const CXXRecordDecl *Record = Type->getAsCXXRecordDecl();
      if (Record && Record->hasDefinition() && programDestructor(Record->getDestructor()))
        return "the destructor of the temporary `" + Type.getAsString() + "` it is bound to";
      if (std::string Code = programCodeIn(Type, Reach::Destroyed); !Code.empty())
        return Code + ", through the temporary it is bound to";
      if (std::string Code = hiddenReleaseCode(Type); !Code.empty())
        return Code + ", through the temporary it is bound to";
    }
    if (!Variable->getType()->isReferenceType())
      return hiddenReleaseCode(Variable->getType());
    return "";
  }

  /// Whether Function is code of the program: not the library's, and not an allocation function the compiler
  /// declares (`::operator new`) unless the program declares it again (a replacement in this unit).
  bool programFunction(const FunctionDecl *Function) const {
    if (!Function)
      return false;
    return llvm::any_of(Function->redecls(), [&](const FunctionDecl *Declaration) {
      return !Declaration->isImplicit() && !isLibrary(Declaration);
    });
  }

  /// Whether a method does anything: a user-provided one whose body is not empty (or is not seen), or a
  /// constructor that initialises a member with more than a literal.
  static bool hasCodeOfItsOwn(const CXXMethodDecl *Method) {
    if (!Method->isUserProvided())
      return false;
    const FunctionDecl *Definition = Method->getDefinition();
    const auto *Body = Definition ? dyn_cast_or_null<CompoundStmt>(Definition->getBody()) : nullptr;
    if (!Body || !Body->body_empty())
      return true;
    if (const auto *Constructor = dyn_cast<CXXConstructorDecl>(Definition))
      for (const CXXCtorInitializer *Init : Constructor->inits())
        if (Init->isWritten() && !isa<IntegerLiteral, FloatingLiteral, CXXBoolLiteralExpr, StringLiteral,
                                      CXXNullPtrLiteralExpr, ImplicitValueInitExpr>(Init->getInit()->IgnoreImplicit()))
          return true;
    return false;
  }

  /// A library function named as a value (`std::endl` handed to `operator<<`): code of the library.
  bool namesLibraryFunction(const Expr *Value) const {
    Value = Value->IgnoreParenImpCasts();
    if (const auto *Address = dyn_cast<UnaryOperator>(Value); Address && Address->getOpcode() == UO_AddrOf)
      Value = Address->getSubExpr()->IgnoreParenImpCasts();
    const auto *Ref = dyn_cast<DeclRefExpr>(Value);
    return Ref && isa<FunctionDecl>(Ref->getDecl()) && isLibrary(Ref->getDecl());
  }

  /// A virtual method of the library that Record (a class of the program) or one of its bases of the program
  /// overrides, named for a refusal; "" when none. (A destructor is not counted: it runs where the value is
  /// destroyed, which is looked at there.)
  std::string overrideOfLibrary(const CXXRecordDecl *Record) const {
    std::function<const CXXMethodDecl *(const CXXMethodDecl *)> Overridden = [&](const CXXMethodDecl *Method) {
      for (const CXXMethodDecl *Base : Method->overridden_methods())
        if (isLibrary(Base))
          return Base;
        else if (const CXXMethodDecl *Found = Overridden(Base))
          return Found;
      return static_cast<const CXXMethodDecl *>(nullptr);
    };
    std::string Found;
    auto Search = [&](const CXXRecordDecl *Class) {
      if (isLibrary(Class))
        return true;
      for (const CXXMethodDecl *Method : Class->methods())
        if (Method->isUserProvided() && !isa<CXXDestructorDecl>(Method))
          if (const CXXMethodDecl *Base = Overridden(Method)) {
            Found = "`" + Method->getQualifiedNameAsString() + "`, which overrides the library's `" +
                    Base->getQualifiedNameAsString() + "`";
            return false;
          }
      return true;
    };
    if (Search(Record))
      Record->forallBases(Search);
    return Found;
  }

  /// What the analysis needs of the program's declarations in the translation unit, gathered in one walk:
  /// its classes, and the code of the program that library code finds for a class by name rather than
  /// through the class: an `operator<` or `swap` found by argument-dependent lookup. (A specialisation
  /// `std::hash<Config>` is a callable class of the program named in the container's type.)
  struct ProgramIndex {
    std::vector<const CXXRecordDecl *> Classes;
    llvm::DenseMap<const CXXRecordDecl *, std::string> Operated;
  };
  const ProgramIndex &programIndex() const {
    if (IndexBuilt)
      return Index;
    IndexBuilt = true;
    // A parameter's class, or for a class template's (`const Key<T> &`) the template's pattern.
    auto Operate = [&](QualType Type, std::string What) {
      Type = Type.getNonReferenceType();
      const CXXRecordDecl *Class = Type->getAsCXXRecordDecl();
      if (const auto *Special = Type->getAs<TemplateSpecializationType>(); Special && !Class)
        if (const auto *Template = dyn_cast_or_null<ClassTemplateDecl>(Special->getTemplateName().getAsTemplateDecl()))
          Class = Template->getTemplatedDecl();
      if (Class && (Class = Class->getDefinition()) && !isLibrary(Class))
        Index.Operated.try_emplace(Class, std::move(What));
    };
    auto NoteFunction = [&](const FunctionDecl *Function) {
      if (!Function || isa<CXXMethodDecl>(Function) || isLibrary(Function))
        return;
      bool ByName = Function->getOverloadedOperator() != OO_None ||
                    (Function->getIdentifier() && Function->getName() == "swap");
      for (const ParmVarDecl *Parameter : Function->parameters())
        if (ByName)
          Operate(Parameter->getType(), "the program's `" + calleeName(Function) + "` for `" +
                                            Parameter->getType().getNonReferenceType().getUnqualifiedType().getAsString() + "`");
    };
    auto AsFunction = [](const Decl *D) -> const FunctionDecl * {
      if (const auto *Template = dyn_cast_or_null<FunctionTemplateDecl>(D))
        return Template->getTemplatedDecl();
      return dyn_cast_or_null<FunctionDecl>(D);
    };
    std::vector<const DeclContext *> Pending{Query.context().getTranslationUnitDecl()};
    while (!Pending.empty()) {
      const DeclContext *Context = Pending.back();
      Pending.pop_back();
      for (const Decl *Member : Context->decls()) {
        if (isa<NamespaceDecl, LinkageSpecDecl>(Member) && isLibrary(Member))
          continue;
        if (const auto *Friend = dyn_cast<FriendDecl>(Member))
          NoteFunction(AsFunction(Friend->getFriendDecl()));
        if (isa<FunctionDecl, FunctionTemplateDecl>(Member))
          NoteFunction(AsFunction(Member));
        // A class template's specialisations are classes of the program (their members are walked too);
        // its pattern's friends are noted above through the pattern's declarations.
        if (const auto *Template = dyn_cast<ClassTemplateDecl>(Member)) {
          Pending.push_back(Template->getTemplatedDecl());
          for (const ClassTemplateSpecializationDecl *Specialization : Template->specializations()) {
            Pending.push_back(Specialization);
            if (Specialization->hasDefinition() && Specialization == Specialization->getDefinition() &&
                !isLibrary(Specialization))
              Index.Classes.push_back(Specialization);
          }
        }
        if (const auto *Record = dyn_cast<CXXRecordDecl>(Member);
            Record && Record->isThisDeclarationADefinition() && !Record->isDependentType() && !isLibrary(Record))
          Index.Classes.push_back(Record);
        if (const auto *Inner = dyn_cast<DeclContext>(Member); Inner && !isa<ClassTemplateDecl>(Member))
          Pending.push_back(Inner);
      }
    }
    return Index;
  }

  /// Each library class that a class of the program derives from and overrides a virtual method of, with
  /// the override: a value of the library class handed to the library may be the program's.
  const llvm::DenseMap<const CXXRecordDecl *, std::string> &programOverriders() const {
    if (OverridersBuilt)
      return Overriders;
    OverridersBuilt = true;
    for (const CXXRecordDecl *Class : programIndex().Classes)
      if (std::string Override = overrideOfLibrary(Class); !Override.empty())
        Class->forallBases([&](const CXXRecordDecl *Base) {
          if (isLibrary(Base))
            Overriders.try_emplace(Base->getCanonicalDecl()->getDefinition(), Override);
          return true;
        });
    return Overriders;
  }

  /// The code of the program that a library call or construction may run (through its object, its
  /// arguments, or the types it is instantiated for), named for a refusal with what brings it; "" when none.
  std::string programCodeRunBy(const Expr *Node) const {
    const FunctionDecl *Callee = nullptr;
    std::vector<const Expr *> Given;
    std::vector<QualType> Instantiated;
    if (const auto *Call = dyn_cast<CallExpr>(Node)) {
      Callee = Call->getDirectCallee();
      if (!Callee || !isLibrary(Callee) || isLambdaCall(Call))
        return "";
      // A method of a class that holds code of the program without naming it, or that threads synchronise
      // through (a deferred future's `get()`, a mutex's `lock()`).
      if (const auto *Method = dyn_cast<CXXMethodDecl>(Callee))
        if (std::string Code = codeBehind(Method->getParent()); !Code.empty())
          return "`" + calleeName(Callee) + "` is called on a `" + Method->getParent()->getName().str() +
                 "`, which may run " + Code;
      // A function threads synchronise through (a POSIX semaphore passed, a thread joined, a mutex locked).
      if (contains(Effects.ThreadSynchronisingFunctions, calleeName(Callee)))
        return "`" + calleeName(Callee) + "` lets code of the program on another thread run in between";
      // Access to what an object holds runs none of it.
      if (contains(Effects.Accessors, calleeName(Callee)))
        return "";
      if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call))
        Given.push_back(Member->getImplicitObjectArgument());
      for (const Expr *Argument : Call->arguments())
        Given.push_back(Argument);
    } else if (const auto *Construct = dyn_cast<CXXConstructExpr>(Node)) {
      Callee = Construct->getConstructor();
      if (!Callee || !isLibrary(Callee))
        return "";
      Instantiated.push_back(Construct->getType());
      for (const Expr *Argument : Construct->arguments())
        Given.push_back(Argument);
    } else {
      return "";
    }
    if (const TemplateArgumentList *Arguments = Callee->getTemplateSpecializationArgs())
      for (QualType Argument : typesAmong(Arguments->asArray()))
        Instantiated.push_back(Argument);
    if (const auto *Method = dyn_cast<CXXMethodDecl>(Callee))
      Instantiated.push_back(Query.context().getRecordType(Method->getParent()));
    for (QualType Type : Instantiated)
      if (std::string Code = programCodeIn(Type, Reach::Instantiated); !Code.empty())
        return "`" + calleeName(Callee) + "` is instantiated for `" + Type.getAsString() + "`, through which it may run " + Code;
    for (const Expr *Value : Given) {
      if (namesLibraryFunction(Value))
        continue;
      for (const Expr *Seen : {Value, Value->IgnoreParenImpCasts()})  // the object's own class, not the base it is converted to
        if (std::string Code = programCodeIn(Seen->getType(), Reach::Given); !Code.empty())
          return "`" + calleeName(Callee) + "` is given `" + Query.text(AstQuery::spelled(Value)) +
                 "`, through which it may run " + Code;
    }
    return "";
  }

  /// The code of the program that a value of Type, kept by a library object, may bring to it: what
  /// destroying it runs, and a callable or function it is (a deleter, a callback), which the keeper calls.
  std::string heldCode(QualType Type) const { return programCodeIn(Type, Reach::Held); }

  /// The code of the program that destroying a variable may run, named for a refusal, or "": a destructor of
  /// the program's classes among what it holds (`std::vector<Config>`), a deleter or callback named in its
  /// type (`std::unique_ptr<T, decltype(restore)>`), or one its initialiser hands the library
  /// (`std::shared_ptr<T>(p, restore)`, `torch::from_blob(data, sizes, deleter)`).
  std::string programCodeCarried(const VarDecl *Variable) const {
    if (Variable->getType()->isReferenceType())
      return "";
    if (std::string Code = programCodeIn(Variable->getType(), Reach::Destroyed); !Code.empty())
      return Code;
    if (!Variable->getType()->getAsCXXRecordDecl() || Variable->getType()->getAsCXXRecordDecl()->isLambda())
      return "";  // only an object of a class keeps what its making was handed
    class Finder : public RecursiveASTVisitor<Finder> {
    public:
      explicit Finder(const InputChangeFinder &Outer) : Outer(Outer) {}
      // A function called is not handed over: its callee expression is not looked at.
      bool VisitCallExpr(CallExpr *Call) {
        Callees.insert(Call->getCallee());
        Callees.insert(Call->getCallee()->IgnoreParenImpCasts());
        return true;
      }
      bool VisitExpr(Expr *Value) {
        if (Callees.count(Value))
          return true;
        if (isa<LambdaExpr>(Value))
          Found = "a lambda it was made with";
        else if (std::string Code = Outer.heldCode(Value->getType()); !Code.empty())
          Found = Code + " it was made with";
        else if (const auto *Ref = dyn_cast<DeclRefExpr>(Value))
          if (const auto *Function = dyn_cast<FunctionDecl>(Ref->getDecl()); Function && !Outer.isLibrary(Function))
            Found = "the program's `" + Function->getNameAsString() + "`, which it was made with";
        return Found.empty();
      }
      const InputChangeFinder &Outer;
      llvm::DenseSet<const Expr *> Callees;
      std::string Found;
    } Visitor(*this);
    if (const Expr *Init = Variable->getInit())
      Visitor.TraverseStmt(const_cast<Expr *>(Init));
    return Visitor.Found;
  }

  /// Whether Node itself (not its children) may change an input.
  std::optional<InputChange> changeAt(const Stmt *Node) {
    // A suspension point hands control to the coroutine's caller, which runs code of the program before it
    // resumes.
    if (isa<CoroutineSuspendExpr>(Node))
      return change(Node, "a coroutine's suspension point between the head and the loss lets its caller run code "
                              "of the program before it resumes, which may change " + inputs());
    // Code the analysis cannot read: an `asm` statement writes what its operands name, and may call anything.
    if (isa<AsmStmt>(Node))
      return change(Node, "an `asm` statement between the head and the loss may write " + inputs() +
                              " or run code of the program (the analysis does not read it)");
    // An atomic builtin (`__atomic_store_n`) writes through its pointer, and threads synchronise through it,
    // as through a `std::atomic` (the pattern set's `thread_synchronisers`).
    if (isa<AtomicExpr>(Node))
      return change(Node, "an atomic builtin between the head and the loss writes through its pointer and lets "
                              "code of the program on another thread run in between");
    // A new or delete expression calls an allocation function, which may be the program's (a class's own
    // `operator new`, a placement form, a replacement of the global one written in this unit); deleting runs
    // the destructor of what it deletes.
    if (const auto *New = dyn_cast<CXXNewExpr>(Node))
      if (programFunction(New->getOperatorNew()))
        return change(Node, "it calls the program's `" + New->getOperatorNew()->getNameAsString() +
                                "` (the analysis does not look into the program's code)");
    if (const auto *Delete = dyn_cast<CXXDeleteExpr>(Node)) {
      if (programFunction(Delete->getOperatorDelete()))
        return change(Node, "it calls the program's `" + Delete->getOperatorDelete()->getNameAsString() +
                                "` (the analysis does not look into the program's code)");
      if (std::string Code = programCodeIn(Delete->getDestroyedType(), Reach::Held); !Code.empty())
        return change(Node, "it deletes a `" + Delete->getDestroyedType().getAsString() + "`, which runs " + Code);
    }
    // Between the head and the loss, a mode guard made or a mode switched changes the mode the fused call
    // runs under from the head's.
    if (const auto *Bound = dyn_cast<CXXBindTemporaryExpr>(Node))
      if (std::string Code = programCodeIn(Bound->getType(), Reach::Destroyed); !Code.empty())
        return change(Node, "a temporary `" + Bound->getType().getAsString() +
                                "` is destroyed between the head and the loss, which runs " + Code);
    // A value that holds a guard (an optional, a pointer, a container), used between the two: its reset(),
    // emplace() or destruction switches the mode, and the analysis does not follow it.
    // (Not an implicit conversion: the value it converts is visited too, and named as written.)
    if (const auto *Value = dyn_cast<Expr>(Node); Value && !isa<CXXConstructExpr, ImplicitCastExpr>(Node) &&
                                                  modeGuard(Value->getType()).empty())
      if (HeldMode Held = modeGuardHeld(Value->getType()); !Held.none())
        return change(Node, "`" + Query.text(Value) + "` holds " + Held.phrase() + ": used between the head "
                                "and the loss, it may switch the autograd or autocast mode the fused call would run under");
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(Node)) {
      // A value moved from, however the move is spelled (`static_cast<std::shared_ptr<int> &&>(ticket_)`): what
      // takes it over (a temporary, a local) may be its last owner, and release it.
      for (const Expr *Argument : Construct->arguments())
        if (std::string Code = Argument->isXValue() ? releasedThrough(Argument) : ""; !Code.empty())
          return change(Node, "`" + Query.text(AstQuery::spelled(Argument)) +
                                  "` is moved from, and what takes its value over may release it and run " + Code);
      if (HeldMode Held = modeGuardHeld(Construct->getType()); !Held.none())
        return change(Node, "a `" + Construct->getType().getAsString() + "` made between the head and the loss holds " +
                                Held.phrase() + ", which may change the autograd or autocast mode the fused call "
                                "would run under");
      if (const CXXConstructorDecl *Constructor = Construct->getConstructor();
          Constructor && Constructor->isUserProvided() && !isLibrary(Constructor))
        return change(Node, "it constructs a `" + Construct->getType().getAsString() +
                                "`, whose constructor may switch the autograd or autocast mode (the analysis does "
                                "not look into the program's code)");
      // An implicit constructor of the program's class runs its members' and bases' constructors.
      if (const CXXConstructorDecl *Constructor = Construct->getConstructor();
          Constructor && !Constructor->isUserProvided() && !isLibrary(Constructor))
        if (std::string Code = programCodeOfMembers(Constructor->getParent(), Reach::Instantiated); !Code.empty())
          return change(Node, "it constructs a `" + Construct->getType().getAsString() + "`, which runs " + Code +
                                  " (the analysis does not look into the program's code)");
    }
    if (const auto *Call = dyn_cast<CallExpr>(Node))
      if (const FunctionDecl *Callee = Call->getDirectCallee();
          Callee && isLibrary(Callee) && contains(Effects.ModeSwitches, calleeName(Callee)))
        return change(Node, "`" + displayName(Call) + "` between the head and the loss changes the mode (autograd, "
                                "autocast or arithmetic) the fused call would run under");
    if (const auto *Value = dyn_cast<Expr>(Node))
      if (const CXXRecordDecl *State = writableModeState(Value))
        return change(Node, "it may write a `" + State->getQualifiedNameAsString() +
                                "`, the thread's autograd or dispatch mode, which the fused call would run under");
    // An operator of the program (`a = b`, `acc += x` on a class of the program) is a call of its code, not a
    // rebinding; an implicit one runs its members' and bases' operators.
    if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Node))
      if (const FunctionDecl *Callee = Operator->getDirectCallee(); Callee && !isLibrary(Callee)) {
        const auto *Method = dyn_cast<CXXMethodDecl>(Callee);
        if (!Callee->isDefaulted() ||
            (Method && !programCodeOfMembers(Method->getParent(), Reach::Instantiated).empty()))
          return call(Operator);
      }
    if (const auto *Value = dyn_cast<Expr>(Node))
      if (const auto *Call = dyn_cast<CallExpr>(Node); !Call || !matchHead(Call, Patterns, Query))
        if (std::string Code = programCodeRunBy(Value); !Code.empty())
          return change(Node, Code + ", which may change " + inputs() + " or switch the autograd or autocast mode "
                                  "the fused call would run under (the analysis does not look into the program's code)");
    if (const auto *Operator = dyn_cast<BinaryOperator>(Node); Operator && Operator->isAssignmentOp())
      return assignment(Node, Operator->getLHS(), Operator->getOpcode() == BO_Assign);
    if (const auto *Operator = dyn_cast<UnaryOperator>(Node); Operator && Operator->isIncrementDecrementOp())
      return assignment(Node, Operator->getSubExpr(), false);
    if (const auto *Call = dyn_cast<CallExpr>(Node)) {
      if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Call);
          Operator && Operator->isAssignmentOp() && Operator->getNumArgs() == 2)
        return assignment(Node, Operator->getArg(0), Operator->getOperator() == OO_Equal);
      return call(Call);
    }
    return std::nullopt;
  }

  /// Whether assigning to a value of Type assigns what references it holds refer to: a class given, or holding, a
  /// non-const lvalue reference (`std::tuple<Tensor &>`, what `std::tie` and `std::forward_as_tuple` make,
  /// `std::pair<Tensor &, int>`). Its assignment is a write through them, not a rebinding.
  static bool assignsThroughReferences(QualType Type) {
    const CXXRecordDecl *Record = Type.getNonReferenceType()->getAsCXXRecordDecl();
    if (!Record || !Record->hasDefinition())
      return false;
    auto WritableReference = [](QualType Held) {
      return Held->isLValueReferenceType() && !Held->getPointeeType().isConstQualified();
    };
    return llvm::any_of(typeArguments(Record), WritableReference) ||
           llvm::any_of(Record->fields(), [&](const FieldDecl *Field) { return WritableReference(Field->getType()); });
  }

  /// `target = value`: rebinding a variable that is not an input (nor refers to one, nor holds references it
  /// assigns through) changes nothing; any other write through a value that may share storage with an input may
  /// change it.
  std::optional<InputChange> assignment(const Stmt *Node, const Expr *Target, bool Plain) {
    const Expr *Spelled = AstQuery::spelled(Target);
    // The value the target held is released (`ticket = nullptr;` runs the deleter `ticket` was made with).
    if (std::string Code = releasedThrough(Target); !Code.empty())
      return change(Node, "`" + Query.text(Spelled) + "` is assigned, which releases the value it held and may run " +
                              Code);
    const ValueDecl *Rebound = nullptr;
    if (const auto *Ref = dyn_cast<DeclRefExpr>(Spelled))
      Rebound = Ref->getDecl();
    else if (const auto *Member = dyn_cast<MemberExpr>(Spelled);
             Member && isa<CXXThisExpr>(Member->getBase()->IgnoreParenImpCasts()))
      Rebound = Member->getMemberDecl();
    if (Plain && Rebound && !Rebound->getType()->isReferenceType() && !assignsThroughReferences(Rebound->getType())) {
      if (Protected.count(Rebound) && !readOnceAtHead(Rebound))
        return change(Node, "`" + Rebound->getNameAsString() + "` is assigned a new value");
      // A member or global may be the very object an input reference names (`const Tensor &h` bound to
      // it by the caller): rebinding it rebinds that input.
      if (!isLocal(Rebound))
        if (const ValueDecl *Input = referenceInput())
          return change(Node, "`" + Rebound->getNameAsString() + "` is assigned a new value, and the input `" +
                                  Input->getNameAsString() + "` is a reference that may name it");
      return std::nullopt;
    }
    // Writing through an expression writes whatever it names (`*p = 0`, `h[0] = 1`, `a.b = c`).
    for (const Mention &Found : mentions(Target, false))
      if (isTainted(Found.Of) || (Protected.count(Found.Of) && !readOnceAtHead(Found.Of)))
        return change(Node, "it writes through `" + nameOf(Found.Of) + "`, which may share storage with " + inputs());
    return std::nullopt;
  }

  std::optional<InputChange> call(const CallExpr *Call) {
    if (matchHead(Call, Patterns, Query))
      return std::nullopt;  // the head's own forward computes, it does not write
    const FunctionDecl *Callee = Call->getDirectCallee();
    const auto *Member = dyn_cast<CXXMemberCallExpr>(Call);
    const Expr *Object = Member ? Member->getImplicitObjectArgument() : nullptr;
    if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Call); Operator && isa<CXXMethodDecl>(Callee))
      Object = Operator->getArg(0);
    std::string Name = Callee ? calleeName(Callee) : "";

    auto Reached = [&]() -> std::optional<Root> {
      if (auto Of = reachedRoot(Object))
        return Of;
      for (unsigned I = Object && isa<CXXOperatorCallExpr>(Call) ? 1 : 0; I < Call->getNumArgs(); ++I)
        if (auto Of = reachedRoot(Call->getArg(I)))
          return Of;
      return std::nullopt;
    };

    bool Library = Callee && isLibrary(Callee) && !(Name == "operator()" && !isLambdaCall(Call));
    if (Library && contains(Effects.ProgramCodeCalls, qualifiedName(Callee)))
      return change(Call, "`" + qualifiedName(Callee) + "` runs code of the program (hooks, autograd Functions or "
                              "kernels it registered), which may change " + inputs() + " or switch the autograd or "
                              "autocast mode the fused call would run under (the analysis does not look into it)");
    if (!Library) {
      if (isLambdaCall(Call) || !Callee || !isa<CXXMethodDecl>(Callee) || !Object ||
          !isa<CXXThisExpr>(Object->IgnoreParenImpCasts())) {
        if (auto Of = Reached())
          return change(Call, "it calls `" + displayName(Call) + "`, which can reach `" + nameOf(*Of) +
                                  "` (it may share storage with " + inputs() + ")");
        if (hasGlobalInput())
          return change(Call, "it calls `" + displayName(Call) + "`, which can reach the global inputs");
      } else if (This && isTainted(This)) {
        return change(Call, "it calls the member function `" + displayName(Call) + "`, which can change " + inputs());
      }
      // Whatever it reaches, code that is not the library's may switch the thread's autograd or autocast
      // mode (or change a parameter through a global): the analysis does not look into it.
      return change(Call, "it calls `" + displayName(Call) + "`, which may switch the autograd or autocast mode "
                              "the fused call would run under (the analysis does not look into the program's code)");
    }
    // A value whose release may run code its type does not name, reset, cleared, swapped or moved from
    // (`ticket.reset()`, `handles.clear()`, `std::swap(a, b)`, `std::move(ticket)`).
    if (const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Callee);
        Method && Object && Method->isInstance() && !Method->isConst() && !contains(Effects.Accessors, Name) &&
        !contains(Effects.StandardAccessors, Name))
      if (std::string Code = releasedThrough(Object); !Code.empty())
        return change(Call, "`" + Name + "` is called on `" + Query.text(AstQuery::spelled(Object)) +
                                "`, which may release a value it holds and run " + Code);
    for (const Expr *Argument : changeableArguments(Call))
      if (std::string Code = releasedThrough(Argument); !Code.empty())
        return change(Call, "`" + Name + "` takes `" + Query.text(AstQuery::spelled(Argument)) +
                                "` by non-const reference, and may release a value it holds and run " + Code);
    // The library: in-place by name, non-const reference parameters, non-const methods of non-tensors.
    if (writesByName(Callee))
      if (auto Of = Reached())
        return change(Call, "`" + Name + "` writes `" + nameOf(*Of) + "`, which may share storage with " + inputs());
    if (setsWritingOption(Call))
      if (auto Of = Reached())
        return change(Call, "`" + Name + "` is given an option that makes it write its tensors in place, and it "
                                "writes `" + nameOf(*Of) + "`, which may share storage with " + inputs());
    for (const Expr *Argument : changeableArguments(Call))
      if (auto Of = reachedRoot(Argument))
        return change(Call, "`" + Name + "` takes `" + nameOf(*Of) + "` by non-const reference");
    if (const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Callee);
        Method && Object && Method->isInstance() && !Method->isConst() && !contains(Effects.Accessors, Name)) {
      // A tensor's non-const methods (`reset()`) make the handle hold another tensor, or none: one the fused call
      // or the repeated test reads, however it is reached (a reference, a member, an optional's `->`); another
      // class's may change what it holds.
      if (auto Of = reachedRoot(Object))
        return change(Call, "the non-const `" + Name + "` is called on `" + nameOf(*Of) + "`, which " +
                                (isTensorType(Method->getParent())
                                     ? "makes it hold another tensor (or none): it may be one of "
                                     : "may hold ") +
                                inputs());
    }
    return std::nullopt;
  }

  /// Whether a value of Type gives write access to what it refers to, as a non-const pointer does: an
  /// iterator (a class that names an `iterator_category`) whose `operator*` or `operator->` yields a
  /// non-const reference or pointer (`std::fill(ws.begin(), ws.end(), t)` writes `ws`). A class that holds
  /// its value (an optional) is copied with it, and writes nothing of the caller's through the copy.
  static bool isWritingHandle(QualType Type, int Depth = 0) {
    const CXXRecordDecl *Record = Type.getNonReferenceType()->getAsCXXRecordDecl();
    if (!Record || !Record->hasDefinition() || Depth > 4)
      return false;
    if (Record->lookup(&Record->getASTContext().Idents.get("iterator_category")).empty()) {
      for (const CXXBaseSpecifier &Base : Record->bases())
        if (isWritingHandle(Base.getType(), Depth + 1))
          return true;
      return false;
    }
    for (const CXXMethodDecl *Method : Record->methods()) {
      OverloadedOperatorKind Operator = Method->getOverloadedOperator();
      QualType Result = Method->getReturnType();
      if ((Operator == OO_Star || Operator == OO_Arrow) && (Result->isReferenceType() || Result->isPointerType()) &&
          !Result->getPointeeType().isConstQualified())
        return true;
    }
    return false;
  }

  /// Arguments a callee may change: bound to a non-const reference or pointer parameter or to a handle that
  /// writes through (an iterator), or any argument of code that is not the library's (which may do
  /// anything with a tensor handle).
  std::vector<const Expr *> changeableArguments(const CallExpr *Call) {
    std::vector<const Expr *> Found;
    const FunctionDecl *Callee = Call->getDirectCallee();
    unsigned Skip = isa<CXXOperatorCallExpr>(Call) && Callee && isa<CXXMethodDecl>(Callee) ? 1 : 0;
    for (unsigned I = Skip; I < Call->getNumArgs(); ++I) {
      const Expr *Argument = Call->getArg(I);
      if (!Callee || !isLibrary(Callee)) {
        Found.push_back(Argument);
        continue;
      }
      unsigned Index = I - Skip;
      QualType Type = Index < Callee->getNumParams() ? Callee->getParamDecl(Index)->getType() : QualType();
      bool Changeable = Type.isNull() || (Type->isReferenceType() && !Type->getPointeeType().isConstQualified()) ||
                        (Type->isPointerType() && !Type->getPointeeType().isConstQualified()) ||
                        isCallable(Argument->getType()) || isWritingHandle(Type);
      if (Changeable)
        Found.push_back(Argument);
    }
    return Found;
  }

  /// Whatever clang's ExprMutationAnalyzer sees mutating an input variable between head and loss
  /// (through references, swaps, moves, casts, non-const uses it knows).
  std::optional<InputChange> mutationOfProtectedVariables() {
    ExprMutationAnalyzer Analyzer(*Site.Body, Query.context());
    class RefFinder : public RecursiveASTVisitor<RefFinder> {
    public:
      bool shouldVisitLambdaBody() const { return true; }
      bool VisitDeclRefExpr(DeclRefExpr *Ref) {
        Refs.push_back(Ref);
        return true;
      }
      std::vector<const DeclRefExpr *> Refs;
    } Finder;
    Finder.TraverseStmt(const_cast<Stmt *>(Site.Body));
    for (const DeclRefExpr *Ref : Finder.Refs) {
      const ValueDecl *Variable = Ref->getDecl();
      if (!Protected.count(Variable) || readOnceAtHead(Variable) || !inRegion(Ref))
        continue;
      const Stmt *Mutation = Analyzer.findMutation(Ref);
      if (!Mutation || !inRegion(Mutation) || Query.within(Site.Loss, Mutation) || isAccessorCall(Mutation))
        continue;
      if (const auto *Call = dyn_cast<CallExpr>(Mutation); Call && matchHead(Call, Patterns, Query))
        continue;
      return change(Mutation, "it may change `" + Variable->getNameAsString() + "`");
    }
    return std::nullopt;
  }

  /// A site in the body of a lambda that captures a variable, with code between the head and the loss: the
  /// analysis sees this body only, not what the enclosing function does to that variable (an alias of the
  /// input made there, a lambda of its that changes the input, called from here).
  std::optional<InputChange> lambdaCapture() {
    const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Site.Function);
    if (!Method || !Method->getParent()->isLambda() || Query.within(Site.Head->Call, Site.Loss))
      return std::nullopt;
    for (const LambdaCapture &Capture : Method->getParent()->captures())
      if (Capture.capturesVariable())
        return InputChange{Site.Head->Call, "the site is in a lambda that captures `" +
                                                Capture.getCapturedVar()->getNameAsString() +
                                                "`, and what the enclosing function does with it is not analysed"};
    return std::nullopt;
  }

  /// A jump that can reach the loss without the head: any `goto`, a `case`/`default` label of a `switch`
  /// between the head and the loss (control entering there skips the head), or a call between them of a
  /// function that returns twice (`setjmp`, `sigsetjmp`, `vfork`: a `longjmp` later enters there again).
  std::optional<InputChange> findGoto() {
    class GotoFinder : public RecursiveASTVisitor<GotoFinder> {
    public:
      GotoFinder(const AstQuery &Query, SourceLocation Head, SourceLocation Loss) : Query(Query), Head(Head), Loss(Loss) {}
      bool VisitGotoStmt(GotoStmt *Jump) { return !(Found = Jump); }
      bool VisitIndirectGotoStmt(IndirectGotoStmt *Jump) { return !(Found = Jump); }
      bool VisitSwitchCase(SwitchCase *Label) {
        if (Query.before(Head, Label->getBeginLoc()) && Query.before(Label->getBeginLoc(), Loss))
          Found = Label, Entry = true;
        return !Found;
      }
      bool VisitCallExpr(CallExpr *Call) {
        const FunctionDecl *Callee = Call->getDirectCallee();
        if (Callee && Callee->hasAttr<ReturnsTwiceAttr>() && Query.before(Head, Call->getBeginLoc()) &&
            Query.before(Call->getBeginLoc(), Loss))
          Found = Call, Twice = true;
        return !Found;
      }
      const AstQuery &Query;
      SourceLocation Head, Loss;
      const Stmt *Found = nullptr;
      bool Entry = false, Twice = false;
    } Finder(Query, Site.Head->Call->getBeginLoc(), Site.Loss->getBeginLoc());
    Finder.TraverseStmt(const_cast<Stmt *>(Site.Body));
    if (Finder.Found && Finder.Entry)
      return InputChange{Finder.Found, "a `switch` can enter between the head and the loss, skipping the head"};
    if (Finder.Found && Finder.Twice)
      return InputChange{Finder.Found, "`" + Query.text(Finder.Found) +
                                           "` returns twice: a `longjmp` can enter between the head and the loss "
                                           "again, after any code of the program"};
    if (Finder.Found)
      return InputChange{Finder.Found, "a `goto` can run any code of the function between the head and the loss"};
    return std::nullopt;
  }

  // ---- small helpers -------------------------------------------------------------------------------

  static bool isLocal(const ValueDecl *Declaration) {
    const auto *Variable = dyn_cast<VarDecl>(Declaration);
    return Variable && !isa<ParmVarDecl>(Variable) && Variable->hasLocalStorage();
  }

  /// An input of the fused call held by a reference (a parameter, local or member of reference type) or by a
  /// pointer whose target the analysis does not follow (a parameter, member or global), read where the rewrite
  /// reads it (not once at the head); none when every input is held by value.
  const ValueDecl *referenceInput() {
    for (Root Of : Protected) {
      const auto *Value = dyn_cast<ValueDecl>(Of);  // a variable or a member
      if (!Value || readOnceAtHead(Of))
        continue;
      if (Value->getType()->isReferenceType())
        return Value;
      // A pointer the fused call reads through again (`*out_w_`, `g_head->weight`, an array of them, a
      // `std::reference_wrapper`) names what it was set to point at: a local one's initialiser is followed
      // (collectProtected) unless code the analysis does not read gave it; any other may point at a member or a
      // global.
      const auto *Variable = dyn_cast<VarDecl>(Value);
      if (refersThrough(Value->getType()) &&
          !(Variable && Variable->hasLocalStorage() && !isa<ParmVarDecl>(Variable) && Variable->getInit() &&
            !givenByUnreadCode(Variable->getInit())))
        return Value;
    }
    return nullptr;
  }

  /// Whether a value of Type names another object: a reference or a pointer, an array of them, a
  /// `std::reference_wrapper`, or a library template holding one (`std::pair<Tensor &, int>`, `std::vector<Tensor *>`).
  bool refersThrough(QualType Type, int Depth = 0) const {
    if (Type.isNull() || Depth > 4)
      return false;
    if (Type->isReferenceType() || Type->isPointerType())
      return true;
    if (const ArrayType *Array = Type->getAsArrayTypeUnsafe())
      return refersThrough(Array->getElementType(), Depth + 1);
    const CXXRecordDecl *Record = Type->getAsCXXRecordDecl();
    if (!Record || !isLibrary(Record))
      return false;
    if (Record->getIdentifier() && Record->getName() == "reference_wrapper")
      return true;
    return llvm::any_of(typeArguments(Record), [&](QualType Argument) { return refersThrough(Argument, Depth + 1); });
  }

  /// The library class of the thread's modes (the pattern set's `mode_states`) that E is a non-const object,
  /// reference or pointer of; null when it is none.
  const CXXRecordDecl *writableModeState(const Expr *E) const {
    if (isa<ImplicitCastExpr>(E) || Effects.ModeStates.empty())
      return nullptr;
    QualType Type = E->getType();
    if (Type->isPointerType())
      Type = Type->getPointeeType();
    else if (!E->isGLValue())
      return nullptr;
    const CXXRecordDecl *Record = Type.getNonReferenceType()->getAsCXXRecordDecl();
    if (!Record || Type.isConstQualified() || !contains(Effects.ModeStates, Record->getNameAsString()) ||
        !isLibrary(Record))
      return nullptr;
    return Record;
  }

  bool readOnceAtHead(Root Of) const {
    // Only the hidden state's variables are read once at the head; the weight is read at the loss.
    return HoistedRoots.count(Of) && !weightMentions().count(Of);
  }
  const std::set<Root> &weightMentions() const {
    if (!WeightRootsDone) {
      WeightRootsDone = true;
      MentionCollector Collector(This);
      Collector.TraverseStmt(const_cast<Expr *>(Site.Head->Call));
      MentionCollector HiddenOnly(This);
      HiddenOnly.TraverseStmt(const_cast<Expr *>(Site.Head->Hidden));
      std::set<const Expr *> InHidden;
      for (const Mention &Found : HiddenOnly.Found)
        InHidden.insert(Found.Node);
      for (const Mention &Found : Collector.Found)
        if (!InHidden.count(Found.Node))
          WeightRoots.insert(Found.Of);
    }
    return WeightRoots;
  }

  bool isLibrary(const Decl *Declaration) const {
    return Query.inLibraryHeader(Declaration->getLocation()) || isLibraryDeclaration(Declaration, Patterns, Query);
  }

  /// A destructor of the program's (user-provided): code the analysis does not look into.
  bool programDestructor(const CXXDestructorDecl *Destructor) const {
    return Destructor && Destructor->isUserProvided() && !isLibrary(Destructor);
  }

  static bool isLambdaCall(const CallExpr *Call) {
    const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Call->getDirectCallee());
    return Method && Method->getParent()->isLambda();
  }
  bool isCallable(QualType Type) const {
    const CXXRecordDecl *Record = Type.getNonReferenceType()->getAsCXXRecordDecl();
    if (!Record || !(Record = Record->getDefinition()))
      return false;
    if (Record->isLambda())
      return true;
    for (const CXXMethodDecl *Method : Record->methods())
      if (Method->getOverloadedOperator() == OO_Call)
        return true;
    return false;
  }
  static bool isTensorType(const CXXRecordDecl *Record) {
    std::string Name = Record->getQualifiedNameAsString();
    return Name == "at::Tensor" || Name == "at::TensorBase";
  }
  bool isAccessorCall(const Stmt *Node) const {
    const auto *Call = dyn_cast<CallExpr>(Node);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    return Callee && contains(Effects.Accessors, calleeName(Callee));
  }
  bool hasGlobalInput() const {
    for (Root Of : Protected)
      if (const auto *Variable = dyn_cast<VarDecl>(Of); Variable && !Variable->hasLocalStorage())
        return true;
    return false;
  }

  /// A callee's qualified name, a method of a class template's specialization by the template's
  /// (`torch::autograd::Function::apply`, `c10::TypedOperatorHandle::call`).
  static std::string qualifiedName(const FunctionDecl *Callee) {
    if (const auto *Method = dyn_cast<CXXMethodDecl>(Callee)) {
      const CXXRecordDecl *Record = Method->getParent();
      std::string Class = Record->getQualifiedNameAsString();
      if (const auto *Specialization = dyn_cast<ClassTemplateSpecializationDecl>(Record))
        Class = Specialization->getSpecializedTemplate()->getQualifiedNameAsString();
      return Class + "::" + calleeName(Callee);
    }
    return Callee->getQualifiedNameAsString();
  }
  static std::string calleeName(const FunctionDecl *Callee) {
    if (Callee->getOverloadedOperator() != OO_None)
      return std::string("operator") + getOperatorSpelling(Callee->getOverloadedOperator());
    return Callee->getDeclName().isIdentifier() ? Callee->getName().str() : Callee->getNameAsString();
  }
  std::string displayName(const CallExpr *Call) const {
    if (const FunctionDecl *Callee = Call->getDirectCallee(); Callee && !isLambdaCall(Call))
      return calleeName(Callee);
    std::string Text = Query.text(Call->getCallee());
    return Text.empty() ? "a function" : Text;
  }
  std::string nameOf(Root Of) const {
    if (Of == This)
      return "this";
    if (const auto *Named = dyn_cast<NamedDecl>(Of))
      return Named->getNameAsString();
    return "a value";
  }
  std::string inputs() const {
    std::string Text = Site.Head->Text;
    return "the head `" + (Text.size() > 40 ? Text.substr(0, 37) + "..." : Text) + "`'s inputs";
  }

  InputChange change(const Stmt *Node, std::string Why) { return InputChange{Node, std::move(Why)}; }

  const CapturedSite &Site;
  const EffectPatterns &Effects;
  const PatternSet &Patterns;
  const AstQuery &Query;
  const SourceManager &SM;
  Root This = nullptr;
  StorageTypes Types;
  /// Locals given a value, or handed as changeable arguments, by code the analysis does not read: they may
  /// share storage with any input (collectTaint).
  std::vector<Root> FromUnreadCode;
  std::vector<const VarDecl *> ThreadLocals;  ///< threadLocalsInitialisedOnUse()
  bool ThreadLocalsFound = false;
  mutable llvm::DenseMap<const CXXRecordDecl *, HeldMode> GuardMemo;
  mutable llvm::DenseMap<const CXXRecordDecl *, std::string> DerivedHolders;
  mutable llvm::DenseMap<std::pair<const CXXRecordDecl *, int>, std::string> CodeMemo;
  mutable llvm::DenseMap<const CXXRecordDecl *, std::string> DerivedMemo;
  mutable ProgramIndex Index;
  mutable bool IndexBuilt = false;
  mutable llvm::DenseMap<const CXXRecordDecl *, std::string> Overriders;
  mutable bool OverridersBuilt = false;
  mutable bool DerivedComputed = false;
  std::set<Root> Protected;
  std::set<Root> HoistedRoots;
  mutable std::set<Root> WeightRoots;
  mutable bool WeightRootsDone = false;
  llvm::DenseSet<Root> Tainted;
  std::vector<SourceRange> Region;
};

}  // namespace

std::optional<InputChange> findInputChange(const CapturedSite &Site, const PatternSet &Patterns,
                                           const AstQuery &Query) {
  return InputChangeFinder(Site, Patterns, Query).run();
}

}  // namespace lmfuse::rewriter
