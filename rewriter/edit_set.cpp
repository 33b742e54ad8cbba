// Merging edits across translation units and presenting them: applied text, unified diff, #line copies.
// Presentation works on line blocks: every edit is widened to whole lines, and edits that share a line
// are one block, so a diff hunk or a #line resync never lands in the middle of a line.
#include "edit_set.h"

#include <algorithm>

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace lmfuse::rewriter {

using clang::tooling::Replacement;
using clang::tooling::Replacements;

void EditSet::add(const Replacement &Edit) {
  ByFile[Edit.getFilePath().str()].insert(
      {Edit.getOffset(), Edit.getLength(), Edit.getReplacementText().str()});
}

std::vector<std::string> EditSet::files() const {
  std::vector<std::string> Files;
  for (const auto &[File, Edits] : ByFile)
    Files.push_back(File);
  return Files;
}

namespace {

// Two different edits conflict when one changes bytes the other changes too, or when both insert at
// one offset (their order would be a guess). An insertion just before a replaced range is no conflict.
bool editsConflict(const std::tuple<unsigned, unsigned, std::string> &A,
                   const std::tuple<unsigned, unsigned, std::string> &B) {
  auto [OffA, LenA, TextA] = A;
  auto [OffB, LenB, TextB] = B;
  if (LenA == 0 && LenB == 0)
    return OffA == OffB;
  if (LenA == 0)
    return OffB < OffA && OffA < OffB + LenB;
  if (LenB == 0)
    return OffA < OffB && OffB < OffA + LenA;
  return std::max(OffA, OffB) < std::min(OffA + LenA, OffB + LenB);
}

}  // namespace

std::string EditSet::conflictFor(llvm::StringRef File, llvm::StringRef Contents) const {
  auto It = ByFile.find(File.str());
  if (It == ByFile.end())
    return "";
  const auto &Edits = It->second;  // sorted by offset, then length, then text
  for (auto A = Edits.begin(); A != Edits.end(); ++A)
    for (auto B = std::next(A); B != Edits.end() && std::get<0>(*B) <= std::get<0>(*A) + std::get<1>(*A);
         ++B)
      if (editsConflict(*A, *B))
        return (llvm::Twine("translation units disagree on the edits of ") + File + " at line " +
                llvm::Twine(lineOfOffset(Contents, std::get<0>(*A))) + " and line " +
                llvm::Twine(lineOfOffset(Contents, std::get<0>(*B))))
            .str();
  return "";
}

Replacements EditSet::editsFor(llvm::StringRef File) const {
  Replacements Result;
  auto It = ByFile.find(File.str());
  if (It == ByFile.end())
    return Result;
  for (const auto &[Offset, Length, Text] : It->second)
    if (llvm::Error Err = Result.add(Replacement(File, Offset, Length, Text))) {
      llvm::consumeError(std::move(Err));  // a conflict: conflictFor() says which
      return Replacements();
    }
  return Result;
}

void EditSet::drop(llvm::StringRef File) { ByFile.erase(File.str()); }

std::string canonicalPath(llvm::StringRef Path, llvm::StringRef BaseDirectory) {
  llvm::SmallString<256> Absolute(Path);
  if (!llvm::sys::path::is_absolute(Absolute)) {
    Absolute = BaseDirectory;
    llvm::sys::path::append(Absolute, Path);
  }
  llvm::sys::path::remove_dots(Absolute, /*remove_dot_dot=*/true);
  llvm::SmallString<256> Real;
  if (!llvm::sys::fs::real_path(Absolute, Real))
    return std::string(Real);
  return std::string(Absolute);
}

unsigned lineOfOffset(llvm::StringRef Contents, unsigned Offset) {
  return 1 + Contents.take_front(Offset).count('\n');
}

llvm::Expected<std::string> applyEdits(llvm::StringRef File, llvm::StringRef Contents,
                                       const Replacements &Edits) {
  for (const Replacement &Edit : Edits)
    if (Edit.getOffset() + Edit.getLength() > Contents.size())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "an edit of %s ends at byte %u, past the end of the file (%zu bytes)",
                                     File.str().c_str(), Edit.getOffset() + Edit.getLength(),
                                     Contents.size());
  return clang::tooling::applyAllReplacements(Contents, Edits);
}

