// The out-of-range-label report at the start of every workspace (backend.h: kErrorReportBytes), shared
// by the backends so check() words the error the same way on every device. A backend writes
// kNoLabelError to `token` at the start of each call, and the lowest offending token when it finds one.
#pragma once

#include <cstdint>
#include <limits>

#include "backend.h"

namespace lmfuse::detail {

constexpr int64_t kNoLabelError = std::numeric_limits<int64_t>::max();

struct LabelErrorReport {
  int64_t token;           // first token whose target label is outside [0, vocab); kNoLabelError if none
  int64_t label;           // that label's value
  int64_t label_position;  // its index in labels (token + 1 under a shift)
  int64_t vocab;
  int64_t ignore_index;
};
static_assert(sizeof(LabelErrorReport) <= kErrorReportBytes, "the report must fit its reserved bytes");

/// Throws Error "<function>: token T's target labels[P] = L is outside [0, V) ..." when the report
/// holds an error; returns otherwise.
void throw_if_reported(const char* function, const LabelErrorReport& report);

}  // namespace lmfuse::detail
