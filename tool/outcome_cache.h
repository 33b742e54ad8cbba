// The content-hash cache behind --out-dir: a second run over unchanged inputs, patterns and flags takes
// each translation unit's outcome from disk instead of parsing it again.
// An entry is keyed by what the parse is given (the frontend's arguments as Clang's driver makes them from
// the command and its environment, and the absolute directory: rewriter::frontendKey) and holds the tool/pattern
// fingerprint plus the xxh3 hash of every file the parse read, system headers included, and every path
// the parse looked for and did not find (so a header that appears earlier on the include path is seen);
// any difference is a miss. Entries live in <out-dir>/.lmfuse-cache/, one JSON file per command, written atomically.
#pragma once

#include <string>

#include "driver.h"

namespace lmfuse::tool {

class OutcomeCache : public rewriter::TranslationUnitCache {
public:
  /// Fingerprint covers everything besides the command and the inputs that changes an outcome:
  /// tool version, pattern text, resource and header directories, edit root.
  OutcomeCache(std::string Directory, std::string Fingerprint)
      : Directory(std::move(Directory)), Fingerprint(std::move(Fingerprint)) {}

  std::optional<rewriter::TranslationUnitOutcome> lookup(llvm::StringRef Key) override;
  void store(llvm::StringRef Key, const rewriter::TranslationUnitOutcome &Outcome) override;

private:
  std::string entryPath(llvm::StringRef Key) const;
  std::string Directory;
  std::string Fingerprint;
};

/// xxh3 of a file's contents as 16 hex digits; "" when it cannot be read.
std::string hashFile(llvm::StringRef Path);
std::string hashText(llvm::StringRef Text);

}  // namespace lmfuse::tool
