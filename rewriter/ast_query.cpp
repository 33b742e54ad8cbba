// Syntax-level helpers shared by site capture, refusal analysis and edit planning.
#include "ast_query.h"

#include <functional>
#include <set>

#include <algorithm>

#include "clang/AST/ParentMapContext.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Path.h"

#include "edit_set.h"  // isUnder
#include "raw_tokens.h"

using namespace clang;

namespace lmfuse::rewriter {

AstQuery::AstQuery(ASTContext &Context, Preprocessor &PP, std::string ProgramRoot)
    : Context(Context), PP(PP), ProgramRoot(std::move(ProgramRoot)) {
  if (this->ProgramRoot.empty()) {
    const SourceManager &SM = Context.getSourceManager();
    if (OptionalFileEntryRef Main = SM.getFileEntryRefForID(SM.getMainFileID()))
      this->ProgramRoot = llvm::sys::path::parent_path(SM.getFileManager().getCanonicalName(*Main)).str();
  }
}

std::string AstQuery::macroMeaningChanged(const Expr *E, SourceLocation At) const {
  const SourceManager &SM = sourceManager();
  CharSourceRange Range = fileRange(spelled(E)->getSourceRange());
  if (Range.isInvalid())  // the inside of a macro's parentheses: the parentheses are the whole invocation
    Range = fileRange(E->getSourceRange());
  if (Range.isInvalid())
    return "";
  At = SM.getExpansionLoc(At);
  auto [File, Begin] = SM.getDecomposedLoc(Range.getBegin());
  // Each identifier's meaning where it is written against its meaning at `At`, from the macro history the
  // preprocessor keeps.
  std::string Changed;
  forEachRawToken(SM, Context.getLangOpts(), File, Begin, SM.getFileOffset(Range.getEnd()), [&](const Token &Word) {
    if (!Word.is(tok::raw_identifier))
      return true;
    IdentifierInfo *Name = PP.getIdentifierInfo(Word.getRawIdentifier());
    if (Name->hadMacroDefinition() && PP.getMacroDefinitionAtLoc(Name, Word.getLocation()).getMacroInfo() !=
                                          PP.getMacroDefinitionAtLoc(Name, At).getMacroInfo())
      Changed = Name->getName().str();
    return Changed.empty();
  });
  return Changed;
}

const std::vector<std::pair<SourceLocation, std::string>> &AstQuery::positionMacroExpansions() const {
  if (PositionMacros)
    return *PositionMacros;
  PositionMacros.emplace();
  const SourceManager &SM = sourceManager();
  // Each expansion the preprocessor made is an entry of the source manager; a built-in macro's starts at the
  // token of its name, where it is written (in the file, or in the body of the macro that expands it).
  for (unsigned I = 0; I < SM.local_sloc_entry_size(); ++I) {
    const SrcMgr::SLocEntry &Entry = SM.getLocalSLocEntry(I);
    if (!Entry.isExpansion() || Entry.getExpansion().isMacroArgExpansion())
      continue;
    SourceLocation NameAt = SM.getSpellingLoc(Entry.getExpansion().getExpansionLocStart());
    bool Invalid = false;
    const char *Name = SM.getCharacterData(NameAt, &Invalid);
    if (Invalid || Name[0] != '_' || Name[1] != '_')
      continue;
    llvm::StringRef Word(Name, Lexer::MeasureTokenLength(NameAt, SM, Context.getLangOpts()));
    // __FILE__ counts where the program writes it (in its files, or in a macro of its own): a library macro's
    // (TORCH_CHECK's, assert's) names the file in a message only (README: known differences).
    const bool FileName = Word == "__FILE__" || Word == "__FILE_NAME__";
    if (FileName && !inProgramFile(NameAt))
      continue;
    if (Word == "__LINE__" || Word == "__COUNTER__" || Word == "__BASE_FILE__" || Word == "__TIMESTAMP__" || FileName)
      PositionMacros->push_back({SM.getExpansionLoc(Entry.getExpansion().getExpansionLocStart()), Word.str()});
  }
  return *PositionMacros;
}

std::string AstQuery::compiledFileDependence() const {
  for (const auto &[At, Name] : positionMacroExpansions())
    if ((Name == "__BASE_FILE__" || Name == "__TIMESTAMP__") && inProgramFile(At))
      return "`" + Name + "` on line " + std::to_string(line(At)) + " of " +
             llvm::sys::path::filename(sourceManager().getFilename(At)).str();
  return "";
}

std::string AstQuery::fileNameDependence(SourceLocation Site) const {
  const SourceManager &SM = sourceManager();
  FileID SiteFile = SM.getFileID(SM.getExpansionLoc(Site));
  OptionalFileEntryRef Entry = SM.getFileEntryRefForID(SiteFile);
  if (!Entry)
    return "";
  llvm::StringRef RealPath = SM.getFileManager().getCanonicalName(*Entry);
  for (const auto &[At, Name] : positionMacroExpansions()) {
    if ((Name != "__FILE__" && Name != "__FILE_NAME__") || SM.getFileID(At) != SiteFile)
      continue;
    PresumedLoc Where = SM.getPresumedLoc(At);
    if (Where.isValid() && llvm::StringRef(Where.getFilename()) != RealPath)
      return "`" + Name + "` on line " + std::to_string(line(At)) + " gives \"" + Where.getFilename() +
             "\", the file as this unit reaches it, and the rewritten copy names it by its real path (" +
             RealPath.str() + ")";
  }
  // The file's name read without the macro, where the file's code is evaluated: `__builtin_FILE()`,
  // `__builtin_FILE_NAME()`, `std::source_location::current()`, written in the file or as a default argument
  // or a member's default initialiser (evaluated where the call or the object is, as `current()` is).
  class FileReads : public RecursiveASTVisitor<FileReads> {
  public:
    FileReads(const SourceManager &SM, FileID File) : SM(SM), File(File) {}
    bool TraverseDecl(Decl *D) {
      if (!D || Found.isValid())
        return true;
      // Only the file's own declarations (and what they hold), not those of the headers it includes.
      if (!isa<TranslationUnitDecl>(D) && SM.getFileID(SM.getExpansionLoc(D->getLocation())) != File)
        return true;
      return RecursiveASTVisitor::TraverseDecl(D);
    }
    bool VisitSourceLocExpr(SourceLocExpr *Builtin) {
      if (readsFile(Builtin))
        note(Builtin->getBeginLoc(), Builtin->getBuiltinStr());
      return Found.isInvalid();
    }
    bool VisitCXXDefaultArgExpr(CXXDefaultArgExpr *Default) {
      if (const SourceLocExpr *Builtin = fileReadIn(Default->getExpr()))
        note(Default->getUsedLocation(), Builtin->getBuiltinStr());
      return Found.isInvalid();
    }
    bool VisitCXXDefaultInitExpr(CXXDefaultInitExpr *Default) {
      if (const SourceLocExpr *Builtin = fileReadIn(Default->getExpr()))
        note(Default->getUsedLocation(), Builtin->getBuiltinStr());
      return Found.isInvalid();
    }
    static bool readsFile(const SourceLocExpr *Builtin) {
      SourceLocIdentKind Kind = Builtin->getIdentKind();
      return Kind == SourceLocIdentKind::File || Kind == SourceLocIdentKind::FileName ||
             Kind == SourceLocIdentKind::SourceLocStruct;
    }
    static const SourceLocExpr *fileReadIn(const Stmt *S) {
      if (!S)
        return nullptr;
      if (const auto *Builtin = dyn_cast<SourceLocExpr>(S))
        return readsFile(Builtin) ? Builtin : nullptr;
      if (const auto *Default = dyn_cast<CXXDefaultArgExpr>(S))
        return fileReadIn(Default->getExpr());
      if (const auto *Default = dyn_cast<CXXDefaultInitExpr>(S))
        return fileReadIn(Default->getExpr());
      for (const Stmt *Child : S->children())
        if (const SourceLocExpr *Found = fileReadIn(Child))
          return Found;
      return nullptr;
    }
    void note(SourceLocation At, llvm::StringRef Name) {
      At = SM.getExpansionLoc(At);
      if (SM.getFileID(At) == File) {
        Found = At;
        FoundName = Name.str();
      }
    }
    const SourceManager &SM;
    FileID File;
    SourceLocation Found;
    std::string FoundName;
  } Reads(SM, SiteFile);
  Reads.TraverseDecl(Context.getTranslationUnitDecl());
  if (Reads.Found.isValid()) {
    PresumedLoc Where = SM.getPresumedLoc(Reads.Found);
    if (Where.isValid() && llvm::StringRef(Where.getFilename()) != RealPath)
      return "`" + Reads.FoundName + "()` on line " + std::to_string(line(Reads.Found)) + " gives \"" +
             Where.getFilename() + "\", the file as this unit reaches it, and the rewritten copy names it by its real "
             "path (" + RealPath.str() + ")";
  }
  return "";
}

std::string AstQuery::lineDependenceOn(const std::vector<SourceRange> &Edited, const Stmt *Body) const {
  const SourceManager &SM = sourceManager();
  auto OnEdited = [&](SourceLocation At) {
    At = SM.getExpansionLoc(At);
    for (const SourceRange &Range : Edited) {
      SourceLocation Begin = SM.getExpansionLoc(Range.getBegin()), End = SM.getExpansionLoc(Range.getEnd());
      if (SM.getFileID(At) == SM.getFileID(Begin) && line(Begin) <= line(At) && line(At) <= line(End))
        return true;
    }
    return false;
  };
  for (const auto &[At, Name] : positionMacroExpansions())
    if (Name == "__LINE__" && OnEdited(At))
      return "`__LINE__` on line " + std::to_string(line(At));
  std::function<std::string(const Stmt *)> Visit = [&](const Stmt *S) -> std::string {
    if (!S)
      return "";
    if (const auto *Builtin = dyn_cast<SourceLocExpr>(S); Builtin && OnEdited(Builtin->getBeginLoc()))
      return "`" + Builtin->getBuiltinStr().str() + "()` on line " + std::to_string(line(Builtin->getBeginLoc()));
    for (const Stmt *Child : S->children())
      if (std::string Found = Visit(Child); !Found.empty())
        return Found;
    return "";
  };
  return Visit(Body);
}

std::string AstQuery::positionDependence(const Stmt *Node) const {
  if (!Node)
    return "";
  const SourceManager &SM = sourceManager();
  CharSourceRange Range = Lexer::makeFileCharRange(
      CharSourceRange::getTokenRange(SM.getExpansionRange(Node->getSourceRange()).getAsRange()), SM,
      Context.getLangOpts());
  if (Range.isValid())
    for (const auto &[At, Name] : positionMacroExpansions())
      if ((Name == "__LINE__" || Name == "__COUNTER__") && !SM.isBeforeInTranslationUnit(At, Range.getBegin()) &&
          SM.isBeforeInTranslationUnit(At, Range.getEnd()))
        return "`" + Name + "`";
  std::function<std::string(const Stmt *)> Visit = [&](const Stmt *S) -> std::string {
    if (!S)
      return "";
    if (const auto *Builtin = dyn_cast<SourceLocExpr>(S))
      return "`" + Builtin->getBuiltinStr().str() + "()`";
    if (const auto *Name = dyn_cast<PredefinedExpr>(S))
      return "`" + PredefinedExpr::getIdentKindName(Name->getIdentKind()).str() + "`";
    // A default argument or member initialiser is evaluated where the call or the construction is.
    if (const auto *Default = dyn_cast<CXXDefaultArgExpr>(S))
      return Visit(Default->getExpr());
    if (const auto *Default = dyn_cast<CXXDefaultInitExpr>(S))
      return Visit(Default->getExpr());
    for (const Stmt *Child : S->children())
      if (std::string Found = Visit(Child); !Found.empty())
        return Found;
    return "";
  };
  return Visit(Node);
}

bool AstQuery::inProgramFile(SourceLocation Location) const {
  const SourceManager &SM = sourceManager();
  Location = SM.getExpansionLoc(Location);
  if (Location.isInvalid())
    return false;
  FileID File = SM.getFileID(Location);
  if (File == SM.getMainFileID())
    return true;
  OptionalFileEntryRef Entry = SM.getFileEntryRefForID(File);
  return Entry && !ProgramRoot.empty() && isUnder(SM.getFileManager().getCanonicalName(*Entry), ProgramRoot);
}

bool AstQuery::inLibraryHeader(SourceLocation Location) const {
  return sourceManager().isInSystemHeader(sourceManager().getExpansionLoc(Location)) && !inProgramFile(Location);
}

bool AstQuery::declaredByProgram(const Decl *D) const {
  for (const Decl *Declaration : D->redecls())
    if (inProgramFile(Declaration->getLocation()))
      return true;
  return false;
}

std::string AstQuery::declaredAt(const Decl *D) const {
  SourceLocation At = sourceManager().getExpansionLoc(D->getLocation());
  if (At.isInvalid())
    return "";
  return llvm::sys::path::filename(sourceManager().getFilename(At)).str() + ":" + std::to_string(line(At));
}

CharSourceRange AstQuery::fileRange(SourceRange Range) const {
  if (Range.isInvalid())
    return CharSourceRange();
  return Lexer::makeFileCharRange(CharSourceRange::getTokenRange(Range), sourceManager(), Context.getLangOpts());
}

std::string AstQuery::text(SourceRange Range) const {
  CharSourceRange File = fileRange(Range);
  if (File.isInvalid())
    return "";
  return Lexer::getSourceText(File, sourceManager(), Context.getLangOpts()).str();
}

unsigned AstQuery::line(SourceLocation Location) const {
  return sourceManager().getExpansionLineNumber(Location);
}

std::string AstQuery::indentation(SourceLocation Location) const {
  const SourceManager &SM = sourceManager();
  SourceLocation Expansion = SM.getExpansionLoc(Location);
  auto [File, Offset] = SM.getDecomposedLoc(Expansion);
  llvm::StringRef Buffer = SM.getBufferData(File);
  size_t LineStart = Buffer.rfind('\n', Offset == 0 ? 0 : Offset - 1);
  LineStart = LineStart == llvm::StringRef::npos ? 0 : LineStart + 1;
  size_t End = LineStart;
  while (End < Buffer.size() && (Buffer[End] == ' ' || Buffer[End] == '\t'))
    ++End;
  return Buffer.slice(LineStart, End).str();
}

std::string AstQuery::argumentText(const Expr *E) const {
  const Expr *Spelled = spelled(E);
  bool Comma = false;
  if (const auto *Binary = dyn_cast<BinaryOperator>(Spelled))
    Comma = Binary->getOpcode() == BO_Comma;
  else if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Spelled))
    Comma = Operator->getOperator() == OO_Comma;
  std::string Text = text(Spelled);
  return Comma ? "(" + Text + ")" : Text;
}

