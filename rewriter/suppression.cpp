// Scans each file's text once for lmfuse NOLINT markers and remembers the suppressed lines.
#include "suppression.h"

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

const std::set<unsigned> &SuppressionIndex::linesOf(clang::FileID File) {
  auto Found = SuppressedLines.find(File);
  if (Found != SuppressedLines.end())
    return Found->second;
  std::set<unsigned> &Lines = SuppressedLines[File];
  llvm::SmallVector<llvm::StringRef, 0> Text;
  SM.getBufferData(File).split(Text, '\n');
  int Depth = 0;
  for (unsigned Index = 0; Index < Text.size(); ++Index) {
    unsigned LineNumber = Index + 1;
    MarkerKind Kind = markerOn(Text[Index]);
    if (Kind == MarkerKind::Begin)
      ++Depth;
    if (Depth > 0 || Kind == MarkerKind::Line)
      Lines.insert(LineNumber);
    if (Kind == MarkerKind::NextLine)
      Lines.insert(LineNumber + 1);
    if (Kind == MarkerKind::End && Depth > 0)
      --Depth;
  }
  return Lines;
}

bool SuppressionIndex::isSuppressed(clang::SourceLocation Location) {
  if (Location.isInvalid())
    return false;
  clang::SourceLocation Expansion = SM.getExpansionLoc(Location);
  return linesOf(SM.getFileID(Expansion)).count(SM.getExpansionLineNumber(Expansion)) > 0;
}

}  // namespace lmfuse::rewriter
