// What the rewrite spells again at another place (the head's input, weight and bias at the loss, the labels test
// at the head, shifted labels' code at the loss) is compared in the re-parse of the rewritten code with the code it
// copies: where the compiler reads it as other declarations, operators or values, the site is refused and the file
// is left as it was. Each case below is a way of changing what a name means between two places that the analysis'
// own checks (refusals.h) do not list, refused by that comparison (its detail says so); each would be a silently
// different training run if it were rewritten.
#include <catch2/catch.hpp>

#include "rewrite_harness.h"

using namespace lmfuse::rewriter;
using namespace lmfuse::rewriter::testing;

namespace {

constexpr const char *ReadOtherwise = "in the re-parse of the rewritten code";

const Refused Respelled[] = {
    {{"an earlier declarator of the loss's own declaration hiding the head's input", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor other, torch::Tensor labels) {
    auto logits = lm_head(h);
    {
      torch::Tensor h = other, loss = F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
      return loss;
    }
  }
)", Verb::RefusesWith, "inputs-modified"},
     "the head's input `h`"},
    {{"a declaration behind a statement label in the loss's block hiding the head's input", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor other, torch::Tensor labels) {
    auto logits = lm_head(h);
    {
    again:
      torch::Tensor h = other;
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
  }
)", Verb::RefusesWith, "inputs-modified"},
     "it names another `h` there"},
    {{"an enumerator of the loss's block hiding the constant the head's weight is indexed with", R"(
  torch::Tensor weights[2];
  static constexpr int k = 0;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, weights[k]);
    {
      enum { k = 1 };
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
  }
)", Verb::RefusesWith, "inputs-modified"},
     "the head's weight `weights[k]`"},
    {{"a namespace alias in the loss's block redirecting the namespace the weight's macro names", R"(
#include <globals.h>
#define WEIGHT weights::w
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, WEIGHT);
    {
      namespace weights = other_weights;
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
  }
)", Verb::RefusesWith, "inputs-modified"},
     "it names `other_weights::w`"},
    {{"a using-declaration of an operator in the loss's block, which the weight's product would call there", R"(
#include <globals.h>
  torch::Tensor w;
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, w * 0.5);
    {
      using scaling::operator*;
      return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
  }
)", Verb::RefusesWith, "inputs-modified"},
     "it calls `scaling::operator*`"},
    {{"a macro the weight's macro expands to, defined again between the head and the loss", R"(
  torch::Tensor w1, w2;
#define INNER w1
#define WEIGHT INNER
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, WEIGHT);
#undef INNER
#define INNER w2
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
     "it reads `Model::w2`"},
    {{"a literal the weight's macro expands to through another, defined again between the head and the loss", R"(
  torch::Tensor weights[2];
#define INDEX 0
#define WEIGHT weights[INDEX]
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto logits = F::linear(h, WEIGHT);
#undef INDEX
#define INDEX 1
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "inputs-modified"},
     "a macro that expands otherwise"},
    {{"the labels a local shifted, hidden at the loss by an earlier declarator of the loss's declaration", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor targets, torch::Tensor others) {
    auto logits = lm_head(h);
    auto shift_logits = logits.slice(1, 0, -1);
    auto shift_targets = targets.slice(1, 1);
    {
      torch::Tensor targets = others, loss = F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
      return loss;
    }
  }
)", Verb::RefusesWith, "labels-mismatch"},
     "the labels `targets`"},
    {{"the labels test repeated at the head, reading a local behind a statement label there", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels, torch::Tensor others) {
    auto logits = lm_head(h);
    {
    again:
      torch::Tensor labels = others;
      if (labels.defined())
        return F::cross_entropy(logits.view({-1, 32}), labels.view(-1));
    }
    return {};
  }
)", Verb::RefusesWith, "labels-mismatch"},
     "the labels test `labels.defined()`"},
    {{"an upcast's dtype, hidden at the loss by a constant of its block", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    using c10::kFloat;
    auto logits = lm_head(h);
    auto up = logits.to(kFloat);
    {
      constexpr auto kFloat = c10::kHalf;
      return F::cross_entropy(up.view({-1, 32}), labels.view(-1));
    }
  }
)", Verb::RefusesWith, "name-captured"},
     "`kFloat`"},
    {{"the labels' device, read by the shift's local and hidden at the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor targets) {
    c10::Device dev(c10::kCUDA, 0);
    auto logits = lm_head(h);
    auto shift_logits = logits.slice(1, 0, -1);
    auto shift_targets = targets.slice(1, 1).to(dev);
    {
      c10::Device dev(c10::kCPU);
      return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
    }
  }
)", Verb::RefusesWith, "name-captured"},
     "`dev`"},
    {{"the labels' cast type, read by the shift's local and hidden at the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor targets) {
    using c10::kLong;
    auto logits = lm_head(h);
    auto shift_logits = logits.slice(1, 0, -1);
    auto shift_targets = targets.slice(1, 1).to(kLong);
    {
      constexpr auto kLong = c10::kInt;
      return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
    }
  }
)", Verb::RefusesWith, "name-captured"},
     "`kLong`"},
    {{"an option's value in an options local, a macro defined again before the loss", R"(
#define PAD -100
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto opts = F::CrossEntropyFuncOptions().ignore_index(PAD);
    auto logits = lm_head(h);
#undef PAD
#define PAD 0
    return F::cross_entropy(logits.view({-1, 32}), labels.view(-1), opts);
  }
)", Verb::RefusesWith, "name-captured"},
     "`PAD`"},
};

// What the fused call writes again must hold the same value there as well as name the same declaration: a dtype
// or labels device read from a variable written in between is refused by the analysis.
const Case Written[] = {
    {"an upcast through a variable named like a dtype, written before the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor labels) {
    auto kFloat = c10::kFloat;
    auto logits = lm_head(h);
    auto up = logits.to(kFloat);
    kFloat = c10::kHalf;
    return F::cross_entropy(up.view({-1, 32}), labels.view(-1));
  }
)", Verb::RefusesWith, "logits-rebound"},
    {"the labels' device a shift's local moved them to, written before the loss", R"(
  torch::Tensor forward(torch::Tensor h, torch::Tensor targets) {
    c10::Device dev(c10::kCUDA, 0);
    auto logits = lm_head(h);
    auto shift_logits = logits.slice(1, 0, -1);
    auto shift_targets = targets.slice(1, 1).to(dev);
    dev = c10::Device(c10::kCPU);
    return F::cross_entropy(shift_logits.reshape({-1, 32}), shift_targets.reshape({-1}));
  }
)", Verb::RefusesWith, "logits-indexed"},
};

TEST_CASE("what the fused call writes again holds the same value where it is written", "[respelling]") {
  for (const Case &Item : Written)
    SECTION(Item.Name) { checkCase(Item); }
}

TEST_CASE("code the rewrite spells again that the compiler reads otherwise there is refused", "[respelling]") {
  for (const Refused &Refusal : Respelled) {
    SECTION(Refusal.Item.Name) {
      checkRefused(Refusal);
      RewriteResult Result = rewriteWithStubs(source(Refusal.Item.Before, false));
      CHECK(llvm::StringRef(Result.Sites[0].Detail).contains(ReadOtherwise));
    }
  }
}

}  // namespace
