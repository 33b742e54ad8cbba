// A rewritten call against the original LibTorch computation it replaced, where the two must agree beyond the
// loss's value: the c10 exception class of every error both raise (a `catch (const c10::IndexError&)` around
// the loss takes the same path in both programs), and floating labels (class probabilities), which the fused
// call computes as the original does, loss and gradients. The calls are built as the rewrite builds them
// (LossOptions::logits_as_passed over skipped logits). Fresh random inputs each run (seed printed).
#include <lmfuse/torch.h>
#include <torch/csrc/autograd/forward_grad.h>
#include <torch/torch.h>
#include <torch/version.h>

// c10's logging defines a glog-style CHECK that would shadow Catch's: LibTorch first, its CHECK dropped.
#undef CHECK
#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

namespace F = torch::nn::functional;
using torch::Tensor;

namespace {

constexpr int64_t kDim = 12;
constexpr int64_t kVocab = 11;
using Code = std::function<Tensor(const Tensor&)>;

uint64_t freshSeed() {
  static const uint64_t seed = std::random_device{}();
  return seed;
}

enum class Class { Error, IndexError, ValueError, StdRuntimeError };

const char* nameOf(Class c) {
  switch (c) {
    case Class::Error: return "c10::Error";
    case Class::IndexError: return "c10::IndexError";
    case Class::ValueError: return "c10::ValueError";
    case Class::StdRuntimeError: return "std::runtime_error";
  }
  return "?";
}

// The dynamic type of what `run` throws (nullptr: nothing), and its message.
const std::type_info* thrown(const std::function<void()>& run, std::string& message) {
  try {
    run();
  } catch (const c10::Error& error) {
    message = error.what_without_backtrace();
    return &typeid(error);
  } catch (const std::exception& error) {
    message = error.what();
    return &typeid(error);
  }
  return nullptr;
}

// Whether a handler for exactly that class catches what `run` throws.
bool caughtAs(Class c, const std::function<void()>& run) {
  try {
    run();
  } catch (const c10::IndexError&) {
    return c == Class::IndexError;
  } catch (const c10::ValueError&) {
    return c == Class::ValueError;
  } catch (const c10::Error&) {
    return c == Class::Error;
  } catch (const std::runtime_error&) {
    return c == Class::StdRuntimeError;
  }
  return false;
}

const std::type_info& typeOf(Class c) {
  switch (c) {
    case Class::Error: return typeid(c10::Error);
    case Class::IndexError: return typeid(c10::IndexError);
    case Class::ValueError: return typeid(c10::ValueError);
    case Class::StdRuntimeError: return typeid(std::runtime_error);
  }
  return typeid(void);
}

// One loss site, as written and as the rewrite replaced it.
struct Site {
  Tensor hidden, weight, bias;  // bias may be undefined
  Tensor labels;                // the variable the labels argument starts from
  Code input = [](const Tensor& l) { return l.view({-1, l.size(-1)}); };
  Code target = [](const Tensor& y) { return y.view(-1); };
  bool withLabelsCode = true;  // false: a call written by hand, without the labels argument's code
  bool nll = false;            // F::nll_loss(F::log_softmax(input, -1), target) instead of cross_entropy
  bool skipped = true;         // the head's logits skipped, as on the fused path
  bool shift = false;          // the causal shift, written on dims 1 and -1 (input and target slice them)
  int64_t ignoreIndex = -100;
  double smoothing = 0.0;
  lmfuse::Reduction reduction = lmfuse::Reduction::Mean;

  Tensor original() const {
    const Tensor logits = F::linear(hidden, weight, bias);
    if (nll) {
      auto options = F::NLLLossFuncOptions().ignore_index(ignoreIndex);
      if (reduction == lmfuse::Reduction::Sum) options.reduction(torch::kSum);
      if (reduction == lmfuse::Reduction::None) options.reduction(torch::kNone);
      return F::nll_loss(F::log_softmax(input(logits), -1), target(labels), options);
    }
    auto options = F::CrossEntropyFuncOptions().ignore_index(ignoreIndex).label_smoothing(smoothing);
    if (reduction == lmfuse::Reduction::Sum) options.reduction(torch::kSum);
    if (reduction == lmfuse::Reduction::None) options.reduction(torch::kNone);
    return F::cross_entropy(input(logits), target(labels), options);
  }

