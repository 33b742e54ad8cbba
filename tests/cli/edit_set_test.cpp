// Edit merging across translation units and the two presentations of edits (unified diff, #line copy),
// checked on a table of merge cases and on random files with random edits.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "edit_set.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

using clang::tooling::Replacement;
using clang::tooling::Replacements;
using lmfuse::rewriter::EditSet;

namespace {

const char *File = "/src/model.h";

struct MergeCase {
  const char *Name;
  std::vector<std::tuple<unsigned, unsigned, std::string>> FirstUnit, SecondUnit;
  bool Conflict;
  size_t MergedEdits;  // when there is no conflict
};

// Contents: ten lines of "line N\n" (7 bytes each), so offset 7*k starts line k+1.
std::string tenLines() {
  std::string Text;
  for (int I = 1; I <= 10; ++I)
    Text += "line " + std::to_string(I % 10) + "\n";
  return Text;
}

}  // namespace

TEST_CASE("edits of one file from two units: identical merge, different overlapping conflict", "[edit_set]") {
  const MergeCase Cases[] = {
      {"identical edits merge", {{7, 6, "LINE 2"}, {0, 0, "#include <x>\n"}}, {{7, 6, "LINE 2"}, {0, 0, "#include <x>\n"}}, false, 2},
      {"disjoint edits both kept", {{7, 6, "LINE 2"}}, {{21, 6, "LINE 4"}}, false, 2},
      {"adjacent ranges do not overlap", {{7, 3, "LIN"}}, {{10, 3, "E 2"}}, false, 2},
      {"insertion before a replaced range", {{7, 0, "// note\n"}}, {{7, 6, "LINE 2"}}, false, 2},
      {"different insertions at one offset", {{0, 0, "#include <a>\n"}}, {{0, 0, "#include <b>\n"}}, true, 0},
      {"overlapping different replacements", {{7, 6, "LINE 2"}}, {{9, 6, "xx"}}, true, 0},
      {"insertion inside a replaced range", {{7, 6, "LINE 2"}}, {{9, 0, "zz"}}, true, 0},
      {"same range, different text", {{7, 6, "LINE 2"}}, {{7, 6, "line two"}}, true, 0},
  };
  std::string Contents = tenLines();
  for (const MergeCase &Case : Cases) {
    SECTION(Case.Name) {
      EditSet Edits;
      for (const auto &[Offset, Length, Text] : Case.FirstUnit)
        Edits.add(Replacement(File, Offset, Length, Text));
      for (const auto &[Offset, Length, Text] : Case.SecondUnit)
        Edits.add(Replacement(File, Offset, Length, Text));
      std::string Conflict = Edits.conflictFor(File, Contents);
      CHECK(!Conflict.empty() == Case.Conflict);
      if (Case.Conflict) {
        CHECK(llvm::StringRef(Conflict).contains(" at line "));  // names the lines
      } else {
        CHECK(Edits.editsFor(File).size() == Case.MergedEdits);
      }
      Edits.drop(File);
      CHECK(Edits.empty());
    }
  }
}

