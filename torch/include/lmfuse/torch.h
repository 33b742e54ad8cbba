// lmfuse for LibTorch: the fused linear + cross-entropy as an autograd function, and the run-time
// switches that rewritten model code consults.
//
// Contract: lmfuse::linear_cross_entropy(hidden, weight, bias, labels, options) returns what
//   F::cross_entropy(F::linear(hidden, weight, bias).view({-1, V}), labels.view(-1), <options>)
// returns, without ever building the [tokens, V] logits. Gradients flow to hidden, weight and bias
// (only to those that require grad; none are computed under torch::NoGradGuard or inference mode).
//   hidden  [..., D]  float32, float16 or bfloat16 (float64 is refused: the runtime computes in fp32)
//   weight  [V, D]    the dtype of hidden (mixed dtypes are refused, as F::linear refuses them)
//   bias    [V] or an undefined tensor (a torch::nn::Linear without bias has an undefined `bias`), of
//           weight's dtype (a rewritten call whose bias has another, which F::linear adds, computes the
//           original's loss instead; a direct call refuses it)
//   labels  int32 or int64, hidden's leading shape (or any shape with as many elements)
// The loss has hidden's dtype (what F::linear would give) unless LossOptions::dtype says otherwise; all
// arithmetic inside is fp32 or better.
// Under autocast (at::autocast, CPU or CUDA) the call casts as the pair it replaces would: hidden, weight
// and bias to the autocast dtype, as F::linear does, and the loss is fp32 unless LossOptions::dtype is
// set, as F::cross_entropy (autocast's fp32 list) gives. An fp32 weight (and bias) gets its gradient
// written in fp32 by the runtime, never rounded to the autocast dtype (F::linear's cast backward would).
// Reduction Mean and Sum compute the loss and the gradients in the forward call (one pass over the
// vocabulary) and the backward pass only scales them by the upstream gradient on the device; None
// returns hidden's leading shape and recomputes in the backward pass. A mean over zero valid tokens is
// 0 with zero gradients (PyTorch gives NaN; a NaN would poison every later optimiser step), except in a
// rewritten call (LossOptions::logits_as_passed set), which stands for the original loss: F::cross_entropy's own NaN there
// (its sign too), with zero gradients (the divisor is not n_items or a process group's). The gradients
// are values, not differentiable graphs: a backward pass with create_graph=true throws.
// CPU tensors run on the CPU backend with at::get_num_threads() threads; CUDA tensors on the current
// CUDA stream, with the workspace taken from LibTorch's caching allocator and no host synchronisation
// (capturable in a CUDA graph).
// Out-of-range labels (not in [0, V) and not ignore_index) make the loss NaN; the adapter raises a
// c10::IndexError (as nll_loss does) naming the first offending token after every CPU call, and after every CUDA call only when
// the environment has LMFUSE_CHECK_LABELS=1 (the check synchronises the stream).
//
// Also registered as the operator torch.ops.lmfuse.linear_cross_entropy (see torch/src/op.cpp):
//   torch.ops.load_library("liblmfuse_torch.so")
//   loss = torch.ops.lmfuse.linear_cross_entropy(hidden, weight, bias, labels, ignore_index=-100,
//            label_smoothing=0.0, reduction="mean", shift=False, softcap=0.0, logit_scale=1.0,
//            z_loss=0.0, n_items=None, dtype=None)
#pragma once

#include <torch/arg.h>
#include <torch/types.h>