  Tensor fused() const {
    const Tensor logits =
        skipped ? lmfuse::skipped_logits(hidden, weight, "model.cpp:6") : F::linear(hidden, weight, bias);
    const Code in = nll ? Code([this](const Tensor& l) { return F::log_softmax(input(l), -1); }) : input;
    lmfuse::LogitsAsPassed passed{"model.cpp:7", logits, in};
    if (shift) passed.shift_dims = lmfuse::ShiftDims{1, -1};
    if (withLabelsCode) {
      passed.labels_from = labels;
      passed.labels = target;
    }
    return lmfuse::linear_cross_entropy(hidden, weight, bias, labels,
                                        lmfuse::LossOptions()
                                            .ignore_index(ignoreIndex)
                                            .label_smoothing(smoothing)
                                            .reduction(reduction)
                                            .shift(shift)
                                            .logits_as_passed(passed));
  }
};

Site randomSite(int64_t tokens, bool bias = true) {
  Site site;
  site.hidden = torch::randn({tokens, kDim});
  site.weight = torch::randn({kVocab, kDim});
  if (bias) site.bias = torch::randn({kVocab});
  site.labels = torch::randint(0, kVocab, {tokens});
  return site;
}

}  // namespace

TEST_CASE("a rewritten call raises the c10 exception class the original raises", "[torch][adapter][errors]") {
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  struct Bad {
    const char* name;
    Class expected;
    std::function<Site()> make;
  };
  const std::vector<Bad> table = {
      {"a label equal to V", Class::IndexError,
       [] { auto s = randomSite(7); s.labels[3] = kVocab; return s; }},
      {"a negative label, sum", Class::IndexError,
       [] { auto s = randomSite(6); s.labels[0] = -3; s.reduction = lmfuse::Reduction::Sum; return s; }},
      {"a label past V with label smoothing, reduction none", Class::IndexError,
       [] { auto s = randomSite(5); s.labels[4] = kVocab + 7; s.smoothing = 0.1; s.reduction = lmfuse::Reduction::None; return s; }},
      {"a label past V, the head's logits computed (LMFUSE_RETURN_LOGITS)", Class::IndexError,
       [] { auto s = randomSite(5); s.labels[1] = kVocab; s.skipped = false; return s; }},
      {"nll_loss: a label past V", Class::IndexError,
       [] { auto s = randomSite(5); s.labels[2] = kVocab; s.nll = true; return s; }},
      {"fewer labels than rows", Class::ValueError,
       [] { auto s = randomSite(5); s.labels = s.labels.slice(0, 0, 3); return s; }},
      {"more labels than rows, with label smoothing", Class::ValueError,
       [] { auto s = randomSite(4); s.labels = torch::randint(0, kVocab, {6}); s.smoothing = 0.2; return s; }},
      {"fewer labels than rows, a call without the labels code", Class::ValueError,
       [] { auto s = randomSite(5); s.labels = s.labels.slice(0, 0, 2); s.withLabelsCode = false; return s; }},
      {"shifted, labels one position too long", Class::ValueError,
       [] {
         auto s = randomSite(8);
         s.hidden = s.hidden.view({2, 4, kDim});
         s.labels = torch::randint(0, kVocab, {2, 5});
         s.shift = true;
         s.input = [](const Tensor& l) { return l.slice(1, 0, -1).reshape({-1, l.size(-1)}); };
         s.target = [](const Tensor& y) { return y.slice(1, 1).reshape(-1); };
         return s;
       }},
      {"one row of logits [1, V] with a 0-dim label (read as a batch of 0)", Class::ValueError,
       [] { auto s = randomSite(1, false); s.labels = s.labels.view({}); s.target = [](const Tensor& y) { return y; }; return s; }},
      {"the same with a bias", Class::ValueError,
       [] { auto s = randomSite(1); s.labels = s.labels.view({}); s.target = [](const Tensor& y) { return y; }; return s; }},
      {"nll_loss: rows of logits with a 0-dim label (nll_loss's own check: Error)", Class::Error,
       [] { auto s = randomSite(3); s.labels = s.labels[0]; s.target = [](const Tensor& y) { return y; }; s.nll = true; return s; }},
      {"nll_loss: fewer labels than rows (nll_loss's own check: Error)", Class::Error,
       [] { auto s = randomSite(5); s.labels = s.labels.slice(0, 0, 3); s.nll = true; return s; }},
      {"int32 labels", Class::Error,
       [] { auto s = randomSite(5); s.labels = s.labels.to(torch::kInt); return s; }},
      {"labels [N, 1] passed as they are", Class::Error,
       [] { auto s = randomSite(5); s.labels = s.labels.view({5, 1}); s.target = [](const Tensor& y) { return y; }; return s; }},
      {"Long labels shaped as the logits", Class::Error,
       [] { auto s = randomSite(5); s.labels = torch::randint(0, kVocab, {5, kVocab}); s.target = [](const Tensor& y) { return y; }; return s; }},
      {"labels code that selects past the end", Class::IndexError,
       [] { auto s = randomSite(5); s.labels = torch::randint(0, kVocab, {2, 5}); s.target = [](const Tensor& y) { return y.select(0, 4); }; return s; }},
      {"labels code whose view cannot be taken (strides)", Class::Error,
       [] { auto s = randomSite(6); s.labels = torch::randint(0, kVocab, {3, 2}).t(); return s; }},
      {"labels code with a view of another size", Class::StdRuntimeError,
       [] { auto s = randomSite(5); s.target = [](const Tensor& y) { return y.view({2, -1}); }; return s; }},
      {"label_smoothing above 1", Class::Error,
       [] { auto s = randomSite(5); s.smoothing = 1.5; return s; }},
      {"weight of another hidden size", Class::Error,
       [] { auto s = randomSite(5); s.weight = torch::randn({kVocab, kDim + 1}); return s; }},
      {"class probabilities of another class count", Class::Error,
       [] { auto s = randomSite(5); s.labels = torch::softmax(torch::randn({5, kVocab + 1}), -1); s.target = [](const Tensor& y) { return y; }; return s; }},
      {"class probabilities with an ignore_index of 0", Class::Error,
       [] { auto s = randomSite(5); s.labels = torch::softmax(torch::randn({5, kVocab}), -1); s.target = [](const Tensor& y) { return y; }; s.ignoreIndex = 0; return s; }},
      {"class probabilities flattened (one per row expected)", Class::ValueError,
       [] { auto s = randomSite(5); s.labels = torch::softmax(torch::randn({5, kVocab}), -1); return s; }},
      {"nll_loss: class probabilities", Class::Error,
       [] { auto s = randomSite(5); s.labels = torch::softmax(torch::randn({5, kVocab}), -1); s.target = [](const Tensor& y) { return y; }; s.nll = true; return s; }},
      {"one token's 1-D logits with labels [1]", Class::Error,
       [] { auto s = randomSite(1); s.hidden = s.hidden.view({kDim}); s.input = [](const Tensor& l) { return l; }; return s; }},
  };
  for (const Bad& bad : table) {
    DYNAMIC_SECTION(bad.name) {
      const Site site = bad.make();
      std::string originalMessage, fusedMessage;
      const std::type_info* original = thrown([&] { site.original(); }, originalMessage);
      const std::type_info* fused = thrown([&] { site.fused(); }, fusedMessage);
      INFO("original: " << (original ? original->name() : "no exception") << ": " << originalMessage);
      INFO("fused:    " << (fused ? fused->name() : "no exception") << ": " << fusedMessage);
      if (!original) {
        // A LibTorch that computes it (2.x takes one label [1] for 1-D logits): the fused call computes the same.
        REQUIRE(TORCH_VERSION_MAJOR >= 2);
        REQUIRE(fused == nullptr);
        const Tensor expected = site.original(), actual = site.fused();
        CHECK(actual.sizes() == expected.sizes());
        CHECK(torch::allclose(actual, expected, 1e-5, 1e-5));
        return;
      }
      // The table says what LibTorch 1.13 raises; a later version may raise another class, the fused call with it.
      if (TORCH_VERSION_MAJOR < 2) REQUIRE(*original == typeOf(bad.expected));
      REQUIRE(fused != nullptr);
      CHECK(*fused == *original);
      if (*original != typeOf(bad.expected)) return;
      INFO("caught as " << nameOf(bad.expected));
      CHECK(caughtAs(bad.expected, [&] { site.original(); }));
      CHECK(caughtAs(bad.expected, [&] { site.fused(); }));
    }
  }
}

