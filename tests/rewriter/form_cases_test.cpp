// Heads and losses written other than as a Linear and a cross_entropy call: a product with the
// transpose of a weight parameter (tied or untied), the torch::nn::CrossEntropyLoss and NLLLoss
// modules, and nll_loss over log_softmax. The same verbs as rewrite_cases_test.cpp; the neighbours
// of each accepted form that would change what the model computes are refused.
#include <catch2/catch.hpp>

#include "rewrite_harness.h"

using namespace lmfuse::rewriter;
using namespace lmfuse::rewriter::testing;

namespace {

const Case Accepted[] = {
    // ---- product heads ---------------------------------------------------------------------
    {"GPT-2: tied embedding as torch::matmul(x, wte->weight.t())", R"(
  Output forward(const torch::Tensor &idx, const torch::Tensor &targets) {
    auto x = ln_f(wte(idx));
    auto logits = torch::matmul(x, wte->weight.t());
    torch::Tensor loss;
    if (targets.defined())
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets.view(-1));
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(const torch::Tensor &idx, const torch::Tensor &targets) {
    auto x = ln_f(wte(idx));
    auto logits = lmfuse::skip_logits() && targets.defined() ? lmfuse::skipped_logits(x, wte->weight, "model.cpp:N") : torch::matmul(x, wte->weight.t());
    torch::Tensor loss;
    if (targets.defined())
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(x, wte->weight, torch::Tensor(), targets, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, logits.size(-1)}); }, {}, targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(wte->weight), ::at::Tensor, decltype(x), ::at::Tensor, decltype(targets), ::at::Tensor>()))
          : F::cross_entropy(logits.view({-1, logits.size(-1)}), targets.view(-1));
    return {logits, loss};
  }
)"},
    {"Llama: untied head parameter as x.matmul(W.transpose(0, 1)), shifted labels", R"(
  torch::Tensor lm_head_weight;
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &labels) {
    auto logits = h.matmul(lm_head_weight.transpose(0, 1));
    auto shift_logits = logits.slice(1, 0, -1).contiguous();
    auto shift_labels = labels.slice(1, 1).contiguous();
    return F::cross_entropy(shift_logits.view({-1, shift_logits.size(-1)}), shift_labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor lm_head_weight;
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head_weight, "model.cpp:N") : h.matmul(lm_head_weight.transpose(0, 1));
    auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(1, 0, -1).contiguous(); }) : logits.slice(1, 0, -1).contiguous();
    auto shift_labels = labels.slice(1, 1).contiguous();
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head_weight, torch::Tensor(), labels, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, shift_logits.size(-1)}); }, lmfuse::ShiftDims{1, 1}, shift_labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head_weight), ::at::Tensor, decltype(h), ::at::Tensor, decltype(shift_labels), ::at::Tensor>()))
        : F::cross_entropy(shift_logits.view({-1, shift_logits.size(-1)}), shift_labels.view(-1));
  }
)"},
    {"torch::mm over flattened hidden states, tied weight transposed as (-1, -2)", R"(
  torch::Tensor step(const torch::Tensor &hidden, const torch::Tensor &y) {
    auto logits = torch::mm(hidden.view({-1, 64}), wte->weight.transpose(-1, -2));
    return F::cross_entropy(logits, y.view(-1), F::CrossEntropyFuncOptions().ignore_index(pad_id_));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor step(const torch::Tensor &hidden, const torch::Tensor &y) {
    auto lmfuse_hidden = hidden.view({-1, 64});
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(lmfuse_hidden, wte->weight, "model.cpp:N", 2) : torch::mm(lmfuse_hidden, wte->weight.transpose(-1, -2));
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(lmfuse_hidden, wte->weight, torch::Tensor(), y, lmfuse::LossOptions().ignore_index(pad_id_)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits; }, {}, y, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(wte->weight), ::at::Tensor, decltype(lmfuse_hidden), ::at::Tensor, decltype(y), ::at::Tensor>()))
        : F::cross_entropy(logits, y.view(-1), F::CrossEntropyFuncOptions().ignore_index(pad_id_));
  }
)"},
    {"x.mm(W.t()) inline in the loss", R"(
  torch::Tensor lm_head_weight;
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    return F::cross_entropy(h.mm(lm_head_weight.t()), y);
  }
)", Verb::RewritesTo, R"(
  torch::Tensor lm_head_weight;
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head_weight, torch::Tensor(), y, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", {}, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits; }, {}, y, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels; }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head_weight), ::at::Tensor, decltype(h), ::at::Tensor, decltype(y), ::at::Tensor>()))
        : F::cross_entropy(h.mm(lm_head_weight.t()), y);
  }
)"},
    // ---- torch::nn::CrossEntropyLoss -------------------------------------------------------
    {"CrossEntropyLoss member with options, called as criterion(logits, y)", R"(
  torch::nn::CrossEntropyLoss criterion{torch::nn::CrossEntropyLossOptions().ignore_index(-1)};
  Output forward(const torch::Tensor &x, const torch::Tensor &targets) {
    auto logits = lm_head(ln_f(x));
    torch::Tensor loss;
    if (targets.defined())
      loss = criterion(logits.view({-1, logits.size(-1)}), targets.view(-1));
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  torch::nn::CrossEntropyLoss criterion{torch::nn::CrossEntropyLossOptions().ignore_index(-1)};
  Output forward(const torch::Tensor &x, const torch::Tensor &targets) {
    auto lmfuse_hidden = ln_f(x);
    auto logits = lmfuse::skip_logits() && targets.defined() ? lmfuse::skipped_logits(lmfuse_hidden, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(lmfuse_hidden);
    torch::Tensor loss;
    if (targets.defined())
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(lmfuse_hidden, lm_head->weight, lm_head->bias, targets, lmfuse::module_loss_options(criterion->options, criterion->weight)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, logits.size(-1)}); }, {}, targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden), ::at::Tensor, decltype(targets), ::at::Tensor>()))
          : criterion(logits.view({-1, logits.size(-1)}), targets.view(-1));
    return {logits, loss};
  }
)"},
    {"char-RNN training step: a default CrossEntropyLoss local called through ->forward", R"(
  torch::Tensor train_step(const torch::Tensor &x, const torch::Tensor &y) {
    torch::nn::CrossEntropyLoss criterion;
    auto out = mlp(x);
    auto logits = lm_head->forward(out);
    auto loss = criterion->forward(logits.view({-1, logits.size(-1)}), y.view(-1));
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor train_step(const torch::Tensor &x, const torch::Tensor &y) {
    torch::nn::CrossEntropyLoss criterion;
    auto out = mlp(x);
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(out, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head->forward(out);
    auto loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(out, lm_head->weight, lm_head->bias, y, lmfuse::module_loss_options(criterion->options, criterion->weight)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, logits.size(-1)}); }, {}, y, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(out), ::at::Tensor, decltype(y), ::at::Tensor>()))
        : criterion->forward(logits.view({-1, logits.size(-1)}), y.view(-1));
    return loss;
  }
)"},
    {"CrossEntropyLoss registered in the constructor, label smoothing and a sum", R"(
  Model() {
    loss_fn = register_module("loss_fn", torch::nn::CrossEntropyLoss(
        torch::nn::CrossEntropyLossOptions().label_smoothing(0.1).reduction(torch::kSum)));
  }
  torch::nn::CrossEntropyLoss loss_fn{nullptr};
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return loss_fn(logits, y);
  }
)", Verb::RewritesTo, R"(
  Model() {
    loss_fn = register_module("loss_fn", torch::nn::CrossEntropyLoss(
        torch::nn::CrossEntropyLossOptions().label_smoothing(0.1).reduction(torch::kSum)));
  }
  torch::nn::CrossEntropyLoss loss_fn{nullptr};
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, y, lmfuse::module_loss_options(loss_fn->options, loss_fn->weight)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits; }, {}, y, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels; }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(y), ::at::Tensor>()))
        : loss_fn(logits, y);
  }
)"},
    // ---- nll_loss over log_softmax --------------------------------------------------------
    {"F::nll_loss(F::log_softmax(logits, -1), y) with ignore_index", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return F::nll_loss(F::log_softmax(logits.view({-1, logits.size(-1)}), -1), y.view(-1),
                       F::NLLLossFuncOptions().ignore_index(0));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, y, lmfuse::LossOptions().ignore_index(0)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return F::log_softmax(lmfuse_logits.view({-1, logits.size(-1)}), -1); }, {}, y, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(y), ::at::Tensor>()))
        : F::nll_loss(F::log_softmax(logits.view({-1, logits.size(-1)}), -1), y.view(-1),
                       F::NLLLossFuncOptions().ignore_index(0));
  }
)"},
    {"torch::nll_loss(torch::log_softmax(logits, -1, kFloat), y, {}, Sum): the fp32 loss", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = F::linear(h, wte->weight);
    return torch::nll_loss(torch::log_softmax(logits, -1, torch::kFloat), y, {}, at::Reduction::Sum);
  }
)", Verb::RewritesTo, R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, wte->weight, "model.cpp:N") : F::linear(h, wte->weight);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, wte->weight, torch::Tensor(), y, lmfuse::LossOptions().reduction(lmfuse::Reduction::Sum).dtype(torch::kFloat)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return torch::log_softmax(lmfuse_logits, -1, torch::kFloat); }, {}, y, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels; }})
            .analysed(lmfuse::AnalysedTypes<decltype(wte->weight), ::at::Tensor, decltype(h), ::at::Tensor, decltype(y), ::at::Tensor>()))
        : torch::nll_loss(torch::log_softmax(logits, -1, torch::kFloat), y, {}, at::Reduction::Sum);
  }
)"},
    {"log-probabilities kept in a local (logits.log_softmax(-1)), then nll_loss", R"(
  Output forward(const torch::Tensor &x, c10::optional<torch::Tensor> targets) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (targets) {
      auto logp = logits.log_softmax(-1);
      loss = F::nll_loss(logp.view({-1, logp.size(-1)}), targets->view(-1));
    }
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(const torch::Tensor &x, c10::optional<torch::Tensor> targets) {
    auto logits = lmfuse::skip_logits() && static_cast<bool>(targets) ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    torch::Tensor loss;
    if (targets) {
      auto logp = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.log_softmax(-1); }) : logits.log_softmax(-1);
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, *targets, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logp, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, logp.size(-1)}); }, {}, *targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(targets), ::c10::optional< ::at::Tensor>>()))
          : F::nll_loss(logp.view({-1, logp.size(-1)}), targets->view(-1));
    }
    return {logits, loss};
  }
)"},
    {"the NLLLoss module over log_softmax", R"(
  torch::nn::NLLLoss nll{torch::nn::NLLLossOptions().ignore_index(-1)};
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return nll(F::log_softmax(logits, F::LogSoftmaxFuncOptions(-1)), y);
  }
)", Verb::RewritesTo, R"(
  torch::nn::NLLLoss nll{torch::nn::NLLLossOptions().ignore_index(-1)};
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, y, lmfuse::module_loss_options(nll->options, nll->weight)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return F::log_softmax(lmfuse_logits, F::LogSoftmaxFuncOptions(-1)); }, {}, y, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels; }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(y), ::at::Tensor>()))
        : nll(F::log_softmax(logits, F::LogSoftmaxFuncOptions(-1)), y);
  }
)"},
};

