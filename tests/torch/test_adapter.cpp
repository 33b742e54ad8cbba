// lmfuse::linear_cross_entropy against F::cross_entropy(F::linear(...)) computed in fp64 through
// LibTorch's own autograd: loss and the gradients of hidden, weight and bias, for each option, any
// leading shape, non-contiguous operands, int32 labels, shift; plus no-grad, partial requires_grad,
// a second backward pass, dtypes and the argument checks; autocast and mixed dtypes against what
// F::linear + F::cross_entropy do under the same state; the skipped logits and the fused-call count.
// Fresh random inputs each run (seed printed).
#include <lmfuse/torch.h>
#include <torch/torch.h>

#include <ATen/autocast_mode.h>
// c10's logging defines a glog-style CHECK that would shadow Catch's (a failure would abort instead of
// being reported): LibTorch first, its CHECK dropped, then Catch.
#undef CHECK
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace F = torch::nn::functional;

namespace {

enum class Layout { Contiguous, TransposedHidden, StridedWeight };

struct Case {
  const char* name;
  std::vector<int64_t> leading;  // hidden is leading + [D]
  bool bias;
  lmfuse::LossOptions options;
  bool int32Labels = false;
  Layout layout = Layout::Contiguous;
};

constexpr int64_t kDim = 24;
constexpr int64_t kVocab = 53;

uint64_t freshSeed() {
  static const uint64_t seed = std::random_device{}();
  return seed;
}

// What the fused call must equal: the unfused graph in fp64, with the runtime's extra options
// (logit scale, softcap, z-loss) spelled out in LibTorch ops.
torch::Tensor referenceLoss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                            torch::Tensor labels, const lmfuse::LossOptions& options, const torch::Tensor& nItems) {
  torch::Tensor logits = F::linear(hidden, weight, bias).reshape({-1, weight.size(0)});
  labels = labels.to(torch::kLong);
  if (options.shift()) {  // target of position t is label t + 1 within the last label dimension
    auto rows = labels.reshape({-1, labels.size(-1)});
    auto shifted = torch::full_like(rows, options.ignore_index());
    shifted.slice(1, 0, -1).copy_(rows.slice(1, 1));
    labels = shifted;
  }
  labels = labels.reshape({-1});
  logits = logits * options.logit_scale();
  if (options.softcap() > 0) logits = options.softcap() * torch::tanh(logits / options.softcap());
  auto perToken = F::cross_entropy(logits, labels,
                                   F::CrossEntropyFuncOptions()
                                       .ignore_index(options.ignore_index())
                                       .label_smoothing(options.label_smoothing())
                                       .reduction(torch::kNone));
  auto valid = labels.ne(options.ignore_index()).to(torch::kDouble);
  if (options.z_loss() > 0) perToken = perToken + options.z_loss() * torch::logsumexp(logits, -1).pow(2) * valid;
  switch (options.reduction()) {
    case lmfuse::Reduction::Sum: return perToken.sum();
    case lmfuse::Reduction::None: return perToken.view(hidden.sizes().slice(0, hidden.dim() - 1));
    case lmfuse::Reduction::Mean: break;
  }
  auto divisor = nItems.defined() ? nItems.to(torch::kDouble).reshape({}) : valid.sum();
  return divisor.item<double>() > 0 ? perToken.sum() / divisor : perToken.sum() * 0;
}

double relativeError(const torch::Tensor& actual, const torch::Tensor& expected) {
  auto a = actual.to(torch::kDouble), e = expected.to(torch::kDouble);
  const double scale = std::max(e.abs().max().item<double>(), 1e-3);
  return (a - e).abs().max().item<double>() / scale;
}

torch::Tensor randomLabels(const std::vector<int64_t>& shape, int64_t ignoreIndex, bool int32) {
  auto labels = torch::randint(0, kVocab, shape, torch::kLong);
  auto drop = torch::rand(shape) < 0.2;  // about one token in five is ignored
  labels.masked_fill_(drop, ignoreIndex);
  return int32 ? labels.to(torch::kInt) : labels;
}

}  // namespace

TEST_CASE("fused loss and gradients equal the fp64 unfused graph", "[torch][adapter]") {
  const std::vector<Case> cases = {
      {"defaults, 2-d hidden, bias", {37}, true, lmfuse::LossOptions()},
      {"one token, hidden [D]", {}, true, lmfuse::LossOptions()},
      {"no bias, [B, T, D]", {3, 11}, false, lmfuse::LossOptions()},
      {"ignore_index -1, [2, 3, 5, D]", {2, 3, 5}, true, lmfuse::LossOptions().ignore_index(-1)},
      {"label smoothing", {29}, true, lmfuse::LossOptions().label_smoothing(0.1)},
      {"sum", {4, 9}, false, lmfuse::LossOptions().reduction(lmfuse::Reduction::Sum)},
      {"none", {4, 9}, true, lmfuse::LossOptions().reduction(lmfuse::Reduction::None)},
      {"shift", {3, 13}, false, lmfuse::LossOptions().shift(true)},
      {"shift with ignore_index -1 and smoothing", {2, 17}, true,
       lmfuse::LossOptions().shift(true).ignore_index(-1).label_smoothing(0.05)},
      {"softcap", {31}, true, lmfuse::LossOptions().softcap(2.0)},
      {"logit scale", {31}, false, lmfuse::LossOptions().logit_scale(0.3)},
      {"z-loss", {31}, true, lmfuse::LossOptions().z_loss(1e-2)},
      {"n_items divisor", {5, 7}, false, lmfuse::LossOptions().n_items(torch::tensor(50))},
      {"int32 labels", {6, 5}, true, lmfuse::LossOptions(), true},
      {"small chunks", {41}, true, lmfuse::LossOptions().chunk_tokens(4)},
      {"low-memory mode", {41}, true, lmfuse::LossOptions().memory(lmfuse::MemoryMode::LowMemory)},
      {"transposed (non-contiguous) hidden", {5, 6}, true, lmfuse::LossOptions(), false, Layout::TransposedHidden},
      {"strided weight rows", {19}, false, lmfuse::LossOptions(), false, Layout::StridedWeight},
  };
  torch::manual_seed(freshSeed());
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      INFO("seed " << freshSeed());
      std::vector<int64_t> shape = c.leading;
      shape.push_back(kDim);
      torch::Tensor hidden, weight;
      if (c.layout == Layout::TransposedHidden) {  // same values, hidden dimension not innermost in memory
        std::vector<int64_t> swapped = shape;
        std::swap(swapped.front(), swapped.back());
        hidden = torch::randn(swapped).transpose(0, static_cast<int64_t>(shape.size()) - 1);
        REQUIRE_FALSE(hidden.is_contiguous());
      } else {
        hidden = torch::randn(shape);
      }
      if (c.layout == Layout::StridedWeight) {
        weight = (torch::randn({kVocab, 2 * kDim}) * 0.5).slice(1, 0, kDim);
        REQUIRE_FALSE(weight.is_contiguous());
      } else {
        weight = torch::randn({kVocab, kDim}) * 0.5;
      }
      torch::Tensor bias = c.bias ? torch::randn({kVocab}) : torch::Tensor();
      const torch::Tensor labels = randomLabels(c.leading, c.options.ignore_index(), c.int32Labels);
      hidden.requires_grad_(true);
      weight.requires_grad_(true);
      if (bias.defined()) bias.requires_grad_(true);

      auto loss = lmfuse::linear_cross_entropy(hidden, weight, bias, labels, c.options);

      auto h64 = hidden.detach().to(torch::kDouble).requires_grad_(true);
      auto w64 = weight.detach().to(torch::kDouble).requires_grad_(true);
      auto b64 = c.bias ? bias.detach().to(torch::kDouble).requires_grad_(true) : torch::Tensor();
      auto expected = referenceLoss(h64, w64, b64, labels, c.options, c.options.n_items());

      REQUIRE(loss.scalar_type() == torch::kFloat);
      REQUIRE(loss.sizes() == expected.sizes());
      CHECK(relativeError(loss, expected) < 1e-6);

      // A random upstream gradient, so scaling by it is checked too.
      auto upstream = torch::rand(loss.sizes(), torch::kDouble) + 0.5;
      (loss * upstream.to(torch::kFloat)).sum().backward();
      (expected * upstream).sum().backward();
      CHECK(hidden.grad().sizes() == hidden.sizes());
      CHECK(relativeError(hidden.grad(), h64.grad()) < 1e-5);
      CHECK(relativeError(weight.grad(), w64.grad()) < 1e-5);
      if (c.bias) CHECK(relativeError(bias.grad(), b64.grad()) < 1e-5);
    }
  }
}

