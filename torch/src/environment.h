// The adapter's environment switches (LMFUSE_DISABLE, LMFUSE_RETURN_LOGITS, LMFUSE_CHECK_LABELS,
// LMFUSE_REPORT_FUSED_CALLS, LMFUSE_CHECK_EVERY_CALL) read one way: a switch that changes what a model computes
// must not be ignored because it was written `true` where `1` was meant.
#pragma once

namespace lmfuse::torch_detail {

/// Whether the environment variable `name` turns its switch on: unset, empty, `0`, `false`, `no` or `off`
/// (any case) leave it off; `1`, `true`, `yes` or `on` turn it on; any other value throws c10::Error naming
/// the variable, its value and the values it takes.
bool switchOn(const char* name);

}  // namespace lmfuse::torch_detail
