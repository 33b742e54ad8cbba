// Each site as a clang-style diagnostic on stderr, the form editors and CI logs annotate:
//   model.cpp:6:17: warning: line 7: `logits` is re-bound to a changed value (...) [lmfuse-logits-rebound]
//       6 |   auto logits = head(x);
//         |                 ^
//   model.cpp:7:3: note: the logits are changed in value between the head and the loss
//       7 |   logits = logits * 0.5;
//         |   ^
// Refused (unmatched), failed and suppressed sites are warnings; patched and already-patched sites are
// remarks, shown with --verbose only. The note points at the offending statement when the site names one.
// Skipped inputs have no source line to show: the driver's "skipped" message stands for them.
#pragma once

#include <vector>

#include "site.h"

#include "llvm/Support/raw_ostream.h"

namespace lmfuse::tool {

struct DiagnosticStyle {
  bool Remarks = false;  ///< --verbose: patched sites too
  bool Colors = false;   ///< only when the stream is a terminal that takes colours
};

void printSiteDiagnostics(llvm::raw_ostream &OS, const std::vector<rewriter::SiteRecord> &Sites,
                          const DiagnosticStyle &Style);

}  // namespace lmfuse::tool
