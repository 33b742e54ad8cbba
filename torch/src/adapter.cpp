// lmfuse::linear_cross_entropy: the autograd function over the runtime call (contract in
// <lmfuse/torch.h>). Mean/Sum: the forward call computes the loss and the gradients together; the
// backward pass scales them in place by the upstream gradient on the device. None (or a second
// backward pass through the same graph): the backward pass recomputes with the upstream gradient.
// Mixed precision (autocast over fp32 weight and bias, autocast_rule.h): the function's weight and bias
// are the fp32 parameters, the GEMMs multiply their half copies, and the runtime writes the parameter
// gradients in fp32 (ParamGradKind::Float32), in every pass.
#include <lmfuse/torch.h>

#include <torch/autograd.h>
#include <torch/nn/functional/loss.h>

#include <algorithm>
#include <limits>

#include "autocast_rule.h"
#include "dispatch_state.h"
#include "distributed_mean.h"
#include "errors.h"
#include "fused_call.h"
#include "logits_as_passed.h"
#include "original_loss.h"
#include "passed_code.h"

namespace lmfuse {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using torch_detail::CallResult;
using torch_detail::Gradients;
using torch_detail::Operands;

// The names, in saved_data, of the GEMM operands kept aside rather than saved (see forward): hidden, weight, bias.
constexpr const char* kAside[] = {"hidden", "weight", "bias"};

// The options travel to the backward pass in saved_data, field by field (an IValue holds no struct).
void saveOptions(AutogradContext* ctx, const LossOptions& options) {
  ctx->saved_data["ignore_index"] = options.ignore_index();
  ctx->saved_data["label_smoothing"] = options.label_smoothing();
  ctx->saved_data["reduction"] = static_cast<int64_t>(options.reduction());
  ctx->saved_data["shift"] = options.shift();
  ctx->saved_data["softcap"] = options.softcap();
  ctx->saved_data["logit_scale"] = options.logit_scale();
  ctx->saved_data["z_loss"] = options.z_loss();
  ctx->saved_data["memory"] = static_cast<int64_t>(options.memory());
  ctx->saved_data["chunk_tokens"] = options.chunk_tokens();
}

LossOptions loadOptions(AutogradContext* ctx, const torch::Tensor& n_items) {
  auto& saved = ctx->saved_data;
  return LossOptions()
      .ignore_index(saved["ignore_index"].toInt())
      .label_smoothing(saved["label_smoothing"].toDouble())
      .reduction(static_cast<Reduction>(saved["reduction"].toInt()))
      .shift(saved["shift"].toBool())
      .softcap(saved["softcap"].toDouble())
      .logit_scale(saved["logit_scale"].toDouble())
      .z_loss(saved["z_loss"].toDouble())
      .memory(static_cast<MemoryMode>(saved["memory"].toInt()))
      .chunk_tokens(saved["chunk_tokens"].toInt())
      .n_items(n_items);
}

// True for a matrix LibTorch's mm backward calls column-major (mm_mat1_backward, mm_mat2_backward): unit stride
// down its columns, its rows one column apart. The gradient of such an operand comes back column-major too.
bool columnMajor(const torch::Tensor& matrix) {
  return matrix.stride(0) == 1 && matrix.stride(1) == matrix.size(0);
}

// The gradients as the original's nodes hand them to autograd (and so to autograd::grad, a tensor hook, a
// gradient-accumulation hook): hidden's in the layout of the [N, D] rows F::linear's product read
// (operands.hidden_rows), reshaped to hidden's shape, and a view only where the original's is one (a 2-D hidden's
// is a tensor of its own, which a program may change in place); the weight's as mm's product of weight.t()
// returns it, through the transpose back (a view: column-major unless the weight's rows are contiguous); the
// bias's as sum_to returns it (a view). Under fp32Params the parameters' gradients come through the casts of the
// fp32 parameters (tensors of their own, as the runtime writes them).
variable_list inputGradients(const CallResult& result, const Operands& operands, const torch::Tensor& hidden,
                             bool fp32Params) {
  // One per forward argument: hidden, weight, bias, hasBias, labels, labelsAsRead, n_items, options, gemmWeight,
  // gemmBias (never differentiable: the half copies), fp32Params.
  variable_list grads(11);
  if (result.grad_hidden.defined()) {
    torch::Tensor rows = result.grad_hidden;
    if (columnMajor(operands.hidden_rows)) rows = rows.t().contiguous().t();
    grads[0] = hidden.dim() == 2 ? rows : rows.view(hidden.sizes());
  }
  if (result.grad_weight.defined()) {
    const torch::Tensor& weight = operands.weight_passed;
    const bool rowsContiguous = weight.stride(1) == 1 && weight.stride(0) == weight.size(1);
    grads[1] = fp32Params ? result.grad_weight
               : rowsContiguous ? result.grad_weight.t().t()
                                : result.grad_weight.t().contiguous().t();
  }
  if (result.grad_bias.defined()) grads[2] = fp32Params ? result.grad_bias : result.grad_bias.view(result.grad_bias.sizes());
  return grads;
}

ParamGradKind paramGrads(bool fp32Params) {
  return fp32Params ? ParamGradKind::Float32 : ParamGradKind::ProblemDType;
}

class FusedLinearCrossEntropy : public torch::autograd::Function<FusedLinearCrossEntropy> {
public:
  // bias and n_items arrive as empty placeholders when absent (see linear_cross_entropy below). weight
  // and bias receive the gradients; gemmWeight and gemmBias are what the GEMMs multiply: the same tensors,
  // or under fp32Params the detached half copies of the fp32 weight and bias.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& biasOrEmpty, bool hasBias, const torch::Tensor& labels,
                               const torch::Tensor& labelsAsRead, const torch::Tensor& n_itemsOrEmpty, const LossOptions& options,
                               const torch::Tensor& gemmWeight, const torch::Tensor& gemmBiasOrEmpty,
                               bool fp32Params) {
    const torch::Tensor bias = hasBias ? biasOrEmpty : torch::Tensor();
    const torch::Tensor gemmBias = hasBias ? gemmBiasOrEmpty : torch::Tensor();
    const Operands operands =
        torch_detail::prepareOperands(hidden, gemmWeight, gemmBias, labels, options, paramGrads(fp32Params));
    // Only the GEMM operands are kept: the fp32 parameters are not needed to recompute. Of those, what
    // F::linear's backward keeps is kept as a saved variable (autograd then refuses a backward after it
    // changed in place, in both programs): the weight where the input wants a gradient, the input where the
    // weight does, never the bias (its gradient does not read it). An update in place between forward and
    // backward of anything else (a bias clamped under NoGradGuard, a linear probe's weight) leaves the
    // original's backward running, so it leaves this one's too: such an operand is kept aside with its
    // version, which only a backward that computes with it (a recompute) checks.
    // What is saved is what the original's nodes save, so that autograd's checks of saved variables (a change
    // in place before backward, an inference tensor) hold where they held for it: of hidden, its rows as
    // F::linear's product folds them (a view of hidden, or the copy the fold made of a non-contiguous one); of
    // the labels, the tensor the original's loss read (labelsAsRead: its labels code's result, a view of the
    // caller's labels or a copy), while the runtime's own labels are kept aside as they were for a recompute.
    const torch::Tensor operandsKept[] = {hidden, gemmWeight, gemmBiasOrEmpty};
    const bool asVariable[] = {weight.requires_grad(), hidden.requires_grad(), false};
    ctx->save_for_backward({asVariable[0] ? operands.hidden_rows : torch::Tensor(),
                            asVariable[1] ? gemmWeight : torch::Tensor(), torch::Tensor(), labelsAsRead,
                            n_itemsOrEmpty});
    ctx->saved_data["hidden_sizes"] = hidden.sizes().vec();
    if (!labelsAsRead.is_same(labels)) ctx->saved_data["labels"] = labels.clone();
    for (int i = 0; i < 3; ++i)
      if (!asVariable[i]) {
        ctx->saved_data[kAside[i]] = operandsKept[i];
        // An inference tensor has no version (nor can it change in place outside InferenceMode): -1.
        ctx->saved_data[std::string(kAside[i]) + "_version"] =
            operandsKept[i].defined() && !operandsKept[i].is_inference() ? static_cast<int64_t>(operandsKept[i]._version())
                                                                          : int64_t{-1};
      }
    ctx->saved_data["has_bias"] = bias.defined();
    ctx->saved_data["fp32_params"] = fp32Params;
    ctx->saved_data["has_n_items"] = options.n_items().defined();
    saveOptions(ctx, options);
    const bool reduced = options.reduction() != Reduction::None;
    Gradients wanted;
    if (reduced) {  // one pass over the vocabulary gives the loss and every gradient autograd will ask for
      wanted.hidden = hidden.requires_grad();
      wanted.weight = weight.requires_grad();
      wanted.bias = bias.defined() && bias.requires_grad();
    }
    CallResult result = torch_detail::runFused(operands, wanted);
    ctx->saved_data["precomputed"] = wanted.any();
    if (wanted.any()) {
      ctx->saved_data["grad_hidden"] = result.grad_hidden;
      ctx->saved_data["grad_weight"] = result.grad_weight;
      ctx->saved_data["grad_bias"] = result.grad_bias;
    }
    return result.loss.to(options.dtype().value_or(hidden.scalar_type()));  // shaped as the original's already
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    // create_graph=true runs this pass in grad mode: the gradients handed back would have to be functions of
    // the inputs for a second derivative (a gradient penalty), and the runtime's are plain values, so that
    // derivative would silently miss this loss's terms. Refused instead.
    LMFUSE_TORCH_CHECK(torch_detail::Check::Unsupported, !torch::GradMode::is_enabled(),
                "lmfuse::linear_cross_entropy: a backward pass with create_graph=true (double backward) is not "
                "supported: the fused loss's gradients are not differentiable; run this loss unfused "
                "(LMFUSE_DISABLE=1) to differentiate its gradients");
    const variable_list saved = ctx->get_saved_variables();
    torch::Tensor operandsKept[3];
    for (int i = 0; i < 3; ++i)
      operandsKept[i] = ctx->saved_data.count(kAside[i]) ? ctx->saved_data[kAside[i]].toTensor() : saved[i];
    if (!ctx->saved_data.count(kAside[0])) operandsKept[0] = operandsKept[0].reshape(ctx->saved_data["hidden_sizes"].toIntVector());
    const torch::Tensor &hidden = operandsKept[0], &gemmWeight = operandsKept[1];
    const torch::Tensor labels = ctx->saved_data.count("labels") ? ctx->saved_data["labels"].toTensor() : saved[3];
    const torch::Tensor gemmBias = ctx->saved_data["has_bias"].toBool() ? operandsKept[2] : torch::Tensor();
    const LossOptions options =
        loadOptions(ctx, ctx->saved_data["has_n_items"].toBool() ? saved[4] : torch::Tensor());
    const Operands operands = torch_detail::prepareOperands(hidden, gemmWeight, gemmBias, labels, options,
                                                            paramGrads(ctx->saved_data["fp32_params"].toBool()));
    const torch::Tensor& upstream = grad_outputs[0];

    if (ctx->saved_data["precomputed"].toBool()) {
      // First backward pass of a Mean/Sum loss: scale the forward call's gradients in place and hand
      // them over (the saved copies are released so their memory goes with the graph).
      ctx->saved_data["precomputed"] = false;
      CallResult result;
      result.grad_hidden = ctx->saved_data["grad_hidden"].toTensor();
      result.grad_weight = ctx->saved_data["grad_weight"].toTensor();
      result.grad_bias = ctx->saved_data["grad_bias"].toTensor();
      for (const char* key : {"grad_hidden", "grad_weight", "grad_bias"}) ctx->saved_data.erase(key);
      torch_detail::scaleGradients(operands, result, upstream);
      return inputGradients(result, operands, hidden, ctx->saved_data["fp32_params"].toBool());
    }
    // A recompute reads the operands kept aside as they are now, where the original's backward reads what
    // its forward saved: one changed in place since would give other gradients, so the backward fails as
    // autograd's check of a saved variable does.
    for (int i = 0; i < 3; ++i) {
      if (!ctx->saved_data.count(kAside[i]) || !operandsKept[i].defined()) continue;
      const int64_t expected = ctx->saved_data[std::string(kAside[i]) + "_version"].toInt();
      if (expected < 0) continue;
      LMFUSE_TORCH_CHECK(torch_detail::Check::Argument, static_cast<int64_t>(operandsKept[i]._version()) == expected,
                         "lmfuse::linear_cross_entropy: one of the variables needed for gradient computation has "
                         "been modified by an inplace operation: its ", kAside[i], " is at version ",
                         operandsKept[i]._version(), "; expected version ", expected, " instead");
    }
    Gradients wanted;
    wanted.hidden = ctx->needs_input_grad(0);
    wanted.weight = ctx->needs_input_grad(1);
    wanted.bias = gemmBias.defined() && ctx->needs_input_grad(2);  // index 3 is hasBias
    const torch::Tensor scale = options.reduction() == Reduction::None ? upstream.reshape({-1}) : upstream.reshape({1});
    const CallResult result = torch_detail::runFused(operands, wanted, scale);
    return inputGradients(result, operands, hidden, ctx->saved_data["fp32_params"].toBool());
  }
};

}  // namespace

