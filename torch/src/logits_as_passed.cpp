// The check of LossOptions::logits_as_passed. The fused call computes a loss whose input holds the head's
// classes in rows, one per token, in the tokens' order. Whether the replaced loss was that one depends on
// shapes known only when the model runs (the rank of the hidden states, the K of a written view({-1, K})),
// so the rewritten call brings the original's input code and the check runs it here on a stand-in without
// values (logits_stand_in.h): shape arithmetic only, no device work. Where it was another loss, the call
// computes the original instead (original_loss.h). Its labels argument's code runs once, on the real labels
// (passed_code.h): the fused call takes any integer labels with one per token, the original's cross_entropy
// only Long class indices shaped as its input's rows, so a rewritten call throws wherever the original would
// have (also inside a try block that catches it).
#include "logits_as_passed.h"

#include <torch/nn/functional/loss.h>

#include "errors.h"
#include "passed_code.h"

namespace lmfuse::torch_detail {
namespace {

// Whether this LibTorch's cross_entropy takes a label of shape [1] for one row of 1-D logits (2.x does, 1.13
// throws): asked of the library itself, once, so the check follows whichever version the program links.
bool takesOneLabelForOneRow() {
  static const bool takes = [] {
    try {
      torch::nn::functional::cross_entropy(torch::zeros({2}), torch::zeros({1}, torch::kLong));
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }();
  return takes;
}

/// A dim as written (negative: counted from the end) against a rank.
int64_t counted(int64_t written, int64_t rank) { return written < 0 ? written + rank : written; }

// The fused call shifts along the labels' last dimension, the positions of hidden [..., T, D]. The
// original's slices computed that shift only when they ran along those dimensions; the shapes alone
// cannot tell (with B == T, slice(0, ...) and slice(1, ...) give the same shape). Empty where they did.
std::string whyShiftNotFused(const torch::Tensor& hidden, const torch::Tensor& labels, const LogitsAsPassed& passed) {
  const int64_t rank = hidden.dim();
  std::string why;
  if (!labels.defined() || rank < 2 || labels.dim() != rank - 1 || labels.sizes() != hidden.sizes().slice(0, rank - 1))
    why = "the fused loss shifts along the last dimension of labels shaped as hidden without its last dimension";
  else if (!passed.shift_dims && rank != 3)
    why = "the fused loss shifts along the sequence dimension of hidden [B, T, D] and labels [B, T], and the "
          "dimensions the original's shift is written on are not recorded";
  else if (passed.shift_dims && counted(passed.shift_dims->logits, rank) != rank - 2)
    why = "the original shifts the logits along their dimension " + std::to_string(passed.shift_dims->logits) +
          ", which for hidden of " + std::to_string(rank) + " dimensions is not the positions' dimension (" +
          std::to_string(rank - 2) + ")";
  else if (passed.shift_dims && counted(passed.shift_dims->labels, rank - 1) != rank - 2)
    why = "the original shifts the labels along their dimension " + std::to_string(passed.shift_dims->labels) +
          ", which for labels of " + std::to_string(rank - 1) + " dimensions is not their last";
  if (why.empty()) return why;
  return c10::str("the loss replaced at ", passed.site, " shifts the labels by one position; here hidden has shape ",
                  hidden.sizes(), " and labels ", labels.defined() ? labels.sizes() : c10::IntArrayRef{}, ": ", why);
}

// What cross_entropy checks of its class-index target (`target`: the labels as the original passed them)
// against the input it received (`input`, already [rows, V] or [V]): Long class indices, one per row.
void checkLabelsAsPassed(const torch::Tensor& target, const InputAsPassed& computed, const LogitsAsPassed& passed) {
  const torch::Tensor& input = computed.input;
  std::string why;
  Check check = Check::LabelShape;
  if (target.is_floating_point() || target.is_complex()) {
    why = "floating labels are class probabilities to cross_entropy, and the fused loss takes class indices";
    check = Check::LabelType;
  } else if (target.scalar_type() != at::kLong) {
    why = std::string("cross_entropy takes class indices as Long (it throws: expected scalar type Long but found ") +
          c10::toString(target.scalar_type()) + ")";
    check = Check::LabelType;
  } else if (input.dim() == 2 && (target.dim() == 0 || target.size(0) != input.size(0))) {
    // LibTorch reads a 0-dim target's batch size as 0 there, so rows of logits with one 0-dim label fail this
    // check, not the rank check below.
    const int64_t targetRows = target.dim() == 0 ? 0 : target.size(0);
    why = "cross_entropy takes one label per row (it throws: Expected input batch_size (" + std::to_string(input.size(0)) +
          ") to match target batch_size (" + std::to_string(targetRows) + "))";
    // cross_entropy's batch check raises a ValueError, nll_loss's (called by the program itself) an Error.
    check = computed.logSoftmax ? Check::LabelCountNll : Check::LabelCount;
  } else if (input.dim() == 2 && target.dim() != 1) {
    why = "cross_entropy takes one label per row of [" + std::to_string(input.size(0)) + ", " +
          std::to_string(input.size(1)) + "] logits (it throws: 0D or 1D target tensor expected, multi-target not "
          "supported)";
  } else if (input.dim() == 1 && target.dim() != 0 && !(target.dim() == 1 && target.size(0) == 1 && takesOneLabelForOneRow())) {
    why = "cross_entropy takes a single label for one row of logits";
  }
  LMFUSE_TORCH_CHECK(check, why.empty(), "lmfuse::linear_cross_entropy: the loss replaced at ", passed.site,
                     " received labels of shape ", target.sizes(), " and dtype ", target.scalar_type(),
                     " with logits of shape ", input.sizes(), ": ", why, "; the original loss throws here as well.");
}

}  // namespace

std::string whyNotFused(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& labels,
                        const torch::Tensor& target, const LossOptions& options) {
  const LogitsAsPassed& passed = options.logits_as_passed();
  if (!passed.input || !hidden.defined() || !weight.defined() || hidden.dim() < 1 || weight.dim() != 2) return {};
  const InputAsPassed computed = inputOnStandIn(hidden, weight, passed);
  const torch::Tensor& input = computed.input;
  const int64_t classes = weight.size(0);
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < hidden.dim(); ++d) rows *= hidden.size(d);
  // The last position of every sequence has no target.
  if (options.shift() && hidden.dim() >= 2 && hidden.size(-2) > 0) rows -= rows / hidden.size(-2);
  const bool table = input.dim() == 2 && input.size(0) == rows && input.size(1) == classes;
  const bool single = input.dim() == 1 && input.size(0) == classes && rows == 1;
  if (!table && !single) {
    std::string why;
    if (input.dim() > 2)
      why = ": cross_entropy reads the classes of logits with more than two dimensions from dimension 1";
    else if (input.dim() == 2 && input.size(1) != classes)
      why = ": the reshape regroups the classes in rows of " + std::to_string(input.size(1));
    return c10::str("the loss replaced at ", passed.site, " received logits of shape ", input.sizes(),
                    ", not one row of the head's ", classes, " classes per token ([", rows, ", ", classes,
                    "]), which is what the fused loss computes", why);
  }
  // The original's own errors first, of their own classes (labels one position too long for the shifted
  // logits: cross_entropy's ValueError), then what only the fused call cannot follow.
  if (target.defined()) checkLabelsAsPassed(target, computed, passed);
  return options.shift() ? whyShiftNotFused(hidden, labels, passed) : std::string();
}

}  // namespace lmfuse::torch_detail
