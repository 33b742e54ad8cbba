// The replaced loss's labels and input code, run once per call (see passed_code.h).
#include "passed_code.h"

#include <ATen/record_function.h>
#include <c10/core/InferenceMode.h>
#include <torch/autograd.h>

#include <cstring>
#include <functional>

#include <unordered_set>
#include <vector>

#include "logits_stand_in.h"

namespace lmfuse::torch_detail {
namespace {

// Whether an autograd graph reaches a log_softmax within a few nodes before `stop` (the node of the logits
// the code starts from): the views and copies of the input code, not the model's graph.
bool reachesLogSoftmax(const std::shared_ptr<torch::autograd::Node>& start, const torch::autograd::Node* stop) {
  std::vector<torch::autograd::Node*> pending;
  if (start) pending.push_back(start.get());
  std::unordered_set<torch::autograd::Node*> seen;
  for (int visited = 0; !pending.empty() && visited < 32; ++visited) {
    torch::autograd::Node* node = pending.back();
    pending.pop_back();
    if (node == stop || !seen.insert(node).second) continue;
    if (node->name().find("LogSoftmaxBackward") != std::string::npos) return true;
    for (const torch::autograd::Edge& edge : node->next_edges())
      if (edge.function) pending.push_back(edge.function.get());
  }
  return false;
}

// The program's own logits already a log_softmax (a view of one): the input code need not make it.
bool logitsAreLogSoftmax(const LogitsAsPassed& passed) {
  return passed.from.defined() && !is_skipped_logits(passed.from) && reachesLogSoftmax(passed.from.grad_fn(), nullptr);
}

// Whether the code may run on a recording leaf made of `logits`: not under InferenceMode (which records no
// graph), and not on logits carrying a forward-mode tangent (a detached leaf would drop it). Where it may
// not, a log_softmax in the code does not show, and only the error class of a wrong label count tells:
// nll_loss of a log_softmax and cross_entropy of it are the same function (a log_softmax is its own).
bool canRecord(const torch::Tensor& logits) {
  return !c10::InferenceMode::is_enabled() && !logits.is_inference() && !logits._fw_grad(/*level=*/0).defined();
}

// Whether a log_softmax ran on this thread while `code` ran: the operators LibTorch dispatches are observed
// (a thread-local RecordFunction callback), so the code runs under the caller's own autograd mode, which it
// may read (`torch::GradMode::is_enabled() ? 16 : 8` as a shape), and no graph is needed to tell.
thread_local bool logSoftmaxRan = false;

std::unique_ptr<at::ObserverContext> noteLogSoftmax(const at::RecordFunction& function) {
  if (std::strstr(function.name(), "log_softmax") != nullptr)
    logSoftmaxRan = true;
  return nullptr;
}

InputAsPassed runObservingLogSoftmax(const std::function<torch::Tensor()>& code) {
  logSoftmaxRan = false;
  const at::CallbackHandle handle =
      at::addThreadLocalCallback(at::RecordFunctionCallback(noteLogSoftmax).scopes({at::RecordScope::FUNCTION}));
  InputAsPassed result;
  try {
    result.input = code();
  } catch (...) {
    at::removeCallback(handle);
    throw;
  }
  at::removeCallback(handle);
  result.logSoftmax = logSoftmaxRan;
  return result;
}

}  // namespace

torch::Tensor labelsAsPassed(const LossOptions& options) {
  const LogitsAsPassed& passed = options.logits_as_passed();
  if (!passed.labels) return {};
  const torch::Tensor& from = passed.labels_from;  // undefined where the original's labels held no tensor
  try {
    return passed.labels(from);
  } catch (c10::Error& error) {
    // The original's own error, of its own class (an IndexError of a select stays one), with the site added.
    error.add_context(from.defined() ? c10::str("lmfuse::linear_cross_entropy: the loss replaced at ", passed.site,
                                                " computes its labels with code that fails on labels of shape ",
                                                from.sizes(), " and strides ", from.strides(), ", as the original does")
                                     : c10::str("lmfuse::linear_cross_entropy: the loss replaced at ", passed.site,
                                                " computes its labels with code that fails on undefined labels, as "
                                                "the original does"));
    throw;
  }
}

InputAsPassed inputOnStandIn(const torch::Tensor& hidden, const torch::Tensor& weight, const LogitsAsPassed& passed) {
  const torch::Tensor standIn = passed.from.defined() ? logitsStandIn(passed.from) : logitsStandIn(hidden, weight);
  InputAsPassed result;
  if (!canRecord(standIn)) {
    result.input = passed.input(standIn);
    return result;
  }
  if (!torch::GradMode::is_enabled()) {  // the code sees the caller's mode; the operators tell the log_softmax
    result = runObservingLogSoftmax([&] { return passed.input(standIn); });
    result.logSoftmax = result.logSoftmax || logitsAreLogSoftmax(passed);
    return result;
  }
  result.input = passed.input(standIn.detach().requires_grad_(true));
  result.logSoftmax = logitsAreLogSoftmax(passed) || reachesLogSoftmax(result.input.grad_fn(), nullptr);
  return result;
}

InputAsPassed inputFromLogits(const torch::Tensor& logits, bool programLogits, const LogitsAsPassed& passed) {
  InputAsPassed result;
  const bool fromIsLogSoftmax = programLogits && logitsAreLogSoftmax(passed);
  if (torch::GradMode::is_enabled() && logits.requires_grad()) {
    result.input = passed.input(logits);
    result.logSoftmax = fromIsLogSoftmax || reachesLogSoftmax(result.input.grad_fn(), logits.grad_fn().get());
    return result;
  }
  if (!canRecord(logits)) {
    result.input = passed.input(logits);
    result.logSoftmax = fromIsLogSoftmax;
    return result;
  }
  // No graph to the logits in the original: the code runs on them under the caller's mode (which it may
  // read), and the operators it dispatches tell a log_softmax.
  result = runObservingLogSoftmax([&] { return passed.input(logits); });
  result.logSoftmax = result.logSoftmax || fromIsLogSoftmax;
  return result;
}

}  // namespace lmfuse::torch_detail