std::string AstQuery::objectText(const Expr *E) const {
  const Expr *Spelled = spelled(E);
  bool Postfix = isa<DeclRefExpr, MemberExpr, CallExpr, ArraySubscriptExpr, CXXThisExpr>(Spelled);
  if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Spelled))
    Postfix = Operator->getOperator() == OO_Call || Operator->getOperator() == OO_Subscript ||
              Operator->getOperator() == OO_Arrow;
  std::string Text = text(Spelled);
  return Postfix ? Text : "(" + Text + ")";
}

const Expr *AstQuery::spelled(const Expr *E) {
  while (E) {
    const Expr *Next = E->IgnoreUnlessSpelledInSource()->IgnoreParens();
    if (const auto *Cleanups = dyn_cast<ExprWithCleanups>(Next))
      Next = Cleanups->getSubExpr();
    if (Next == E)
      return E;
    E = Next;
  }
  return E;
}

std::optional<CallView> AstQuery::asCall(const Expr *E) {
  E = spelled(E);
  CallView View;
  View.Call = E;
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(E)) {
    View.Callee = Member->getMethodDecl();
    View.Object = Member->getImplicitObjectArgument();
    for (const Expr *Arg : Member->arguments())
      View.Args.push_back(Arg);
  } else if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(E)) {
    View.Callee = Operator->getDirectCallee();
    unsigned First = 0;
    if (View.Callee && isa<CXXMethodDecl>(View.Callee)) {
      View.Object = Operator->getArg(0);
      First = 1;
    }
    for (unsigned I = First; I < Operator->getNumArgs(); ++I)
      View.Args.push_back(Operator->getArg(I));
  } else if (const auto *Call = dyn_cast<CallExpr>(E)) {
    View.Callee = Call->getDirectCallee();
    for (const Expr *Arg : Call->arguments())
      View.Args.push_back(Arg);
  } else {
    return std::nullopt;
  }
  if (!View.Callee)
    return std::nullopt;
  View.Name = View.Callee->getNameAsString();
  return View;
}