const Refused Neighbours[] = {
    // ---- options the rewrite cannot read where the loss runs: the detail says which and why ---------
    {{"options made from a second options local", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto base = F::CrossEntropyFuncOptions();
    auto opts = base.ignore_index(3);
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), y.view(-1), opts);
  }
)", Verb::RefusesWith, "loss-unsupported"},
     "made from a second options local, `base`"},
    {{"options passed in as a parameter", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y, const F::CrossEntropyFuncOptions &opts) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), y.view(-1), opts);
  }
)", Verb::RefusesWith, "loss-unsupported"},
     "not a local made in this function"},
    {{"options assigned again after they are made", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto opts = F::CrossEntropyFuncOptions();
    opts = F::CrossEntropyFuncOptions().ignore_index(1);
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), y.view(-1), opts);
  }
)", Verb::RefusesWith, "loss-unsupported"},
     "are changed on line"},
    // ---- product heads ---------------------------------------------------------------------
    {{"a product with an activation (attention scores as logits) is not a head", R"(
  torch::Tensor contrastive(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &y) {
    auto scores = torch::matmul(q, k.transpose(-2, -1));
    return F::cross_entropy(scores, y);
  }
)", Verb::RefusesWith, "head-not-linear"},
     "`k` is not a parameter of a module"},
    {{"a product with the weight itself, not its transpose, is not a [V, D] head", R"(
  torch::Tensor proj;  // [D, V]
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = torch::matmul(h, proj);
    return F::cross_entropy(logits.view({-1, logits.size(-1)}), y.view(-1));
  }
)", Verb::RefusesWith, "head-not-linear"},
     "not spelled as the transpose"},
    {{"a transpose of other dimensions is not the weight's transpose", R"(
  torch::Tensor experts;  // [E, V, D]
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = torch::matmul(h, experts.transpose(1, 2));
    return F::cross_entropy(logits, y);
  }
)", Verb::RefusesWith, "head-not-linear"},
     "`experts.transpose(1, 2)`, which is not spelled"},
    // ---- reshapes of the logits: only to [N, V], where cross_entropy's classes are the fused call's -----
    {{"a view that puts the classes in dimension 1 of three is refused", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({h.size(0), logits.size(-1), -1}), y.view({h.size(0), -1}));
  }
)", Verb::RefusesWith, "logits-rebound"},
     "(`logits.view({h.size(0), logits.size(-1), -1})`)"},
    {{"a reshape that infers the class dimension is refused", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.reshape({h.size(0), -1}), y.view(-1));
  }
)", Verb::RefusesWith, "logits-rebound"},
     "(`logits.reshape({h.size(0), -1})`)"},
    {{"a flatten that is not of the leading dimensions is refused", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.flatten(1), y.view(-1));
  }
)", Verb::RefusesWith, "logits-rebound"},
     "(`logits.flatten(1)`)"},
    {{"a product overload with one more parameter is not the product", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = torch::matmul(h, wte->weight.t(), 0.5);
    return F::cross_entropy(logits.view({-1, logits.size(-1)}), y.view(-1));
  }
)", Verb::RefusesWith, "head-not-linear"},
     "a product with a weight's transpose (`torch::matmul(h, wte->weight.t(), 0.5)`)"},
    {{"a local copy of the weight is not provably a parameter", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    torch::Tensor w = wte->weight * 0.5;
    auto logits = torch::matmul(h, w.t());
    return F::cross_entropy(logits, y);
  }
)", Verb::RefusesWith, "head-not-linear"},
     "`w` is not a parameter"},
    // ---- torch::nn::CrossEntropyLoss -------------------------------------------------------
    {{"CrossEntropyLoss with class weights is refused", R"(
  torch::nn::CrossEntropyLoss criterion{torch::nn::CrossEntropyLossOptions().weight(class_weights)};
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return criterion(logits, y);
  }
)", Verb::RefusesWith, "loss-unsupported"},
     "the option `weight` is not supported"},
    {{"CrossEntropyLoss with reduction none is refused", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    torch::nn::CrossEntropyLoss criterion(torch::nn::CrossEntropyLossOptions().reduction(torch::kNone));
    auto logits = lm_head(h);
    return criterion(logits, y);
  }
)", Verb::RefusesWith, "loss-unsupported"},
     "reduction none"},
    {{"a CrossEntropyLoss passed in: its options cannot be determined here", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y, torch::nn::CrossEntropyLoss &criterion) {
    auto logits = lm_head(h);
    return criterion(logits, y);
  }
)", Verb::RefusesWith, "loss-unsupported"},
     "cannot be determined: it is a parameter"},
    {{"a CrossEntropyLoss constructed differently by two constructors", R"(
  Model() : criterion(torch::nn::CrossEntropyLossOptions().ignore_index(0)) {}
  explicit Model(int64_t pad) : criterion(torch::nn::CrossEntropyLossOptions().ignore_index(-1)) {}
  torch::nn::CrossEntropyLoss criterion;
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return criterion(logits, y);
  }
)", Verb::RefusesWith, "loss-unsupported"},
     "different options (lines 19 and 20)"},
    {{"a CrossEntropyLoss member whose constructor is defined in another file", R"(
  explicit Model(int64_t vocab);
  torch::nn::CrossEntropyLoss criterion{nullptr};
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return criterion->forward(logits, y);
  }
)", Verb::RefusesWith, "loss-unsupported"},
     "a constructor of Model is not defined in this file"},
    {{"a training loop whose logits come from the model's forward is recorded, not patched", R"(
  torch::Tensor epoch(const torch::Tensor &x, const torch::Tensor &y) {
    torch::nn::CrossEntropyLoss criterion;
    auto logits = custom_head(x);
    return criterion(logits.view({-1, logits.size(-1)}), y.view(-1));
  }
)", Verb::RefusesWith, "head-not-linear"},
     "`custom_head(x)`"},
    // ---- nll_loss over log_softmax --------------------------------------------------------
    {{"nll_loss over the logits themselves is not a cross-entropy", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return F::nll_loss(logits, y);
  }
)", Verb::RefusesWith, "loss-unsupported"},
     "without log_softmax over the class dimension"},
    {{"nll_loss over log_softmax of dimension 1 (the class dimension only for 2-D logits)", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return F::nll_loss(F::log_softmax(logits, 1).view({-1, 32}), y.view(-1));
  }
)", Verb::RefusesWith, "loss-unsupported"},
     "runs over dimension `1`, which is not provably the class dimension"},
    {{"nll_loss over log_softmax computed in half precision", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return torch::nll_loss(torch::log_softmax(logits, -1, torch::kHalf), y);
  }
)", Verb::RefusesWith, "loss-unsupported"},
     "computes in `torch::kHalf`, which is not an upcast"},
    {{"nll_loss over a softmax then log is not log_softmax", R"(
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return F::nll_loss(torch::log_softmax(torch::log_softmax(logits, -1), -1), y);
  }
)", Verb::RefusesWith, "head-not-linear"},
     "`log_softmax` is applied to the head's output"},
};

}  // namespace

