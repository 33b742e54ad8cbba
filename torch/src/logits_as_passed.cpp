// The check of LossOptions::logits_as_passed. A rewrite may only replace a loss whose input holds the
// head's classes in rows, one per token, in the tokens' order: that is the loss the fused call computes.
// Whether it does depends on shapes known only when the model runs (the rank of the hidden states, the
// K of a written view({-1, K})), so the rewritten call brings the original's input code and the check
// runs it here on a stand-in without values (logits_stand_in.h): shape arithmetic only, no device work.
#include "logits_as_passed.h"

#include "logits_stand_in.h"

namespace lmfuse::torch_detail {

void checkLogitsAsPassed(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& labels,
                         const LossOptions& options) {
  const LogitsAsPassed& passed = options.logits_as_passed();
  if (!passed.input || !hidden.defined() || !weight.defined() || hidden.dim() < 1 || weight.dim() != 2) return;
  const torch::Tensor input = passed.input(passed.from.defined() ? logitsStandIn(passed.from)
                                                                  : logitsStandIn(hidden, weight));
  // The fused call shifts along the sequence dimension of hidden [B, T, D] and labels [B, T]; with other
  // ranks the original's slice may run along another dimension of the same length (B == T).
  TORCH_CHECK(!options.shift() || (hidden.dim() == 3 && labels.defined() && labels.dim() == 2 &&
                                   labels.size(0) == hidden.size(0) && labels.size(1) == hidden.size(1)),
              "lmfuse::linear_cross_entropy: the loss replaced at ", passed.site,
              " shifts the labels by one position, which the fused loss does along the sequence dimension of hidden "
              "[B, T, D] and labels [B, T]; here hidden has shape ", hidden.sizes(), " and labels ",
              labels.defined() ? labels.sizes() : c10::IntArrayRef{},
              ", where the original's shift may run along another dimension. Mark the site // NOLINT(lmfuse) to "
              "keep the original loss.");
  const int64_t classes = weight.size(0);
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < hidden.dim(); ++d) rows *= hidden.size(d);
  if (options.shift()) rows -= hidden.size(0);  // the last position of every sequence has no target
  const bool table = input.dim() == 2 && input.size(0) == rows && input.size(1) == classes;
  const bool single = input.dim() == 1 && input.size(0) == classes && rows == 1;
  if (table || single) return;
  std::string why;
  if (input.dim() > 2)
    why = ": cross_entropy reads the classes of logits with more than two dimensions from dimension 1";
  else if (input.dim() == 2 && input.size(1) != classes)
    why = ": the reshape regroups the classes in rows of " + std::to_string(input.size(1));
  TORCH_CHECK(false, "lmfuse::linear_cross_entropy: the loss replaced at ", passed.site, " received logits of shape ",
              input.sizes(), ", not one row of the head's ", classes, " classes per token ([", rows, ", ", classes,
              "]), which is what the fused loss computes", why,
              ". Reshape the logits to [tokens, V] before the loss (logits.view({-1, logits.size(-1)})), or mark the "
              "site // NOLINT(lmfuse) to keep the original loss.");
}

}  // namespace lmfuse::torch_detail
