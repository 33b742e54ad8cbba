// The run-time switches rewritten code consults: enabled(), return_logits(), skip_logits(), and the
// count of fused calls that tells whether it took the fused path.
// Each is read from the environment once, at its first use (environment.h: a value that is no switch's throws
// there), and can be overridden from code at any time.
#include <lmfuse/torch.h>

#include "environment.h"
#include "fused_call.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace lmfuse {
namespace {

// Function-local statics: initialised once (thread-safe), at the first call, from the environment.
std::atomic<bool>& enabledFlag() {
  static std::atomic<bool> flag{!torch_detail::switchOn("LMFUSE_DISABLE")};
  return flag;
}

std::atomic<bool>& returnLogitsFlag() {
  static std::atomic<bool> flag{torch_detail::switchOn("LMFUSE_RETURN_LOGITS")};
  return flag;
}

std::atomic<int64_t>& fusedCalls() {
  static std::atomic<int64_t> count{0};
  return count;
}

// LMFUSE_REPORT_FUSED_CALLS=1: the count goes to stderr at exit ("lmfuse: N fused calls"), so that a
// test can tell from outside that a program it did not write trained through the fused path.
struct ExitReport {
  ~ExitReport() {
    try {
      if (torch_detail::switchOn("LMFUSE_REPORT_FUSED_CALLS"))
        std::fprintf(stderr, "lmfuse: %lld fused calls\n", static_cast<long long>(fusedCalls().load()));
    } catch (const std::exception& error) {  // at exit nothing can catch it: said instead
      std::fprintf(stderr, "%s\n", error.what());
    }
  }
} exitReport;

}  // namespace

bool enabled() { return enabledFlag().load(std::memory_order_relaxed); }
bool return_logits() { return returnLogitsFlag().load(std::memory_order_relaxed); }
bool skip_logits() { return enabled() && !return_logits(); }
void set_enabled(bool on) { enabledFlag().store(on, std::memory_order_relaxed); }
void set_return_logits(bool on) { returnLogitsFlag().store(on, std::memory_order_relaxed); }
int64_t fused_call_count() { return fusedCalls().load(std::memory_order_relaxed); }
void torch_detail::countFusedCall() { fusedCalls().fetch_add(1, std::memory_order_relaxed); }

}  // namespace lmfuse