namespace {

// Line I of a text spans [Starts[I], Starts[I+1]); a final line without '\n' still counts.
std::vector<unsigned> lineStarts(llvm::StringRef Text) {
  std::vector<unsigned> Starts;
  if (Text.empty())
    return Starts;
  Starts.push_back(0);
  for (unsigned I = 0; I + 1 < Text.size(); ++I)
    if (Text[I] == '\n')
      Starts.push_back(I + 1);
  return Starts;
}

std::vector<llvm::StringRef> splitLines(llvm::StringRef Text) {
  std::vector<llvm::StringRef> Lines;
  std::vector<unsigned> Starts = lineStarts(Text);
  for (size_t I = 0; I < Starts.size(); ++I)
    Lines.push_back(Text.slice(Starts[I], I + 1 < Starts.size() ? Starts[I + 1] : Text.size()));
  return Lines;
}

// Original lines [FirstLine, EndLine) become NewText. Offsets are those of the original.
struct LineBlock {
  unsigned FirstLine = 0, EndLine = 0;
  unsigned BeginOffset = 0, EndOffset = 0;
  std::string NewText;
};

std::vector<LineBlock> lineBlocks(llvm::StringRef Contents, const Replacements &Edits) {
  std::vector<unsigned> Starts = lineStarts(Contents);
  const unsigned LineCount = Starts.size();
  auto LineOf = [&](unsigned Offset) -> unsigned {
    if (Offset >= Contents.size())
      return LineCount;  // an insertion at the very end
    return std::upper_bound(Starts.begin(), Starts.end(), Offset) - Starts.begin() - 1;
  };
  auto StartOf = [&](unsigned Line) -> unsigned {
    return Line < LineCount ? Starts[Line] : Contents.size();
  };
  std::vector<std::pair<LineBlock, std::vector<Replacement>>> Blocks;
  for (const Replacement &Edit : Edits) {
    unsigned First = LineOf(Edit.getOffset());
    unsigned Last = Edit.getLength() ? LineOf(Edit.getOffset() + Edit.getLength() - 1) : First;
    unsigned End = std::min(Last + 1, LineCount);
    if (First >= LineCount)
      End = First = LineCount;
    // Whole lines inserted before a line (the added #include) replace no original line.
    if (Edit.getLength() == 0 && First < LineCount && Starts[First] == Edit.getOffset() &&
        Edit.getReplacementText().ends_with("\n"))
      End = First;
    if (!Blocks.empty() && (First < Blocks.back().first.EndLine ||
                            (First == LineCount && Blocks.back().first.FirstLine == LineCount))) {
      Blocks.back().first.EndLine = std::max(Blocks.back().first.EndLine, End);
      Blocks.back().second.push_back(Edit);
      continue;
    }
    LineBlock Block;
    Block.FirstLine = First;
    Block.EndLine = End;
    Blocks.push_back({Block, {Edit}});
  }
  std::vector<LineBlock> Result;
  for (size_t I = 0; I < Blocks.size(); ++I) {
    auto &[Block, BlockEdits] = Blocks[I];
    while (true) {
      Block.BeginOffset = StartOf(Block.FirstLine);
      Block.EndOffset = StartOf(Block.EndLine);
      std::string Text = Contents.slice(Block.BeginOffset, Block.EndOffset).str();
      // Apply back to front so earlier offsets stay valid.
      for (auto It = BlockEdits.rbegin(); It != BlockEdits.rend(); ++It)
        Text.replace(It->getOffset() - Block.BeginOffset, It->getLength(), It->getReplacementText().str());
      Block.NewText = std::move(Text);
      // An edit that swallowed a line break joins the next line to this block.
      if (Block.NewText.empty() || llvm::StringRef(Block.NewText).ends_with("\n") || Block.EndLine >= LineCount)
        break;
      ++Block.EndLine;
      while (I + 1 < Blocks.size() && Blocks[I + 1].first.FirstLine < Block.EndLine) {
        Block.EndLine = std::max(Block.EndLine, Blocks[I + 1].first.EndLine);
        BlockEdits.insert(BlockEdits.end(), Blocks[I + 1].second.begin(), Blocks[I + 1].second.end());
        Blocks.erase(Blocks.begin() + I + 1);
      }
    }
    Result.push_back(Block);
  }
  return Result;
}

void printDiffLine(llvm::raw_ostream &OS, char Marker, llvm::StringRef Line) {
  OS << Marker << Line;
  if (!Line.ends_with("\n"))
    OS << "\n\\ No newline at end of file\n";
}

std::string quotedForLineDirective(llvm::StringRef File) {
  std::string Quoted = "\"";
  for (char C : File) {
    if (C == '\\' || C == '"')
      Quoted += '\\';
    Quoted += C;
  }
  return Quoted + "\"";
}

}  // namespace