TEST_CASE("gradients only where asked, none without grad mode", "[torch][adapter]") {
  torch::manual_seed(freshSeed());
  INFO("seed " << freshSeed());
  auto hidden = torch::randn({16, kDim});
  auto weight = torch::randn({kVocab, kDim}).requires_grad_(true);
  auto bias = torch::randn({kVocab});
  auto labels = randomLabels({16}, -100, false);

  SECTION("NoGradGuard: a loss without a graph") {
    hidden.requires_grad_(true);
    torch::NoGradGuard noGrad;
    auto loss = lmfuse::linear_cross_entropy(hidden, weight, bias, labels);
    CHECK_FALSE(loss.requires_grad());
    CHECK(loss.grad_fn() == nullptr);
  }
  SECTION("only weight requires grad") {
    auto loss = lmfuse::linear_cross_entropy(hidden, weight, bias, labels);
    REQUIRE(loss.requires_grad());
    loss.backward();
    CHECK_FALSE(hidden.grad().defined());
    CHECK_FALSE(bias.grad().defined());
    auto w64 = weight.detach().to(torch::kDouble).requires_grad_(true);
    referenceLoss(hidden.to(torch::kDouble), w64, bias.to(torch::kDouble), labels, {}, {}).backward();
    CHECK(relativeError(weight.grad(), w64.grad()) < 1e-5);
  }
  SECTION("a backward pass with create_graph=true is refused, not silently first-order") {
    hidden.requires_grad_(true);
    auto loss = lmfuse::linear_cross_entropy(hidden, weight, bias, labels);
    CHECK_THROWS_WITH(torch::autograd::grad({loss}, {hidden}, {}, /*retain_graph=*/true, /*create_graph=*/true),
                      Catch::Contains("create_graph=true (double backward) is not supported"));
    // Without create_graph the same graph still gives its gradient.
    auto grads = torch::autograd::grad({loss}, {hidden});
    CHECK(grads[0].defined());
  }
  SECTION("an in-place update of the bias before backward, as F::linear allows (it keeps no bias)") {
    hidden.requires_grad_(true);
    bias.requires_grad_(true);
    auto h64 = hidden.detach().to(torch::kDouble).requires_grad_(true);
    auto w64 = weight.detach().to(torch::kDouble).requires_grad_(true);
    auto b64 = bias.detach().to(torch::kDouble).requires_grad_(true);
    auto reference = referenceLoss(h64, w64, b64, labels, {}, {});
    auto loss = lmfuse::linear_cross_entropy(hidden, weight, bias, labels);
    {
      torch::NoGradGuard noGrad;
      bias.clamp_(-0.1, 0.1);
      b64.clamp_(-0.1, 0.1);
    }
    reference.backward({}, /*retain_graph=*/true);
    REQUIRE_NOTHROW(loss.backward({}, /*retain_graph=*/true));
    CHECK(relativeError(hidden.grad(), h64.grad()) < 1e-5);
    CHECK(relativeError(weight.grad(), w64.grad()) < 1e-5);
    CHECK(relativeError(bias.grad(), b64.grad()) < 1e-5);
    // A second pass recomputes from the bias as it is now: refused, as autograd refuses a changed saved input.
    CHECK_THROWS_WITH(loss.backward(), Catch::Contains("modified by an inplace operation"));
  }
  SECTION("a linear probe's weight updated in place before backward (F::linear keeps it only for hidden's gradient)") {
    auto w64 = weight.detach().to(torch::kDouble).requires_grad_(true);
    auto reference = referenceLoss(hidden.to(torch::kDouble), w64, bias.to(torch::kDouble), labels, {}, {});
    auto loss = lmfuse::linear_cross_entropy(hidden, weight, bias, labels);
    {
      torch::NoGradGuard noGrad;
      weight.mul_(0.5);
      w64.mul_(0.5);
    }
    reference.backward();
    REQUIRE_NOTHROW(loss.backward());
    CHECK(relativeError(weight.grad(), w64.grad()) < 1e-5);
  }
  SECTION("a bias made under InferenceMode, as F::linear allows (it saves no bias)") {
    hidden.requires_grad_(true);
    torch::Tensor frozen;
    {
      c10::InferenceMode inference;
      frozen = torch::randn({kVocab});
    }
    auto h64 = hidden.detach().to(torch::kDouble).requires_grad_(true);
    referenceLoss(h64, weight.detach().to(torch::kDouble), frozen.to(torch::kDouble), labels, {}, {}).backward();
    auto loss = lmfuse::linear_cross_entropy(hidden, weight, frozen, labels);
    REQUIRE_NOTHROW(loss.backward());
    CHECK(relativeError(hidden.grad(), h64.grad()) < 1e-5);
  }
  SECTION("a second backward pass through a retained graph accumulates the same gradient") {
    auto loss = lmfuse::linear_cross_entropy(hidden, weight, bias, labels);
    loss.backward({}, /*retain_graph=*/true);
    auto once = weight.grad().clone();
    (loss * 3).backward();
    CHECK(relativeError(weight.grad(), once * 4) < 1e-5);
  }
}

TEST_CASE("no tokens, or no valid token: a zero loss and zero gradients", "[torch][adapter]") {
  // Documented choice (torch.h): PyTorch's mean over nothing is NaN, which would poison the optimiser.
  auto weight = torch::randn({kVocab, kDim}).requires_grad_(true);
  for (int64_t tokens : {0, 6}) {
    INFO("tokens " << tokens);
    weight.mutable_grad() = torch::Tensor();
    auto hidden = torch::randn({tokens, kDim}).requires_grad_(true);
    auto labels = torch::full({tokens}, -100, torch::kLong);
    auto loss = lmfuse::linear_cross_entropy(hidden, weight, {}, labels);
    CHECK(loss.item<float>() == 0.0f);
    loss.backward();
    CHECK(weight.grad().abs().max().item<float>() == 0.0f);
    CHECK(hidden.grad().sizes() == hidden.sizes());
  }
}