#include <lmfuse/analysed.h>  // defines: AnalysedTypes, what a rewritten call's options are checked by
#include <lmfuse/flce.h>  // defines: Reduction, MemoryMode, the runtime this adapter calls

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace lmfuse {

/// A c10d process group, defined in <lmfuse/distributed.h> (kept out of this header, which every
/// rewritten model includes).
struct ProcessGroupHandle;

/// The dims a replaced loss's causal shift was written on (`logits.slice(1, 0, -1)`, `labels.slice(1, 1)`:
/// {1, 1}). The fused loss shifts along the labels' last dimension, the position dimension of hidden
/// [..., T, D] against labels [..., T]; the original computed that loss only where `logits`, counted
/// against hidden's rank, names the dimension before the classes and `labels` the labels' last (3-D: 1 or
/// -2, and 1 or -1; one 2-D sequence: 0 or -2, and 0 or -1), with labels shaped as hidden without its
/// last dimension. Without them the call requires hidden [B, T, D] and labels [B, T].
struct ShiftDims {
  int64_t logits = 1;
  int64_t labels = 1;
};

/// How a replaced loss call received its logits, recorded by the rewrite (never needed by hand): the
/// loss input's code as the original wrote it, which the fused call runs once, on a stand-in with the
/// logits' shape and no values (a meta tensor). The fused loss computes one row of the head's V classes per
/// token; the call checks whether the original's input was exactly that — [tokens, V], or [V] for a single
/// token — and, with the causal shift, whether the original shifted along the dimension the fused loss does
/// (see ShiftDims). Where it was another loss (3-D logits passed without a reshape: cross_entropy reads their
/// classes from dimension 1; a reshape to {N, K} with K != V: it regroups the classes; a shift along another
/// dimension), the call computes the original loss with LibTorch's operators (torch/src/original_loss.h),
/// given the labels' code; without it, it throws naming `site`. It never computes another loss than the
/// original. Where the rewrite also recorded the
/// loss's labels argument as code (`labels`, over `labels_from`), the call runs it once on labels_from, as
/// the original ran it once, and throws where the original's cross_entropy would have: a view the original could not take of those labels, labels that are not class indices as Long
/// (int32), or not one label per row of the input ([tokens], or a scalar for a single token), raising the c10
/// exception class the original raises (c10::ValueError for a batch size cross_entropy rejects). Floating
/// labels (class probabilities) make the call compute the original loss with LibTorch's operators instead
/// (torch/src/original_loss.h). The fused call itself takes any integer labels of any shape with as many elements.
/// Unset (`input` empty): no check.
struct LogitsAsPassed {
  std::string site;  ///< "file:line" of the replaced loss call
  /// The variable the loss input is computed from: the head's logits or a local made from them, skipped
  /// or not. Undefined when the head call sits inside the loss call (the stand-in then has the shape
  /// F::linear(hidden, weight) would give).
  torch::Tensor from;
  /// The loss input's code with `from` (or the inline head call) replaced by its parameter.
  std::function<torch::Tensor(const torch::Tensor&)> input;
  /// Set for a shifted site: the dims its shift is written on.
  c10::optional<ShiftDims> shift_dims;
  /// The tensor the loss's labels argument is computed from (the labels, a local holding a view of them).
  torch::Tensor labels_from;
  /// The labels argument's code with `labels_from` replaced by its parameter (its views, cast and shift).
  std::function<torch::Tensor(const torch::Tensor&)> labels;
};

struct LossOptions {
  /// Set by rewritten code: `AnalysedTypes<...>()`, the types its site was decided on, checked when the call
  /// is compiled (analysed.h); nothing is kept.
  LossOptions& analysed(const AnalysedTypesTag&) { return *this; }
  /// Rows whose label equals this are ignored (LibTorch's default: -100).
  TORCH_ARG(int64_t, ignore_index) = -100;
  /// ε of PyTorch's label smoothing, in [0, 1].
  TORCH_ARG(double, label_smoothing) = 0.0;
  /// Mean (over valid tokens, or over n_items), Sum, or None (one loss per token).
  TORCH_ARG(lmfuse::Reduction, reduction) = lmfuse::Reduction::Mean;
  /// Causal shift: labels[..., t + 1] is the target of hidden[..., t, :] within the last label
  /// dimension (HF's logits[:, :-1] against labels[:, 1:]); the last position of each row has none.
  TORCH_ARG(bool, shift) = false;
  /// Gemma-style cap: z = softcap · tanh(x / softcap); 0 = off.
  TORCH_ARG(double, softcap) = 0.0;
  /// Cohere-style scale applied to the logits before the cap.
  TORCH_ARG(double, logit_scale) = 1.0;
  /// Weight of the z-loss term z_loss · lse².
  TORCH_ARG(double, z_loss) = 0.0;
  /// Mean divisor (e.g. HF's num_items_in_batch): a one-element tensor on hidden's device, read on
  /// the device without a synchronisation. Undefined = the number of valid tokens.
  TORCH_ARG(torch::Tensor, n_items) = {};
  /// Data parallel: the Mean's divisor is the count of labelled tokens summed over this group (see
  /// <lmfuse/distributed.h>: lmfuse::distributed_group(pg)); null = this process's tokens only.
  TORCH_ARG(std::shared_ptr<const ProcessGroupHandle>, process_group) = nullptr;
  /// How the runtime trades memory for speed in the weight gradient (see flce.h).
  TORCH_ARG(lmfuse::MemoryMode, memory) = lmfuse::MemoryMode::Auto;
  /// Tokens per chunk; 0 = chosen by the runtime from its workspace budget.
  TORCH_ARG(int64_t, chunk_tokens) = 0;
  /// dtype of the returned loss; unset = hidden's (what F::linear would give). Set kFloat where the
  /// original upcast its logits (`logits.float()`): the fp32 loss is then returned without first being
  /// rounded to bf16/fp16, as the unfused fp32 cross-entropy would be.
  TORCH_ARG(c10::optional<torch::ScalarType>, dtype) = c10::nullopt;
  /// Set by rewritten code: the replaced call's logits input, checked as LogitsAsPassed says.
  TORCH_ARG(LogitsAsPassed, logits_as_passed) = {};
};

/// The fused loss with autograd to hidden, weight and bias (see the contract above).
torch::Tensor linear_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& bias, const torch::Tensor& labels,
                                   const LossOptions& options = {});

