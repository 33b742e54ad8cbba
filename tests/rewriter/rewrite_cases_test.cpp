// The rewriter's specification as a table of named cases: a model source, a verb, and what the
// verb expects. "rewrites to" compares the whole rewritten file (whitespace-normalised), then
// checks that the output re-parses and that rewriting it again changes nothing (already_patched);
// "refuses with" expects one unmatched site with that reason and the source unchanged; "leaves
// unchanged" expects no candidate site; "suppresses" expects one suppressed site.
#include <catch2/catch.hpp>

#include "audit.h"
#include "rewrite_harness.h"

using namespace lmfuse::rewriter;
using namespace lmfuse::rewriter::testing;

namespace {

const Case Cases[] = {
    // ---- accepted -----------------------------------------------------------------------------
    {"module head before a has_value() guard, F alias, ignore_index carried over", R"(
  Output forward(torch::Tensor x, c10::optional<torch::Tensor> targets) {
    auto logits = lm_head->forward(x);
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(-1));
    }
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor x, c10::optional<torch::Tensor> targets) {
    auto logits = lmfuse::skip_logits() && targets.has_value() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head->forward(x);
    torch::Tensor loss;
    if (targets.has_value()) {
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, *targets, lmfuse::LossOptions().ignore_index(-1)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, logits.size(-1)}); }, {}, *targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(targets), ::c10::optional< ::at::Tensor>>()))
          : F::cross_entropy(logits.view({-1, logits.size(-1)}), targets->view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(-1));
    }
    return {logits, loss};
  }
)"},
    {"head inside the labels branch (nanoGPT), defined() guard, else branch untouched", R"(
  Output forward(torch::Tensor x, torch::Tensor targets) {
    torch::Tensor logits, loss;
    if (targets.defined()) {
      logits = lm_head(x);
      loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets.view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(-1));
    } else {
      logits = lm_head(x.slice(1, -1));
    }
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor x, torch::Tensor targets) {
    torch::Tensor logits, loss;
    if (targets.defined()) {
      logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, targets, lmfuse::LossOptions().ignore_index(-1)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, logits.size(-1)}); }, {}, targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(targets), ::at::Tensor>()))
          : F::cross_entropy(logits.view({-1, logits.size(-1)}), targets.view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(-1));
    } else {
      logits = lm_head(x.slice(1, -1));
    }
    return {logits, loss};
  }
)"},
    {"optional tested as bool, labels.value(), loss stored in a member", R"(
  torch::Tensor forward(torch::Tensor h, torch::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    if (labels) {
      last_loss = F::cross_entropy(logits.reshape({-1, 32}), labels.value().reshape({-1}));
    }
    return logits;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && static_cast<bool>(labels) ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    if (labels) {
      last_loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels.value(), lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, {}, labels.value(), [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.reshape({-1}); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels.value()), ::at::Tensor>()))
          : F::cross_entropy(logits.reshape({-1, 32}), labels.value().reshape({-1}));
    }
    return logits;
  }
)"},
    {"labels != nullptr on a pointer, labels reached through ->", R"(
  Output forward(torch::Tensor h, const torch::Tensor *labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels != nullptr)
      loss = F::cross_entropy(logits.flatten(0, 1), labels->flatten());
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor h, const torch::Tensor *labels) {
    auto logits = lmfuse::skip_logits() && (labels != nullptr) ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels != nullptr)
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.flatten(0, 1); }, {}, *labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.flatten(); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), const ::at::Tensor *>()))
          : F::cross_entropy(logits.flatten(0, 1), labels->flatten());
    return {logits, loss};
  }
)"},
    {"inverted early return, then the loss", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    if (!labels.has_value()) return {logits, {}};
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && labels.has_value() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    if (!labels.has_value()) return {logits, {}};
    auto loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, *labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::c10::optional< ::at::Tensor>>()))
        : F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)"},
    {"labels unwrapped into a local and cast to long", R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) {
      auto y = *labels;
      loss = F::cross_entropy(logits.view({-1, 32}), y.view(-1).to(torch::kLong));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && labels.has_value() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) {
      auto y = *labels;
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, y.to(torch::kLong), lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, y, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1).to(torch::kLong); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(y), ::at::Tensor>()))
          : F::cross_entropy(logits.view({-1, 32}), y.view(-1).to(torch::kLong));
    }
    return loss;
  }
)"},
    {"labels->...to(kLong) keeps the cast on the dereferenced labels", R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    torch::Tensor loss;
    if (labels.has_value()) {
      loss = F::cross_entropy(lm_head(h).view({-1, 32}), labels->view(-1).to(torch::kLong));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    torch::Tensor loss;
    if (labels.has_value()) {
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, (*labels).to(torch::kLong), lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", {}, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, *labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1).to(torch::kLong); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::c10::optional< ::at::Tensor>>()))
          : F::cross_entropy(lm_head(h).view({-1, 32}), labels->view(-1).to(torch::kLong));
    }
    return loss;
  }
)"},
    {"labels moved to the logits' device in a local (Hugging Face ports): the local is the labels", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) {
      auto y = labels->to(logits.device());
      loss = F::cross_entropy(logits.view({-1, 32}), y.view(-1));
    }
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && labels.has_value() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) {
      auto y = labels->to(logits.device());
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, y, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, y, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(y), ::at::Tensor>()))
          : F::cross_entropy(logits.view({-1, 32}), y.view(-1));
    }
    return {logits, loss};
  }
)"},
    {"labels moved inline: the fused call gets them moved, and checks the view on the moved labels", R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels) loss = F::cross_entropy(logits.view({-1, 32}), labels->to(logits.device()).view(-1));
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && static_cast<bool>(labels) ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels) loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, (*labels).to(logits.device()), lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels->to(logits.device()), [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels->to(logits.device())), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels->to(logits.device()).view(-1));
    return loss;
  }
)"},
    {"labels moved to a device after a view: the labels passed are moved first, the labels code runs as written", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1).to(logits.device()));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels.to(logits.device()), lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1).to(logits.device()); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1).to(logits.device()));
  }
)"},
    {"labels moved to a device type and cast, then shifted: the move and the cast stay on the labels passed", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto shift_logits = logits.slice(1, 0, -1);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), labels.to(torch::kCUDA).to(torch::kLong).slice(1, 1).reshape(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(1, 0, -1); }) : logits.slice(1, 0, -1);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels.to(torch::kCUDA).to(torch::kLong), lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, lmfuse::ShiftDims{1, 1}, labels.to(torch::kCUDA), [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.to(torch::kLong).slice(1, 1).reshape(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels.to(torch::kCUDA)), ::at::Tensor>()))
        : F::cross_entropy(shift_logits.reshape({-1, 32}), labels.to(torch::kCUDA).to(torch::kLong).slice(1, 1).reshape(-1));
  }
)"},
    {"branch-local namespace alias, label smoothing and sum reduction", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      namespace G = torch::nn::functional;
      loss = G::cross_entropy(logits.view({-1, 32}), labels.view(-1),
                              G::CrossEntropyFuncOptions().label_smoothing(0.1).reduction(torch::kSum));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      namespace G = torch::nn::functional;
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().label_smoothing(0.1).reduction(lmfuse::Reduction::Sum)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : G::cross_entropy(logits.view({-1, 32}), labels.view(-1),
                              G::CrossEntropyFuncOptions().label_smoothing(0.1).reduction(torch::kSum));
    }
    return loss;
  }
)"},
    {"a reduction named by a type of the program's: the copy asserts the type its option was read from", R"(
  using SumReduction = torch::enumtype::kSum;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), F::CrossEntropyFuncOptions().reduction(SumReduction()));
  }
)", Verb::RewritesTo, R"(
  using SumReduction = torch::enumtype::kSum;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().reduction(lmfuse::Reduction::Sum)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor, decltype(SumReduction()), ::torch::enumtype::kSum>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1), F::CrossEntropyFuncOptions().reduction(SumReduction()));
  }
)"},
    {"an ignore_index read through a constant of the program's: the copy asserts its value", R"(
  static constexpr int64_t kPad = -1;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return torch::cross_entropy_loss(logits.view({-1, 32}), labels.view(-1), {}, at::Reduction::Mean, kPad);
  }
)", Verb::RewritesTo, R"(
  static constexpr int64_t kPad = -1;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().ignore_index(kPad)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor, lmfuse::Holds<((kPad) == -1)>, lmfuse::Holds<true>>()))
        : torch::cross_entropy_loss(logits.view({-1, 32}), labels.view(-1), {}, at::Reduction::Mean, kPad);
  }
)"},
    {"an unsigned constant beyond int is asserted in its own type: no comparison of signed with unsigned", R"(
  static constexpr uint64_t kNoLabel = 4294967296ULL;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return torch::cross_entropy_loss(logits.view({-1, 32}), labels.view(-1), {}, at::Reduction::Mean, kNoLabel);
  }
)", Verb::RewritesTo, R"(
  static constexpr uint64_t kNoLabel = 4294967296ULL;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().ignore_index(kNoLabel)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor, lmfuse::Holds<((kNoLabel) == 4294967296ULL)>, lmfuse::Holds<true>>()))
        : torch::cross_entropy_loss(logits.view({-1, 32}), labels.view(-1), {}, at::Reduction::Mean, kNoLabel);
  }
)"},
    {"torch::cross_entropy_loss with positional options", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      loss = torch::cross_entropy_loss(logits.view({-1, 32}), labels.view(-1), {}, at::Reduction::Sum, -1);
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().ignore_index(-1).reduction(lmfuse::Reduction::Sum)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : torch::cross_entropy_loss(logits.view({-1, 32}), labels.view(-1), {}, at::Reduction::Sum, -1);
    }
    return loss;
  }
)"},
    {"at::cross_entropy_loss with defaults, loss returned directly", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    if (labels.defined())
      return at::cross_entropy_loss(lm_head(h).view({-1, 32}), labels.view(-1));
    return {};
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    if (labels.defined())
      return lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", {}, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : at::cross_entropy_loss(lm_head(h).view({-1, 32}), labels.view(-1));
    return {};
  }
)"},
    {"loss through a using-declaration, in a larger expression", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, double n_items) {
    using torch::nn::functional::cross_entropy;
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      loss = cross_entropy(logits.view({-1, 32}), labels.view(-1),
                           F::CrossEntropyFuncOptions().reduction(torch::kSum)) / n_items;
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, double n_items) {
    using torch::nn::functional::cross_entropy;
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      loss = (lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().reduction(lmfuse::Reduction::Sum)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : cross_entropy(logits.view({-1, 32}), labels.view(-1),
                           F::CrossEntropyFuncOptions().reduction(torch::kSum))) / n_items;
    }
    return loss;
  }
)"},
    {"rebinding reshape of the logits gets the same condition", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      logits = logits.view({-1, logits.size(-1)});
      loss = F::cross_entropy(logits, labels.view(-1));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, logits.size(-1)}); }) : logits.view({-1, logits.size(-1)});
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits; }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(logits, labels.view(-1));
    }
    return loss;
  }
)"},
    {"a head line that reshapes its output skips with the reshaped shape", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h).view({-1, 32});
    auto loss = F::cross_entropy(logits, labels.view(-1));
    last_logits = logits;
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N"),
                                                                       [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); })
                                        : lm_head(h).view({-1, 32});
    auto loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits; }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits, labels.view(-1));
    last_logits = logits;
    return loss;
  }
)"},
    {"the code handed to the fused call names its stand-in so that no local of the model is hidden", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    const int64_t lmfuse_logits = 32;
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, lmfuse_logits}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    const int64_t lmfuse_logits = 32;
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits2) { return lmfuse_logits2.view({-1, lmfuse_logits}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, lmfuse_logits}), labels.view(-1));
  }
)"},
    {"structured bindings read by the code handed to the fused call are captured as references (C++17)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    struct Dims { int64_t b, t; };
    auto [B, T] = Dims{h.size(0), h.size(1)};
    auto logits = lm_head(h).view({B * T, 32});
    return F::cross_entropy(logits.view({B * T, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    struct Dims { int64_t b, t; };
    auto [B, T] = Dims{h.size(0), h.size(1)};
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N"),
                                                                       [&, &B = B, &T = T](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({B * T, 32}); })
                                        : lm_head(h).view({B * T, 32});
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&, &B = B, &T = T](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({B * T, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({B * T, 32}), labels.view(-1));
  }
)"},
    {"const alias of the logits used only by the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      const auto flat = logits.reshape({-1, 32}).contiguous();
      loss = F::cross_entropy(flat, labels.view(-1));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      const auto flat = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}).contiguous(); }) : logits.reshape({-1, 32}).contiguous();
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", flat, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits; }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(flat, labels.view(-1));
    }
    return loss;
  }
)"},
    {"HF causal shift maps to the runtime's shift option", R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) {
      auto shift_logits = logits.slice(1, 0, -1).contiguous();
      auto shift_labels = labels->slice(1, 1).contiguous();
      loss = F::cross_entropy(shift_logits.view({-1, 32}), shift_labels.view(-1));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && labels.has_value() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) {
      auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(1, 0, -1).contiguous(); }) : logits.slice(1, 0, -1).contiguous();
      auto shift_labels = labels->slice(1, 1).contiguous();
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions().shift(true)
              .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, lmfuse::ShiftDims{1, 1}, shift_labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(shift_labels), ::at::Tensor>()))
          : F::cross_entropy(shift_logits.view({-1, 32}), shift_labels.view(-1));
    }
    return loss;
  }
)"},
    {"tied embeddings: functional linear without bias", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, wte->weight);
    torch::Tensor loss;
    if (labels.defined())
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, wte->weight, "model.cpp:N") : F::linear(h, wte->weight);
    torch::Tensor loss;
    if (labels.defined())
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, wte->weight, torch::Tensor(), labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(wte->weight), ::at::Tensor, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)"},
    {"functional linear with a bias, torch::linear spelling", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor w, torch::Tensor b, torch::Tensor labels) {
    auto logits = torch::linear(h, w, b);
    torch::Tensor loss;
    if (labels.defined())
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor w, torch::Tensor b, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, w, b, "model.cpp:N") : torch::linear(h, w, b);
    torch::Tensor loss;
    if (labels.defined())
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, w, b, labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(w), ::at::Tensor, decltype(b), ::at::Tensor, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)"},
    {"head input computed inline is hoisted, never evaluated twice", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(ln_f(x));
    torch::Tensor loss;
    if (labels.defined())
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto lmfuse_hidden = ln_f(x);
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(lmfuse_hidden, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(lmfuse_hidden);
    torch::Tensor loss;
    if (labels.defined())
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(lmfuse_hidden, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)"},
    {"head input changed after the head is hoisted", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    x = x * 2.0;
    torch::Tensor loss;
    if (labels.defined())
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto lmfuse_hidden = x;
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(lmfuse_hidden, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(lmfuse_hidden);
    x = x * 2.0;
    torch::Tensor loss;
    if (labels.defined())
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(lmfuse_hidden, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)"},
    {"pad id known only at run time is passed through as written", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined())
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(pad_id_));
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.defined())
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().ignore_index(pad_id_)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(logits.view({-1, 32}), labels.view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(pad_id_));
    return loss;
  }
)"},
    {"options held in a local, constant pad id", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    constexpr int64_t kPad = 50256;
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      auto options = F::CrossEntropyFuncOptions().ignore_index(kPad);
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1), options);
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    constexpr int64_t kPad = 50256;
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) {
      auto options = F::CrossEntropyFuncOptions().ignore_index(kPad);
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().ignore_index(kPad)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor, lmfuse::Holds<((kPad) == 50256)>, lmfuse::Holds<true>>()))
          : F::cross_entropy(logits.view({-1, 32}), labels.view(-1), options);
    }
    return loss;
  }
)"},
    {"upcast logits: the fused loss is returned in the upcast dtype", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined())
      loss = F::cross_entropy(logits.to(torch::kFloat).view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.defined())
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().dtype(torch::kFloat)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.to(torch::kFloat).view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(logits.to(torch::kFloat).view({-1, 32}), labels.view(-1));
    return loss;
  }
)"},
    {"local Linear of any name, no guard (training-only function)", R"(
  torch::Tensor train_step(torch::Tensor h, torch::Tensor y) {
    torch::nn::Linear unembedding(64, 32);
    auto out = unembedding(h);
    return F::cross_entropy(out.view({-1, 32}), y.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor train_step(torch::Tensor h, torch::Tensor y) {
    torch::nn::Linear unembedding(64, 32);
    auto out = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, unembedding->weight, unembedding->bias, "model.cpp:N") : unembedding(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, unembedding->weight, unembedding->bias, y, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", out, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, y, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(unembedding), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(y), ::at::Tensor>()))
        : F::cross_entropy(out.view({-1, 32}), y.view(-1));
  }
)"},
    {"std-style optional under the torch:: name, != nullopt guard", R"(
  torch::Tensor forward(torch::Tensor h, torch::optional<torch::Tensor> labels) {
    auto logits = lm_head->forward(h);
    torch::Tensor loss;
    if (labels != c10::nullopt) {
      loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && (labels != c10::nullopt) ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head->forward(h);
    torch::Tensor loss;
    if (labels != c10::nullopt) {
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, *labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::c10::optional< ::at::Tensor>>()))
          : F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    }
    return loss;
  }
)"},

    {"return of logits and loss inside the labels branch, tied functional head", R"(
  Output forward(torch::Tensor x, c10::optional<torch::Tensor> targets) {
    if (targets.has_value()) {
      auto logits = F::linear(x, wte->weight);
      auto loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), targets.value().view(-1));
      return {logits, loss};
    }
    auto logits = F::linear(x.slice(1, -1), wte->weight);
    return {logits, torch::Tensor()};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor x, c10::optional<torch::Tensor> targets) {
    if (targets.has_value()) {
      auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, wte->weight, "model.cpp:N") : F::linear(x, wte->weight);
      auto loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(x, wte->weight, torch::Tensor(), targets.value(), lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, logits.size(-1)}); }, {}, targets.value(), [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(wte->weight), ::at::Tensor, decltype(x), ::at::Tensor, decltype(targets.value()), ::at::Tensor>()))
          : F::cross_entropy(logits.view({-1, logits.size(-1)}), targets.value().view(-1));
      return {logits, loss};
    }
    auto logits = F::linear(x.slice(1, -1), wte->weight);
    return {logits, torch::Tensor()};
  }
)"},
    {"early return on !labels with the head after it", R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    if (!labels) return {};
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    if (!labels) return {};
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, *labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::c10::optional< ::at::Tensor>>()))
        : F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
  }
)"},
    {"a template is rewritten once, in its pattern, not per instantiation", R"(
  template <int Scale> torch::Tensor scaled(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
  torch::Tensor both(torch::Tensor h, torch::Tensor labels) { return scaled<1>(h, labels) + scaled<2>(h, labels); }
)", Verb::RewritesTo, R"(
  template <int Scale> torch::Tensor scaled(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
  torch::Tensor both(torch::Tensor h, torch::Tensor labels) { return scaled<1>(h, labels) + scaled<2>(h, labels); }
)"},

    {"labels tested negatively, loss in the else branch", R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (!labels.has_value()) {
      loss = torch::zeros({1});
    } else {
      loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    }
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && labels.has_value() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (!labels.has_value()) {
      loss = torch::zeros({1});
    } else {
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, *labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, *labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::c10::optional< ::at::Tensor>>()))
          : F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    }
    return {logits, loss};
  }
)"},
    {"loss under a condition that does not test the labels: the logits are skipped only under it", R"(
  bool training_ = true;
  Output forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (training_) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return {logits, loss};
  }
)", Verb::RewritesTo, R"(
  bool training_ = true;
  Output forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && training_ ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (training_) loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return {logits, loss};
  }
)"},

    {"at::linear with an explicit nullopt bias, logits bound to a reference", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = at::linear(h, wte->weight, c10::nullopt);
    torch::Tensor loss;
    if (labels.defined()) {
      const torch::Tensor &scores = logits;
      loss = F::cross_entropy(scores.view({-1, 32}), labels.view(-1));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, wte->weight, "model.cpp:N") : at::linear(h, wte->weight, c10::nullopt);
    torch::Tensor loss;
    if (labels.defined()) {
      const torch::Tensor &scores = logits;
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, wte->weight, torch::Tensor(), labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", scores, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(wte->weight), ::at::Tensor, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(scores.view({-1, 32}), labels.view(-1));
    }
    return loss;
  }
)"},

    {"loss in a lambda, head inline", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor y) {
    auto score = [&](const torch::Tensor &targets) {
      return F::cross_entropy(lm_head(h).view({-1, 32}), targets.view(-1));
    };
    return score(y);
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor y) {
    auto score = [&](const torch::Tensor &targets) {
      return lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, targets, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", {}, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(targets), ::at::Tensor>()))
          : F::cross_entropy(lm_head(h).view({-1, 32}), targets.view(-1));
    };
    return score(y);
  }
)"},

    {"macros used as whole values inside the site are kept as written", R"(
#define PAD_ID 0
#define FINAL_NORM(x) ln_f(x)
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(FINAL_NORM(x));
    torch::Tensor loss;
    if (labels.defined())
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1), F::CrossEntropyFuncOptions().ignore_index(PAD_ID));
    return loss;
  }
)", Verb::RewritesTo, R"(
#define PAD_ID 0
#define FINAL_NORM(x) ln_f(x)
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto lmfuse_hidden = FINAL_NORM(x);
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(lmfuse_hidden, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(lmfuse_hidden);
    torch::Tensor loss;
    if (labels.defined())
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(lmfuse_hidden, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().ignore_index(PAD_ID)
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(logits.view({-1, 32}), labels.view(-1), F::CrossEntropyFuncOptions().ignore_index(PAD_ID));
    return loss;
  }
)"},

    {"logits stored unchanged after the loss (a model output, like a return)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    last_logits = logits;
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    last_logits = logits;
    return loss;
  }
)"},

    {"a Linear subclass that keeps LinearImpl's weight and bias: forward called through a pointer to it", R"(
  struct TaggedLinearImpl : torch::nn::LinearImpl {
    int tag = 0;
  };
  TaggedLinearImpl *tagged_head_ = nullptr;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = tagged_head_->forward(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  struct TaggedLinearImpl : torch::nn::LinearImpl {
    int tag = 0;
  };
  TaggedLinearImpl *tagged_head_ = nullptr;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, tagged_head_->weight, tagged_head_->bias, "model.cpp:N") : tagged_head_->forward(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, tagged_head_->weight, tagged_head_->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(tagged_head_), ::Model::TaggedLinearImpl *, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor, lmfuse::DeclaredIn<decltype(&::Model::TaggedLinearImpl::forward)>, ::torch::nn::LinearImpl, lmfuse::DeclaredIn<decltype(&::Model::TaggedLinearImpl::weight)>, ::torch::nn::LinearImpl, lmfuse::DeclaredIn<decltype(&::Model::TaggedLinearImpl::bias)>, ::torch::nn::LinearImpl>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    // ---- accepted: the copy asserts the types the site was decided on (lmfuse/analysed.h) ----------
    {"a head class private to another class is left out of the types asserted: the site's function may not name it", R"(
  class Holder {
    struct PrivateHeadImpl : torch::nn::LinearImpl {};
  public:
    PrivateHeadImpl *head = nullptr;
  };
  Holder holder_;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = holder_.head->forward(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  class Holder {
    struct PrivateHeadImpl : torch::nn::LinearImpl {};
  public:
    PrivateHeadImpl *head = nullptr;
  };
  Holder holder_;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, holder_.head->weight, holder_.head->bias, "model.cpp:N") : holder_.head->forward(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, holder_.head->weight, holder_.head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"a head class template over an enumeration is left out of the types asserted: its argument prints as a number", R"(
  enum class Flavor { Plain, Scaled };
  template <Flavor Kind> struct FlavoredImpl : torch::nn::LinearImpl {};
  FlavoredImpl<static_cast<Flavor>(7)> *flavored_ = nullptr;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = flavored_->forward(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  enum class Flavor { Plain, Scaled };
  template <Flavor Kind> struct FlavoredImpl : torch::nn::LinearImpl {};
  FlavoredImpl<static_cast<Flavor>(7)> *flavored_ = nullptr;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, flavored_->weight, flavored_->bias, "model.cpp:N") : flavored_->forward(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, flavored_->weight, flavored_->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"the copy asserts the types its site was decided on: a holder of a nested head class, named from the global namespace", R"(
#include <memory>
  struct ScaledImpl : torch::nn::LinearImpl { using LinearImpl::LinearImpl; };
  std::shared_ptr<ScaledImpl> scaled;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = scaled->forward(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
#include <memory>
  struct ScaledImpl : torch::nn::LinearImpl { using LinearImpl::LinearImpl; };
  std::shared_ptr<ScaledImpl> scaled;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, scaled->weight, scaled->bias, "model.cpp:N") : scaled->forward(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, scaled->weight, scaled->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(scaled), ::std::shared_ptr< ::Model::ScaledImpl>, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor, lmfuse::DeclaredIn<decltype(&::Model::ScaledImpl::forward)>, ::torch::nn::LinearImpl, lmfuse::DeclaredIn<decltype(&::Model::ScaledImpl::weight)>, ::torch::nn::LinearImpl, lmfuse::DeclaredIn<decltype(&::Model::ScaledImpl::bias)>, ::torch::nn::LinearImpl>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"the copy asserts the types its site was decided on: a head class local to the function cannot be named, so only the input and labels are", R"(
#include <memory>
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    struct LocalImpl : torch::nn::LinearImpl { using LinearImpl::LinearImpl; };
    auto head = std::make_shared<LocalImpl>(4, 32);
    auto logits = head->forward(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
#include <memory>
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    struct LocalImpl : torch::nn::LinearImpl { using LinearImpl::LinearImpl; };
    auto head = std::make_shared<LocalImpl>(4, 32);
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, head->weight, head->bias, "model.cpp:N") : head->forward(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, head->weight, head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"the copy asserts the types its site was decided on: an input holding a lambda, through the local it is hoisted into", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head([&] { return h * 2; }());
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto lmfuse_hidden = [&] { return h * 2; }();
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(lmfuse_hidden, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(lmfuse_hidden);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(lmfuse_hidden, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"the copy asserts the types its site was decided on: a head class of an anonymous namespace, named without it", R"(
#include <memory>
};
namespace {
struct AnonImpl : torch::nn::LinearImpl { using LinearImpl::LinearImpl; };

}
struct Other : torch::nn::Module {
  std::shared_ptr<AnonImpl> head;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = head->forward(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
#include <memory>
};
namespace {
struct AnonImpl : torch::nn::LinearImpl { using LinearImpl::LinearImpl; };

}
struct Other : torch::nn::Module {
  std::shared_ptr<AnonImpl> head;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, head->weight, head->bias, "model.cpp:N") : head->forward(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, head->weight, head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(head), ::std::shared_ptr<AnonImpl>, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor, lmfuse::DeclaredIn<decltype(&AnonImpl::forward)>, ::torch::nn::LinearImpl, lmfuse::DeclaredIn<decltype(&AnonImpl::weight)>, ::torch::nn::LinearImpl, lmfuse::DeclaredIn<decltype(&AnonImpl::bias)>, ::torch::nn::LinearImpl>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"options made through a type alias of the program's: the copy asserts the options object's type", R"(
  using Options = F::CrossEntropyFuncOptions;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), Options().ignore_index(-1));
  }
)", Verb::RewritesTo, R"(
  using Options = F::CrossEntropyFuncOptions;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().ignore_index(-1)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor, decltype(Options()), ::torch::nn::CrossEntropyLossOptions>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1), Options().ignore_index(-1));
  }
)"},
    // ---- accepted: macros carried as written, introduced names that collide with nothing -----------
    {"an option value that is a whole macro invocation is carried as written", R"(
#define PAD_ID (-1)
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), F::CrossEntropyFuncOptions().ignore_index(PAD_ID));
  }
)", Verb::RewritesTo, R"(
#define PAD_ID (-1)
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().ignore_index(PAD_ID)
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1), F::CrossEntropyFuncOptions().ignore_index(PAD_ID));
  }
)"},
    {"the hoisted local avoids a member of the same name", R"(
  torch::Tensor lmfuse_hidden;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(ln_f(x));
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1)) + lmfuse_hidden.mean();
  }
)", Verb::RewritesTo, R"(
  torch::Tensor lmfuse_hidden;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto lmfuse_hidden2 = ln_f(x);
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(lmfuse_hidden2, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(lmfuse_hidden2);
    return (lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(lmfuse_hidden2, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden2), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1))) + lmfuse_hidden.mean();
  }
)"},
    {"the hoisted local avoids a parameter and a later local of the same name", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels, torch::Tensor lmfuse_hidden) {
    auto logits = lm_head(ln_f(x));
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    { auto lmfuse_hidden2 = lmfuse_hidden * 2.0; }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels, torch::Tensor lmfuse_hidden) {
    auto lmfuse_hidden3 = ln_f(x);
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(lmfuse_hidden3, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(lmfuse_hidden3);
    auto loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(lmfuse_hidden3, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden3), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    { auto lmfuse_hidden2 = lmfuse_hidden * 2.0; }
    return loss;
  }
)"},
    {"the hoisted local avoids a member of a base class and a global", R"(
  struct Base { torch::Tensor lmfuse_hidden; };
  struct Derived;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels);
};
torch::Tensor lmfuse_hidden2;
struct Child : Model::Base {
  torch::nn::Linear lm_head{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(ln_f(x));
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  struct Base { torch::Tensor lmfuse_hidden; };
  struct Derived;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels);
};
torch::Tensor lmfuse_hidden2;
struct Child : Model::Base {
  torch::nn::Linear lm_head{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto lmfuse_hidden3 = ln_f(x);
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(lmfuse_hidden3, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(lmfuse_hidden3);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(lmfuse_hidden3, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden3), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    // ---- accepted: shape reads of the logits (the skipped logits answer them) ---------------------
    {"nanoGPT's B, T, C read from the logits before the view", R"(
  torch::Tensor forward(torch::Tensor x, c10::optional<torch::Tensor> targets) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (targets.has_value()) {
      const auto B = logits.size(0), T = logits.size(1), C = logits.size(2);
      logits = logits.view({B * T, C});
      loss = F::cross_entropy(logits, targets->view({B * T}));
    }
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, c10::optional<torch::Tensor> targets) {
    auto logits = lmfuse::skip_logits() && targets.has_value() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    torch::Tensor loss;
    if (targets.has_value()) {
      const auto B = logits.size(0), T = logits.size(1), C = logits.size(2);
      logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({B * T, C}); }) : logits.view({B * T, C});
      loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, *targets, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits; }, {}, *targets, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view({B * T}); }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(targets), ::c10::optional< ::at::Tensor>>()))
          : F::cross_entropy(logits, targets->view({B * T}));
    }
    return loss;
  }
)"},
    {"the vocabulary size and rank read before the loss", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    const int64_t vocab = logits.size(-1);
    const int64_t rank = logits.dim();
    return F::cross_entropy(logits.view({-1, vocab}), labels.view(-1)) * (rank - 2);
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    const int64_t vocab = logits.size(-1);
    const int64_t rank = logits.dim();
    return (lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, vocab}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, vocab}), labels.view(-1))) * (rank - 2);
  }
)"},
    {"HF's shift with the shifted labels flattened through a rebinding", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto shift_logits = logits.slice(1, 0, -1);
    auto shift_labels = labels.slice(1, 1);
    shift_labels = shift_labels.view(-1);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels);
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(x, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(x);
    auto shift_logits = lmfuse::skip_logits() ? lmfuse::skipped_logits_after(logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.slice(1, 0, -1); }) : logits.slice(1, 0, -1);
    auto shift_labels = labels.slice(1, 1);
    shift_labels = shift_labels.view(-1);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions().shift(true)
            .logits_as_passed({"model.cpp:N", shift_logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.reshape({-1, 32}); }, lmfuse::ShiftDims{1, 1}, shift_labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels; }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(x), ::at::Tensor, decltype(shift_labels), ::at::Tensor>()))
        : F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels);
  }
)"},
    {"a gradient taken without create_graph stays patched", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto loss = F::cross_entropy(logits, labels);
    torch::autograd::backward({loss}, {}, true, false);
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    auto loss = lmfuse::enabled()
          ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
              .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits; }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels; }})
              .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
          : F::cross_entropy(logits, labels);
    torch::autograd::backward({loss}, {}, true, false);
    return loss;
  }
)"},

    // ---- refused: logits-rebound ----------------------------------------------------------------
    {"logits scaled after the head", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    logits = logits * 0.5;
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "logits-rebound"},
    {"logits scaled in place", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    logits.mul_(0.5);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "logits-rebound"},
    {"logits divided inline in the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}) / 2.0, labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "logits-rebound"},

    {"head assigned only under a condition the loss is outside of", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, bool use_head) {
    torch::Tensor logits = mlp->forward(h);
    if (use_head) logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "logits-rebound"},
    {"head input changed in place between head and loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    h.mul_(2.0);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "inputs-modified"},

    // ---- refused: logits-softcapped -------------------------------------------------------------
    {"Gemma softcap between head and loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    logits = torch::tanh(logits / 30.0) * 30.0;
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "logits-softcapped"},
    {"softcap takes precedence over a rebinding before it", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    logits = logits * 2.0;
    logits.tanh_();
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "logits-softcapped"},
    {"softcap inline in the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(lm_head(h).tanh().view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "logits-softcapped"},

    // ---- refused: head-wrapped ------------------------------------------------------------------
    {"head call scaled", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h) * 0.5;
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "head-wrapped"},
    {"head call plus a tensor, inline in the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, torch::Tensor prior) {
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(lm_head(h) + prior, labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "head-wrapped"},

    {"head input declared in a block the loss is outside of", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    torch::Tensor logits;
    {
      auto h = ln_f(x);
      logits = lm_head(h);
    }
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "head-wrapped"},

    // ---- refused: head-not-linear ---------------------------------------------------------------
    {"a Linear subclass with its own weight: forward reads LinearImpl's, `->weight` would name the subclass's", R"(
  struct ExportLinearImpl : torch::nn::LinearImpl {
    torch::Tensor weight;  // an exported copy, under the same name
  };
  ExportLinearImpl *export_head_ = nullptr;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = export_head_->forward(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "head-not-linear"},
    {"a Linear subclass that adds a forward beside LinearImpl's: which one a call resolves to is the program's", R"(
  struct OverloadedLinearImpl : torch::nn::LinearImpl {
    using LinearImpl::forward;
    torch::Tensor forward(int rows);
  };
  OverloadedLinearImpl *overloaded_head_ = nullptr;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = overloaded_head_->forward(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "head-not-linear"},
    {"a holder subclass with a call operator of its own beside the holder's", R"(
  struct CallingLinear : torch::nn::Linear {
    using Linear::Linear;
    using ModuleHolder::operator();
    torch::Tensor operator()(int rows);
  };
  CallingLinear calling_head_{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = calling_head_(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "head-not-linear"},
    {"Sequential head", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = mlp->forward(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "head-not-linear"},
    {"user module, even when named lm_head", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto &lm_head = custom_head;
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "head-not-linear"},
    {"embedding output", R"(
  torch::Tensor forward(torch::Tensor ids, torch::Tensor labels) {
    auto logits = wte(ids);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "head-not-linear"},
    {"log_softmax applied to the head", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = torch::log_softmax(lm_head(h), -1);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "head-not-linear"},
    {"a home-made nn::Linear is not torch::nn::Linear", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = homemade(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "head-not-linear"},

    {"a loss helper whose logits arrive as a parameter", R"(
  static torch::Tensor loss_of(const torch::Tensor &logits, const torch::Tensor &targets) {
    return F::cross_entropy(logits.view({-1, 32}), targets.view(-1));
  }
)", Verb::RefusesWith, "head-not-linear"},

    // ---- refused: logits-indexed ----------------------------------------------------------------
    {"padded-vocabulary slice", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h).slice(-1, 0, 30);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 30}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "logits-indexed"},
    {"logits shifted without the labels", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.slice(1, 0, -1).reshape({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "logits-indexed"},
    {"last position selected with narrow", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.narrow(1, 0, 4).reshape({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "logits-indexed"},

    // ---- refused: logits-used-elsewhere ---------------------------------------------------------
    {"probabilities computed from the logits before the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto probs = logits.softmax(-1);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss + probs;
  }
)", Verb::RefusesWith, "logits-used-elsewhere"},
    {"the loss's input reads the logits' values beside the input itself", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, logits.sum().item() > 1e9 ? 16 : 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "logits-used-elsewhere"},
    {"logits stored in a member after the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    last_logits = logits.detach();
    return loss;
  }
)", Verb::RefusesWith, "logits-used-elsewhere"},
    {"logits returned into a class whose constructor reads them", R"(
  struct Scored {
    Scored(torch::Tensor logits, torch::Tensor loss) : best(logits.argmax(-1)), loss(loss) {}
    torch::Tensor best, loss;
  };
  Scored forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "logits-used-elsewhere"},
    {"logits assigned to an object whose assignment reads them", R"(
  struct Accumulator {
    Accumulator &operator=(const torch::Tensor &logits) { sum = logits.tanh(); return *this; }
    torch::Tensor sum;
  };
  Accumulator acc_;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    acc_ = logits;
    return loss;
  }
)", Verb::RefusesWith, "logits-used-elsewhere"},
    {"two losses read the same logits", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss + mine::cross_entropy(logits, labels);
  }
)", Verb::RefusesWith, "logits-used-elsewhere"},

    {"a shape read after the rebinding (the fused path holds no logits there)", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    logits = logits.view({-1, 32});
    const auto rows = logits.size(0);
    return F::cross_entropy(logits, labels.view({rows}));
  }
)", Verb::RefusesWith, "logits-used-elsewhere"},
    {"a shape read beside a read of the values", R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    const auto C = logits.size(-1);
    last_logits = logits.argmax(C - 1);
    return F::cross_entropy(logits.view({-1, C}), labels.view(-1));
  }
)", Verb::RefusesWith, "logits-used-elsewhere"},
    // ---- refused: labels-branch-nontrivial ------------------------------------------------------
    {"accuracy computed in the labels branch", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto x = h;
    torch::Tensor loss, accuracy;
    if (labels.defined()) {
      auto logits = lm_head(x);
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
      accuracy = (x == labels).mean();
    }
    return loss + accuracy;
  }
)", Verb::RefusesWith, "labels-branch-nontrivial"},
    {"auxiliary loss in the labels branch", R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels, torch::Tensor router) {
    auto logits = lm_head(h);
    torch::Tensor loss, aux;
    if (labels) {
      aux = router.mean();
      loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    }
    return loss + aux;
  }
)", Verb::RefusesWith, "labels-branch-nontrivial"},

    // ---- refused: labels-mismatch ---------------------------------------------------------------
    {"target is not the guarded labels", R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> labels, torch::Tensor other) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) loss = F::cross_entropy(logits.view({-1, 32}), other.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"labels of a class of the program's, derived from the library's optional, with its own operator*", R"(
  struct Labels : c10::optional<torch::Tensor> {
    using c10::optional<torch::Tensor>::optional;
    torch::Tensor operator*() const { return torch::Tensor(); }
  };
  torch::Tensor forward(torch::Tensor h, Labels labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.has_value()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return loss;
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"target computed from something else", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), (labels + labels).view(-1));
    return loss;
  }
)", Verb::RefusesWith, "labels-mismatch"},

    {"labels moved twice", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.to(torch::kCPU).to(logits.device()).view(-1));
  }
)", Verb::RefusesWith, "labels-mismatch"},
    {"labels moved to a device the program's function picks (evaluated again, it may pick another)", R"(
  c10::Device pick();
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.to(pick()).view(-1));
  }
)", Verb::RefusesWith, "labels-mismatch"},

    {"loss under a condition with side effects while the head runs outside it", R"(
  bool should_score();
  Output forward(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (should_score()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return {logits, loss};
  }
)", Verb::RefusesWith, "labels-mismatch"},

    {"labels test reads a local declared after the head", R"(
  torch::Tensor forward(torch::Tensor h, c10::optional<torch::Tensor> batch_labels) {
    auto logits = lm_head(h);
    auto labels = batch_labels;
    torch::Tensor loss;
    if (labels.has_value()) loss = F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
    return loss;
  }
)", Verb::RefusesWith, "labels-mismatch"},

    // ---- refused: loss-unsupported --------------------------------------------------------------
    {"class weights", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined())
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1), F::CrossEntropyFuncOptions().weight(class_weights));
    return loss;
  }
)", Verb::RefusesWith, "loss-unsupported"},
    {"reduction none", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined())
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1), F::CrossEntropyFuncOptions().reduction(torch::kNone));
    return loss;
  }
)", Verb::RefusesWith, "loss-unsupported"},
    {"positional class weights", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = at::cross_entropy_loss(logits.view({-1, 32}), labels.view(-1), class_weights);
    return loss;
  }
)", Verb::RefusesWith, "loss-unsupported"},

    {"a gradient penalty on the loss in the same function (create_graph)", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto loss = F::cross_entropy(logits, labels);
    auto g = torch::autograd::grad({loss}, {h}, {}, true, /*create_graph=*/true)[0];
    return loss + g.pow(2).sum();
  }
)", Verb::RefusesWith, "loss-unsupported"},
    {"a backward with create_graph from a flag, in a lambda of the function", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, bool second_order) {
    auto logits = lm_head(h);
    auto loss = F::cross_entropy(logits, labels);
    auto step = [&] { loss.backward({}, true, second_order); };
    step();
    return loss;
  }
)", Verb::RefusesWith, "loss-unsupported"},

    // ---- refused: in-macro ----------------------------------------------------------------------
    {"loss spelled by a macro", R"(
#define LM_LOSS(a, b) F::cross_entropy(a, b)
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = LM_LOSS(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "in-macro"},
    {"head spelled by a macro", R"(
#define HEAD(x) lm_head(x)
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = HEAD(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "in-macro"},

    {"options from an object-like macro", R"(
#define CE_OPTS F::CrossEntropyFuncOptions().ignore_index(-1)
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), CE_OPTS);
  }
)", Verb::RefusesWith, "in-macro"},
    {"a setter chain pasted by a macro", R"(
#define SMOOTHED .label_smoothing(0.1)
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), F::CrossEntropyFuncOptions() SMOOTHED);
  }
)", Verb::RefusesWith, "in-macro"},
    {"positional options from a function-like macro", R"(
#define WITH_IGNORE(a, b) at::cross_entropy_loss(a, b, {}, at::Reduction::Mean, -1)
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return WITH_IGNORE(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "in-macro"},
    // ---- pasted operands keep their grouping ----------------------------------------------------
    {"a comma expression as the hoisted input stays one initializer", R"(
  torch::Tensor prev_, cur_;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head((prev_ = h * 3, cur_ = h * 2));
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor prev_, cur_;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto lmfuse_hidden = (prev_ = h * 3, cur_ = h * 2);
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(lmfuse_hidden, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head((lmfuse_hidden));
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(lmfuse_hidden, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(lmfuse_hidden), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"a head reached through a dereferenced pointer keeps the dereference grouped", R"(
  torch::Tensor forward(torch::nn::Linear *hp, torch::Tensor h, torch::Tensor labels) {
    auto logits = (*hp)->forward(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::nn::Linear *hp, torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, (*hp)->weight, (*hp)->bias, "model.cpp:N") : (*hp)->forward(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, (*hp)->weight, (*hp)->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype((*hp)), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    // ---- refused: line-directive ----------------------------------------------------------------
    {"a #line directive of the program maps the function's lines (generated code)", R"(
#line 500 "generated_model.y"
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "line-directive"},
    {"a GNU linemarker of the program renumbers the function's lines", R"(
# 40 "model.cpp"
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "line-directive"},
    // ---- refused: position-dependent -----------------------------------------------------------
    {"__LINE__ in the loss's logits code, which the fallback and the lambda read on other lines", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({__LINE__ - 4, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"__COUNTER__ through a macro of the program in the logits code, which the copy expands twice", R"(
#define NEXT_ID __COUNTER__
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1 + 0 * NEXT_ID, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"__builtin_COLUMN() in the head's input, which the rewritten head line moves right", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h.view({__builtin_COLUMN() - 34, 16}));
    return F::cross_entropy(logits, labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"__func__ in the labels code, which names the lambda it is copied into", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view({sizeof(__func__) == 8 ? -1 : 1}));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"__builtin_LINE() as a member's default initialiser, evaluated where the loss builds the object", R"(
  struct Here { int64_t line = __builtin_LINE(); };
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({Here{}.line - 23, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"a write in the loss's logits code (a comma expression), which the fused call may run twice", R"(
  static inline int64_t calls = 0;  // not through `this`: no write of the model's
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, (++calls, 32)}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"a compound assignment in the labels code", R"(
  static inline int64_t calls = 0;  // not through `this`: no write of the model's
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view({(calls += 1) > 0 ? -1 : 1}));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"a call of the standard library with an effect in the loss's logits code", R"(
  static inline int64_t calls = 0;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, std::exchange(calls, calls + 1) >= 0 ? 32 : 16}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"a constexpr function of the standard library that writes through a reference, in the loss's logits code", R"(
  static inline const int64_t widths[2] = {16, 32};
  static inline const int64_t *next = widths;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, (std::advance(next, 1), *next)}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"a tensor function that draws from the default generator, in the loss's logits code", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, torch::randint(2, {1}).item() > 0 ? 32 : 16}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"a statement expression in the loss's logits code", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, ({ int64_t v = 32; v; })}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"a write in the labels test, which the rewrite repeats at the head", R"(
  static inline int64_t checks = 0;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if ((checks++, labels.defined())) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RefusesWith, "position-dependent"},
    {"__BASE_FILE__ elsewhere in the file, which in the copy names the copy", R"(
  const char *built_from = __BASE_FILE__;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"__FILE__ in the site's file naming it otherwise than by its real path (a relative name here): the "
     "copy's #line names the real path", R"(
  const char *source_name = __FILE__;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"__builtin_FILE() in the site's file naming it otherwise than by its real path", R"(
  const char *source_name = __builtin_FILE();
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"__builtin_FILE() as a default argument of a call in the site's file, evaluated where the call is", R"(
  static const char *tagged(const char *file = __builtin_FILE()) { return file; }
  const char *saved_from() { return tagged(); }
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"__LINE__ in a statement after the loss call on its line, which the rewrite does not move but whose line the copy shifts", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1)); int line = __LINE__;
    return loss;
  }
)", Verb::RefusesWith, "position-dependent"},
    {"__builtin_LINE() in a statement sharing the head's line", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h); int line = __builtin_LINE();
    return F::cross_entropy(logits.view({-1, line}), labels.view(-1));
  }
)", Verb::RefusesWith, "position-dependent"},
    {"__LINE__ read into a local between the head and the loss, which the rewrite does not move", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    int64_t line = __LINE__;
    return F::cross_entropy(logits.view({-1, line}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    int64_t line = __LINE__;
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, line}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, line}), labels.view(-1));
  }
)"},
    {"a #define inside the head's statement, which the rewritten head line would move", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h
#define SCALE 1
    );
    return F::cross_entropy(logits.view({-1, 32 * SCALE}), labels.view(-1));
  }
)", Verb::RefusesWith, "in-macro"},
    {"an option value expanded inside a macro's body", R"(
#define IGNORING(opts) opts.ignore_index(-1)
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), IGNORING(F::CrossEntropyFuncOptions()));
  }
)", Verb::RefusesWith, "in-macro"},
    // ---- not candidates -------------------------------------------------------------------------
    {"a cross_entropy of another namespace is not a candidate", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = mine::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::LeavesUnchanged, ""},
    {"a model without a loss is not a candidate", R"(
  torch::Tensor forward(torch::Tensor h) { return lm_head(h); }
)", Verb::LeavesUnchanged, ""},

    // ---- suppressed -----------------------------------------------------------------------------
    {"NOLINT(lmfuse) on the head line", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);  // NOLINT(lmfuse)
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::Suppresses, ""},
    {"NOLINTBEGIN/END(lmfuse) around the method", R"(
  // NOLINTBEGIN(bugprone-*, lmfuse)
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
  // NOLINTEND(bugprone-*, lmfuse)
)", Verb::Suppresses, ""},
    {"NOLINTNEXTLINE(lmfuse) before the if line", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    // NOLINTNEXTLINE(lmfuse)
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::Suppresses, ""},
    // ---- refused: template-dependent ------------------------------------------------------------
    {"a weight of a template parameter's type (a class whose conversion draws a dropout mask, say)", R"(
  template <class WT> torch::Tensor forward(torch::Tensor h, const WT &W, torch::Tensor labels) {
    auto logits = F::linear(h, W);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "template-dependent"},
    {"a loss resolved only at instantiation (labels of a template parameter's type, a using-directive)", R"(
  template <class Y> torch::Tensor forward(torch::Tensor h, const Y &labels) {
    using namespace torch::nn::functional;
    auto logits = lm_head(h);
    return cross_entropy(logits, labels);
  }
)", Verb::RefusesWith, "template-dependent"},
    {"a local of a template parameter's type between head and loss", R"(
  template <class Guard> torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    Guard guard(true);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "template-dependent"},
    {"the fused call's #include goes after the last include the preprocessor took, not into a block it skipped", R"(
#ifdef LMFUSE_NEVER_DEFINED
#include <vector>
#endif
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
#ifdef LMFUSE_NEVER_DEFINED
#include <vector>
#endif
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)"},
    {"a class template whose site names only members and concrete types is patched", R"(
};
template <int Width> struct Wide : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = this->lm_head(h);
    return F::cross_entropy(logits.view({-1, Width}), labels.view(-1));
  }
)", Verb::RewritesTo, R"(
};
template <int Width> struct Wide : torch::nn::Module {
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(h, this->lm_head->weight, this->lm_head->bias, "model.cpp:N") : this->lm_head(h);
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, this->lm_head->weight, this->lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, Width}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(this->lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, Width}), labels.view(-1));
  }
)"},
    {"a bare NOLINT belongs to other tools and does not suppress", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);  // NOLINT
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", Verb::RewritesTo, R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lmfuse::skip_logits() && labels.defined() ? lmfuse::skipped_logits(h, lm_head->weight, lm_head->bias, "model.cpp:N") : lm_head(h);  // NOLINT
    torch::Tensor loss;
    if (labels.defined()) loss = lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:N", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels, [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(lm_head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels), ::at::Tensor>()))
        : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)"},
};

}  // namespace