TEST_CASE("a rewritten call's mean over no valid token is the original's NaN, with its zero gradients",
          "[torch][adapter]") {
  // The original's NaN, sign included: on x86 its 0 / 0 over ignored rows is -nan, its mean over no rows
  // nan, and bf16 rounds both to nan. A program may print it or test its sign.
  using Code = std::function<torch::Tensor(const torch::Tensor&)>;
  const Code rows = [](const torch::Tensor& l) { return l.reshape({-1, l.size(-1)}); };
  struct Batch {
    const char* name;
    std::vector<int64_t> shape;  // labels; hidden is shape + [D]
    bool shift;
    int64_t validAt;  // -1: every label ignored; else the one position with a label
    double smoothing = 0.0;
    torch::ScalarType dtype = torch::kFloat;
  };
  const std::vector<Batch> batches = {
      {"no tokens", {0}, false, -1},
      {"every label ignored", {6}, false, -1},
      {"one label", {6}, false, 2},
      {"shifted: the one label at the first position, which is nobody's target", {2, 4}, true, 0},
      {"shifted: one label at the second position", {2, 4}, true, 1},
      {"shifted: every label ignored", {2, 4}, true, -1},
      {"no tokens, label smoothing", {0}, false, -1, 0.1},
      {"every label ignored, label smoothing", {6}, false, -1, 0.1},
      {"no tokens, bf16", {0}, false, -1, 0.0, torch::kBFloat16},
      {"every label ignored, bf16", {6}, false, -1, 0.0, torch::kBFloat16},
  };
  for (const Batch& batch : batches) {
    INFO(batch.name);
    auto weight = torch::randn({kVocab, kDim}).to(batch.dtype).requires_grad_(true);
    std::vector<int64_t> hiddenShape = batch.shape;
    hiddenShape.push_back(kDim);
    auto hidden = torch::randn(hiddenShape).to(batch.dtype).requires_grad_(true);
    auto labels = torch::full(batch.shape, -100, torch::kLong);
    if (batch.validAt >= 0) labels.view(-1)[batch.validAt] = 3;
    // The original, as the rewrite replaced it.
    torch::Tensor logits = F::linear(hidden, weight), targets = labels;
    if (batch.shift) {
      logits = logits.slice(-2, 0, -1);
      targets = labels.slice(-1, 1);
    }
    const auto original =
        F::cross_entropy(rows(logits), targets.reshape(-1), F::CrossEntropyFuncOptions().label_smoothing(batch.smoothing));
    const auto options = lmfuse::LossOptions().shift(batch.shift).label_smoothing(batch.smoothing).logits_as_passed(
        {"model.cpp:5", {}, [&](const torch::Tensor& l) { return rows(batch.shift ? l.slice(-2, 0, -1) : l); }});
    auto loss = lmfuse::linear_cross_entropy(hidden, weight, {}, labels, options);
    CHECK(loss.scalar_type() == original.scalar_type());
    const double expected = original.item<double>(), got = loss.item<double>();
    CHECK(std::isnan(expected) == std::isnan(got));
    if (std::isnan(expected))
      CHECK(std::signbit(expected) == std::signbit(got));
    else
      CHECK(std::abs(got - expected) < 1e-4 * (1 + std::abs(expected)));
    loss.backward();
    CHECK(torch::isfinite(weight.grad()).all().item<bool>());
    if (std::isnan(got)) CHECK(weight.grad().abs().max().item<float>() == 0.0f);
  }
}

TEST_CASE("loss dtype follows F::linear; half-precision operands", "[torch][adapter]") {
  torch::manual_seed(freshSeed());
  INFO("seed " << freshSeed());
  auto hidden = torch::randn({2, 9, kDim}).to(torch::kBFloat16).requires_grad_(true);
  auto weight = (torch::randn({kVocab, kDim}) * 0.5).to(torch::kBFloat16).requires_grad_(true);
  auto labels = randomLabels({2, 9}, -100, false);
  auto loss = lmfuse::linear_cross_entropy(hidden, weight, {}, labels);
  CHECK(loss.scalar_type() == F::linear(hidden, weight).scalar_type());
  loss.backward();
  CHECK(hidden.grad().scalar_type() == torch::kBFloat16);
  auto h64 = hidden.detach().to(torch::kDouble).requires_grad_(true);
  auto w64 = weight.detach().to(torch::kDouble).requires_grad_(true);
  auto expected = referenceLoss(h64, w64, {}, labels, {}, {});
  expected.backward();
  CHECK(relativeError(loss, expected) < 1e-2);  // bf16 rounding of the result, fp32 inside
  CHECK(relativeError(hidden.grad(), h64.grad()) < 2e-2);
  CHECK(relativeError(weight.grad(), w64.grad()) < 2e-2);

  // dtype(kFloat): the fp32 loss, not first rounded to bf16 (for code that upcast its logits).
  auto upcast = lmfuse::linear_cross_entropy(hidden, weight, {}, labels, lmfuse::LossOptions().dtype(torch::kFloat));
  CHECK(upcast.scalar_type() == torch::kFloat);
  CHECK(relativeError(upcast, expected) < 1e-5);
}

TEST_CASE("argument errors name the argument", "[torch][adapter]") {
  auto hidden = torch::randn({4, kDim});
  auto weight = torch::randn({kVocab, kDim});
  auto labels = torch::randint(0, kVocab, {4});
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(lmfuse::linear_cross_entropy(hidden, weight.to(torch::kDouble), {}, labels),
                    Contains("weight has dtype"));
  CHECK_THROWS_WITH(lmfuse::linear_cross_entropy(hidden.to(torch::kDouble), weight.to(torch::kDouble), {}, labels),
                    Contains("hidden has dtype"));
  CHECK_THROWS_WITH(lmfuse::linear_cross_entropy(hidden, weight, {}, labels.to(torch::kFloat)),
                    Contains("labels has dtype"));
  CHECK_THROWS_WITH(lmfuse::linear_cross_entropy(hidden, weight, {}, torch::randint(0, kVocab, {5})),
                    Contains("labels has 5 elements"));
  CHECK_THROWS_WITH(lmfuse::linear_cross_entropy(hidden, torch::randn({kVocab, kDim + 1}), {}, labels),
                    Contains("weight is"));
  CHECK_THROWS_WITH(lmfuse::linear_cross_entropy(hidden, weight, torch::randn({kVocab + 1}), labels),
                    Contains("bias must be"));
  auto outOfRange = labels.clone();
  outOfRange[2] = kVocab + 3;
  CHECK_THROWS_WITH(lmfuse::linear_cross_entropy(hidden, weight, {}, outOfRange), Contains("lmfuse"));
}

TEST_CASE("run-time switches", "[torch][adapter]") {
  const bool wasEnabled = lmfuse::enabled(), wasReturning = lmfuse::return_logits();
  lmfuse::set_enabled(true);
  lmfuse::set_return_logits(false);
  CHECK(lmfuse::skip_logits());
  lmfuse::set_return_logits(true);
  CHECK_FALSE(lmfuse::skip_logits());
  lmfuse::set_return_logits(false);
  lmfuse::set_enabled(false);
  CHECK_FALSE(lmfuse::enabled());
  CHECK_FALSE(lmfuse::skip_logits());
  lmfuse::set_enabled(wasEnabled);
  lmfuse::set_return_logits(wasReturning);
}

