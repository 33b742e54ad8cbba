// The pipeline over many translation units: parse and analyse each (in parallel), merge the edits of
// files reached from several units, check every rewrite by re-parsing it in memory, and hand back the
// verified rewrites with one audit record per site. Nothing here writes a source file: the caller
// decides between a diff, in-place writes and an output tree.
#pragma once

#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "clang/Tooling/CompilationDatabase.h"
#include "clang/Tooling/Core/Replacement.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include "macro_dependence.h"
#include "patterns.h"
#include "site.h"

namespace lmfuse::rewriter {

/// What one translation unit contributed. Paths are canonical (see canonicalPath()).
struct TranslationUnitOutcome {
  std::string MainFile;
  std::vector<SiteRecord> Sites;
  std::vector<clang::tooling::Replacement> Edits;
  std::vector<std::string> FilesRead;  ///< every file the parse read, system headers included
  std::map<std::string, std::string> ReadDigests;  ///< what the parse read (ParseOutcome)
  std::vector<std::string> PathsMissing;  ///< every path the parse looked for in vain (ParseOutcome)
  std::map<std::string, std::set<std::string>> Aliases;  ///< other names of files read (ParseOutcome)
  std::vector<MacroDependence> Macros;    ///< what the files under the edit root name (ParseOutcome)
  bool ParseFailed = false;
  bool FromCache = false;
};

/// A store of translation-unit outcomes keyed by what the parse is given (frontendKey()) and checked
/// against the contents of what it read (see tool/). Only outcomes whose edits all survived merging and the
/// re-parse check are stored.
class TranslationUnitCache {
public:
  virtual ~TranslationUnitCache() = default;
  virtual std::optional<TranslationUnitOutcome> lookup(llvm::StringRef Key) = 0;
  virtual void store(llvm::StringRef Key, const TranslationUnitOutcome &Outcome) = 0;
};

struct DriverOptions {
  std::string ResourceDir;              ///< the Clang resource directory (stddef.h and friends)
  std::vector<std::string> HeaderDirs;  ///< where <lmfuse/torch.h> and <lmfuse/flce.h> are found
  /// --library-include: the folders of the library the build links (canonical); the re-parse takes only their
  /// files for the library's headers (verify.h: LibraryHeaders::Directories). Empty: what the include path finds.
  std::vector<std::string> LibraryIncludes;
  std::vector<std::string> ExtraArgs;        ///< --extra-arg: appended to every compile command
  std::vector<std::string> ExtraArgsBefore;  ///< --extra-arg-before: prepended to every compile command
  /// Flags Clang does not know that the caller took out of every command before the database was made (those
  /// after `--`): noted and recorded with each unit as the flags dropped from its own command are.
  std::vector<std::string> DroppedFromEveryCommand;
  /// The flags came after `--`, without the build's commands: each file is parsed under the name it was given
  /// (relative to the working directory, say), as a build that passes it so names it, so that `__FILE__` reads
  /// what the build's does. A compilation database's command names the file itself.
  bool FilesCompiledAsGiven = false;
  std::string EditRoot;                 ///< canonical; edits outside it are never kept ("" = anywhere)
  /// The rewritten files are written with #line directives (--out-dir: rewrittenWithLineDirectives), so the
  /// re-parse reads them so too: what it checks is what the build compiles, and its errors name the original's
  /// lines. Otherwise (in place, a diff) the files are written as edited.
  bool LineDirectives = false;
  unsigned Jobs = 1;                    ///< translation units parsed at once
  bool Progress = false;                ///< one line per file on stderr
  TranslationUnitCache *Cache = nullptr;
};

struct FileRewrite {
  std::string Path;  ///< canonical
  std::string Original;
  std::string Rewritten;
  clang::tooling::Replacements Edits;
};

/// A unit that reads a rewritten file, and the macros its analysis depended on.
struct UnitMacros {
  std::string File;  ///< the unit's main file, canonical
  std::vector<MacroDependence> Macros;
  /// Flags of its command the parse dropped that may change how the build's compiler reads it (not only its
  /// diagnostics or optimisation: command_line.h, steersOnlyDiagnosticsOrOptimisation).
  std::vector<std::string> LanguageFlagsDropped;
};

struct DriverResult {
  std::vector<SiteRecord> Sites;      ///< one per site, sorted by file, line, column
  std::vector<FileRewrite> Rewrites;  ///< verified, in path order
  /// One message per file that was not processed; each also has a failed site (reason
  /// no-compile-command or unreadable) in Sites, so the audit names every input.
  std::vector<std::string> Skipped;
  std::vector<std::string> Notes;     ///< things the user should know that changed nothing (dropped flags)
  std::vector<std::string> FilesRead; ///< union over all units, canonical, sorted
  std::map<std::string, std::string> ReadDigests;  ///< what the units' parses read of them (ParseOutcome)
  std::map<std::string, std::set<std::string>> Aliases;  ///< union over all units (ParseOutcome)
  std::vector<UnitMacros> Units;      ///< every unit that reads a rewritten file, in path order
  unsigned TranslationUnits = 0, CachedTranslationUnits = 0;
};

/// The command line a parse runs (see command_line.h); the flags dropped from it are left in Dropped.
std::vector<std::string> adjustedCommandLine(const clang::tooling::CompileCommand &Command,
                                             const DriverOptions &Options,
                                             std::vector<std::string> *Dropped = nullptr);

/// Whether Reason marks an input that was skipped rather than a site that failed (exit status 2, not 1).
bool isSkipReason(ReasonKind Reason);

DriverResult runDriver(const clang::tooling::CompilationDatabase &Compilations,
                       llvm::ArrayRef<std::string> Files, const PatternSet &Patterns,
                       const DriverOptions &Options);

/// Every Patched site of File becomes Failed with Reason and Detail (its edits were not written).
void failPatchedSites(std::vector<SiteRecord> &Sites, llvm::StringRef File, ReasonKind Reason,
                      llvm::StringRef Detail);

/// File could not be written: its patched sites become failed/write-failed, and when none of its sites
/// says so (a plain --out-dir copy, a file of refused sites) a file-level failed entry at 1:1 is added.
void failWrite(std::vector<SiteRecord> &Sites, llvm::StringRef File, llvm::StringRef Detail);

}  // namespace lmfuse::rewriter