const VarDecl *AstQuery::namedVariable(const Expr *E) {
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(spelled(E)))
    return dyn_cast<VarDecl>(Ref->getDecl());
  return nullptr;
}

namespace {

class CallNameFinder : public RecursiveASTVisitor<CallNameFinder> {
public:
  explicit CallNameFinder(llvm::ArrayRef<std::string> Names) : Names(Names) {}
  bool VisitCallExpr(CallExpr *Call) {
    if (const FunctionDecl *Callee = Call->getDirectCallee())
      if (std::find(Names.begin(), Names.end(), Callee->getNameAsString()) != Names.end())
        Found = true;
    return !Found;
  }
  llvm::ArrayRef<std::string> Names;
  bool Found = false;
};

class MentionFinder : public RecursiveASTVisitor<MentionFinder> {
public:
  explicit MentionFinder(const VarDecl *Variable) : Variable(Variable) {}
  bool VisitDeclRefExpr(DeclRefExpr *Ref) {
    if (Ref->getDecl() == Variable)
      Found = true;
    return !Found;
  }
  const VarDecl *Variable;
  bool Found = false;
};

}  // namespace

bool AstQuery::containsCallNamed(const Stmt *S, llvm::ArrayRef<std::string> Names) {
  if (!S)
    return false;
  CallNameFinder Finder(Names);
  Finder.TraverseStmt(const_cast<Stmt *>(S));
  return Finder.Found;
}

