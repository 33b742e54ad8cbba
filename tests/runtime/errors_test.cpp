// Bad arguments: each is refused with an lmfuse::Error naming the argument, before any output is
// written. Out-of-range labels: a NaN row, never an out-of-bounds read, and check() naming the token.
// Also scale_grads, which applies an upstream gradient known only after the call.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>

#include "expect.h"
#include "harness.h"

namespace lmfuse::test {
namespace {

constexpr unsigned char kPoison = 0x5A;

// A valid call on a small random case whose every output is poisoned, so a write would show.
struct Call {
  Case c;
  Problem problem;
  Options options;
  Outputs outputs;
  Workspace workspace;
  Context context;
  std::vector<float> loss, lse, accumulate;
  std::vector<unsigned char> grad_hidden, grad_weight, grad_bias;
  std::vector<double> workspace_storage;
  std::vector<int32_t> cu_seqlens{0, 2, 4};

  explicit Call(std::mt19937_64& rng) : c(random_case(rng, 4, 4, 6, DType::Float32, true)) {
    problem = c.problem();
    options = c.bound_options();
    loss.assign(4, 0.0f);
    lse.assign(4, 0.0f);
    accumulate.assign(24, 0.0f);
    grad_hidden.assign(4 * 4 * 4, kPoison);
    grad_weight.assign(6 * 4 * 4, kPoison);
    grad_bias.assign(6 * 4, kPoison);
    poison(loss);
    poison(lse);
    poison(accumulate);
    outputs.loss = loss.data();
    outputs.lse = lse.data();
    outputs.grad_hidden = grad_hidden.data();
    outputs.grad_weight = grad_weight.data();
    outputs.grad_bias = grad_bias.data();
    outputs.grad_weight_accumulate = accumulate.data();
    std::size_t bytes = workspace_size(problem, options, true, context);
    workspace_storage.assign(bytes / 8 + 1, 0.0);
    workspace = Workspace{workspace_storage.data(), bytes};
  }

