// The CPU reference against the brute force, one named configuration per row, each on several fresh
// random shapes; and the brute force's own gradients against finite differences of its loss.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <limits>

#include "expect.h"
#include "harness.h"

namespace lmfuse::test {
namespace {

struct Shape {
  int64_t tokens, dim, vocab;
};

Shape random_shape(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> tokens(1, 12), dim(1, 9), vocab(1, 21);
  return {tokens(rng), dim(rng), vocab(rng)};
}

// Random cu_seqlens over `tokens`: sorted boundaries, possibly empty segments, possibly tokens left
// after the last boundary.
std::vector<int64_t> random_segments(std::mt19937_64& rng, int64_t tokens) {
  std::uniform_int_distribution<int64_t> count(1, 4), position(0, tokens);
  std::vector<int64_t> bounds{0};
  int64_t segments = count(rng);
  for (int64_t k = 0; k < segments; ++k) bounds.push_back(position(rng));
  std::sort(bounds.begin(), bounds.end());
  if (std::bernoulli_distribution(0.5)(rng)) bounds.back() = tokens;
  return bounds;
}

std::vector<float> random_scales(std::mt19937_64& rng, std::size_t count) {
  std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
  std::vector<float> scales(count);
  for (float& s : scales) s = scale(rng);
  return scales;
}

struct Row {
  const char* name;
  std::function<Shape(Shape)> shape;                           // adjusts the random shape
  DType dtype;
  bool bias;
  std::function<void(Case&, std::mt19937_64&)> configure;      // options, labels, strides...
  Wants wants;
};

Shape same(Shape s) { return s; }
void nothing(Case&, std::mt19937_64&) {}

const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      {"mean, defaults", same, DType::Float32, false, nothing, {}},
      {"sum", same, DType::Float32, false, [](Case& c, auto&) { c.options.reduction = Reduction::Sum; }, {}},
      {"none with per-token grad_scale", same, DType::Float32, true,
       [](Case& c, auto& rng) {
         c.options.reduction = Reduction::None;
         c.grad_scale = random_scales(rng, std::size_t(c.tokens));
         c.options.grad_scale_count = c.tokens;
       }, {}},
      {"none without grad_scale", same, DType::Float32, false,
       [](Case& c, auto&) { c.options.reduction = Reduction::None; }, {}},
      {"mean with scalar grad_scale", same, DType::Float32, true,
       [](Case& c, auto& rng) { c.grad_scale = random_scales(rng, 1); }, {}},
      {"all labels ignored", same, DType::Float32, true,
       [](Case& c, auto&) { for (auto& l : c.labels) l = c.options.ignore_index; }, {}},
      {"all labels ignored, sum", same, DType::Float32, true,
       [](Case& c, auto&) {
         c.options.reduction = Reduction::Sum;
         for (auto& l : c.labels) l = c.options.ignore_index;
       }, {}},
      {"one valid label", same, DType::Float32, false,
       [](Case& c, auto& rng) {
         for (auto& l : c.labels) l = c.options.ignore_index;
         c.labels[std::uniform_int_distribution<std::size_t>(0, c.labels.size() - 1)(rng)] = c.vocab - 1;
       }, {}},
      {"V = 1", [](Shape s) { return Shape{s.tokens, s.dim, 1}; }, DType::Float32, true, nothing, {}},
      {"V = 13 (not a multiple of 8)", [](Shape s) { return Shape{s.tokens, s.dim, 13}; }, DType::Float32, false,
       nothing, {}},
      {"bias", same, DType::Float32, true, nothing, {}},
      {"custom ignore_index", same, DType::Float32, false,
       [](Case& c, auto&) {
         for (auto& l : c.labels)
           if (l == -100) l = 0;  // label 0 becomes the ignored value
         c.options.ignore_index = 0;
       }, {}},
      {"label smoothing", same, DType::Float32, false, [](Case& c, auto&) { c.options.label_smoothing = 0.3; }, {}},
      {"softcap with label smoothing", same, DType::Float32, true,
       [](Case& c, auto&) {
         c.options.softcap = 0.8;
         c.options.label_smoothing = 0.1;
       }, {}},
      {"z_loss", same, DType::Float32, false, [](Case& c, auto&) { c.options.z_loss = 0.05; }, {}},
      {"logit_scale", same, DType::Float32, true, [](Case& c, auto&) { c.options.logit_scale = -1.7; }, {}},
      {"logit_scale, softcap, smoothing, z_loss, sum", same, DType::Float32, true,
       [](Case& c, auto& rng) {
         c.options.logit_scale = 0.6;
         c.options.softcap = 1.5;
         c.options.label_smoothing = 0.2;
         c.options.z_loss = 1e-2;
         c.options.reduction = Reduction::Sum;
         c.grad_scale = random_scales(rng, 1);
       }, {}},
      {"shift rows", [](Shape s) { return Shape{s.tokens - s.tokens % 3 + 3, s.dim, s.vocab}; }, DType::Float32, false,
       [](Case& c, auto&) {
         c.options.shift.kind = ShiftKind::Rows;
         c.options.shift.seq_len = 3;
       }, {}},
      {"shift across packed segments, int32 cu_seqlens", same, DType::Float32, true,
       [](Case& c, auto& rng) {
         c.options.shift.kind = ShiftKind::Segments;
         c.options.shift.cu_seqlens_type = IndexType::Int32;
         c.cu_seqlens = random_segments(rng, c.tokens);
       }, {}},
      {"shift across packed segments, int64 cu_seqlens, none", same, DType::Float32, false,
       [](Case& c, auto& rng) {
         c.options.shift.kind = ShiftKind::Segments;
         c.options.shift.cu_seqlens_type = IndexType::Int64;
         c.cu_seqlens = random_segments(rng, c.tokens);
         c.options.reduction = Reduction::None;
         c.grad_scale = random_scales(rng, std::size_t(c.tokens));
       }, {}},
      {"n_items through a pointer", same, DType::Float32, false,
       [](Case& c, auto&) {
         c.n_items_pointer = true;
         c.n_items_host = 37.0f;
       }, {}},
      {"n_items_value", same, DType::Float32, true, [](Case& c, auto&) { c.options.n_items_value = 5.5; }, {}},
      {"n_items of zero (empty accumulation step)", same, DType::Float32, false,
       [](Case& c, auto&) {
         c.n_items_pointer = true;
         c.n_items_host = 0.0f;
       }, {}},
      {"grad_weight_accumulate adds to existing values", same, DType::Float32, true,
       [](Case& c, auto& rng) { c.accumulate_init = random_scales(rng, std::size_t(c.vocab * c.dim)); },
       Wants{true, true, true, true, true}},
      {"grad_weight_accumulate only", same, DType::Float32, false,
       [](Case& c, auto& rng) { c.accumulate_init = random_scales(rng, std::size_t(c.vocab * c.dim)); },
       Wants{false, false, false, false, true}},
      {"forward only", same, DType::Float32, true, nothing, Wants{true, false, false, false, false}},
      {"int32 labels", same, DType::Float32, false, [](Case& c, auto&) { c.label_type = IndexType::Int32; }, {}},
      {"strided inputs and outputs", same, DType::Float32, true,
       [](Case& c, auto&) {
         c.hidden_stride = c.dim + 3;
         c.weight_stride = c.dim + 1;
       },
       Wants{true, true, true, true, false, 2, 5}},
      {"bf16 storage", same, DType::BFloat16, true, [](Case& c, auto&) { c.options.label_smoothing = 0.1; }, {}},
      {"fp16 storage, softcap, sum", same, DType::Float16, true,
       [](Case& c, auto&) {
         c.options.softcap = 2.0;
         c.options.reduction = Reduction::Sum;
       }, {}},
      // Mixed precision: half copies of fp32 parameters, whose gradients must carry fp32 accuracy.
      {"bf16 storage, fp32 grad_weight and grad_bias", same, DType::BFloat16, true,
       [](Case& c, auto&) { c.options.label_smoothing = 0.1; },
       Wants{true, true, true, true, false, 0, 0, true}},
      {"fp16 storage, fp32 parameter gradients, strided, grad_weight_accumulate too", same, DType::Float16, true,
       [](Case& c, auto& rng) {
         c.options.z_loss = 0.02;
         c.accumulate_init = random_scales(rng, std::size_t(c.vocab * c.dim));
       },
       Wants{true, true, true, true, true, 1, 3, true}},
      {"bf16 storage, fp32 grad_weight only, sum", same, DType::BFloat16, false,
       [](Case& c, auto&) { c.options.reduction = Reduction::Sum; },
       Wants{false, false, true, false, false, 0, 0, true}},
  };
  return table;
}

}  // namespace