bool AstQuery::mentions(const Stmt *S, const VarDecl *Variable) {
  if (!S || !Variable)
    return false;
  MentionFinder Finder(Variable);
  Finder.TraverseStmt(const_cast<Stmt *>(S));
  return Finder.Found;
}

std::optional<int64_t> AstQuery::integerValue(const Expr *E) const {
  // Only what the language calls an integral constant expression: Clang's folder also evaluates what is none
  // (`(int)kD` with `const double kD`), which another compiler may compute at run time, and otherwise.
  if (!E || E->isValueDependent())
    return std::nullopt;
  std::optional<llvm::APSInt> Value = E->getIntegerConstantExpr(Context);
  if (!Value || Value->getSignificantBits() > 64)
    return std::nullopt;
  IntegersRead.emplace_back(E, *Value);
  return Value->getExtValue();
}

std::optional<double> AstQuery::floatValue(const Expr *E) const {
  if (!E || E->isValueDependent())
    return std::nullopt;
  llvm::APFloat Value(0.0);
  if (E->EvaluateAsFloat(Value, Context))
    return Value.convertToDouble();
  if (auto Integer = integerValue(E))
    return static_cast<double>(*Integer);
  return std::nullopt;
}

bool AstQuery::before(SourceLocation A, SourceLocation B) const {
  const SourceManager &SM = sourceManager();
  return SM.isBeforeInTranslationUnit(SM.getExpansionLoc(A), SM.getExpansionLoc(B));
}

bool AstQuery::within(SourceLocation Location, const Stmt *Outer) const {
  const SourceManager &SM = sourceManager();
  SourceLocation Point = SM.getExpansionLoc(Location);
  SourceLocation Begin = SM.getExpansionLoc(Outer->getBeginLoc());
  SourceLocation End = SM.getExpansionRange(Outer->getEndLoc()).getEnd();
  return Point == Begin || Point == End ||
         (SM.isBeforeInTranslationUnit(Begin, Point) && SM.isBeforeInTranslationUnit(Point, End));
}

bool AstQuery::within(const Stmt *Inner, const Stmt *Outer) const {
  return Inner && Outer && within(Inner->getBeginLoc(), Outer) && within(Inner->getEndLoc(), Outer);
}

bool AstQuery::inMacro(const Stmt *Node) const {
  return Node && (Node->getBeginLoc().isMacroID() || Node->getEndLoc().isMacroID());
}