// Undefined labels (an optional holding an undefined tensor): a rewritten call runs the original's labels code and
// loss on them, so it raises what the original raises, of its class: the labels' view fails on an undefined tensor
// (c10::Error), the labels as they are reach cross_entropy's batch-size check (c10::ValueError). A call without
// the labels' code cannot tell, and names the labels.
TEST_CASE("undefined labels: a rewritten call fails as the original does, of its class, naming the site",
          "[torch][adapter][errors]") {
  const Code same = [](const Tensor& y) { return y; };
  for (const int form : {0, 1, 2}) {
    const bool withLabelsCode = form != 2;
    DYNAMIC_SECTION((form == 0 ? "labels->view(-1)" : form == 1 ? "*labels" : "without the labels code")) {
      Site site = randomSite(5);
      if (form == 1) {
        site.input = [](const Tensor& l) { return l.reshape({-1, l.size(-1)}); };
        site.target = same;
      }
      site.labels = Tensor();
      site.withLabelsCode = withLabelsCode;
      std::string originalMessage, fusedMessage;
      const std::type_info* original = thrown([&] { site.original(); }, originalMessage);
      const std::type_info* fused = thrown([&] { site.fused(); }, fusedMessage);
      INFO("original: " << originalMessage << "\nfused: " << fusedMessage);
      REQUIRE(original != nullptr);
      REQUIRE(fused != nullptr);
      CHECK(*fused == *original);
      if (form == 1) CHECK(*fused == typeid(c10::ValueError));
      CHECK_THAT(fusedMessage, Catch::Contains("model.cpp:7"));
      if (!withLabelsCode) CHECK_THAT(fusedMessage, Catch::Contains("labels is an undefined tensor"));
    }
  }
}

