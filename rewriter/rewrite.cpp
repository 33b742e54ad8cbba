// The rewriter's pipeline over one translation unit: find candidate loss calls (by resolved
// declaration, spelled source only), sort each into already_patched / suppressed / unmatched /
// patched, and plan the edits of the patched ones.
#include "rewrite.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <set>

#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/DiagnosticOptions.h"
#include "clang/Frontend/ASTUnit.h"
#include "clang/Frontend/TextDiagnosticPrinter.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/Support/raw_ostream.h"

#include "ast_query.h"
#include "edit_plan.h"
#include "edit_set.h"
#include "pattern_match.h"
#include "refusals.h"
#include "respelling.h"
#include "site_capture.h"
#include "suppression.h"

using namespace clang;
using namespace clang::ast_matchers;

namespace lmfuse::rewriter {
namespace {

struct Candidate {
  const CallExpr *Loss;
  const LossPattern *Rule;
};

/// Collects the calls one matcher binds as "call": the loss calls of one rule, or (Rule null) the
/// calls of the fused loss itself.
class CandidateCollector : public MatchFinder::MatchCallback {
public:
  CandidateCollector(const LossPattern *Rule, std::vector<Candidate> &Out) : Rule(Rule), Out(Out) {}
  void run(const MatchFinder::MatchResult &Result) override {
    if (const auto *Call = Result.Nodes.getNodeAs<CallExpr>("call"))
      Out.push_back({Call, Rule});
  }

private:
  const LossPattern *Rule;
  std::vector<Candidate> &Out;
};

class CallFinder : public RecursiveASTVisitor<CallFinder> {
public:
  explicit CallFinder(const std::string &Name) : Name(Name) {}
  bool shouldVisitLambdaBody() const { return true; }
  bool VisitCallExpr(CallExpr *Call) {
    if (const FunctionDecl *Callee = Call->getDirectCallee(); Callee && Callee->getQualifiedNameAsString() == Name)
      FoundCall = Call;
    return !FoundCall;
  }
  const std::string &Name;
  const CallExpr *FoundCall = nullptr;
};

/// The fused call a loss call is the fallback of (`lmfuse::enabled() ? lmfuse::linear_cross_entropy(...) :
/// <loss>`, as the rewrite writes it: the replacement's `enabled` switch, nothing else), or null. Only such a
/// loss is already patched: a fused call elsewhere in the function (a cross-check, another head), or behind a
/// condition of the program's (`cfg.fused ? ... : <loss>`, which may keep running the loss), leaves this loss
/// a site of its own.
const CallExpr *fusedCallBeside(const Expr *Loss, const PatternSet &Patterns, const AstQuery &Query) {
  const auto *Conditional = Query.spelledParent(Loss).get<ConditionalOperator>();
  if (!Conditional || AstQuery::spelled(Conditional->getFalseExpr()) != Loss)
    return nullptr;
  const auto *Switch = dyn_cast<CallExpr>(AstQuery::spelled(Conditional->getCond()));
  const FunctionDecl *Callee = Switch ? Switch->getDirectCallee() : nullptr;
  if (!Callee || Switch->getNumArgs() != 0 || qualifiedName(Callee) + "()" != Patterns.Replacement.Enabled)
    return nullptr;
  CallFinder Calls(Patterns.Replacement.Call);
  Calls.TraverseStmt(const_cast<Expr *>(Conditional->getTrueExpr()));
  return Calls.FoundCall;
}

/// Collects the calls in templates whose callee is resolved only at instantiation (`cross_entropy(logits, y)`
/// with `y` of a template parameter's type, found through a using-directive) where one of the functions it
/// may resolve to is a rule's loss: sites the audit must list though no rule can match them yet.
class DependentLossCollector : public MatchFinder::MatchCallback {
public:
  DependentLossCollector(const PatternSet &Patterns, std::vector<Candidate> &Out) : Patterns(Patterns), Out(Out) {}
  void run(const MatchFinder::MatchResult &Result) override {
    const auto *Call = Result.Nodes.getNodeAs<CallExpr>("call");
    const auto *Lookup = Result.Nodes.getNodeAs<UnresolvedLookupExpr>("lookup");
    if (!Call || !Lookup)
      return;
    for (const NamedDecl *Declared : Lookup->decls()) {
      const FunctionDecl *Function = Declared->getUnderlyingDecl()->getAsFunction();
      for (const LossPattern &Rule : Patterns.Losses)
        if (Function && !Rule.isModule() && Function->getQualifiedNameAsString() == Rule.Callee) {
          Out.push_back({Call, &Rule});
          return;
        }
    }
  }

private:
  const PatternSet &Patterns;
  std::vector<Candidate> &Out;
};

/// The first expression or local of Function's body whose type only an instantiation decides, when Function
/// is (in) a template: the site's head, labels or the code between may then take whatever types,
/// conversions and overloads an instantiation gives them, which the analysis of the template cannot see,
/// while the rewrite of its text applies to every instantiation. `this` in a class template does not count:
/// the members of the current instantiation are known. Null otherwise.
const Stmt *typeDependentPart(const FunctionDecl *Function) {
  if (!Function->isDependentContext())
    return nullptr;
  struct Finder : RecursiveASTVisitor<Finder> {
    const Stmt *Found = nullptr;
    bool shouldVisitLambdaBody() const { return true; }
    bool VisitExpr(Expr *E) {
      if (E->isTypeDependent() && !isa<CXXThisExpr>(E))
        Found = E;
      return !Found;
    }
    // `Guard guard(true);`: a local of such a type, whatever its initialiser.
    bool VisitDeclStmt(DeclStmt *Declaration) {
      for (const Decl *Declared : Declaration->decls())
        if (const auto *Value = dyn_cast<ValueDecl>(Declared); Value && Value->getType()->isDependentType())
          Found = Declaration;
      return !Found;
    }
  } Dependent;
  Dependent.TraverseStmt(Function->getBody());
  return Dependent.Found;
}

/// A record of a site of Function whose location is Anchor's (its expansion, for macros).
SiteRecord recordAt(const Expr *Anchor, const FunctionDecl *Function, const std::string &Loss,
                    const SourceManager &SM) {
  SiteRecord Record;
  SourceLocation Location = SM.getExpansionLoc(Anchor->getBeginLoc());
  Record.File = SM.getFilename(Location).str();
  Record.Line = SM.getExpansionLineNumber(Location);
  Record.Column = SM.getExpansionColumnNumber(Location);
  Record.Function = Function->getQualifiedNameAsString();
  Record.Loss = Loss;
  return Record;
}

/// "the snippet" (line N): the offending code named for a person reading the audit.
std::string describe(const Stmt *Node, const std::string &Why, const AstQuery &Query) {
  if (!Node)
    return Why + ".";
  std::string Snippet = Query.text(Node);
  if (Snippet.empty()) {
    const SourceManager &SM = Query.sourceManager();
    Snippet = Lexer::getSourceText(SM.getExpansionRange(Node->getSourceRange()), SM,
                                   Query.context().getLangOpts())
                  .str();
  }
  llvm::StringRef First = llvm::StringRef(Snippet).split('\n').first.trim();
  std::string Shown = First.size() > 72 ? First.take_front(69).str() + "..." : First.str();
  if (First.size() < llvm::StringRef(Snippet).trim().size() && Shown.size() == First.size())
    Shown += " ...";
  return "line " + std::to_string(Query.line(Node->getBeginLoc())) + ": " + Why + " (`" + Shown + "`).";
}

/// A file included more than once in the unit (no include guard: an X-macro template) has one text, so
/// every inclusion must plan the same edits to it, as every unit that reads a file must: an inclusion whose
/// site is refused, or that has no site, would otherwise compile the edits planned for another. Where they
/// differ, the file's patched sites fail with edit-conflict and none of its edits are kept.
void dropDisagreeingInclusions(const SourceManager &SM, const std::map<FileID, std::vector<tooling::Replacement>> &Plans,
                               const std::vector<FileID> &SiteInclusion, std::set<FileID> &EditedFiles,
                               TranslationUnitResult &Result) {
  std::map<llvm::sys::fs::UniqueID, unsigned> Inclusions;  // per file, how often the unit enters it
  for (unsigned I = 0; I < SM.local_sloc_entry_size(); ++I) {
    const SrcMgr::SLocEntry &Entry = SM.getLocalSLocEntry(I);
    if (Entry.isFile())
      if (OptionalFileEntryRef File = Entry.getFile().getContentCache().OrigEntry)
        ++Inclusions[File->getUniqueID()];
  }
  auto fileOf = [&](FileID Inclusion) { return SM.getFileEntryRefForID(Inclusion); };
  auto samePlan = [](std::vector<tooling::Replacement> A, std::vector<tooling::Replacement> B) {
    std::sort(A.begin(), A.end());
    std::sort(B.begin(), B.end());
    return A == B;
  };
  std::set<FileID> Dropped;
  for (FileID Edited : EditedFiles) {
    OptionalFileEntryRef File = fileOf(Edited);
    if (!File || Inclusions[File->getUniqueID()] < 2)
      continue;
    unsigned Planned = 0;
    bool Agree = true;
    for (const auto &[Inclusion, Plan] : Plans)
      if (OptionalFileEntryRef Other = fileOf(Inclusion); Other && Other->getUniqueID() == File->getUniqueID()) {
        ++Planned;
        Agree = Agree && samePlan(Plan, Plans.at(Edited));
      }
    if (Agree && Planned == Inclusions[File->getUniqueID()])
      continue;
    for (const auto &[Inclusion, Plan] : Plans)
      if (OptionalFileEntryRef Other = fileOf(Inclusion); Other && Other->getUniqueID() == File->getUniqueID())
        Dropped.insert(Inclusion);
  }
  if (Dropped.empty())
    return;
  std::set<std::string> DroppedPaths;
  for (FileID Inclusion : Dropped) {
    EditedFiles.erase(Inclusion);
    DroppedPaths.insert(fileOf(Inclusion)->getName().str());
  }
  llvm::erase_if(Result.Edits, [&](const tooling::Replacement &Edit) {
    return DroppedPaths.count(Edit.getFilePath().str()) > 0;
  });
  for (size_t I = 0; I < Result.Sites.size() && I < SiteInclusion.size(); ++I) {
    SiteRecord &Site = Result.Sites[I];
    if (!Dropped.count(SiteInclusion[I]) || Site.Status != SiteStatus::Patched)
      continue;
    Site.Status = SiteStatus::Failed;
    Site.Reason = ReasonKind::EditConflict;
    Site.Options.reset();
    Site.Detail = "line " + std::to_string(Site.Line) + ": " + fileOf(SiteInclusion[I])->getName().str() +
                  " is included " + std::to_string(Inclusions[fileOf(SiteInclusion[I])->getUniqueID()]) +
                  " times in this unit, and its inclusions do not all patch the same sites (macros give them other "
                  "heads or losses); nothing was written to it.";
  }
}

/// Fails the sites still patched: the file they are in is not rewritten.
void failRewrittenSites(std::vector<SiteRecord> &Sites, const std::string &Detail) {
  for (SiteRecord &Site : Sites)
    if (Site.Status == SiteStatus::Patched) {
      Site.Status = SiteStatus::Failed;
      Site.Reason = ReasonKind::ReparseFailed;
      Site.Detail = Detail;
    }
}

}  // namespace

TranslationUnitResult analyzeTranslationUnit(ASTContext &Context, Preprocessor &Preprocessor, const PatternSet &Patterns,
                                             const std::string &ProgramRoot) {
  TranslationUnitResult Result;
  const SourceManager &SM = Context.getSourceManager();
  AstQuery Query(Context, Preprocessor, ProgramRoot);

  // One traversal finds the loss calls of every rule and the calls of the fused loss.
  std::vector<Candidate> Candidates, FusedCalls;
  std::vector<std::unique_ptr<CandidateCollector>> Collectors;
  MatchFinder Finder;
  auto Match = [&](const std::string &Callee, const LossPattern *Rule, std::vector<Candidate> &Into) {
    Collectors.push_back(std::make_unique<CandidateCollector>(Rule, Into));
    Finder.addMatcher(
        traverse(TK_IgnoreUnlessSpelledInSource, callExpr(callee(functionDecl(hasName("::" + Callee)))).bind("call")),
        Collectors.back().get());
  };
  for (const LossPattern &Rule : Patterns.Losses) {
    if (!Rule.isModule()) {
      Match(Rule.Callee, &Rule, Candidates);
      continue;
    }
    // A loss module: m->Method(x, y) on the module, or m(x, y) through its holder's call operator.
    Collectors.push_back(std::make_unique<CandidateCollector>(&Rule, Candidates));
    auto Impl = cxxRecordDecl(hasName("::" + Rule.Impl));
    Finder.addMatcher(traverse(TK_IgnoreUnlessSpelledInSource,
                               cxxMemberCallExpr(callee(cxxMethodDecl(hasName(Rule.Method), ofClass(Impl)))).bind("call")),
                      Collectors.back().get());
    Finder.addMatcher(
        traverse(TK_IgnoreUnlessSpelledInSource,
                 cxxOperatorCallExpr(hasOverloadedOperatorName("()"),
                                     callee(cxxMethodDecl(ofClass(classTemplateSpecializationDecl(
                                         hasName("::" + Rule.Holder),
                                         hasTemplateArgument(0, refersToType(hasDeclaration(Impl))))))))
                     .bind("call")),
        Collectors.back().get());
  }
  Match(Patterns.Replacement.Call, nullptr, FusedCalls);
  std::vector<Candidate> DependentLosses;
  DependentLossCollector DependentCollector(Patterns, DependentLosses);
  Finder.addMatcher(traverse(TK_IgnoreUnlessSpelledInSource,
                             callExpr(callee(unresolvedLookupExpr().bind("lookup"))).bind("call")),
                    &DependentCollector);
  Finder.matchAST(Context);
  Candidates.insert(Candidates.end(), DependentLosses.begin(), DependentLosses.end());
  std::set<const FunctionDecl *> Recorded;  // functions with a site

  std::set<const CallExpr *> Seen;
  std::map<const FunctionDecl *, std::unique_ptr<VariableUses>> UsesByFunction;
  std::map<const FunctionDecl *, int> HoistsByFunction;
  std::set<FileID> EditedFiles;
  // Each inclusion of a file (a FileID) and the edits its sites plan, for files included more than once.
  std::map<FileID, std::vector<tooling::Replacement>> PlansByInclusion;
  std::vector<FileID> SiteInclusion;  // per entry of Result.Sites
  SuppressionIndex Suppressions(SM);
  // A refused site's record: unmatched, with its reason and where the offending code is.
  auto refuse = [&](SiteRecord &Record, const Refusal &Refused) {
    Record.Status = SiteStatus::Unmatched;
    Record.Reason = Refused.Reason;
    Record.Detail = describe(Refused.Node, Refused.Why, Query);
    if (Refused.Node) {
      SourceLocation Offending = SM.getExpansionLoc(Refused.Node->getBeginLoc());
      Record.DetailLine = SM.getExpansionLineNumber(Offending);
      Record.DetailColumn = SM.getExpansionColumnNumber(Offending);
    }
  };

  for (const Candidate &Found : Candidates) {
    const CallExpr *Loss = Found.Loss;
    if (!Seen.insert(Loss).second || Query.inLibraryHeader(Loss->getBeginLoc()))
      continue;
    const FunctionDecl *Function = Query.enclosingFunction(Loss);
    if (!Function || !Function->getBody())
      continue;
    // The library's own code (LibTorch's headers reached through -I rather than -isystem) is never a
    // site: only user code is analysed, whatever the include flags.
    if (inLibraryNamespace(Function, Patterns))
      continue;
    // A site in a template whose types an instantiation decides is listed, never analysed.
    const Stmt *Dependent = isa<UnresolvedLookupExpr>(Loss->getCallee()->IgnoreImplicit()) ? Loss : typeDependentPart(Function);
    if (Dependent && !fusedCallBeside(Loss, Patterns, Query)) {
      SiteRecord Record = recordAt(Loss, Function, Found.Rule->Callee, SM);
      Recorded.insert(Function);
      Record.Status = SiteStatus::Unmatched;
      Record.Reason = ReasonKind::TemplateDependent;
      Record.Detail = describe(Dependent, Dependent == Loss
                                              ? "the loss call is resolved only when the template is instantiated"
                                              : "its type is a template parameter's, known only at instantiation, "
                                                "and the rewrite of the template's text would change every "
                                                "instantiation",
                               Query);
      SourceLocation Offending = SM.getExpansionLoc(Dependent->getBeginLoc());
      Record.DetailLine = SM.getExpansionLineNumber(Offending);
      Record.DetailColumn = SM.getExpansionColumnNumber(Offending);
      Result.Sites.push_back(std::move(Record));
      continue;
    }
    auto LossView = AstQuery::asCall(Loss);
    if (!LossView)
      continue;
    if (LossView->Args.size() <= std::max(Found.Rule->Input, Found.Rule->Target)) {
      // The pattern names an argument the call does not have: recorded, never silently dropped.
      SiteRecord Record = recordAt(Loss, Function, Found.Rule->Callee, SM);
      Recorded.insert(Function);
      Record.Status = SiteStatus::Unmatched;
      Record.Reason = ReasonKind::LossUnsupported;
      Record.Detail = "line " + std::to_string(Record.Line) + ": the pattern of " + Found.Rule->Callee +
                      " names argument " + std::to_string(std::max(Found.Rule->Input, Found.Rule->Target)) +
                      ", but this call has " + std::to_string(LossView->Args.size()) + ".";
      Record.DetailLine = Record.Line;
      Record.DetailColumn = Record.Column;
      Result.Sites.push_back(std::move(Record));
      continue;
    }
    auto &Uses = UsesByFunction[Function];
    if (!Uses)
      Uses = std::make_unique<VariableUses>(Function->getBody(), Query);
    CapturedSite Site = captureSite(Loss, *Found.Rule, Patterns, Query, *Uses);

    const Expr *Anchor = Site.Head ? Site.Head->Call : Loss;
    SourceLocation Location = SM.getExpansionLoc(Anchor->getBeginLoc());
    SiteRecord Record = recordAt(Anchor, Function, Found.Rule->Callee, SM);
    Recorded.insert(Function);
    if (Site.Head)
      Record.Head = Site.Head->Text;

    bool Suppressed = Suppressions.isSuppressed(Loss->getBeginLoc()) ||
                      (Site.Head && Suppressions.isSuppressed(Site.Head->Call->getBeginLoc())) ||
                      (Site.Guard.Construct && Suppressions.isSuppressed(Site.Guard.Construct->getBeginLoc()));

    if (const CallExpr *Fused = fusedCallBeside(Loss, Patterns, Query)) {
      Record.Status = SiteStatus::AlreadyPatched;
      Record.Detail = "line " + std::to_string(Query.line(Fused->getBeginLoc())) + ": " + Patterns.Replacement.Call +
                      " runs in place of the loss on line " + std::to_string(Query.line(Loss->getBeginLoc())) +
                      ", which is its fallback.";
    } else if (Suppressed) {
      Record.Status = SiteStatus::Suppressed;
      Record.Detail = "line " + std::to_string(Query.line(Anchor->getBeginLoc())) +
                      ": suppressed by a NOLINT(lmfuse) comment.";
    } else if (auto Refused = findRefusal(Site, Patterns, Query, *Uses)) {
      refuse(Record, *Refused);
    } else {
      // The hoisted local gets a name nothing in the function can mean already.
      std::string HiddenName = Patterns.Replacement.HoistedHidden;
      if (Site.HoistHidden) {
        int &Count = HoistsByFunction[Function];
        do {
          ++Count;
          HiddenName = Patterns.Replacement.HoistedHidden + (Count > 1 ? std::to_string(Count) : "");
        } while (Query.nameInUse(HiddenName, Function));
      }
      auto unusedName = [&](const std::string &Name) {
        std::string Unused = Name;
        for (int Suffix = 2; Query.nameInUse(Unused, Function); ++Suffix)
          Unused = Name + std::to_string(Suffix);
        return Unused;
      };
      const StandInNames StandIns{unusedName(Patterns.Replacement.StandIn),
                                  unusedName(Patterns.Replacement.LabelsStandIn)};
      const std::vector<AnalysedExpression> Analysed = analysedExpressions(Site, HiddenName, Patterns, Query);
      std::vector<tooling::Replacement> Edits =
          planSiteEdits(Site, Patterns, Query, HiddenName, StandIns, Analysed, &Record.Respellings);
      if (auto Refused = findEditRefusal(
              Site, Edits, ownWords(Patterns, Query.context().getLangOpts(), HiddenName, StandIns, Analysed),
              Analysed, Query)) {
        Record.Respellings.clear();
        refuse(Record, *Refused);
      } else {
        Record.Status = SiteStatus::Patched;
        Record.Options = Site.Options.Effective;
        Record.Detail = "line " + std::to_string(Query.line(Loss->getBeginLoc())) + ": " + Record.Loss +
                        " fused with the head `" + Record.Head + "`.";
        for (tooling::Replacement &Edit : Edits) {
          PlansByInclusion[SM.getFileID(Location)].push_back(Edit);
          Result.Edits.push_back(std::move(Edit));
        }
        EditedFiles.insert(SM.getFileID(Location));
      }
    }
    PlansByInclusion[SM.getFileID(Location)];  // a site's inclusion plans its edits, or none
    SiteInclusion.resize(Result.Sites.size() + 1);
    SiteInclusion.back() = SM.getFileID(Location);
    Result.Sites.push_back(std::move(Record));
  }

  // A function that calls the fused loss and no longer the original (hand-written, or a rewrite whose
  // fallback was removed) is already patched too: every such call not seen above is recorded.
  for (const Candidate &Fused : FusedCalls) {
    const FunctionDecl *Function = Query.enclosingFunction(Fused.Loss);
    if (Query.inLibraryHeader(Fused.Loss->getBeginLoc()) || !Function ||
        inLibraryNamespace(Function, Patterns) || !Recorded.insert(Function).second)
      continue;
    SiteRecord Record = recordAt(Fused.Loss, Function, Patterns.Replacement.Call, SM);
    Record.Status = SiteStatus::AlreadyPatched;
    Record.Detail = "line " + std::to_string(Record.Line) + ": the function already calls " +
                    Patterns.Replacement.Call + ".";
    Result.Sites.push_back(std::move(Record));
  }

  dropDisagreeingInclusions(SM, PlansByInclusion, SiteInclusion, EditedFiles, Result);
  for (FileID File : EditedFiles) {
    const std::string Path = tooling::Replacement(SM, SM.getLocForStartOfFile(File), 0, "").getFilePath().str();
    unsigned FirstEdit = UINT_MAX;
    for (const tooling::Replacement &Edit : Result.Edits)
      if (Edit.getFilePath() == Path)
        FirstEdit = std::min(FirstEdit, Edit.getOffset());
    if (auto Include = planIncludeEdit(File, FirstEdit, Patterns, SM))
      Result.Edits.push_back(*Include);
  }

  std::stable_sort(Result.Sites.begin(), Result.Sites.end(), [](const SiteRecord &A, const SiteRecord &B) {
    return std::tie(A.File, A.Line, A.Column) < std::tie(B.File, B.Line, B.Column);
  });
  std::stable_sort(Result.Edits.begin(), Result.Edits.end());
  return Result;
}

RewriteResult rewriteSource(llvm::StringRef Code, llvm::ArrayRef<std::string> Args, const PatternSet &Patterns,
                            llvm::StringRef FileName, const std::map<std::string, std::string> &VirtualFiles) {
  RewriteResult Result;
  Result.Code = Code.str();
  std::vector<std::string> CompilerArgs(Args.begin(), Args.end());
  bool HasResourceDir = std::any_of(CompilerArgs.begin(), CompilerArgs.end(), [](const std::string &Arg) {
    return llvm::StringRef(Arg).starts_with("-resource-dir");
  });
  if (!HasResourceDir)
    CompilerArgs.push_back("-resource-dir=" LMFUSE_CLANG_RESOURCE_DIR);
  tooling::FileContentMappings Mappings(VirtualFiles.begin(), VirtualFiles.end());

  llvm::raw_string_ostream DiagnosticStream(Result.Diagnostics);
  auto DiagnosticOptions = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  TextDiagnosticPrinter Printer(DiagnosticStream, DiagnosticOptions.get());
  std::unique_ptr<ASTUnit> Unit =
      tooling::buildASTFromCodeWithArgs(Code, CompilerArgs, FileName, "lmfuse", std::make_shared<PCHContainerOperations>(),
                                        tooling::getClangStripDependencyFileAdjuster(), Mappings, &Printer);
  DiagnosticStream.flush();
  if (!Unit || Unit->getDiagnostics().hasErrorOccurred())
    return Result;
  Result.Parsed = true;

  TranslationUnitResult Analysis = analyzeTranslationUnit(Unit->getASTContext(), Unit->getPreprocessor(), Patterns);
  Result.Sites = std::move(Analysis.Sites);
  const SourceManager &SM = Unit->getSourceManager();
  llvm::StringRef MainPath = SM.getFileEntryRefForID(SM.getMainFileID())->getName();
  tooling::Replacements MainEdits;
  for (const tooling::Replacement &Edit : Analysis.Edits) {
    if (Edit.getFilePath() != MainPath)
      continue;
    if (llvm::Error Conflict = MainEdits.add(Edit)) {
      Result.Diagnostics += "edit conflict: " + llvm::toString(std::move(Conflict)) + "\n";
      Result.Parsed = false;
      return Result;
    }
  }
  auto Rewritten = tooling::applyAllReplacements(Code, MainEdits);
  if (!Rewritten) {
    Result.Diagnostics += "cannot apply edits: " + llvm::toString(Rewritten.takeError()) + "\n";
    Result.Parsed = false;
    return Result;
  }

  // The re-parse the tool runs before it writes (driver.h), for what the rewrite spells again: a site whose
  // copies read otherwise is refused, and nothing of the file is rewritten.
  std::unique_ptr<ASTUnit> Again =
      tooling::buildASTFromCodeWithArgs(*Rewritten, CompilerArgs, FileName, "lmfuse", std::make_shared<PCHContainerOperations>(),
                                        tooling::getClangStripDependencyFileAdjuster(), Mappings, &Printer);
  DiagnosticStream.flush();
  if (!Again || Again->getDiagnostics().hasErrorOccurred()) {
    failRewrittenSites(Result.Sites, "the rewritten code does not compile");
    return Result;
  }
  const SourceManager &AgainSM = Again->getSourceManager();
  std::string Key = canonicalPath(AgainSM.getFileEntryRefForID(AgainSM.getMainFileID())->getName(), "");
  std::map<std::string, std::vector<RespellingRange>> ByFile;
  ByFile[Key] = respellingRanges(Result.Sites, MainPath, Code, MainEdits, {});
  auto Changed = changedRespellings(Again->getASTContext(), "", ByFile);
  if (!Changed.empty()) {
    refuseRespelled(Result.Sites, ByFile[Key], Changed, Key, Code);
    failRewrittenSites(Result.Sites, "not written: another site of the file spells code again where it reads otherwise");
    return Result;
  }
  Result.Code = std::move(*Rewritten);
  return Result;
}

}  // namespace lmfuse::rewriter
