// The edits every translation unit asked for, merged per file, and what they look like once applied.
// A header reached from several translation units is edited once: identical edits merge; two different
// edits that overlap (or two different insertions at one offset) are a conflict, and a conflicting file
// gets no edits at all. Paths are canonical absolute paths, so one file has one key.
#pragma once

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "clang/Tooling/Core/Replacement.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace lmfuse::rewriter {

class EditSet {
public:
  /// Records one edit. Its file path must already be canonical (see canonicalPath()).
  void add(const clang::tooling::Replacement &Edit);

  /// Files with at least one edit, conflicting or not, in path order.
  std::vector<std::string> files() const;
  /// The merged edits of File; empty when it has none or when they conflict.
  clang::tooling::Replacements editsFor(llvm::StringRef File) const;
  /// Why File's edits conflict ("" when they do not), naming the two edits' lines.
  std::string conflictFor(llvm::StringRef File, llvm::StringRef Contents) const;
  /// Makes File's edits fit the file as it is: an insertion at the very top goes after a UTF-8
  /// byte-order mark, and inserted line breaks become "\r\n" in a file whose lines end so.
  void fitTo(llvm::StringRef File, llvm::StringRef Contents);
  /// Forgets every edit of File (it will not be written).
  void drop(llvm::StringRef File);
  bool empty() const { return ByFile.empty(); }

private:
  using EditKey = std::tuple<unsigned, unsigned, std::string>;  // offset, length, text
  std::map<std::string, std::set<EditKey>> ByFile;
};

/// Absolute, with `.`/`..` removed and symlinks resolved when the file exists. Relative paths are taken
/// against BaseDirectory (a compile command's directory).
std::string canonicalPath(llvm::StringRef Path, llvm::StringRef BaseDirectory);

/// Whether canonical File lies in canonical folder Root (or is it); every path does when Root is "".
bool isUnder(llvm::StringRef File, llvm::StringRef Root);

/// How Contents ends its lines, by its first line break: "\r\n" or "\n" (EditSet::fitTo writes edits so).
llvm::StringRef newlineOf(llvm::StringRef Contents);

/// 1-based line of byte Offset in Contents.
unsigned lineOfOffset(llvm::StringRef Contents, unsigned Offset);

/// Contents with Edits applied; an error names File when an edit lies outside it.
llvm::Expected<std::string> applyEdits(llvm::StringRef File, llvm::StringRef Contents,
                                       const clang::tooling::Replacements &Edits);

/// A unified diff (`--- File`, `+++ File`, three lines of context) that `patch -p0` applies; a name with
/// spaces, quotes or control characters is C-quoted the way GNU diff writes it.
std::string unifiedDiff(llvm::StringRef File, llvm::StringRef Contents,
                        const clang::tooling::Replacements &Edits);

/// The rewritten contents with `#line` directives, so a compiler reading the copy reports the
/// original file and its original line numbers everywhere outside the edited lines. A byte-order mark
/// stays first, the directives end lines the way the file does, and File is escaped as a string literal.
/// Inserted, when given, receives each directive's place in the result (offset, length), in order.
std::string rewrittenWithLineDirectives(llvm::StringRef File, llvm::StringRef Contents,
                                        const clang::tooling::Replacements &Edits,
                                        std::vector<std::pair<unsigned, unsigned>> *Inserted = nullptr);

}  // namespace lmfuse::rewriter