llvm::ArrayRef<Case> lmfuse::rewriter::testing::rewriteCases() { return Cases; }

TEST_CASE("rewriter cases", "[rewriter]") {
  for (const Case &Item : Cases)
    DYNAMIC_SECTION(Item.Name) { checkCase(Item); }
}

TEST_CASE("every refusal reason has at least two cases", "[rewriter]") {
  std::map<std::string, int> Counts;
  for (const Case &Item : Cases)
    if (Item.Kind == Verb::RefusesWith)
      ++Counts[Item.Expected];
  for (ReasonKind Reason : {ReasonKind::LogitsRebound, ReasonKind::LogitsSoftcapped, ReasonKind::HeadWrapped,
                            ReasonKind::HeadNotLinear, ReasonKind::LogitsIndexed, ReasonKind::LogitsUsedElsewhere,
                            ReasonKind::LabelsBranchNontrivial, ReasonKind::LabelsMismatch,
                            ReasonKind::LossUnsupported, ReasonKind::InMacro, ReasonKind::TemplateDependent}) {
    INFO(reasonCode(Reason).str());
    CHECK(Counts[reasonCode(Reason).str()] >= 2);
  }
}

TEST_CASE("patched sites record the effective options for the audit", "[rewriter]") {
  const std::string Members = R"(
  torch::nn::Linear biasless{torch::nn::LinearOptions(64, 32).bias(false)};
  torch::Tensor smoothed(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined())
      loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1),
                              F::CrossEntropyFuncOptions().ignore_index(-1).label_smoothing(0.25).reduction(torch::kSum));
    return loss;
  }
  torch::Tensor padded(torch::Tensor h, c10::optional<torch::Tensor> labels) {
    auto logits = biasless(h);
    auto shifted = logits.slice(1, 0, -1);
    torch::Tensor loss;
    if (labels) loss = F::cross_entropy(shifted.reshape({-1, 32}), labels->slice(1, 1).reshape({-1}),
                                        F::CrossEntropyFuncOptions().ignore_index(pad_id_));
    return loss;
  }
  torch::nn::Linear either{nullptr};
  explicit Model(bool head_bias) {
    either = head_bias ? torch::nn::Linear(64, 32) : torch::nn::Linear(torch::nn::LinearOptions(64, 32).bias(false));
  }
  torch::Tensor maybe_biased(torch::Tensor h, torch::Tensor labels) {
    auto logits = either(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)";
  RewriteResult Result = rewriteWithStubs(source(Members.c_str(), false));
  INFO(Result.Diagnostics);
  REQUIRE(Result.Parsed);
  REQUIRE(Result.Sites.size() == 3);
  // One construction keeps the bias and one drops it: known only when the model runs, so not `false`.
  REQUIRE(Result.Sites[2].Options);
  CHECK(Result.Sites[2].Function == "Model::maybe_biased");
  CHECK(Result.Sites[2].Options->Bias);
  const SiteRecord &Smoothed = Result.Sites[0];
  const SiteRecord &Padded = Result.Sites[1];
  REQUIRE(Smoothed.Function == "Model::smoothed");
  REQUIRE(Smoothed.Options);
  CHECK(Smoothed.Options->IgnoreIndex == -1);
  CHECK(Smoothed.Options->LabelSmoothing == Approx(0.25));
  CHECK(Smoothed.Options->Reduction == "sum");
  CHECK_FALSE(Smoothed.Options->Shift);
  CHECK(Smoothed.Options->Bias);
  CHECK(Smoothed.Head == "lm_head");
  CHECK(Smoothed.Loss == "torch::nn::functional::cross_entropy");
  REQUIRE(Padded.Function == "Model::padded");
  REQUIRE(Padded.Options);
  CHECK(Padded.Options->IgnoreIndex == -100);
  CHECK(Padded.Options->IgnoreIndexExpression == "pad_id_");
  CHECK(Padded.Options->Reduction == "mean");
  CHECK(Padded.Options->Shift);
  CHECK_FALSE(Padded.Options->Bias);
  CHECK(Padded.Head == "biasless");
  // The site is reported at the head call, 1-based.
  CHECK(Padded.Line > Smoothed.Line);
  CHECK(Smoothed.Column > 1);
}