namespace {

namespace F = torch::nn::functional;

// The NaN of the original's mean over no valid label, of the loss's dtype and on its device: LibTorch's
// cross_entropy itself, with the call's ignore_index and label_smoothing, over one ignored row (or over none,
// where the labels hold none), so its sign is the library's (on x86, 0 / 0 is -nan and a mean over no rows
// nan; bf16 rounds both to nan). Where LibTorch has no loss of that dtype on that device (fp16 on the CPU in
// 1.13, which the original cannot compute), nan.
torch::Tensor originalEmptyMean(const torch::Tensor& loss, int64_t targets, const LossOptions& options) {
  const at::NoGradGuard noGradient;
  const int64_t rows = targets > 0 ? 1 : 0;
  try {
    return F::cross_entropy(
        torch::zeros({rows, 2}, loss.options()), torch::full({rows}, options.ignore_index(), loss.options().dtype(torch::kLong)),
        F::CrossEntropyFuncOptions().ignore_index(options.ignore_index()).label_smoothing(options.label_smoothing()));
  } catch (const c10::Error&) {
    return torch::full({}, std::numeric_limits<double>::quiet_NaN(), loss.options());
  }
}

// A rewritten call stands for the original cross_entropy, whose mean over zero valid tokens is 0/0: its NaN
// where no target of `labels` (labels[..., 1:] under the shift) is other than ignore_index, on the device, no
// synchronisation. The gradients stay the runtime's zeros (where() passes none to the loss there).
torch::Tensor asOriginalEmptyMean(const torch::Tensor& loss, const torch::Tensor& labels, const LossOptions& options) {
  if (!options.logits_as_passed().input || options.reduction() != Reduction::Mean || options.n_items().defined() ||
      options.process_group() || !labels.defined() || loss.dim() != 0)
    return loss;
  torch::Tensor targets = labels;
  if (options.shift() && labels.dim() >= 1) targets = labels.narrow(-1, 1, std::max<int64_t>(labels.size(-1) - 1, 0));
  const torch::Tensor none = targets.ne(options.ignore_index()).sum() == 0;
  return torch::where(none.to(loss.device()), originalEmptyMean(loss, targets.numel(), options), loss);
}

}  // namespace

