// A rewritten call against the original it replaced (F::linear, then cross_entropy), on operands and in contexts
// LibTorch handles its own way: tensors whose values are not plainly in their memory (a negative bit, an
// efficient zero tensor, a functionalization wrapper, meta tensors), autograd's keys excluded from dispatch by a
// guard in the caller, the JIT tracer, and the layouts of the gradients autograd hands a program (column-major
// operands, a 2-D hidden's gradient as a tensor of its own). Each case runs both programs and compares what a
// program can see: whether it throws, the loss's value and requires_grad, and each gradient's values, strides
// and whether it is a view. Fresh random inputs each run (seed printed).
#include <lmfuse/torch.h>
#include <torch/torch.h>

#include <ATen/FunctionalTensorWrapper.h>
#include <torch/csrc/jit/frontend/tracer.h>
// c10's logging defines a glog-style CHECK that would shadow Catch's: LibTorch first, its CHECK dropped, then Catch.
#undef CHECK
#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace F = torch::nn::functional;

namespace {

constexpr int64_t kTokens = 6, kDim = 8, kVocab = 11;

struct Site {
  torch::Tensor hidden, weight, bias, labels;
  std::vector<torch::Tensor> inputs;  // what the gradients are asked of (leaves or not)
};

F::CrossEntropyFuncOptions lossOptions(lmfuse::Reduction reduction) {
  auto options = F::CrossEntropyFuncOptions();
  if (reduction == lmfuse::Reduction::Sum) options.reduction(torch::kSum);
  if (reduction == lmfuse::Reduction::None) options.reduction(torch::kNone);
  return options;
}

// The site as written: `auto logits = F::linear(h, W, b); loss = F::cross_entropy(logits, labels, ...)`.
torch::Tensor original(const Site& site, lmfuse::Reduction reduction) {
  const auto logits = F::linear(site.hidden, site.weight, site.bias);
  return F::cross_entropy(logits, site.labels, lossOptions(reduction));
}

// The same site as the tool rewrites it: the head skipped, the loss fused, the loss's codes handed over.
torch::Tensor rewritten(const Site& site, lmfuse::Reduction reduction) {
  const auto logits = lmfuse::skip_logits() ? lmfuse::skipped_logits(site.hidden, site.weight, site.bias, "model.cpp:9")
                                            : F::linear(site.hidden, site.weight, site.bias);
  const auto same = [](const torch::Tensor& tensor) { return tensor; };
  return lmfuse::linear_cross_entropy(
      site.hidden, site.weight, site.bias, site.labels,
      lmfuse::LossOptions().reduction(reduction).logits_as_passed({"model.cpp:10", logits, same, {}, site.labels, same}));
}

uint64_t freshSeed() {
  static const uint64_t seed = std::random_device{}();
  return seed;
}

std::string errorOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const std::exception& error) {
    const std::string what = error.what();
    return what.empty() ? std::string("(an exception without a message)") : what;
  }
  return {};
}

// Values a program can read: a functionalization wrapper's are its wrapped tensor's; a meta tensor has none.
torch::Tensor readable(const torch::Tensor& tensor) {
  if (at::functionalization::impl::isFunctionalTensor(tensor))
    return at::functionalization::impl::from_functional_tensor(tensor);
  return tensor;
}

struct Seen {
  std::string error;
  torch::Tensor loss;
  std::vector<torch::Tensor> grads;
};

using Within = std::function<void(const std::function<void()>&)>;

Seen run(const std::function<Site()>& make, lmfuse::Reduction reduction, bool fused, const Within& within) {
  Seen seen;
  seen.error = errorOf([&] {
    torch::manual_seed(freshSeed());  // the same operands for both programs
    const Site site = make();
    within([&] { seen.loss = fused ? rewritten(site, reduction) : original(site, reduction); });
    if (!seen.loss.requires_grad()) return;
    const auto grads = torch::autograd::grad({seen.loss.sum()}, site.inputs, {}, /*retain_graph=*/false,
                                             /*create_graph=*/false, /*allow_unused=*/true);
    seen.grads.assign(grads.begin(), grads.end());
  });
  return seen;
}

std::string describe(const torch::Tensor& tensor) {
  if (!tensor.defined()) return "undefined";
  std::ostringstream out;
  out << tensor.sizes() << " strides " << tensor.strides() << (tensor.is_view() ? " a view" : " not a view") << " on "
      << tensor.device();
  return out.str();
}

