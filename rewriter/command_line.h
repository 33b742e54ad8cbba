// The command line one translation unit is parsed with, made from its compile command: what lmfuse adds
// (-fsyntax-only, the pinned resource directory, its own headers, the user's --extra-arg/--extra-arg-before)
// and what it takes away (outputs, dependency files, flags the Clang driver does not know).
#pragma once

#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"

#include "clang/Tooling/CompilationDatabase.h"

namespace lmfuse::rewriter {

struct CommandLineOptions {
  std::string ResourceDir;
  std::vector<std::string> HeaderDirs;       ///< appended as -I after everything else
  std::vector<std::string> ExtraArgs;        ///< appended, like clang-tidy's --extra-arg
  std::vector<std::string> ExtraArgsBefore;  ///< prepended, like clang-tidy's --extra-arg-before
};

struct AdjustedCommand {
  std::vector<std::string> Arguments;
  /// Flags the Clang driver does not know (GCC-only ones such as -fconcepts-diagnostics-depth=2), dropped
  /// so the parse does not fail on them; the caller names them in a note.
  std::vector<std::string> Dropped;
};

/// Indexes into Arguments (compiler flags without argv[0]) of the flags the Clang driver does not know.
std::vector<size_t> unknownFlags(const std::vector<std::string> &Arguments);

/// Whether a flag the Clang driver does not know steers only what GCC reports or how it optimises (its
/// warnings and diagnostics, link-time and loop optimisations, instrumentation), never how it reads the program:
/// such a flag dropped leaves the parse reading what the build's compiler reads. Any other dropped flag
/// (`-fno-ext-numeric-literals`, `-fno-new-ttp-matching`, `-fpermissive`, and every one not listed) may change
/// the language the build compiles, and `lmfuse_rewrite` stops the build naming it.
bool steersOnlyDiagnosticsOrOptimisation(llvm::StringRef Flag);

/// The note that names dropped flags ("dropped flags Clang does not know: -fa -fb"), one for the whole run.
std::string droppedFlagsNote(const std::vector<std::string> &Flags);

/// The command made -fsyntax-only, outputs and dependency files stripped, the user's extra arguments and
/// lmfuse's own added; unknown flags dropped; a header (.h/.hh/.hpp/.hxx) parsed as C++ unless the flags
/// name a language.
AdjustedCommand adjustCommand(const clang::tooling::CompileCommand &Command, const CommandLineOptions &Options);

}  // namespace lmfuse::rewriter