  static void poison(std::vector<float>& values) {
    std::memset(values.data(), kPoison, values.size() * sizeof(float));
  }
  static bool poisoned(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i)
      if (p[i] != kPoison) return false;
    return true;
  }
  bool untouched() const {
    return poisoned(loss.data(), loss.size() * 4) && poisoned(lse.data(), lse.size() * 4) &&
           poisoned(accumulate.data(), accumulate.size() * 4) && poisoned(grad_hidden.data(), grad_hidden.size()) &&
           poisoned(grad_weight.data(), grad_weight.size()) && poisoned(grad_bias.data(), grad_bias.size());
  }
};

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

struct BadInput {
  const char* expected;  // a part of the message
  std::function<void(Call&)> spoil;
};

const std::vector<BadInput>& bad_inputs() {
  static const std::vector<BadInput> table = {
      {"problem.hidden is null", [](Call& k) { k.problem.hidden = nullptr; }},
      {"problem.weight is null", [](Call& k) { k.problem.weight = nullptr; }},
      {"problem.labels is null", [](Call& k) { k.problem.labels = nullptr; }},
      {"outputs.loss is null", [](Call& k) { k.outputs.loss = nullptr; }},
      {"problem.tokens (0) must be positive", [](Call& k) { k.problem.tokens = 0; }},
      {"problem.tokens (-3) must be positive", [](Call& k) { k.problem.tokens = -3; }},
      {"problem.hidden_dim (0) must be positive", [](Call& k) { k.problem.hidden_dim = 0; }},
      {"problem.vocab (-1) must be positive", [](Call& k) { k.problem.vocab = -1; }},
      {"lmfuse::linear_cross_entropy: problem.weight_stride (3) is smaller than problem.hidden_dim (4)",
       [](Call& k) { k.problem.weight_stride = 3; }},
      {"problem.hidden_stride (-1) is negative", [](Call& k) { k.problem.hidden_stride = -1; }},
      {"outputs.grad_hidden_stride (2) is smaller than problem.hidden_dim (4)",
       [](Call& k) { k.outputs.grad_hidden_stride = 2; }},
      {"outputs.grad_weight_stride (1) is smaller", [](Call& k) { k.outputs.grad_weight_stride = 1; }},
      {"problem.dtype (7) is not a supported DType", [](Call& k) { k.problem.dtype = DType(7); }},
      {"outputs.param_grads (3) is not a ParamGradKind", [](Call& k) { k.outputs.param_grads = ParamGradKind(3); }},
      {"outputs.grad_weight (", [](Call& k) {  // fp32 parameter gradients need 4-byte alignment
         k.problem.dtype = DType::BFloat16;
         k.outputs.grad_hidden = nullptr;
         k.outputs.grad_bias = nullptr;
         k.outputs.param_grads = ParamGradKind::Float32;
         k.outputs.grad_weight = k.grad_weight.data() + 2;
       }},
      {"problem.label_type (9) is not an IndexType", [](Call& k) { k.problem.label_type = IndexType(9); }},
      {"options.reduction (5) is not a Reduction", [](Call& k) { k.options.reduction = Reduction(5); }},
      {"options.label_smoothing (1.5) is outside [0, 1]", [](Call& k) { k.options.label_smoothing = 1.5; }},
      {"options.label_smoothing (nan)", [](Call& k) { k.options.label_smoothing = std::nan(""); }},
      {"options.softcap (-1)", [](Call& k) { k.options.softcap = -1.0; }},
      {"options.logit_scale (inf) is not finite", [](Call& k) { k.options.logit_scale = INFINITY; }},
      {"options.z_loss (-1)", [](Call& k) { k.options.z_loss = -1.0; }},
      {"options.n_items_value (-2)", [](Call& k) { k.options.n_items_value = -2.0; }},
      {"options.n_items / options.n_items_value set the divisor of Reduction::Mean, but options.reduction is Sum",
       [](Call& k) {
         static const float n_items = 3.0f;
         k.options.reduction = Reduction::Sum;
         k.options.n_items = &n_items;
       }},
      {"options.grad_scale_count (1) does not match Reduction::None", [](Call& k) {
         k.options.reduction = Reduction::None;
         k.options.grad_scale_count = 1;
       }},
      {"options.grad_scale_count (4) does not match a scalar reduction", [](Call& k) {
         k.options.grad_scale_count = 4;
       }},
      {"options.shift.seq_len (0) must be positive with ShiftKind::Rows",
       [](Call& k) { k.options.shift.kind = ShiftKind::Rows; }},
      {"problem.tokens (4) is not a multiple of options.shift.seq_len (3)", [](Call& k) {
         k.options.shift.kind = ShiftKind::Rows;
         k.options.shift.seq_len = 3;
       }},
      {"options.shift.seq_len (2) is set but options.shift.kind is not Rows",
       [](Call& k) { k.options.shift.seq_len = 2; }},
      {"options.shift.cu_seqlens is null with ShiftKind::Segments", [](Call& k) {
         k.options.shift.kind = ShiftKind::Segments;
         k.options.shift.segments = 2;
       }},
      {"options.shift.segments (0) must be positive", [](Call& k) {
         k.options.shift.kind = ShiftKind::Segments;
         k.options.shift.cu_seqlens = k.cu_seqlens.data();
       }},
      {"options.shift.cu_seqlens[2] (1) is smaller than the boundary before it", [](Call& k) {
         k.cu_seqlens = {0, 3, 1};
         k.options.shift = Shift{ShiftKind::Segments, 0, k.cu_seqlens.data(), IndexType::Int32, 2};
       }},
      {"options.shift.cu_seqlens[0] (-1) is negative", [](Call& k) {
         k.cu_seqlens = {-1, 3, 4};
         k.options.shift = Shift{ShiftKind::Segments, 0, k.cu_seqlens.data(), IndexType::Int32, 2};
       }},
      {"options.shift.cu_seqlens[2] (9) is larger than problem.tokens (4)", [](Call& k) {
         k.cu_seqlens = {0, 3, 9};
         k.options.shift = Shift{ShiftKind::Segments, 0, k.cu_seqlens.data(), IndexType::Int32, 2};
       }},
      {"options.shift.cu_seqlens / options.shift.segments are set but options.shift.kind is not Segments",
       [](Call& k) { k.options.shift.cu_seqlens = k.cu_seqlens.data(); }},
      {"options.shift.kind (6) is not a ShiftKind", [](Call& k) { k.options.shift.kind = ShiftKind(6); }},
      {"options.memory (4) is not a MemoryMode", [](Call& k) { k.options.memory = MemoryMode(4); }},
      {"options.chunk_tokens (-1) is negative", [](Call& k) { k.options.chunk_tokens = -1; }},
      {"workspace.data is null", [](Call& k) { k.workspace.data = nullptr; }},
      {"is smaller than the", [](Call& k) { k.workspace.bytes -= 1; }},
      {"context.threads (-1) is negative", [](Call& k) { k.context.threads = -1; }},
      {"context.device (3) is not a DeviceKind", [](Call& k) { k.context.device = DeviceKind(3); }},
      {"outputs.grad_bias is set but problem.bias is null", [](Call& k) { k.problem.bias = nullptr; }},
      {"is not aligned to its element size (4 bytes)",
       [](Call& k) { k.problem.hidden = static_cast<const char*>(k.problem.hidden) + 1; }},
      {"outputs.grad_weight_accumulate", [](Call& k) {
         k.outputs.grad_weight_accumulate = reinterpret_cast<float*>(reinterpret_cast<char*>(k.accumulate.data()) + 2);
       }},
  };
  return table;
}

}  // namespace

