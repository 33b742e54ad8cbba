// Merging edits across translation units and presenting them: applied text, unified diff, #line copies.
// Presentation works on line blocks: every edit is widened to whole lines, and edits that share a line
// are one block, so a diff hunk or a #line resync never lands in the middle of a line.
#include "edit_set.h"

#include <algorithm>
#include <optional>
#include <cstdio>

#include "clang/Basic/LangOptions.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/STLExtras.h"
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

bool isUnder(llvm::StringRef File, llvm::StringRef Root) {
  if (Root.empty())
    return true;
  if (!File.starts_with(Root))
    return false;
  return File.size() == Root.size() || Root.ends_with("/") || File[Root.size()] == '/';
}

std::string canonicalPath(llvm::StringRef Path, llvm::StringRef BaseDirectory) {
  llvm::SmallString<256> Absolute(Path);
  if (!llvm::sys::path::is_absolute(Absolute)) {
    Absolute = BaseDirectory;
    llvm::sys::path::append(Absolute, Path);
  }
  // The file system resolves `..` after the links before it (`/bin/../lib` is `/usr/lib` where /bin links
  // to /usr/bin, as the paths Clang builds from its own location do); only a path that does not exist is
  // reduced by its text.
  llvm::SmallString<256> Real;
  if (!llvm::sys::fs::real_path(Absolute, Real))
    return std::string(Real);
  llvm::sys::path::remove_dots(Absolute, /*remove_dot_dot=*/true);
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

// A string literal naming File: quotes and backslashes escaped, control characters (a newline in a path)
// as octal escapes, which #line decodes like any string literal.
std::string quotedForLineDirective(llvm::StringRef File) {
  std::string Quoted = "\"";
  for (unsigned char C : File) {
    if (C == '\\' || C == '"') {
      Quoted += '\\';
      Quoted += char(C);
    } else if (C < 0x20 || C == 0x7f) {
      char Octal[5];
      std::snprintf(Octal, sizeof Octal, "\\%03o", unsigned(C));
      Quoted += Octal;
    } else {
      Quoted += char(C);
    }
  }
  return Quoted + "\"";
}

// A diff header's file name the way GNU diff writes it and `patch` reads it: as is when it is plain,
// else C-quoted (spaces, quotes, backslashes, control characters).
std::string quotedForDiffHeader(llvm::StringRef File) {
  bool Plain = llvm::all_of(File, [](unsigned char C) { return C > 0x20 && C != 0x7f && C != '"' && C != '\\'; });
  if (Plain)
    return File.str();
  std::string Quoted = "\"";
  for (unsigned char C : File) {
    switch (C) {
    case '"': Quoted += "\\\""; break;
    case '\\': Quoted += "\\\\"; break;
    case '\n': Quoted += "\\n"; break;
    case '\t': Quoted += "\\t"; break;
    case '\r': Quoted += "\\r"; break;
    default:
      if (C < 0x20 || C == 0x7f) {
        char Octal[5];
        std::snprintf(Octal, sizeof Octal, "\\%03o", unsigned(C));
        Quoted += Octal;
      } else {
        Quoted += char(C);
      }
    }
  }
  return Quoted + "\"";
}

constexpr llvm::StringLiteral ByteOrderMark = "\xEF\xBB\xBF";

// The line ending a file uses, judged by its first line ("\n" for a file without one).
}  // namespace

llvm::StringRef newlineOf(llvm::StringRef Contents) {
  size_t End = Contents.find('\n');
  return End != llvm::StringRef::npos && End > 0 && Contents[End - 1] == '\r' ? "\r\n" : "\n";
}