// What `with torch.autocast("cpu", dtype=torch.bfloat16):` does, for the scope of the object.
struct CpuAutocast {
  CpuAutocast() {
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(torch::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~CpuAutocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_cpu_enabled(false);
  }
};

TEST_CASE("autocast: the fused call casts as F::linear + F::cross_entropy do", "[torch][adapter][autocast]") {
  torch::manual_seed(freshSeed());
  INFO("seed " << freshSeed());
  auto hidden = torch::randn({3, 7, kDim}).requires_grad_(true);
  auto weight = (torch::randn({kVocab, kDim}) * 0.5).requires_grad_(true);
  auto bias = (torch::randn({kVocab}) * 0.1).requires_grad_(true);
  auto labels = randomLabels({3, 7}, -100, false);
  torch::Tensor loss, original;
  const int64_t calls = lmfuse::fused_call_count();
  {
    CpuAutocast autocast;
    loss = lmfuse::linear_cross_entropy(hidden, weight, bias, labels);
    auto logits = F::linear(hidden, weight, bias);
    original = F::cross_entropy(logits.view({-1, kVocab}), labels.view(-1));
    CHECK(lmfuse::skipped_logits(hidden, weight, "autocast.cpp:1").scalar_type() == logits.scalar_type());
  }
  CHECK(lmfuse::fused_call_count() == calls + 1);
  CHECK(loss.scalar_type() == original.scalar_type());  // fp32: cross_entropy is on autocast's fp32 list
  loss.backward();
  CHECK(weight.grad().scalar_type() == torch::kFloat);  // the fp32 parameter's own gradient
  CHECK(hidden.grad().scalar_type() == torch::kFloat);
  // Exactly F::linear's operands: hidden, weight and bias rounded to bf16, then fp32 or better inside.
  auto h64 = hidden.detach().to(torch::kBFloat16).to(torch::kDouble).requires_grad_(true);
  auto w64 = weight.detach().to(torch::kBFloat16).to(torch::kDouble).requires_grad_(true);
  auto b64 = bias.detach().to(torch::kBFloat16).to(torch::kDouble).requires_grad_(true);
  auto expected = referenceLoss(h64, w64, b64, labels, {}, {});
  expected.backward();
  CHECK(relativeError(loss, expected) < 1e-5);
  CHECK(relativeError(weight.grad(), w64.grad()) < 2e-2);  // fp32 (tight bound: the test below)
  CHECK(relativeError(hidden.grad(), h64.grad()) < 2e-2);

  // Outside autocast, bf16 hidden and an fp32 weight are refused, as F::linear refuses them.
  auto bf16Hidden = hidden.detach().to(torch::kBFloat16);
  CHECK_THROWS(F::linear(bf16Hidden, weight.detach()));
  CHECK_THROWS_WITH(lmfuse::linear_cross_entropy(bf16Hidden, weight.detach(), {}, labels),
                    Catch::Matchers::Contains("weight has dtype Float but hidden has dtype BFloat16"));
}

// ||actual - expected|| / ||expected||: the measure of a gradient stored in fp32 (its largest entries
// carry its error; an elementwise relative error would be swamped by entries near zero).
double normwiseError(const torch::Tensor& actual, const torch::Tensor& expected) {
  auto a = actual.to(torch::kDouble), e = expected.to(torch::kDouble);
  return (a - e).norm().item<double>() / e.norm().item<double>();
}

TEST_CASE("autocast: fp32 weight and bias get fp32 gradients not rounded to bf16", "[torch][adapter][autocast]") {
  torch::manual_seed(freshSeed());
  INFO("seed " << freshSeed());
  // Mean (gradients from the forward call), None (recomputed in the backward pass), and Mean's second
  // backward pass through the same graph (recomputed too).
  const lmfuse::Reduction reduction = GENERATE(lmfuse::Reduction::Mean, lmfuse::Reduction::None);
  const bool twice = GENERATE(false, true);
  INFO("reduction " << static_cast<int>(reduction) << (twice ? ", two backward passes" : ""));
  auto hidden = torch::randn({4, 9, kDim}).requires_grad_(true);
  auto weight = (torch::randn({kVocab, kDim}) * 0.5).requires_grad_(true);
  auto bias = (torch::randn({kVocab}) * 0.1).requires_grad_(true);
  auto labels = randomLabels({4, 9}, -100, false);
  const auto options = lmfuse::LossOptions().reduction(reduction);
  torch::Tensor loss;
  {
    CpuAutocast autocast;
    loss = lmfuse::linear_cross_entropy(hidden, weight, bias, labels, options);
  }
  auto upstream = torch::rand(loss.sizes(), torch::kDouble);
  const int passes = twice ? 2 : 1;
  for (int pass = 0; pass < passes; ++pass) loss.backward(upstream.to(loss.scalar_type()), pass + 1 < passes);
  CHECK(weight.grad().scalar_type() == torch::kFloat);
  CHECK(bias.grad().scalar_type() == torch::kFloat);
  // The exact gradient of what the fused call computes with: hidden, weight and bias rounded to bf16.
  auto h64 = hidden.detach().to(torch::kBFloat16).to(torch::kDouble).requires_grad_(true);
  auto w64 = weight.detach().to(torch::kBFloat16).to(torch::kDouble).requires_grad_(true);
  auto b64 = bias.detach().to(torch::kBFloat16).to(torch::kDouble).requires_grad_(true);
  referenceLoss(h64, w64, b64, labels, options, {}).backward(upstream * passes);
  // fp32 storage of an fp64 sum is ~1e-7; a bf16 rounding on the way (autocast's cast backward) is ~1e-3.
  CHECK(normwiseError(weight.grad(), w64.grad()) < 1e-5);
  CHECK(normwiseError(bias.grad(), b64.grad()) < 1e-5);
  CHECK(relativeError(hidden.grad(), h64.grad()) < 2e-2);  // through hidden's own cast: bf16, as F::linear's
}

TEST_CASE("a skipped mm head throws where torch::mm throws on its input's rank", "[torch][adapter]") {
  auto weight = torch::randn({kVocab, kDim});
  for (const auto& hidden : {torch::randn({2, 5, kDim}), torch::randn({kDim})}) {
    std::string original, skipped;
    try { torch::mm(hidden, weight.t()); } catch (const c10::Error& e) { original = e.what_without_backtrace(); }
    try { lmfuse::skipped_logits(hidden, weight, "model.h:9", 2); } catch (const c10::Error& e) { skipped = e.what_without_backtrace(); }
    INFO(original << " | " << skipped);
    REQUIRE_FALSE(original.empty());
    CHECK(skipped.rfind(original.substr(0, original.find('\n')), 0) == 0);  // the same words first
  }
  CHECK(lmfuse::skipped_logits(torch::randn({10, kDim}), weight, "model.h:9", 2).sizes() ==
        torch::IntArrayRef({10, kVocab}));
}

TEST_CASE("a skipped head throws where F::linear throws on its operands, at the head", "[torch][adapter]") {
  // The original's head raises these at its own line: a `try` around the loss alone must not see them.
  const auto weight = torch::randn({kVocab, kDim});
  const std::vector<torch::Tensor> wrong = {torch::randn({5, kDim + 2}), torch::randn({5, kDim}, torch::kDouble)};
  for (const auto& hidden : wrong) {
    bool original = false;
    try { F::linear(hidden, weight); } catch (const c10::Error&) { original = true; }
    REQUIRE(original);
    CHECK_THROWS_AS(lmfuse::skipped_logits(hidden, weight, "model.h:7"), c10::Error);
  }
  // Under autocast the operands meet in the lower precision: what F::linear computes, the head allows.
  {
    at::autocast::set_cpu_enabled(true);
    const auto hidden = torch::randn({5, kDim}).to(torch::kBFloat16);
    CHECK_NOTHROW(F::linear(hidden, weight));
    CHECK_NOTHROW(lmfuse::skipped_logits(hidden, weight, "model.h:7"));
    at::autocast::set_cpu_enabled(false);
  }
  CHECK_NOTHROW(lmfuse::skipped_logits(torch::randn({5, kDim}), weight, "model.h:7"));
  // The head's bias: one of another length, as F::linear, throws at the head (2-D and 3-D input); one it
  // takes (undefined, [V], another dtype F::linear adds) does not.
  for (const auto& hidden : {torch::randn({5, kDim}), torch::randn({2, 3, kDim})}) {
    const auto bias = torch::randn({kVocab - 2});
    bool original = false;
    try { F::linear(hidden, weight, bias); } catch (const c10::Error&) { original = true; }
    REQUIRE(original);
    CHECK_THROWS_AS(lmfuse::skipped_logits(hidden, weight, bias, "model.h:7"), c10::Error);
    for (const auto& taken : {torch::Tensor(), torch::randn({kVocab})}) {
      CHECK_NOTHROW(F::linear(hidden, weight, taken));
      CHECK_NOTHROW(lmfuse::skipped_logits(hidden, weight, taken, "model.h:7"));
    }
  }
}

TEST_CASE("skipped logits answer shape questions and refuse their values, naming the site", "[torch][adapter]") {
  auto hidden = torch::randn({2, 5, kDim});
  auto weight = torch::randn({kVocab, kDim});
  const auto logits = lmfuse::skipped_logits(hidden, weight, "model.h:42");
  const auto real = F::linear(hidden, weight);
  CHECK(lmfuse::is_skipped_logits(logits));
  CHECK_FALSE(lmfuse::is_skipped_logits(real));
  CHECK(logits.defined());
  CHECK(logits.sizes() == real.sizes());
  CHECK(logits.size(-1) == kVocab);
  CHECK(logits.dim() == real.dim());
  CHECK(logits.numel() == real.numel());
  CHECK(logits.scalar_type() == real.scalar_type());
  CHECK(logits.device() == real.device());
  CHECK(logits.options().dtype() == real.options().dtype());

  struct Use {
    const char* name;
    std::function<void()> run;
  };
  const std::vector<Use> uses = {
      {"view", [&] { logits.view({-1, kVocab}); }},
      {"reshape", [&] { logits.reshape({-1}); }},
      {"argmax", [&] { logits.argmax(-1); }},
      {"to(kDouble)", [&] { logits.to(torch::kDouble); }},
      {"float()", [&] { logits.to(torch::kHalf); }},
      {"item", [&] { logits.sum().item<float>(); }},
      {"clone", [&] { logits.clone(); }},
      {"softmax", [&] { logits.softmax(-1); }},
      {"index", [&] { logits.index({0}); }},
      {"slice", [&] { logits.slice(1, 0, 1); }},
      {"copy_ from it", [&] { torch::empty(real.sizes()).copy_(logits); }},
      {"printing", [&] { std::ostringstream out; out << logits; }},
      {"detach, then view", [&] { logits.detach().view({-1}); }},
      {"cross_entropy", [&] { F::cross_entropy(logits.view({-1, kVocab}), torch::zeros({10}, torch::kLong)); }},
  };
  for (const Use& use : uses) {
    INFO(use.name);
    try {
      use.run();
      FAIL("no error");
    } catch (const std::exception& error) {
      const std::string message = error.what();
      CHECK_THAT(message, Catch::Matchers::Contains("lmfuse") && Catch::Matchers::Contains("model.h:42") &&
                              Catch::Matchers::Contains("LMFUSE_RETURN_LOGITS=1") &&
                              Catch::Matchers::Contains("// NOLINT(lmfuse)"));
    }
  }
}

namespace {
// The error message of `run`, or "" when it does not throw.
std::string errorOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}
}  // namespace

