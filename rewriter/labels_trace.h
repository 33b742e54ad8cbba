// Labels capture: the labels as the loss reached them, without benign reshapes, traced back to
// the variable they come from (so refusals can compare it with the guarded one), with the shift
// idiom and label casts recognised.
#pragma once

#include "ast_query.h"
#include "patterns.h"
#include "site_capture.h"

namespace lmfuse::rewriter {

/// Fills Site.LabelsText, LabelsRoot, LabelLocals and LabelsShift, or Site.LabelsBreak.
void traceLabels(CapturedSite &Site, const PatternSet &Patterns, const AstQuery &Query, const VariableUses &Uses);

}  // namespace lmfuse::rewriter