void compare(const Seen& before, const Seen& after) {
  INFO("original: " << (before.error.empty() ? "ran" : before.error));
  INFO("rewritten: " << (after.error.empty() ? "ran" : after.error));
  // CHECK, not REQUIRE, throughout: one case's difference must not hide the next case's.
  CHECK(before.error.empty() == after.error.empty());
  if (!before.error.empty() || !after.error.empty()) return;
  CHECK(before.loss.requires_grad() == after.loss.requires_grad());
  CHECK(before.loss.sizes() == after.loss.sizes());
  CHECK(before.loss.device() == after.loss.device());
  if (!before.loss.is_meta()) {
    const auto expected = readable(before.loss).to(torch::kDouble), actual = readable(after.loss).to(torch::kDouble);
    CHECK(torch::allclose(actual, expected, 1e-5, 1e-6, /*equal_nan=*/true));
  }
  CHECK(before.grads.size() == after.grads.size());
  if (before.grads.size() != after.grads.size()) return;
  for (size_t i = 0; i < before.grads.size(); ++i) {
    const torch::Tensor &expected = before.grads[i], &actual = after.grads[i];
    INFO("gradient " << i << ": original " << describe(expected) << ", rewritten " << describe(actual));
    CHECK(expected.defined() == actual.defined());
    if (!expected.defined() || !actual.defined()) continue;
    CHECK(expected.sizes() == actual.sizes());
    CHECK(expected.strides() == actual.strides());
    CHECK(expected.is_view() == actual.is_view());
    if (!expected.is_meta())
      CHECK(torch::allclose(readable(actual).to(torch::kDouble), readable(expected).to(torch::kDouble), 1e-5, 1e-6));
  }
}

torch::Tensor leaf(torch::Tensor tensor) { return tensor.requires_grad_(true); }

torch::Tensor labels(const torch::Device& device = torch::kCPU) {
  return torch::randint(0, kVocab, {kTokens}, torch::kLong).to(device);
}

struct Case {
  const char* name;
  std::function<Site()> make;
  std::vector<lmfuse::Reduction> reductions = {lmfuse::Reduction::Mean};
};

const auto plain = [](const std::function<void()>& body) { body(); };

}  // namespace

TEST_CASE("operands whose values are not plainly in their memory compute what the original computes",
          "[torch][adapter][operands]") {
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  namespace FI = at::functionalization::impl;
  const std::vector<Case> cases = {
      {"hidden states with the negative bit (at::_neg_view)",
       [] {
         auto x = leaf(torch::randn({kTokens, kDim}));
         auto w = leaf(torch::randn({kVocab, kDim}));
         return Site{at::_neg_view(x), w, {}, labels(), {x, w}};
       },
       {lmfuse::Reduction::Mean, lmfuse::Reduction::None}},
      {"a weight and a bias with the negative bit",
       [] {
         auto x = leaf(torch::randn({kTokens, kDim}));
         auto w = leaf(torch::randn({kVocab, kDim})), b = leaf(torch::randn({kVocab}));
         return Site{x, at::_neg_view(w), at::_neg_view(b), labels(), {x, w, b}};
       }},
      {"labels with the negative bit",
       [] {
         auto x = leaf(torch::randn({kTokens, kDim}));
         return Site{x, torch::randn({kVocab, kDim}), {}, at::_neg_view(-labels()), {x}};
       }},
      {"an efficient zero tensor as hidden states",
       [] {
         auto w = leaf(torch::randn({kVocab, kDim}));
         return Site{at::_efficientzerotensor({kTokens, kDim}), w, {}, labels(), {w}};
       }},
      {"functionalization wrappers as hidden states and labels",
       [] {
         return Site{FI::to_functional_tensor(torch::randn({kTokens, kDim})), torch::randn({kVocab, kDim}), {},
                     FI::to_functional_tensor(labels()), {}};
       }},
      {"labels on the meta device beside CPU operands",
       [] {
         auto x = leaf(torch::randn({kTokens, kDim}));
         return Site{x, torch::randn({kVocab, kDim}), {}, labels(torch::kMeta), {x}};
       }},
      {"meta tensors",
       [] {
         auto x = leaf(torch::empty({kTokens, kDim}, torch::kMeta));
         auto w = leaf(torch::empty({kVocab, kDim}, torch::kMeta));
         return Site{x, w, {}, torch::empty({kTokens}, torch::TensorOptions(torch::kMeta).dtype(torch::kLong)), {x, w}};
       }},
  };
  for (const Case& item : cases)
    for (const lmfuse::Reduction reduction : item.reductions) {
      INFO(item.name << ", reduction " << static_cast<int>(reduction));
      compare(run(item.make, reduction, false, plain), run(item.make, reduction, true, plain));
    }
}

