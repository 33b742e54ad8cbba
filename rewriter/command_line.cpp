// Argument adjusters from clang/Tooling (the ones clang-tidy applies), plus two of lmfuse's own: a
// header's language, and unknown flags judged by the Clang driver's own option table (what the driver
// would reject with "unknown argument" is exactly what is dropped).
#include "command_line.h"

#include <algorithm>

#include "llvm/ADT/STLExtras.h"

#include "clang/Driver/Options.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Option/ArgList.h"
#include "llvm/Option/OptTable.h"
#include "llvm/Support/Path.h"

namespace lmfuse::rewriter {

namespace {

using clang::tooling::CommandLineArguments;

bool isHeader(llvm::StringRef File) {
  return llvm::StringSwitch<bool>(llvm::sys::path::extension(File).lower())
      .Cases(".h", ".hh", ".hpp", ".hxx", true)
      .Default(false);
}

bool namesLanguage(const CommandLineArguments &Arguments) {
  for (llvm::StringRef Argument : Arguments)
    if (Argument.starts_with("-x") || Argument.starts_with("--language") || Argument == "/TP" ||
        Argument.starts_with("/Tp"))
      return true;
  return false;
}

}  // namespace

std::vector<size_t> unknownFlags(const std::vector<std::string> &Arguments) {
  std::vector<const char *> Pointers;
  for (const std::string &Argument : Arguments)
    Pointers.push_back(Argument.c_str());
  unsigned MissingIndex = 0, MissingCount = 0;
  llvm::opt::InputArgList Parsed = clang::driver::getDriverOptTable().ParseArgs(
      Pointers, MissingIndex, MissingCount, llvm::opt::Visibility(clang::driver::options::ClangOption));
  std::vector<size_t> Unknown;
  for (const llvm::opt::Arg *Argument : Parsed)
    if (Argument->getOption().getKind() == llvm::opt::Option::UnknownClass)
      Unknown.push_back(Argument->getIndex());
  return Unknown;
}

bool steersOnlyDiagnosticsOrOptimisation(llvm::StringRef Flag) {
  // GCC's option families that steer what it reports, how it optimises or instruments the code it generates,
  // and never what a construct of the program means (listed by prefix; `-fno-` forms included).
  static const char *const Families[] = {
      "-W", "-fdiagnostics-", "-fconcepts-diagnostics-depth=", "-fmax-errors=", "-fmessage-length=",
      "-fopt-info", "-flto", "-ffat-lto-objects", "-fuse-linker-plugin", "-fipa-", "-ftree-", "-fgcse",
      "-floop-", "-fgraphite", "-fvect-cost-model", "-fsimd-cost-model", "-fsched", "-fpredictive-commoning",
      "-fdevirtualize", "-fvar-tracking", "-fcompare-debug", "-fprofile-", "-fbranch-probabilities",
      "-fharden-", "-fstack-", "-fcf-protection", "-fselective-scheduling",
      "-fira-", "-flive-range-shrinkage", "-fpeel-loops", "-funroll-", "-fsplit-", "-fversion-loops",
      "-fallow-store-data-races", "-fcode-hoisting", "-fcrossjumping", "-fisolate-erroneous-paths"};
  const std::string Named = Flag.starts_with("-fno-") ? "-f" + Flag.drop_front(5).str() : Flag.str();
  return llvm::any_of(Families, [&](const char *Family) { return llvm::StringRef(Named).starts_with(Family); });
}

std::string droppedFlagsNote(const std::vector<std::string> &Flags) {
  std::string Note = "dropped flags Clang does not know:";
  for (const std::string &Flag : Flags)
    Note += " " + Flag;
  return Note;
}

AdjustedCommand adjustCommand(const clang::tooling::CompileCommand &Command, const CommandLineOptions &Options) {
  using namespace clang::tooling;
  AdjustedCommand Result;
  CommandLineArguments Arguments = Command.CommandLine;
  std::vector<size_t> Unknown =
      unknownFlags(CommandLineArguments(Arguments.begin() + std::min<size_t>(1, Arguments.size()), Arguments.end()));
  for (auto It = Unknown.rbegin(); It != Unknown.rend(); ++It) {
    Result.Dropped.insert(Result.Dropped.begin(), Arguments[*It + 1]);
    Arguments.erase(Arguments.begin() + *It + 1);
  }

  ArgumentsAdjuster Adjust = combineAdjusters(
      combineAdjusters(getClangStripOutputAdjuster(), getClangStripDependencyFileAdjuster()),
      getClangSyntaxOnlyAdjuster());
  CommandLineArguments Before = Options.ExtraArgsBefore;
  if (isHeader(Command.Filename) && !namesLanguage(Arguments) && !namesLanguage(Options.ExtraArgs) &&
      !namesLanguage(Options.ExtraArgsBefore)) {
    Before.push_back("-x");
    Before.push_back("c++");
  }
  if (!Before.empty())
    Adjust = combineAdjusters(Adjust, getInsertArgumentAdjuster(Before, ArgumentInsertPosition::BEGIN));
  CommandLineArguments After = Options.ExtraArgs;
  if (!Options.ResourceDir.empty())
    After.push_back("-resource-dir=" + Options.ResourceDir);
  // After the user's own -I: a project that vendors its own copy of lmfuse keeps it.
  for (const std::string &Dir : Options.HeaderDirs) {
    After.push_back("-I");
    After.push_back(Dir);
  }
  Adjust = combineAdjusters(Adjust, getInsertArgumentAdjuster(After, ArgumentInsertPosition::END));
  Result.Arguments = Adjust(Arguments, Command.Filename);
  return Result;
}

}  // namespace lmfuse::rewriter
