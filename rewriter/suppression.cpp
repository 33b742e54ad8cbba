// Lexes each file once for lmfuse NOLINT markers in its comments and remembers the suppressed lines.
#include "suppression.h"

#include "raw_tokens.h"

#include <optional>
#include <utility>
#include <vector>

#include "clang/Basic/LangOptions.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace lmfuse::rewriter {
namespace {

enum class MarkerKind { None, Line, NextLine, Begin, End };

/// Whether a check list like "(bugprone-*, lmfuse)" names lmfuse.
bool namesLmfuse(llvm::StringRef List) {
  llvm::SmallVector<llvm::StringRef, 4> Checks;
  List.split(Checks, ',');
  for (llvm::StringRef Check : Checks)
    if (Check.trim() == "lmfuse" || Check.trim() == "*")
      return true;
  return false;
}

/// The lmfuse markers on one line of source text (a line can hold at most one that matters).
MarkerKind markerOn(llvm::StringRef Line) {
  for (size_t At = Line.find("NOLINT"); At != llvm::StringRef::npos; At = Line.find("NOLINT", At + 1)) {
    llvm::StringRef Rest = Line.drop_front(At + 6);
    MarkerKind Kind = MarkerKind::Line;
    if (Rest.consume_front("NEXTLINE"))
      Kind = MarkerKind::NextLine;
    else if (Rest.consume_front("BEGIN"))
      Kind = MarkerKind::Begin;
    else if (Rest.consume_front("END"))
      Kind = MarkerKind::End;
    if (!Rest.consume_front("("))
      continue;
    size_t Close = Rest.find(')');
    if (Close != llvm::StringRef::npos && namesLmfuse(Rest.take_front(Close)))
      return Kind;
  }
  return MarkerKind::None;
}

}  // namespace

// Markers count only inside comments: the file is lexed raw with comments kept, so a "NOLINT(lmfuse)" in
// a string literal or an identifier never suppresses. A marker in a block comment counts on the line
// where the marker itself stands.
const std::set<unsigned> &SuppressionIndex::linesOf(clang::FileID File) {
  auto Found = SuppressedLines.find(File);
  if (Found != SuppressedLines.end())
    return Found->second;
  std::set<unsigned> &Lines = SuppressedLines[File];
  std::optional<llvm::MemoryBufferRef> Buffer = SM.getBufferOrNone(File);
  if (!Buffer)
    return Lines;
  clang::LangOptions Language;
  Language.CPlusPlus = Language.CPlusPlus11 = Language.CPlusPlus14 = Language.CPlusPlus17 = true;
  Language.LineComment = true;
  // (line, marker) in file order.
  std::vector<std::pair<unsigned, MarkerKind>> Markers;
  llvm::StringRef Text = Buffer->getBuffer();
  forEachRawToken(SM, Language, File, 0, Text.size(), [&](const clang::Token &Token) {
    if (Token.isNot(clang::tok::comment))
      return true;
    unsigned Begin = SM.getFileOffset(Token.getLocation());
    llvm::StringRef Comment = Text.substr(Begin, Token.getLength());
    unsigned FirstLine = 1 + Text.take_front(Begin).count('\n');
    llvm::SmallVector<llvm::StringRef, 4> CommentLines;
    Comment.split(CommentLines, '\n');
    for (unsigned I = 0; I < CommentLines.size(); ++I)
      if (MarkerKind Kind = markerOn(CommentLines[I]); Kind != MarkerKind::None)
        Markers.push_back({FirstLine + I, Kind});
    return true;
  }, Comments::Keep);

  int Depth = 0;
  unsigned BeginLine = 0;
  for (const auto &[Line, Kind] : Markers) {
    if (Kind == MarkerKind::Line)
      Lines.insert(Line);
    else if (Kind == MarkerKind::NextLine)
      Lines.insert(Line + 1);
    else if (Kind == MarkerKind::Begin && Depth++ == 0)
      BeginLine = Line;
    else if (Kind == MarkerKind::End && Depth > 0 && --Depth == 0)
      for (unsigned L = BeginLine; L <= Line; ++L)
        Lines.insert(L);
  }
  if (Depth > 0)  // an unclosed BEGIN suppresses to the end of the file
    for (unsigned L = BeginLine, Last = 1 + Text.count('\n'); L <= Last; ++L)
      Lines.insert(L);
  return Lines;
}

bool SuppressionIndex::isSuppressed(clang::SourceLocation Location) {
  if (Location.isInvalid())
    return false;
  clang::SourceLocation Expansion = SM.getExpansionLoc(Location);
  return linesOf(SM.getFileID(Expansion)).count(SM.getExpansionLineNumber(Expansion)) > 0;
}

}  // namespace lmfuse::rewriter