const Stmt *AstQuery::parentStmt(const Stmt *Node) const {
  // A variable's initialiser has the VarDecl as parent; the statement is the DeclStmt above it.
  DynTypedNode Current = DynTypedNode::create(*Node);
  for (int Depth = 0; Depth < 4; ++Depth) {
    auto Parents = Context.getParents(Current);
    if (Parents.empty())
      return nullptr;
    if (const Stmt *Parent = Parents[0].get<Stmt>())
      return Parent;
    if (!Parents[0].get<VarDecl>())
      return nullptr;
    Current = Parents[0];
  }
  return nullptr;
}

DynTypedNode AstQuery::spelledParent(const Stmt *Node) const {
  DynTypedNode Current = DynTypedNode::create(*Node);
  while (true) {
    auto Parents = Context.getParents(Current);
    if (Parents.empty())
      return DynTypedNode();
    const Stmt *Parent = Parents[0].get<Stmt>();
    bool Implicit = Parent && (isa<ImplicitCastExpr>(Parent) || isa<MaterializeTemporaryExpr>(Parent) ||
                               isa<CXXBindTemporaryExpr>(Parent) || isa<ExprWithCleanups>(Parent) ||
                               isa<CXXFunctionalCastExpr>(Parent) ||
                               (isa<CXXConstructExpr>(Parent) &&
                                !isa<CXXTemporaryObjectExpr>(Parent) &&
                                cast<CXXConstructExpr>(Parent)->getNumArgs() == 1));
    if (!Implicit)
      return Parents[0];
    Current = Parents[0];
  }
}

const Stmt *AstQuery::enclosingStatement(const Stmt *Node) const {
  const Stmt *Current = Node;
  while (Current) {
    const Stmt *Parent = parentStmt(Current);
    if (!Parent)
      return nullptr;  // reached a declaration: Node is not inside a statement list
    if (isa<CompoundStmt>(Parent))
      return Current;
    Current = Parent;
  }
  return nullptr;
}

const NamedDecl *AstQuery::localNamedAt(llvm::StringRef Name, const Stmt *At) const {
  auto Named = [&](const Decl *D) -> const NamedDecl * {
    // `using namespace N;` in a block may bring any name in: it stands for each.
    if (const auto *Directive = dyn_cast_or_null<UsingDirectiveDecl>(D))
      return Directive;
    // `auto [a, b] = …;` declares its bindings, not the unnamed variable that holds them.
    if (const auto *Bindings = dyn_cast_or_null<DecompositionDecl>(D)) {
      for (const BindingDecl *Binding : Bindings->bindings())
        if (Binding->getDeclName().isIdentifier() && Binding->getName() == Name)
          return Binding;
      return nullptr;
    }
    const auto *Declared = dyn_cast_or_null<NamedDecl>(D);
    return Declared && Declared->getDeclName().isIdentifier() && Declared->getName() == Name ? Declared : nullptr;
  };
  auto InStatement = [&](const Stmt *S) -> const NamedDecl * {
    const NamedDecl *Last = nullptr;
    if (const auto *Declarations = dyn_cast_or_null<DeclStmt>(S))
      for (const Decl *D : Declarations->decls())
        if (const NamedDecl *Found = Named(D))
          Last = Found;
    return Last;
  };
  DynTypedNode Child = DynTypedNode::create(*At);
  const Stmt *ChildStatement = At;
  // What an `if`, `switch`, `while` or `for` declares for its body: its condition's variable, its init statement's.
  auto InHeader = [&](const Stmt *Init, const VarDecl *Condition) -> const NamedDecl * {
    if (const NamedDecl *Found = Named(Condition))
      return Found;
    return Init != ChildStatement ? InStatement(Init) : nullptr;
  };
  while (true) {
    auto Parents = Context.getParents(Child);
    if (Parents.empty())
      return nullptr;
    const DynTypedNode &Parent = Parents[0];
    const NamedDecl *Found = nullptr;
    if (const auto *Block = Parent.get<CompoundStmt>()) {
      for (const Stmt *Statement : Block->body()) {
        if (Statement == ChildStatement)
          break;
        if (const NamedDecl *Declared = InStatement(Statement))
          Found = Declared;  // the last of two is a redeclaration (`extern int k;`) of the same entity
      }
    } else if (const auto *Function = Parent.get<FunctionDecl>()) {
      for (const ParmVarDecl *Parameter : Function->parameters())
        if (const NamedDecl *Declared = Named(Parameter))
          return Declared;
      return nullptr;  // outside the function's body: the same at every position in it
    } else if (const auto *Lambda = Parent.get<LambdaExpr>()) {
      for (const ParmVarDecl *Parameter : Lambda->getCallOperator()->parameters())
        if (!Found)
          Found = Named(Parameter);
      for (const LambdaCapture &Capture : Lambda->captures())
        if (!Found && Capture.capturesVariable() && Capture.getCapturedVar()->isInitCapture())
          Found = Named(Capture.getCapturedVar());
    } else if (const auto *If = Parent.get<IfStmt>()) {
      Found = InHeader(If->getInit(), If->getConditionVariable());
    } else if (const auto *Switch = Parent.get<SwitchStmt>()) {
      Found = InHeader(Switch->getInit(), Switch->getConditionVariable());
    } else if (const auto *While = Parent.get<WhileStmt>()) {
      Found = InHeader(nullptr, While->getConditionVariable());
    } else if (const auto *For = Parent.get<ForStmt>()) {
      Found = InHeader(For->getInit(), For->getConditionVariable());
    } else if (const auto *Range = Parent.get<CXXForRangeStmt>()) {
      if (ChildStatement == Range->getBody())
        Found = Named(Range->getLoopVariable());
      if (!Found && Range->getInit() != ChildStatement)
        Found = InStatement(Range->getInit());
    } else if (const auto *Catch = Parent.get<CXXCatchStmt>()) {
      Found = Named(Catch->getExceptionDecl());
    }
    if (Found)
      return Found;
    if (const Stmt *Statement = Parent.get<Stmt>())
      ChildStatement = Statement;
    Child = Parent;
  }
}