TEST_CASE("a source with compile errors is not analysed", "[rewriter]") {
  const std::string Broken = source(R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h)
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", false);
  RewriteResult Result = rewriteWithStubs(Broken);
  CHECK_FALSE(Result.Parsed);
  CHECK(Result.Sites.empty());
  CHECK(Result.Code == Broken);
  CHECK(Result.Diagnostics.find("error") != std::string::npos);
}

TEST_CASE("std::optional labels, tested as bool and unwrapped with value()", "[rewriter]") {
  const std::string Before = R"(#include <optional>
#include <torch/torch.h>
struct Model : torch::nn::Module {
  torch::nn::Linear head{nullptr};
  torch::Tensor forward(torch::Tensor h, std::optional<torch::Tensor> labels) {
    auto logits = head(h);
    if (!labels) return logits;
    return torch::nn::functional::cross_entropy(logits.view({-1, 32}), labels.value().view(-1));
  }
};
)";
  const std::string After = R"(#include <optional>
#include <torch/torch.h>
#include <lmfuse/torch.h>
struct Model : torch::nn::Module {
  torch::nn::Linear head{nullptr};
  torch::Tensor forward(torch::Tensor h, std::optional<torch::Tensor> labels) {
    auto logits = lmfuse::skip_logits() && static_cast<bool>(labels) ? lmfuse::skipped_logits(h, head->weight, head->bias, "model.cpp:6") : head(h);
    if (!labels) return logits;
    return lmfuse::enabled()
        ? lmfuse::linear_cross_entropy(h, head->weight, head->bias, labels.value(), lmfuse::LossOptions()
            .logits_as_passed({"model.cpp:8", logits, [&](const torch::Tensor &lmfuse_logits) { return lmfuse_logits.view({-1, 32}); }, {}, labels.value(), [&](const torch::Tensor &lmfuse_labels) { return lmfuse_labels.view(-1); }})
            .analysed(lmfuse::AnalysedTypes<decltype(head), ::torch::nn::Linear, decltype(h), ::at::Tensor, decltype(labels.value()), ::at::Tensor>()))
        : torch::nn::functional::cross_entropy(logits.view({-1, 32}), labels.value().view(-1));
  }
};
)";
  RewriteResult Result = rewriteWithStubs(Before);
  INFO(Result.Diagnostics << Result.Code);
  REQUIRE(Result.Parsed);
  REQUIRE(Result.Sites.size() == 1);
  CHECK(Result.Sites[0].Status == SiteStatus::Patched);
  CHECK(normalizeWhitespace(Result.Code) == normalizeWhitespace(After));
  RewriteResult Again = rewriteWithStubs(Result.Code);
  REQUIRE(Again.Parsed);
  CHECK(Again.Code == Result.Code);
}