TEST_CASE("Every bad argument is refused by name and nothing is written", "[runtime][cpu][errors]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  {
    Call valid(rng);
    linear_cross_entropy(valid.problem, valid.options, valid.outputs, valid.workspace, valid.context);
    REQUIRE_FALSE(valid.untouched());  // the baseline call is valid and writes
  }
  for (const BadInput& bad : bad_inputs()) {
    Call call(rng);
    bad.spoil(call);
    INFO("expected: " << bad.expected);
    std::string message = error_of([&] {
      linear_cross_entropy(call.problem, call.options, call.outputs, call.workspace, call.context);
    });
    INFO("message: " << message);
    CHECK(message.find("lmfuse::linear_cross_entropy: ") == 0);
    CHECK(message.find(bad.expected) != std::string::npos);
    CHECK(call.untouched());
  }
}

TEST_CASE("workspace_size, scale_grads and check name their bad arguments", "[runtime][cpu][errors]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  Call call(rng);
  Problem problem = call.problem;
  problem.vocab = 0;
  CHECK(error_of([&] { workspace_size(problem, call.options, true, call.context); }) ==
        "lmfuse::workspace_size: problem.vocab (0) must be positive");
  CHECK(error_of([&] { scale_grads(call.problem, call.outputs, nullptr, call.context); }) ==
        "lmfuse::scale_grads: upstream is null");
  Outputs bad_kind = call.outputs;
  bad_kind.param_grads = ParamGradKind(5);
  CHECK(error_of([&] { workspace_size(call.problem, call.options, bad_kind, call.context); }) ==
        "lmfuse::workspace_size: outputs.param_grads (5) is not a ParamGradKind (ProblemDType, Float32)");
  // On the CPU the workspace depends on whether gradients are asked, not on which.
  CHECK(workspace_size(call.problem, call.options, call.outputs, call.context) ==
        workspace_size(call.problem, call.options, true, call.context));
  CHECK(call.untouched());
  CHECK(error_of([&] { check(Workspace{}, call.context); }) == "lmfuse::check: workspace.data is null");
  CHECK(error_of([&] { check(Workspace{call.workspace.data, 16}, call.context); })
            .find("workspace.bytes (16) is smaller than the 256-byte label report") != std::string::npos);
}

