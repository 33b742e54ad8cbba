// lmfuse: rewrites `logits = lm_head(h); if (labels) loss = cross_entropy(logits, labels)` in LibTorch model
// sources into a call of the fused lmfuse::linear_cross_entropy, refuses every site where that could change
// what the model computes, and writes an audit of every site it saw.
//
//   lmfuse [options] <files> -- <compiler flags>      flags for every file
//   lmfuse [options] -p <build dir> <files>           flags from <build dir>/compile_commands.json
//
// Exit status (the first that applies): 1 a site failed (parse error, re-parse failure, edit conflict,
// write failure); 2 a file was skipped (no compile command, unreadable) or the command line, pattern file
// or compilation database is unusable; 3 fewer sites patched than --expect-patched; 0 otherwise.
// Refused, failed and suppressed sites are printed as clang-style warnings (site_diagnostics.h); every file
// written goes through writeFileAtomically (safe_write.h).
//
// The options are parsed here rather than by CommonOptionsParser because that parser falls back to
// "running without flags" when no compilation database is found; lmfuse treats missing flags as an error.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <optional>

#include "audit.h"
#include "command_line.h"
#include "compile_database.h"
#include "driver.h"
#include "edit_set.h"
#include "export_fixes.h"
#include "outcome_cache.h"
#include "out_tree.h"
#include "patterns.h"
#include "safe_write.h"
#include "site_diagnostics.h"

#include "clang/Basic/Version.h"
#include "clang/Tooling/DiagnosticsYaml.h"
#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/YAMLTraits.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace lmfuse::rewriter;

