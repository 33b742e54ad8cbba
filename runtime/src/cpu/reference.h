// The CPU reference computation behind detail::cpu::linear_cross_entropy (arguments already validated,
// strides dense-resolved, workspace at least make_plan(...).total bytes).
#pragma once

#include "lmfuse/flce.h"

namespace lmfuse::detail::cpu {

void run_reference(const Problem& problem, const Options& options, const Outputs& outputs,
                   Workspace workspace, const Context& context);

}  // namespace lmfuse::detail::cpu