TEST_CASE("sites in a user header are found and planned; the main file is left alone", "[rewriter]") {
  const std::map<std::string, std::string> Headers = {{"/virtual/gpt.h", source(R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    torch::Tensor loss;
    if (labels.defined()) loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
)", false)}};
  const std::string Main = "#include \"gpt.h\"\nint main() { return 0; }\n";
  std::vector<std::string> Args = stubArgs();
  Args.push_back("-I/virtual");
  RewriteResult Result = rewriteSource(Main, Args, defaultPatterns(), "/virtual/main.cpp", Headers);
  INFO(Result.Diagnostics);
  REQUIRE(Result.Parsed);
  REQUIRE(Result.Sites.size() == 1);
  CHECK(Result.Sites[0].File == "/virtual/gpt.h");
  CHECK(Result.Sites[0].Status == SiteStatus::Patched);
  CHECK(Result.Sites[0].Function == "Model::forward");
  CHECK(Result.Code == Main);
}

TEST_CASE("a header included twice in a unit is patched only where every inclusion plans the same edits",
          "[rewriter]") {
  // An X-macro template: each inclusion defines a model around the head module type LM_HEAD names.
  const std::map<std::string, std::string> Headers = {{"/virtual/lm.inc", R"(
struct LM_NAME : torch::nn::Module {
  LM_HEAD lm_head{nullptr};
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return torch::nn::functional::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
};
#undef LM_NAME
#undef LM_HEAD
)"}};
  auto run = [&](const std::string &SecondHead) {
    const std::string Main = "#include <torch/torch.h>\n"
                             "struct ScaledImpl : torch::nn::Module { torch::Tensor forward(const torch::Tensor &x); };\n"
                             "TORCH_MODULE(Scaled);\n"
                             "#define LM_NAME Plain\n#define LM_HEAD torch::nn::Linear\n#include \"lm.inc\"\n"
                             "#define LM_NAME Other\n#define LM_HEAD " + SecondHead + "\n#include \"lm.inc\"\n";
    std::vector<std::string> Args = stubArgs();
    Args.push_back("-I/virtual");
    return rewriteSource(Main, Args, defaultPatterns(), "/virtual/main.cpp", Headers);
  };
  // The second inclusion's head is the program's module: refused there, so the file's one text may not
  // change, or that model would run the fused loss too.
  RewriteResult Differ = run("Scaled");
  INFO(Differ.Diagnostics << describeSites(Differ));
  REQUIRE(Differ.Parsed);
  REQUIRE(Differ.Sites.size() == 2);
  CHECK(std::count_if(Differ.Sites.begin(), Differ.Sites.end(), [](const SiteRecord &Site) {
          return Site.Status == SiteStatus::Failed && Site.Reason == ReasonKind::EditConflict;
        }) == 1);
  CHECK(std::count_if(Differ.Sites.begin(), Differ.Sites.end(), [](const SiteRecord &Site) {
          return Site.Status == SiteStatus::Unmatched && Site.Reason == ReasonKind::HeadNotLinear;
        }) == 1);
  // Both inclusions plan the same edits: both patched.
  RewriteResult Agree = run("torch::nn::Linear");
  INFO(Agree.Diagnostics << describeSites(Agree));
  REQUIRE(Agree.Parsed);
  REQUIRE(Agree.Sites.size() == 2);
  for (const SiteRecord &Site : Agree.Sites)
    CHECK(Site.Status == SiteStatus::Patched);
}

TEST_CASE("two hoisted sites in one function get two names", "[rewriter]") {
  RewriteResult Result = rewriteWithStubs(source(R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto a = lm_head(ln_f(x));
    auto first = F::cross_entropy(a.view({-1, 32}), labels.view(-1));
    auto b = lm_head(ln_f(x * 2.0));
    return first + F::cross_entropy(b.view({-1, 32}), labels.view(-1));
  }
)", false));
  INFO(Result.Diagnostics << describeSites(Result) << Result.Code);
  REQUIRE(Result.Sites.size() == 2);
  CHECK(Result.Sites[0].Status == SiteStatus::Patched);
  CHECK(Result.Sites[1].Status == SiteStatus::Patched);
  CHECK(llvm::StringRef(Result.Code).contains("auto lmfuse_hidden = ln_f(x);"));
  CHECK(llvm::StringRef(Result.Code).contains("auto lmfuse_hidden2 = ln_f(x * 2.0);"));
  RewriteResult Again = rewriteWithStubs(Result.Code);
  REQUIRE(Again.Parsed);
  CHECK(Again.Code == Result.Code);
}

TEST_CASE("a function that calls only the fused loss is already patched", "[rewriter]") {
  RewriteResult Result = rewriteWithStubs(std::string(PatchedPrelude) + ModelOpen + R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    return lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions());
  }
)" + ModelClose);
  INFO(Result.Diagnostics << describeSites(Result));
  REQUIRE(Result.Parsed);
  REQUIRE(Result.Sites.size() == 1);
  CHECK(Result.Sites[0].Status == SiteStatus::AlreadyPatched);
  CHECK(Result.Sites[0].Function == "Model::forward");
  CHECK(Result.Sites[0].Line == 21);  // the fused call
}

TEST_CASE("a loss beside a fused call elsewhere in its function is a site of its own", "[rewriter]") {
  // A cross-check that calls the fused loss does not make the original loss fused: only a loss that is the
  // fallback of a fused call is already patched.
  RewriteResult Result = rewriteWithStubs(std::string(PatchedPrelude) + ModelOpen + R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    if (check_fused) {
      auto reference = lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions());
      last_loss = reference;
    }
    return loss;
  }
  bool check_fused = false;
)" + ModelClose);
  INFO(Result.Diagnostics << describeSites(Result));
  REQUIRE(Result.Parsed);
  REQUIRE(Result.Sites.size() == 1);
  CHECK(Result.Sites[0].Status == SiteStatus::Patched);
  RewriteResult Again = rewriteWithStubs(Result.Code);
  INFO(describeSites(Again));
  REQUIRE(Again.Sites.size() == 1);
  CHECK(Again.Sites[0].Status == SiteStatus::AlreadyPatched);
  CHECK_THAT(Again.Sites[0].Detail, Catch::Matchers::Contains("which is its fallback"));
  CHECK(Again.Code == Result.Code);
}

