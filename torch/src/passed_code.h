// The replaced loss's own code that a rewritten call carries in LossOptions::logits_as_passed: its labels
// argument and its loss input, each as a function of the variable it starts from. The original ran each
// once per call, so each runs here once per call too: whatever else that code does (a counter, a print, a
// random draw) happens as often as it did in the original.
#pragma once

#include <lmfuse/torch.h>

namespace lmfuse::torch_detail {

/// The labels as the original passed them to its loss: the labels code run on the real labels it starts
/// from. Undefined when the options record no labels code. Its own errors are the original's, of their own
/// class, with the site added.
torch::Tensor labelsAsPassed(const LossOptions& options);

/// The loss input as the original computed it, and whether it is a log_softmax of the logits (an nll_loss
/// site: the rewrite accepts log_softmax only there), told from the autograd graph of the input code.
struct InputAsPassed {
  torch::Tensor input;
  bool logSoftmax = false;
};

/// The input code run on a stand-in without values of the logits it starts from (logits_stand_in.h): the
/// shape and dtype the original's input had, for the fused path, which computes no logits. Under grad mode
/// the stand-in records autograd so that a log_softmax in the code shows; without, the code runs under the
/// caller's mode (which it may read) and the operators it dispatches tell a log_softmax.
InputAsPassed inputOnStandIn(const torch::Tensor& hidden, const torch::Tensor& weight, const LogitsAsPassed& passed);

/// The input code run on `logits`, the values the original's input starts from (the program's own logits
/// when `programLogits`, otherwise the head's recomputed), with the graph to them the original's has.
InputAsPassed inputFromLogits(const torch::Tensor& logits, bool programLogits, const LogitsAsPassed& passed);

}  // namespace lmfuse::torch_detail