// The fused loss computes one row of the head's classes per token. Where the replaced loss read its logits
// otherwise (3-D logits over dimension 1, classes regrouped by a view, rows the fused call does not make, a
// shift along another dimension), a rewritten call computes the original's loss and gradients with LibTorch's
// operators, or throws the original's exception, of its class.
TEST_CASE("a loss the fused loss does not compute: a rewritten call computes the original's, or throws what it throws",
          "[torch][adapter][original]") {
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  constexpr int64_t batch = 2, time = 7;  // 3-D logits as they are: T classes, read from dimension 1
  const Code same = [](const Tensor& t) { return t; };
  struct Other {
    const char* name;
    std::function<Site()> make;
    bool originalThrows;
  };
  const auto threeD = [&](Tensor labels) {
    Site s = randomSite(batch * time);
    s.hidden = s.hidden.view({batch, time, kDim});
    s.labels = std::move(labels);
    s.input = same;
    s.target = same;
    return s;
  };
  const std::vector<Other> table = {
      {"3-D logits as they are, labels [B, V] below T", [&] { return threeD(torch::randint(0, time, {batch, kVocab})); }, false},
      {"3-D logits as they are, labels [B, V] at T or past it (IndexError)",
       [&] { return threeD(torch::full({batch, kVocab}, time + 1, torch::kLong)); }, true},
      {"3-D logits as they are, label smoothing, reduction none",
       [&] {
         Site s = threeD(torch::randint(0, time, {batch, kVocab}));
         s.smoothing = 0.2;
         s.reduction = lmfuse::Reduction::None;
         return s;
       }, false},
      {"3-D logits as they are, computed (LMFUSE_RETURN_LOGITS), sum",
       [&] {
         Site s = threeD(torch::randint(0, time, {batch, kVocab}));
         s.skipped = false;
         s.reduction = lmfuse::Reduction::Sum;
         return s;
       }, false},
      {"nll_loss over the log_softmax of 3-D logits as they are",
       [&] {
         Site s = threeD(torch::randint(0, time, {batch, kVocab}));
         s.nll = true;
         return s;
       }, false},
      {"view({-1, 2V}): the classes regrouped",
       [&] {
         Site s = randomSite(6);
         s.labels = torch::randint(0, 2 * kVocab, {6});
         s.input = [](const Tensor& l) { return l.reshape({-1, 2 * kVocab}); };
         s.target = [](const Tensor& y) { return y.slice(0, 0, 3); };
         return s;
       }, false},
      {"rows the fused call does not make (a slice of the positions)",
       [&] {
         Site s = randomSite(batch * time);
         s.hidden = s.hidden.view({batch, time, kDim});
         s.labels = torch::randint(0, kVocab, {batch, time});
         s.input = [](const Tensor& l) { return l.slice(1, 0, 3).reshape({-1, kVocab}); };
         s.target = [](const Tensor& y) { return y.slice(1, 0, 3).reshape(-1); };
         return s;
       }, false},
      {"a shift along B of [A, B, T, D] with B == T",
       [&] {
         Site s = randomSite(18);
         s.hidden = s.hidden.view({2, 3, 3, kDim});
         s.labels = torch::randint(0, kVocab, {2, 3, 3});
         s.shift = true;  // written on dims 1 and -1: the logits' dim 1 is B here
         s.input = [](const Tensor& l) { return l.slice(1, 0, -1).reshape({-1, kVocab}); };
         s.target = [](const Tensor& y) { return y.slice(-1, 1).reshape(-1); };
         return s;
       }, false},
      {"the shift, not reshaped: 3-D logits as they are",
       [&] {
         Site s = randomSite(batch * time);
         s.hidden = s.hidden.view({batch, time, kDim});
         s.labels = torch::randint(0, kVocab, {batch, time});
         s.shift = true;
         s.input = [](const Tensor& l) { return l.slice(1, 0, -1); };
         s.target = [](const Tensor& y) { return y.slice(-1, 1); };
         return s;
       }, true},
  };
  for (const Other& other : table) {
    DYNAMIC_SECTION(other.name) {
      Site site = other.make();
      auto leaves = [&] {
        site.hidden = site.hidden.detach().clone().requires_grad_(true);
        site.weight = site.weight.detach().clone().requires_grad_(true);
        site.bias = site.bias.detach().clone().requires_grad_(true);
        return std::vector<Tensor>{site.hidden, site.weight, site.bias};
      };
      const auto o = leaves();
      Tensor originalLoss, fusedLoss;
      std::string originalMessage, fusedMessage;
      const std::type_info* original = thrown([&] { originalLoss = site.original(); }, originalMessage);
      const auto f = leaves();
      const int64_t fusedCalls = lmfuse::fused_call_count();
      const std::type_info* fused = thrown([&] { fusedLoss = site.fused(); }, fusedMessage);
      CHECK(lmfuse::fused_call_count() == fusedCalls);  // the original's computation, not the fused one
      INFO("original: " << (original ? original->name() : "no exception") << ": " << originalMessage);
      INFO("fused:    " << (fused ? fused->name() : "no exception") << ": " << fusedMessage);
      REQUIRE((original != nullptr) == other.originalThrows);
      if (original) {
        REQUIRE(fused != nullptr);
        CHECK(*fused == *original);
        CHECK_THAT(fusedMessage, Catch::Contains(originalMessage.substr(0, originalMessage.find('\n'))));
        continue;
      }
      REQUIRE(fused == nullptr);
      REQUIRE(fusedLoss.sizes() == originalLoss.sizes());
      CHECK(fusedLoss.scalar_type() == originalLoss.scalar_type());
      CHECK(torch::allclose(fusedLoss, originalLoss, 1e-6, 1e-6));
      const Tensor upstream = torch::rand(originalLoss.sizes()) + 0.5;
      originalLoss.backward(upstream);
      fusedLoss.backward(upstream);
      for (int i = 0; i < 3; ++i) {
        INFO("gradient " << i);
        REQUIRE(f[i].grad().defined());
        CHECK(torch::allclose(f[i].grad(), o[i].grad(), 1e-6, 1e-6));
      }
    }
  }
}