TEST_CASE("reshapes of skipped logits run on a stand-in: the original's shape, strides, dtype and errors",
          "[torch][adapter]") {
  auto hidden = torch::randn({2, 5, kDim});
  auto weight = torch::randn({kVocab, kDim});
  const auto real = F::linear(hidden, weight);
  const auto skipped = lmfuse::skipped_logits(hidden, weight, "model.h:7");
  using Code = std::function<torch::Tensor(const torch::Tensor&)>;
  struct Reshape {
    const char* name;
    Code code;
  };
  const std::vector<Reshape> reshapes = {
      {"view({-1, V})", [](const torch::Tensor& l) { return l.view({-1, kVocab}); }},
      {"flatten(0, 1)", [](const torch::Tensor& l) { return l.flatten(0, 1); }},
      {"the shift", [](const torch::Tensor& l) { return l.slice(1, 0, -1); }},
      {"the shift, contiguous, reshaped", [](const torch::Tensor& l) { return l.slice(1, 0, -1).contiguous().view({-1, kVocab}); }},
      {"an upcast", [](const torch::Tensor& l) { return l.to(torch::kDouble); }},
      {"log_softmax", [](const torch::Tensor& l) { return F::log_softmax(l, -1); }},
  };
  for (const Reshape& reshape : reshapes) {
    INFO(reshape.name);
    const auto expected = reshape.code(real);
    const auto got = lmfuse::skipped_logits_after(skipped, reshape.code);
    CHECK(lmfuse::is_skipped_logits(got));
    CHECK(got.sizes() == expected.sizes());
    CHECK(got.scalar_type() == expected.scalar_type());
    CHECK(got.device() == expected.device());
    CHECK_THAT(errorOf([&] { got.sum(); }), Catch::Matchers::Contains("model.h:7"));
    // Logits that were computed go through the original's code.
    CHECK(torch::equal(lmfuse::skipped_logits_after(real, reshape.code), expected));
  }
  // contiguous() reads no value: refused where LibTorch asks the tensor (1.13), the tensor itself where
  // LibTorch answers from the sizes (2.x).
  bool itself = false;
  const std::string contiguousError = errorOf([&] { itself = lmfuse::is_skipped_logits(skipped.contiguous()); });
  CHECK((contiguousError.empty() ? itself : contiguousError.find("model.h:7") != std::string::npos));
  // The strides travel with the skipped logits: a view of the shifted (non-contiguous) logits fails as the
  // original's does, one after .contiguous() does not.
  const auto shifted = lmfuse::skipped_logits_after(skipped, reshapes[2].code);
  const Code view = [](const torch::Tensor& l) { return l.view({-1, kVocab}); };
  CHECK_FALSE(errorOf([&] { view(reshapes[2].code(real)); }).empty());
  CHECK_FALSE(errorOf([&] { lmfuse::skipped_logits_after(shifted, view); }).empty());
  CHECK(lmfuse::skipped_logits_after(shifted, [](const torch::Tensor& l) { return l.contiguous(); }).sizes() ==
        reshapes[2].code(real).sizes());
}

// Code that returns the logits may be asked whether they carry a graph (`if (logits.requires_grad())` before
// a backward): skipped logits answer as the head's logits would, before and after a reshape.
TEST_CASE("skipped logits record the graph the head's logits would, and a backward through it refuses",
          "[torch][adapter]") {
  struct Case {
    const char* name;
    bool hiddenGrad, weightGrad, gradMode;
    int bias;  // 0: none, 1: without grad, 2: requiring grad
  };
  for (const Case& each : {Case{"the weight requires grad", false, true, true, 0},
                           Case{"the hidden states require grad", true, false, true, 0},
                           Case{"neither requires grad", false, false, true, 0},
                           Case{"neither requires grad, nor the bias", false, false, true, 1},
                           Case{"only the bias requires grad (the head frozen but its bias)", false, false, true, 2},
                           Case{"no grad mode", true, true, false, 2}}) {
    INFO(each.name);
    auto hidden = torch::randn({2, 5, kDim}).requires_grad_(each.hiddenGrad);
    auto weight = torch::randn({kVocab, kDim}).requires_grad_(each.weightGrad);
    auto bias = each.bias ? torch::randn({kVocab}).requires_grad_(each.bias == 2) : torch::Tensor();
    torch::AutoGradMode mode(each.gradMode);
    const auto real = F::linear(hidden, weight, bias);
    const auto skipped = lmfuse::skipped_logits(hidden, weight, bias, "model.h:3");
    const auto flat = [](const torch::Tensor& l) { return l.view({-1, kVocab}); };
    const auto realFlat = flat(real);
    const auto skippedFlat = lmfuse::skipped_logits_after(skipped, flat);
    for (const auto& [got, expected] : {std::pair(skipped, real), std::pair(skippedFlat, realFlat)}) {
      CHECK(got.requires_grad() == expected.requires_grad());
      CHECK(got.is_leaf() == expected.is_leaf());
      CHECK(static_cast<bool>(got.grad_fn()) == static_cast<bool>(expected.grad_fn()));
      if (got.grad_fn())
        CHECK_THAT(errorOf([&] { torch::autograd::backward({got}, {torch::ones(expected.sizes())}); }),
                   Catch::Matchers::Contains("model.h:3") && Catch::Matchers::Contains("LMFUSE_RETURN_LOGITS=1"));
    }
    CHECK(lmfuse::is_skipped_logits(skipped.detach()));
    CHECK_FALSE(skipped.detach().requires_grad());
  }
}