namespace {

std::vector<std::string> lines(llvm::StringRef Text) {
  std::vector<std::string> Lines;
  while (!Text.empty()) {
    auto [Line, Rest] = Text.split('\n');
    Lines.push_back(Line.str());
    Text = Rest;
  }
  return Lines;
}

// Applies a unified diff to Old (as `patch` would, without fuzz); fails the test on any mismatch.
std::string applyUnifiedDiff(const std::string &Old, const std::string &Diff) {
  std::vector<std::string> OldLines = lines(Old), DiffLines = lines(Diff), Result;
  size_t Next = 0;  // next old line (0-based) not yet copied
  for (size_t I = 2; I < DiffLines.size();) {
    unsigned OldStart, OldCount, NewStart, NewCount;
    REQUIRE(sscanf(DiffLines[I].c_str(), "@@ -%u,%u +%u,%u @@", &OldStart, &OldCount, &NewStart, &NewCount) == 4);
    size_t Begin = OldCount ? OldStart - 1 : OldStart;
    REQUIRE(Begin >= Next);
    Result.insert(Result.end(), OldLines.begin() + Next, OldLines.begin() + Begin);
    Next = Begin;
    unsigned SeenOld = 0, SeenNew = 0;
    for (++I; I < DiffLines.size() && DiffLines[I].rfind("@@", 0) != 0; ++I) {
      char Marker = DiffLines[I][0];
      std::string Line = DiffLines[I].substr(1);
      if (Marker == ' ' || Marker == '-') {
        REQUIRE(Next < OldLines.size());
        CHECK(OldLines[Next] == Line);
        ++Next;
        ++SeenOld;
      }
      if (Marker == ' ' || Marker == '+') {
        Result.push_back(Line);
        ++SeenNew;
      }
    }
    CHECK(SeenOld == OldCount);
    CHECK(SeenNew == NewCount);
  }
  Result.insert(Result.end(), OldLines.begin() + Next, OldLines.end());
  std::string Text;
  for (const std::string &Line : Result)
    Text += Line + "\n";
  return Text;
}

// Follows #line directives: every line that is not one gets the (line, file) a compiler would report.
std::vector<std::pair<unsigned, std::string>> presumedLines(const std::string &Copy,
                                                            std::vector<std::string> &Text) {
  std::vector<std::pair<unsigned, std::string>> Presumed;
  unsigned Line = 1;
  for (const std::string &Raw : lines(Copy)) {
    unsigned Directive;
    if (sscanf(Raw.c_str(), "#line %u", &Directive) == 1) {
      Line = Directive;
      continue;
    }
    Presumed.push_back({Line++, Raw});
    Text.push_back(Raw);
  }
  return Presumed;
}

}  // namespace

TEST_CASE("random edits: the diff rebuilds the rewrite and #line keeps every untouched line's number",
          "[edit_set]") {
  std::mt19937 Random(std::random_device{}());
  unsigned TotalChecked = 0;
  for (int Round = 0; Round < 200; ++Round) {
    // A file of 1..40 lines with distinct contents, ending in a newline.
    std::uniform_int_distribution<int> LineCount(1, 40);
    int N = LineCount(Random);
    std::string Old;
    for (int I = 0; I < N; ++I)
      Old += "  statement_" + std::to_string(I + 1) + "(x);\n";
    // 1..4 non-overlapping edits: replacements inside a line, multi-line replacements, whole-line insertions.
    Replacements Edits;
    std::uniform_int_distribution<int> EditCount(1, 4), Kind(0, 2);
    std::uniform_int_distribution<unsigned> Offset(0, Old.size() - 1);
    for (int E = EditCount(Random); E > 0; --E) {
      unsigned At = Offset(Random);
      Replacement Edit;
      switch (Kind(Random)) {
      case 0:  // a few bytes inside the text, replaced by text with a newline
        Edit = Replacement(File, At, std::min<unsigned>(3, Old.size() - At), "A\nB");
        break;
      case 1: {  // a whole line inserted before the line holding At
        unsigned LineStart = llvm::StringRef(Old).take_front(At).rfind('\n') + 1;
        Edit = Replacement(File, LineStart, 0, "#include <lmfuse/torch.h>\n");
        break;
      }
      default:  // a span across lines, replaced by one line's worth
        Edit = Replacement(File, At, std::min<unsigned>(20, Old.size() - At), "fused()");
        break;
      }
      llvm::consumeError(Edits.add(Edit));  // overlapping picks are skipped
    }
    INFO("round " << Round << "\n" << Old);
    std::string New = lmfuse::rewriter::applyEdits(File, Old, Edits).get();
    std::string Diff = lmfuse::rewriter::unifiedDiff(File, Old, Edits);
    if (New != Old) {
      REQUIRE(llvm::StringRef(Diff).starts_with(std::string("--- ") + File + "\n+++ " + File + "\n"));
      std::string Rebuilt = applyUnifiedDiff(Old, Diff);
      // The diff works on whole lines; a rewrite without a final newline gets one from lines().
      CHECK(Rebuilt == (llvm::StringRef(New).ends_with("\n") ? New : New + "\n"));
    }

    std::vector<std::string> CopyText;
    auto Presumed = presumedLines(lmfuse::rewriter::rewrittenWithLineDirectives(File, Old, Edits), CopyText);
    // Without the directives, the copy is the rewrite.
    std::string Joined;
    for (const std::string &Line : CopyText)
      Joined += Line + "\n";
    CHECK(Joined == (llvm::StringRef(New).ends_with("\n") ? New : New + "\n"));
    // Every original line away from the edits (no edit touches it or its neighbours) is reported at its
    // original number; lines inside an edited block are not resynced one by one.
    std::vector<std::string> OldLines = lines(Old);
    std::vector<unsigned> Starts{0};
    for (unsigned I = 0; I < Old.size(); ++I)
      if (Old[I] == '\n')
        Starts.push_back(I + 1);  // Starts[N] == Old.size()
    auto Touched = [&](unsigned Line) {  // 1-based; out-of-range neighbours are untouched
      if (Line < 1 || Line > OldLines.size())
        return false;
      for (const Replacement &Edit : Edits)
        if (Edit.getOffset() <= Starts[Line] && Edit.getOffset() + Edit.getLength() >= Starts[Line - 1])
          return true;
      return false;
    };
    std::map<std::string, unsigned> OriginalLine;  // the lines are distinct
    for (unsigned I = 0; I < OldLines.size(); ++I)
      OriginalLine[OldLines[I]] = I + 1;
    unsigned Checked = 0;
    for (const auto &[Line, Text] : Presumed)
      if (auto It = OriginalLine.find(Text); It != OriginalLine.end())
        if (!Touched(It->second - 1) && !Touched(It->second) && !Touched(It->second + 1)) {
          CHECK(Line == It->second);
          ++Checked;
        }
    TotalChecked += Checked;
  }
  CHECK(TotalChecked > 200);  // the property was exercised, not vacuously true
}