llvm::ArrayRef<Case> lmfuse::rewriter::testing::formCases() { return Accepted; }

TEST_CASE("heads and losses in other spellings", "[rewriter][forms]") {
  for (const Case &Item : Accepted)
    DYNAMIC_SECTION(Item.Name) { checkCase(Item); }
}

// Each refusal's detail names the cause, not only the reason.
TEST_CASE("refusals of the other spellings name their cause", "[rewriter][forms]") {
  for (const Refused &Item : Neighbours)
    DYNAMIC_SECTION(Item.Item.Name) { checkRefused(Item); }
}

// A module loss's audit gives the options it was constructed with; the rewritten call reads them from
// the module when the loss runs.
TEST_CASE("a loss module's options reach the audit", "[rewriter][forms]") {
  RewriteResult Result = rewriteWithStubs(source(R"(
  Model() : criterion(torch::nn::CrossEntropyLossOptions().ignore_index(pad_id_).label_smoothing(0.05)) {}
  torch::nn::CrossEntropyLoss criterion;
  torch::Tensor loss(const torch::Tensor &h, const torch::Tensor &y) {
    auto logits = lm_head(h);
    return criterion(logits, y);
  }
)", false));
  INFO(describeSites(Result));
  REQUIRE(Result.Sites.size() == 1);
  REQUIRE(Result.Sites[0].Status == SiteStatus::Patched);
  const PatchedOptions &Options = *Result.Sites[0].Options;
  CHECK(Options.IgnoreIndexExpression == "pad_id_");
  CHECK(Options.LabelSmoothing == Approx(0.05));
  CHECK(Options.Reduction == "mean");
  CHECK(Result.Sites[0].Loss == "torch::nn::CrossEntropyLossImpl");
  CHECK(Result.Code.find("lmfuse::module_loss_options(criterion->options, criterion->weight)") != std::string::npos);
}
