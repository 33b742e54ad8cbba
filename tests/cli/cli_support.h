// Shared by the CLI tests: the stub-based sources, a throw-away source tree, and running the built lmfuse
// (LMFUSE_CLI_UNDER_TEST in the environment names another binary, e.g. an older build, to check that a test
// fails without the change it covers).
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <unistd.h>  // environ
#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

namespace {

// ---------------------------------------------------------------------------------------------------
// Sources
// ---------------------------------------------------------------------------------------------------

// The canonical site: head before the guard, loss on reshaped logits, ignore_index -1.
const char *ModelSource = R"cpp(#include <torch/torch.h>
namespace F = torch::nn::functional;

struct GPTImpl : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor &x, c10::optional<torch::Tensor> targets) {
    torch::Tensor loss;
    auto logits = lm_head->forward(x);
    if (targets.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(-1));
    }
    return {logits, loss};
  }
};
)cpp";

// A site the rewriter refuses (the logits are rescaled before the loss).
const char *RefusedSource = R"cpp(#include <torch/torch.h>
namespace F = torch::nn::functional;

torch::Tensor scaled_loss(torch::nn::Linear &head, const torch::Tensor &x, c10::optional<torch::Tensor> labels) {
  torch::Tensor loss;
  auto logits = head(x);
  logits = logits * 0.5;
  if (labels.has_value()) {
    loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), labels->view(-1));
  }
  return loss;
}
)cpp";

// A header with one site, included by two translation units. WITH_AUX makes the labels branch do more
// than the loss, so a unit compiled with it refuses the site another unit patches.
const char *SharedHeader = R"cpp(#pragma once
#include <torch/torch.h>
namespace F = torch::nn::functional;

inline torch::Tensor shared_loss(torch::nn::Linear &lm_head, const torch::Tensor &h,
                                 c10::optional<torch::Tensor> labels, int &aux) {
  torch::Tensor loss;
  auto logits = lm_head(h);
  if (labels.has_value()) {
#ifdef WITH_AUX
    aux += 1;
#endif
    loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), labels->view(-1));
  }
  return loss;
}
)cpp";

const char *SharedUserA = "#include \"shared.h\"\nint unit_a() { return 1; }\n";
const char *SharedUserB = "#include \"shared.h\"\nint unit_b() { return 2; }\n";

const char *BrokenSource = R"cpp(#include <torch/torch.h>
torch::Tensor broken(const torch::Tensor &x) {
  return x.no_such_method();
}
)cpp";

// ---------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------

std::string readFile(llvm::StringRef Path) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path);
  if (!Buffer)
    FAIL("cannot read " << Path.str());
  return (*Buffer)->getBuffer().str();
}

bool fileExists(llvm::StringRef Path) { return llvm::sys::fs::exists(Path); }

unsigned countOf(llvm::StringRef Text, llvm::StringRef Needle) { return Text.count(Needle); }

// A fresh folder holding Files; removed at the end of the test.
class SourceTree {
public:
  explicit SourceTree(std::initializer_list<std::pair<const char *, const char *>> Files = {}) {
    llvm::SmallString<256> Dir;
    REQUIRE(!llvm::sys::fs::createUniqueDirectory("lmfuse-cli", Dir));
    llvm::SmallString<256> Real;
    REQUIRE(!llvm::sys::fs::real_path(Dir, Real));
    Root = std::string(Real);
    for (const auto &[Name, Contents] : Files)
      write(Name, Contents);
  }
  SourceTree(const SourceTree &) = delete;
  ~SourceTree() { llvm::sys::fs::remove_directories(Root); }

  std::string path(llvm::StringRef Name) const {
    llvm::SmallString<256> Path(Root);
    llvm::sys::path::append(Path, Name);
    return std::string(Path);
  }
  void write(llvm::StringRef Name, llvm::StringRef Contents) const {
    std::string Path = path(Name);
    REQUIRE(!llvm::sys::fs::create_directories(llvm::sys::path::parent_path(Path)));
    std::error_code EC;
    llvm::raw_fd_ostream OS(Path, EC);
    REQUIRE(!EC);
    OS << Contents;
  }
  std::string read(llvm::StringRef Name) const { return readFile(path(Name)); }