TEST_CASE("A backend's failure starts with the public function too", "[runtime][cpu][errors]") {
  // The CUDA plan is host arithmetic: a budget too small for the fp32 accumulator fails in the plan
  // (or, in a build without CUDA, the backend says so); either way through the one error path.
  Problem problem;
  problem.tokens = 64;
  problem.hidden_dim = 256;
  problem.vocab = 5000;
  Options options;
  options.memory = MemoryMode::Accumulate;
  options.workspace_budget = std::size_t(1) << 20;
  Context cuda;
  cuda.device = DeviceKind::Cuda;
  std::string message = error_of([&] { workspace_size(problem, options, true, cuda); });
  INFO(message);
  CHECK(message.find("lmfuse::workspace_size: ") == 0);
  CHECK((message.find("options.workspace_budget of 1048576 bytes is too small") != std::string::npos ||
         message.find("built without CUDA") != std::string::npos));
}

TEST_CASE("A problem whose workspace cannot be addressed is an error, not a wrapped size", "[runtime][cpu][errors]") {
  Problem problem;
  problem.tokens = int64_t(1) << 40;
  problem.hidden_dim = 4096;
  problem.vocab = int64_t(1) << 30;
  Options options;
  options.chunk_tokens = problem.tokens;  // N × V logits at once: 2^73 bytes
  std::string message = error_of([&] { workspace_size(problem, options, true, Context{}); });
  INFO(message);
  CHECK(message.find("does not fit in size_t") != std::string::npos);
  problem.hidden_stride = int64_t(1) << 40;  // 2^80 bytes of hidden
  message = error_of([&] { workspace_size(problem, Options{}, false, Context{}); });
  CHECK(message.find("problem.hidden_stride (1099511627776) times 1099511627776 rows overflows") != std::string::npos);
}

TEST_CASE("Out-of-range labels give NaN rows, no out-of-bounds read, and check() names the token",
          "[runtime][cpu][errors]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  struct Bad {
    IndexType type;
    int64_t label;
  };
  const int64_t vocab = 7;
  for (Bad bad : {Bad{IndexType::Int64, vocab}, Bad{IndexType::Int64, int64_t(1) << 40},
                  Bad{IndexType::Int32, -5}, Bad{IndexType::Int32, std::numeric_limits<int32_t>::max()}}) {
    for (Reduction reduction : {Reduction::Mean, Reduction::None}) {
      INFO("label " << bad.label << ", reduction " << int(reduction));
      Case c = random_case(rng, 9, 5, vocab, DType::Float32, true, 0.0);
      c.label_type = bad.type;
      c.options.reduction = reduction;
      c.labels[3] = bad.label;
      c.labels[6] = bad.label;
      c.store();
      Wants wants;
      Result runtime = run_runtime(c, RunConfig{wants});
      require_matches(runtime, brute_force(c, wants), c.dtype);  // NaN exactly where the brute force has NaN
      if (reduction == Reduction::Mean) REQUIRE(std::isnan(runtime.loss[0]));
      else REQUIRE((std::isnan(runtime.loss[3]) && std::isnan(runtime.loss[6]) && !std::isnan(runtime.loss[0])));

      // check() on the call's own workspace.
      Problem problem = c.problem();
      Options options = c.bound_options();
      Context context;
      std::vector<float> loss(9);
      Outputs outputs;
      outputs.loss = loss.data();
      std::size_t bytes = workspace_size(problem, options, false, context);
      std::vector<double> storage(bytes / 8 + 1);
      Workspace workspace{storage.data(), bytes};
      linear_cross_entropy(problem, options, outputs, workspace, context);
      std::string message = error_of([&] { check(workspace, context); });
      INFO(message);
      CHECK(message.find("lmfuse::check: token 3's target labels[3] = " + std::to_string(bad.label) +
                         " is outside [0, 7)") == 0);

      // The same workspace after a call with valid labels reports nothing.
      c.labels[3] = c.labels[6] = 2;
      c.store();
      problem = c.problem();
      linear_cross_entropy(problem, options, outputs, workspace, context);
      CHECK_NOTHROW(check(workspace, context));
    }
  }
}

