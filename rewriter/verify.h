// Parsing one translation unit the way its compile command says, optionally over rewritten contents
// held in memory, and the re-parse check that a rewrite still compiles before anything is written.
// Function bodies in the library's headers are skipped (their declarations are kept): the rewriter never
// edits them, and skipping them is most of what makes a parse of <torch/torch.h> fast.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "clang/AST/ASTContext.h"
#include "clang/Lex/Preprocessor.h"

#include "macro_dependence.h"
#include "respelling.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

namespace lmfuse::rewriter {

struct ParseOutcome {
  bool Ran = false;          ///< the compiler was reached (false: the command line itself was rejected)
  bool HadErrors = false;    ///< any error diagnostic, or the command line was rejected
  std::string Diagnostics;   ///< every diagnostic as text, for the user
  std::string FirstError;    ///< "file:line:col: error: message" of the first error
  std::string FirstErrorFile;
  unsigned FirstErrorLine = 0;
  std::vector<std::string> FilesRead;  ///< canonical paths of every file the parse read
  /// contentsHash() of the contents the parse read, per file of FilesRead whose contents it loaded: what is
  /// written later is checked against them, so a file saved while lmfuse ran is never edited as analysed.
  std::map<std::string, std::string> ReadDigests;
  /// Absolute paths the parse looked for and did not find (include search, sorted): a file that appears at
  /// one of them (a header that now shadows another) can change the outcome.
  std::vector<std::string> PathsMissing;
  /// Each file read that the parse found by another name, through a link (`src/model.h` linking to
  /// `src/impl/model.h`): its canonical path, and those names (absolute). A copy of the file must be found by
  /// them too.
  std::map<std::string, std::set<std::string>> Aliases;
  /// With RecordMacros: the macros the program's files name, and their definitions (macro_dependence.h).
  std::vector<MacroDependence> Macros;
};

/// A fast digest of a file's contents (xxh3-64, hex): equal contents, equal digests.
std::string contentsHash(llvm::StringRef Contents);

/// What a parse of CommandLine from Directory is given, as text: the absolute directory and the frontend's
/// arguments as Clang's driver makes them from the command, with everything the driver adds from outside the
/// command line (the include folders of CPATH and CPLUS_INCLUDE_PATH, the toolchain it finds). Two parses
/// with equal keys see the same files the same way. "" when the driver rejects the command.
std::string frontendKey(const std::vector<std::string> &CommandLine, llvm::StringRef Directory);

/// Parses the translation unit of CommandLine (already adjusted to -fsyntax-only) from Directory, seeing
/// Overlay (canonical path -> contents) in place of the files on disk. OnParsed runs on the AST (and the unit's preprocessor) when the
/// parse had no error. Function bodies are skipped in system headers but the program's own (the main file
/// and the files under ProjectRoot; "": the main file's folder), however they were included. With
/// RecordMacros, Macros records what the files under ProjectRoot name ("": every file outside the system
/// headers).
/// OverlayAliases names, for a file of Overlay, the other names it is found by (links to it, as a parse of the
/// files on disk recorded them in ParseOutcome::Aliases): they read Overlay's contents too, as the same file.
ParseOutcome parseTranslationUnit(const std::vector<std::string> &CommandLine, llvm::StringRef Directory,
                                  const llvm::StringMap<std::string> &Overlay,
                                  const std::function<void(clang::ASTContext &, clang::Preprocessor &)> &OnParsed,
                                  const std::string &ProjectRoot = "", bool RecordMacros = false,
                                  const std::map<std::string, std::set<std::string>> &OverlayAliases = {});

/// The library the rewritten code calls, as the re-parse checks it.
struct LibraryHeaders {
  std::string Folder;     ///< the folder of the rewrite's include: `lmfuse` of `lmfuse/torch.h`
  std::string Namespace;  ///< the namespace of its calls: `lmfuse` of `lmfuse::linear_cross_entropy`
  /// Where the library's headers are (canonical folders holding Folder/): the include folders of the library the
  /// build links (lmfuse_rewrite passes lmfuse::torch's). Empty: whatever `#include <Folder/NAME>` finds on the
  /// unit's include path is taken for the library's header.
  std::vector<std::string> Directories;
};

/// The re-parse check: the translation unit must compile with Overlay's rewritten contents, and the library
/// headers the rewrite includes must be read as the library wrote them: no macro of the program's files
/// expanded in them, no namespace, class or linkage block of the program around them, no `#pragma pack` over
/// their classes; nothing outside them may declare into the library's namespace, whose functions and templates
/// the rewritten code uses; and, where Library.Directories are known, every header the unit reads as
/// `Folder/NAME` of a name the library has must be the library's own file, not one of the program's found first
/// on the include path. A library header is never the main file.
/// Returns "" when it does, else the first error (file:line: message) or what reached the library's headers.
/// Respellings, when given, are checked in the same parse (respelling.h: changedRespellings), into Changed.
/// PathsMissing, when given, receives every path the re-parse looked for in vain (the rewritten code's own
/// includes search the include path too): one that exists later may change what the copy compiles.
std::string verifyRewrite(const std::vector<std::string> &CommandLine, llvm::StringRef Directory,
                          const llvm::StringMap<std::string> &Overlay,
                          const std::map<std::string, std::set<std::string>> &OverlayAliases,
                          const std::string &ProjectRoot = "",
                          const LibraryHeaders *Library = nullptr,
                          const std::map<std::string, std::vector<RespellingRange>> *Respellings = nullptr,
                          std::map<std::pair<std::string, size_t>, std::string> *Changed = nullptr,
                          std::vector<std::string> *PathsMissing = nullptr);

}  // namespace lmfuse::rewriter