std::set<std::string> AstQuery::unqualifiedNames(const Expr *E) const {
  const SourceManager &SM = sourceManager();
  std::set<std::string> Names;
  CharSourceRange Range = fileRange(E->getSourceRange());
  if (Range.isValid()) {
    auto [File, Begin] = SM.getDecomposedLoc(Range.getBegin());
    bool AfterMemberOrScope = false;  // the previous token was `.`, `->` or `::`
    forEachRawToken(SM, Context.getLangOpts(), File, Begin, SM.getFileOffset(Range.getEnd()), [&](const Token &Word) {
      if (Word.is(tok::raw_identifier) && !AfterMemberOrScope)
        Names.insert(Word.getRawIdentifier().str());
      AfterMemberOrScope = Word.isOneOf(tok::period, tok::arrow, tok::coloncolon);
      return true;
    });
  }
  struct Expanded : RecursiveASTVisitor<Expanded> {
    std::set<std::string> &Names;
    explicit Expanded(std::set<std::string> &Names) : Names(Names) {}
    bool VisitDeclRefExpr(DeclRefExpr *Ref) {
      if (!Ref->hasQualifier() && Ref->getDecl()->getDeclName().isIdentifier())
        Names.insert(Ref->getDecl()->getName().str());
      return true;
    }
    bool VisitMemberExpr(MemberExpr *Member) {  // `lm_head` for this->lm_head
      if (Member->isImplicitAccess() && Member->getMemberDecl()->getDeclName().isIdentifier())
        Names.insert(Member->getMemberDecl()->getName().str());
      return true;
    }
  } Finder(Names);
  Finder.TraverseStmt(const_cast<Expr *>(E));
  return Names;
}

std::optional<AstQuery::Renamed> AstQuery::renamedAt(const Expr *E, const Stmt *At) const {
  for (const std::string &Name : unqualifiedNames(E)) {
    const NamedDecl *Read = localNamedAt(Name, E), *There = localNamedAt(Name, At);
    if (Read != There)
      return Renamed{Name, Read, There};
  }
  return std::nullopt;
}

const FunctionDecl *AstQuery::enclosingFunction(const Stmt *Node) const {
  DynTypedNode Current = DynTypedNode::create(*Node);
  while (true) {
    auto Parents = Context.getParents(Current);
    if (Parents.empty())
      return nullptr;
    if (const auto *Function = Parents[0].get<FunctionDecl>())
      return Function;
    if (const auto *Lambda = Parents[0].get<LambdaExpr>())
      return Lambda->getCallOperator();
    Current = Parents[0];
  }
}

bool AstQuery::nameInUse(llvm::StringRef Name, const FunctionDecl *Function) const {
  // A use in the body names a declaration lookup from here may not find (a member of another class read
  // through an object: `other.lmfuse_hidden`).
  struct UseFinder : RecursiveASTVisitor<UseFinder> {
    llvm::StringRef Name;
    bool Found = false;
    bool shouldVisitLambdaBody() const { return true; }
    bool VisitDeclRefExpr(DeclRefExpr *Ref) { return !(Found = Found || named(Ref->getDecl())); }
    bool VisitMemberExpr(MemberExpr *Member) { return !(Found = Found || named(Member->getMemberDecl())); }
    bool named(const NamedDecl *D) const { return D && D->getDeclName().isIdentifier() && D->getName() == Name; }
  } Uses;
  Uses.Name = Name;
  Uses.TraverseStmt(Function->getBody());
  return Uses.Found ||
         declarationNamed(Name, Function, [](const NamedDecl *) { return true; }, /*WithGlobalScope=*/true);
}

const NamedDecl *AstQuery::nameShadowsGlobalNamespace(llvm::StringRef Name, const FunctionDecl *Function) const {
  DeclarationName Identifier(&Context.Idents.get(Name));
  // The global namespace itself, or an alias of it, is what the written name means.
  auto IsTheGlobalNamespace = [&](const NamedDecl *Found) {
    Found = Found->getUnderlyingDecl();
    const NamespaceDecl *Namespace = dyn_cast<NamespaceDecl>(Found);
    if (const auto *Alias = dyn_cast<NamespaceAliasDecl>(Found))
      Namespace = Alias->getNamespace();
    return Namespace && Namespace->getDeclName() == Identifier &&
           Namespace->getDeclContext()->getRedeclContext()->isTranslationUnit();
  };
  return declarationNamed(Name, Function, [&](const NamedDecl *D) { return !IsTheGlobalNamespace(D); },
                          /*WithGlobalScope=*/false);
}

