// The loss options a patched site carries, described once: the name the pattern set and the audit
// use, the setter the rewritten call appends, and how the audit (and the outcome cache, which stores
// audit entries) writes and reads each. Capture fills PatchedOptions under these names; the edit, the
// audit and the cache go through this table, so an option added here reaches all of them.
#pragma once

#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include "patterns.h"
#include "site.h"

namespace lmfuse::rewriter {

struct LossOptionField {
  const char *Name;  ///< the audit key and the pattern set's runtime option name
  /// Read from the loss call's options or arguments (the pattern set maps setters and positions to it);
  /// otherwise the rewrite derives it (the shift from the slices, the bias from the head).
  bool FromLossCall;
  /// The setter the rewritten call appends to its options (`.ignore_index(pad_id_)`), "" at the default.
  std::string (*Setter)(const PatchedOptions &, const ReplacementPattern &);
  llvm::json::Value (*ToJson)(const PatchedOptions &);
  /// Reads the audit's value back; false when it is malformed.
  bool (*FromJson)(const llvm::json::Value &, PatchedOptions &);
};

/// Every option, in the audit's order.
llvm::ArrayRef<LossOptionField> lossOptionFields();
/// The field named Name, or null.
const LossOptionField *lossOptionField(llvm::StringRef Name);

}  // namespace lmfuse::rewriter