TEST_CASE("a call without the labels' code checks the logits input of the loss it replaced and refuses one it would compute otherwise",
          "[torch][adapter]") {
  // T == V: the original given 3-D logits runs, reading the classes from dimension 1. Given the labels' code
  // (as every rewrite passes it), the call computes such a loss as the original does (test_adapter_errors.cpp).
  constexpr int64_t batch = 2, time = 7, vocab = 7;
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  auto hidden = torch::randn({batch, time, kDim}, torch::kDouble);
  auto weight = torch::randn({vocab, kDim}, torch::kDouble);
  auto labels = torch::randint(0, vocab, {batch, time});
  const auto logits = F::linear(hidden, weight);
  using Code = std::function<torch::Tensor(const torch::Tensor&)>;
  struct Passed {
    const char* name;
    torch::Tensor from;  // undefined: the head call sat inside the loss
    Code input;
    bool shift;
    const char* refusal;  // nullptr: accepted
  };
  const auto skipped = lmfuse::skipped_logits(hidden.to(torch::kFloat), weight.to(torch::kFloat), "model.cpp:3");
  const Code asThey = [](const torch::Tensor& l) { return l; };
  const std::vector<Passed> cases = {
      {"view({-1, V}) of computed logits", logits, [](const torch::Tensor& l) { return l.view({-1, l.size(-1)}); }, false, nullptr},
      {"view({-1, V}) of skipped logits", skipped, [](const torch::Tensor& l) { return l.view({-1, vocab}); }, false, nullptr},
      {"flatten(0, 1) of an inline head", {}, [](const torch::Tensor& l) { return l.flatten(0, 1); }, false, nullptr},
      {"log_softmax, then reshaped", {}, [](const torch::Tensor& l) { return F::log_softmax(l, -1).reshape({-1, vocab}); }, false, nullptr},
      {"the shift, reshaped", skipped, [](const torch::Tensor& l) { return l.slice(1, 0, -1).reshape({-1, vocab}); }, true, nullptr},
      {"3-D logits as they are", logits, asThey, false, "from dimension 1"},
      {"3-D skipped logits as they are", skipped, asThey, false, "from dimension 1"},
      {"3-D logits of an inline head", {}, asThey, false, "from dimension 1"},
      {"the shift, not reshaped", skipped, [](const torch::Tensor& l) { return l.slice(1, 0, -1); }, true, "from dimension 1"},
      {"view({-1, K}) with K = 2V", logits, [](const torch::Tensor& l) { return l.view({-1, 2 * vocab}); }, false, "in rows of 14"},
      {"view({-1, V}) of a slice the fused call does not make", logits, [](const torch::Tensor& l) { return l.slice(1, 0, 3).reshape({-1, vocab}); }, false, "[6, 7]"},
  };
  for (const Passed& item : cases) {
    INFO(item.name);
    const auto options = lmfuse::LossOptions().shift(item.shift).logits_as_passed({"model.cpp:9", item.from, item.input});
    const std::string error = errorOf([&] { lmfuse::linear_cross_entropy(hidden.to(torch::kFloat), weight.to(torch::kFloat), {}, labels, options); });
    if (!item.refusal) {
      CHECK(error.empty());
      continue;
    }
    CHECK_THAT(error, Catch::Matchers::Contains("model.cpp:9") && Catch::Matchers::Contains(item.refusal) &&
                          Catch::Matchers::Contains("NOLINT(lmfuse)"));
  }
  // A shifted loss over 4-D hidden states with B == T: the original's slice(1, ...) shifts along B, the fused
  // call along T, and the rows count the same; and labels with a trailing dimension of 1.
  const auto hidden4 = torch::randn({2, 3, 3, kDim});
  const auto labels4 = torch::randint(0, vocab, {2, 3, 3});
  const Code shifted = [](const torch::Tensor& l) { return l.slice(1, 0, -1).reshape({-1, l.size(-1)}); };
  CHECK_THAT(errorOf([&] {
               lmfuse::linear_cross_entropy(hidden4, weight.to(torch::kFloat), {}, labels4,
                                            lmfuse::LossOptions().shift(true).logits_as_passed({"model.cpp:9", {}, shifted}));
             }),
             Catch::Matchers::Contains("model.cpp:9") && Catch::Matchers::Contains("sequence dimension"));
  CHECK_THAT(errorOf([&] {
               lmfuse::linear_cross_entropy(hidden.to(torch::kFloat), weight.to(torch::kFloat), {}, labels.unsqueeze(-1),
                                            lmfuse::LossOptions().shift(true).logits_as_passed({"model.cpp:9", {}, shifted}));
             }),
             Catch::Matchers::Contains("without its last dimension"));
  // What the check prevents: the original over dimension 1 and the fused loss are different numbers.
  const double original = F::cross_entropy(logits, labels).item<double>();
  const double fused = lmfuse::linear_cross_entropy(hidden.to(torch::kFloat), weight.to(torch::kFloat), {}, labels).item<double>();
  const double perToken = F::cross_entropy(logits.view({-1, vocab}), labels.view(-1)).item<double>();
  CHECK(std::abs(fused - perToken) < 1e-4 * (1 + std::abs(perToken)));
  CHECK(std::abs(original - fused) > 1e-3);
  // A single token's logits may be 1-D, as cross_entropy takes them unbatched.
  const auto one = torch::randn({kDim});
  CHECK(errorOf([&] {
          lmfuse::linear_cross_entropy(one, weight.to(torch::kFloat), {}, torch::tensor(3),
                                       lmfuse::LossOptions().logits_as_passed({"model.cpp:9", {}, asThey}));
        }).empty());
}

TEST_CASE("a rewritten call throws where the replaced loss would have thrown on its labels", "[torch][adapter]") {
  // The rewrite hands over the labels argument as code over the variable it starts from; the fused call
  // takes any integer labels with one per token, cross_entropy only Long class indices, one per row of its
  // input. Each case is run through the original too: it throws there exactly when the fused call does,
  // and where neither throws the two losses agree.
  constexpr int64_t batch = 2, time = 5, vocab = 9;
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  const auto hidden = torch::randn({batch, time, kDim});
  const auto weight = torch::randn({vocab, kDim});
  const auto labels = torch::randint(0, vocab, {batch, time});
  const auto strided = labels.t().contiguous().t();  // [2, 5] with strides (1, 2): not viewable as [-1]
  using Code = std::function<torch::Tensor(const torch::Tensor&)>;
  const Code rows = [](const torch::Tensor& l) { return l.view({-1, vocab}); };
  struct Labelled {
    const char* name;
    torch::Tensor from;   // the variable the labels argument starts from
    Code code;            // the labels argument as written
    torch::Tensor given;  // what the rewrite passes as the fused call's labels
    const char* refusal;  // nullptr: both compute
  };
  const std::vector<Labelled> cases = {
      {"view(-1) of Long labels", labels, [](const torch::Tensor& y) { return y.view(-1); }, labels, nullptr},
      {"reshape of strided labels", strided, [](const torch::Tensor& y) { return y.reshape(-1); }, strided, nullptr},
      {"view(-1) of strided labels", strided, [](const torch::Tensor& y) { return y.view(-1); }, strided, "view"},
      {"labels not flattened", labels, [](const torch::Tensor& y) { return y; }, labels, "batch_size"},
      {"a batch's labels of one row", labels, [](const torch::Tensor& y) { return y.select(0, 0); }, labels, "batch_size"},
      {"int32 labels", labels.to(torch::kInt), [](const torch::Tensor& y) { return y.view(-1); }, labels.to(torch::kInt),
       "found Int"},
      {"cast to int32 in the loss", labels, [](const torch::Tensor& y) { return y.view(-1).to(torch::kInt); },
       labels.to(torch::kInt), "found Int"},
      {"cast to Long in the loss", labels.to(torch::kInt), [](const torch::Tensor& y) { return y.view(-1).to(torch::kLong); },
       labels, nullptr},
      // Floating labels are computed as the original computes them (class probabilities): one per row is
      // no target it takes, and it throws its own error.
      {"floating labels", labels.to(torch::kFloat), [](const torch::Tensor& y) { return y.view(-1); }, labels, "found Float"},
  };
  for (const Labelled& item : cases) {
    INFO(item.name);
    const auto logits = F::linear(hidden, weight);
    const std::string original = errorOf([&] { F::cross_entropy(rows(logits), item.code(item.from)); });
    torch::Tensor fused;
    const auto options = lmfuse::LossOptions().logits_as_passed({"model.cpp:9", logits, rows, {}, item.from, item.code});
    const std::string error = errorOf([&] { fused = lmfuse::linear_cross_entropy(hidden, weight, {}, item.given, options); });
    if (!item.refusal) {
      CHECK(original.empty());
      REQUIRE(error.empty());
      const auto expected = F::cross_entropy(rows(logits), item.code(item.from).to(torch::kLong));
      CHECK(std::abs(fused.item<double>() - expected.item<double>()) < 1e-4 * (1 + std::abs(expected.item<double>())));
      continue;
    }
    CHECK_FALSE(original.empty());  // the original throws too
    CHECK_THAT(error, Catch::Matchers::Contains("model.cpp:9") && Catch::Matchers::Contains(item.refusal));
  }
  // Without the labels code (a call written by hand) the fused call takes any of these labels.
  CHECK(errorOf([&] {
          lmfuse::linear_cross_entropy(hidden, weight, {}, labels.to(torch::kInt),
                                       lmfuse::LossOptions().logits_as_passed({"model.cpp:9", {}, rows}));
        }).empty());
}