const NamedDecl *AstQuery::declarationNamed(llvm::StringRef Name, const FunctionDecl *Function,
                                            llvm::function_ref<bool(const NamedDecl *)> Counts,
                                            bool WithGlobalScope) const {
  DeclarationName Identifier(&Context.Idents.get(Name));
  auto Other = [&](const DeclContext *Scope) -> const NamedDecl * {
    for (const NamedDecl *Found : Scope->lookup(Identifier))
      if (Counts(Found))
        return Found;
    return nullptr;
  };
  // What a namespace a using-directive nominates brings, and what those it nominates in turn bring.
  std::set<const NamespaceDecl *> Nominated;
  std::function<const NamedDecl *(const NamespaceDecl *)> Through = [&](const NamespaceDecl *Namespace) {
    if (!Namespace || !Nominated.insert(Namespace->getCanonicalDecl()).second)
      return static_cast<const NamedDecl *>(nullptr);
    if (const NamedDecl *Found = Other(Namespace))
      return Found;
    for (const UsingDirectiveDecl *Directive : Namespace->using_directives())
      if (const NamedDecl *Found = Through(Directive->getNominatedNamespace()))
        return Found;
    return static_cast<const NamedDecl *>(nullptr);
  };
  std::function<const NamedDecl *(const CXXRecordDecl *)> InClass = [&](const CXXRecordDecl *Record) {
    if (!Record || !(Record = Record->getDefinition()))
      return static_cast<const NamedDecl *>(nullptr);
    if (const NamedDecl *Found = Other(Record))
      return Found;
    for (const CXXBaseSpecifier &Base : Record->bases())
      if (const NamedDecl *Found = InClass(Base.getType()->getAsCXXRecordDecl()))
        return Found;
    return static_cast<const NamedDecl *>(nullptr);
  };
  auto InParameters = [&](const TemplateParameterList *Parameters) -> const NamedDecl * {
    if (Parameters)
      for (const NamedDecl *Parameter : *Parameters)
        if (Parameter->getDeclName() == Identifier && Counts(Parameter))
          return Parameter;
    return nullptr;
  };
  // A function's own declarations, wherever in its body (a local class, an alias, a parameter), and what its
  // block-scope using-directives bring.
  auto InFunction = [&](const FunctionDecl *Scope) -> const NamedDecl * {
    struct Finder : RecursiveASTVisitor<Finder> {
      std::function<bool(const NamedDecl *)> Counts;
      std::function<const NamedDecl *(const NamespaceDecl *)> Through;
      const NamedDecl *Found = nullptr;
      bool shouldVisitLambdaBody() const { return true; }
      bool VisitNamedDecl(NamedDecl *D) {
        if (Counts(D))
          Found = D;
        return !Found;
      }
      bool VisitUsingDirectiveDecl(UsingDirectiveDecl *Directive) {
        Found = Through(Directive->getNominatedNamespace());
        return !Found;
      }
    } Search;
    Search.Counts = [&](const NamedDecl *D) { return D->getDeclName() == Identifier && Counts(D); };
    Search.Through = Through;
    for (const ParmVarDecl *Parameter : Scope->parameters())
      if (Search.Counts(Parameter))
        return Parameter;
    for (unsigned I = 0; I < Scope->getNumTemplateParameterLists(); ++I)
      if (const NamedDecl *Found = InParameters(Scope->getTemplateParameterList(I)))
        return Found;
    Search.TraverseStmt(Scope->getBody());
    return Search.Found;
  };

  std::vector<const DeclContext *> Pending = {Function};
  std::set<const DeclContext *> Seen;
  while (!Pending.empty()) {
    const DeclContext *Scope = Pending.back();
    Pending.pop_back();
    if (!Scope || !Seen.insert(Scope).second)
      continue;
    if (Scope->isTranslationUnit()) {
      if (!WithGlobalScope)
        continue;
      if (const NamedDecl *Found = Other(Scope))
        return Found;
      for (const UsingDirectiveDecl *Directive : Scope->using_directives())
        if (const NamedDecl *Found = Through(Directive->getNominatedNamespace()))
          return Found;
      continue;
    }
    const NamedDecl *Found = nullptr;
    if (const auto *Inner = dyn_cast<FunctionDecl>(Scope))
      Found = InFunction(Inner);
    else if (const auto *Record = dyn_cast<CXXRecordDecl>(Scope))
      Found = InClass(Record);
    else if (const auto *Namespace = dyn_cast<NamespaceDecl>(Scope))
      Found = Through(Namespace);
    if (!Found)
      Found = InParameters(Decl::castFromDeclContext(Scope)->getDescribedTemplateParams());
    if (!Found)
      if (const auto *Partial = dyn_cast<ClassTemplatePartialSpecializationDecl>(Scope))
        Found = InParameters(Partial->getTemplateParameters());
    if (Found)
      return Found;
    Pending.push_back(Scope->getParent());
    Pending.push_back(Scope->getLexicalParent());
  }
  return nullptr;
}

const NamespaceDecl *AstQuery::programOpening(llvm::StringRef Name, llvm::StringRef LibraryFolder) const {
  const SourceManager &SM = sourceManager();
  DeclarationName Identifier(&Context.Idents.get(Name));
  for (const NamedDecl *Found : Context.getTranslationUnitDecl()->lookup(Identifier))
    if (const auto *Namespace = dyn_cast<NamespaceDecl>(Found))
      for (const NamespaceDecl *Opening : Namespace->redecls()) {
        SourceLocation At = SM.getExpansionLoc(Opening->getLocation());
        if (inProgramFile(At) &&
            llvm::sys::path::filename(llvm::sys::path::parent_path(SM.getFilename(At))) != LibraryFolder)
          return Opening;
      }
  return nullptr;
}