TEST_CASE("An out-of-range label under a shift is reported at the token that scores it",
          "[runtime][cpu][errors]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  Case c = random_case(rng, 6, 3, 4, DType::Float32, false, 0.0);
  c.options.shift.kind = ShiftKind::Rows;
  c.options.shift.seq_len = 3;
  c.labels[3] = 99;  // first of row 2: never a target
  c.labels[5] = 4;   // scored at token 4
  c.store();
  Problem problem = c.problem();
  Options options = c.bound_options();
  Context context;
  float loss = 0.0f;
  Outputs outputs;
  outputs.loss = &loss;
  std::vector<double> storage(workspace_size(problem, options, false, context) / 8 + 1);
  Workspace workspace{storage.data(), storage.size() * 8};
  linear_cross_entropy(problem, options, outputs, workspace, context);
  REQUIRE(std::isnan(loss));
  CHECK(error_of([&] { check(workspace, context); }).find("token 4's target labels[5] = 4 is outside [0, 4)") !=
        std::string::npos);
}

TEST_CASE("scale_grads multiplies every gradient by the upstream value", "[runtime][cpu]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  struct Types {
    DType dtype;
    bool fp32_params;  // ParamGradKind::Float32: grad_weight and grad_bias scaled as fp32
  };
  for (Types types : {Types{DType::Float32, false}, Types{DType::BFloat16, false}, Types{DType::BFloat16, true}}) {
    const DType dtype = types.dtype, param_dtype = types.fp32_params ? DType::Float32 : dtype;
    INFO("fp32 parameter gradients: " << types.fp32_params);
    Case c = random_case(rng, 6, 5, 9, dtype, true);
    Problem problem = c.problem();
    Options options = c.bound_options();
    Context context;
    std::size_t element = dtype == DType::Float32 ? 4 : 2, param_element = param_dtype == DType::Float32 ? 4 : 2;
    float loss = 0.0f;
    std::vector<unsigned char> grad_hidden(6 * 5 * element), grad_weight(9 * 5 * param_element),
        grad_bias(9 * param_element);
    Outputs outputs;
    if (types.fp32_params) outputs.param_grads = ParamGradKind::Float32;
    outputs.loss = &loss;
    outputs.grad_hidden = grad_hidden.data();
    outputs.grad_weight = grad_weight.data();
    outputs.grad_bias = grad_bias.data();
    std::vector<double> storage(workspace_size(problem, options, true, context) / 8 + 1);
    linear_cross_entropy(problem, options, outputs, Workspace{storage.data(), storage.size() * 8}, context);
    const float upstream = -2.75f;
    scale_grads(problem, outputs, &upstream, context);

    Case scaled = c;
    scaled.grad_scale = {upstream};
    Result expected = brute_force(scaled, Wants{});
    auto decoded = [&](const std::vector<unsigned char>& bytes, DType type) {
      std::vector<double> values(bytes.size() / std::size_t(type == DType::Float32 ? 4 : 2));
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = decode(bytes, type, int64_t(i));
      return values;
    };
    double two_roundings = 3.0 * unit_roundoff(dtype), param_roundings = 3.0 * unit_roundoff(param_dtype);
    require_close("grad_hidden", decoded(grad_hidden, dtype), expected.grad_hidden, two_roundings, 1e-9);
    require_close("grad_weight", decoded(grad_weight, param_dtype), expected.grad_weight, param_roundings, 1e-9);
    require_close("grad_bias", decoded(grad_bias, param_dtype), expected.grad_bias, param_roundings, 1e-9);
  }
}

}  // namespace lmfuse::test
