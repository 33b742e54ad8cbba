// The lmfuse executable end to end: each case builds a small source tree in a fresh temporary folder,
// runs the built binary on it (llvm::sys::ExecuteAndWait) and checks exit code, files and audit.
// Sources parse against tests/cli/stubs (a few LibTorch declarations and the agreed lmfuse call), so
// every run takes milliseconds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "clang/Tooling/Core/Replacement.h"
#include "clang/Tooling/DiagnosticsYaml.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/YAMLTraits.h"
#include "llvm/Support/raw_ostream.h"

#include "cli_support.h"



// ---------------------------------------------------------------------------------------------------
// Exit codes
// ---------------------------------------------------------------------------------------------------

TEST_CASE("exit 0: a dry run prints a unified diff and leaves the source alone", "[cli][exit]") {
  SourceTree Tree({{"model.cpp", ModelSource}});
  ToolRun Run = runLmfuse(withFlags({Tree.path("model.cpp")}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 0);
  CHECK(Tree.read("model.cpp") == ModelSource);
  CHECK(llvm::StringRef(Run.Out).starts_with("--- " + Tree.path("model.cpp") + "\n+++ "));
  CHECK(countOf(Run.Out, "\n+#include <lmfuse/torch.h>\n") == 1);
  CHECK(countOf(Run.Out, "lmfuse::linear_cross_entropy(") == 1);
  CHECK(countOf(Run.Out, "\n@@ -") >= 1);
  // Not a terminal: no progress lines.
  CHECK(countOf(Run.Err, "[1/1]") == 0);
}

TEST_CASE("exit 1: a translation unit with compile errors is left byte-identical, with a parse-error entry",
          "[cli][exit]") {
  SourceTree Tree({{"broken.cpp", BrokenSource}, {"model.cpp", ModelSource}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse(
      withFlags({"--in-place", "--audit", Audit, Tree.path("broken.cpp"), Tree.path("model.cpp")}, Tree));
  CHECK(Run.ExitCode == 1);
  CHECK(Tree.read("broken.cpp") == BrokenSource);
  CHECK(countOf(Run.Err, "no_such_method") >= 1);  // the compiler's message reaches the user
  llvm::json::Value Document = readAudit(Audit);
  const llvm::json::Array &Sites = sitesOf(Document);
  REQUIRE(Sites.size() == 2);
  CHECK(field(Sites[0], "file") == Tree.path("broken.cpp"));
  CHECK(field(Sites[0], "status") == "failed");
  CHECK(field(Sites[0], "reason") == "parse-error");
  CHECK(Sites[0].getAsObject()->getInteger("line") == 3);
  CHECK(countOf(field(Sites[0], "detail"), "no_such_method") == 1);
  // The other unit is still rewritten.
  CHECK(field(Sites[1], "status") == "patched");
  CHECK(countOf(Tree.read("model.cpp"), "lmfuse::linear_cross_entropy(") == 1);
}

TEST_CASE("exit 1: a rewrite that does not re-parse is reparse-failed and nothing is written", "[cli][exit]") {
  // An lmfuse/torch.h found before the real one that lacks the fused call.
  SourceTree Tree({{"model.cpp", ModelSource}, {"old/lmfuse/torch.h", "#pragma once\nnamespace lmfuse {}\n"}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse(withFlags({"--in-place", "--audit", Audit, Tree.path("model.cpp")}, Tree,
                                    {"-I" + Tree.path("old")}));
  CHECK(Run.ExitCode == 1);
  CHECK(Tree.read("model.cpp") == ModelSource);
  llvm::json::Value Document = readAudit(Audit);
  const llvm::json::Array &Sites = sitesOf(Document);
  REQUIRE(Sites.size() == 1);
  CHECK(field(Sites[0], "status") == "failed");
  CHECK(field(Sites[0], "reason") == "reparse-failed");
  INFO(field(Sites[0], "detail"));
  CHECK(countOf(field(Sites[0], "detail"), "does not compile") == 1);
  CHECK(countOf(field(Sites[0], "detail"), "lmfuse") >= 1);
}

// The rewrite includes lmfuse's header after the file's last #include: what the program has set up there (a
// macro a word of the header expands to, a #pragma pack, a namespace around it) would make the library's
// declarations other code than the library was built from; the re-parse finds it and nothing is written.
TEST_CASE("the program's state where the rewrite includes lmfuse's header fails the re-parse, nothing written",
          "[cli][exit]") {
  const std::string Body = llvm::StringRef(ModelSource).split('\n').second.str();  // after its #include
  struct Case {
    const char *Name;
    std::string Source;
    const char *Named;  // what the audit's detail names; "" for a site that stays patched
    const char *Main = "model.cpp";
    std::pair<const char *, const char *> Other = {"empty.h", "#pragma once\n"};  // a second file of the tree
  };
  const Case Cases[] = {
      {"a macro named like a word of the header, undefined after the include",
       "#include <torch/torch.h>\n#define int64_t int\n#include \"empty.h\"\n#undef int64_t\n" + Body,
       "the program's macro `int64_t` (model.cpp:2)"},
      {"a #pragma pack around the include", "#include <torch/torch.h>\n#pragma pack(push, 1)\n#include \"empty.h\"\n#pragma pack(pop)\n" + Body,
       "`#pragma pack` of the program is in effect"},
      {"the include inside a namespace of the program", "#include <torch/torch.h>\nnamespace app {\n#include \"empty.h\"\n" + Body + "}\n",
       "inside a namespace, class or linkage block of the program"},
      {"a macro of the program the header does not spell", "#include <torch/torch.h>\n#define VOCAB 32\n#include \"empty.h\"\n" + Body, ""},
      // Declarations of the program's in the library's namespace, which the rewritten calls may resolve to.
      {"a function of the library's defined by the program, named from outside its namespace",
       "#include <torch/torch.h>\n#include <lmfuse/torch.h>\nbool lmfuse::enabled() { return false; }\n" + Body,
       "the program declares `lmfuse::enabled` in namespace `lmfuse` (model.cpp:"},
      {"the library's namespace opened in a header outside the edit root",
       "#include <torch/torch.h>\n#include \"../ext/compat.h\"\n" + Body,
       "the program declares `lmfuse` in namespace `lmfuse` (compat.h:2)", "src/model.cpp",
       {"ext/compat.h", "#pragma once\nnamespace lmfuse { inline int helper() { return 1; } }\n"}},
      {"the library's namespace opened in a program header of another folder named like the library's",
       "#include <torch/torch.h>\n#include \"src/lmfuse/compat.h\"\n" + Body,
       "the program declares `lmfuse` in namespace `lmfuse` (compat.h:2)", "model.cpp",
       {"src/lmfuse/compat.h", "#pragma once\nnamespace lmfuse { inline int helper() { return 1; } }\n"}},
      {"the library's namespace opened in a main file whose folder is named like the library's",
       "#include <torch/torch.h>\nnamespace lmfuse { inline int helper() { return 1; } }\n" + Body,
       "the program declares `lmfuse` in namespace `lmfuse` (model.cpp:", "lmfuse/model.cpp"},
  };
  for (const Case &Each : Cases) {
    DYNAMIC_SECTION(Each.Name) {
      SourceTree Tree({{Each.Main, Each.Source.c_str()}, {"empty.h", "#pragma once\n"}, Each.Other});
      std::string Audit = Tree.path("audit.json");
      ToolRun Run = runLmfuse(withFlags({"--in-place", "--audit", Audit, Tree.path(Each.Main)}, Tree));
      INFO(Run.Err);
      llvm::json::Value Document = readAudit(Audit);
      const llvm::json::Array &Sites = sitesOf(Document);
      REQUIRE(Sites.size() == 1);
      INFO(field(Sites[0], "detail"));
      if (*Each.Named) {
        CHECK(Run.ExitCode == 1);
        CHECK(Tree.read(Each.Main) == Each.Source);
        CHECK(field(Sites[0], "reason") == "reparse-failed");
        CHECK(countOf(field(Sites[0], "detail"), Each.Named) == 1);
      } else {
        CHECK(Run.ExitCode == 0);
        CHECK(field(Sites[0], "status") == "patched");
      }
    }
  }
}

// With --out-dir the copies carry #line directives, and the re-parse reads them as written: a failure below the
// include the rewrite inserts is named at the original's line, as the build would name it, not one line late.
TEST_CASE("--out-dir: the re-parse reads the copies as written, #line directives included", "[cli][exit]") {
  const std::string Source = std::string(ModelSource) + "namespace lmfuse { inline int helper() { return 1; } }\n";
  const unsigned Line = unsigned(std::count(Source.begin(), Source.end(), '\n'));
  // (In a folder named like the library's, so the analysis leaves the opening to the re-parse.)
  SourceTree Tree({{"lmfuse/model.cpp", Source.c_str()}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run =
      runLmfuse(withFlags({"--out-dir", Tree.path("out"), "--audit", Audit, Tree.path("lmfuse/model.cpp")}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 1);
  llvm::json::Value Document = readAudit(Audit);
  const llvm::json::Array &Sites = sitesOf(Document);
  REQUIRE(Sites.size() == 1);
  INFO(field(Sites[0], "detail"));
  CHECK(field(Sites[0], "reason") == "reparse-failed");
  CHECK(countOf(field(Sites[0], "detail"), "in namespace `lmfuse` (model.cpp:" + std::to_string(Line) + ")") == 1);
}

// What a site's edits spell again is compared in the re-parse of each unit, through the driver: with the copies'
// #line directives and a file whose lines end in "\r\n" (both shift where the copies lie in what is parsed), a
// site that spells its input again where a local hides it is refused, and its file is not written, so the other
// site of the file fails; the same file without that site is patched in every mode.
TEST_CASE("the re-parse compares what each site spells again, in place and in --out-dir copies, LF and CRLF",
          "[cli][respelling]") {
  const std::string Hidden = std::string(ModelSource) + R"cpp(
torch::Tensor hidden_again(torch::nn::Linear &head, torch::Tensor h, torch::Tensor other, torch::Tensor labels) {
  auto logits = head(h);
  {
    torch::Tensor h = other, loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
}
)cpp";
  auto WithCrlf = [](std::string Text) {
    std::string Out;
    for (char C : Text)
      Out += C == '\n' ? std::string("\r\n") : std::string(1, C);
    return Out;
  };
  for (bool OutDir : {false, true})
    for (bool Crlf : {false, true})
      for (bool WithHidden : {false, true}) {
        std::string Source = WithHidden ? Hidden : std::string(ModelSource);
        if (Crlf)
          Source = WithCrlf(Source);
        DYNAMIC_SECTION((OutDir ? "--out-dir" : "in place") << (Crlf ? ", CRLF" : ", LF")
                                                             << (WithHidden ? ", with the hidden input" : "")) {
          SourceTree Tree({{"src/model.cpp", Source.c_str()}});
          std::string Audit = Tree.path("audit.json");
          std::vector<std::string> Arguments = {"--audit", Audit, Tree.path("src/model.cpp")};
          if (OutDir)
            Arguments.insert(Arguments.begin(), {"--out-dir", Tree.path("out"), "--edit-root", Tree.path("src")});
          else
            Arguments.insert(Arguments.begin(), "--in-place");
          ToolRun Run = runLmfuse(withFlags(Arguments, Tree));
          INFO(Run.Err);
          llvm::json::Value Document = readAudit(Audit);
          const llvm::json::Array &Sites = sitesOf(Document);
          REQUIRE(Sites.size() == (WithHidden ? 2u : 1u));
          std::string Written = OutDir ? (fileExists(Tree.path("out/model.cpp")) ? readFile(Tree.path("out/model.cpp"))
                                                                                : std::string())
                                       : readFile(Tree.path("src/model.cpp"));
          if (!WithHidden) {
            CHECK(Run.ExitCode == 0);
            CHECK(field(Sites[0], "status") == "patched");
            CHECK(countOf(Written, "lmfuse::linear_cross_entropy(") == 1);
            continue;
          }
          INFO(field(Sites[0], "detail") << "\n" << field(Sites[1], "detail"));
          CHECK(Run.ExitCode == 1);
          CHECK(field(Sites[0], "status") == "failed");
          CHECK(field(Sites[0], "reason") == "reparse-failed");
          CHECK(field(Sites[1], "status") == "unmatched");
          CHECK(field(Sites[1], "reason") == "inputs-modified");
          CHECK(countOf(field(Sites[1], "detail"), "the head's input `h`") == 1);
          CHECK(countOf(field(Sites[1], "detail"), "in the re-parse of the rewritten code") == 1);
          CHECK(countOf(Written, "lmfuse::linear_cross_entropy(") == 0);
        }
      }
}

// A copy that spans lines in a file whose lines end in "\r\n" keeps its own "\r"s: the copies after it in the same
// edit are found where the edit put them, and the site is patched.
TEST_CASE("a copied part spanning lines of a CRLF file is compared where it is written", "[cli][respelling]") {
  std::string Source = R"cpp(#include <torch/torch.h>
namespace F = torch::nn::functional;

struct Model : torch::nn::Module {
  torch::Tensor weights[2];
  torch::Tensor forward(const torch::Tensor &h, const torch::Tensor &labels) {
    auto logits = F::linear(h, weights[
        0]);
    if (labels.
        defined())
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return {};
  }
};
)cpp";
  std::string Crlf;
  for (char C : Source)
    Crlf += C == '\n' ? std::string("\r\n") : std::string(1, C);
  SourceTree Tree({{"model.cpp", Crlf.c_str()}});
  ToolRun Run = runLmfuse(withFlags({"--in-place", "--audit", Tree.path("audit.json"), Tree.path("model.cpp")}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 0);
  llvm::json::Value Document = readAudit(Tree.path("audit.json"));
  const llvm::json::Array &Sites = sitesOf(Document);
  REQUIRE(Sites.size() == 1);
  INFO(field(Sites[0], "detail"));
  CHECK(field(Sites[0], "status") == "patched");
  CHECK(countOf(readFile(Tree.path("model.cpp")), "lmfuse::linear_cross_entropy(") == 1);
}

// A file that includes a part of itself after its functions: the fused call's header goes in after the last
// include before the first edit, so the rewritten code below it sees the header (after the file's last include,
// the re-parse failed: `lmfuse` undeclared where the site is).
TEST_CASE("--out-dir: the fused call's include goes before the first edit where an include follows the site",
          "[cli]") {
  const std::string Source = std::string(ModelSource) + "#include \"tail.inc\"\nint after_model = TAIL_VALUE;\n";
  SourceTree Tree({{"src/model.cpp", Source.c_str()}, {"src/tail.inc", "#define TAIL_VALUE 3\n"}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse(withFlags({"--out-dir", Tree.path("out"), "--edit-root", Tree.path("src"), "--audit", Audit,
                                     Tree.path("src/model.cpp")},
                                    Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 0);
  llvm::json::Value Document = readAudit(Audit);
  const llvm::json::Array &Sites = sitesOf(Document);
  REQUIRE(Sites.size() == 1);
  INFO(field(Sites[0], "detail"));
  CHECK(field(Sites[0], "status") == "patched");
  const std::string Copy = readFile(Tree.path("out/model.cpp"));
  const size_t Include = Copy.find("#include <lmfuse/torch.h>");
  REQUIRE(Include != std::string::npos);
  CHECK(Include < Copy.find("lmfuse::linear_cross_entropy("));
  CHECK(Include > Copy.find("#include <torch/torch.h>"));
}

// The library's headers are the files of the folders --library-include names (lmfuse_rewrite passes
// lmfuse::torch's), by default the tool's own. A unit that reads another file as one of them (the program's own
// lmfuse/torch.h ahead of the library's on the include path: a copy with its own changes, or a wrapper including
// the library's after code of its own) fails the re-parse, naming both files: its code would be compiled as the
// library's.
TEST_CASE("--library-include: a program's own lmfuse header read in the library's place fails the re-parse",
          "[cli][exit]") {
  llvm::SmallString<256> StubHeader(LMFUSE_CLI_STUBS);
  llvm::sys::path::append(StubHeader, "lmfuse", "torch.h");
  auto Library = llvm::MemoryBuffer::getFile(StubHeader);
  REQUIRE(Library);
  const std::string Copy = (*Library)->getBuffer().str() + "#define LMFUSE_PROGRAM_COPY 1\n";
  const std::string Wrapper = "#pragma once\n#define LMFUSE_PROGRAM_WRAPPER 1\n#include_next <lmfuse/torch.h>\n";
  const std::string NotTheLibrarys = " as <lmfuse/torch.h>, which is not the library's header of that name (";
  struct Case {
    const char *Name;
    const std::string *Shadow;  // the program's inc/lmfuse/torch.h, first on the include path; null: none
    std::vector<std::string> Options;
    bool Fails;  // reparse-failed naming the file read in the library's header's place; else patched
  };
  const Case Cases[] = {
      {"no shadow, the library's folder given", nullptr, {"--library-include", LMFUSE_CLI_STUBS}, false},
      {"a copy first, the library's folder given", &Copy, {"--library-include", LMFUSE_CLI_STUBS}, true},
      {"a wrapper first, the library's folder given", &Wrapper, {"--library-include", LMFUSE_CLI_STUBS}, true},
      {"a copy first, the library's folder given by another spelling beside a folder without it", &Copy,
       {"--library-include", "/", "--library-include", LMFUSE_CLI_STUBS "/lmfuse/.."}, true},
      {"no folder given: the tool's own headers are the library's, the stubs' are not", nullptr, {}, true},
  };
  for (const Case &Each : Cases) {
    DYNAMIC_SECTION(Each.Name) {
      SourceTree Tree({{"model.cpp", ModelSource}});
      std::vector<std::string> Extra;
      std::string Read = std::string(StubHeader);
      if (Each.Shadow) {
        Tree.write("inc/lmfuse/torch.h", *Each.Shadow);
        Extra.push_back("-I" + Tree.path("inc"));
        Read = Tree.path("inc/lmfuse/torch.h");
      }
      std::string Audit = Tree.path("audit.json");
      std::vector<std::string> Arguments = Each.Options;
      for (const std::string &Argument : {std::string("--in-place"), std::string("--audit"), Audit, Tree.path("model.cpp")})
        Arguments.push_back(Argument);
      RunContext Context;
      Context.ToolsOwnLibrary = Each.Options.empty();
      ToolRun Run = runLmfuse(withFlags(Arguments, Tree, Extra), 60, Context);
      INFO(Run.Err);
      llvm::json::Value Document = readAudit(Audit);
      const llvm::json::Array &Sites = sitesOf(Document);
      REQUIRE(Sites.size() == 1);
      INFO(field(Sites[0], "detail"));
      if (Each.Fails) {
        CHECK(Run.ExitCode == 1);
        CHECK(Tree.read("model.cpp") == ModelSource);
        CHECK(field(Sites[0], "reason") == "reparse-failed");
        CHECK(countOf(field(Sites[0], "detail"), "reads " + Read + NotTheLibrarys) == 1);
      } else {
        CHECK(Run.ExitCode == 0);
        CHECK(field(Sites[0], "status") == "patched");
      }
    }
  }
  SECTION("a folder that is not one, or holds no lmfuse/torch.h, is refused before anything is read") {
    SourceTree Tree({{"model.cpp", ModelSource}});
    for (const auto &[Folder, Message] :
         {std::pair<std::string, std::string>{Tree.path("missing"), "--library-include " + Tree.path("missing") + " is not a folder"},
          {Tree.Root, "no --library-include folder holds lmfuse/torch.h"}}) {
      ToolRun Run = runLmfuse(withFlags({"--in-place", "--library-include", Folder, Tree.path("model.cpp")}, Tree));
      CHECK(Run.ExitCode == 2);
      CHECK(countOf(Run.Err, Message) == 1);
      CHECK(Tree.read("model.cpp") == ModelSource);
    }
  }
}

TEST_CASE("exit 2: files without compile flags or unreadable are skipped", "[cli][exit]") {
  SourceTree Tree({{"model.cpp", ModelSource}, {"other.cpp", "int other() { return 0; }\n"}});

  SECTION("no -p, no --, no compile_commands.json above the file") {
    ToolRun Run = runLmfuse({Tree.path("model.cpp")});
    CHECK(Run.ExitCode == 2);
    CHECK(countOf(Run.Err, "no compile flags") == 1);
    CHECK(countOf(Run.Err, "Running without flags") == 0);
  }
  SECTION("compile_commands.json that does not list the file") {
    Tree.write("build/compile_commands.json",
               "[{\"directory\": \"" + Tree.Root + "\", \"file\": \"" + Tree.path("other.cpp") +
                   "\", \"command\": \"clang++ -std=c++17 -c other.cpp\"}]");
    ToolRun Run = runLmfuse({"-p", Tree.path("build"), Tree.path("model.cpp")});
    CHECK(Run.ExitCode == 2);
    CHECK(countOf(Run.Err, "model.cpp") >= 1);
    CHECK(countOf(Run.Err, "does not list it") == 1);
    CHECK(Tree.read("model.cpp") == ModelSource);
  }
  SECTION("a file that does not exist, next to one that is processed") {
    ToolRun Run = runLmfuse(withFlags({Tree.path("missing.cpp"), Tree.path("model.cpp")}, Tree));
    CHECK(Run.ExitCode == 2);
    CHECK(countOf(Run.Err, "missing.cpp: cannot read it") == 1);
    CHECK(countOf(Run.Out, "lmfuse::linear_cross_entropy(") == 1);
  }
}

TEST_CASE("exit 3: --expect-patched not met", "[cli][exit]") {
  SourceTree Tree({{"model.cpp", ModelSource}, {"refused.cpp", RefusedSource}});
  std::vector<std::string> Files{Tree.path("model.cpp"), Tree.path("refused.cpp")};
  auto With = [&](std::vector<std::string> Options) {
    Options.insert(Options.end(), Files.begin(), Files.end());
    return withFlags(Options, Tree);
  };
  CHECK(runLmfuse(With({"--expect-patched", "1"})).ExitCode == 0);
  ToolRun Short = runLmfuse(With({"--expect-patched", "2"}));
  CHECK(Short.ExitCode == 3);
  CHECK(countOf(Short.Err, "--expect-patched 2") == 1);
}

// ---------------------------------------------------------------------------------------------------
// Behaviour
// ---------------------------------------------------------------------------------------------------

TEST_CASE("idempotence: a second --in-place run makes no edit and finds the site already patched", "[cli]") {
  SourceTree Tree({{"model.cpp", ModelSource}});
  std::string Audit = Tree.path("audit.json");
  ToolRun First = runLmfuse(withFlags({"--in-place", "--audit", Audit, Tree.path("model.cpp")}, Tree));
  REQUIRE(First.ExitCode == 0);
  std::string Rewritten = Tree.read("model.cpp");
  CHECK(Rewritten != ModelSource);
  CHECK(summaryCount(readAudit(Audit), "patched") == 1);

  ToolRun Second = runLmfuse(withFlags({"--in-place", "--audit", Audit, Tree.path("model.cpp")}, Tree));
  CHECK(Second.ExitCode == 0);
  CHECK(Tree.read("model.cpp") == Rewritten);
  llvm::json::Value Document = readAudit(Audit);
  CHECK(summaryCount(Document, "patched") == 0);
  CHECK(summaryCount(Document, "already_patched") == 1);
  // And the dry run of the rewritten file is empty.
  CHECK(runLmfuse(withFlags({Tree.path("model.cpp")}, Tree)).Out.empty());
}

TEST_CASE("a header reached from two translation units is edited once", "[cli]") {
  SourceTree Tree({{"shared.h", SharedHeader}, {"a.cpp", SharedUserA}, {"b.cpp", SharedUserB}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse(
      withFlags({"--in-place", "-j", "2", "--audit", Audit, Tree.path("a.cpp"), Tree.path("b.cpp")}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 0);
  std::string Header = Tree.read("shared.h");
  CHECK(countOf(Header, "#include <lmfuse/torch.h>") == 1);
  CHECK(countOf(Header, "lmfuse::linear_cross_entropy(") == 1);
  CHECK(Tree.read("a.cpp") == SharedUserA);
  llvm::json::Value Document = readAudit(Audit);
  const llvm::json::Array &Sites = sitesOf(Document);
  REQUIRE(Sites.size() == 1);
  CHECK(field(Sites[0], "file") == Tree.path("shared.h"));
  CHECK(field(Sites[0], "status") == "patched");
}

TEST_CASE("units that disagree on a header's edits: edit-conflict, header untouched, exit 1", "[cli]") {
  SourceTree Tree({{"shared.h", SharedHeader}, {"a.cpp", SharedUserA}, {"b.cpp", SharedUserB}});
  // Per-file flags: a.cpp sees WITH_AUX (refused), b.cpp does not (patched).
  std::string Build = writeCompileCommands(Tree, {{"a.cpp", "-DWITH_AUX"}, {"b.cpp", ""}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse({"--in-place", "-p", Build, "--audit", Audit, Tree.path("a.cpp"), Tree.path("b.cpp")});
  INFO(Run.Err);
  CHECK(Run.ExitCode == 1);
  CHECK(Tree.read("shared.h") == SharedHeader);
  llvm::json::Value Document = readAudit(Audit);
  const llvm::json::Array &Sites = sitesOf(Document);
  REQUIRE(Sites.size() == 1);
  CHECK(field(Sites[0], "status") == "failed");
  CHECK(field(Sites[0], "reason") == "edit-conflict");
}

// The same header, a macro picking its head: one unit patches the site at the head's line, the other
// refuses it at the loss's (another location, so no status disagreement): the edits each unit plans for
// the header differ, and writing one unit's would compile the fused call for the other's head.
TEST_CASE("units that see different heads in one header: edit-conflict, header untouched, exit 1", "[cli]") {
  const char *Header = R"cpp(#pragma once
#include <torch/torch.h>
struct ScaledLinearImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor &x);
  torch::Tensor weight, bias;
};
struct ScaledLinear : torch::nn::ModuleHolder<ScaledLinearImpl> {
  using torch::nn::ModuleHolder<ScaledLinearImpl>::ModuleHolder;
};
#ifdef SCALED_HEAD
using Head = ScaledLinear;
#else
using Head = torch::nn::Linear;
#endif
inline torch::Tensor head_loss(Head &lm_head, const torch::Tensor &h, const torch::Tensor &labels) {
  auto logits = lm_head(h);
  return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), labels.view(-1));
}
)cpp";
  SourceTree Tree({{"head.h", Header}, {"a.cpp", "#include \"head.h\"\nint unit_a() { return 1; }\n"},
                   {"b.cpp", "#include \"head.h\"\nint unit_b() { return 2; }\n"}});
  std::string Build = writeCompileCommands(Tree, {{"a.cpp", ""}, {"b.cpp", "-DSCALED_HEAD"}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse({"--in-place", "-p", Build, "--audit", Audit, Tree.path("a.cpp"), Tree.path("b.cpp")});
  INFO(Run.Err);
  CHECK(Run.ExitCode == 1);
  CHECK(Tree.read("head.h") == Header);
  llvm::json::Value Document = readAudit(Audit);
  int Patched = 0, Conflicts = 0;
  for (const llvm::json::Value &Site : sitesOf(Document)) {
    Patched += field(Site, "status") == "patched";
    Conflicts += field(Site, "reason") == "edit-conflict";
  }
  CHECK(Patched == 0);
  CHECK(Conflicts == 1);
}

// Two units patch a shared header's site with the same edits, its ignore_index written as a macro each defines
// otherwise: the copy passes `IGN`, which each unit compiles to its own value, so the audit records the text (as
// for a value known only at run time), not the value of whichever unit came first.
TEST_CASE("an option written as a macro the units define otherwise is recorded as its text", "[cli]") {
  const char *Header = R"cpp(#pragma once
#include <torch/torch.h>
inline torch::Tensor head_loss(torch::nn::Linear &lm_head, const torch::Tensor &h, const torch::Tensor &labels) {
  auto logits = lm_head(h);
  return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), labels.view(-1),
                                              torch::nn::functional::CrossEntropyFuncOptions().ignore_index(IGN));
}
)cpp";
  for (const bool AFirst : {true, false}) {
    SourceTree Tree({{"head.h", Header}, {"a.cpp", "#include \"head.h\"\nint unit_a() { return 1; }\n"},
                     {"b.cpp", "#include \"head.h\"\nint unit_b() { return 2; }\n"}});
    std::string Build = writeCompileCommands(Tree, {{"a.cpp", "-DIGN=-1"}, {"b.cpp", "-DIGN=5"}});
    std::string Audit = Tree.path("audit.json");
    std::vector<std::string> Inputs = {Tree.path("a.cpp"), Tree.path("b.cpp")};
    if (!AFirst)
      std::swap(Inputs[0], Inputs[1]);
    ToolRun Run = runLmfuse({"--out-dir", Tree.path("out"), "-p", Build, "--audit", Audit, Inputs[0], Inputs[1]});
    INFO(Run.Err);
    CHECK(Run.ExitCode == 0);
    llvm::json::Value Document = readAudit(Audit);
    REQUIRE(sitesOf(Document).size() == 1);
    const llvm::json::Value &Site = sitesOf(Document)[0];
    CHECK(field(Site, "status") == "patched");
    const llvm::json::Object *Options = Site.getAsObject()->getObject("options");
    REQUIRE(Options);
    const llvm::json::Object *IgnoreIndex = Options->getObject("ignore_index");
    REQUIRE(IgnoreIndex);
    CHECK(IgnoreIndex->getString("expr").value_or("") == "IGN");
  }
  // One unit: its value.
  SourceTree One({{"head.h", Header}, {"a.cpp", "#include \"head.h\"\nint unit_a() { return 1; }\n"}});
  std::string Audit = One.path("audit.json");
  ToolRun Run = runLmfuse({"--out-dir", One.path("out"), "-p", writeCompileCommands(One, {{"a.cpp", "-DIGN=-1"}}),
                           "--audit", Audit, One.path("a.cpp")});
  INFO(Run.Err);
  llvm::json::Value Document = readAudit(Audit);
  REQUIRE(sitesOf(Document).size() == 1);
  CHECK(sitesOf(Document)[0].getAsObject()->getObject("options")->getInteger("ignore_index") == -1);
}

TEST_CASE("a header is left alone when one unit that includes it does not compile", "[cli]") {
  // The unit that fails: broken code of its own, or a macro that breaks the header only there; listed
  // first or last; the header's sites must never be patched while that unit has no say.
  struct Variant {
    const char *Name;
    std::string Broken;
    bool BrokenFirst;
    bool OutDir;
  };
  const Variant Variants[] = {
      {"broken code after the include", std::string(SharedUserB) + "int broken() { return undeclared; }\n", false,
       false},
      {"an #error after the include", std::string(SharedUserB) + "#error this unit does not build\n", false, false},
      {"the broken unit listed first", std::string(SharedUserB) + "static_assert(false, \"broken\");\n", true,
       false},
      {"copies under --out-dir", std::string(SharedUserB) + "int broken() { return undeclared; }\n", false, true},
  };
  for (const Variant &Item : Variants) {
    DYNAMIC_SECTION(Item.Name) {
      SourceTree Tree({{"shared.h", SharedHeader}, {"a.cpp", SharedUserA}, {"b.cpp", Item.Broken.c_str()}});
      std::string Audit = Tree.path("audit.json");
      std::vector<std::string> Args = {Item.OutDir ? "--out-dir=" + Tree.path("out") : "--in-place", "-j", "2",
                                       "--audit", Audit};
      for (const char *Unit : Item.BrokenFirst ? std::vector<const char *>{"b.cpp", "a.cpp"}
                                               : std::vector<const char *>{"a.cpp", "b.cpp"})
        Args.push_back(Tree.path(Unit));
      ToolRun Run = runLmfuse(withFlags(Args, Tree));
      INFO(Run.Err);
      CHECK(Run.ExitCode == 1);
      CHECK(Tree.read("shared.h") == SharedHeader);
      if (Item.OutDir)
        CHECK(!llvm::sys::fs::exists(Tree.path("out") + Tree.path("shared.h")));
      llvm::json::Value Document = readAudit(Audit);
      bool HeaderSiteFailed = false;
      for (const llvm::json::Value &Site : sitesOf(Document))
        if (field(Site, "file") == Tree.path("shared.h"))
          HeaderSiteFailed = field(Site, "status") == "failed" && field(Site, "reason") == "parse-error" &&
                             llvm::StringRef(field(Site, "detail")).contains("b.cpp");
      CHECK(HeaderSiteFailed);
      CHECK(summaryCount(Document, "patched") == 0);
      // A second run (the unit still broken) must not report the header patched either.
      ToolRun Again = runLmfuse(withFlags({"--audit", Audit, Tree.path("a.cpp"), Tree.path("b.cpp")}, Tree));
      CHECK(Again.ExitCode == 1);
      CHECK(summaryCount(readAudit(Audit), "already_patched") == 0);
    }
  }
}

TEST_CASE("--out-dir leaves the sources untouched, writes #line copies, and caches the second run", "[cli]") {
  SourceTree Tree({{"src/model.cpp", ModelSource}, {"src/refused.cpp", RefusedSource}});
  std::string Out = Tree.path("out");
  std::vector<std::string> Arguments{"--out-dir", Out, "--summary", Tree.path("src/model.cpp"),
                                     Tree.path("src/refused.cpp")};
  ToolRun First = runLmfuse(withFlags(Arguments, Tree));
  INFO(First.Err);
  CHECK(First.ExitCode == 0);
  CHECK(Tree.read("src/model.cpp") == ModelSource);
  CHECK(Tree.read("src/refused.cpp") == RefusedSource);
  CHECK(First.Out.empty());
  // Mirrored relative to the inputs' common folder (src/).
  std::string Copy = readFile(Out + "/model.cpp");
  CHECK(llvm::StringRef(Copy).starts_with("#line 1 \"" + Tree.path("src/model.cpp") + "\"\n"));
  CHECK(countOf(Copy, "lmfuse::linear_cross_entropy(") == 1);
  // After an edited line, a #line directive brings the numbering back to the original's.
  CHECK(countOf(Copy, "#line ") >= 2);
  CHECK(readFile(Out + "/refused.cpp") == "#line 1 \"" + Tree.path("src/refused.cpp") + "\"\n" + RefusedSource);
  CHECK(countOf(First.Err, "from the cache") == 0);

  ToolRun Second = runLmfuse(withFlags(Arguments, Tree));
  CHECK(Second.ExitCode == 0);
  CHECK(countOf(Second.Err, "[2/2 translation units from the cache]") == 1);
  CHECK(countOf(Second.Err, "1 patched") == 1);
  CHECK(readFile(Out + "/model.cpp") == Copy);

  // A changed input is parsed again.
  Tree.write("src/refused.cpp", std::string(RefusedSource) + "// changed\n");
  ToolRun Third = runLmfuse(withFlags(Arguments, Tree));
  CHECK(countOf(Third.Err, "[1/2 translation units from the cache]") == 1);
}

// The cache's outcomes are the analysis of the binary that decided them: another build of the tool (an
// upgrade under the same version number, a development build) parses again.
TEST_CASE("--out-dir's cache misses for another build of the tool", "[cli]") {
  SourceTree Tree({{"src/model.cpp", ModelSource}});
  std::vector<std::string> Arguments =
      withFlags({"--out-dir", Tree.path("out"), "--summary", Tree.path("src/model.cpp")}, Tree);
  REQUIRE(runLmfuse(Arguments).ExitCode == 0);
  CHECK(countOf(runLmfuse(Arguments).Err, "[1/1 translation units from the cache]") == 1);
  // The same program with one byte more: another binary as far as the cache can tell.
  std::string Other = Tree.path("bin/lmfuse");
  Tree.write("bin/lmfuse", readFile(lmfuseUnderTest()) + std::string(1, '\0'));
  REQUIRE(!llvm::sys::fs::setPermissions(Other, llvm::sys::fs::all_exe | llvm::sys::fs::owner_all));
  // Beside the built tool's own resource files: the copy finds them as the original does.
  ToolRun Rebuilt = runLmfuseAt(Other, Arguments);
  INFO(Rebuilt.Err);
  CHECK(Rebuilt.ExitCode == 0);
  CHECK(countOf(Rebuilt.Err, "from the cache") == 0);
}

// The include search decides as much by what it does not find: a header that appears earlier on the
// include path than the one a cached parse read (here one that does not compile) must be parsed, not served
// from the cache.
TEST_CASE("--out-dir's cache misses when a header appears earlier on the include path", "[cli]") {
  const std::string Source = "#include <cfg.h>\n" + std::string(ModelSource);
  SourceTree Tree({{"src/model.cpp", Source.c_str()}, {"inc2/cfg.h", "#pragma once\n"}});
  std::vector<std::string> Arguments =
      withFlags({"--out-dir", Tree.path("out"), "--summary", Tree.path("src/model.cpp")}, Tree,
                {"-I" + Tree.path("inc1"), "-I" + Tree.path("inc2")});
  ToolRun First = runLmfuse(Arguments);
  INFO(First.Err);
  REQUIRE(First.ExitCode == 0);
  ToolRun Cached = runLmfuse(Arguments);
  CHECK(countOf(Cached.Err, "[1/1 translation units from the cache]") == 1);

  Tree.write("inc1/cfg.h", "#error the shadowing header\n");
  ToolRun Shadowed = runLmfuse(Arguments);
  INFO(Shadowed.Err);
  CHECK(Shadowed.ExitCode == 1);
  CHECK(countOf(Shadowed.Err, "from the cache") == 0);
  CHECK(countOf(Shadowed.Err, "the shadowing header") >= 1);
}

// A site whose unit sees WITH_AUX (from <cfg.h>, wherever the include search finds it) is refused; the
// same source without it is patched.
std::string sourceWithConfig(const char *Include) {
  std::string Body = SharedHeader;
  Body.erase(0, Body.find('\n') + 1);  // "#pragma once"
  return std::string("#include <torch/torch.h>\n#include ") + Include + "\n" + Body;
}
const char *AuxConfig = "#pragma once\n#define WITH_AUX\n";

// A header read through a link (a `current -> v2` switch between versions) is another file once the link names
// another: a cached outcome made through the old target is not served.
TEST_CASE("--out-dir's cache misses when a link it read a header through names another file", "[cli]") {
  const std::string Source = sourceWithConfig("<cfg.h>");
  SourceTree Tree({{"src/model.cpp", Source.c_str()}, {"impl/plain.h", "#pragma once\n"}, {"impl/aux.h", AuxConfig}});
  REQUIRE(!llvm::sys::fs::create_directories(Tree.path("inc")));
  REQUIRE(!llvm::sys::fs::create_link("../impl/plain.h", Tree.path("inc/cfg.h")));
  std::vector<std::string> Arguments =
      withFlags({"--out-dir", Tree.path("out"), "--summary", "--audit", Tree.path("audit.json"), Tree.path("src/model.cpp")},
                Tree, {"-I" + Tree.path("inc")});
  ToolRun First = runLmfuse(Arguments);
  INFO(First.Err);
  REQUIRE(First.ExitCode == 0);
  REQUIRE(field(sitesOf(readAudit(Tree.path("audit.json")))[0], "status") == "patched");

  REQUIRE(!llvm::sys::fs::remove(Tree.path("inc/cfg.h")));
  REQUIRE(!llvm::sys::fs::create_link("../impl/aux.h", Tree.path("inc/cfg.h")));
  ToolRun Switched = runLmfuse(Arguments);
  INFO(Switched.Err);
  CHECK(countOf(Switched.Err, "from the cache") == 0);
  llvm::json::Value Audit = readAudit(Tree.path("audit.json"));
  REQUIRE(sitesOf(Audit).size() == 1);
  CHECK(field(sitesOf(Audit)[0], "status") == "unmatched");
}

// The rewritten code's include looks for `lmfuse/torch.h` on the include path, which the first parse never did:
// a program's header of that name that appears there later is still refused on a rerun.
TEST_CASE("--out-dir's cache misses when a program's lmfuse/torch.h appears where the rewrite's include looked",
          "[cli]") {
  SourceTree Tree({{"src/model.cpp", ModelSource}});
  std::vector<std::string> Arguments =
      withFlags({"--out-dir", Tree.path("out"), "--summary", Tree.path("src/model.cpp")}, Tree,
                {"-I" + Tree.path("inc")});
  ToolRun First = runLmfuse(Arguments);
  INFO(First.Err);
  REQUIRE(First.ExitCode == 0);
  Tree.write("inc/lmfuse/torch.h", "#pragma once\n#include_next <lmfuse/torch.h>\n");
  ToolRun Shadowed = runLmfuse(Arguments);
  INFO(Shadowed.Err);
  CHECK(Shadowed.ExitCode == 1);
  CHECK(countOf(Shadowed.Err, "from the cache") == 0);
  CHECK(countOf(Shadowed.Err, "not the library's header") >= 1);
}

// What the parse is given comes from more than the command line: the include folders of CPATH and the
// working directory that relative flags name. A cached outcome made under other ones is not served.
TEST_CASE("--out-dir's cache misses when the environment or the working directory changes the include path",
          "[cli]") {
  SourceTree Tree({{"src/model.cpp", sourceWithConfig("<cfg.h>").c_str()},
                   {"plain/cfg.h", "#pragma once\n"},
                   {"aux/cfg.h", AuxConfig},
                   {"a/inc/cfg.h", "#pragma once\n"},
                   {"b/inc/cfg.h", AuxConfig}});
  auto StatusOf = [&] {
    llvm::json::Value Document = readAudit(Tree.path("audit.json"));
    const llvm::json::Array &Sites = sitesOf(Document);
    REQUIRE(Sites.size() == 1);
    return field(Sites[0], "status");
  };
  SECTION("CPATH") {
    std::vector<std::string> Arguments =
        withFlags({"--out-dir", Tree.path("out"), "--audit", Tree.path("audit.json"), "--summary",
                   Tree.path("src/model.cpp")}, Tree);
    ToolRun Plain = runLmfuse(Arguments, 60, {"", {"CPATH=" + Tree.path("plain")}});
    INFO(Plain.Err);
    REQUIRE(Plain.ExitCode == 0);
    CHECK(StatusOf() == "patched");
    ToolRun Again = runLmfuse(Arguments, 60, {"", {"CPATH=" + Tree.path("plain")}});
    CHECK(countOf(Again.Err, "[1/1 translation units from the cache]") == 1);
    ToolRun Aux = runLmfuse(Arguments, 60, {"", {"CPATH=" + Tree.path("aux")}});
    INFO(Aux.Err);
    CHECK(countOf(Aux.Err, "from the cache") == 0);
    CHECK(StatusOf() == "unmatched");
    CHECK(countOf(readFile(Tree.path("out/model.cpp")), "lmfuse::") == 0);
  }
  SECTION("a relative -I from another working directory") {
    std::vector<std::string> Arguments =
        withFlags({"--out-dir", Tree.path("out"), "--audit", Tree.path("audit.json"), "--summary",
                   Tree.path("src/model.cpp")}, Tree, {"-Iinc"});
    ToolRun FromA = runLmfuse(Arguments, 60, {Tree.path("a"), {}});
    INFO(FromA.Err);
    REQUIRE(FromA.ExitCode == 0);
    CHECK(StatusOf() == "patched");
    ToolRun FromB = runLmfuse(Arguments, 60, {Tree.path("b"), {}});
    INFO(FromB.Err);
    CHECK(countOf(FromB.Err, "from the cache") == 0);
    CHECK(StatusOf() == "unmatched");
  }
}

// A database may list one source under several commands (two targets, one with another macro): the file is
// one unit per command, and they must agree on its edits, as units that share a header must.
TEST_CASE("a source the database lists under two commands is analysed under both", "[cli][database]") {
  const std::string Source = sourceWithConfig("\"cfg.h\"");
  SourceTree Tree({{"model.cpp", Source.c_str()}, {"cfg.h", "#pragma once\n"}});
  SECTION("they disagree, in either order: edit-conflict, the source untouched, exit 1") {
    auto Order = GENERATE(0, 1);
    std::vector<std::pair<std::string, std::string>> Commands{{"model.cpp", ""}, {"model.cpp", "-DWITH_AUX"}};
    if (Order)
      std::swap(Commands[0], Commands[1]);
    std::string Build = writeCompileCommands(Tree, Commands);
    ToolRun Run = runLmfuse({"--in-place", "-p", Build, "--audit", Tree.path("audit.json"), Tree.path("model.cpp")});
    INFO(Run.Err);
    CHECK(Run.ExitCode == 1);
    CHECK(Tree.read("model.cpp") == Source);
    llvm::json::Value Document = readAudit(Tree.path("audit.json"));
    const llvm::json::Array &Sites = sitesOf(Document);
    REQUIRE(Sites.size() == 1);
    CHECK(field(Sites[0], "status") == "failed");
    CHECK(field(Sites[0], "reason") == "edit-conflict");
  }
  SECTION("they agree: patched once") {
    std::string Build = writeCompileCommands(Tree, {{"model.cpp", ""}, {"model.cpp", "-DOTHER_TARGET"}});
    ToolRun Run = runLmfuse({"--in-place", "-p", Build, "--audit", Tree.path("audit.json"), Tree.path("model.cpp")});
    INFO(Run.Err);
    CHECK(Run.ExitCode == 0);
    llvm::json::Value Document = readAudit(Tree.path("audit.json"));
    const llvm::json::Array &Sites = sitesOf(Document);
    REQUIRE(Sites.size() == 1);
    CHECK(field(Sites[0], "status") == "patched");
    CHECK(countOf(Tree.read("model.cpp"), "lmfuse::linear_cross_entropy") == 1);
  }
}

TEST_CASE("an empty compile command in the database is a skip that names it, not a compile error",
          "[cli][database]") {
  SourceTree Tree({{"model.cpp", ModelSource}});
  auto Entry = GENERATE(std::string("\"arguments\": []"), std::string("\"command\": \"\""));
  Tree.write("build/compile_commands.json", "[{\"directory\": \"" + Tree.Root + "\", \"file\": \"" +
                                                Tree.path("model.cpp") + "\", " + Entry + "}]");
  ToolRun Run = runLmfuse({"-p", Tree.path("build"), "--audit", Tree.path("audit.json"), Tree.path("model.cpp")});
  INFO(Run.Err);
  CHECK(Run.ExitCode == 2);
  CHECK(countOf(Run.Err, "empty compile command") >= 1);
  CHECK(countOf(Run.Err, "no input files") == 0);
  llvm::json::Value Document = readAudit(Tree.path("audit.json"));
    const llvm::json::Array &Sites = sitesOf(Document);
  REQUIRE(Sites.size() == 1);
  CHECK(field(Sites[0], "reason") == "no-compile-command");
}

// A header the parse found through a link (src/model.h -> impl/model_impl.h) is included by that name: the
// mirror must hold the rewritten copy under it too, or the copies would compile the original beside them.
TEST_CASE("--out-dir copies a file found through a link under the link's name too", "[cli][writes]") {
  std::string Header = SharedHeader;
  SourceTree Tree({{"src/impl/model_impl.h", Header.c_str()},
                   {"src/main.cpp", "#include <torch/torch.h>\n#include \"model.h\"\nint main() { return 0; }\n"}});
  REQUIRE(!llvm::sys::fs::create_link("impl/model_impl.h", Tree.path("src/model.h")));
  for (const char *Run : {"parsed", "from the cache"}) {
    INFO(Run);
    ToolRun Tool = runLmfuse(withFlags({"--out-dir", Tree.path("out"), "--audit", Tree.path("audit.json"),
                                        Tree.path("src/main.cpp")}, Tree));
    INFO(Tool.Err);
    REQUIRE(Tool.ExitCode == 0);
    llvm::json::Value Document = readAudit(Tree.path("audit.json"));
    const llvm::json::Array &Sites = sitesOf(Document);
    REQUIRE(Sites.size() == 1);
    CHECK(field(Sites[0], "status") == "patched");
    // Mirrored from src/: the copy the main file's copy includes, and the one at the header's own path.
    for (const char *Copy : {"out/model.h", "out/impl/model_impl.h"}) {
      INFO(Copy);
      REQUIRE(fileExists(Tree.path(Copy)));
      CHECK(countOf(readFile(Tree.path(Copy)), "lmfuse::linear_cross_entropy") == 1);
    }
    // One file under both names, as the original is: `#pragma once` (which knows a header by its file) reads it
    // once through either name in the copies' build too.
    bool Same = false;
    CHECK_FALSE(llvm::sys::fs::equivalent(Tree.path("out/model.h"), Tree.path("out/impl/model_impl.h"), Same));
    CHECK(Same);
    CHECK(Tree.read("src/impl/model_impl.h") == Header);
  }
}

// __FILE__ in the original is the file as the unit reached it; in the copy, the real path its #line directives
// name. Where the two differ (an include through `..`, a folder linked to another, a relative name on the command
// line), a site of that file is refused position-dependent; where the unit reaches the file by its real path, it
// is patched.
TEST_CASE("__FILE__ in a site's file: patched only where the unit names the file by its real path", "[cli]") {
  // The program's own __FILE__ (a macro of its own) counts; a library macro's (TORCH_CHECK's message) does not.
  const std::string Header = std::string(SharedHeader) + "#define HERE __FILE__\n"
                             "inline const char *where_defined() { TORCH_CHECK(true, \"never\"); return HERE; }\n";
  const std::string Checked = std::string(SharedHeader) + "inline void check() { TORCH_CHECK(true, \"never\"); }\n";
  SourceTree Tree({{"inc/shared.h", Header.c_str()},
                   {"inc/checked.h", Checked.c_str()},
                   {"src/checked.cpp", "#include \"../inc/checked.h\"\nint unit_d() { return 4; }\n"},
                   {"src/dotted.cpp", "#include \"../inc/shared.h\"\nint unit_a() { return 1; }\n"},
                   {"src/plain.cpp", "#include \"shared.h\"\nint unit_b() { return 2; }\n"}});
  REQUIRE(!llvm::sys::fs::create_link("inc", Tree.path("linked")));
  Tree.write("src/linked.cpp", "#include \"linked/shared.h\"\nint unit_c() { return 3; }\n");
  // The site in the main file itself: with the flags after `--`, the file is compiled under the name it is
  // given, as a build that passes it so names it.
  Tree.write("src/own.cpp", Header);
  const struct {
    const char *unit;
    bool relative;  // given relative to the tool's working directory (the tree)
    const char *status;
  } Cases[] = {{"src/plain.cpp", false, "patched"},
               {"src/dotted.cpp", false, "unmatched"},
               {"src/linked.cpp", false, "unmatched"},
               {"src/checked.cpp", false, "patched"},
               {"src/own.cpp", false, "patched"},
               {"src/own.cpp", true, "unmatched"}};
  for (const auto &Case : Cases) {
    INFO(Case.unit << (Case.relative ? " (relative)" : ""));
    std::string Audit = Tree.path("audit.json");
    RunContext Context;
    if (Case.relative)
      Context.WorkingDir = Tree.Root;
    ToolRun Run = runLmfuse(withFlags({"--out-dir", Tree.path("out"), "--edit-root", Tree.Root, "--audit", Audit,
                                       Case.relative ? std::string(Case.unit) : Tree.path(Case.unit)}, Tree,
                                      {"-I" + Tree.path("inc")}), 60, Context);
    INFO(Run.Err);
    llvm::json::Value Document = readAudit(Audit);
    const llvm::json::Array &Sites = sitesOf(Document);
    REQUIRE(Sites.size() == 1);
    INFO(field(Sites[0], "detail"));
    CHECK(field(Sites[0], "status") == Case.status);
    if (llvm::StringRef(Case.status) == "unmatched") {
      CHECK(field(Sites[0], "reason") == "position-dependent");
      CHECK(countOf(field(Sites[0], "detail"), "`__FILE__` on line") == 1);
    }
    llvm::sys::fs::remove_directories(Tree.path("out"));
  }
}

// A header reached under two names that are one file by a hard link (one inode: `#pragma once` reads it once
// under either): its copy has both names and is one file under them, as the original is.
TEST_CASE("--out-dir makes a hard-linked header's names one copy", "[cli][writes]") {
  std::string Header = SharedHeader;
  SourceTree Tree({{"src/a/cfg.h", "#pragma once\nconstexpr int cfg_value = 1;\n"},
                   {"src/model.h", Header.c_str()},
                   {"src/main.cpp", "#include <torch/torch.h>\n#include \"model.h\"\n#include \"a/cfg.h\"\n"
                                    "#include \"b/cfg.h\"\nint main() { return cfg_value - 1; }\n"}});
  REQUIRE(!llvm::sys::fs::create_directories(Tree.path("src/b")));
  REQUIRE(!llvm::sys::fs::create_hard_link(Tree.path("src/a/cfg.h"), Tree.path("src/b/cfg.h")));
  for (const char *Run : {"parsed", "from the cache"}) {
    INFO(Run);
    ToolRun Tool = runLmfuse(withFlags({"--out-dir", Tree.path("out"), "--audit", Tree.path("audit.json"),
                                        Tree.path("src/main.cpp")}, Tree));
    INFO(Tool.Err);
    REQUIRE(Tool.ExitCode == 0);
    REQUIRE(fileExists(Tree.path("out/a/cfg.h")));
    REQUIRE(fileExists(Tree.path("out/b/cfg.h")));
    bool Same = false;
    CHECK_FALSE(llvm::sys::fs::equivalent(Tree.path("out/a/cfg.h"), Tree.path("out/b/cfg.h"), Same));
    CHECK(Same);
    // The audit says so, for a build that copies the mirror (losing its links) to make them again.
    llvm::json::Value Document = readAudit(Tree.path("audit.json"));
    const llvm::json::Array *Files = Document.getAsObject()->getObject("mirror")->getArray("files");
    REQUIRE(Files);
    std::vector<std::string> Linked;
    for (const llvm::json::Value &File : *Files)
      if (const llvm::json::Value *Same = File.getAsObject()->get("same_file_as"))
        Linked.push_back(field(File, "path") + " = " + Same->getAsString()->str());
    CHECK(Linked == std::vector<std::string>{"b/cfg.h = a/cfg.h"});
  }
}

TEST_CASE("--edit-root: nothing is written outside it", "[cli]") {
  SourceTree Tree({{"src/model.cpp", ModelSource}, {"elsewhere/keep.txt", ""}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Outside = runLmfuse(withFlags(
      {"--in-place", "--edit-root", Tree.path("elsewhere"), "--audit", Audit, Tree.path("src/model.cpp")}, Tree));
  CHECK(Outside.ExitCode == 1);
  CHECK(Tree.read("src/model.cpp") == ModelSource);
  llvm::json::Value Document = readAudit(Audit);
  const llvm::json::Array &Sites = sitesOf(Document);
  REQUIRE(Sites.size() == 1);
  CHECK(field(Sites[0], "reason") == "write-failed");
  CHECK(countOf(field(Sites[0], "detail"), "outside the edit root") == 1);

  ToolRun Inside = runLmfuse(
      withFlags({"--in-place", "--edit-root", Tree.path("src"), Tree.path("src/model.cpp")}, Tree));
  CHECK(Inside.ExitCode == 0);
  CHECK(countOf(Tree.read("src/model.cpp"), "lmfuse::linear_cross_entropy(") == 1);
}

TEST_CASE("a malformed pattern file stops the tool with its file, line and key", "[cli]") {
  SourceTree Tree({{"model.cpp", ModelSource}});
  // Line 3 gives `version` a value that is not a number.
  Tree.write("bad.yaml", "# broken\nname: broken\nversion: [not, a, number]\n");
  ToolRun Run = runLmfuse(withFlags({"--patterns", Tree.path("bad.yaml"), Tree.path("model.cpp")}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 2);
  CHECK(countOf(Run.Err, Tree.path("bad.yaml") + ":3:") >= 1);
  CHECK(countOf(Run.Err, "version") >= 1);
  CHECK(Run.Out.empty());
  CHECK(Tree.read("model.cpp") == ModelSource);
}

TEST_CASE("--export-fixes writes clang-tidy fixes YAML whose replacements produce the rewrite", "[cli]") {
  SourceTree Tree({{"model.cpp", ModelSource}, {"copy/model.cpp", ModelSource}});
  std::string Fixes = Tree.path("fixes.yaml");
  REQUIRE(runLmfuse(withFlags({"--export-fixes", Fixes, Tree.path("model.cpp")}, Tree)).ExitCode == 0);
  CHECK(Tree.read("model.cpp") == ModelSource);

  std::string Yaml = readFile(Fixes);
  llvm::yaml::Input Input(Yaml);
  clang::tooling::TranslationUnitDiagnostics Document;
  Input >> Document;
  REQUIRE(!Input.error());
  CHECK(Document.MainSourceFile == Tree.path("model.cpp"));
  REQUIRE(Document.Diagnostics.size() == 1);
  const clang::tooling::DiagnosticMessage &Message = Document.Diagnostics[0].Message;
  CHECK(Message.FilePath == Tree.path("model.cpp"));
  auto It = Message.Fix.find(Tree.path("model.cpp"));
  REQUIRE(It != Message.Fix.end());
  std::string Applied = clang::tooling::applyAllReplacements(ModelSource, It->second).get();

  // The same edits as --in-place.
  REQUIRE(runLmfuse(withFlags({"--in-place", Tree.path("copy/model.cpp")}, Tree)).ExitCode == 0);
  CHECK(Applied == Tree.read("copy/model.cpp"));
}

// clang-apply-replacements (applying --export-fixes as README says) sorts the include block an insertion touches;
// the order of a program's own includes may matter (one defines what the next tests), so the fused call's include
// is a block of its own (a blank line before it) and the program's block stays as written.
TEST_CASE("--export-fixes: the fused call's include is a block of its own, so an applier keeps the program's order",
          "[cli]") {
  SourceTree Tree({{"zcfg.h", "#define LABEL_SMOOTH 0.1\n"},
                   {"defaults.h", "#ifndef LABEL_SMOOTH\n#define LABEL_SMOOTH 0.0\n#endif\n"}});
  const std::string Source = std::string(ModelSource).insert(std::string(ModelSource).find('\n') + 1,
                                                             "#include \"zcfg.h\"\n#include \"defaults.h\"\n");
  Tree.write("model.cpp", Source);
  std::string Fixes = Tree.path("fixes/fixes.yaml");
  REQUIRE(!llvm::sys::fs::create_directories(Tree.path("fixes")));
  REQUIRE(runLmfuse(withFlags({"--export-fixes", Fixes, Tree.path("model.cpp")}, Tree)).ExitCode == 0);
  std::string Yaml = readFile(Fixes);
  llvm::yaml::Input Input(Yaml);
  clang::tooling::TranslationUnitDiagnostics Document;
  Input >> Document;
  REQUIRE(!Input.error());
  REQUIRE(Document.Diagnostics.size() == 1);
  auto It = Document.Diagnostics[0].Message.Fix.find(Tree.path("model.cpp"));
  REQUIRE(It != Document.Diagnostics[0].Message.Fix.end());
  int Includes = 0;
  for (const clang::tooling::Replacement &Edit : It->second)
    if (Edit.getReplacementText().contains("#include <lmfuse/torch.h>")) {
      ++Includes;
      CHECK(Edit.getReplacementText().starts_with("\n#include <lmfuse/torch.h>\n"));
    }
  CHECK(Includes == 1);
  // Where clang-apply-replacements is installed: applied, the program's includes keep their order.
  for (const char *Name : {"clang-apply-replacements-19", "clang-apply-replacements"}) {
    llvm::ErrorOr<std::string> Applier = llvm::sys::findProgramByName(Name);
    if (!Applier)
      continue;
    const std::string Folder = Tree.path("fixes");
    llvm::StringRef Argv[] = {*Applier, Folder};
    REQUIRE(llvm::sys::ExecuteAndWait(*Applier, Argv) == 0);
    const std::string Applied = Tree.read("model.cpp");
    INFO(Applied);
    const size_t Torch = Applied.find("#include <torch/torch.h>"), Config = Applied.find("#include \"zcfg.h\""),
                 Defaults = Applied.find("#include \"defaults.h\""), Fused = Applied.find("#include <lmfuse/torch.h>");
    REQUIRE(Fused != std::string::npos);
    CHECK(Torch < Config);
    CHECK(Config < Defaults);
    CHECK(Defaults < Fused);
    break;
  }
}

TEST_CASE("the audit carries the lmfuse-audit/3 schema, its header, summary and site fields", "[cli]") {
  SourceTree Tree({{"model.cpp", ModelSource}, {"refused.cpp", RefusedSource}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse(
      withFlags({"--audit", Audit, "--summary", Tree.path("refused.cpp"), Tree.path("model.cpp")}, Tree));
  CHECK(Run.ExitCode == 0);
  CHECK(countOf(Run.Err, "lmfuse: 1 patched, 0 already_patched, 1 unmatched (logits-rebound: 1), 0 failed, "
                         "0 suppressed") == 1);
  llvm::json::Value Document = readAudit(Audit);
  const llvm::json::Object &Root = *Document.getAsObject();
  CHECK(Root.getString("schema") == llvm::StringRef("lmfuse-audit/3"));
  CHECK(Root.getObject("mirror") == nullptr);  // no --out-dir: no mirror to record
  CHECK(Root.getObject("tool")->getString("version").has_value());
  CHECK(countOf(*Root.getObject("clang")->getString("version"), "clang version 19") == 1);
  CHECK(fileExists(Root.getObject("clang")->getString("resource_dir")->str() + "/include/stddef.h"));
  CHECK(Root.getObject("patterns")->getString("name") == llvm::StringRef("libtorch"));
  for (const char *Key : {"patched", "already_patched", "unmatched", "failed", "suppressed"})
    CHECK(Root.getObject("summary")->getInteger(Key).has_value());

  const llvm::json::Array &Sites = sitesOf(Document);
  REQUIRE(Sites.size() == 2);
  // Sorted by file: model.cpp before refused.cpp, whatever the command-line order.
  CHECK(field(Sites[0], "file") == Tree.path("model.cpp"));
  CHECK(field(Sites[1], "file") == Tree.path("refused.cpp"));
  const llvm::json::Object &Patched = *Sites[0].getAsObject();
  CHECK(Patched.getInteger("line") == 8);
  CHECK(Patched.getInteger("column").value_or(0) > 0);
  CHECK(field(Sites[0], "function") == "GPTImpl::forward");
  CHECK(field(Sites[0], "status") == "patched");
  CHECK(field(Sites[0], "reason") == "");
  CHECK(!field(Sites[0], "head").empty());
  CHECK(countOf(field(Sites[0], "loss"), "cross_entropy") == 1);
  const llvm::json::Object *Options = Patched.getObject("options");
  REQUIRE(Options);
  CHECK(Options->getInteger("ignore_index") == -1);
  CHECK(Options->getNumber("label_smoothing") == 0.0);
  CHECK(Options->getString("reduction") == llvm::StringRef("mean"));
  CHECK(Options->getBoolean("shift") == false);
  CHECK(Options->getBoolean("bias").has_value());

  CHECK(field(Sites[1], "status") == "unmatched");
  CHECK(field(Sites[1], "reason") == "logits-rebound");
  CHECK(field(Sites[1], "function") == "scaled_loss");
  CHECK(countOf(field(Sites[1], "detail"), "7") >= 1);  // names the offending line
  CHECK(Sites[1].getAsObject()->getObject("options") == nullptr);
}

// A build that compiles the mirror on a machine without Clang (lmfuse_rewrite's LMFUSE_REWRITTEN_DIR)
// compares each original and each copy with what the audit recorded through CMake's file(SHA256): `sha256`
// must be the plain SHA-256 of the original's bytes, `copy_sha256` that of the copy as written, for a
// rewritten source as for a header copied as it is, and a run served from the cache records the same.
TEST_CASE("--out-dir: the audit records the SHA-256 of every original the mirror holds a copy of", "[cli]") {
  const char *Header = "#pragma once\nconstexpr int kAnswer = 42;\n";
  const char *HeaderSha256 = "18201a003f2ddd89a8781953d59a1f7701d159ba7f3300b04416d2a7605e6a5c";  // sha256sum
  const std::string Source = "#include \"config.h\"\n" + std::string(ModelSource);
  SourceTree Tree({{"src/model.cpp", Source.c_str()}, {"src/config.h", Header}});
  std::string Audit = Tree.path("audit.json");
  std::vector<std::string> Arguments = withFlags({"--out-dir", Tree.path("out"), "--edit-root", Tree.path("src"),
                                                  "--audit", Audit, "--summary", Tree.path("src/model.cpp")},
                                                 Tree);
  for (const char *Run : {"parsed", "from the cache"}) {
    INFO(Run);
    ToolRun Tool = runLmfuse(Arguments);
    INFO(Tool.Err);
    REQUIRE(Tool.ExitCode == 0);
    CHECK(countOf(readFile(Tree.path("out/model.cpp")), "lmfuse::linear_cross_entropy(") == 1);
    llvm::json::Value Document = readAudit(Audit);
    const llvm::json::Object *Mirror = Document.getAsObject()->getObject("mirror");
    REQUIRE(Mirror);
    CHECK(Mirror->getString("root") == llvm::StringRef(Tree.path("src")));
    const llvm::json::Array *Files = Mirror->getArray("files");
    REQUIRE(Files);
    REQUIRE(Files->size() == 2);
    CHECK(field((*Files)[0], "path") == "config.h");
    CHECK(field((*Files)[0], "sha256") == HeaderSha256);
    CHECK(field((*Files)[1], "path") == "model.cpp");
    CHECK(field((*Files)[1], "sha256") ==
          llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(Source)), /*LowerCase=*/true));
    for (std::size_t I = 0; I < 2; ++I) {
      std::string Copy = readFile(Tree.path("out/" + field((*Files)[I], "path")));
      CHECK(field((*Files)[I], "copy_sha256") ==
            llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(Copy)), /*LowerCase=*/true));
    }
  }
}

// What a build that compiles the copies under other flags, or with another compiler, must see as the tool
// did (lmfuse_rewrite compares these with its compiler's `-dM -E`): every macro the project's files name,
// with its definition and where that came from, and the one it started with where a file changed it, and
// every __has_include test with its value. The project's own macros are not recorded (their files are
// checked by digest), nor the preprocessor's own (__LINE__), nor units that read no rewritten file.
TEST_CASE("--out-dir: the audit records the macros each unit that reads a rewritten file depended on", "[cli]") {
  const std::string Source = std::string("#include \"config.h\"\n#include \"lib.h\"\n") +
                             "#if MODEL_VARIANT > 1\nint variant = 2;\n#endif\n"
                             "#ifdef MODEL_SOFTCAP\nint capped = 1;\n#endif\n"
                             "#ifdef UNDONE_FLAG\nint undone = 1;\n#endif\n#undef UNDONE_FLAG\n"
                             "int scaled = LIB_TWICE(SCALE_FROM_FLAGS) + PROJECT_SCALE + __LINE__;\n"
                             "#if __has_include(\"extra.h\") && __has_include(<lib.h>)\nint extra = 1;\n#endif\n"
                             "#if __has_include(<absent_header.h>)\nint absent = 1;\n#endif\n" +
                             ModelSource;
  SourceTree Tree({{"src/model.cpp", Source.c_str()},
                   {"src/extra.h", "#pragma once\n"},
                   {"src/other.cpp", "#include \"config.h\"\nint other = PROJECT_SCALE;\n"},
                   {"src/config.h", "#pragma once\n#define PROJECT_SCALE 2\n"},
                   {"lib/lib.h", "#pragma once\n#define LIB_TWICE(x) ((x) * 2)\n"}});
  std::string Audit = Tree.path("audit.json");
  std::vector<std::string> Arguments =
      withFlags({"--out-dir", Tree.path("out"), "--edit-root", Tree.path("src"), "--audit", Audit,
                 Tree.path("src/model.cpp"), Tree.path("src/other.cpp")},
                Tree, {"-DSCALE_FROM_FLAGS=3", "-DUNDONE_FLAG", "-I" + Tree.path("lib")});
  for (const char *Run : {"parsed", "from the cache"}) {
    INFO(Run);
    ToolRun Tool = runLmfuse(Arguments);
    INFO(Tool.Err);
    REQUIRE(Tool.ExitCode == 0);
    llvm::json::Value Document = readAudit(Audit);
    const llvm::json::Object &Unit = onlyMirroredUnit(Document);  // other.cpp reads no rewritten file
    CHECK(Unit.getString("path").value_or("") == "model.cpp");
    CHECK(Unit.getString("sha256").value_or("") ==
          llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(Source)), /*LowerCase=*/true));
    const llvm::json::Array *Macros = &macrosOf(Unit);
    std::vector<std::string> Names;
    for (const llvm::json::Value &Macro : *Macros)
      Names.push_back(field(Macro, "name"));
    // The header names inside __has_include are no macros; each test is recorded with its value and file.
    CHECK(Names == std::vector<std::string>{"LIB_TWICE", "MODEL_SOFTCAP", "MODEL_VARIANT", "SCALE_FROM_FLAGS",
                                            "UNDONE_FLAG", "__has_include(\"extra.h\")",
                                            "__has_include(<absent_header.h>)", "__has_include(<lib.h>)"});
    REQUIRE(Macros->size() == 8);
    for (std::size_t I = 5; I < 8; ++I) {
      CHECK(field((*Macros)[I], "origin") == "include-test");
      CHECK(field((*Macros)[I], "file") == "model.cpp");
    }
    CHECK(field((*Macros)[5], "definition") == "1");
    CHECK(field((*Macros)[6], "definition") == "0");
    CHECK(field((*Macros)[7], "definition") == "1");
    CHECK(field((*Macros)[0], "origin") == "library");
    CHECK(field((*Macros)[0], "definition") == "LIB_TWICE(x) ( ( x ) * 2 )");
    CHECK(field((*Macros)[0], "header") == Tree.path("lib/lib.h"));
    CHECK(field((*Macros)[0], "header_sha256") ==
          llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(
                          llvm::StringRef("#pragma once\n#define LIB_TWICE(x) ((x) * 2)\n"))),
                      /*LowerCase=*/true));
    CHECK(field((*Macros)[1], "origin") == "undefined");
    CHECK((*Macros)[1].getAsObject()->get("definition") == nullptr);
    CHECK(field((*Macros)[2], "origin") == "undefined");
    CHECK(field((*Macros)[3], "origin") == "command-line");
    CHECK(field((*Macros)[3], "definition") == "SCALE_FROM_FLAGS 3");
    CHECK((*Macros)[3].getAsObject()->get("predefined") == nullptr);  // as it ends: no need to repeat it
    // Given on the command line, #undef'd by the file: it ends undefined, and started defined.
    CHECK(field((*Macros)[4], "origin") == "undefined");
    CHECK(field((*Macros)[4], "predefined") == "UNDONE_FLAG 1");
  }
}

// A macro the project uses where a header outside it defines it otherwise than the unit ends (another header
// redefines or #undefs it later): the end state the build compares does not tell what its compiler made of it
// at the use, so the record says where and what the analysis saw there.
TEST_CASE("--out-dir: the audit records a macro used where it was defined otherwise than at the end", "[cli]") {
  const std::string Source = std::string("#include \"vendor.h\"\n#if VENDOR_HALVE\nint halved = 1;\n#endif\n"
                                         "int steady = VENDOR_STEADY;\n#include \"reset.h\"\n") +
                             ModelSource;
  SourceTree Tree({{"src/model.cpp", Source.c_str()},
                   {"lib/vendor.h", "#pragma once\n#define VENDOR_HALVE 1\n#define VENDOR_STEADY 2\n"},
                   {"lib/reset.h", "#pragma once\n#undef VENDOR_HALVE\n#define VENDOR_HALVE 0\n"}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Tool = runLmfuse(withFlags({"--out-dir", Tree.path("out"), "--edit-root", Tree.path("src"), "--audit",
                                      Audit, Tree.path("src/model.cpp")},
                                     Tree, {"-I" + Tree.path("lib")}));
  INFO(Tool.Err);
  REQUIRE(Tool.ExitCode == 0);
  llvm::json::Value Document = readAudit(Audit);
  std::map<std::string, const llvm::json::Object *> ByName;
  for (const llvm::json::Value &Macro : macrosOf(onlyMirroredUnit(Document)))
    ByName[field(Macro, "name")] = Macro.getAsObject();
  REQUIRE(ByName.count("VENDOR_HALVE"));
  REQUIRE(ByName.count("VENDOR_STEADY"));
  CHECK(ByName["VENDOR_HALVE"]->getString("definition").value_or("") == "VENDOR_HALVE 0");
  const llvm::json::Object *AtUse = ByName["VENDOR_HALVE"]->getObject("at_use");
  REQUIRE(AtUse);
  CHECK(AtUse->getString("where").value_or("") == "model.cpp:2");
  CHECK(AtUse->getString("definition").value_or("") == "VENDOR_HALVE 1");
  CHECK(ByName["VENDOR_STEADY"]->getObject("at_use") == nullptr);  // the same where used and at the end
}

// Tests of the compiler's own features, which another compiler (the build's) may answer otherwise: each call of
// a built-in function-like macro with the value Clang gives it, defined() of a built-in macro, #elifdef.
TEST_CASE("--out-dir: the audit records the compiler feature tests of each unit, with Clang's answers", "[cli]") {
  const std::string Source = std::string("#if __has_cpp_attribute(nodiscard) >= 201603 && defined(__has_warning)\n"
                                         "#endif\n#ifdef NOPE\n#elifdef ALSO\n#endif\n"
                                         "#if __has_builtin(__builtin_no_such_thing) || __LINE__ > 0\n#endif\n") +
                             ModelSource;
  SourceTree Tree({{"src/model.cpp", Source.c_str()}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Tool = runLmfuse(withFlags({"--out-dir", Tree.path("out"), "--edit-root", Tree.path("src"), "--audit",
                                      Audit, Tree.path("src/model.cpp")},
                                     Tree));
  INFO(Tool.Err);
  REQUIRE(Tool.ExitCode == 0);
  llvm::json::Value Document = readAudit(Audit);
  std::vector<std::string> Tests;
  for (const llvm::json::Value &Macro : macrosOf(onlyMirroredUnit(Document)))
    if (field(Macro, "origin") == "feature-test") {
      CHECK(field(Macro, "file") == "model.cpp");
      Tests.push_back(field(Macro, "name") + " = " + field(Macro, "definition"));
    }
  CHECK(Tests == std::vector<std::string>{"#elifdef = 1", "__has_builtin(__builtin_no_such_thing) = 0",
                                          "__has_cpp_attribute(nodiscard) = 201907", "defined(__has_warning) = 1"});
}

// Which code is the program's is decided by where its file lies (the main file, the edit root), never by how
// it was included: a project header reached through -isystem (or a precompiled header's `#pragma GCC
// system_header`) is analysed like any other, its functions are not trusted as the library's, and a loss
// site in it is found.
TEST_CASE("a program header included as a system header is the program's code", "[cli]") {
  // By value: a Tensor is a handle, so the in-place product doubles the caller's `h` too.
  const char *Helpers = "#pragma once\n#include <torch/torch.h>\ninline void warm(torch::Tensor h) { h.mul_(2); }\n";
  const char *Caller = R"cpp(#include <torch/torch.h>
#include <helpers.h>
namespace F = torch::nn::functional;
torch::Tensor lossOf(torch::nn::Linear &lm_head, torch::Tensor h, const torch::Tensor &labels) {
  auto logits = lm_head(h);
  warm(h);
  return F::cross_entropy(logits, labels);
}
)cpp";
  const std::string Header = "#pragma once\n" + std::string(ModelSource);
  SourceTree Tree({{"include/helpers.h", Helpers}, {"include/model.h", Header.c_str()},
                   {"src/caller.cpp", Caller}, {"src/train.cpp", "#include <model.h>\n"}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Tool = runLmfuse(withFlags({"--edit-root", Tree.Root, "--audit", Audit, Tree.path("src/caller.cpp"),
                                      Tree.path("src/train.cpp")},
                                     Tree, {"-isystem", Tree.path("include")}));
  INFO(Tool.Err);
  llvm::json::Value Document = readAudit(Audit);
  const llvm::json::Array *Sites = Document.getAsObject()->getArray("sites");
  REQUIRE(Sites);
  REQUIRE(Sites->size() == 2);
  // The header's site is found and patched; the helper doubles the head's input before the loss: refused,
  // as from a quoted include.
  CHECK(field((*Sites)[0], "file") == Tree.path("include/model.h"));
  CHECK(field((*Sites)[0], "status") == "patched");
  CHECK(field((*Sites)[1], "file") == Tree.path("src/caller.cpp"));
  CHECK(field((*Sites)[1], "status") == "unmatched");
  CHECK(field((*Sites)[1], "reason") == "inputs-modified");
  CHECK(countOf(field((*Sites)[1], "detail"), "warm") >= 1);
}

TEST_CASE("--version names the tool and the Clang it was built with", "[cli]") {
  ToolRun Run = runLmfuse({"--version"});
  CHECK(Run.ExitCode == 0);
  CHECK(countOf(Run.Out, "lmfuse ") == 1);
  CHECK(countOf(Run.Out, "clang version 19") == 1);
}

TEST_CASE("a copy that cannot be written makes its sites write-failed, exit 1", "[cli][exit]") {
  SourceTree Tree({{"src/model.cpp", ModelSource}, {"out/model.cpp/occupied", "a folder where the copy goes"}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse(
      withFlags({"--out-dir", Tree.path("out"), "--audit", Audit, Tree.path("src/model.cpp")}, Tree));
  CHECK(Run.ExitCode == 1);
  CHECK(countOf(Run.Err, "lmfuse: error: not written: " + Tree.path("out/model.cpp") + " is not a regular file") == 1);
  CHECK(Tree.read("src/model.cpp") == ModelSource);
  llvm::json::Value Document = readAudit(Audit);
  const llvm::json::Array &Sites = sitesOf(Document);
  REQUIRE(Sites.size() == 1);
  CHECK(field(Sites[0], "status") == "failed");
  CHECK(field(Sites[0], "reason") == "write-failed");
}

TEST_CASE("the dry-run diff applies with patch and gives the --in-place result", "[cli]") {
  llvm::ErrorOr<std::string> Patch = llvm::sys::findProgramByName("patch");
  if (!Patch) {
    WARN("patch(1) not installed: diff application not checked");
    return;
  }
  SourceTree Tree({{"model.cpp", ModelSource}, {"copy/model.cpp", ModelSource}});
  ToolRun Dry = runLmfuse(withFlags({Tree.path("copy/model.cpp")}, Tree));
  REQUIRE(Dry.ExitCode == 0);
  Tree.write("fix.diff", Dry.Out);
  std::string Diff = Tree.path("fix.diff"), Target = Tree.path("copy/model.cpp");
  llvm::StringRef PatchArgv[] = {*Patch, "-s", Target, Diff};
  REQUIRE(llvm::sys::ExecuteAndWait(*Patch, PatchArgv) == 0);
  REQUIRE(runLmfuse(withFlags({"--in-place", Tree.path("model.cpp")}, Tree)).ExitCode == 0);
  CHECK(Tree.read("copy/model.cpp") == Tree.read("model.cpp"));
}

TEST_CASE("the resource directory is pinned: a copy of the binary elsewhere still finds stddef.h", "[cli]") {
  SourceTree Tree({{"model.cpp", ModelSource}});
  Tree.write("uses_stddef.cpp", std::string("#include <stddef.h>\nsize_t width = sizeof(max_align_t);\n") +
                                    ModelSource);
  std::string Copy = Tree.path("elsewhere/bin/lmfuse");
  REQUIRE(!llvm::sys::fs::create_directories(Tree.path("elsewhere/bin")));
  REQUIRE(!llvm::sys::fs::copy_file(LMFUSE_EXECUTABLE, Copy));
  REQUIRE(!llvm::sys::fs::setPermissions(Copy, llvm::sys::fs::all_read | llvm::sys::fs::all_exe |
                                                   llvm::sys::fs::owner_write));
  ToolRun Run = runLmfuseAt(Copy, withFlags({"--summary", Tree.path("uses_stddef.cpp")}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 0);
  CHECK(countOf(Run.Err, "1 patched") == 1);
}
