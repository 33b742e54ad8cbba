// The causal shift as a table: every spelling of "the logits without their last position along the
// sequence dimension, the labels without their first" is mapped to the runtime's shift option, and
// every neighbour that slices something else (another dim, other bounds, a length read from another
// tensor, a length that may have changed) is refused `logits-indexed` with a detail naming what is
// not the shift. Taken from nanoGPT-, Llama- and GPT-2-style forwards.
#include <catch2/catch.hpp>

#include "rewrite_harness.h"

using namespace lmfuse::rewriter;
using namespace lmfuse::rewriter::testing;

namespace {

const Case Accepted[] = {
    // ---- slice(1, 0, T - 1) with T a local read from the logits ---------------------------------------
    {"nanoGPT: B, T, C read from the logits, slice(1, 0, T - 1)", R"(
  torch::Tensor forward(torch::Tensor idx, torch::Tensor targets) {
    auto h = ln_f(wte(idx));
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (targets.defined()) {
      const auto B = logits.size(0), T = logits.size(1), C = logits.size(2);
      auto shift_logits = logits.slice(1, 0, T - 1);
      auto shift_targets = targets.slice(1, 1);
      loss = F::cross_entropy(shift_logits.reshape({-1, C}), shift_targets.reshape({-1}));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor idx, torch::Tensor targets) {
    auto h = ln_f(wte(idx));
    auto logits = lmfuse::skip_logits() && targets.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (targets.defined()) {
      const auto B = logits.size(0), T = logits.size(1), C = logits.size(2);
      auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(1, 0, T - 1); }) : logits.slice(1, 0, T - 1);
      auto shift_targets = targets.slice(1, 1);
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, targets, lmfuse::LossOptions().shift(true)
              .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, C}); }, lmfuse::ShiftDims{1, 1}, shift_targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.reshape({-1}); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(shift_targets), ::at::Tensor>()))
          : F::cross_entropy(shift_logits.reshape({-1, C}), shift_targets.reshape({-1}));
    }
    return loss;
  }
)"},
    {"the shift's dim read through a constant of the program's: the copy asserts its value", R"(
  static constexpr int kTime = 1;
  torch::Tensor forward(torch::Tensor idx, torch::Tensor targets) {
    auto h = ln_f(wte(idx));
    auto logits = lm_head(h);
    auto shift_logits = logits.slice(kTime, 0, -1);
    auto shift_targets = targets.slice(kTime, 1);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
  }
)", Verb::RewritesTo, R"(
  static constexpr int kTime = 1;
  torch::Tensor forward(torch::Tensor idx, torch::Tensor targets) {
    auto h = ln_f(wte(idx));
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(kTime, 0, -1); }) : logits.slice(kTime, 0, -1);
    auto shift_targets = targets.slice(kTime, 1);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, targets, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, lmfuse::ShiftDims{1, 1}, shift_targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.reshape({-1}); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(shift_targets), ::at::Tensor, lmfuse::Holds<((kTime) == 1)>, lmfuse::Holds<true>>()))
        : F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
  }
)"},
    {"the shift's dim read through a member of a library class the program's arguments choose: asserted", R"(
  torch::Tensor forward(torch::Tensor idx, torch::Tensor targets) {
    auto h = ln_f(wte(idx));
    auto logits = lm_head(h);
    auto shift_logits = logits.slice(std::integral_constant<int, 1>::value, 0, -1);
    auto shift_targets = targets.slice(1, 1);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor idx, torch::Tensor targets) {
    auto h = ln_f(wte(idx));
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(std::integral_constant<int, 1>::value, 0, -1); }) : logits.slice(std::integral_constant<int, 1>::value, 0, -1);
    auto shift_targets = targets.slice(1, 1);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, targets, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, lmfuse::ShiftDims{1, 1}, shift_targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.reshape({-1}); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(shift_targets), ::at::Tensor, lmfuse::Holds<((std::integral_constant<int, 1>::value) == 1)>, lmfuse::Holds<true>>()))
        : F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
  }
)"},
    {"the shift's dim read as a constant's member: a local of the loss's block named like the member hides nothing", R"(
  struct Cfg { int dim; };
  static constexpr Cfg kCfg{1};
  torch::Tensor forward(torch::Tensor idx, torch::Tensor targets) {
    auto h = ln_f(wte(idx));
    auto logits = lm_head(h);
    auto shift_logits = logits.slice(kCfg.dim, 0, -1);
    auto shift_targets = targets.slice(1, 1);
    {
      int dim = 0;
      (void)dim;
      return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
    }
  }
)", Verb::RewritesTo, R"(
  struct Cfg { int dim; };
  static constexpr Cfg kCfg{1};
  torch::Tensor forward(torch::Tensor idx, torch::Tensor targets) {
    auto h = ln_f(wte(idx));
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(kCfg.dim, 0, -1); }) : logits.slice(kCfg.dim, 0, -1);
    auto shift_targets = targets.slice(1, 1);
    {
      int dim = 0;
      (void)dim;
      return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, targets, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, lmfuse::ShiftDims{1, 1}, shift_targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.reshape({-1}); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(shift_targets), ::at::Tensor, lmfuse::Holds<((kCfg.dim) == 1)>, lmfuse::Holds<true>>()))
        : F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
    }
  }
)"},
    {"the shift's dim through a macro of a constant: the copy asserts the invocation's value", R"(
  static constexpr bool kTimeMajor = false;
#define TIME_DIM (kTimeMajor ? 0 : 1)
  torch::Tensor forward(torch::Tensor idx, torch::Tensor targets) {
    auto h = ln_f(wte(idx));
    auto logits = lm_head(h);
    auto shift_logits = logits.slice(TIME_DIM, 0, -1);
    auto shift_targets = targets.slice(TIME_DIM, 1);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
  }
)", Verb::RewritesTo, R"(
  static constexpr bool kTimeMajor = false;
#define TIME_DIM (kTimeMajor ? 0 : 1)
  torch::Tensor forward(torch::Tensor idx, torch::Tensor targets) {
    auto h = ln_f(wte(idx));
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(TIME_DIM, 0, -1); }) : logits.slice(TIME_DIM, 0, -1);
    auto shift_targets = targets.slice(TIME_DIM, 1);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, targets, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, lmfuse::ShiftDims{1, 1}, shift_targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.reshape({-1}); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(shift_targets), ::at::Tensor, lmfuse::Holds<((TIME_DIM) == 1)>, lmfuse::Holds<true>>()))
        : F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
  }
)"},
    {"Llama: seq_len local before the guard, the slice inline in the loss", R"(
  Output forward(torch::Tensor hidden, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(hidden);
    const int64_t seq_len = logits.size(1);
    torch::Tensor loss;
    if (labels.has_value()) {
      loss = F::cross_entropy(logits.slice(1, 0, seq_len - 1).contiguous().view({-1, 32}),
                              labels->slice(1, 1).contiguous().view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(-100));
    }
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor hidden, c10::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && labels.has_value() ? lmfuse::skipped_logits(hidden, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(hidden);
    const int64_t seq_len = logits.size(1);
    torch::Tensor loss;
    if (labels.has_value()) {
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(hidden, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions().ignore_index(-100).shift(true)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(1, 0, seq_len - 1).contiguous().view({-1, 32}); }, lmfuse::ShiftDims{1, 1}, *labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.slice(1, 1).contiguous().view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(hidden), ::at::Tensor, decltype(labels), ::c10::optional< ::at::Tensor>>()))
          : F::cross_entropy(logits.slice(1, 0, seq_len - 1).contiguous().view({-1, 32}),
                              labels->slice(1, 1).contiguous().view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(-100));
    }
    return {logits, loss};
  }
)"},

    // ---- slice with the size read inline ---------------------------------------------------------------
    {"GPT-2: slice(1, 0, logits.size(1) - 1)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(ln_f(x));
    auto shift_logits = logits.slice(1, 0, logits.size(1) - 1).contiguous();
    auto shift_labels = labels.slice(1, 1).contiguous();
    return F::cross_entropy(shift_logits.view({-1, shift_logits.size(-1)}), shift_labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto lmfuse_hidden = ln_f(x);
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(lmfuse_hidden, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(lmfuse_hidden);
    auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(1, 0, logits.size(1) - 1).contiguous(); }) : logits.slice(1, 0, logits.size(1) - 1).contiguous();
    auto shift_labels = labels.slice(1, 1).contiguous();
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(lmfuse_hidden, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, shift_logits.size(-1)}); }, lmfuse::ShiftDims{1, 1}, shift_labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden), ::at::Tensor, decltype(shift_labels), ::at::Tensor>()))
        : F::cross_entropy(shift_logits.view({-1, shift_logits.size(-1)}), shift_labels.view(-1));
  }
)"},
    {"tied GPT-2 head: slice(1, 0, logits.sizes()[1] - 1)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, wte->weight);
    torch::Tensor loss;
    if (labels.defined())
      loss = F::cross_entropy(logits.slice(1, 0, logits.sizes()[1] - 1).reshape({-1, 32}),
                              labels.slice(1, 1).reshape({-1}));
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, wte->weight, "model.cpp:N") : F::linear(h, wte->weight);
    torch::Tensor loss;
    if (labels.defined())
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, wte->weight, torch::Tensor(), labels, lmfuse::LossOptions().shift(true)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(1, 0, logits.sizes()[1] - 1).reshape({-1, 32}); }, lmfuse::ShiftDims{1, 1}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.slice(1, 1).reshape({-1}); }})
              .analysed(lmfuse::AnalysedTypes<decltype(wte->weight), ::at::Tensor, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(logits.slice(1, 0, logits.sizes()[1] - 1).reshape({-1, 32}),
                              labels.slice(1, 1).reshape({-1}));
    return loss;
  }
)"},

    // ---- slice on dim -2 ------------------------------------------------------------------------------
    {"slice(-2, 0, -1) with labels slice(-1, 1)", R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> targets) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (targets) {
      auto shift_logits = logits.slice(-2, 0, -1);
      auto shift_targets = targets->slice(-1, 1);
      loss = F::cross_entropy(shift_logits.flatten(0, 1), shift_targets.flatten());
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> targets) {
    auto logits = lmfuse::skip_logits() && static_cast<bool>(targets) ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (targets) {
      auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(-2, 0, -1); }) : logits.slice(-2, 0, -1);
      auto shift_targets = targets->slice(-1, 1);
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, *targets, lmfuse::LossOptions().shift(true)
              .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.flatten(0, 1); }, lmfuse::ShiftDims{-2, -1}, shift_targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.flatten(); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(shift_targets), ::at::Tensor>()))
          : F::cross_entropy(shift_logits.flatten(0, 1), shift_targets.flatten());
    }
    return loss;
  }
)"},
    {"slice(-2, 0, -1, 1) with an explicit step, labels slice(1, 1)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.slice(/*dim=*/-2, /*start=*/0, /*end=*/-1, /*step=*/1).reshape({-1, 32}),
                            labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(/*dim=*/-2, /*start=*/0, /*end=*/-1, /*step=*/1).reshape({-1, 32}); }, lmfuse::ShiftDims{-2, 1}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.slice(1, 1).reshape({-1}); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.slice(/*dim=*/-2, /*start=*/0, /*end=*/-1, /*step=*/1).reshape({-1, 32}),
                            labels.slice(1, 1).reshape({-1}));
  }
)"},

    // ---- narrow ---------------------------------------------------------------------------------------
    {"narrow(1, 0, T - 1) with labels narrow(1, 1, L - 1)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    const auto T = logits.size(1);
    const auto L = labels.size(1);
    auto shift_logits = logits.narrow(1, 0, T - 1);
    auto shift_labels = labels.narrow(1, 1, L - 1);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels.reshape({-1}));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    const auto T = logits.size(1);
    const auto L = labels.size(1);
    auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.narrow(1, 0, T - 1); }) : logits.narrow(1, 0, T - 1);
    auto shift_labels = labels.narrow(1, 1, L - 1);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, lmfuse::ShiftDims{1, 1}, shift_labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.reshape({-1}); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(shift_labels), ::at::Tensor>()))
        : F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels.reshape({-1}));
  }
)"},
    {"narrow(-2, 0, logits.size(-2) - 1) under a has_value() guard", R"(
  torch::Tensor forward(torch::Tensor x, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (labels.has_value())
      loss = F::cross_entropy(logits.narrow(-2, 0, logits.size(-2) - 1).reshape({-1, 32}),
                              labels->slice(1, 1).reshape({-1}));
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, c10::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && labels.has_value() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    torch::Tensor loss;
    if (labels.has_value())
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions().shift(true)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.narrow(-2, 0, logits.size(-2) - 1).reshape({-1, 32}); }, lmfuse::ShiftDims{-2, 1}, *labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.slice(1, 1).reshape({-1}); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::c10::optional< ::at::Tensor>>()))
          : F::cross_entropy(logits.narrow(-2, 0, logits.size(-2) - 1).reshape({-1, 32}),
                              labels->slice(1, 1).reshape({-1}));
    return loss;
  }
)"},

    // ---- index with Slice and None --------------------------------------------------------------------
    {"index({Slice(), Slice(None, -1)}) under using namespace, labels index({Slice(), Slice(1, None)})", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    using namespace torch::indexing;
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      auto shift_logits = logits.index({Slice(), Slice(None, -1)});
      auto shift_labels = labels.index({Slice(), Slice(1, None)});
      loss = F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels.reshape({-1}));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    using namespace torch::indexing;
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.index({Slice(), Slice(None, -1)}); }) : logits.index({Slice(), Slice(None, -1)});
      auto shift_labels = labels.index({Slice(), Slice(1, None)});
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().shift(true)
              .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, lmfuse::ShiftDims{1, 1}, shift_labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.reshape({-1}); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(shift_labels), ::at::Tensor>()))
          : F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels.reshape({-1}));
    }
    return loss;
  }
)"},
    {"index({Slice(), Slice(0, -1), Slice()}) through a namespace alias", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    namespace ix = torch::indexing;
    auto logits = lm_head(h);
    return F::cross_entropy(logits.index({ix::Slice(), ix::Slice(0, -1), ix::Slice()}).reshape({-1, 32}),
                            labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    namespace ix = torch::indexing;
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.index({ix::Slice(), ix::Slice(0, -1), ix::Slice()}).reshape({-1, 32}); }, lmfuse::ShiftDims{1, 1}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.slice(1, 1).reshape({-1}); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.index({ix::Slice(), ix::Slice(0, -1), ix::Slice()}).reshape({-1, 32}),
                            labels.slice(1, 1).reshape({-1}));
  }
)"},

    // ---- index with an ellipsis -----------------------------------------------------------------------
    {"index({\"...\", Slice(None, -1), Slice()}) with labels index({\"...\", Slice(1, None)})", R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    using torch::indexing::None;
    using torch::indexing::Slice;
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) {
      auto shift_logits = logits.index({"...", Slice(None, -1), Slice()});
      auto shift_labels = labels->index({"...", Slice(1, None)});
      loss = F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels.reshape({-1}));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    using torch::indexing::None;
    using torch::indexing::Slice;
    auto logits = lmfuse::skip_logits() && labels.has_value() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) {
      auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.index({"...", Slice(None, -1), Slice()}); }) : logits.index({"...", Slice(None, -1), Slice()});
      auto shift_labels = labels->index({"...", Slice(1, None)});
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions().shift(true)
              .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, lmfuse::ShiftDims{-2, -1}, shift_labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.reshape({-1}); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(shift_labels), ::at::Tensor>()))
          : F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels.reshape({-1}));
    }
    return loss;
  }
)"},
    {"index({Ellipsis, Slice(None, -1), Slice()}) fully qualified, labels index({Ellipsis, Slice(1)})", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto shift_logits = logits.index(
        {torch::indexing::Ellipsis, torch::indexing::Slice(torch::indexing::None, -1), torch::indexing::Slice()});
    auto shift_labels = labels.index({torch::indexing::Ellipsis, torch::indexing::Slice(1)});
    return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels.reshape({-1}));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.index(
        {torch::indexing::Ellipsis, torch::indexing::Slice(torch::indexing::None, -1), torch::indexing::Slice()}); }) : logits.index(
        {torch::indexing::Ellipsis, torch::indexing::Slice(torch::indexing::None, -1), torch::indexing::Slice()});
    auto shift_labels = labels.index({torch::indexing::Ellipsis, torch::indexing::Slice(1)});
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, lmfuse::ShiftDims{-2, -1}, shift_labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.reshape({-1}); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(shift_labels), ::at::Tensor>()))
        : F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels.reshape({-1}));
  }
)"},

    // ---- the labels' other forms ----------------------------------------------------------------------
    // ---- one sequence, [T, D] hidden and [T] labels: the positions are dim 0 ---------------------------
    {"one sequence: slice(0, 0, -1) with labels slice(0, 1)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.slice(0, 0, -1), labels.slice(0, 1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(0, 0, -1); }, lmfuse::ShiftDims{0, 0}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.slice(0, 1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.slice(0, 0, -1), labels.slice(0, 1));
  }
)"},
    {"labels slice(1, 1, labels.size(1)), flattened through a rebinding", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto shift_logits = logits.slice(1, 0, -1);
    auto shift_labels = labels.slice(1, 1, labels.size(1));
    shift_labels = shift_labels.view(-1);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels);
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(1, 0, -1); }) : logits.slice(1, 0, -1);
    auto shift_labels = labels.slice(1, 1, labels.size(1));
    shift_labels = shift_labels.view(-1);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, lmfuse::ShiftDims{1, 1}, shift_labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels; }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(shift_labels), ::at::Tensor>()))
        : F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels);
  }
)"},
    {"labels slice(-1, 1, L) with L a local, unwrapped from an optional", R"(
  torch::Tensor forward(torch::Tensor x, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (labels.has_value()) {
      auto y = *labels;
      const auto L = y.size(-1);
      loss = F::cross_entropy(logits.slice(1, 0, -1).reshape({-1, 32}), y.slice(-1, 1, L).reshape({-1}));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, c10::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && labels.has_value() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    torch::Tensor loss;
    if (labels.has_value()) {
      auto y = *labels;
      const auto L = y.size(-1);
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, y, lmfuse::LossOptions().shift(true)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(1, 0, -1).reshape({-1, 32}); }, lmfuse::ShiftDims{1, -1}, y, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.slice(-1, 1, L).reshape({-1}); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(y), ::at::Tensor>()))
          : F::cross_entropy(logits.slice(1, 0, -1).reshape({-1, 32}), y.slice(-1, 1, L).reshape({-1}));
    }
    return loss;
  }
)"},
    {"labels narrow(-1, 1, targets.size(-1) - 1), flattened through a rebinding", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor targets) {
    auto logits = lm_head(x);
    auto shift_logits = logits.slice(-2, 0, -1);
    auto shift_targets = targets.narrow(-1, 1, targets.size(-1) - 1);
    shift_targets = shift_targets.reshape(-1);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets);
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor targets) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(-2, 0, -1); }) : logits.slice(-2, 0, -1);
    auto shift_targets = targets.narrow(-1, 1, targets.size(-1) - 1);
    shift_targets = shift_targets.reshape(-1);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, targets, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, lmfuse::ShiftDims{-2, -1}, shift_targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels; }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(shift_targets), ::at::Tensor>()))
        : F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets);
  }
)"},
};