bool AstQuery::isMacroAt(llvm::StringRef Name, SourceLocation Location) const {
  IdentifierInfo *Identifier = PP.getIdentifierInfo(Name);
  return Identifier->hadMacroDefinition() &&
         PP.getMacroDefinitionAtLoc(Identifier, sourceManager().getExpansionLoc(Location)).getMacroInfo();
}

namespace {

class UseCollector : public RecursiveASTVisitor<UseCollector> {
public:
  bool shouldVisitLambdaBody() const { return true; }

  bool VisitDeclStmt(DeclStmt *Declaration) {
    for (Decl *D : Declaration->decls())
      if (auto *Variable = dyn_cast<VarDecl>(D); Variable && Variable->hasInit())
        Writes[Variable].push_back({VariableWrite::WriteKind::Declaration, Declaration,
                                    Variable->getInit(), ""});
    return true;
  }
  bool VisitBinaryOperator(BinaryOperator *Operator) {
    if (Operator->isAssignmentOp())
      recordAssignment(Operator, Operator->getLHS(), Operator->getRHS(),
                       Operator->getOpcode() != BO_Assign);
    return true;
  }
  bool VisitCXXOperatorCallExpr(CXXOperatorCallExpr *Operator) {
    if (Operator->isAssignmentOp() && Operator->getNumArgs() == 2)
      recordAssignment(Operator, Operator->getArg(0), Operator->getArg(1),
                       Operator->getOperator() != OO_Equal);
    return true;
  }
  bool VisitCXXMemberCallExpr(CXXMemberCallExpr *Call) {
    const CXXMethodDecl *Method = Call->getMethodDecl();
    if (!Method || !Method->getDeclName().isIdentifier())
      return true;
    llvm::StringRef Name = Method->getName();
    // LibTorch's in-place methods are const (a Tensor is a handle); the name says what they do.
    if (Name.ends_with("_"))
      if (const VarDecl *Variable = AstQuery::namedVariable(Call->getImplicitObjectArgument()))
        Writes[Variable].push_back({VariableWrite::WriteKind::InPlaceCall, Call, nullptr, Name.str()});
    return true;
  }
  bool VisitDeclRefExpr(DeclRefExpr *Ref) {
    if (auto *Variable = dyn_cast<VarDecl>(Ref->getDecl()))
      AllRefs[Variable].push_back(Ref);
    return true;
  }

  void recordAssignment(const Expr *Assignment, const Expr *Target, const Expr *Value, bool Compound) {
    const auto *Ref = dyn_cast<DeclRefExpr>(AstQuery::spelled(Target));
    if (!Ref)
      return;
    auto *Variable = dyn_cast<VarDecl>(Ref->getDecl());
    if (!Variable)
      return;
    Writes[Variable].push_back({Compound ? VariableWrite::WriteKind::CompoundAssignment
                                         : VariableWrite::WriteKind::Assignment,
                                Assignment, Value, ""});
    if (!Compound)
      AssignmentTargets.insert(Ref);
  }

  llvm::DenseMap<const VarDecl *, std::vector<VariableWrite>> Writes;
  llvm::DenseMap<const VarDecl *, std::vector<const DeclRefExpr *>> AllRefs;
  llvm::DenseSet<const DeclRefExpr *> AssignmentTargets;
};

}  // namespace

VariableUses::VariableUses(const Stmt *Body, const AstQuery &Query) {
  if (!Body)
    return;
  UseCollector Collector;
  Collector.TraverseStmt(const_cast<Stmt *>(Body));
  auto ByPosition = [&](SourceLocation A, SourceLocation B) { return Query.before(A, B); };
  for (auto &[Variable, List] : Collector.Writes) {
    std::stable_sort(List.begin(), List.end(), [&](const VariableWrite &A, const VariableWrite &B) {
      return ByPosition(A.Node->getBeginLoc(), B.Node->getBeginLoc());
    });
    Writes[Variable] = List;
  }
  for (auto &[Variable, List] : Collector.AllRefs) {
    std::vector<const DeclRefExpr *> Kept;
    for (const DeclRefExpr *Ref : List)
      if (!Collector.AssignmentTargets.count(Ref))
        Kept.push_back(Ref);
    std::stable_sort(Kept.begin(), Kept.end(), [&](const DeclRefExpr *A, const DeclRefExpr *B) {
      return ByPosition(A->getBeginLoc(), B->getBeginLoc());
    });
    Reads[Variable] = Kept;
  }
}

llvm::ArrayRef<VariableWrite> VariableUses::writes(const VarDecl *Variable) const {
  auto It = Writes.find(Variable);
  return It == Writes.end() ? llvm::ArrayRef<VariableWrite>() : llvm::ArrayRef<VariableWrite>(It->second);
}

llvm::ArrayRef<const DeclRefExpr *> VariableUses::reads(const VarDecl *Variable) const {
  auto It = Reads.find(Variable);
  return It == Reads.end() ? llvm::ArrayRef<const DeclRefExpr *>()
                           : llvm::ArrayRef<const DeclRefExpr *>(It->second);
}

}  // namespace lmfuse::rewriter
