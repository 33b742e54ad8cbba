// The recorded-graph key (runtime/src/call_key.h): equal arguments give equal keys whatever their structs'
// padding holds, and a change of any one field gives another key.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <new>
#include <vector>

#include "call_key.h"

namespace {

using lmfuse::detail::callKey;

struct Arguments {
  lmfuse::Problem problem;
  lmfuse::Options options;
  lmfuse::Outputs outputs;
  lmfuse::Workspace workspace;
};

// Built as a caller builds them, field by field, in memory that held `fill` before: the padding keeps it.
Arguments* buildIn(std::vector<unsigned char>& memory, unsigned char fill) {
  memory.assign(sizeof(Arguments), fill);
  auto* arguments = new (memory.data()) Arguments;
  static float floats[4];
  arguments->problem.tokens = 6;
  arguments->problem.hidden_dim = 4;
  arguments->problem.vocab = 9;
  arguments->problem.hidden = floats;
  arguments->problem.weight = floats + 1;
  arguments->problem.labels = floats + 2;
  arguments->options.shift.kind = lmfuse::ShiftKind::Rows;
  arguments->options.shift.seq_len = 3;
  arguments->outputs.loss = floats + 3;
  arguments->workspace.bytes = 1024;
  return arguments;
}

std::vector<unsigned char> keyOf(const Arguments& a, double fill = 0.8, double weightFill = 0.95) {
  return callKey(a.problem, a.options, a.outputs, a.workspace, fill, weightFill);
}

}  // namespace

TEST_CASE("equal arguments give one key whatever their padding holds", "[runtime][graph]") {
  std::vector<unsigned char> zeros, ones;
  const Arguments* a = buildIn(zeros, 0x00);
  const Arguments* b = buildIn(ones, 0xFF);
  // The structs differ as bytes (their padding), so a key copied from them would too.
  CHECK(std::memcmp(&a->options, &b->options, sizeof(lmfuse::Options)) != 0);
  CHECK(std::memcmp(&a->problem, &b->problem, sizeof(lmfuse::Problem)) != 0);
  CHECK(keyOf(*a) == keyOf(*b));
}

TEST_CASE("a change of any one argument field gives another key", "[runtime][graph]") {
  std::vector<unsigned char> memory;
  const std::vector<unsigned char> base = keyOf(*buildIn(memory, 0));
  static float other;
  const std::vector<std::pair<const char*, std::function<void(Arguments&)>>> changes = {
      {"tokens", [](Arguments& a) { a.problem.tokens = 7; }},
      {"hidden_dim", [](Arguments& a) { a.problem.hidden_dim = 5; }},
      {"vocab", [](Arguments& a) { a.problem.vocab = 10; }},
      {"dtype", [](Arguments& a) { a.problem.dtype = lmfuse::DType::Float16; }},
      {"hidden", [](Arguments& a) { a.problem.hidden = &other; }},
      {"hidden_stride", [](Arguments& a) { a.problem.hidden_stride = 8; }},
      {"weight", [](Arguments& a) { a.problem.weight = &other; }},
      {"weight_stride", [](Arguments& a) { a.problem.weight_stride = 8; }},
      {"bias", [](Arguments& a) { a.problem.bias = &other; }},
      {"labels", [](Arguments& a) { a.problem.labels = &other; }},
      {"label_type", [](Arguments& a) { a.problem.label_type = lmfuse::IndexType::Int32; }},
      {"ignore_index", [](Arguments& a) { a.options.ignore_index = 0; }},
      {"label_smoothing", [](Arguments& a) { a.options.label_smoothing = 0.1; }},
      {"softcap", [](Arguments& a) { a.options.softcap = 30; }},
      {"logit_scale", [](Arguments& a) { a.options.logit_scale = 2; }},
      {"z_loss", [](Arguments& a) { a.options.z_loss = 1e-4; }},
      {"reduction", [](Arguments& a) { a.options.reduction = lmfuse::Reduction::Sum; }},
      {"n_items", [](Arguments& a) { a.options.n_items = &other; }},
      {"n_items_value", [](Arguments& a) { a.options.n_items_value = 3; }},
      {"grad_scale", [](Arguments& a) { a.options.grad_scale = &other; }},
      {"grad_scale_count", [](Arguments& a) { a.options.grad_scale_count = 1; }},
      {"shift.kind", [](Arguments& a) { a.options.shift.kind = lmfuse::ShiftKind::Segments; }},
      {"shift.seq_len", [](Arguments& a) { a.options.shift.seq_len = 2; }},
      {"shift.cu_seqlens", [](Arguments& a) { a.options.shift.cu_seqlens = &other; }},
      {"shift.cu_seqlens_type", [](Arguments& a) { a.options.shift.cu_seqlens_type = lmfuse::IndexType::Int64; }},
      {"shift.segments", [](Arguments& a) { a.options.shift.segments = 2; }},
      {"workspace_budget", [](Arguments& a) { a.options.workspace_budget = 1; }},
      {"memory", [](Arguments& a) { a.options.memory = lmfuse::MemoryMode::LowMemory; }},
      {"chunk_tokens", [](Arguments& a) { a.options.chunk_tokens = 2; }},
      {"compact", [](Arguments& a) { a.options.compact = false; }},
      {"loss", [](Arguments& a) { a.outputs.loss = &other; }},
      {"lse", [](Arguments& a) { a.outputs.lse = &other; }},
      {"grad_hidden", [](Arguments& a) { a.outputs.grad_hidden = &other; }},
      {"grad_hidden_stride", [](Arguments& a) { a.outputs.grad_hidden_stride = 8; }},
      {"grad_weight", [](Arguments& a) { a.outputs.grad_weight = &other; }},
      {"grad_weight_stride", [](Arguments& a) { a.outputs.grad_weight_stride = 8; }},
      {"grad_weight_accumulate", [](Arguments& a) { a.outputs.grad_weight_accumulate = &other; }},
      {"grad_bias", [](Arguments& a) { a.outputs.grad_bias = &other; }},
      {"param_grads", [](Arguments& a) { a.outputs.param_grads = lmfuse::ParamGradKind::Float32; }},
      {"workspace.data", [](Arguments& a) { a.workspace.data = &other; }},
      {"workspace.bytes", [](Arguments& a) { a.workspace.bytes = 2048; }},
  };
  for (const auto& [field, change] : changes) {
    INFO(field);
    Arguments* changed = buildIn(memory, 0);
    change(*changed);
    CHECK(keyOf(*changed) != base);
  }
  CHECK(keyOf(*buildIn(memory, 0), 0.5) != base);  // the device's tile-product fill
  CHECK(keyOf(*buildIn(memory, 0), 0.8, 0.5) != base);  // and its weight product's
}