const Refused Neighbours[] = {
    {{"a dim Clang folds although it is no constant expression (a const double): another compiler may compute it", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    const double time_dim = 1.0;
    auto logits = lm_head(h);
    return F::cross_entropy(logits.slice((int)time_dim, 0, -1).reshape({-1, 32}), labels.slice((int)time_dim, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "is not a constant"},
    {{"labels shifted where a local is made and again at the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto shift_labels = labels.slice(1, 1);
    return F::cross_entropy(logits.slice(1, 0, -1).reshape({-1, 32}), shift_labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "the labels are shifted twice"},
    {{"a 2-D sequence shifted along dim 0, labels along dim -1 of another tensor's rank", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.slice(0, 0, -1), labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "the logits are shifted along dim 0 and the labels along dim 1"},
    {{"slice(1, 0, -2) drops two positions", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.slice(1, 0, -2).reshape({-1, 32}), labels.slice(1, 2).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "the logits are sliced with `slice(1, 0, -2)`, which is not all but the last position of their sequence "
     "dimension: it stops at `-2`, not -1"},
    {{"a shift of the flattened batch runs across rows", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto flat = logits.view({-1, logits.size(-1)});
    return F::cross_entropy(flat.slice(-2, 0, -1), labels.view(-1).slice(-1, 1));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "the logits are shifted after `view`: that shift runs across the rows, the fused call's within each row"},
    {{"flattened labels shifted beside rows of shifted logits", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.slice(1, 0, -1).reshape({-1, 32}), labels.view(-1).slice(-1, 1));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "the labels are shifted after `view`: that shift runs across the rows, the fused call's within each row"},
    {{"slice(1, 1) on the logits (the labels' shift)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.slice(1, 1).reshape({-1, 32}), labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "it starts at `1`, not 0"},
    {{"slice(2, 0, -1) drops the last vocabulary entry", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.slice(2, 0, -1).reshape({-1, 31}), labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "dim 2 is not one the rewrite takes for the logits' positions (1, -2, 0)"},
    {{"T - 1 with T the labels' length", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto T = labels.size(1);
    auto shift_logits = logits.slice(1, 0, T - 1);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`T` is not the logits' size along dim 1: `labels.size(1)` is the size of `labels`, not of `logits`"},
    {{"T - 1 with T the input ids' length", R"(
  torch::Tensor forward(torch::Tensor idx, torch::Tensor targets) {
    const auto B = idx.size(0), T = idx.size(1);
    auto logits = lm_head(ln_f(wte(idx)));
    return F::cross_entropy(logits.slice(1, 0, T - 1).reshape({-1, 32}), targets.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`idx.size(1)` is the size of `idx`, not of `logits`"},
    {{"T - 1 with T reassigned (clamped to a block size)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    int64_t T = logits.size(1);
    T = T > 64 ? 64 : T;
    return F::cross_entropy(logits.slice(1, 0, T - 1).reshape({-1, 32}), labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`T` is not proven to be the logits' size along dim 1: it is assigned again at line 22"},
    {{"T - 1 with T handed to a function by reference", R"(
  void clamp_to_block(int64_t &n);
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    int64_t T = logits.size(1);
    clamp_to_block(T);
    return F::cross_entropy(logits.slice(1, 0, T - 1).reshape({-1, 32}), labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`T` is not proven to be the logits' size along dim 1: it may be changed through line 23"},
    {{"logits reshaped between the read of T and the slice", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto T = logits.size(1);
    logits = logits.view({T, -1, 32});
    auto shift_logits = logits.slice(1, 0, T - 1);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`T` is not the logits' size along dim 1: `logits` is changed at line 22, after its size was read"},
    {{"logits re-bound later in the loop that holds the slice", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, int64_t steps) {
    auto logits = lm_head(h);
    const auto T = logits.size(1);
    torch::Tensor loss;
    for (int64_t step = 0; step < steps; ++step) {
      loss = F::cross_entropy(logits.slice(1, 0, T - 1).reshape({-1, 32}), labels.slice(1, 1).reshape({-1}));
      logits = logits.view({T, -1, 32});
    }
    return loss;
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`logits` is changed at line 25, after its size was read"},
    {{"index with a Slice held in a variable", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    using namespace torch::indexing;
    const Slice all_but_last(None, -1);
    auto logits = lm_head(h);
    return F::cross_entropy(logits.index({Slice(), all_but_last}).reshape({-1, 32}),
                            labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "its slice `all_but_last` is not written in place, so its bounds are unknown"},
    {{"T - 1 with T the logits' vocabulary size", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto T = logits.size(2);
    return F::cross_entropy(logits.slice(1, 0, T - 1).reshape({-1, 32}), labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`logits.size(2)` is the size along another dim than 1"},
    {{"slice(1, 0, T - 2)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto T = logits.size(1);
    return F::cross_entropy(logits.slice(1, 0, T - 2).reshape({-1, 32}), labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "the logits are sliced with `slice(1, 0, T - 2)`, which is not all but the last position of their sequence "
     "dimension: `T - 2` is not the logits' size along dim 1 minus one"},
    {{"slice(-2, 0, T - 1) with T read along dim 1 (the rank is unknown)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto T = logits.size(1);
    return F::cross_entropy(logits.slice(-2, 0, T - 1).reshape({-1, 32}), labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`logits.size(1)` is the size along another dim than -2"},
    {{"narrow(1, 1, T - 1) on the logits", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto T = logits.size(1);
    return F::cross_entropy(logits.narrow(1, 1, T - 1).reshape({-1, 32}), labels.narrow(1, 1, T - 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "the logits are narrowed with `narrow(1, 1, T - 1)`, which is not all but the last position of their "
     "sequence dimension: it starts at `1`, not 0"},
    {{"narrow(1, 0, 127) with a fixed length", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.narrow(1, 0, 127).reshape({-1, 32}), labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`127` is not the logits' size along dim 1 minus one"},
    {{"index with the slice on the batch dim", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    using namespace torch::indexing;
    auto logits = lm_head(h);
    return F::cross_entropy(logits.index({Slice(None, -1)}).reshape({-1, 32}),
                            labels.index({Slice(), Slice(1, None)}).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "the logits are shifted along dim 0 and the labels along dim 1: with labels shaped as the logits' positions, "
     "these are never the same positions"},
    {{"index with an ellipsis and the slice on the vocabulary dim", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    using namespace torch::indexing;
    auto logits = lm_head(h);
    return F::cross_entropy(logits.index({"...", Slice(None, -1)}).reshape({-1, 31}),
                            labels.index({"...", Slice(1, None)}).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "lands on dim -1, not one the rewrite takes for the logits' positions (1, -2, 0)"},
    {{"index with a None (a new dim) before the slice", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    using namespace torch::indexing;
    auto logits = lm_head(h);
    return F::cross_entropy(logits.index({None, Slice(None, -1)}).reshape({-1, 32}),
                            labels.slice(1, 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "its index `None` is not a Slice or an ellipsis"},
    {{"labels sliced to a length read from the logits", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto T = logits.size(1);
    auto shift_logits = logits.slice(1, 0, T - 1);
    auto shift_labels = labels.slice(1, 1, T);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels.reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "the labels are sliced with `slice(1, 1, T)`, which is not all but the first position of their last "
     "dimension: `T` is not the labels' size along dim 1: `logits.size(1)` is the size of `logits`, not of `labels`"},
    {{"labels narrowed by a length read from the logits", R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) {
      const auto T = logits.size(1);
      loss = F::cross_entropy(logits.narrow(1, 0, T - 1).reshape({-1, 32}),
                              labels->narrow(1, 1, T - 1).reshape({-1}));
    }
    return loss;
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`T` is not the labels' size along dim 1: `logits.size(1)` is the size of `logits`, not of `labels`"},
    {{"labels handed to a function by reference between the read of L and the slice", R"(
  void pad_to_block(torch::Tensor &t);
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto L = labels.size(1);
    pad_to_block(labels);
    return F::cross_entropy(logits.slice(1, 0, -1).reshape({-1, 32}), labels.slice(1, 1, L).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`L` is not the labels' size along dim 1: `labels` is changed at line 23, after its size was read"},
    {{"labels reshaped through a reference alias between the read of L and the slice", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto L = labels.size(1);
    auto &y = labels;
    y = y.view({L, -1});
    return F::cross_entropy(logits.slice(1, 0, -1).reshape({-1, 32}), labels.narrow(1, 1, L - 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`labels` is changed at line 22, after its size was read"},
    {{"labels copied between the read of L and the slice (a copy shares their shape and in-place methods)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto L = labels.size(1);
    auto y = labels;
    y.mul_(1.0);
    return F::cross_entropy(logits.slice(1, 0, -1).reshape({-1, 32}), labels.slice(1, 1, L).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`labels` is changed at line 22, after its size was read"},
    {{"labels passed by value to a user function between the read of L and the slice", R"(
  void normalize(torch::Tensor t);
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto L = labels.size(1);
    normalize(labels);
    return F::cross_entropy(logits.slice(1, 0, -1).reshape({-1, 32}), labels.slice(1, 1, L).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`labels` is changed at line 23, after its size was read"},
    {{"labels passed by const reference to a user function (its in-place methods are const)", R"(
  void check_labels(const torch::Tensor &t);
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto L = labels.size(1);
    check_labels(labels);
    return F::cross_entropy(logits.slice(1, 0, -1).reshape({-1, 32}), labels.narrow(1, 1, L - 1).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "`labels` is changed at line 23, after its size was read"},
    {{"labels index with the slice's start at 2", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    using namespace torch::indexing;
    auto logits = lm_head(h);
    return F::cross_entropy(logits.index({Slice(), Slice(None, -1)}).reshape({-1, 32}),
                            labels.index({Slice(), Slice(2, None)}).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "it starts at `2`, not 1"},
    {{"logits shifted with a new form, the labels not shifted", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    const auto T = logits.size(1);
    return F::cross_entropy(logits.narrow(1, 0, T - 1).reshape({-1, 32}), labels.reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "the logits are shifted but the labels are not"},
    {{"labels shifted with a new form, the logits not shifted", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    using namespace torch::indexing;
    auto logits = lm_head(h);
    return F::cross_entropy(logits.reshape({-1, 32}), labels.index({"...", Slice(1, None)}).reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
     "the labels are shifted but the logits are not"},
};

}  // namespace

llvm::ArrayRef<Case> lmfuse::rewriter::testing::shiftCases() { return Accepted; }

TEST_CASE("causal shift spellings are mapped to the runtime's shift", "[rewriter][shift]") {
  for (const Case &Item : Accepted)
    DYNAMIC_SECTION(Item.Name) { checkCase(Item); }
}

TEST_CASE("slices next to the causal shift are refused with what is not the shift", "[rewriter][shift]") {
  for (const Refused &Item : Neighbours)
    DYNAMIC_SECTION(Item.Item.Name) { checkRefused(Item); }
}

TEST_CASE("accepted shift spellings set the audit's shift option", "[rewriter][shift]") {
  for (const Case &Item : Accepted)
    DYNAMIC_SECTION(Item.Name) {
      RewriteResult Result = rewriteWithStubs(source(Item.Before, false));
      INFO(describeSites(Result));
      REQUIRE(Result.Sites.size() == 1);
      REQUIRE(Result.Sites[0].Options);
      CHECK(Result.Sites[0].Options->Shift);
    }
}