namespace {

enum ExitCode { ExitOk = 0, ExitFailed = 1, ExitSkipped = 2, ExitExpectationNotMet = 3 };

cl::OptionCategory LmfuseCategory("lmfuse options");

cl::opt<std::string> BuildPath("p", cl::desc("Build folder holding compile_commands.json"),
                               cl::value_desc("build dir"), cl::cat(LmfuseCategory));
cl::list<std::string> SourcePaths(cl::Positional, cl::desc("<source files>"), cl::cat(LmfuseCategory));
cl::opt<bool> InPlace("in-place", cl::desc("Rewrite the source files themselves (default: print a diff)"),
                      cl::cat(LmfuseCategory));
cl::alias Fix("fix", cl::desc("Same as --in-place (clang-tidy's spelling)"), cl::aliasopt(InPlace),
              cl::cat(LmfuseCategory));
cl::opt<std::string> OutDir("out-dir",
                            cl::desc("Write rewritten copies (with #line directives) under DIR, mirroring the "
                                     "sources' tree; the sources stay untouched"),
                            cl::value_desc("DIR"), cl::cat(LmfuseCategory));
cl::opt<std::string> AuditPath("audit", cl::desc("Write the JSON audit of every site to FILE"),
                               cl::value_desc("FILE"), cl::cat(LmfuseCategory));
cl::opt<std::string> ExportFixes("export-fixes",
                                 cl::desc("Write the edits as clang-tidy fixes YAML (for clang-apply-replacements)"),
                                 cl::value_desc("FILE"), cl::cat(LmfuseCategory));
cl::opt<int> ExpectPatched("expect-patched", cl::desc("Exit 3 when fewer than N sites end patched or already patched"),
                           cl::value_desc("N"), cl::init(-1), cl::cat(LmfuseCategory));
cl::opt<std::string> EditRoot("edit-root", cl::desc("Never write a file outside DIR (with --out-dir: the tree mirrored)"),
                              cl::value_desc("DIR"), cl::cat(LmfuseCategory));
cl::opt<unsigned> Jobs("j", cl::desc("Translation units parsed in parallel (default: all cores)"),
                       cl::value_desc("N"), cl::init(0), cl::Prefix, cl::cat(LmfuseCategory));
cl::opt<std::string> PatternsPath("patterns", cl::desc("Rule set to use instead of the built-in patterns/libtorch.yaml"),
                                  cl::value_desc("FILE"), cl::cat(LmfuseCategory));
cl::opt<bool> Summary("summary", cl::desc("Print the audit's summary counts on stderr"), cl::cat(LmfuseCategory));
cl::list<std::string> ExtraArgs("extra-arg", cl::desc("Additional argument to append to every compile command"),
                                cl::value_desc("ARG"), cl::cat(LmfuseCategory));
cl::list<std::string> ExtraArgsBefore("extra-arg-before",
                                      cl::desc("Additional argument to prepend to every compile command"),
                                      cl::value_desc("ARG"), cl::cat(LmfuseCategory));
cl::list<std::string> LibraryIncludes(
    "library-include",
    cl::desc("An include folder of the lmfuse library the program is built with (repeatable; lmfuse_rewrite gives "
             "lmfuse::torch's; default: this tool's own): only its lmfuse/ headers are taken for the library's when "
             "the rewrite is checked"),
    cl::value_desc("DIR"), cl::cat(LmfuseCategory));
cl::opt<bool> Quiet("quiet", cl::desc("Print errors only: no per-site warnings, no notes"), cl::cat(LmfuseCategory));
cl::opt<bool> Verbose("verbose", cl::desc("Also print a remark for every patched or already patched site"),
                      cl::cat(LmfuseCategory));

const char *Overview =
    "lmfuse: fuse lm_head + cross_entropy in LibTorch C++ model code into lmfuse::linear_cross_entropy.\n"
    "  lmfuse [options] <files> -- <compiler flags>\n"
    "  lmfuse [options] -p <build dir> <files>\n";

int fail(ExitCode Code, const Twine &Message) {
  errs() << "lmfuse: error: " << Message << "\n";
  return Code;
}

bool isDirectoryWith(StringRef Dir, StringRef Relative) {
  SmallString<256> Path(Dir);
  sys::path::append(Path, Relative);
  return sys::fs::exists(Path);
}

std::string executableDir(const char *Argv0) {
  std::string Exe = sys::fs::getMainExecutable(Argv0, reinterpret_cast<void *>(&executableDir));
  return sys::path::parent_path(Exe).str();
}

// The Clang resource directory (stddef.h, ...): next to an installed binary first
// (<prefix>/lib/clang/<major>), then the one this binary was built against.
std::string findResourceDir(StringRef ExeDir) {
  SmallString<256> Beside(ExeDir);
  sys::path::append(Beside, "..", "lib", "clang", CLANG_VERSION_MAJOR_STRING);
  sys::path::remove_dots(Beside, true);
  for (StringRef Candidate : {StringRef(Beside), StringRef(LMFUSE_CLANG_RESOURCE_DIR)})
    if (isDirectoryWith(Candidate, "include/stddef.h"))
      return Candidate.str();
  return "";
}

// Where <lmfuse/torch.h> is: <prefix>/include for an installed binary, else the source tree it was built from.
std::vector<std::string> findHeaderDirs(StringRef ExeDir) {
  SmallString<256> Installed(ExeDir);
  sys::path::append(Installed, "..", "include");
  sys::path::remove_dots(Installed, true);
  if (isDirectoryWith(Installed, "lmfuse/torch.h"))
    return {Installed.str().str()};
  return {LMFUSE_SOURCE_TORCH_INCLUDE_DIR, LMFUSE_SOURCE_RUNTIME_INCLUDE_DIR};
}

// The rewritten sources: an output tree, in-place writes, or a diff on stdout. A file that cannot be
// written turns its patched sites (or, without any, the file itself) into failed/write-failed. An output
// tree returns what the audit records of it: each copy's original and digest.
std::optional<AuditMirror> writeSources(DriverResult &Result, const std::vector<std::string> &Inputs,
                                        StringRef Root, StringRef OutRoot) {
  if (!OutDir.empty()) {
    lmfuse::tool::OutTreeResult Tree = lmfuse::tool::writeOutTree(Result, Inputs, Root, OutRoot);
    for (const auto &[File, Message] : Tree.Failures) {
      errs() << "lmfuse: error: " << Message << "\n";
      failWrite(Result.Sites, File, Message);
    }
    AuditMirror Mirror{Root.str(), std::move(Tree.Mirrored), {}};
    for (const lmfuse::rewriter::UnitMacros &Unit : Result.Units) {
      std::string Relative = lmfuse::tool::mirroredPath(Unit.File, Root, "");
      auto Contents = MemoryBuffer::getFile(Unit.File);
      std::string Digest = Contents ? lmfuse::rewriter::contentDigest((*Contents)->getBuffer()) : "";
      Mirror.Units.push_back({Relative.empty() ? Unit.File : Relative, Digest, Unit.Macros, Unit.LanguageFlagsDropped});
    }
    return Mirror;
  }
  if (InPlace) {
    for (const FileRewrite &Rewrite : Result.Rewrites) {
      bool Changed = false;
      if (Error Err = lmfuse::tool::writeIfChanged(Rewrite.Path, Rewrite.Rewritten, Changed, Rewrite.Original)) {
        std::string Message = toString(std::move(Err));
        errs() << "lmfuse: error: " << Message << "\n";
        failWrite(Result.Sites, Rewrite.Path, Message);
      }
    }
  } else {
    // Paths below the working directory are shown relative to it, so `patch -p0` applies the diff there.
    SmallString<256> CurrentDir;
    sys::fs::current_path(CurrentDir);
    for (const FileRewrite &Rewrite : Result.Rewrites) {
      StringRef Shown = Rewrite.Path;
      if (!Shown.consume_front(CurrentDir) || !Shown.consume_front("/"))
        Shown = Rewrite.Path;
      outs() << unifiedDiff(Shown, Rewrite.Original, Rewrite.Edits);
    }
    outs().flush();
  }
  return std::nullopt;
}

// --expect-patched not met: every site with its status and reason, so the build log says why.
void explainExpectation(const std::vector<SiteRecord> &Sites, const std::vector<std::string> &Inputs,
                        unsigned Count) {
  errs() << "lmfuse: error: " << Count << " site(s) patched or already patched, --expect-patched " << ExpectPatched
         << "\n";
  bool AnySite = false;
  for (const SiteRecord &Site : Sites) {
    AnySite |= !isSkipReason(Site.Reason);
    errs() << "  " << Site.File << ":" << Site.Line << ":" << Site.Column << ": " << statusName(Site.Status);
    if (Site.Reason != ReasonKind::None)
      errs() << " (" << reasonCode(Site.Reason) << ")";
    if (!Site.Detail.empty())
      errs() << ": " << Site.Detail;
    errs() << "\n";
  }
  if (!AnySite) {
    errs() << "lmfuse: error: no loss site found in";
    for (const std::string &Input : Inputs)
      errs() << " " << Input;
    errs() << "\n";
  }
}

// Everything besides the command and its inputs that changes a unit's outcome: a cache entry made under a
// different fingerprint is a miss.
std::string cacheFingerprint(StringRef PatternText, const DriverOptions &Options, StringRef Executable) {
  // The binary's own digest, not only its version: a build of other analysis code under the same version (an
  // upgrade, a development build) must not serve the outcomes an earlier one decided.
  std::string Fingerprint = std::string("lmfuse ") + LMFUSE_VERSION + "\ntool " + lmfuse::tool::hashFile(Executable) +
                            "\npatterns " +
                            lmfuse::tool::hashText(PatternText) + "\nresource-dir " + Options.ResourceDir +
                            "\nedit-root " + Options.EditRoot;
  for (const std::string &Folder : Options.LibraryIncludes)
    Fingerprint += "\nlibrary-include " + Folder;
  for (const std::string &Argument : Options.ExtraArgsBefore)
    Fingerprint += "\nextra-arg-before " + Argument;
  for (const std::string &Argument : Options.ExtraArgs)
    Fingerprint += "\nextra-arg " + Argument;
  // The re-parse check reads the lmfuse headers: a changed header must check the rewrites again.
  std::vector<std::string> Folders = Options.HeaderDirs;
  for (const std::string &Folder : Options.LibraryIncludes)
    if (!llvm::is_contained(Folders, Folder))  // the tool's own headers are the default library's
      Folders.push_back(Folder);
  for (const std::string &Dir : Folders)
    for (StringRef Header : {"lmfuse/torch.h", "lmfuse/flce.h"}) {
      SmallString<256> Path(Dir);
      sys::path::append(Path, Header);
      Fingerprint += "\n" + std::string(Path) + " " + lmfuse::tool::hashFile(Path);
    }
  return Fingerprint;
}

// An option given with an empty value ("--audit="): refused rather than read as "not given".
std::string emptyOptionValue() {
  for (const cl::opt<std::string> *Option : {&BuildPath, &OutDir, &AuditPath, &ExportFixes, &EditRoot, &PatternsPath})
    if (Option->getNumOccurrences() && Option->empty())
      return "--" + Option->ArgStr.str() + " needs a value";
  return "";
}

// The files --audit and --export-fixes write, with their options' names.
std::vector<std::pair<std::string, std::string>> reportOutputs(StringRef CurrentDir) {
  std::vector<std::pair<std::string, std::string>> Outputs;
  if (!AuditPath.empty())
    Outputs.emplace_back("--audit", canonicalPath(AuditPath, CurrentDir));
  if (!ExportFixes.empty())
    Outputs.emplace_back("--export-fixes", canonicalPath(ExportFixes, CurrentDir));
  return Outputs;
}

// Whether the file at Path (which exists) is one a report may replace: empty, or an earlier report of its kind
// (an lmfuse audit: a JSON object whose schema is lmfuse-audit/N; fixes: clang-tidy's fixes YAML). Anything
// else at that path (a source of the project, a header, notes) is the user's, and is left as it is.
bool replaceableReport(StringRef Option, StringRef Path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> Existing = MemoryBuffer::getFile(Path);
  if (!Existing)
    return false;
  StringRef Text = (*Existing)->getBuffer();
  if (Text.trim().empty())
    return true;
  if (Option == "--audit") {
    Expected<json::Value> Document = json::parse(Text);
    if (!Document) {
      consumeError(Document.takeError());
      return false;
    }
    const json::Object *Object = Document->getAsObject();
    std::optional<StringRef> Schema = Object ? Object->getString("schema") : std::nullopt;
    return Schema && Schema->starts_with("lmfuse-audit/");
  }
  clang::tooling::TranslationUnitDiagnostics Fixes;
  yaml::Input YAML(Text);
  YAML >> Fixes;
  return !YAML.error() && !Fixes.MainSourceFile.empty();
}

// Before anything is parsed or written: a report may not replace a source (or the other report, or any file
// that is not an earlier report), and its folder must exist and be writable, so a run never rewrites sources
// in place and then fails to report.
std::string unusableReportOutput(const std::vector<std::pair<std::string, std::string>> &Outputs,
                                 const std::vector<std::string> &Inputs) {
  for (const auto &[Option, Path] : Outputs) {
    if (llvm::is_contained(Inputs, Path))
      return Option + " " + Path + " is one of the sources: it would be overwritten";
    if (sys::fs::is_directory(Path))
      return Option + " " + Path + " is a folder";
    if (sys::fs::exists(Path) && !replaceableReport(Option, Path))
      return Option + " " + Path + " is a file that is not " +
             (Option == "--audit" ? "an lmfuse audit" : "a fixes file") + "; it is left as it is: name another path";
    StringRef Folder = sys::path::parent_path(Path);
    if (!sys::fs::is_directory(Folder))
      return Option + " " + Path + ": its folder " + Folder.str() + " does not exist";
    if (sys::fs::access(Folder, sys::fs::AccessMode::Write))
      return Option + " " + Path + ": its folder " + Folder.str() + " is not writable";
  }
  if (Outputs.size() == 2 && Outputs[0].second == Outputs[1].second)
    return "--audit and --export-fixes name the same file " + Outputs[0].second;
  return "";
}

}  // namespace