TEST_CASE("a shifted loss is checked against the dims its shift is written on", "[torch][adapter]") {
  // The rewrite hands over the dims of `logits.slice(d, 0, -1)` and `labels.slice(e, 1)`. Where they are the
  // positions for the ranks given, the fused loss and gradients are the original's; elsewhere the call
  // refuses, naming the site, though the shapes may agree (4-D hidden states with B == T).
  constexpr int64_t vocab = 11;
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(static_cast<int64_t>(seed));
  using Code = std::function<torch::Tensor(const torch::Tensor&)>;
  struct Shifted {
    const char* name;
    std::vector<int64_t> hidden;  // the labels are its shape without the last dimension
    lmfuse::ShiftDims dims;
    const char* refusal;  // nullptr: accepted, and the fused loss is the original's
    bool originalThrows = false;  // the refusal is the original's own error, raised by its code as it is
  };
  const std::vector<Shifted> cases = {
      {"[B, T, D], slice(1, ...) and slice(1, ...)", {2, 5, kDim}, {1, 1}, nullptr},
      {"[B, T, D], slice(-2, ...) and slice(-1, ...)", {2, 5, kDim}, {-2, -1}, nullptr},
      {"[B, T, D] with B == T, slice(-2, ...) and slice(1, ...)", {3, 3, kDim}, {-2, 1}, nullptr},
      {"one sequence [T, D], slice(0, ...) and slice(0, ...)", {6, kDim}, {0, 0}, nullptr},
      {"one sequence [T, D], slice(-2, ...) and slice(-1, ...)", {6, kDim}, {-2, -1}, nullptr},
      {"[A, B, T, D] with B == T, slice(-2, ...) and slice(-1, ...)", {2, 3, 3, kDim}, {-2, -1}, nullptr},
      {"[A, B, T, D] with B == T, slice(1, ...) and slice(1, ...)", {2, 3, 3, kDim}, {1, 1}, "along their dimension 1"},
      // The original's reshape of [T, V - 1] into rows of V fails: the fused call raises that error first.
      {"one sequence [T, D], slice(1, ...): the classes", {6, kDim}, {1, -1}, "is invalid for input of size", true},
      {"[B, T, D] with B == T, labels slice(0, ...)", {3, 3, kDim}, {1, 0}, "labels along their dimension 0"},
  };
  for (const Shifted& item : cases) {
    INFO(item.name);
    const auto hidden = torch::randn(item.hidden, torch::kDouble).requires_grad_(true);
    const auto weight = torch::randn({vocab, kDim}, torch::kDouble);
    const auto labelsShape = c10::IntArrayRef(item.hidden).slice(0, item.hidden.size() - 1);
    const auto labels = torch::randint(0, vocab, labelsShape);
    // The original's input as the rewrite hands it over: its shift on the written dim, then one row per token.
    const int64_t logitsDim = item.dims.logits;
    const Code input = [logitsDim](const torch::Tensor& l) { return l.slice(logitsDim, 0, -1).reshape({-1, l.size(-1)}); };
    const auto options = lmfuse::LossOptions().shift(true).logits_as_passed({"model.cpp:12", {}, input, item.dims});
    const auto hiddenFloat = hidden.to(torch::kFloat).detach().requires_grad_(true);
    torch::Tensor fused;
    const std::string error = errorOf([&] { fused = lmfuse::linear_cross_entropy(hiddenFloat, weight.to(torch::kFloat), {}, labels, options); });
    if (item.originalThrows) {
      CHECK_THAT(error, Catch::Matchers::Contains(item.refusal));
      CHECK_THAT(errorOf([&] { input(F::linear(hidden, weight)); }), Catch::Matchers::Contains(item.refusal));
      continue;
    }
    if (item.refusal) {
      CHECK_THAT(error, Catch::Matchers::Contains("model.cpp:12") && Catch::Matchers::Contains(item.refusal) &&
                            Catch::Matchers::Contains("NOLINT(lmfuse)"));
      continue;
    }
    REQUIRE(error.empty());
    const auto original = F::cross_entropy(input(F::linear(hidden, weight)), labels.slice(item.dims.labels, 1).reshape({-1}));
    original.backward();
    fused.backward();
    CHECK(std::abs(fused.item<double>() - original.item<double>()) < 1e-5 * (1 + std::abs(original.item<double>())));
    CHECK((hiddenFloat.grad().to(torch::kDouble) - hidden.grad()).abs().max().item<double>() < 1e-5);
  }
}

TEST_CASE("fused_call_count counts the calls that ran the fused computation", "[torch][adapter]") {
  auto hidden = torch::randn({4, kDim}).requires_grad_(true);
  auto weight = torch::randn({kVocab, kDim});
  auto labels = torch::randint(0, kVocab, {4});
  const int64_t before = lmfuse::fused_call_count();
  lmfuse::linear_cross_entropy(hidden, weight, {}, labels).backward();
  {
    torch::NoGradGuard noGrad;
    lmfuse::linear_cross_entropy(hidden, weight, {}, labels);
  }
  CHECK(lmfuse::fused_call_count() == before + 2);
}

TEST_CASE("a loss module's options give the module's loss", "[torch][adapter]") {
  // A rewritten `criterion(logits, y)` passes lmfuse::module_loss_options(criterion->options, criterion->weight).
  torch::manual_seed(static_cast<int64_t>(freshSeed()));
  INFO("seed " << freshSeed());
  auto hidden = torch::randn({2, 7, kDim}, torch::kDouble);
  auto weight = torch::randn({kVocab, kDim}, torch::kDouble) * 0.3;
  auto bias = torch::randn({kVocab}, torch::kDouble);
  auto labels = torch::randint(0, kVocab, {2, 7}, torch::kLong);
  labels.index_put_({0, 3}, 5);  // some tokens carry the ignored label 5 below
  labels.index_put_({1, 0}, 5);
  auto logits = F::linear(hidden, weight, bias).view({-1, kVocab});
  auto fused = [&](const lmfuse::LossOptions& options) {
    return lmfuse::linear_cross_entropy(hidden.to(torch::kFloat), weight.to(torch::kFloat), bias.to(torch::kFloat),
                                        labels, options)
        .to(torch::kDouble);
  };
  for (const auto& moduleOptions :
       {torch::nn::CrossEntropyLossOptions(), torch::nn::CrossEntropyLossOptions().ignore_index(5),
        torch::nn::CrossEntropyLossOptions().ignore_index(5).label_smoothing(0.2).reduction(torch::kSum),
        torch::nn::CrossEntropyLossOptions().reduction(torch::kMean).label_smoothing(0.05)}) {
    torch::nn::CrossEntropyLoss criterion(moduleOptions);
    auto expected = criterion(logits, labels.view(-1));
    CHECK(torch::allclose(fused(lmfuse::module_loss_options(criterion->options, criterion->weight)), expected, 1e-5,
                          1e-5));
  }
  torch::nn::NLLLoss nll(torch::nn::NLLLossOptions().ignore_index(5).reduction(torch::kSum));
  CHECK(torch::allclose(fused(lmfuse::module_loss_options(nll->options, nll->weight)),
                        nll(F::log_softmax(logits, -1), labels.view(-1)), 1e-5, 1e-5));
  // Configured after construction: the options are read when the loss runs.
  torch::nn::CrossEntropyLoss later;
  later->options.ignore_index(5);
  CHECK(torch::allclose(fused(lmfuse::module_loss_options(later->options, later->weight)),
                        later(logits, labels.view(-1)), 1e-5, 1e-5));
  // No fused equivalent: an error naming the option.
  auto message = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const c10::Error& error) {
      return std::string(error.what_without_backtrace());
    }
    return std::string("no error");
  };
  torch::nn::CrossEntropyLoss weighted(torch::nn::CrossEntropyLossOptions().weight(torch::ones({kVocab})));
  CHECK_THAT(message([&] { lmfuse::module_loss_options(weighted->options); }), Catch::Contains("class weights"));
  CHECK_THAT(message([&] { lmfuse::module_loss_options(weighted->options, weighted->weight); }),
             Catch::Contains("class weights"));
  // Weights assigned to the module after construction: its forward applies them, its options do not hold
  // them. The weight the rewrite passes tells them.
  {
    torch::nn::CrossEntropyLoss criterion;
    criterion->weight = torch::rand({kVocab}) + 0.5;
    CHECK(!criterion->options.weight().defined());
    CHECK_THAT(message([&] { lmfuse::module_loss_options(criterion->options, criterion->weight); }),
               Catch::Contains("class weights (its `weight`)"));
    torch::nn::NLLLoss nllAssigned;
    nllAssigned->weight = torch::rand({kVocab}) + 0.5;
    CHECK_THAT(message([&] { lmfuse::module_loss_options(nllAssigned->options, nllAssigned->weight); }),
               Catch::Contains("class weights (its `weight`)"));
  }
  // Weights set in the options after construction (no reset()): the module's forward does not apply them,
  // so neither does the fused call; it computes the module's unweighted loss.
  {
    torch::nn::CrossEntropyLoss criterion;
    criterion->options.weight(torch::rand({kVocab}) + 0.5);
    CHECK(torch::allclose(fused(lmfuse::module_loss_options(criterion->options, criterion->weight)),
                          criterion(logits, labels.view(-1)), 1e-5, 1e-5));
  }
  torch::nn::CrossEntropyLoss perToken(torch::nn::CrossEntropyLossOptions().reduction(torch::kNone));
  CHECK_THAT(message([&] { lmfuse::module_loss_options(perToken->options); }), Catch::Contains("reduction is None"));
}