namespace detail {
template <class T, class = void> struct HasLabelSmoothing : std::false_type {};
template <class T>
struct HasLabelSmoothing<T, std::void_t<decltype(std::declval<const T&>().label_smoothing())>> : std::true_type {};
}  // namespace detail

namespace detail {
// Reduction, ignore_index and label smoothing of a loss module's options (the class weights are the callers').
template <class ModuleOptions>
LossOptions moduleLossOptionsBesidesWeight(const ModuleOptions& options) {
  // reduction_t is a variant of (kNone, kMean, kSum), in that order, in every LibTorch.
  const auto reduction = options.reduction().index();
  TORCH_CHECK(reduction == 1 || reduction == 2,
              "lmfuse::module_loss_options: the loss module's reduction is None, which the fused loss returns in "
              "another shape; mark the site `// NOLINT(lmfuse)` to keep the original loss");
  LossOptions result;
  result.ignore_index(options.ignore_index()).reduction(reduction == 2 ? Reduction::Sum : Reduction::Mean);
  if constexpr (HasLabelSmoothing<ModuleOptions>::value) result.label_smoothing(options.label_smoothing());
  return result;
}
}  // namespace detail

/// The loss options a torch::nn::CrossEntropyLoss or NLLLoss module holds (`criterion->options`), as a
/// rewritten `criterion(logits, y)` passes them: read when the loss runs, so options changed after the
/// module was constructed are honoured. Class weights and reduction None have no fused equivalent with
/// the same result (None would return hidden's leading shape, not the flattened one): they are an error
/// naming the option, never a different loss. The rewriter refuses modules constructed with either.
template <class ModuleOptions>
LossOptions module_loss_options(const ModuleOptions& options) {
  TORCH_CHECK(!options.weight().defined(),
              "lmfuse::module_loss_options: the loss module has class weights (options.weight), which the fused "
              "loss does not support; mark the site `// NOLINT(lmfuse)` to keep the original loss");
  return detail::moduleLossOptionsBesidesWeight(options);
}