// F::linear adds a bias of another dtype than its weight where it ends in matmul + add_ (LibTorch 1.13's 3-D
// input), and refuses it where it ends in addmm: a rewritten call does what the original does.
TEST_CASE("a bias of another dtype than the weight: a rewritten call computes, or fails, as the original does",
          "[torch][adapter][original]") {
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  const Code flat = [](const Tensor& t) { return t.view({-1, kVocab}); };
  const Code same = [](const Tensor& t) { return t; };
  int computed = 0;
  for (const torch::ScalarType biasType : {torch::kDouble, torch::kBFloat16}) {
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{6, kDim}, {2, 3, kDim}}) {
      for (const bool skipped : {true, false}) {
        {
          INFO(c10::toString(biasType) << " bias, hidden of rank " << shape.size()
                                       << (skipped ? ", skipped logits" : ", computed logits"));
          const Tensor hidden = torch::randn(shape), weight = torch::randn({kVocab, kDim}) * 0.5,
                       bias = torch::randn({kVocab}, torch::dtype(biasType));
          const Tensor labels = torch::randint(0, kVocab, {6}, torch::kLong);
          auto leaves = [&] {
            return std::vector<Tensor>{hidden.clone().requires_grad_(true), weight.clone().requires_grad_(true),
                                       bias.clone().requires_grad_(true)};
          };
          const auto o = leaves();
          Tensor originalLoss;
          std::string originalMessage, fusedMessage;
          const std::type_info* original = thrown(
              [&] { originalLoss = F::cross_entropy(flat(F::linear(o[0], o[1], o[2])), labels); }, originalMessage);
          const auto f = leaves();
          Tensor fusedLoss;
          const std::type_info* fused = thrown(
              [&] {
                const Tensor from =
                    skipped ? lmfuse::skipped_logits(f[0], f[1], "model.cpp:4") : F::linear(f[0], f[1], f[2]);
                fusedLoss = lmfuse::linear_cross_entropy(
                    f[0], f[1], f[2], labels,
                    lmfuse::LossOptions().logits_as_passed({"model.cpp:5", from, flat, {}, labels, same}));
              },
              fusedMessage);
          INFO("original: " << originalMessage << "\nfused: " << fusedMessage);
          if (original) {
            REQUIRE(fused != nullptr);
            CHECK(*fused == *original);
            continue;
          }
          ++computed;
          REQUIRE(fused == nullptr);
          CHECK(fusedLoss.scalar_type() == originalLoss.scalar_type());
          CHECK(torch::allclose(fusedLoss, originalLoss, 1e-6, 1e-6));
          originalLoss.backward();
          fusedLoss.backward();
          for (int i = 0; i < 3; ++i) {
            INFO("gradient " << i);
            REQUIRE(f[i].grad().defined());
            CHECK(f[i].grad().scalar_type() == o[i].grad().scalar_type());
            CHECK(torch::allclose(f[i].grad().to(torch::kDouble), o[i].grad().to(torch::kDouble), 1e-6, 1e-6));
          }
        }
      }
    }
  }
  // LibTorch 1.13 computes the 3-D input's (matmul + add_): the table is not only of failures there.
  if (TORCH_VERSION_MAJOR < 2) CHECK(computed > 0);
}

