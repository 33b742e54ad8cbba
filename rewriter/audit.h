// The audit: every site the tool saw, as JSON (`schema: "lmfuse-audit/1"`), plus the summary counts.
// The file is written atomically (temporary file + rename), so a reader never sees half an audit.
#pragma once

#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include "site.h"

namespace lmfuse::rewriter {

inline constexpr const char *AuditSchema = "lmfuse-audit/1";

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

/// Sorts by file, line, column; the audit's order.
void sortSites(std::vector<SiteRecord> &Sites);
AuditSummary summarize(const std::vector<SiteRecord> &Sites);
/// "lmfuse: 2 patched, 0 already_patched, 1 unmatched (logits-rebound: 1), 0 failed, 0 suppressed"
std::string formatSummary(const std::vector<SiteRecord> &Sites);

llvm::json::Object siteToJson(const SiteRecord &Site);
/// The inverse of siteToJson (for caches); an error names the missing or malformed field.
llvm::Expected<SiteRecord> siteFromJson(const llvm::json::Value &Value);
std::optional<SiteStatus> statusFromName(llvm::StringRef Name);

/// The whole audit document; Sites are sorted on the way.
llvm::json::Value auditToJson(const AuditHeader &Header, std::vector<SiteRecord> Sites);

}  // namespace lmfuse::rewriter
