// Wording of the out-of-range-label error that check() raises.
#include "error_report.h"

#include "error.h"

namespace lmfuse::detail {

void throw_if_reported(const char* function, const LabelErrorReport& report) {
  LMFUSE_REQUIRE(function, report.token == kNoLabelError,
                 "token " << report.token << "'s target labels[" << report.label_position
                          << "] = " << report.label << " is outside [0, " << report.vocab
                          << ") and is not ignore_index (" << report.ignore_index
                          << "); its loss is NaN (first offending token of the last call)");
}

}  // namespace lmfuse::detail