TEST_CASE("CPU reference matches the fp64 brute force for every option", "[runtime][cpu]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed << " (set LMFUSE_TEST_SEED to replay)");
  std::mt19937_64 rng(seed);
  for (const Row& row : rows()) {
    for (int repeat = 0; repeat < 4; ++repeat) {
      Shape shape = row.shape(random_shape(rng));
      Case c = random_case(rng, shape.tokens, shape.dim, shape.vocab, row.dtype, row.bias);
      row.configure(c, rng);
      c.store();
      INFO(row.name << ", N=" << c.tokens << " D=" << c.dim << " V=" << c.vocab << ", repeat " << repeat);
      require_matches(run_runtime(c, RunConfig{row.wants}), brute_force(c, row.wants), c.dtype,
                      row.wants.fp32_param_grads ? DType::Float32 : c.dtype);
    }
  }
}

TEST_CASE("Mean over zero valid labels is 0 with zero gradients", "[runtime][cpu]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  Case c = random_case(rng, 5, 4, 7, DType::Float32, true, 1.0);
  Result r = run_runtime(c, RunConfig{});
  REQUIRE(r.loss == std::vector<double>{0.0});
  for (const auto* gradient : {&r.grad_hidden, &r.grad_weight, &r.grad_bias})
    for (double g : *gradient) REQUIRE(g == 0.0);
}