TEST_CASE("floating labels: a rewritten call computes the original's soft-target loss and gradients",
          "[torch][adapter][soft]") {
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  constexpr int64_t batch = 3, time = 5;
  const auto opts = torch::TensorOptions().dtype(torch::kDouble);
  struct Soft {
    const char* name;
    bool threeD;         // hidden [B, T, D] (else [B·T, D])
    bool bias;
    int from;  // 0: skipped logits, 1: skipped then sliced (a view), 2: computed logits, 3: head inline,
               // 4: skipped then sliced and copied (the call throws: it keeps no code to make the copy again)
    Code input;
    Code target;
    bool shift;
    double smoothing;
    lmfuse::Reduction reduction;
  };
  const Code same = [](const Tensor& t) { return t; };
  const Code rows = [](const Tensor& t) { return t.reshape({-1, t.size(-1)}); };
  const std::vector<Soft> cases = {
      {"probabilities [N, V], mean", false, true, 0, same, same, false, 0.0, lmfuse::Reduction::Mean},
      {"label smoothing 0.1", false, true, 0, same, same, false, 0.1, lmfuse::Reduction::Mean},
      {"sum, no bias", false, false, 0, same, same, false, 0.0, lmfuse::Reduction::Sum},
      {"none, with smoothing", false, true, 0, same, same, false, 0.25, lmfuse::Reduction::None},
      {"[B, T, V] viewed to rows on both sides", true, true, 0, rows, rows, false, 0.0, lmfuse::Reduction::Mean},
      {"[B, T, V] as they are: the classes from dimension 1, as the original reads them", true, false, 0, same, same,
       false, 0.0, lmfuse::Reduction::Mean},
      {"shifted: logits sliced into a local, labels sliced", true, true, 1, rows,
       [](const Tensor& y) { return y.slice(1, 1).reshape({-1, y.size(-1)}); }, true, 0.1, lmfuse::Reduction::Sum},
      {"shifted: logits sliced and copied into a local", true, true, 4, rows,
       [](const Tensor& y) { return y.slice(1, 1).reshape({-1, y.size(-1)}); }, true, 0.0, lmfuse::Reduction::Mean},
      {"computed logits (LMFUSE_RETURN_LOGITS)", true, true, 2, rows, rows, false, 0.05, lmfuse::Reduction::None},
      {"the head inside the loss", false, false, 3, same, same, false, 0.0, lmfuse::Reduction::Mean},
  };
  for (const Soft& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const std::vector<int64_t> lead = c.threeD ? std::vector<int64_t>{batch, time} : std::vector<int64_t>{batch * time};
      std::vector<int64_t> hiddenShape = lead, probShape = lead;
      hiddenShape.push_back(kDim);
      probShape.push_back(kVocab);
      const Tensor hidden = torch::randn(hiddenShape, opts);
      const Tensor weight = torch::randn({kVocab, kDim}, opts) * 0.5;
      const Tensor bias = c.bias ? torch::randn({kVocab}, opts) : Tensor();
      const Tensor probs = torch::softmax(torch::randn(probShape, opts) * 2, -1);
      auto leaves = [&] {
        return std::vector<Tensor>{hidden.clone().requires_grad_(true), weight.clone().requires_grad_(true),
                                   c.bias ? bias.clone().requires_grad_(true) : Tensor()};
      };
      const Code logitsCode = c.from == 1   ? Code([](const Tensor& l) { return l.slice(1, 0, -1); })
                              : c.from == 4 ? Code([](const Tensor& l) { return l.slice(1, 0, -1).contiguous(); })
                                            : same;
      auto ceOptions = F::CrossEntropyFuncOptions().label_smoothing(c.smoothing);
      if (c.reduction == lmfuse::Reduction::Sum) ceOptions.reduction(torch::kSum);
      if (c.reduction == lmfuse::Reduction::None) ceOptions.reduction(torch::kNone);

      // The original.
      const auto o = leaves();
      const Tensor originalLoss = F::cross_entropy(c.input(logitsCode(F::linear(o[0], o[1], o[2]))), c.target(probs), ceOptions);
      // The rewritten call.
      const auto f = leaves();
      Tensor from;
      if (c.from == 0) from = lmfuse::skipped_logits(f[0], f[1], "model.cpp:4");
      if (c.from == 1 || c.from == 4)
        from = lmfuse::skipped_logits_after(lmfuse::skipped_logits(f[0], f[1], "model.cpp:4"), logitsCode);
      if (c.from == 2) from = F::linear(f[0], f[1], f[2]);
      const auto options = lmfuse::LossOptions()
                               .label_smoothing(c.smoothing)
                               .reduction(c.reduction)
                               .shift(c.shift)
                               .logits_as_passed({"model.cpp:5", from, c.input, {}, probs, c.target});
      if (c.from == 4) {
        CHECK_THROWS_WITH(lmfuse::linear_cross_entropy(f[0], f[1], f[2], probs, options),
                          Catch::Contains("copied between the head and the loss") && Catch::Contains("model.cpp:4"));
        return;
      }
      const int64_t fusedCalls = lmfuse::fused_call_count();
      const Tensor fusedLoss = lmfuse::linear_cross_entropy(f[0], f[1], f[2], probs, options);
      CHECK(lmfuse::fused_call_count() == fusedCalls);  // the original computation, not the fused one
      REQUIRE(fusedLoss.sizes() == originalLoss.sizes());
      CHECK(fusedLoss.scalar_type() == originalLoss.scalar_type());
      CHECK(torch::allclose(fusedLoss, originalLoss, 1e-12, 1e-12));
      const Tensor upstream = torch::rand(originalLoss.sizes(), opts) + 0.5;
      originalLoss.backward(upstream);
      fusedLoss.backward(upstream);
      for (int i = 0; i < 3; ++i) {
        if (!o[i].defined()) continue;
        INFO("gradient " << i);
        REQUIRE(f[i].grad().defined());
        CHECK(torch::allclose(f[i].grad(), o[i].grad(), 1e-12, 1e-12));
      }
    }
  }
}