TEST_CASE("a loss behind the program's own switch to a fused call is not already patched", "[rewriter]") {
  // `cfg ? fused : loss` written by hand may keep running the loss (the switch off): only the rewrite's own
  // switch (the replacement's `enabled`) makes its fallback already patched. The loss is analysed as a site.
  RewriteResult Result = rewriteWithStubs(std::string(PatchedPrelude) + ModelOpen + R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto loss = use_fused ? lmfuse::linear_cross_entropy(x, lm_head->weight, lm_head->bias, labels, lmfuse::LossOptions())
                          : F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    return loss;
  }
  bool use_fused = false;
)" + ModelClose);
  INFO(Result.Diagnostics << describeSites(Result));
  REQUIRE(Result.Parsed);
  REQUIRE(Result.Sites.size() == 1);
  CHECK(Result.Sites[0].Status == SiteStatus::Patched);  // its fallback, as any other loss
}

TEST_CASE("run-time options round-trip through the audit and the cache", "[rewriter][audit]") {
  RewriteResult Result = rewriteWithStubs(source(R"(
  double smoothing_ = 0.1;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1),
                            F::CrossEntropyFuncOptions().ignore_index(pad_id_).label_smoothing(smoothing_));
  }
)", false));
  REQUIRE(Result.Sites.size() == 1);
  const SiteRecord &Site = Result.Sites[0];
  REQUIRE(Site.Options);
  llvm::json::Object Json = siteToJson(Site);
  const llvm::json::Object *Options = Json.getObject("options");
  REQUIRE(Options);
  // The audit states what the rewritten call passes: the expressions, not LibTorch's defaults.
  REQUIRE(Options->getObject("ignore_index"));
  CHECK(Options->getObject("ignore_index")->getString("expr") == llvm::StringRef("pad_id_"));
  REQUIRE(Options->getObject("label_smoothing"));
  CHECK(Options->getObject("label_smoothing")->getString("expr") == llvm::StringRef("smoothing_"));
  CHECK(Options->getString("reduction") == llvm::StringRef("mean"));
  auto Back = siteFromJson(llvm::json::Value(std::move(Json)));
  REQUIRE(static_cast<bool>(Back));
  REQUIRE(Back->Options);
  CHECK(Back->Options->IgnoreIndexExpression == "pad_id_");
  CHECK(Back->Options->LabelSmoothingExpression == "smoothing_");
  CHECK(llvm::json::Value(siteToJson(*Back)) == llvm::json::Value(siteToJson(Site)));
}