std::string unifiedDiff(llvm::StringRef File, llvm::StringRef Contents, const Replacements &Edits) {
  constexpr unsigned Context = 3;
  std::vector<LineBlock> Blocks = lineBlocks(Contents, Edits);
  std::vector<llvm::StringRef> OldLines = splitLines(Contents);
  const unsigned LineCount = OldLines.size();
  std::string Out;
  llvm::raw_string_ostream OS(Out);
  if (Blocks.empty())
    return Out;
  std::string Shown = quotedForDiffHeader(File);
  OS << "--- " << Shown << "\n+++ " << Shown << "\n";
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

namespace {

// The newlines of Contents a directive may follow: not inside a token (a comment continued by a backslash, a raw
// string, a block comment) nor ending a line continued by a backslash. A `#line` after another would join the
// comment or the string, or the line before it.
class DirectivePlaces {
public:
  explicit DirectivePlaces(llvm::StringRef Contents) : Text(Contents.str()) {
    clang::LangOptions Language;
    Language.CPlusPlus = Language.CPlusPlus11 = Language.CPlusPlus14 = Language.CPlusPlus17 = true;
    Language.LineComment = Language.Digraphs = true;
    clang::Lexer Raw(clang::SourceLocation(), Language, Text.c_str(), Text.c_str(), Text.c_str() + Text.size());
    Raw.SetCommentRetentionState(true);
    for (clang::Token Token;;) {
      const bool Last = Raw.LexFromRawLexer(Token);
      if (Token.is(clang::tok::eof))
        break;
      unsigned Begin = Token.getLocation().getRawEncoding();  // the offset: the lexer's base location is 0
      unsigned End = Begin + Token.getLength();
      if (llvm::StringRef(Text).slice(Begin, End).contains('\n'))
        Spanning.push_back({Begin, End});
      if (Last)
        break;
    }
  }

  /// Whether a directive may start at Offset, the start of a line.
  bool before(unsigned Offset) const {
    if (Offset == 0 || Offset > Text.size())
      return true;
    for (const auto &[Begin, End] : Spanning)
      if (Begin < Offset && Offset < End)
        return false;
    unsigned Before = Offset - 1;  // the newline
    if (Before > 0 && Text[Before - 1] == '\r')
      --Before;
    while (Before > 0 && (Text[Before - 1] == ' ' || Text[Before - 1] == '\t'))
      --Before;
    return !(Before > 0 && Text[Before - 1] == '\\');
  }

private:
  std::string Text;  // the lexer reads up to a terminating NUL
  std::vector<std::pair<unsigned, unsigned>> Spanning;
};

}  // namespace

std::string rewrittenWithLineDirectives(llvm::StringRef File, llvm::StringRef Contents,
                                        const Replacements &Edits,
                                        std::vector<std::pair<unsigned, unsigned>> *Inserted) {
  auto Directive = [&](std::string &Out, const std::string &Text) {
    if (Inserted)
      Inserted->emplace_back(Out.size(), Text.size());
    Out += Text;
  };
  std::string Quoted = quotedForLineDirective(File);
  llvm::StringRef Newline = newlineOf(Contents);
  // A byte-order mark stays the first bytes of the copy, before the directive.
  unsigned Cursor = Contents.starts_with(ByteOrderMark) ? ByteOrderMark.size() : 0;
  std::string Out = Contents.take_front(Cursor).str();
  Directive(Out, "#line 1 " + Quoted + Newline.str());
  std::vector<LineBlock> Blocks = lineBlocks(Contents, Edits);
  std::optional<DirectivePlaces> Places;
  if (!Blocks.empty())
    Places.emplace(Contents);
  for (size_t I = 0; I < Blocks.size(); ++I) {
    const LineBlock &Block = Blocks[I];
    Out += Contents.slice(Cursor, Block.BeginOffset);
    // The first line's block starts with the byte-order mark already written above (edits never touch it).
    Out += llvm::StringRef(Block.NewText).drop_front(Cursor > Block.BeginOffset ? Cursor - Block.BeginOffset : 0);
    Cursor = Block.EndOffset;
    // The directive goes at the first line start after the block where one may stand, before the next block;
    // the lines before it (the rest of a comment or a string) are copied as they are.
    unsigned Line = Block.EndLine + 1, At = Cursor;
    const unsigned Limit = I + 1 < Blocks.size() ? Blocks[I + 1].BeginOffset : Contents.size();
    while (At < Limit && !Places->before(At)) {
      size_t Next = Contents.find('\n', At);
      if (Next == llvm::StringRef::npos || Next + 1 > Limit)
        break;
      At = Next + 1;
      ++Line;
    }
    if (At < Contents.size() && At <= Limit && Places->before(At)) {
      Out += Contents.slice(Cursor, At);
      Cursor = At;
      Directive(Out, "#line " + std::to_string(Line) + " " + Quoted + Newline.str());
    }
  }
  Out += Contents.substr(Cursor);
  return Out;
}

void EditSet::fitTo(llvm::StringRef File, llvm::StringRef Contents) {
  auto It = ByFile.find(File.str());
  if (It == ByFile.end())
    return;
  unsigned Mark = Contents.starts_with(ByteOrderMark) ? ByteOrderMark.size() : 0;
  bool Crlf = newlineOf(Contents) == "\r\n";
  std::set<EditKey> Fitted;
  for (auto [Offset, Length, Text] : It->second) {
    if (Offset < Mark && Length == 0)
      Offset = Mark;  // an insertion at the top goes after the mark, never before it
    if (Crlf) {
      std::string WithCr;
      for (size_t I = 0; I < Text.size(); ++I) {
        if (Text[I] == '\n' && (I == 0 || Text[I - 1] != '\r'))
          WithCr += '\r';
        WithCr += Text[I];
      }
      Text = std::move(WithCr);
    }
    Fitted.insert({Offset, Length, std::move(Text)});
  }
  It->second = std::move(Fitted);
}

}  // namespace lmfuse::rewriter
