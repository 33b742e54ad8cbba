// --out-dir: a mirror of the sources under a root, for build steps that compile rewritten copies while
// the sources stay untouched. Rewritten files carry #line directives naming the original file, so compiler
// errors point at it; every other file under the root that a translation unit read (the inputs, their
// quoted headers) is copied too, with a `#line 1` naming its original, so `#include "..."` next to a
// rewritten file keeps finding the same neighbours; a file the parse found through a link is copied under the
// link's name as well, so the copies find it by that name. Files whose contents would not change are not
// rewritten, so the build system sees unchanged timestamps. An existing file that is not such a copy is
// never replaced (its source gets a write-failed entry), nor is any file a translation unit read. Every copy
// in place after the run is listed with the SHA-256 of the original contents it was made from (the audit's
// `mirror`), so a build that compiles the mirror on another machine can refuse originals changed since.
// Copies an earlier run made that this run does not are removed (a stale header copy would shadow the
// header the analysis saw), and so is nothing else; no copy is written through a link, and none of a file
// that changed on disk while lmfuse ran.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "audit.h"
#include "driver.h"
#include "llvm/ADT/StringRef.h"

namespace lmfuse::tool {

/// The folder under --out-dir that holds the outcome cache (outcome_cache.h): never a copy, never removed.
inline constexpr llvm::StringLiteral kCacheFolder = ".lmfuse-cache";

struct OutTreeResult {
  unsigned Written = 0, Unchanged = 0;
  unsigned Removed = 0;  ///< copies an earlier run made that this run does not (removeOtherCopies)
  std::vector<std::pair<std::string, std::string>> Failures;  ///< source file -> message
  std::vector<rewriter::MirroredFile> Mirrored;               ///< every copy written or found unchanged
};

/// Common ancestor folder of Paths (canonical, absolute).
std::string commonRoot(const std::vector<std::string> &Paths);

/// Where Source lands under OutDir when mirrored from Root; "" when it is not under Root.
std::string mirroredPath(llvm::StringRef Source, llvm::StringRef Root, llvm::StringRef OutDir);

OutTreeResult writeOutTree(const rewriter::DriverResult &Result, const std::vector<std::string> &Inputs,
                           llvm::StringRef Root, llvm::StringRef OutDir);

/// Why mirroring Root into OutDir would put copies among the sources (OutDir is Root or holds it); "" when
/// it would not. Both canonical. A copy whose target is a file a unit read is refused on its own as well.
std::string overlapWithSources(llvm::StringRef Root, llvm::StringRef OutDir);

/// Waits until no other lmfuse run holds CacheDir's lock, then holds it until the process exits (a note on
/// stderr while waiting, unless Quiet). An error when the lock cannot be made or is not given within 30 min.
llvm::Error lockOutputTree(const std::string &CacheDir, bool Quiet);

/// Writes Contents to Path with writeFileAtomically() (safe_write.h, Replacing passed on), creating its
/// folder; skips the write when Path already holds Contents. Sets Changed accordingly.
llvm::Error writeIfChanged(llvm::StringRef Path, llvm::StringRef Contents, bool &Changed,
                           std::optional<llvm::StringRef> Replacing = std::nullopt);

}  // namespace lmfuse::tool