TEST_CASE("autograd's keys excluded from dispatch in the caller: no graph, as the original records none",
          "[torch][adapter][operands]") {
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  const auto make = [] {
    auto x = leaf(torch::randn({kTokens, kDim}));
    auto w = leaf(torch::randn({kVocab, kDim})), b = leaf(torch::randn({kVocab}));
    return Site{x, w, b, labels(), {x, w, b}};
  };
  const std::vector<std::pair<const char*, Within>> guards = {
      {"at::AutoDispatchBelowADInplaceOrView",
       [](const std::function<void()>& body) { const at::AutoDispatchBelowADInplaceOrView guard; body(); }},
      {"at::AutoDispatchBelowAutograd",
       [](const std::function<void()>& body) { const at::AutoDispatchBelowAutograd guard; body(); }},
      {"c10::impl::ExcludeDispatchKeyGuard(autograd_dispatch_keyset)",
       [](const std::function<void()>& body) {
         const c10::impl::ExcludeDispatchKeyGuard guard(c10::autograd_dispatch_keyset);
         body();
       }},
  };
  for (const auto& [name, within] : guards)
    for (const auto reduction : {lmfuse::Reduction::Mean, lmfuse::Reduction::Sum, lmfuse::Reduction::None}) {
      INFO(name << ", reduction " << static_cast<int>(reduction));
      const Seen before = run(make, reduction, false, within), after = run(make, reduction, true, within);
      CHECK_FALSE(before.loss.requires_grad());
      compare(before, after);
    }
}

TEST_CASE("gradients come back in the layouts LibTorch's product gives them", "[torch][adapter][operands]") {
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  const auto all = std::vector<lmfuse::Reduction>{lmfuse::Reduction::Mean, lmfuse::Reduction::Sum, lmfuse::Reduction::None};
  const std::vector<Case> cases = {
      {"row-major 2-D hidden states and weight (the hidden's gradient no view)",
       [] {
         auto x = leaf(torch::randn({kTokens, kDim})), w = leaf(torch::randn({kVocab, kDim}));
         return Site{x, w, {}, labels(), {x, w}};
       },
       all},
      {"column-major 2-D hidden states",
       [] {
         auto x = leaf(torch::randn({kDim, kTokens}).t()), w = leaf(torch::randn({kVocab, kDim}));
         return Site{x, w, {}, labels(), {x, w}};
       },
       all},
      {"a column-major weight with a bias",
       [] {
         auto x = leaf(torch::randn({kTokens, kDim})), w = leaf(torch::randn({kDim, kVocab}).t());
         auto b = leaf(torch::randn({kVocab}));
         return Site{x, w, b, labels(), {x, w, b}};
       },
       all},
      {"every other row of a weight parameter",
       [] {
         auto x = leaf(torch::randn({kTokens, kDim})), parameter = leaf(torch::randn({2 * kVocab, kDim}));
         auto w = parameter.slice(0, 0, 2 * kVocab, 2);
         return Site{x, w, {}, labels(), {x, w, parameter}};
       }},
      {"3-D hidden states whose rows are column-major",
       [] {
         auto x = leaf(torch::randn({kDim, kTokens}).t().unsqueeze(0)), w = leaf(torch::randn({kVocab, kDim}));
         return Site{x, w, {}, labels().view({1, kTokens}), {x, w}};
       },
       all},
      {"3-D hidden states transposed from [T, B, D]",
       [] {
         auto activations = leaf(torch::randn({kTokens / 2, 2, kDim}));
         auto w = leaf(torch::randn({kVocab, kDim}));
         return Site{activations.transpose(0, 1), w, {}, labels().view({2, kTokens / 2}), {activations, w}};
       },
       all},
  };
  for (const Case& item : cases)
    for (const lmfuse::Reduction reduction : item.reductions) {
      INFO(item.name << ", reduction " << static_cast<int>(reduction));
      compare(run(item.make, reduction, false, plain), run(item.make, reduction, true, plain));
    }
}

