// lmfuse::linear_cross_entropy: the autograd function over the runtime call (contract in
// <lmfuse/torch.h>). Mean/Sum: the forward call computes the loss and the gradients together; the
// backward pass scales them in place by the upstream gradient on the device. None (or a second
// backward pass through the same graph): the backward pass recomputes with the upstream gradient.
#include <lmfuse/torch.h>

#include <torch/autograd.h>

#include "autocast_rule.h"
#include "distributed_mean.h"
#include "fused_call.h"

namespace lmfuse {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using torch_detail::CallResult;
using torch_detail::Gradients;
using torch_detail::Operands;

torch::Tensor shapedLoss(const Operands& operands, const torch::Tensor& loss, torch::ScalarType dtype) {
  if (operands.options.reduction == Reduction::None) return loss.view(operands.leading_shape).to(dtype);
  return loss.reshape(std::vector<int64_t>{}).to(dtype);  // 0-d, like a reduced F::cross_entropy
}

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

variable_list inputGradients(const CallResult& result, const torch::Tensor& hidden) {
  variable_list grads(7);  // one per forward argument: hidden, weight, bias, hasBias, labels, n_items, options
  if (result.grad_hidden.defined()) grads[0] = result.grad_hidden.view(hidden.sizes());
  grads[1] = result.grad_weight;
  grads[2] = result.grad_bias;
  return grads;
}

class FusedLinearCrossEntropy : public torch::autograd::Function<FusedLinearCrossEntropy> {
public:
  // bias and n_items arrive as empty placeholders when absent (see linear_cross_entropy below).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& biasOrEmpty, bool hasBias, const torch::Tensor& labels,
                               const torch::Tensor& n_itemsOrEmpty, const LossOptions& options) {
    const torch::Tensor bias = hasBias ? biasOrEmpty : torch::Tensor();
    const Operands operands = torch_detail::prepareOperands(hidden, weight, bias, labels, options);
    ctx->save_for_backward({hidden, weight, biasOrEmpty, labels, n_itemsOrEmpty});
    ctx->saved_data["has_bias"] = bias.defined();
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
    return shapedLoss(operands, result.loss, options.dtype().value_or(hidden.scalar_type()));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &hidden = saved[0], &weight = saved[1], &labels = saved[3];
    const torch::Tensor bias = ctx->saved_data["has_bias"].toBool() ? saved[2] : torch::Tensor();
    const LossOptions options =
        loadOptions(ctx, ctx->saved_data["has_n_items"].toBool() ? saved[4] : torch::Tensor());
    const Operands operands = torch_detail::prepareOperands(hidden, weight, bias, labels, options);
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
      return inputGradients(result, hidden);
    }
    Gradients wanted;
    wanted.hidden = ctx->needs_input_grad(0);
    wanted.weight = ctx->needs_input_grad(1);
    wanted.bias = bias.defined() && ctx->needs_input_grad(2);  // index 3 is hasBias
    const torch::Tensor scale = options.reduction() == Reduction::None ? upstream.reshape({-1}) : upstream.reshape({1});
    const CallResult result = torch_detail::runFused(operands, wanted, scale);
    return inputGradients(result, hidden);
  }
};

}  // namespace

torch::Tensor linear_cross_entropy(const torch::Tensor& hidden_, const torch::Tensor& weight_,
                                   const torch::Tensor& bias_, const torch::Tensor& labels,
                                   const LossOptions& options_) {
  // Under autocast the operands and the loss dtype become what F::linear + F::cross_entropy would see
  // (autocast_rule.h); the casts are recorded by autograd, so an fp32 weight gets an fp32 gradient.
  const torch_detail::AutocastOperands cast =
      torch_detail::applyAutocast(hidden_, weight_, bias_, options_.dtype());
  const torch::Tensor &hidden = cast.hidden, &weight = cast.weight, &bias = cast.bias;
  LossOptions options = options_;
  options.dtype(cast.lossDtype);
  if (options.process_group())  // data parallel: the Mean's divisor counted over the group (distributed_mean.h)
    options = distributed_detail::withGlobalMean(hidden, weight, bias, labels, options);
  torch_detail::countFusedCall();
  const bool needsGraph = torch::GradMode::is_enabled() &&
                          ((hidden.defined() && hidden.requires_grad()) ||
                           (weight.defined() && weight.requires_grad()) ||
                           (bias.defined() && bias.requires_grad()));
  if (!needsGraph) {  // no graph: the loss alone, no gradient computed
    const Operands operands = torch_detail::prepareOperands(hidden, weight, bias, labels, options);
    return shapedLoss(operands, torch_detail::runFused(operands, Gradients{}).loss,
                      options.dtype().value_or(hidden.scalar_type()));
  }
  // LibTorch 1.13's Function::apply cannot take an undefined tensor: an absent bias or n_items travels
  // as an empty placeholder and is told apart by a flag in saved_data.
  TORCH_CHECK(hidden.defined(), "lmfuse::linear_cross_entropy: hidden is an undefined tensor");
  const torch::Tensor placeholder = torch::empty({0}, hidden.options());
  return FusedLinearCrossEntropy::apply(hidden, weight, bias.defined() ? bias : placeholder, bias.defined(), labels,
                                        options.n_items().defined() ? options.n_items() : placeholder, options);
}

}  // namespace lmfuse
