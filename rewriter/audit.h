// The audit: every site the tool saw, as JSON (`schema: "lmfuse-audit/2"`), plus the summary counts and,
// for an --out-dir run, the SHA-256 of every original the mirror holds a copy of.
// The file is written atomically (temporary file + rename), so a reader never sees half an audit.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include "macro_dependence.h"
#include "site.h"

namespace lmfuse::rewriter {

// 2: the `mirror` member (a build that compiles a mirror made on another machine checks the originals
// against it; lmfuse_rewrite's LMFUSE_REWRITTEN_DIR refuses an audit without one).
// 3: `mirror.units`, the macros each unit that reads a rewritten copy depended on (lmfuse_rewrite compares
// them with the build's own compiler before it compiles a copy, and refuses an audit without them).
inline constexpr const char *AuditSchema = "lmfuse-audit/3";

struct AuditHeader {
  std::string ToolVersion;
  std::string ClangVersion;
  std::string ResourceDir;
  std::string PatternSetName;
  std::string PatternSetVersion;
  std::string PatternSetSource;  ///< the pattern file, or "<built-in>"
};

struct AuditSummary {
  unsigned Patched = 0, AlreadyPatched = 0, Unmatched = 0, Failed = 0, Suppressed = 0;
};

/// A copy --out-dir holds: where it lies under the mirrored root, and the digest of the original contents it
/// was made from, so whoever compiles the copy can tell whether the original has changed since.
struct MirroredFile {
  std::string Path;        ///< relative to the root, '/'-separated
  std::string Sha256;      ///< contentDigest() of the original
  std::string CopySha256;  ///< contentDigest() of the copy as written (a copy cut short or edited since differs)
  /// Another name of the copy at this path (relative to the root), one file with it as the original's names are
  /// one file (a link in the sources): the build keeps them one (a hard link), so `#pragma once` reads it once.
  std::string SameFileAs;
};

/// A unit that reads a rewritten copy, and the macros its analysis depended on (macro_dependence.h): the
/// build that compiles the copies compares each with its own compiler's definition.
struct MirroredUnit {
  std::string Path;    ///< relative to the root, '/'-separated; absolute for a unit outside it
  std::string Sha256;  ///< contentDigest() of its main file (a unit outside the root, generated into a build
                       ///< folder, is found by its contents where that folder lies elsewhere)
  std::vector<MacroDependence> Macros;
  /// Flags of its compile command the parse dropped (Clang does not know them) that may change how the build's
  /// compiler reads it: the analysis read another language than the build compiles (the step stops it).
  std::vector<std::string> LanguageFlagsDropped;
};

struct AuditMirror {
  std::string Root;                 ///< the folder mirrored (--edit-root, or the inputs' common folder)
  std::vector<MirroredFile> Files;  ///< every copy in place after the run
  std::vector<MirroredUnit> Units;  ///< every unit that reads a rewritten copy
};

/// SHA-256 of Contents as 64 lowercase hex digits: what `sha256sum` and CMake's file(SHA256) print.
std::string contentDigest(llvm::StringRef Contents);

/// Sorts by file, line, column; the audit's order.
void sortSites(std::vector<SiteRecord> &Sites);
AuditSummary summarize(const std::vector<SiteRecord> &Sites);
/// "lmfuse: 2 patched, 0 already_patched, 1 unmatched (logits-rebound: 1), 0 failed, 0 suppressed"
std::string formatSummary(const std::vector<SiteRecord> &Sites);

llvm::json::Object siteToJson(const SiteRecord &Site);
/// The inverse of siteToJson (for caches); an error names the missing or malformed field.
llvm::Expected<SiteRecord> siteFromJson(const llvm::json::Value &Value);
std::optional<SiteStatus> statusFromName(llvm::StringRef Name);

/// The whole audit document; Sites and the mirror's files are sorted on the way. Without a mirror (no
/// --out-dir) the document has no `mirror` member.
llvm::json::Value auditToJson(const AuditHeader &Header, std::vector<SiteRecord> Sites,
                              std::optional<AuditMirror> Mirror = std::nullopt);

}  // namespace lmfuse::rewriter