TEST_CASE("the JIT tracer records the original's operators, so a traced graph computes the loss",
          "[torch][adapter][operands]") {
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  const auto weight = torch::randn({kVocab, kDim}), bias = torch::randn({kVocab});
  const auto names = [](const torch::autograd::Variable&) { return std::string(); };
  for (const bool fused : {false, true}) {
    INFO((fused ? "rewritten" : "original"));
    const auto site = [&](torch::jit::Stack in) -> torch::jit::Stack {
      const Site operands{in[0].toTensor(), weight, bias, in[1].toTensor(), {}};
      return {fused ? rewritten(operands, lmfuse::Reduction::Mean) : original(operands, lmfuse::Reduction::Mean)};
    };
    const auto traced = torch::jit::tracer::trace({torch::randn({kTokens, kDim}), labels()}, site, names,
                                                  /*strict=*/false, /*force_outplace=*/false);
    torch::jit::GraphFunction function("traced", std::get<0>(traced)->graph, nullptr);
    for (int i = 0; i < 2; ++i) {
      const auto hidden = torch::randn({kTokens, kDim}) * 3;
      const auto target = labels();
      const auto replayed = function({hidden, target}).toTensor();
      const auto eager = original({hidden, weight, bias, target, {}}, lmfuse::Reduction::Mean);
      CHECK(torch::allclose(replayed, eager, 1e-5, 1e-6));
    }
  }
  // Parameters that require grad: the tracer refuses to make them constants of the graph, in both programs.
  const auto trainable = leaf(weight.clone());
  for (const bool fused : {false, true}) {
    INFO((fused ? "rewritten" : "original"));
    const auto site = [&](torch::jit::Stack in) -> torch::jit::Stack {
      const Site operands{in[0].toTensor(), trainable, {}, in[1].toTensor(), {}};
      return {fused ? rewritten(operands, lmfuse::Reduction::Mean) : original(operands, lmfuse::Reduction::Mean)};
    };
    CHECK_FALSE(errorOf([&] {
                  torch::jit::tracer::trace({torch::randn({kTokens, kDim}), labels()}, site, names, false, false);
                }).empty());
  }
}

TEST_CASE("a direct call names what it cannot take: storage-less operands, tracing", "[torch][adapter][operands]") {
  const auto weight = torch::randn({kVocab, kDim});
  CHECK_THAT(errorOf([&] {
               lmfuse::linear_cross_entropy(at::_efficientzerotensor({kTokens, kDim}), weight, {}, labels());
             }),
             Catch::Matchers::Contains("hidden") && Catch::Matchers::Contains("memory"));
  CHECK_THAT(errorOf([&] {
               lmfuse::linear_cross_entropy(torch::empty({kTokens, kDim}, torch::kMeta), weight.to(torch::kMeta), {},
                                            labels(torch::kMeta));
             }),
             Catch::Matchers::Contains("hidden") && Catch::Matchers::Contains("memory"));
  const auto names = [](const torch::autograd::Variable&) { return std::string(); };
  const auto site = [&](torch::jit::Stack in) -> torch::jit::Stack {
    return {lmfuse::linear_cross_entropy(in[0].toTensor(), weight, {}, in[1].toTensor())};
  };
  CHECK_THAT(errorOf([&] { torch::jit::tracer::trace({torch::randn({kTokens, kDim}), labels()}, site, names, false, false); }),
             Catch::Matchers::Contains("trac"));
}

TEST_CASE("the loss's logits code runs under the caller's autograd mode, which it may read",
          "[torch][adapter][operands]") {
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  using Code = std::function<torch::Tensor(const torch::Tensor&)>;
  const std::vector<std::pair<const char*, Code>> codes = {
      // Under NoGradGuard the original reads the mode off: one class per row, a batch cross_entropy rejects.
      {"a shape read from the mode",
       [](const torch::Tensor& logits) { return logits.reshape({-1, torch::GradMode::is_enabled() ? kVocab : 1}); }},
      {"a log_softmax of the logits",
       [](const torch::Tensor& logits) { return torch::log_softmax(logits.view({-1, kVocab}), 1); }},
  };
  for (const auto& [name, code] : codes)
    for (const bool gradMode : {true, false}) {
      INFO(name << (gradMode ? ", grad mode on" : ", under NoGradGuard"));
      const auto hidden = torch::randn({kTokens, kDim}), weight = torch::randn({kVocab, kDim});
      const auto target = labels();
      std::string errors[2];
      torch::Tensor losses[2];
      for (const bool fused : {false, true})
        errors[fused] = errorOf([&] {
          const torch::AutoGradMode mode(gradMode);
          if (!fused) {
            losses[fused] = F::cross_entropy(code(F::linear(hidden, weight)), target);
            return;
          }
          const auto logits = lmfuse::skipped_logits(hidden, weight, "model.cpp:9");
          const auto same = [](const torch::Tensor& tensor) { return tensor; };
          losses[fused] = lmfuse::linear_cross_entropy(
              hidden, weight, {}, target, lmfuse::LossOptions().logits_as_passed({"model.cpp:10", logits, code, {}, target, same}));
        });
      INFO("original: " << (errors[0].empty() ? "ran" : errors[0]));
      INFO("rewritten: " << (errors[1].empty() ? "ran" : errors[1]));
      CHECK(errors[0].empty() == errors[1].empty());
      if (errors[0].empty() && errors[1].empty())
        CHECK(torch::allclose(losses[1].to(torch::kDouble), losses[0].to(torch::kDouble), 1e-5, 1e-6));
    }
}