TEST_CASE("Byte class indices, fp64, sparse and featureless operands: a rewritten call computes what the original computes",
          "[torch][adapter][original]") {
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  constexpr int64_t rows = 9;
  struct Input {
    const char* name;
    torch::ScalarType operands;  // hidden, weight and bias
    torch::ScalarType labels;
    bool skipped;                // the logits skipped at the head (else computed and passed)
    bool sparse = false;         // hidden as a sparse COO tensor (a bag-of-words input)
    int64_t features = kDim;     // 0: the logits are the bias alone
  };
  const std::vector<Input> inputs = {
      {"Byte labels, fp32, skipped logits", torch::kFloat, torch::kByte, true},
      {"Byte labels, fp32, computed logits", torch::kFloat, torch::kByte, false},
      {"fp64 operands, Long labels, skipped logits", torch::kDouble, torch::kLong, true},
      {"fp64 operands, Byte labels", torch::kDouble, torch::kByte, true},
      {"sparse hidden, Long labels, skipped logits", torch::kFloat, torch::kLong, true, true},
      {"no features (the bias alone), Long labels, skipped logits", torch::kFloat, torch::kLong, true, false, 0},
  };
  const Code same = [](const Tensor& t) { return t; };
  for (const Input& in : inputs) {
    DYNAMIC_SECTION(in.name) {
      const auto opts = torch::TensorOptions().dtype(in.operands);
      const Tensor hidden = torch::randn({rows, in.features}, opts),
                   weight = torch::randn({kVocab, in.features}, opts) * 0.5,
                   bias = torch::randn({kVocab}, opts);
      Tensor labels = torch::randint(0, kVocab, {rows}, torch::kLong);
      labels[2] = 3;
      labels = labels.to(in.labels);
      auto leaves = [&] {
        // A sparse input (features) wants no gradient: F::linear's backward takes none for it.
        return std::vector<Tensor>{in.sparse ? hidden.to_sparse() : hidden.clone().requires_grad_(true),
                                   weight.clone().requires_grad_(true), bias.clone().requires_grad_(true)};
      };
      const auto ce = F::CrossEntropyFuncOptions().ignore_index(3).label_smoothing(0.1);
      const auto o = leaves();
      const Tensor originalLoss = F::cross_entropy(F::linear(o[0], o[1], o[2]), labels, ce);
      const auto f = leaves();
      const Tensor from = in.skipped ? lmfuse::skipped_logits(f[0], f[1], "model.cpp:4") : F::linear(f[0], f[1], f[2]);
      const auto options = lmfuse::LossOptions().ignore_index(3).label_smoothing(0.1).logits_as_passed(
          {"model.cpp:5", from, same, {}, labels, same});
      const int64_t fusedCalls = lmfuse::fused_call_count();
      const Tensor loss = lmfuse::linear_cross_entropy(f[0], f[1], f[2], labels, options);
      CHECK(lmfuse::fused_call_count() == fusedCalls);
      CHECK(loss.scalar_type() == originalLoss.scalar_type());
      const double tolerance = in.operands == torch::kDouble ? 1e-12 : 1e-6;
      CHECK(torch::allclose(loss, originalLoss, tolerance, tolerance));
      originalLoss.backward();
      loss.backward();
      for (int i = in.sparse ? 1 : 0; i < 3; ++i) {
        INFO("gradient " << i);
        REQUIRE(f[i].grad().defined());
        CHECK(torch::allclose(f[i].grad(), o[i].grad(), tolerance, tolerance));
      }
    }
  }
}

