// Loss options capture: the effective ignore_index, label_smoothing and reduction of the loss call
// (LibTorch's defaults where unset), read from fluent setters or positional arguments as the
// pattern set describes, or, for a loss module, from every construction of the module (which must
// agree); options the fused runtime cannot honour, or a module whose constructions are not all
// visible, are recorded as a break.
#pragma once

#include "ast_query.h"
#include "patterns.h"
#include "site_capture.h"

namespace lmfuse::rewriter {

/// Fills Site.Options, Site.OptionLocals and (module losses) Site.ModuleOptions, or Site.OptionsBreak.
void captureOptions(CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query, const VariableUses &Uses);

}  // namespace lmfuse::rewriter