int main(int argc, const char **argv) {
  InitLLVM Init(argc, argv);
#ifdef SIGXFSZ
  // Past a file-size limit a write fails with EFBIG, which the write paths report, instead of a signal.
  std::signal(SIGXFSZ, SIG_IGN);
#endif
  cl::SetVersionPrinter([](raw_ostream &OS) {
    OS << "lmfuse " << LMFUSE_VERSION << " (" << clang::getClangFullVersion() << ")\n";
  });
  // The flags after `--` lose the ones Clang does not know before the driver reads them (it would refuse
  // the whole line); the parse of each unit drops the same from database commands (command_line.h).
  std::vector<const char *> Arguments(argv, argv + argc);
  std::vector<std::string> DroppedFlags;
  BumpPtrAllocator ResponseFileText;  // the expanded flags point into it
  if (auto Separator = std::find(Arguments.begin(), Arguments.end(), StringRef("--")); Separator != Arguments.end()) {
    size_t First = Separator - Arguments.begin() + 1;
    // A response file among them (`@file`, which the compilers read) is expanded first, so its flags are
    // filtered and used like the others; one that cannot be read is an error naming it.
    SmallVector<const char *, 32> Expanded(Arguments.begin() + First, Arguments.end());
    cl::ExpansionContext Expansion(ResponseFileText, cl::TokenizeGNUCommandLine);
    if (Error Failed = Expansion.expandResponseFiles(Expanded))
      return fail(ExitSkipped, "the flags after -- name a response file that cannot be read: " +
                                   toString(std::move(Failed)));
    for (const char *Flag : Expanded)
      if (Flag[0] == '@')  // left as it was: no such file
        return fail(ExitSkipped, "the flags after -- name the response file " + StringRef(Flag + 1) +
                                     ", which does not exist");
    Arguments.erase(Arguments.begin() + First, Arguments.end());
    Arguments.insert(Arguments.end(), Expanded.begin(), Expanded.end());
    std::vector<std::string> Flags(Arguments.begin() + First, Arguments.end());
    std::vector<size_t> Unknown = unknownFlags(Flags);
    for (auto It = Unknown.rbegin(); It != Unknown.rend(); ++It) {
      DroppedFlags.insert(DroppedFlags.begin(), Flags[*It]);
      Arguments.erase(Arguments.begin() + First + *It);
    }
  }
  argc = int(Arguments.size());
  argv = Arguments.data();
  std::string LoadError;
  std::unique_ptr<clang::tooling::CompilationDatabase> Compilations =
      clang::tooling::FixedCompilationDatabase::loadFromCommandLine(argc, argv, LoadError);
  if (!LoadError.empty())
    return fail(ExitSkipped, "the flags after -- are unusable: " + LoadError);
  cl::HideUnrelatedOptions(LmfuseCategory);
  if (!cl::ParseCommandLineOptions(argc, argv, Overview, &errs()))
    return ExitSkipped;

  if (SourcePaths.empty())
    return fail(ExitSkipped, "no source files given (lmfuse --help)");
  if (std::string Empty = emptyOptionValue(); !Empty.empty())
    return fail(ExitSkipped, Empty);
  if (ExpectPatched.getNumOccurrences() && ExpectPatched < 0)
    return fail(ExitSkipped, "--expect-patched must be a count of sites (0 or more), got " +
                                 std::to_string(ExpectPatched));
  if (InPlace && !OutDir.empty())
    return fail(ExitSkipped, "--in-place and --out-dir exclude each other");
  if (Compilations && !BuildPath.empty())
    return fail(ExitSkipped, "give either -p <build dir> or the flags after --, not both");
  const bool FlagsAfterDashes = Compilations != nullptr;
  if (!Compilations) {
    Expected<lmfuse::tool::LoadedDatabase> Loaded = BuildPath.empty()
                                                        ? lmfuse::tool::findDatabaseAbove(SourcePaths.front())
                                                        : lmfuse::tool::loadDatabaseIn(BuildPath);
    if (!Loaded)  // one exists but cannot be used: the message says which and why
      return fail(ExitSkipped, toString(Loaded.takeError()));
    if (!Loaded->Database)
      return fail(ExitSkipped, "no compile flags: " + Loaded->NotFound +
                                   "\nlmfuse needs each file's real flags: pass -p <build dir> with a "
                                   "compile_commands.json, or the flags after --");
    if (!Quiet)
      errs() << "lmfuse: note: using the compilation database " << Loaded->Path << "\n";
    Compilations = std::move(Loaded->Database);
  }

  Expected<PatternSet> Patterns = PatternsPath.empty() ? loadDefaultPatterns() : loadPatternFile(PatternsPath);
  if (!Patterns)
    return fail(ExitSkipped, toString(Patterns.takeError()));
  std::string PatternText = defaultPatternText().str();
  if (!PatternsPath.empty())
    if (auto Buffer = MemoryBuffer::getFile(PatternsPath))
      PatternText = (*Buffer)->getBuffer().str();

  std::string ExeDir = executableDir(argv[0]);
  DriverOptions Options;
  Options.ResourceDir = findResourceDir(ExeDir);
  if (Options.ResourceDir.empty())
    return fail(ExitSkipped, Twine("no Clang resource directory (looked beside the binary and in ") +
                                 LMFUSE_CLANG_RESOURCE_DIR + "); install clang-" CLANG_VERSION_MAJOR_STRING);
  Options.HeaderDirs = findHeaderDirs(ExeDir);
  Options.ExtraArgs.assign(ExtraArgs.begin(), ExtraArgs.end());
  Options.DroppedFromEveryCommand = DroppedFlags;
  Options.FilesCompiledAsGiven = FlagsAfterDashes;
  Options.ExtraArgsBefore.assign(ExtraArgsBefore.begin(), ExtraArgsBefore.end());
  Options.Jobs = Jobs ? unsigned(Jobs) : llvm::hardware_concurrency().compute_thread_count();
  Options.Progress = sys::Process::StandardErrIsDisplayed();
  SmallString<256> CurrentDir;
  sys::fs::current_path(CurrentDir);
  if (!EditRoot.empty()) {
    if (!sys::fs::is_directory(EditRoot))
      return fail(ExitSkipped, "--edit-root " + EditRoot + " is not a folder");
    Options.EditRoot = canonicalPath(EditRoot, CurrentDir);
  }

  for (const std::string &Folder : LibraryIncludes) {
    if (Folder.empty())
      return fail(ExitSkipped, "--library-include needs a value");
    if (!sys::fs::is_directory(Folder))
      return fail(ExitSkipped, "--library-include " + Folder + " is not a folder");
    Options.LibraryIncludes.push_back(canonicalPath(Folder, CurrentDir));
  }
  // The rewrite includes the library's header: folders that hold none of it name another library.
  if (!Options.LibraryIncludes.empty() &&
      llvm::none_of(Options.LibraryIncludes, [&](const std::string &Folder) {
        return isDirectoryWith(Folder, Patterns->Replacement.Include);
      }))
    return fail(ExitSkipped, "no --library-include folder holds " + Patterns->Replacement.Include +
                                 ", the header the rewrite includes: give the library's include folder");
  // None given: the library is the tool's own (its headers beside it, or the source tree's in a build tree), which
  // the parse finds last on the include path; a unit that reads another lmfuse/torch.h fails the re-parse, naming
  // it, rather than be checked against whatever the include path finds first.
  if (Options.LibraryIncludes.empty())
    for (const std::string &Folder : Options.HeaderDirs)
      Options.LibraryIncludes.push_back(canonicalPath(Folder, CurrentDir));

  std::vector<std::string> Inputs;
  for (const std::string &Path : SourcePaths)
    Inputs.push_back(canonicalPath(Path, CurrentDir));
  const std::vector<std::pair<std::string, std::string>> Reports = reportOutputs(CurrentDir);
  if (std::string Unusable = unusableReportOutput(Reports, Inputs); !Unusable.empty())
    return fail(ExitSkipped, Unusable);
  std::string Root, OutRoot;
  std::optional<lmfuse::tool::OutcomeCache> Cache;
  if (!OutDir.empty()) {
    Root = Options.EditRoot.empty() ? lmfuse::tool::commonRoot(Inputs) : Options.EditRoot;
    if (Root == "/")
      return fail(ExitSkipped, "the sources share no folder but /; give --edit-root <the folder to mirror>");
    if (std::error_code EC = sys::fs::create_directories(OutDir))
      return fail(ExitSkipped, "cannot create --out-dir " + OutDir + ": " + EC.message());
    OutRoot = canonicalPath(OutDir, CurrentDir);
    if (std::string Overlap = lmfuse::tool::overlapWithSources(Root, OutRoot); !Overlap.empty())
      return fail(ExitSkipped, Overlap + "; choose a folder outside " + Root);
    SmallString<256> CacheDir(OutRoot);
    sys::path::append(CacheDir, lmfuse::tool::kCacheFolder);
    // One run at a time per output tree, from its analysis to its audit: two runs writing the same copies
    // would leave an audit and a cache that describe the other run's copies. The lock goes with the process.
    if (Error Err = lmfuse::tool::lockOutputTree(std::string(CacheDir), Quiet))
      return fail(ExitSkipped, toString(std::move(Err)));
    std::string Executable = sys::fs::getMainExecutable(argv[0], reinterpret_cast<void *>(&executableDir));
    Cache.emplace(std::string(CacheDir), cacheFingerprint(PatternText, Options, Executable));
    Options.Cache = &*Cache;
    Options.LineDirectives = true;
  }

  DriverResult Result = runDriver(*Compilations, SourcePaths, *Patterns, Options);
  for (const std::string &Message : Result.Skipped)
    errs() << "lmfuse: skipped " << Message << "\n";
  if (!Quiet)
    for (const std::string &Note : Result.Notes)
      errs() << "lmfuse: note: " << Note << "\n";

  // A report over a header the units read (the sources were checked before the run) is refused as well;
  // nothing has been written yet.
  for (const auto &[Option, Path] : Reports)
    if (std::binary_search(Result.FilesRead.begin(), Result.FilesRead.end(), Path))
      return fail(ExitSkipped, Option + " " + Path + " is a file the sources read: it would be overwritten");
  // Nor where --out-dir writes the copy of one of them: the mirror and the report would replace each other.
  if (!OutRoot.empty())
    for (const auto &[Option, Path] : Reports)
      for (const std::string &Read : Result.FilesRead)
        if (lmfuse::tool::mirroredPath(Read, Root, OutRoot) == Path)
          return fail(ExitSkipped, Option + " " + Path + " is where --out-dir writes the copy of " + Read +
                                       ": one would overwrite the other");

  std::optional<AuditMirror> Mirror = writeSources(Result, Inputs, Root, OutRoot);

  int Status = ExitOk;
  if (outs().has_error()) {  // a full disk under `lmfuse ... > fix.diff` must not end in "LLVM ERROR"
    errs() << "lmfuse: error: cannot write the diff to standard output: " << outs().error().message() << "\n";
    outs().clear_error();
    Status = ExitFailed;
  }
  if (!ExportFixes.empty())
    if (Error Err = lmfuse::tool::exportFixes(ExportFixes, Inputs.front(), CurrentDir, Result.Rewrites)) {
      errs() << "lmfuse: error: " << toString(std::move(Err)) << "\n";
      Status = ExitFailed;
    }
  if (!Quiet) {
    lmfuse::tool::DiagnosticStyle Style;
    Style.Remarks = Verbose;
    Style.Colors = sys::Process::StandardErrHasColors();
    lmfuse::tool::printSiteDiagnostics(errs(), Result.Sites, Style);
  }
  if (!AuditPath.empty()) {
    AuditHeader Header;
    Header.ToolVersion = LMFUSE_VERSION;
    Header.ClangVersion = clang::getClangFullVersion();
    Header.ResourceDir = Options.ResourceDir;
    Header.PatternSetName = Patterns->Name;
    Header.PatternSetVersion = std::to_string(Patterns->Version);
    Header.PatternSetSource = Patterns->Source;
    std::string Text = formatv("{0:2}", auditToJson(Header, Result.Sites, std::move(Mirror))).str() + "\n";
    if (Error Err = lmfuse::tool::writeFileAtomically(AuditPath, Text)) {
      errs() << "lmfuse: error: the audit: " << toString(std::move(Err)) << "\n";
      Status = ExitFailed;
    }
  }
  if (Summary) {
    errs() << formatSummary(Result.Sites);
    if (Result.CachedTranslationUnits)
      errs() << " [" << Result.CachedTranslationUnits << "/" << Result.TranslationUnits
             << " translation units from the cache]";
    errs() << "\n";
  }

  AuditSummary Counts = summarize(Result.Sites);
  unsigned Done = Counts.Patched + Counts.AlreadyPatched;
  bool ExpectationMet = ExpectPatched < 0 || int(Done) >= ExpectPatched;
  if (!ExpectationMet)
    explainExpectation(Result.Sites, Inputs, Done);
  bool AnyFailed = llvm::any_of(Result.Sites, [](const SiteRecord &Site) {
    return Site.Status == SiteStatus::Failed && !isSkipReason(Site.Reason);
  });
  if (Status == ExitOk && AnyFailed)
    Status = ExitFailed;
  if (Status == ExitOk && !Result.Skipped.empty())
    Status = ExitSkipped;
  if (Status == ExitOk && !ExpectationMet)
    Status = ExitExpectationNotMet;
  return Status;
}