/// The same, with the class weights the module's forward applies (`criterion->weight`: filled from
/// options.weight() when the module is constructed, and assignable after it), as the rewrite passes them:
/// defined weights are an error naming them, never a loss without them. options.weight() set after the
/// module was constructed (without reset()) is not what its forward applies, so it is not checked here.
template <class ModuleOptions>
LossOptions module_loss_options(const ModuleOptions& options, const torch::Tensor& weight) {
  TORCH_CHECK(!weight.defined(),
              "lmfuse::module_loss_options: the loss module has class weights (its `weight`), which the fused "
              "loss does not support; mark the site `// NOLINT(lmfuse)` to keep the original loss");
  return detail::moduleLossOptionsBesidesWeight(options);
}

/// False when the environment has LMFUSE_DISABLE=1 (read once, at the first call) or after
/// set_enabled(false): rewritten code then runs its original, unfused computation.
bool enabled();
/// True when the environment has LMFUSE_RETURN_LOGITS=1 or after set_return_logits(true): rewritten
/// code still computes the logits it returns to its caller.
bool return_logits();
/// enabled() && !return_logits(): the fused path does not compute the logits.
bool skip_logits();
void set_enabled(bool on);
void set_return_logits(bool on);

/// What a rewritten head line returns on the fused path instead of F::linear(hidden, weight): a tensor
/// with the logits' shape (hidden's leading dimensions + V), dtype (what F::linear would give, autocast
/// included) and device, but no values. size, sizes, dim, numel, dtype, device, options and defined
/// answer as they would for the logits, and so do requires_grad, is_leaf and whether there is a grad_fn
/// (a node whose backward refuses); any operator on it (view, argmax, to, printing, ...) fails with
/// an error that names lmfuse, `site` ("file:line") and the two ways out (LMFUSE_RETURN_LOGITS=1, or
/// `// NOLINT(lmfuse)` on the site). See torch/src/skipped_logits.cpp for how. `hidden_rank` (0: any) is the
/// rank the head's product requires (`torch::mm`: 2): another rank throws as the product would, since the
/// fused call takes any.
torch::Tensor skipped_logits(const torch::Tensor& hidden, const torch::Tensor& weight, const char* site,
                             int64_t hidden_rank = 0);
/// The same for a head with a bias (F::linear(hidden, weight, bias); undefined: none): F::linear's checks of
/// the bias (its length, device and dtype against the product's) are made here too, at the head.
torch::Tensor skipped_logits(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                             const char* site, int64_t hidden_rank = 0);
/// What a rewritten reshape of skipped logits returns on the fused path (`auto flat = logits.view(...)`,
/// or a head line that reshapes its output): `code`, the original's reshape with the logits replaced by
/// its parameter, run on a stand-in with the shape and strides of `skipped` and no values; the result is
/// skipped logits of the same site and device with the shape, strides and dtype `code` gave. An error the
/// original's reshape would raise (a view of non-contiguous logits) is raised here too. Logits that are
/// not skipped (their values were computed) are passed to `code` as they are.
torch::Tensor skipped_logits_after(const torch::Tensor& skipped,
                                   const std::function<torch::Tensor(const torch::Tensor&)>& code);
/// True for a tensor made by skipped_logits.
bool is_skipped_logits(const torch::Tensor& tensor);

/// Calls of linear_cross_entropy in this process (all threads) that ran the fused computation: a test
/// or a training script asserts with it that the rewritten code took the fused path. With the environment
/// variable LMFUSE_REPORT_FUSED_CALLS=1 it is also printed to stderr at exit ("lmfuse: N fused calls").
int64_t fused_call_count();

}  // namespace lmfuse