namespace {

// A file's own form, and what its rewrite and its #line copy must look like.
struct FormCase {
  const char *Name;
  std::string Path, Contents;
  unsigned Offset, Length;
  std::string Text;
  std::string Rewritten, Copy;
};

}  // namespace

TEST_CASE("a file's form is kept: byte-order mark first, CRLF lines, escaped #line names, directives where they may stand",
          "[edit_set]") {
  const std::string Mark = "\xEF\xBB\xBF";
  const FormCase Cases[] = {
      {"an insertion at the top goes after the byte-order mark", "/s/a.cpp", Mark + "#include <a>\nx;\n", 0, 0,
       "#include <b>\n", Mark + "#include <b>\n#include <a>\nx;\n",
       // The insertion shares the first line's block (it does not start at the line's first byte), so the
       // directive resyncs after that block, as after any edited block.
       Mark + "#line 1 \"/s/a.cpp\"\n#include <b>\n#include <a>\n#line 2 \"/s/a.cpp\"\nx;\n"},
      {"an edit of the first line keeps one mark", "/s/a.cpp", Mark + "x;\ny;\n", 3, 1, "z", Mark + "z;\ny;\n",
       Mark + "#line 1 \"/s/a.cpp\"\nz;\n#line 2 \"/s/a.cpp\"\ny;\n"},
      {"inserted lines and directives end in CRLF in a CRLF file", "/s/a.cpp", "a;\r\nb;\r\n", 4, 0,
       "c;\nd;\n", "a;\r\nc;\r\nd;\r\nb;\r\n",
       "#line 1 \"/s/a.cpp\"\r\na;\r\nc;\r\nd;\r\n#line 2 \"/s/a.cpp\"\r\nb;\r\n"},
      // A directive never lands inside a comment a backslash continues, a raw string or a continued line: it
      // goes at the next line start where one may stand (the lines between are the original's, compiled as before).
      {"a comment continued by a backslash on the edited line", "/s/a.cpp", "a; // off \\\nb = 1;\nc;\n", 0, 2,
       "z;", "z; // off \\\nb = 1;\nc;\n", "#line 1 \"/s/a.cpp\"\nz; // off \\\nb = 1;\n#line 3 \"/s/a.cpp\"\nc;\n"},
      {"a raw string opened on the edited line", "/s/a.cpp", "a; auto s = R\"(x\ny)\";\nc;\n", 0, 2, "z;",
       "z; auto s = R\"(x\ny)\";\nc;\n", "#line 1 \"/s/a.cpp\"\nz; auto s = R\"(x\ny)\";\n#line 3 \"/s/a.cpp\"\nc;\n"},
      {"a line continued by a backslash", "/s/a.cpp", "a; int \\\nb;\nc;\n", 0, 2, "z;", "z; int \\\nb;\nc;\n",
       "#line 1 \"/s/a.cpp\"\nz; int \\\nb;\n#line 3 \"/s/a.cpp\"\nc;\n"},
      {"quotes, backslashes and a newline in the name are escaped", "/s/q\"b\\n\nl.cpp", "a;\nb;\n", 0, 2, "c;",
       "c;\nb;\n", "#line 1 \"/s/q\\\"b\\\\n\\012l.cpp\"\nc;\n#line 2 \"/s/q\\\"b\\\\n\\012l.cpp\"\nb;\n"},
  };
  for (const FormCase &Case : Cases) {
    SECTION(Case.Name) {
      EditSet Edits;
      Edits.add(Replacement(Case.Path, Case.Offset, Case.Length, Case.Text));
      Edits.fitTo(Case.Path, Case.Contents);
      Replacements Fitted = Edits.editsFor(Case.Path);
      CHECK(lmfuse::rewriter::applyEdits(Case.Path, Case.Contents, Fitted).get() == Case.Rewritten);
      CHECK(lmfuse::rewriter::rewrittenWithLineDirectives(Case.Path, Case.Contents, Fitted) == Case.Copy);
    }
  }
}

