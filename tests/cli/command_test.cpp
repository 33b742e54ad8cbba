// The lmfuse command as a clang-tidy user meets it: diagnostics on stderr, the options borrowed from
// clang-tidy, where the compile flags come from, what the audit says about every input, and how files are
// read and written. Faults that need root or signals (a full disk, chattr +i, SIGINT/SIGTERM) are in
// write_faults.sh.
#include "cli_support.h"

#include "patterns.h"

#include <chrono>
#include <thread>

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

namespace {

// The lines of Text, without their '\n'.
std::vector<std::string> linesOf(llvm::StringRef Text) {
  llvm::SmallVector<llvm::StringRef, 16> Lines;
  Text.split(Lines, '\n');
  return std::vector<std::string>(Lines.begin(), Lines.end());
}

bool hasLine(llvm::StringRef Text, llvm::StringRef Line) {
  for (const std::string &Each : linesOf(Text))
    if (Each == Line)
      return true;
  return false;
}

const llvm::json::Object *siteOf(const llvm::json::Value &Audit, llvm::StringRef File) {
  for (const llvm::json::Value &Site : sitesOf(Audit))
    if (field(Site, "file") == File)
      return Site.getAsObject();
  return nullptr;
}

// Runs clang++ -fsyntax-only on File (a rewritten copy) against the stubs; "" when it compiles or when no
// clang++ is installed (a warning says so).
std::string compileError(llvm::StringRef File) {
  llvm::ErrorOr<std::string> Clang = llvm::sys::findProgramByName("clang++-19");
  if (!Clang)
    Clang = llvm::sys::findProgramByName("clang++");
  if (!Clang) {
    WARN("no clang++: the copy of " << File.str() << " was not compiled");
    return "";
  }
  llvm::StringRef Argv[] = {*Clang, "-fsyntax-only", "-std=c++17", "-I" LMFUSE_CLI_STUBS, File};
  llvm::SmallString<128> ErrPath;
  REQUIRE(!llvm::sys::fs::createTemporaryFile("lmfuse-cli-cc", "txt", ErrPath));
  std::optional<llvm::StringRef> Redirects[] = {std::nullopt, llvm::StringRef(ErrPath), llvm::StringRef(ErrPath)};
  int Code = llvm::sys::ExecuteAndWait(*Clang, Argv, std::nullopt, Redirects, 60);
  std::string Errors = readFile(ErrPath);
  llvm::sys::fs::remove(ErrPath);
  return Code == 0 ? "" : "exit " + std::to_string(Code) + ": " + Errors;
}

// A source that compiles only when NEEDED is defined (for --extra-arg).
std::string needsDefine() { return std::string("#ifndef NEEDED\n#error NEEDED is not defined\n#endif\n") + ModelSource; }

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Diagnostics
// ---------------------------------------------------------------------------------------------------

TEST_CASE("a refused site is a clang-style warning with a note at the offending statement", "[cli][diagnostics]") {
  SourceTree Tree({{"refused.cpp", RefusedSource}});
  ToolRun Run = runLmfuse(withFlags({Tree.path("refused.cpp")}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 0);
  std::vector<std::string> Lines = linesOf(Run.Err);
  auto Warning = std::find_if(Lines.begin(), Lines.end(), [](const std::string &Line) {
    return llvm::StringRef(Line).contains(": warning: ");
  });
  REQUIRE(Warning != Lines.end());
  REQUIRE(Lines.end() - Warning >= 6);
  // The head call is on line 6, column 17; the rebinding on line 7, column 3.
  CHECK(llvm::StringRef(Warning[0]).starts_with(Tree.path("refused.cpp") + ":6:17: warning: "));
  CHECK(llvm::StringRef(Warning[0]).contains("logits = logits * 0.5"));
  CHECK(llvm::StringRef(Warning[0]).ends_with(" [lmfuse-logits-rebound]"));
  CHECK(Warning[1] == "    6 |   auto logits = head(x);");
  CHECK(Warning[2] == "      |                 ^");
  CHECK(Warning[3] == Tree.path("refused.cpp") +
                          ":7:3: note: the logits are changed in value between the head and the loss");
  CHECK(Warning[4] == "    7 |   logits = logits * 0.5;");
  CHECK(Warning[5] == "      |   ^");
  // Not a terminal: no colour escapes.
  CHECK(countOf(Run.Err, "\x1b[") == 0);
}

TEST_CASE("a unit taken from the --out-dir cache prints the same diagnostics", "[cli][diagnostics]") {
  SourceTree Tree({{"src/refused.cpp", RefusedSource}});
  std::vector<std::string> Arguments{"--out-dir", Tree.path("out"), "--summary", Tree.path("src/refused.cpp")};
  ToolRun First = runLmfuse(withFlags(Arguments, Tree));
  ToolRun Second = runLmfuse(withFlags(Arguments, Tree));
  REQUIRE(countOf(Second.Err, "[1/1 translation units from the cache]") == 1);
  auto Diagnostics = [](const std::string &Err) {
    std::string Kept;
    for (const std::string &Line : linesOf(Err))
      if (!llvm::StringRef(Line).starts_with("lmfuse:"))
        Kept += Line + "\n";
    return Kept;
  };
  CHECK(countOf(First.Err, ":7:3: note: ") == 1);
  CHECK(Diagnostics(Second.Err) == Diagnostics(First.Err));
}

TEST_CASE("--quiet prints no per-site warning; --verbose adds a remark per patched site", "[cli][diagnostics]") {
  SourceTree Tree({{"model.cpp", ModelSource}, {"refused.cpp", RefusedSource}});
  std::vector<std::string> Files{Tree.path("model.cpp"), Tree.path("refused.cpp")};
  auto With = [&](std::vector<std::string> Options) {
    Options.insert(Options.end(), Files.begin(), Files.end());
    return withFlags(Options, Tree);
  };
  ToolRun Plain = runLmfuse(With({}));
  CHECK(countOf(Plain.Err, ": warning: ") == 1);
  CHECK(countOf(Plain.Err, ": remark: ") == 0);

  ToolRun Quiet = runLmfuse(With({"--quiet"}));
  CHECK(Quiet.ExitCode == 0);
  CHECK(Quiet.Err.empty());
  CHECK(Quiet.Out == Plain.Out);

  ToolRun Verbose = runLmfuse(With({"--verbose"}));
  CHECK(countOf(Verbose.Err, ": warning: ") == 1);
  REQUIRE(countOf(Verbose.Err, ": remark: ") == 1);
  CHECK(countOf(Verbose.Err, Tree.path("model.cpp") + ":8:19: remark: ") == 1);
  CHECK(countOf(Verbose.Err, "[lmfuse-patched]") == 1);
}

TEST_CASE("NOLINT(lmfuse) suppresses only inside a comment", "[cli][diagnostics]") {
  std::string InComment = ModelSource;
  std::string InString = ModelSource;
  const std::string Head = "    auto logits = lm_head->forward(x);";
  REQUIRE(InComment.find(Head) != std::string::npos);
  InComment.replace(InComment.find(Head), Head.size(), Head + "  // NOLINT(lmfuse)");
  InString.replace(InString.find(Head), Head.size(), Head + " const char *note = \"NOLINT(lmfuse)\"; (void)note;");
  SourceTree Tree({{"comment.cpp", InComment.c_str()}, {"string.cpp", InString.c_str()}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse(withFlags({"--audit", Audit, Tree.path("comment.cpp"), Tree.path("string.cpp")}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 0);
  llvm::json::Value Document = readAudit(Audit);
  REQUIRE(siteOf(Document, Tree.path("comment.cpp")));
  REQUIRE(siteOf(Document, Tree.path("string.cpp")));
  CHECK(siteOf(Document, Tree.path("comment.cpp"))->getString("status") == llvm::StringRef("suppressed"));
  CHECK(siteOf(Document, Tree.path("string.cpp"))->getString("status") == llvm::StringRef("patched"));
  CHECK(countOf(Run.Err, "[lmfuse-suppressed]") == 1);
}

// ---------------------------------------------------------------------------------------------------
// Options borrowed from clang-tidy
// ---------------------------------------------------------------------------------------------------

TEST_CASE("--fix rewrites in place like --in-place", "[cli][options]") {
  SourceTree Tree({{"a/model.cpp", ModelSource}, {"b/model.cpp", ModelSource}});
  REQUIRE(runLmfuse(withFlags({"--fix", Tree.path("a/model.cpp")}, Tree)).ExitCode == 0);
  REQUIRE(runLmfuse(withFlags({"--in-place", Tree.path("b/model.cpp")}, Tree)).ExitCode == 0);
  CHECK(Tree.read("a/model.cpp") != ModelSource);
  CHECK(Tree.read("a/model.cpp") == Tree.read("b/model.cpp"));
}

TEST_CASE("--extra-arg and --extra-arg-before reach every compile command", "[cli][options]") {
  SourceTree Tree({{"model.cpp", needsDefine().c_str()}});
  Tree.write("build/compile_commands.json",
             "[{\"directory\": \"" + Tree.Root + "\", \"file\": \"" + Tree.path("model.cpp") +
                 "\", \"command\": \"clang++ -std=c++17 -I" LMFUSE_CLI_STUBS " -c model.cpp\"}]");
  std::vector<std::string> Database{"-p", Tree.path("build"), Tree.path("model.cpp")};
  auto With = [&](std::vector<std::string> Options) {
    Options.insert(Options.end(), Database.begin(), Database.end());
    return Options;
  };
  CHECK(runLmfuse(With({})).ExitCode == 1);  // parse-error without the define
  ToolRun After = runLmfuse(With({"--extra-arg=-DNEEDED"}));
  INFO(After.Err);
  CHECK(After.ExitCode == 0);
  CHECK(countOf(After.Out, "lmfuse::linear_cross_entropy(") == 1);
  ToolRun Before = runLmfuse(With({"--extra-arg-before", "-DNEEDED"}));
  CHECK(Before.ExitCode == 0);
  CHECK(Before.Out == After.Out);
  // Appended after the command's own flags: a later -U wins over the command's -D, as with clang-tidy.
  Tree.write("build/compile_commands.json",
             "[{\"directory\": \"" + Tree.Root + "\", \"file\": \"" + Tree.path("model.cpp") +
                 "\", \"command\": \"clang++ -std=c++17 -DNEEDED -I" LMFUSE_CLI_STUBS " -c model.cpp\"}]");
  CHECK(runLmfuse(With({"--extra-arg=-UNEEDED"})).ExitCode == 1);
  CHECK(runLmfuse(With({"--extra-arg-before=-UNEEDED"})).ExitCode == 0);
}

TEST_CASE("a flag Clang does not know is dropped with a note naming it", "[cli][options]") {
  SourceTree Tree({{"model.cpp", ModelSource}});
  SECTION("after --") {
    ToolRun Run = runLmfuse(withFlags({Tree.path("model.cpp")}, Tree, {"-fconcepts-diagnostics-depth=2"}));
    INFO(Run.Err);
    CHECK(Run.ExitCode == 0);
    CHECK(countOf(Run.Out, "lmfuse::linear_cross_entropy(") == 1);
    CHECK(countOf(Run.Err, "note: dropped flags Clang does not know: -fconcepts-diagnostics-depth=2") == 1);
  }
  SECTION("in the compilation database") {
    Tree.write("build/compile_commands.json",
               "[{\"directory\": \"" + Tree.Root + "\", \"file\": \"" + Tree.path("model.cpp") +
                   "\", \"command\": \"g++ -std=c++17 -fconcepts-diagnostics-depth=2 -I" LMFUSE_CLI_STUBS
                   " -c model.cpp\"}]");
    ToolRun Run = runLmfuse({"-p", Tree.path("build"), Tree.path("model.cpp")});
    INFO(Run.Err);
    CHECK(Run.ExitCode == 0);
    CHECK(countOf(Run.Out, "lmfuse::linear_cross_entropy(") == 1);
    CHECK(countOf(Run.Err, "note: dropped flags Clang does not know: -fconcepts-diagnostics-depth=2") == 1);
  }
}

// A dropped flag that may change how the build's compiler reads the program (not one of GCC's diagnostics or
// optimisation families) is recorded with the unit in the audit's mirror, which lmfuse_rewrite's step reads.
TEST_CASE("--out-dir: the audit records the dropped flags that may change how a unit reads", "[cli][options]") {
  const struct {
    std::vector<std::string> Flags;
    std::vector<std::string> Recorded;
  } Rows[] = {
      {{"-fconcepts-diagnostics-depth=2", "-fno-fat-lto-objects", "-fipa-pta"}, {}},
      {{"-fno-ext-numeric-literals"}, {"-fno-ext-numeric-literals"}},
      {{"-fconcepts-diagnostics-depth=2", "-fno-new-ttp-matching", "-fpermissive-made-up"},
       {"-fno-new-ttp-matching", "-fpermissive-made-up"}},
  };
  for (const auto &Row : Rows) {
    SourceTree Tree({{"src/model.cpp", ModelSource}});
    std::string Audit = Tree.path("audit.json");
    ToolRun Tool = runLmfuse(withFlags({"--out-dir", Tree.path("out"), "--edit-root", Tree.path("src"), "--audit",
                                        Audit, Tree.path("src/model.cpp")},
                                       Tree, Row.Flags));
    INFO(Tool.Err);
    REQUIRE(Tool.ExitCode == 0);
    llvm::json::Value Document = readAudit(Audit);
    const llvm::json::Array *Dropped = onlyMirroredUnit(Document).getArray("dropped_flags");
    std::vector<std::string> Recorded;
    if (Dropped)
      for (const llvm::json::Value &Flag : *Dropped)
        Recorded.push_back(Flag.getAsString().value_or("<not a string>").str());
    CHECK(Recorded == Row.Recorded);
  }
}

TEST_CASE("a response file after -- is expanded as the compilers expand it; a missing one is named", "[cli][options]") {
  SourceTree Tree({{"model.cpp", needsDefine().c_str()}});
  Tree.write("flags.rsp", "-std=c++17 -DNEEDED\n-fconcepts-diagnostics-depth=2 -I" LMFUSE_CLI_STUBS "\n");
  ToolRun Run = runLmfuse({Tree.path("model.cpp"), "--", "@" + Tree.path("flags.rsp")});
  INFO(Run.Err);
  CHECK(Run.ExitCode == 0);  // NEEDED and the stubs' folder come from the file
  CHECK(countOf(Run.Out, "lmfuse::linear_cross_entropy(") == 1);
  CHECK(countOf(Run.Err, "note: dropped flags Clang does not know: -fconcepts-diagnostics-depth=2") == 1);
  ToolRun Missing = runLmfuse({Tree.path("model.cpp"), "--", "@" + Tree.path("none.rsp")});
  CHECK(Missing.ExitCode == 2);
  CHECK(countOf(Missing.Err, "the response file " + Tree.path("none.rsp") + ", which does not exist") == 1);
  // Named, relative to its folder, by the compile_flags.txt found above the source.
  Tree.write("compile_flags.txt", "@flags.rsp\n");
  ToolRun FromFlagsFile = runLmfuse({Tree.path("model.cpp")});
  INFO(FromFlagsFile.Err);
  CHECK(FromFlagsFile.ExitCode == 0);
  CHECK(countOf(FromFlagsFile.Out, "lmfuse::linear_cross_entropy(") == 1);
}

TEST_CASE("--expect-patched not met lists every site with its status and reason", "[cli][options]") {
  SourceTree Tree({{"model.cpp", ModelSource}, {"refused.cpp", RefusedSource}, {"plain.cpp", "int f() { return 1; }\n"}});
  ToolRun Short = runLmfuse(withFlags({"--expect-patched", "2", Tree.path("model.cpp"), Tree.path("refused.cpp")}, Tree));
  INFO(Short.Err);
  CHECK(Short.ExitCode == 3);
  CHECK(countOf(Short.Err, "1 site(s) patched or already patched, --expect-patched 2") == 1);
  CHECK(countOf(Short.Err, "  " + Tree.path("model.cpp") + ":8:19: patched") == 1);
  CHECK(countOf(Short.Err, "  " + Tree.path("refused.cpp") + ":6:17: unmatched (logits-rebound): ") == 1);

  ToolRun None = runLmfuse(withFlags({"--expect-patched", "1", Tree.path("plain.cpp")}, Tree));
  CHECK(None.ExitCode == 3);
  CHECK(countOf(None.Err, "no loss site found in " + Tree.path("plain.cpp")) == 1);
}

// Options that would overwrite an input or mean nothing are refused before anything is parsed or written:
// exit 2, the message names the option, and with --in-place neither the source nor its header changes.
TEST_CASE("report files over an input, unwritable or empty, and negative counts are refused up front",
          "[cli][options]") {
  const std::string Source = "#include \"extra.h\"\n#include \"empty.h\"\n" + std::string(ModelSource);
  SourceTree Tree({{"model.cpp", Source.c_str()},
                   {"extra.h", "#pragma once\n"},
                   {"empty.h", ""},
                   {"notes.txt", "the user's\n"},
                   {"old-audit.json", "{\"schema\": \"lmfuse-audit/3\"}\n"},
                   {"folder/keep", ""}});
  struct Case {
    std::vector<std::string> Options;
    std::string Message;
  };
  const std::string Model = Tree.path("model.cpp"), Header = Tree.path("extra.h"), Empty = Tree.path("empty.h");
  const std::string Notes = Tree.path("notes.txt"), OldAudit = Tree.path("old-audit.json");
  const Case Cases[] = {
      {{"--audit", Model}, "--audit " + Model + " is one of the sources: it would be overwritten"},
      {{"--export-fixes", Model}, "--export-fixes " + Model + " is one of the sources: it would be overwritten"},
      // Any existing file but an earlier report of its kind (or an empty one) is the user's: left as it is.
      {{"--audit", Header}, "--audit " + Header + " is a file that is not an lmfuse audit; it is left as it is: name another path"},
      {{"--export-fixes", Header}, "--export-fixes " + Header + " is a file that is not a fixes file; it is left as it is: name another path"},
      {{"--audit", Notes}, "--audit " + Notes + " is a file that is not an lmfuse audit; it is left as it is: name another path"},
      {{"--export-fixes", OldAudit}, "--export-fixes " + OldAudit + " is a file that is not a fixes file; it is left as it is: name another path"},
      {{"--audit", Empty}, "--audit " + Empty + " is a file the sources read: it would be overwritten"},
      {{"--export-fixes", Empty}, "--export-fixes " + Empty + " is a file the sources read: it would be overwritten"},
      {{"--audit", Tree.path("folder")}, "--audit " + Tree.path("folder") + " is a folder"},
      {{"--audit", Tree.path("missing/audit.json")},
       "--audit " + Tree.path("missing/audit.json") + ": its folder " + Tree.path("missing") + " does not exist"},
      {{"--audit", Tree.path("same.json"), "--export-fixes", Tree.path("same.json")},
       "--audit and --export-fixes name the same file " + Tree.path("same.json")},
      {{"--audit="}, "--audit needs a value"},
      {{"--export-fixes="}, "--export-fixes needs a value"},
      {{"--edit-root="}, "--edit-root needs a value"},
      {{"--patterns="}, "--patterns needs a value"},
      {{"--expect-patched", "-5"}, "--expect-patched must be a count of sites (0 or more), got -5"},
  };
  for (const Case &C : Cases) {
    std::vector<std::string> Arguments = C.Options;
    Arguments.push_back("--in-place");
    Arguments.push_back(Model);
    ToolRun Run = runLmfuse(withFlags(Arguments, Tree));
    INFO(Run.Err);
    CHECK(Run.ExitCode == 2);
    CHECK(countOf(Run.Err, "lmfuse: error: " + C.Message + "\n") == 1);
    CHECK(Tree.read("model.cpp") == Source);
    CHECK(Tree.read("extra.h") == "#pragma once\n");
    CHECK(Tree.read("notes.txt") == "the user's\n");
  }
  // An earlier audit is replaced.
  ToolRun Again = runLmfuse(withFlags({"--audit", OldAudit, Model}, Tree));
  INFO(Again.Err);
  CHECK(Again.ExitCode == 0);
  CHECK(countOf(Tree.read("old-audit.json"), "\"sites\"") == 1);
  // With --out-dir, a report where the mirror writes the copy of a source or of a header it reads: the copy
  // and the report would replace each other. Refused, and nothing is written.
  Tree.write("out/keep", "");
  for (const std::string &Copy : {Tree.path("out/model.cpp"), Tree.path("out/extra.h")}) {
    ToolRun Run = runLmfuse(withFlags({"--out-dir", Tree.path("out"), "--edit-root", Tree.Root, "--audit", Copy, Model}, Tree));
    INFO(Run.Err);
    CHECK(Run.ExitCode == 2);
    CHECK(countOf(Run.Err, "lmfuse: error: --audit " + Copy + " is where --out-dir writes the copy of ") == 1);
    CHECK_FALSE(llvm::sys::fs::exists(Tree.path("out/model.cpp")));
    CHECK_FALSE(llvm::sys::fs::exists(Tree.path("out/extra.h")));
  }
  // Without --in-place an empty --out-dir was a dry run in disguise.
  ToolRun EmptyOut = runLmfuse(withFlags({"--out-dir=", Model}, Tree));
  CHECK(EmptyOut.ExitCode == 2);
  CHECK(countOf(EmptyOut.Err, "lmfuse: error: --out-dir needs a value\n") == 1);
  CHECK(EmptyOut.Out.empty());
}

// ---------------------------------------------------------------------------------------------------
// Compile flags
// ---------------------------------------------------------------------------------------------------

TEST_CASE("-p reads the database in that folder only, and names the one it used", "[cli][database]") {
  SourceTree Tree({{"model.cpp", ModelSource}, {"build/sub/keep", ""}});
  Tree.write("build/compile_commands.json",
             "[{\"directory\": \"" + Tree.Root + "\", \"file\": \"" + Tree.path("model.cpp") +
                 "\", \"command\": \"clang++ -std=c++17 -I" LMFUSE_CLI_STUBS " -c model.cpp\"}]");
  SECTION("a folder without one: its parent's is not taken") {
    ToolRun Run = runLmfuse({"-p", Tree.path("build/sub"), Tree.path("model.cpp")});
    CHECK(Run.ExitCode == 2);
    CHECK(countOf(Run.Err, "no compile_commands.json in " + Tree.path("build/sub")) == 1);
    CHECK(Run.Out.empty());
  }
  SECTION("the folder that holds it") {
    ToolRun Run = runLmfuse({"-p", Tree.path("build"), Tree.path("model.cpp")});
    CHECK(Run.ExitCode == 0);
    CHECK(countOf(Run.Err, "note: using the compilation database " + Tree.path("build/compile_commands.json")) == 1);
  }
  SECTION("without -p, the nearest one above the file, named") {
    Tree.write("compile_commands.json", Tree.read("build/compile_commands.json"));
    ToolRun Run = runLmfuse({Tree.path("model.cpp")});
    CHECK(Run.ExitCode == 0);
    CHECK(countOf(Run.Err, "note: using the compilation database " + Tree.path("compile_commands.json")) == 1);
  }
}

TEST_CASE("a malformed compilation database is an error naming it, not 'not found'", "[cli][database]") {
  SourceTree Tree({{"model.cpp", ModelSource}});
  // Cut inside its first entry; cut after a whole entry (as a configure killed half-way leaves it), which
  // Clang's reader would recover from and use.
  const std::string Entry = "{\"directory\": \"" + Tree.Root + "\", \"command\": \"c++ -std=c++17 -I" LMFUSE_CLI_STUBS
                            " -c model.cpp\", \"file\": \"model.cpp\"}";
  for (const std::string &Text : {std::string("[{\"directory\": \"/\", "), "[" + Entry + ",", "[" + Entry + ", {\"dir"}) {
    INFO(Text);
    Tree.write("build/compile_commands.json", Text);
    ToolRun Run = runLmfuse({"--in-place", "-p", Tree.path("build"), Tree.path("model.cpp")});
    INFO(Run.Err);
    CHECK(Run.ExitCode == 2);
    CHECK(countOf(Run.Err, Tree.path("build/compile_commands.json") + " is malformed") == 1);
    CHECK(countOf(Run.Err, "not found") == 0);
    CHECK(countOf(Run.Err, "no compile flags") == 0);
    CHECK(Tree.read("model.cpp") == ModelSource);
  }
}

TEST_CASE("a header named on the command line is parsed as C++", "[cli][database]") {
  SourceTree Tree({{"model.h", ModelSource}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse(withFlags({"--audit", Audit, Tree.path("model.h")}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 0);
  REQUIRE(siteOf(readAudit(Audit), Tree.path("model.h")));
  CHECK(siteOf(readAudit(Audit), Tree.path("model.h"))->getString("status") == llvm::StringRef("patched"));
}

// ---------------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------------

TEST_CASE("every input appears in the audit, skipped ones with their reason", "[cli][inputs]") {
  SourceTree Tree({{"model.cpp", ModelSource}, {"unlisted.cpp", "int g() { return 0; }\n"}});
  Tree.write("build/compile_commands.json",
             "[{\"directory\": \"" + Tree.Root + "\", \"file\": \"" + Tree.path("model.cpp") +
                 "\", \"command\": \"clang++ -std=c++17 -I" LMFUSE_CLI_STUBS " -c model.cpp\"}]");
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse({"-p", Tree.path("build"), "--audit", Audit, Tree.path("model.cpp"),
                           Tree.path("unlisted.cpp"), Tree.path("missing.cpp")});
  CHECK(Run.ExitCode == 2);
  llvm::json::Value Document = readAudit(Audit);
  const llvm::json::Object *Unlisted = siteOf(Document, Tree.path("unlisted.cpp"));
  const llvm::json::Object *Missing = siteOf(Document, Tree.path("missing.cpp"));
  REQUIRE(Unlisted);
  REQUIRE(Missing);
  CHECK(Unlisted->getString("status") == llvm::StringRef("failed"));
  CHECK(Unlisted->getString("reason") == llvm::StringRef("no-compile-command"));
  CHECK(Missing->getString("reason") == llvm::StringRef("unreadable"));
  CHECK(siteOf(Document, Tree.path("model.cpp"))->getString("status") == llvm::StringRef("patched"));
}

TEST_CASE("a FIFO, /dev/zero or a folder given as a source is refused promptly", "[cli][inputs]") {
  SourceTree Tree({{"model.cpp", ModelSource}});
  REQUIRE(::mkfifo(Tree.path("pipe.cpp").c_str(), 0644) == 0);
  REQUIRE(!llvm::sys::fs::create_directories(Tree.path("folder.cpp")));
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse(withFlags({"--audit", Audit, Tree.path("pipe.cpp"), "/dev/zero", Tree.path("folder.cpp"),
                                     Tree.path("model.cpp")},
                                    Tree),
                          /*Seconds=*/20);
  INFO(Run.Err);
  CHECK(Run.ExitCode == 2);
  CHECK(countOf(Run.Err, "pipe.cpp: is not a regular file") == 1);
  CHECK(countOf(Run.Err, "/dev/zero: is not a regular file") == 1);
  CHECK(countOf(Run.Err, "folder.cpp: is a folder") == 1);
  CHECK(countOf(Run.Out, "lmfuse::linear_cross_entropy(") == 1);
  llvm::json::Value Document = readAudit(Audit);
  REQUIRE(siteOf(Document, "/dev/zero"));
  CHECK(siteOf(Document, "/dev/zero")->getString("reason") == llvm::StringRef("unreadable"));
}

TEST_CASE("a pattern file that is empty, only comments or only --- is an error, never a crash", "[cli][inputs]") {
  SourceTree Tree({{"model.cpp", ModelSource}});
  for (const char *Text : {"", "# nothing but a comment\n", "---\n", "---\n...\n"}) {
    INFO("pattern file: '" << Text << "'");
    Tree.write("empty.yaml", Text);
    ToolRun Run = runLmfuse(withFlags({"--patterns", Tree.path("empty.yaml"), Tree.path("model.cpp")}, Tree));
    INFO(Run.Err);
    CHECK(Run.ExitCode == 2);
    CHECK(countOf(Run.Err, Tree.path("empty.yaml") + ":1:1: error: the pattern file holds no rule set") == 1);
    CHECK(Run.Out.empty());
  }
  SECTION("a malformed key gets one error, without a follow-up about the half-read set") {
    Tree.write("bad.yaml", "name: broken\nversion: [not, a, number]\n");
    ToolRun Run = runLmfuse(withFlags({"--patterns", Tree.path("bad.yaml"), Tree.path("model.cpp")}, Tree));
    CHECK(Run.ExitCode == 2);
    CHECK(countOf(Run.Err, Tree.path("bad.yaml") + ":2:") >= 1);
    CHECK(countOf(Run.Err, "names no head") == 0);
    CHECK(countOf(Run.Err, "names no loss") == 0);
  }
}

TEST_CASE("a pattern whose argument indexes collide is an error naming the file and the pattern", "[cli][inputs]") {
  SourceTree Tree({{"model.cpp", ModelSource}});
  std::string Yaml = lmfuse::rewriter::defaultPatternText().str();
  const std::string Target = "    target: 1\n";
  REQUIRE(Yaml.find(Target) != std::string::npos);
  Yaml.replace(Yaml.find(Target), Target.size(), "    target: 0\n");  // the first loss: input 0, target 0
  Tree.write("same.yaml", Yaml);
  ToolRun Run = runLmfuse(withFlags({"--patterns", Tree.path("same.yaml"), Tree.path("model.cpp")}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 2);
  CHECK(countOf(Run.Err, Tree.path("same.yaml") + ":") >= 1);
  CHECK(countOf(Run.Err, "'input' and 'target' name the same argument") == 1);
  CHECK(Run.Out.empty());
}

// ---------------------------------------------------------------------------------------------------
// Sources read as what they are
// ---------------------------------------------------------------------------------------------------

TEST_CASE("a UTF-8 byte-order mark stays first, and the site is still patched", "[cli][encoding]") {
  std::string WithMark = "\xEF\xBB\xBF" + std::string(ModelSource);  // the first line is an #include
  SourceTree Tree({{"src/model.cpp", WithMark.c_str()}, {"inplace/model.cpp", WithMark.c_str()}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse(withFlags({"--out-dir", Tree.path("out"), "--audit", Audit, Tree.path("src/model.cpp")}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 0);
  CHECK(siteOf(readAudit(Audit), Tree.path("src/model.cpp"))->getString("status") == llvm::StringRef("patched"));
  std::string Copy = readFile(Tree.path("out/model.cpp"));
  CHECK(llvm::StringRef(Copy).starts_with("\xEF\xBB\xBF#line 1 \"" + Tree.path("src/model.cpp") + "\"\n#include"));
  CHECK(countOf(Copy, "\xEF\xBB\xBF") == 1);
  CHECK(compileError(Tree.path("out/model.cpp")) == "");

  REQUIRE(runLmfuse(withFlags({"--in-place", Tree.path("inplace/model.cpp")}, Tree)).ExitCode == 0);
  std::string InPlace = Tree.read("inplace/model.cpp");
  CHECK(llvm::StringRef(InPlace).starts_with("\xEF\xBB\xBF#include"));
  CHECK(countOf(InPlace, "\xEF\xBB\xBF") == 1);
}

TEST_CASE("CRLF sources get CRLF inserted lines and #line directives", "[cli][encoding]") {
  std::string Crlf;
  for (char C : llvm::StringRef(ModelSource)) {
    if (C == '\n')
      Crlf += '\r';
    Crlf += C;
  }
  SourceTree Tree({{"src/model.cpp", Crlf.c_str()}, {"inplace/model.cpp", Crlf.c_str()}});
  REQUIRE(runLmfuse(withFlags({"--in-place", Tree.path("inplace/model.cpp")}, Tree)).ExitCode == 0);
  REQUIRE(runLmfuse(withFlags({"--out-dir", Tree.path("out"), Tree.path("src/model.cpp")}, Tree)).ExitCode == 0);
  for (const std::string &Text : {Tree.read("inplace/model.cpp"), readFile(Tree.path("out/model.cpp"))}) {
    CHECK(countOf(Text, "lmfuse::linear_cross_entropy(") == 1);
    CHECK(countOf(Text, "\n") == countOf(Text, "\r\n"));  // no bare LF anywhere
  }
}

TEST_CASE("paths with spaces, quotes and a newline: #line copies compile, the diff applies with patch -p0",
          "[cli][encoding]") {
  const std::string Folder = "with space/quote\"d/new\nline";
  SourceTree Tree;
  Tree.write(Folder + "/model.cpp", ModelSource);
  std::string Source = Tree.path(Folder + "/model.cpp");
  ToolRun Copy = runLmfuse(withFlags({"--out-dir", Tree.path("out"), Source}, Tree));
  INFO(Copy.Err);
  REQUIRE(Copy.ExitCode == 0);
  std::string Written = readFile(Tree.path("out/model.cpp"));
  std::string Escaped = Source;
  for (size_t At = Escaped.find('"'); At != std::string::npos; At = Escaped.find('"', At + 2))
    Escaped.insert(At, "\\");
  Escaped.replace(Escaped.find('\n'), 1, "\\012");
  CHECK(llvm::StringRef(Written).starts_with("#line 1 \"" + Escaped + "\"\n"));
  CHECK(compileError(Tree.path("out/model.cpp")) == "");

  llvm::ErrorOr<std::string> Patch = llvm::sys::findProgramByName("patch");
  if (!Patch) {
    WARN("patch(1) not installed: diff application not checked");
    return;
  }
  // The diff names the file relative to the working directory: run from the tree's root.
  llvm::SmallString<256> Previous;
  REQUIRE(!llvm::sys::fs::current_path(Previous));
  REQUIRE(!llvm::sys::fs::set_current_path(Tree.Root));
  ToolRun Relative = runLmfuse(withFlags({Folder + "/model.cpp"}, Tree));
  Tree.write("relative.diff", Relative.Out);
  std::string DiffPath = Tree.path("relative.diff");
  llvm::StringRef PatchArgv[] = {*Patch, "-s", "-p0", "-i", DiffPath};
  int Applied = llvm::sys::ExecuteAndWait(*Patch, PatchArgv);
  REQUIRE(!llvm::sys::fs::set_current_path(Previous));
  CHECK(countOf(Relative.Out, "--- \"with space/quote\\\"d/new\\nline/model.cpp\"\n") == 1);
  CHECK(Applied == 0);
  CHECK(countOf(Tree.read(Folder + "/model.cpp"), "lmfuse::linear_cross_entropy(") == 1);
}

// ---------------------------------------------------------------------------------------------------
// Writes
// ---------------------------------------------------------------------------------------------------

TEST_CASE("--in-place keeps the file's mode, owner, group and extended attributes", "[cli][writes]") {
  SourceTree Tree({{"model.cpp", ModelSource}});
  std::string Path = Tree.path("model.cpp");
  REQUIRE(::chmod(Path.c_str(), 0750) == 0);
  const std::string Origin = "checked out from review 1234";
  bool Attributes = ::setxattr(Path.c_str(), "user.origin", Origin.data(), Origin.size(), 0) == 0;
  if (!Attributes)
    WARN("the temporary folder's file system takes no user attributes: they are not checked");
  bool AsRoot = ::geteuid() == 0;
  if (AsRoot)
    REQUIRE(::chown(Path.c_str(), 1, 1) == 0);
  else
    WARN("not root: the owner and group are not changed before the run, only the mode is checked");
  REQUIRE(runLmfuse(withFlags({"--in-place", Path}, Tree)).ExitCode == 0);
  struct stat After;
  REQUIRE(::stat(Path.c_str(), &After) == 0);
  CHECK(countOf(Tree.read("model.cpp"), "lmfuse::linear_cross_entropy(") == 1);
  CHECK((After.st_mode & 07777) == 0750);
  if (Attributes) {
    char Value[64] = {};
    CHECK(::getxattr(Path.c_str(), "user.origin", Value, sizeof Value) == ssize_t(Origin.size()));
    CHECK(std::string(Value) == Origin);
  }
  if (AsRoot) {
    CHECK(After.st_uid == 1);
    CHECK(After.st_gid == 1);
  }
}

TEST_CASE("a read-only or hard-linked source is refused: write-failed, exit 1, untouched", "[cli][writes]") {
  SourceTree Tree({{"model.cpp", ModelSource}});
  std::string Path = Tree.path("model.cpp");
  std::string Audit = Tree.path("audit.json");
  std::string Expected;
  SECTION("mode 0444") {
    REQUIRE(::chmod(Path.c_str(), 0444) == 0);
    Expected = "is read-only";
  }
  SECTION("a second hard link") {
    REQUIRE(::link(Path.c_str(), Tree.path("link.cpp").c_str()) == 0);
    Expected = "has 2 hard links";
  }
  ToolRun Run = runLmfuse(withFlags({"--in-place", "--audit", Audit, Path}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 1);
  CHECK(Tree.read("model.cpp") == ModelSource);
  CHECK(countOf(Run.Err, Expected) >= 1);
  llvm::json::Value Document = readAudit(Audit);
  const llvm::json::Object *Site = siteOf(Document, Path);
  REQUIRE(Site);
  CHECK(Site->getString("status") == llvm::StringRef("failed"));
  CHECK(Site->getString("reason") == llvm::StringRef("write-failed"));
  CHECK(countOf(Site->getString("detail")->str(), Expected) == 1);
  std::error_code EC;
  for (llvm::sys::fs::directory_iterator It(Tree.Root, EC), End; It != End && !EC; It.increment(EC))
    CHECK(countOf(It->path(), ".lmfuse-tmp-") == 0);
}

TEST_CASE("an --out-dir that would overwrite the sources is refused", "[cli][writes]") {
  SourceTree Tree({{"src/model.cpp", ModelSource}});
  SECTION("the sources' folder itself") {
    ToolRun Run = runLmfuse(withFlags({"--out-dir", Tree.path("src"), Tree.path("src/model.cpp")}, Tree));
    CHECK(Run.ExitCode == 2);
    CHECK(countOf(Run.Err, "would overwrite the sources") == 1);
  }
  SECTION("a folder inside the sources that holds files of its own") {
    Tree.write("src/gen/model.cpp", "// a file of the user's, not a copy\n");
    ToolRun Run = runLmfuse(withFlags({"--out-dir", Tree.path("src/gen"), Tree.path("src/model.cpp")}, Tree));
    CHECK(Run.ExitCode == 1);
    CHECK(countOf(Run.Err, "lmfuse: error: not written: " + Tree.path("src/gen/model.cpp") + " exists and is not a copy lmfuse made") == 1);
    CHECK(Tree.read("src/gen/model.cpp") == "// a file of the user's, not a copy\n");
  }
  SECTION("a folder of the output tree that is a link into the sources") {
    // out/a -> ../src/b: the copy of src/a/model.cpp would become a new file src/b/model.cpp among the sources.
    Tree.write("src/a/model.cpp", ModelSource);
    Tree.write("src/b/other.cpp", "// another source\n");
    llvm::sys::fs::create_directories(Tree.path("out"));
    REQUIRE(!llvm::sys::fs::create_link("../src/b", Tree.path("out/a")));
    ToolRun Run = runLmfuse(withFlags({"--out-dir", Tree.path("out"), "--edit-root", Tree.path("src"),
                                       Tree.path("src/a/model.cpp")}, Tree));
    INFO(Run.Err);
    CHECK(Run.ExitCode == 1);
    CHECK(countOf(Run.Err, "lmfuse: error: not written: " + Tree.path("out/a") + " is a link") == 1);
    CHECK(!fileExists(Tree.path("src/b/model.cpp")));
    CHECK(Tree.read("src/a/model.cpp") == ModelSource);
  }
  SECTION("a copy in the output tree that is a link to a file elsewhere") {
    // out/model.cpp -> ../elsewhere/model.cpp (another mirror's copy, made with `cp -rs`): replacing the link's
    // target would rewrite a file outside the output tree.
    Tree.write("elsewhere/model.cpp", "#line 1 \"/another/model.cpp\"\nint elsewhere;\n");
    llvm::sys::fs::create_directories(Tree.path("out"));
    REQUIRE(!llvm::sys::fs::create_link("../elsewhere/model.cpp", Tree.path("out/model.cpp")));
    ToolRun Run = runLmfuse(withFlags({"--out-dir", Tree.path("out"), Tree.path("src/model.cpp")}, Tree));
    INFO(Run.Err);
    CHECK(Run.ExitCode == 1);
    CHECK(countOf(Run.Err, "lmfuse: error: not written: " + Tree.path("out/model.cpp") + " is a link") == 1);
    CHECK(Tree.read("elsewhere/model.cpp") == "#line 1 \"/another/model.cpp\"\nint elsewhere;\n");
  }
  SECTION("a folder that holds the sources' folder") {
    ToolRun Run = runLmfuse(withFlags({"--out-dir", Tree.Root, Tree.path("src/model.cpp")}, Tree));
    CHECK(Run.ExitCode == 2);
    CHECK(countOf(Run.Err, "among the sources") == 1);
    CHECK(!fileExists(Tree.path("model.cpp")));
  }
  CHECK(Tree.read("src/model.cpp") == ModelSource);
}

TEST_CASE("copies an earlier run made that this run does not are removed, and nothing else", "[cli][writes]") {
  // Run 1 reads src/cfg.h; the header then moves to inc/cfg.h (another folder on the include path). Left in
  // place, out/cfg.h would be found first by the copy's `#include "cfg.h"`, in place of the header run 2 saw.
  SourceTree Tree({{"src/cfg.h", "#define FROM_SRC 1\n"}, {"src/inc/cfg.h", "#define FROM_INC 1\n"},
                   {"out/notes.txt", "the user's own file\n"}});
  Tree.write("src/model.cpp", std::string("#include \"cfg.h\"\n") + ModelSource);
  auto Run = [&] {
    return runLmfuse(withFlags({"--out-dir", Tree.path("out"), "--edit-root", Tree.path("src"), Tree.path("src/model.cpp")},
                               Tree, {"-I" + Tree.path("src/inc")}));
  };
  ToolRun First = Run();
  INFO(First.Err);
  REQUIRE(First.ExitCode == 0);
  REQUIRE(countOf(Tree.read("out/cfg.h"), "FROM_SRC") == 1);
  REQUIRE(llvm::sys::fs::remove(Tree.path("src/cfg.h")) == std::error_code());
  ToolRun Second = Run();
  INFO(Second.Err);
  CHECK(Second.ExitCode == 0);
  CHECK(!fileExists(Tree.path("out/cfg.h")));
  CHECK(countOf(Tree.read("out/inc/cfg.h"), "FROM_INC") == 1);
  CHECK(countOf(Tree.read("out/model.cpp"), "lmfuse::linear_cross_entropy(") == 1);
  CHECK(Tree.read("out/notes.txt") == "the user's own file\n");
}

// A file that starts as a copy does (`#line 1 "..."`, as generated sources may) is not one unless a run wrote it
// there: a header the run reads from inside the output folder, a generated source beside it, and another run's
// output folder nested inside all stay.
TEST_CASE("a file under the output folder that no run wrote there is never removed", "[cli][writes]") {
  const char *Table = "#line 1 \"table.def\"\nconstexpr int kVocab = 20;\n";
  const char *Lexer = "#line 1 \"lexer.rl\"\nint lex() { return 0; }\n";
  SourceTree Tree({{"src/gen/table.inc", Table}, {"src/gen/lexer.cpp", Lexer}, {"other/b.cpp", ModelSource}});
  Tree.write("src/model.cpp", std::string("#include \"gen/table.inc\"\n") + ModelSource);
  ToolRun Nested = runLmfuse(withFlags({"--out-dir", Tree.path("src/gen/second"), Tree.path("other/b.cpp")}, Tree));
  INFO(Nested.Err);
  REQUIRE(Nested.ExitCode == 0);
  REQUIRE(fileExists(Tree.path("src/gen/second/b.cpp")));
  const std::string NestedCopy = Tree.read("src/gen/second/b.cpp");
  for (const char *Run : {"first", "again"}) {
    INFO(Run);
    ToolRun Into = runLmfuse(withFlags({"--out-dir", Tree.path("src/gen"), Tree.path("src/model.cpp")}, Tree));
    INFO(Into.Err);
    CHECK(Into.ExitCode == 0);
    CHECK(countOf(Tree.read("src/gen/model.cpp"), "lmfuse::linear_cross_entropy(") == 1);
    CHECK(Tree.read("src/gen/table.inc") == Table);
    CHECK(Tree.read("src/gen/lexer.cpp") == Lexer);
    CHECK(Tree.read("src/gen/second/b.cpp") == NestedCopy);
  }
}

TEST_CASE("a run waits while another holds its output tree, then writes", "[cli][writes]") {
  SourceTree Tree({{"src/model.cpp", ModelSource}});
  std::string LockPath = Tree.path("out/.lmfuse-cache/lock");
  REQUIRE(!llvm::sys::fs::create_directories(Tree.path("out/.lmfuse-cache")));
  int Held = -1;
  REQUIRE(!llvm::sys::fs::openFileForWrite(LockPath, Held, llvm::sys::fs::CD_OpenAlways));
  REQUIRE(!llvm::sys::fs::tryLockFile(Held));
  llvm::SmallString<256> ErrPath;
  REQUIRE(!llvm::sys::fs::createTemporaryFile("lmfuse-cli-err", "txt", ErrPath));
  std::vector<std::string> Arguments = withFlags({"--out-dir", Tree.path("out"), Tree.path("src/model.cpp")}, Tree);
  std::string Executable = lmfuseUnderTest();
  if (takesLibraryInclude(Executable))  // as runLmfuse tells it: the stubs' lmfuse header is the library's
    Arguments.insert(Arguments.begin(), "--library-include=" LMFUSE_CLI_STUBS);
  std::vector<llvm::StringRef> Argv{Executable};
  for (const std::string &Argument : Arguments)
    Argv.push_back(Argument);
  std::optional<llvm::StringRef> Redirects[] = {std::nullopt, llvm::StringRef("/dev/null"), llvm::StringRef(ErrPath)};
  llvm::sys::ProcessInfo Child = llvm::sys::ExecuteNoWait(Executable, Argv, std::nullopt, Redirects);
  REQUIRE(Child.Pid > 0);
  bool Waiting = false;
  for (int Tries = 0; Tries < 300 && !Waiting; ++Tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Waiting = countOf(readFile(ErrPath), "waiting for another lmfuse run that writes this output tree") == 1;
  }
  CHECK(Waiting);
  CHECK(!fileExists(Tree.path("out/model.cpp")));
  llvm::sys::fs::unlockFile(Held);
  ::close(Held);
  llvm::sys::ProcessInfo Done = llvm::sys::Wait(Child, 120);
  INFO(readFile(ErrPath));
  CHECK(Done.ReturnCode == 0);
  CHECK(countOf(readFile(Tree.path("out/model.cpp")), "lmfuse::linear_cross_entropy(") == 1);
  llvm::sys::fs::remove(ErrPath);
}

TEST_CASE("an --out-dir copy of a file without patched sites that cannot be written is failed", "[cli][writes]") {
  SourceTree Tree({{"src/model.cpp", ModelSource}, {"src/refused.cpp", RefusedSource}, {"out/refused.cpp/occupied", ""}});
  std::string Audit = Tree.path("audit.json");
  ToolRun Run = runLmfuse(withFlags(
      {"--out-dir", Tree.path("out"), "--audit", Audit, Tree.path("src/model.cpp"), Tree.path("src/refused.cpp")}, Tree));
  INFO(Run.Err);
  CHECK(Run.ExitCode == 1);
  llvm::json::Value Document = readAudit(Audit);
  bool Failed = false;
  for (const llvm::json::Value &Site : sitesOf(Document))
    Failed |= field(Site, "file") == Tree.path("src/refused.cpp") && field(Site, "reason") == "write-failed";
  CHECK(Failed);
  CHECK(countOf(readFile(Tree.path("out/model.cpp")), "lmfuse::linear_cross_entropy(") == 1);
}