TEST_CASE("the library's own code is never a site, even when its headers are not system headers", "[rewriter]") {
  // LibTorch on -I: its inline functional API calls a loss pattern inside namespace torch.
  const std::string Library = R"(#include <torch/torch.h>
namespace torch { namespace nn { namespace functional { namespace detail {
inline Tensor cross_entropy_from_linear(const Tensor &h, const Tensor &w, const Tensor &y) {
  auto logits = torch::nn::functional::linear(h, w);
  return torch::nn::functional::cross_entropy(logits, y);
}
}}}}
)";
  RewriteResult Result = rewriteSource(Library, stubArgs(), defaultPatterns(), "library.cpp",
                                       {});
  INFO(Result.Diagnostics << describeSites(Result));
  REQUIRE(Result.Parsed);
  CHECK(Result.Sites.empty());
  CHECK(Result.Code == Library);
}

TEST_CASE("a pattern naming an argument the call lacks records the site instead of dropping it", "[rewriter]") {
  PatternSet Patterns = defaultPatterns();
  for (LossPattern &Loss : Patterns.Losses)
    Loss.Target = 7;
  RewriteResult Result = rewriteSource(source(R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = lm_head(h);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", false), stubArgs(), Patterns, "model.cpp");
  INFO(Result.Diagnostics << describeSites(Result));
  REQUIRE(Result.Sites.size() == 1);
  CHECK(Result.Sites[0].Status == SiteStatus::Unmatched);
  CHECK(Result.Sites[0].Reason == ReasonKind::LossUnsupported);
  CHECK(llvm::StringRef(Result.Sites[0].Detail).contains("names argument 7"));
}

TEST_CASE("refusal details name what is wrong with the statement they point at", "[rewriter]") {
  struct Detail {
    const char *Members;
    const char *Reason;
    const char *Says;
  };
  const Detail Details[] = {
      {R"(
  struct OverloadedLinearImpl : torch::nn::LinearImpl {
    using LinearImpl::forward;
    torch::Tensor forward(int rows);
  };
  OverloadedLinearImpl *overloaded_head_ = nullptr;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = overloaded_head_->forward(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "head-not-linear", "`OverloadedLinearImpl` declares `forward` of its own: the fused call computes the library's linear map"},
      {R"(
  struct CallingLinear : torch::nn::Linear {
    using Linear::Linear;
    using ModuleHolder::operator();
    torch::Tensor operator()(int rows);
  };
  CallingLinear calling_head_{nullptr};
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = calling_head_(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", "head-not-linear", "`CallingLinear` declares `operator()` of its own"},
      {R"(
  torch::Tensor targets_of(const torch::Tensor &ids);
  torch::Tensor forward(torch::Tensor x, torch::Tensor ids) {
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, 32}), targets_of(ids));
  }
)", "labels-mismatch", "`targets_of(ids)` is not a variable"},
      {R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor y) {
    auto yy = y.clone();
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, 32}), yy.view(-1));
  }
)", "labels-mismatch", "`yy` is made from `y.clone()`"},
      {R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    x = lm_head(x);
    return F::cross_entropy(x.view({-1, 32}), labels.view(-1));
  }
)", "logits-rebound", "`x` is the head's input and is re-bound to its output"},
      {R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor y) {
    auto logits = lm_head(x);
    torch::Tensor loss;
    if (y.size(0) > 0)
      loss = F::cross_entropy(logits.view({-1, 32}), y.view(-1));
    return loss;
  }
)", "labels-mismatch", "`y.size(0) > 0`, which is not a presence test of the labels"},
      {R"(
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x);
    auto shift_logits = logits.slice(1, 0, -1);
    auto shift_labels = labels;
    shift_labels = shift_labels.view(-1);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_labels);
  }
)", "logits-indexed", "the logits are shifted but the labels are not"},
      {R"(
  torch::Tensor forward(torch::Tensor x, c10::optional<torch::Tensor> labels, bool eval) {
    auto logits = lm_head(x);
    if (eval) return logits;
    return F::cross_entropy(logits.view({-1, 32}), labels->view(-1));
  }
)", "logits-used-elsewhere", "handed out before the loss is computed, where the fused path holds only its shape (`return logits`)"},
      {R"(
  struct DefaultedOptions : F::CrossEntropyFuncOptions {
    DefaultedOptions() { ignore_index(7); }
  };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto options = DefaultedOptions();
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), options);
  }
)", "loss-unsupported", "the options are a `Model::DefaultedOptions`, a class this program declares (model.cpp:"},
      {R"(
  struct StoringOptions : F::CrossEntropyFuncOptions {
    StoringOptions &ignore_index(int64_t);
  };
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto options = StoringOptions().ignore_index(-1);
    auto logits = lm_head(x);
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), options);
  }
)", "loss-unsupported", "the option `ignore_index` is set by `Model::StoringOptions::ignore_index`, which this program declares"},
      {R"(
  static constexpr int kTime = 1;
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x).slice(kTime, 0, -1);
    {
      constexpr int kTime = 0;
      return F::cross_entropy(logits.reshape({-1, 32}), labels.slice(1, 1).reshape(-1));
    }
  }
)", "name-captured", "the rewritten call checks `kTime`, read on line"},
      {R"(
  static constexpr int kTime = 1;
#define TIME_DIM() (kTime)
  torch::Tensor forward(torch::Tensor x, torch::Tensor labels) {
    auto logits = lm_head(x).slice(TIME_DIM(), 0, -1);
#undef TIME_DIM
#define TIME_DIM() 1
    return F::cross_entropy(logits.reshape({-1, 32}), labels.slice(1, 1).reshape(-1));
  }
)", "name-captured", "the rewritten call checks `TIME_DIM()`, read on line 22, at the loss on line 25, where `TIME_DIM` is another macro than where it was read"},
  };
  for (const Detail &Item : Details) {
    RewriteResult Result = rewriteWithStubs(source(Item.Members, false));
    INFO(describeSites(Result) << Result.Diagnostics);
    REQUIRE(Result.Sites.size() == 1);
    CHECK(reasonCode(Result.Sites[0].Reason) == Item.Reason);
    CHECK(llvm::StringRef(Result.Sites[0].Detail).contains(Item.Says));
  }
}