TEST_CASE("The brute force's gradients match finite differences of its loss", "[runtime][cpu]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  Case c = random_case(rng, 6, 3, 5, DType::Float32, true, 0.2);
  c.options.softcap = 1.1;
  c.options.logit_scale = 1.3;
  c.options.label_smoothing = 0.15;
  c.options.z_loss = 0.03;
  c.options.reduction = Reduction::None;
  c.options.shift.kind = ShiftKind::Rows;
  c.options.shift.seq_len = 3;
  c.grad_scale = random_scales(rng, 6);
  Wants wants;
  Result analytic = brute_force(c, wants);
  const double step = 1e-6;
  auto central = [&](std::vector<double>& values, std::size_t i) {
    double saved = values[i];
    values[i] = saved + step;
    double up = brute_force_objective(c);
    values[i] = saved - step;
    double down = brute_force_objective(c);
    values[i] = saved;
    return (up - down) / (2 * step);
  };
  for (std::size_t i = 0; i < c.hidden.size(); ++i)
    REQUIRE(central(c.hidden, i) == Approx(analytic.grad_hidden[i]).margin(1e-7).epsilon(1e-6));
  for (std::size_t i = 0; i < c.weight.size(); ++i)
    REQUIRE(central(c.weight, i) == Approx(analytic.grad_weight[i]).margin(1e-7).epsilon(1e-6));
  for (std::size_t i = 0; i < c.bias.size(); ++i)
    REQUIRE(central(c.bias, i) == Approx(analytic.grad_bias[i]).margin(1e-7).epsilon(1e-6));

  // And the Mean reduction's divisor.
  c.options.reduction = Reduction::Mean;
  c.grad_scale = {0.7f};
  analytic = brute_force(c, wants);
  for (std::size_t i = 0; i < c.hidden.size(); ++i)
    REQUIRE(central(c.hidden, i) == Approx(analytic.grad_hidden[i]).margin(1e-7).epsilon(1e-6));
}

TEST_CASE("A -inf bias entry masks its class: the loss and gradients of the classes left", "[runtime][cpu]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  // The same tokens against V classes of which two are masked by a -inf bias (a padded vocabulary), and
  // against the V - 2 classes left: the same loss and hidden gradients, and zero gradients for the masked rows.
  const int64_t vocab = 9, dim = 5, tokens = 7;
  const std::vector<int64_t> masked = {2, 6};
  Case full = random_case(rng, tokens, dim, vocab, DType::Float32, true, 0.2);
  full.options.reduction = Reduction::None;
  Case kept = full;
  kept.vocab = vocab - int64_t(masked.size());
  kept.weight.clear();
  kept.bias.clear();
  std::vector<int64_t> kept_index(std::size_t(vocab), -1);
  for (int64_t j = 0, k = 0; j < vocab; ++j) {
    if (std::find(masked.begin(), masked.end(), j) != masked.end()) {
      full.bias[std::size_t(j)] = -std::numeric_limits<double>::infinity();
      continue;
    }
    kept_index[std::size_t(j)] = k++;
    kept.bias.push_back(full.bias[std::size_t(j)]);
    for (int64_t d = 0; d < dim; ++d) kept.weight.push_back(full.weight[std::size_t(j * dim + d)]);
  }
  for (std::size_t t = 0; t < full.labels.size(); ++t) {
    int64_t& label = full.labels[t];
    if (label == full.options.ignore_index) continue;
    if (kept_index[std::size_t(label)] < 0) label = 0;  // class 0 is kept
    kept.labels[t] = kept_index[std::size_t(label)];
  }
  full.store();
  kept.store();
  const Result with_mask = run_runtime(full, RunConfig{}), without = run_runtime(kept, RunConfig{});
  for (double loss : with_mask.loss) REQUIRE(std::isfinite(loss));
  require_close("loss", with_mask.loss, without.loss, 1e-6);
  require_close("grad_hidden", with_mask.grad_hidden, without.grad_hidden, 1e-6);
  for (int64_t j = 0; j < vocab; ++j) {
    INFO("class " << j);
    const int64_t k = kept_index[std::size_t(j)];
    for (int64_t d = -1; d < dim; ++d) {  // -1: the bias
      const double actual = d < 0 ? with_mask.grad_bias[std::size_t(j)] : with_mask.grad_weight[std::size_t(j * dim + d)];
      if (k < 0) {
        CHECK(actual == 0.0);
      } else {
        const double expected =
            d < 0 ? without.grad_bias[std::size_t(k)] : without.grad_weight[std::size_t(k * dim + d)];
        CHECK(actual == Approx(expected).epsilon(1e-6).margin(1e-9));
      }
    }
  }
  // A label on a masked class: that token's loss is +inf, as -log 0.
  Case on_masked = full;
  on_masked.labels[0] = masked[0];
  on_masked.store();
  CHECK(run_runtime(on_masked, RunConfig{Wants{true, false, false, false}}).loss[0] ==
        std::numeric_limits<double>::infinity());
}

}  // namespace lmfuse::test