std::string unifiedDiff(llvm::StringRef File, llvm::StringRef Contents, const Replacements &Edits) {
  constexpr unsigned Context = 3;
  std::vector<LineBlock> Blocks = lineBlocks(Contents, Edits);
  std::vector<llvm::StringRef> OldLines = splitLines(Contents);
  const unsigned LineCount = OldLines.size();
  std::string Out;
  llvm::raw_string_ostream OS(Out);
  if (Blocks.empty())
    return Out;
  OS << "--- " << File << "\n+++ " << File << "\n";
  long Delta = 0;  // new line number minus old line number, before the current hunk
  for (size_t I = 0; I < Blocks.size();) {
    // A hunk: blocks whose context windows touch.
    size_t J = I + 1;
    while (J < Blocks.size() && Blocks[J].FirstLine <= Blocks[J - 1].EndLine + 2 * Context)
      ++J;
    unsigned HunkBegin = Blocks[I].FirstLine >= Context ? Blocks[I].FirstLine - Context : 0;
    unsigned HunkEnd = std::min(LineCount, Blocks[J - 1].EndLine + Context);
    std::string Body;
    llvm::raw_string_ostream BodyOS(Body);
    unsigned OldCount = 0, NewCount = 0, Line = HunkBegin;
    for (size_t K = I; K < J; ++K) {
      for (; Line < Blocks[K].FirstLine; ++Line, ++OldCount, ++NewCount)
        printDiffLine(BodyOS, ' ', OldLines[Line]);
      for (; Line < Blocks[K].EndLine; ++Line, ++OldCount)
        printDiffLine(BodyOS, '-', OldLines[Line]);
      for (llvm::StringRef NewLine : splitLines(Blocks[K].NewText)) {
        printDiffLine(BodyOS, '+', NewLine);
        ++NewCount;
      }
    }
    for (; Line < HunkEnd; ++Line, ++OldCount, ++NewCount)
      printDiffLine(BodyOS, ' ', OldLines[Line]);
    // A range of zero lines starts at the line before it (diff's convention).
    unsigned OldStart = OldCount ? HunkBegin + 1 : HunkBegin;
    unsigned NewStart = NewCount ? HunkBegin + 1 + Delta : HunkBegin + Delta;
    OS << "@@ -" << OldStart << "," << OldCount << " +" << NewStart << "," << NewCount << " @@\n"
       << Body;
    Delta += long(NewCount) - long(OldCount);
    I = J;
  }
  return Out;
}

std::string rewrittenWithLineDirectives(llvm::StringRef File, llvm::StringRef Contents,
                                        const Replacements &Edits) {
  std::string Quoted = quotedForLineDirective(File);
  std::string Out = "#line 1 " + Quoted + "\n";
  unsigned Cursor = 0;
  for (const LineBlock &Block : lineBlocks(Contents, Edits)) {
    Out += Contents.slice(Cursor, Block.BeginOffset);
    Out += Block.NewText;
    Cursor = Block.EndOffset;
    if (Cursor < Contents.size()) {  // a block that ends before the end of the file ends with a newline
      Out += "#line " + std::to_string(Block.EndLine + 1) + " " + Quoted + "\n";
    }
  }
  Out += Contents.substr(Cursor);
  return Out;
}

}  // namespace lmfuse::rewriter