TEST_CASE("the guard repeated at the head is converted to bool first: no operator of the program takes it", "[rewriter]") {
  // The program's `operator&&` for the labels' type would take `skip_logits() && labels` (and its `operator!`
  // a written `!labels`), which the original never calls; the written test converts the condition as the `if`
  // did and applies only built-in operators to it.
  const std::string Before = R"(#include <optional>
#include <torch/torch.h>
bool operator&&(bool, const std::optional<torch::Tensor> &) { return true; }
bool operator!(const std::optional<torch::Tensor> &) { return false; }
struct Model : torch::nn::Module {
  torch::nn::Linear head{nullptr};
  torch::Tensor forward(torch::Tensor h, std::optional<torch::Tensor> labels) {
    auto logits = head(h);
    torch::Tensor loss;
    if (labels) loss = torch::nn::functional::cross_entropy(logits.view({-1, 32}), labels.value().view(-1));
    return loss;
  }
  torch::Tensor other(torch::Tensor h, std::optional<torch::Tensor> labels) {
    auto logits = head(h);
    torch::Tensor loss;
    if (labels) {} else loss = torch::nn::functional::cross_entropy(logits.view({-1, 32}), labels.value().view(-1));
    return loss;
  }
};
)";
  RewriteResult Result = rewriteWithStubs(Before);
  INFO(Result.Diagnostics << Result.Code);
  REQUIRE(Result.Parsed);
  REQUIRE(Result.Sites.size() == 2);
  CHECK(Result.Code.find("lmfuse::skip_logits() && static_cast<bool>(labels) ?") != std::string::npos);
  CHECK(Result.Code.find("lmfuse::skip_logits() && labels ?") == std::string::npos);
  // The loss in the else branch runs where the condition is false: its test is negated after the conversion.
  CHECK(Result.Sites[1].Status == SiteStatus::Patched);
  CHECK(Result.Code.find("lmfuse::skip_logits() && !static_cast<bool>(labels) ?") != std::string::npos);
  CHECK(Result.Code.find("!(labels)") == std::string::npos);
}