TEST_CASE("a forward-mode tangent on the hidden states: a rewritten call gives the original's loss and JVP",
          "[torch][adapter][original]") {
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  const auto opts = torch::TensorOptions().dtype(torch::kDouble);
  const Tensor hidden = torch::randn({6, kDim}, opts), direction = torch::randn({6, kDim}, opts),
               weight = torch::randn({kVocab, kDim}, opts) * 0.5, bias = torch::randn({kVocab}, opts);
  const Tensor labels = torch::randint(0, kVocab, {6}, torch::kLong);
  const Code same = [](const Tensor& t) { return t; };
  const uint64_t level = torch::autograd::ForwardADLevel::get_next_idx();
  const Tensor original = F::cross_entropy(F::linear(at::_make_dual(hidden, direction, level), weight, bias), labels);
  const Tensor dual = at::_make_dual(hidden, direction, level);
  const auto options = lmfuse::LossOptions().logits_as_passed(
      {"model.cpp:5", lmfuse::skipped_logits(dual, weight, "model.cpp:4"), same, {}, labels, same});
  const Tensor fused = lmfuse::linear_cross_entropy(dual, weight, bias, labels, options);
  const auto [originalValue, originalTangent] = at::_unpack_dual(original, level);
  const auto [fusedValue, fusedTangent] = at::_unpack_dual(fused, level);
  torch::autograd::ForwardADLevel::release_idx(level);
  REQUIRE(originalTangent.defined());
  REQUIRE(fusedTangent.defined());
  CHECK(torch::allclose(fusedValue, originalValue, 1e-12, 1e-12));
  CHECK(torch::allclose(fusedTangent, originalTangent, 1e-12, 1e-12));
}

TEST_CASE("the replaced loss's labels and input code run once per call, as the original ran them",
          "[torch][adapter][original]") {
  // The rewrite moves the loss's input and labels arguments into lambdas; whatever else their code does (a
  // counter, a print, a draw) must happen as often as in the original: once per call, on the fused path and
  // on the original computation alike.
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  constexpr int64_t rows = 10;
  struct Path {
    const char* name;
    torch::ScalarType operands;
    bool probabilities;  // floating labels: class probabilities [rows, V]
    bool skipped;        // the logits skipped at the head (else computed and passed)
    bool logSoftmax;     // the input code is a log_softmax (an nll_loss site)
    bool grad;           // grad mode on and the operands requiring gradients
  };
  const std::vector<Path> paths = {
      {"fused: Long labels, skipped logits", torch::kFloat, false, true, false, true},
      {"fused: Long labels, computed logits", torch::kFloat, false, false, false, true},
      {"fused: a log_softmax input", torch::kFloat, false, true, true, true},
      {"fused: no grad mode", torch::kFloat, false, true, false, false},
      {"original: fp64 operands", torch::kDouble, false, true, false, true},
      {"original: fp64, a log_softmax input of computed logits", torch::kDouble, false, false, true, true},
      {"original: fp64, a log_softmax input, no grad mode", torch::kDouble, false, false, true, false},
      {"original: floating labels", torch::kFloat, true, true, false, true},
  };
  for (const Path& path : paths) {
    DYNAMIC_SECTION(path.name) {
      const auto opts = torch::TensorOptions().dtype(path.operands);
      const Tensor hidden = torch::randn({rows, kDim}, opts), weight = torch::randn({kVocab, kDim}, opts) * 0.5;
      const Tensor labels = path.probabilities ? torch::softmax(torch::randn({rows, kVocab}), -1)
                                               : torch::randint(0, kVocab, {rows}, torch::kLong);
      const Code inputCode = [&](const Tensor& l) {
        const Tensor flat = l.view({-1, kVocab});
        return path.logSoftmax ? torch::log_softmax(flat, -1) : flat;
      };
      const Code labelsCode = [](const Tensor& y) { return y.view({y.size(0), -1}).squeeze(-1); };
      const auto lossOf = [&](const Tensor& input, const Tensor& target) {
        return path.logSoftmax ? F::nll_loss(input, target) : F::cross_entropy(input, target);
      };
      const auto leaves = [&] {
        return std::vector<Tensor>{hidden.clone().requires_grad_(path.grad), weight.clone().requires_grad_(path.grad)};
      };
      const at::AutoGradMode gradMode(path.grad);
      const auto o = leaves();
      const Tensor originalLoss = lossOf(inputCode(F::linear(o[0], o[1])), labelsCode(labels));
      const auto f = leaves();
      int inputRuns = 0, labelsRuns = 0;
      const Tensor from = path.skipped ? lmfuse::skipped_logits(f[0], f[1], "model.cpp:4") : F::linear(f[0], f[1]);
      const auto options = lmfuse::LossOptions().logits_as_passed(
          {"model.cpp:5", from, [&](const Tensor& l) { ++inputRuns; return inputCode(l); }, {}, labels,
           [&](const Tensor& y) { ++labelsRuns; return labelsCode(y); }});
      const Tensor loss = lmfuse::linear_cross_entropy(f[0], f[1], {}, labels, options);
      CHECK(inputRuns == 1);
      CHECK(labelsRuns == 1);
      const double tolerance = path.operands == torch::kDouble ? 1e-12 : 1e-5;
      CHECK(torch::allclose(loss, originalLoss, tolerance, tolerance));
      CHECK(loss.requires_grad() == originalLoss.requires_grad());
      if (path.grad) {
        originalLoss.backward();
        loss.backward();
        CHECK(torch::allclose(f[0].grad(), o[0].grad(), tolerance, tolerance));
        CHECK(torch::allclose(f[1].grad(), o[1].grad(), tolerance, tolerance));
      }
    }
  }
}