  std::string Root;
};

struct ToolRun {
  int ExitCode = -1;
  std::string Out, Err;
};

// Where and how a run starts: by default in the test's own working directory and environment (the tool
// resolves relative paths against its working directory, so most tests pass absolute ones).
struct RunContext {
  std::string WorkingDir;             ///< "": the test's
  std::vector<std::string> Variables;  ///< NAME=value added to the test's environment
  /// The sources compile the stubs' lmfuse/torch.h (withFlags puts the stubs on the include path), so a run is
  /// told they are the library's (--library-include), unless its arguments name a folder themselves or this
  /// asks for the tool's own default.
  bool ToolsOwnLibrary = false;
};

// Whether Executable takes --library-include (an older build under LMFUSE_CLI_UNDER_TEST may not).
inline bool takesLibraryInclude(llvm::StringRef Executable) {
  static std::map<std::string, bool> Known;
  auto [It, Inserted] = Known.try_emplace(Executable.str(), false);
  if (Inserted) {
    llvm::SmallString<256> HelpPath;
    REQUIRE(!llvm::sys::fs::createTemporaryFile("lmfuse-cli-help", "txt", HelpPath));
    std::optional<llvm::StringRef> Redirects[] = {std::nullopt, llvm::StringRef(HelpPath), llvm::StringRef(HelpPath)};
    llvm::StringRef Argv[] = {Executable, "--help"};
    llvm::sys::ExecuteAndWait(Executable, Argv, std::nullopt, Redirects, 60);
    It->second = readFile(HelpPath).find("--library-include") != std::string::npos;
    llvm::sys::fs::remove(HelpPath);
  }
  return It->second;
}

// Runs Executable with Arguments and captures its exit code and output.
ToolRun runLmfuseAt(llvm::StringRef Executable, const std::vector<std::string> &Arguments, unsigned Seconds = 60,
                    const RunContext &Context = {}) {
  llvm::SmallString<256> OutPath, ErrPath;
  REQUIRE(!llvm::sys::fs::createTemporaryFile("lmfuse-cli-out", "txt", OutPath));
  REQUIRE(!llvm::sys::fs::createTemporaryFile("lmfuse-cli-err", "txt", ErrPath));
  // Another working directory through the shell: `cd DIR && exec lmfuse ARGS...`.
  std::string Program = Context.WorkingDir.empty() ? Executable.str() : "/bin/sh";
  std::vector<std::string> Words;
  if (!Context.WorkingDir.empty())
    Words = {"sh", "-c", "cd \"$0\" && exec \"$@\"", Context.WorkingDir};
  Words.push_back(Executable.str());
  if (!Context.ToolsOwnLibrary && takesLibraryInclude(Executable) &&
      llvm::none_of(Arguments, [](const std::string &Word) { return llvm::StringRef(Word).starts_with("--library-include"); }))
    Words.push_back("--library-include=" LMFUSE_CLI_STUBS);
  Words.insert(Words.end(), Arguments.begin(), Arguments.end());
  std::vector<llvm::StringRef> Argv(Words.begin(), Words.end());
  std::vector<std::string> Environment;
  for (char **Variable = environ; *Variable; ++Variable)
    Environment.push_back(*Variable);
  Environment.insert(Environment.end(), Context.Variables.begin(), Context.Variables.end());
  std::vector<llvm::StringRef> Env(Environment.begin(), Environment.end());
  std::optional<llvm::StringRef> Redirects[] = {std::nullopt, llvm::StringRef(OutPath), llvm::StringRef(ErrPath)};
  std::string Message;
  ToolRun Run;
  Run.ExitCode = llvm::sys::ExecuteAndWait(Program, Argv, llvm::ArrayRef<llvm::StringRef>(Env), Redirects, Seconds, 0,
                                           &Message);
  INFO(Message);
  REQUIRE(Run.ExitCode >= 0);
  Run.Out = readFile(OutPath);
  Run.Err = readFile(ErrPath);
  llvm::sys::fs::remove(OutPath);
  llvm::sys::fs::remove(ErrPath);
  return Run;
}