TEST_CASE("what a rewritten call saves for backward is what the original's nodes save", "[torch][adapter]") {
  // Each case runs the original (F::linear, then cross_entropy over the loss's input and labels code) and the
  // rewritten call (skipped logits, the same codes handed over), does the same thing to the loss, the
  // activations or the labels between the loss and backward, and runs backward: both fail, or both give the
  // same gradients. Autograd's checks of what is saved (a change in place since, an inference tensor) see what
  // each program saved: the copy a fold or a labels code made, or a view of the caller's tensor.
  constexpr int64_t batch = 2, time = 5, vocab = 11;
  const uint64_t seed = freshSeed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  const auto activations = torch::randn({time, batch, kDim});  // [T, B, D]: transposed, hidden is not contiguous
  const auto weights = torch::randn({vocab, kDim});
  const auto allLabels = torch::randint(0, vocab, {batch, time});
  using Code = std::function<torch::Tensor(const torch::Tensor&)>;
  struct Between {
    torch::Tensor &loss, &activations, &labels;
  };
  struct Saved {
    const char* name;
    bool transposed;  // hidden = activations.transpose(0, 1), else a contiguous copy of that
    bool shift;       // labels->slice(1, 1).reshape(-1) (a copy) against labels->view(-1) (a view)
    lmfuse::Reduction reduction;
    bool inferenceActivations, inferenceLabels;
    std::function<void(Between)> between;
  };
  const auto none = [](Between) {};
  const std::vector<Saved> cases = {
      {"a Sum loss divided in place (gradient accumulation)", false, false, lmfuse::Reduction::Sum, false, false,
       [](Between b) { b.loss.div_(4); }},
      {"a per-token loss masked in place", false, false, lmfuse::Reduction::None, false, false,
       [](Between b) { b.loss.mul_(b.labels.view(b.loss.sizes()).ne(3)); }},
      {"a Mean loss detached in place", false, false, lmfuse::Reduction::Mean, false, false,
       [](Between b) { b.loss.detach_(); }},
      {"shifted labels (copied by their code) refilled", false, true, lmfuse::Reduction::Mean, false, false,
       [](Between b) { b.labels.fill_(1); }},
      {"labels viewed by their code refilled", false, false, lmfuse::Reduction::Mean, false, false,
       [](Between b) { b.labels.fill_(1); }},
      {"transposed activations (copied by the fold) written", true, false, lmfuse::Reduction::Mean, false, false,
       [](Between b) { b.activations.mul_(2); }},
      {"contiguous activations (viewed by the fold) written", false, false, lmfuse::Reduction::Mean, false, false,
       [](Between b) { b.activations.mul_(2); }},
      {"transposed activations made under InferenceMode", true, false, lmfuse::Reduction::Mean, true, false, none},
      {"contiguous activations made under InferenceMode", false, false, lmfuse::Reduction::Mean, true, false, none},
      {"shifted labels made under InferenceMode", false, true, lmfuse::Reduction::Mean, false, true, none},
      {"viewed labels made under InferenceMode", false, false, lmfuse::Reduction::Mean, false, true, none},
      {"a per-token loss of transposed activations, recomputed", true, false, lmfuse::Reduction::None, false, false,
       [](Between b) { b.activations.mul_(2); }},
  };
  for (const Saved& item : cases) {
    INFO(item.name);
    struct Outcome {
      std::string error;
      torch::Tensor gradWeight;
    };
    const auto run = [&](bool fused) {
      torch::Tensor x, labels;
      {
        c10::InferenceMode inference(item.inferenceActivations);
        x = item.transposed ? activations.clone() : activations.transpose(0, 1).contiguous().transpose(0, 1);
      }
      {
        c10::InferenceMode inference(item.inferenceLabels);
        labels = allLabels.clone();
      }
      const auto weight = weights.clone().requires_grad_(true);
      const Code input = item.shift ? Code([](const torch::Tensor& l) { return l.slice(1, 0, -1).reshape({-1, vocab}); })
                                    : Code([](const torch::Tensor& l) { return l.reshape({-1, vocab}); });
      const Code target = item.shift ? Code([](const torch::Tensor& y) { return y.slice(1, 1).reshape(-1); })
                                     : Code([](const torch::Tensor& y) { return y.view(-1); });
      const auto reduction = item.reduction == lmfuse::Reduction::Sum    ? F::CrossEntropyFuncOptions::reduction_t(torch::kSum)
                             : item.reduction == lmfuse::Reduction::None ? F::CrossEntropyFuncOptions::reduction_t(torch::kNone)
                                                                         : F::CrossEntropyFuncOptions::reduction_t(torch::kMean);
      Outcome outcome;
      torch::Tensor loss;
      outcome.error = errorOf([&] {
        const auto hidden = x.transpose(0, 1);  // [B, T, D]
        if (fused) {
          const auto skipped = lmfuse::skipped_logits(hidden, weight, "model.cpp:9");
          auto options = lmfuse::LossOptions().shift(item.shift).reduction(item.reduction);
          options.logits_as_passed({"model.cpp:10", skipped, input,
                                    item.shift ? c10::optional<lmfuse::ShiftDims>(lmfuse::ShiftDims{1, 1}) : c10::nullopt,
                                    labels, target});
          loss = lmfuse::linear_cross_entropy(hidden, weight, {}, labels, options);
        } else {
          loss = F::cross_entropy(input(F::linear(hidden, weight)), target(labels),
                                  F::CrossEntropyFuncOptions().reduction(reduction));
        }
        if (item.reduction == lmfuse::Reduction::None) loss = loss.view({batch, -1});
        item.between({loss, x, labels});
        if (loss.requires_grad()) (item.reduction == lmfuse::Reduction::None ? loss.sum() : loss).backward();
      });
      outcome.gradWeight = weight.grad();
      return outcome;
    };
    const Outcome original = run(false), rewritten = run(true);
    INFO("original: " << (original.error.empty() ? "ran" : original.error));
    INFO("rewritten: " << (rewritten.error.empty() ? "ran" : rewritten.error));
    CHECK(original.error.empty() == rewritten.error.empty());
    if (original.error.empty() && rewritten.error.empty()) {
      REQUIRE(original.gradWeight.defined() == rewritten.gradWeight.defined());
      if (original.gradWeight.defined()) CHECK(relativeError(rewritten.gradWeight, original.gradWeight) < 1e-5);
    }
  }
}