torch::Tensor linear_cross_entropy(const torch::Tensor& hidden_, const torch::Tensor& weight_,
                                   const torch::Tensor& bias_, const torch::Tensor& labels,
                                   const LossOptions& options_) {
  // What a rewritten call's original computes and the fused loss does not take (floating labels: cross_entropy's
  // soft-target loss; Byte class indices; fp64): it runs here as the original ran it, throwing what that throws.
  // The labels code the rewrite carries runs here once, on the real labels, as the original ran it.
  // Labels that hold no tensor (an optional holding an undefined one): a call that records the labels' code (a
  // rewritten one) runs the original's labels code and loss on them, which raise what LibTorch raises there (a
  // ValueError of the batch sizes for `*labels`, an undefined-tensor c10::Error for `labels->view(-1)`); any
  // other call names them.
  const bool labelsCode = static_cast<bool>(options_.logits_as_passed().labels);
  LMFUSE_TORCH_CHECK(torch_detail::Check::Argument, labels.defined() || labelsCode,
                     "lmfuse::linear_cross_entropy: labels is an undefined tensor",
                     options_.logits_as_passed().input
                         ? " (the labels of the loss replaced at " + options_.logits_as_passed().site + ")"
                         : std::string());
  const torch::Tensor target = torch_detail::labelsAsPassed(options_);
  if (!labels.defined() || torch_detail::needsOriginal(hidden_, weight_, bias_, target, options_))
    return torch_detail::originalLoss(hidden_, weight_, bias_, target, options_);
  // A rewritten call first checks that the original computed the loss this call computes. Where it computed
  // another (3-D logits read over dimension 1, classes regrouped by a view, a shift along another dimension),
  // the call computes that one as the original did, given the labels' code; without it, it cannot, and throws.
  const std::string notFused = torch_detail::whyNotFused(hidden_, weight_, labels, target, options_);
  if (!notFused.empty()) {
    LMFUSE_TORCH_CHECK(torch_detail::Check::Argument, target.defined(), "lmfuse::linear_cross_entropy: ", notFused,
                       "; the call records no labels argument to compute the original with. Mark the site "
                       "// NOLINT(lmfuse) to keep the original loss.");
    return torch_detail::originalLoss(hidden_, weight_, bias_, target, options_);
  }
  // Under autocast the operands and the loss dtype become what F::linear + F::cross_entropy would see
  // (autocast_rule.h); hidden's cast is recorded by autograd, and fp32 weight and bias get fp32
  // gradients from the runtime (cast.fp32Params) or, otherwise, through their recorded casts.
  const torch_detail::AutocastOperands cast =
      torch_detail::applyAutocast(hidden_, weight_, bias_, options_.dtype());
  const torch::Tensor &hidden = cast.hidden, &weight = cast.weight, &bias = cast.bias;
  LossOptions options = options_;
  options.dtype(cast.lossDtype);
  if (options.process_group())  // data parallel: the Mean's divisor counted over the group (distributed_mean.h)
    options = distributed_detail::withGlobalMean(hidden, weight, bias, labels, options);
  // A call the tool did not write (no original to compute with): traced, the graph would hold no loss.
  LMFUSE_TORCH_CHECK(torch_detail::Check::Unsupported, !torch_detail::tracerRecordsHere(),
                     "lmfuse::linear_cross_entropy: the JIT tracer is recording, and the fused loss computes through no "
                     "operator it records (the traced graph would hold no loss); trace this loss unfused "
                     "(LMFUSE_DISABLE=1)");
  torch_detail::countFusedCall();
  const torch::Tensor &gradWeight = cast.gradWeight, &gradBias = cast.gradBias;
  const bool needsGraph = torch::GradMode::is_enabled() && torch_detail::autogradRecords(hidden, gradWeight, gradBias) &&
                          ((hidden.defined() && hidden.requires_grad()) ||
                           (gradWeight.defined() && gradWeight.requires_grad()) ||
                           (gradBias.defined() && gradBias.requires_grad()));
  if (!needsGraph) {  // no graph: the loss alone, no gradient computed
    const Operands operands = torch_detail::prepareOperands(hidden, weight, bias, labels, options);
    return asOriginalEmptyMean(
        torch_detail::runFused(operands, Gradients{}).loss.to(options.dtype().value_or(hidden.scalar_type())), labels,
        options_);
  }
  // LibTorch 1.13's Function::apply cannot take an undefined tensor: an absent bias or n_items travels
  // as an empty placeholder and is told apart by a flag in saved_data.
  LMFUSE_TORCH_CHECK(torch_detail::Check::Argument, hidden.defined(),
                     "lmfuse::linear_cross_entropy: hidden is an undefined tensor");
  const torch::Tensor placeholder = torch::empty({0}, hidden.options());
  const torch::Tensor biasOrEmpty = bias.defined() ? bias : placeholder;
  return asOriginalEmptyMean(
      FusedLinearCrossEntropy::apply(hidden, gradWeight, bias.defined() ? gradBias : placeholder, bias.defined(),
                                     labels, target.defined() ? target : labels, options.n_items().defined() ? options.n_items() : placeholder, options,
                                     weight, biasOrEmpty, cast.fp32Params),
      labels, options_);
}

}  // namespace lmfuse