inline std::string lmfuseUnderTest() {
  const char *Other = std::getenv("LMFUSE_CLI_UNDER_TEST");
  return Other && *Other ? Other : LMFUSE_EXECUTABLE;
}

ToolRun runLmfuse(const std::vector<std::string> &Arguments, unsigned Seconds = 60, const RunContext &Context = {}) {
  return runLmfuseAt(lmfuseUnderTest(), Arguments, Seconds, Context);
}

// Flags after `--`: C++17, the stubs, the tree itself.
std::vector<std::string> withFlags(std::vector<std::string> Arguments, const SourceTree &Tree,
                                   std::vector<std::string> Extra = {}) {
  Arguments.push_back("--");
  Arguments.push_back("-std=c++17");
  for (const std::string &Flag : Extra)
    Arguments.push_back(Flag);
  Arguments.push_back("-I" LMFUSE_CLI_STUBS);
  Arguments.push_back("-I" + Tree.Root);
  return Arguments;
}

// Per-file flags through -p: <tree>/build/compile_commands.json, one clang++ command per source of the
// tree with the flags withFlags gives plus its own (a -D, say). Returns the folder to pass to -p.
std::string writeCompileCommands(const SourceTree &Tree, std::vector<std::pair<std::string, std::string>> FlagsByFile) {
  std::string Entries;
  for (const auto &[File, Flags] : FlagsByFile)
    Entries += std::string(Entries.empty() ? "[" : ",\n") + "{\"directory\": \"" + Tree.Root + "\", \"file\": \"" +
               Tree.path(File) + "\", \"command\": \"clang++ -std=c++17 " + Flags + " -I" LMFUSE_CLI_STUBS " -I" +
               Tree.Root + " -c " + Tree.path(File) + "\"}";
  Tree.write("build/compile_commands.json", Entries + "]");
  return Tree.path("build");
}

llvm::json::Value readAudit(llvm::StringRef Path) {
  auto Parsed = llvm::json::parse(readFile(Path));
  if (!Parsed)
    FAIL("the audit is not JSON: " << llvm::toString(Parsed.takeError()));
  return std::move(*Parsed);
}

const llvm::json::Array &sitesOf(const llvm::json::Value &Audit) {
  const llvm::json::Array *Sites = Audit.getAsObject()->getArray("sites");
  REQUIRE(Sites);
  return *Sites;
}

// The audit's record of the one unit its mirror holds (a unit that read a rewritten file), and the macros recorded
// of that unit.
const llvm::json::Object &onlyMirroredUnit(const llvm::json::Value &Audit) {
  const llvm::json::Object *Mirror = Audit.getAsObject()->getObject("mirror");
  REQUIRE(Mirror);
  const llvm::json::Array *Units = Mirror->getArray("units");
  REQUIRE(Units);
  REQUIRE(Units->size() == 1);
  return *(*Units)[0].getAsObject();
}

const llvm::json::Array &macrosOf(const llvm::json::Object &Unit) {
  const llvm::json::Array *Macros = Unit.getArray("macros");
  REQUIRE(Macros);
  return *Macros;
}

int64_t summaryCount(const llvm::json::Value &Audit, llvm::StringRef Key) {
  auto Count = Audit.getAsObject()->getObject("summary")->getInteger(Key);
  REQUIRE(Count);
  return *Count;
}

std::string field(const llvm::json::Value &Site, llvm::StringRef Key) {
  auto Value = Site.getAsObject()->getString(Key);
  return Value ? Value->str() : "<missing>";
}

}  // namespace
