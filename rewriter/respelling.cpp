// Places each respelling in the written file and compares, in the re-parse, the expression at the copy with
// the expression at the code it copies. Both lie in one unit, so "the same" is exact: the same declarations,
// not declarations of the same name.
#include "respelling.h"

#include "edit_set.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"

using namespace clang;

namespace lmfuse::rewriter {
namespace {

/// Where plain offset P of the rewritten text (edits applied, nothing inserted) lies in the written text.
unsigned throughInsertions(unsigned P, const Insertions &Inserted) {
  unsigned Before = 0;  // inserted bytes before the current insertion, in the written text
  unsigned Shift = 0;
  for (const auto &[At, Length] : Inserted) {
    if (At - Before > P)
      break;
    Shift += Length;
    Before += Length;
  }
  return P + Shift;
}

/// What is spelled at a node: without the conversions, temporaries and cleanups its place adds around it
/// (binding a copy to the fused call's parameter, or reading it where it is not evaluated, as in `decltype`).
const Stmt *spelledNode(const Stmt *S) {
  if (const auto *E = dyn_cast_or_null<Expr>(S))
    return E->IgnoreUnlessSpelledInSource();
  return S;
}

/// How a declaration is named in a sentence: `ns::name` (lines are not given: the re-parse's are the rewritten
/// file's).
std::string declaration(const Decl *D) {
  if (const auto *Named = dyn_cast_or_null<NamedDecl>(D))
    return "`" + Named->getQualifiedNameAsString() + "`";
  return D ? "a declaration" : "none";
}

/// Whether two nodes spell the same computation: node for node as spelled (spelledNode), the same kind, the
/// same type, the same declaration named or member read, the same function called (an operator's or a literal
/// operator's too), the same operator, cast and literal value. Both lie in one unit, so declarations compare as
/// they are. A lambda is its own class wherever it is written: two never compare the same. Nullopt when they
/// do, else what differs first, as a phrase.
std::optional<std::string> difference(const Stmt *A, const Stmt *B, const ASTContext &Context) {
  A = spelledNode(A);
  B = spelledNode(B);
  if (!A || !B)
    return A == B ? std::nullopt : std::optional<std::string>("it is other code");
  if (A->getStmtClass() != B->getStmtClass())
    return std::string("it is other code");
  if (isa<LambdaExpr>(A))
    return std::string("it holds a lambda, a class of its own wherever it is written");
  auto OtherDecl = [&](const Decl *X, const Decl *Y, const char *What) -> std::optional<std::string> {
    if ((!X && !Y) || (X && Y && X->getCanonicalDecl() == Y->getCanonicalDecl()))
      return std::nullopt;
    std::string There = declaration(X), Written = declaration(Y);
    if (There == Written)
      return std::string(What) + " another " + There + " there than where it was written";
    return std::string(What) + " " + There + " there, " + Written + " where it was written";
  };
  std::optional<std::string> Found;
  if (const auto *EA = dyn_cast<Expr>(A)) {
    const auto *EB = cast<Expr>(B);
    if (!Context.hasSameType(EA->getType(), EB->getType()) || EA->getValueKind() != EB->getValueKind())
      return "it has type `" + EA->getType().getAsString() + "` there, `" + EB->getType().getAsString() +
             "` where it was written";
  }
  if (const auto *Ref = dyn_cast<DeclRefExpr>(A))
    Found = OtherDecl(Ref->getDecl(), cast<DeclRefExpr>(B)->getDecl(), "it names");
  else if (const auto *Member = dyn_cast<MemberExpr>(A))
    Found = Member->isArrow() != cast<MemberExpr>(B)->isArrow()
                ? std::optional<std::string>("it reads a member otherwise")
                : OtherDecl(Member->getMemberDecl(), cast<MemberExpr>(B)->getMemberDecl(), "it reads");
  else if (const auto *Call = dyn_cast<CallExpr>(A))
    Found = OtherDecl(Call->getCalleeDecl(), cast<CallExpr>(B)->getCalleeDecl(), "it calls");
  else if (const auto *Construct = dyn_cast<CXXConstructExpr>(A))
    Found = OtherDecl(Construct->getConstructor(), cast<CXXConstructExpr>(B)->getConstructor(), "it constructs with");
  else if (const auto *Lookup = dyn_cast<OverloadExpr>(A)) {
    // In a template: the name a dependent call looks up, and the declarations found where it is written.
    const auto *Other = cast<OverloadExpr>(B);
    if (Lookup->getName() != Other->getName() || Lookup->getNumDecls() != Other->getNumDecls() ||
        !std::equal(Lookup->decls_begin(), Lookup->decls_end(), Other->decls_begin(),
                    [](const NamedDecl *X, const NamedDecl *Y) { return X->getCanonicalDecl() == Y->getCanonicalDecl(); }))
      Found = "`" + Lookup->getName().getAsString() + "` finds other declarations there";
  } else if (const auto *Dependent = dyn_cast<CXXDependentScopeMemberExpr>(A)) {
    if (Dependent->getMember() != cast<CXXDependentScopeMemberExpr>(B)->getMember())
      Found = std::string("it reads another member");
  } else if (const auto *Dependent = dyn_cast<DependentScopeDeclRefExpr>(A)) {
    if (Dependent->getDeclName() != cast<DependentScopeDeclRefExpr>(B)->getDeclName())
      Found = std::string("it names another member");
  }
  if (Found)
    return Found;
  bool Same = true;
  if (const auto *Operator = dyn_cast<UnaryOperator>(A))
    Same = Operator->getOpcode() == cast<UnaryOperator>(B)->getOpcode();
  else if (const auto *Operator = dyn_cast<BinaryOperator>(A))
    Same = Operator->getOpcode() == cast<BinaryOperator>(B)->getOpcode();
  else if (const auto *Cast = dyn_cast<CastExpr>(A))
    Same = Cast->getCastKind() == cast<CastExpr>(B)->getCastKind();
  else if (const auto *Trait = dyn_cast<UnaryExprOrTypeTraitExpr>(A)) {
    const auto *Other = cast<UnaryExprOrTypeTraitExpr>(B);
    Same = Trait->getKind() == Other->getKind() && Trait->isArgumentType() == Other->isArgumentType() &&
           (!Trait->isArgumentType() || Context.hasSameType(Trait->getArgumentType(), Other->getArgumentType()));
  } else if (const auto *Literal = dyn_cast<IntegerLiteral>(A))
    Same = Literal->getValue() == cast<IntegerLiteral>(B)->getValue();
  else if (const auto *Literal = dyn_cast<FloatingLiteral>(A))
    Same = Literal->getValue().bitwiseIsEqual(cast<FloatingLiteral>(B)->getValue());
  else if (const auto *Literal = dyn_cast<CharacterLiteral>(A))
    Same = Literal->getValue() == cast<CharacterLiteral>(B)->getValue();
  else if (const auto *Literal = dyn_cast<StringLiteral>(A))
    Same = Literal->getBytes() == cast<StringLiteral>(B)->getBytes();
  else if (const auto *Literal = dyn_cast<CXXBoolLiteralExpr>(A))
    Same = Literal->getValue() == cast<CXXBoolLiteralExpr>(B)->getValue();
  if (!Same)
    return std::string("an operator, cast or value differs there (a macro that expands otherwise)");
  auto ChildrenA = A->children(), ChildrenB = B->children();
  if (std::distance(ChildrenA.begin(), ChildrenA.end()) != std::distance(ChildrenB.begin(), ChildrenB.end()))
    return std::string("it is other code");
  for (auto X = ChildrenA.begin(), Y = ChildrenB.begin(); X != ChildrenA.end(); ++X, ++Y)
    if (auto Inner = difference(*X, *Y, Context))
      return Inner;
  return std::nullopt;
}

/// The outermost expression of each wanted range of the files of interest, in one walk of the unit.
class RangeFinder : public RecursiveASTVisitor<RangeFinder> {
public:
  using Key = std::tuple<FileID, unsigned, unsigned>;
  RangeFinder(const SourceManager &SM, const LangOptions &Language, std::map<Key, const Expr *> &Found)
      : SM(SM), Language(Language), Found(Found) {
    for (const auto &[K, E] : Found)
      Files.insert(std::get<0>(K));
  }
  bool TraverseDecl(Decl *D) {
    // Only what the files of interest declare, and the namespaces and linkage blocks that may hold it.
    if (D && !isa<TranslationUnitDecl, NamespaceDecl, LinkageSpecDecl, ExportDecl>(D) &&
        !Files.count(SM.getFileID(SM.getExpansionLoc(D->getBeginLoc()))))
      return true;
    return RecursiveASTVisitor::TraverseDecl(D);
  }
  bool VisitExpr(Expr *E) {
    CharSourceRange Range =
        Lexer::makeFileCharRange(CharSourceRange::getTokenRange(E->getSourceRange()), SM, Language);
    if (Range.isInvalid())
      return true;
    FileID File = SM.getFileID(Range.getBegin());
    if (!Files.count(File))
      return true;
    auto It = Found.find({File, SM.getFileOffset(Range.getBegin()), SM.getFileOffset(Range.getEnd())});
    if (It != Found.end() && !It->second)
      It->second = E;  // a walk visits the outer expression of a range first
    return true;
  }

private:
  const SourceManager &SM;
  const LangOptions &Language;
  std::map<Key, const Expr *> &Found;
  std::set<FileID> Files;
};

}  // namespace

std::optional<std::pair<unsigned, unsigned>> placeInWritten(const TextPlace &Place, llvm::StringRef Original,
                                                            const tooling::Replacements &Edits, bool Crlf,
                                                            const Insertions &Inserted) {
  std::optional<unsigned> Begin;
  long Delta = 0;  // what the edits before the current one added
  for (const tooling::Replacement &Edit : Edits) {
    const unsigned From = Edit.getOffset(), To = From + Edit.getLength();
    llvm::StringRef Text = Edit.getReplacementText();
    if (Place.InEdit) {
      if (From == Place.EditOffset && Edit.getLength() > 0) {
        unsigned At = Place.Offset + (Crlf ? Place.LineBreaksBefore : 0);
        if (At + Place.Length > Text.size())
          return std::nullopt;
        Begin = From + Delta + At;
        break;
      }
    } else {
      const unsigned O = Place.Offset, E = O + Place.Length;
      if (Edit.getLength() > 0 && From <= O && E <= To) {
        // Inside an edit: only where the edit repeats the code it replaces (the original after `:`).
        // The whole of it; else the part from its start through the place, or from the place to its end (an
        // edit that repeats the code with the head's input hoisted into a local).
        size_t At = Text.rfind(Original.slice(From, To));
        if (At == llvm::StringRef::npos)
          At = Text.rfind(Original.slice(From, E));
        if (At != llvm::StringRef::npos)
          At += O - From;
        else if ((At = Text.rfind(Original.slice(O, To))) == llvm::StringRef::npos)
          return std::nullopt;
        Begin = From + Delta + At;
        break;
      }
      if (From >= E)
        break;
      if (To > O)  // an edit overlapping the place, or an insertion inside it
        return std::nullopt;
    }
    Delta += static_cast<long>(Text.size()) - static_cast<long>(Edit.getLength());
  }
  if (!Begin) {
    if (Place.InEdit)
      return std::nullopt;
    Begin = Place.Offset + Delta;
  }
  unsigned End = *Begin + Place.Length;
  return std::make_pair(throughInsertions(*Begin, Inserted),
                        Place.Length ? throughInsertions(End - 1, Inserted) + 1 : throughInsertions(End, Inserted));
}

std::vector<RespellingRange> respellingRanges(const std::vector<SiteRecord> &Sites, llvm::StringRef File,
                                              llvm::StringRef Original, const tooling::Replacements &Edits,
                                              const Insertions &Inserted) {
  bool Crlf = newlineOf(Original) == "\r\n";
  std::vector<RespellingRange> Ranges;
  for (size_t S = 0; S < Sites.size(); ++S) {
    if (Sites[S].Status != SiteStatus::Patched || Sites[S].File != File)
      continue;
    for (size_t W = 0; W < Sites[S].Respellings.size(); ++W) {
      const Respelling &Item = Sites[S].Respellings[W];
      auto Copy = placeInWritten(Item.Copy, Original, Edits, Crlf, Inserted);
      auto Copied = placeInWritten(Item.Original, Original, Edits, Crlf, Inserted);
      RespellingRange Range;
      Range.Site = S;
      Range.Which = W;
      Range.Placed = Copy && Copied;
      if (Range.Placed)
        std::tie(Range.CopyBegin, Range.CopyEnd, Range.OriginalBegin, Range.OriginalEnd) =
            std::tie(Copy->first, Copy->second, Copied->first, Copied->second);
      Ranges.push_back(Range);
    }
  }
  return Ranges;
}

std::map<std::pair<std::string, size_t>, std::string>
changedRespellings(ASTContext &Context, llvm::StringRef Directory,
                   const std::map<std::string, std::vector<RespellingRange>> &ByFile) {
  const SourceManager &SM = Context.getSourceManager();
  std::map<std::string, FileID> Files;  // the files of interest the parse read, by canonical path
  for (auto It = SM.fileinfo_begin(); It != SM.fileinfo_end(); ++It) {
    std::string Path = canonicalPath(It->first.getName(), Directory);
    if (!ByFile.count(Path))
      continue;
    FileID ID = SM.translateFile(It->first);
    if (ID.isValid())
      Files[Path] = ID;
  }
  std::map<RangeFinder::Key, const Expr *> Found;
  for (const auto &[Path, Ranges] : ByFile)
    if (auto File = Files.find(Path); File != Files.end())
      for (const RespellingRange &Range : Ranges)
        if (Range.Placed) {
          Found[{File->second, Range.CopyBegin, Range.CopyEnd}] = nullptr;
          Found[{File->second, Range.OriginalBegin, Range.OriginalEnd}] = nullptr;
        }
  if (!Found.empty())
    RangeFinder(SM, Context.getLangOpts(), Found).TraverseDecl(Context.getTranslationUnitDecl());

  std::map<std::pair<std::string, size_t>, std::string> Changed;
  for (const auto &[Path, Ranges] : ByFile)
    for (size_t I = 0; I < Ranges.size(); ++I) {
      const RespellingRange &Range = Ranges[I];
      auto File = Files.find(Path);
      if (!Range.Placed || File == Files.end()) {
        Changed[{Path, I}] = "the rewritten file does not hold it where the rewrite wrote it";
        continue;
      }
      const Expr *Copy = Found[{File->second, Range.CopyBegin, Range.CopyEnd}];
      const Expr *Copied = Found[{File->second, Range.OriginalBegin, Range.OriginalEnd}];
      if (!Copy || !Copied) {
        Changed[{Path, I}] = "the compiler does not read it there as one expression";
        continue;
      }
      if (auto How = difference(Copy, Copied, Context))
        Changed[{Path, I}] = *How;
    }
  return Changed;
}

bool refuseRespelled(std::vector<SiteRecord> &Sites, const std::vector<RespellingRange> &Ranges,
                     const std::map<std::pair<std::string, size_t>, std::string> &Changed, const std::string &Path,
                     llvm::StringRef Original) {
  bool Any = false;
  for (size_t I = 0; I < Ranges.size(); ++I) {
    auto Why = Changed.find({Path, I});
    SiteRecord &Site = Sites[Ranges[I].Site];
    if (Why == Changed.end() || Site.Status != SiteStatus::Patched)
      continue;
    const Respelling &Item = Site.Respellings[Ranges[I].Which];
    unsigned CopyLine = lineOfOffset(Original, Item.Copy.EditOffset);
    Site.Status = SiteStatus::Unmatched;
    Site.Reason = Item.Reason;
    Site.Detail = "line " + std::to_string(CopyLine) + ": " + Item.Part +
                  ", which the rewrite would spell again here, would not mean what it means on line " +
                  std::to_string(Item.OriginalLine) + ": in the re-parse of the rewritten code, " + Why->second;
    Site.DetailLine = CopyLine;
    Site.DetailColumn = 1;
    Site.Options.reset();
    Site.Respellings.clear();
    Any = true;
  }
  return Any;
}

}  // namespace lmfuse::rewriter
