// Loss options capture: the effective ignore_index, label_smoothing and reduction of the loss call
// (LibTorch's defaults where unset), read from fluent setters or positional arguments as the
// pattern set describes; options the fused runtime cannot honour are recorded as a break.
#pragma once

#include "ast_query.h"
#include "patterns.h"
#include "site_capture.h"

namespace lmfuse::rewriter {

/// Fills Site.Options and Site.OptionLocals, or Site.OptionsBreak.
void captureOptions(CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query, const VariableUses &Uses);

}  // namespace lmfuse::rewriter