TEST_CASE("diff headers: plain names as they are, others C-quoted as GNU diff writes them", "[edit_set]") {
  const std::pair<const char *, const char *> Cases[] = {
      {"src/model.cpp", "src/model.cpp"},
      {"with space/model.cpp", "\"with space/model.cpp\""},
      {"q\"uote.cpp", "\"q\\\"uote.cpp\""},
      {"back\\slash.cpp", "\"back\\\\slash.cpp\""},
      {"new\nline.cpp", "\"new\\nline.cpp\""},
      {"tab\tbed.cpp", "\"tab\\tbed.cpp\""},
  };
  for (const auto &[Name, Shown] : Cases) {
    INFO(Name);
    Replacements Edits;
    REQUIRE(!Edits.add(Replacement(Name, 0, 1, "y")));
    std::string Diff = lmfuse::rewriter::unifiedDiff(Name, "x;\n", Edits);
    CHECK(llvm::StringRef(Diff).starts_with(std::string("--- ") + Shown + "\n+++ " + Shown + "\n"));
  }
}

TEST_CASE("canonical paths resolve `..` after a linked folder as the file system does", "[edit_set]") {
  // <tmp>/usr/bin/.. is <tmp>/usr; <tmp>/bin links to usr/bin, so <tmp>/bin/../include is <tmp>/usr/include,
  // not <tmp>/include (Clang builds such paths from a compiler found through a linked /bin).
  llvm::SmallString<256> Root;
  REQUIRE(!llvm::sys::fs::createUniqueDirectory("lmfuse-canonical", Root));
  llvm::SmallString<256> Real;
  REQUIRE(!llvm::sys::fs::real_path(Root, Real));
  std::string Base(Real);
  REQUIRE(!llvm::sys::fs::create_directories(Base + "/usr/bin"));
  REQUIRE(!llvm::sys::fs::create_directories(Base + "/usr/include"));
  { std::error_code EC; llvm::raw_fd_ostream(Base + "/usr/include/x.h", EC) << "int x;\n"; REQUIRE(!EC); }
  REQUIRE(!llvm::sys::fs::create_link("usr/bin", Base + "/bin"));
  CHECK(lmfuse::rewriter::canonicalPath("bin/../include/x.h", Base) == Base + "/usr/include/x.h");
  CHECK(lmfuse::rewriter::canonicalPath(Base + "/bin/../include/x.h", "/") == Base + "/usr/include/x.h");
  // A path that does not exist is reduced by its text.
  CHECK(lmfuse::rewriter::canonicalPath("gone/../y.h", Base) == Base + "/y.h");
  llvm::sys::fs::remove_directories(Base);
}
