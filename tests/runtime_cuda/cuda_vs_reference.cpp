// The CUDA backend against the fp64 brute force and against the CPU reference backend, case by case: every option of flce.h, each dtype, odd
// vocabulary sizes, strided layouts, both memory modes. Fresh random inputs on every run (the seed is not
// fixed); outputs are poisoned first. Bounds are per dtype: the reference sees the same rounded inputs,
// so what remains is the GPU's fp32 arithmetic and the rounding of logits and gradients to the dtype.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include "scenario.h"

using namespace lmfuse_test;

namespace {

struct Tolerance {
  double loss, gradient;
};

Tolerance toleranceFor(DType dtype) {
  switch (dtype) {
    case DType::Float32: return {1e-5, 1e-4};
    case DType::Float16: return {1e-3, 5e-3};
    default: return {5e-3, 2e-2};  // bf16 logits and dx: 8 significant bits
  }
}

const char* dtypeName(DType dtype) {
  return dtype == DType::Float32 ? "fp32" : dtype == DType::Float16 ? "fp16" : "bf16";
}

// At the default shape (N=300, D=64, V=1000) this budget holds the fp32 accumulator but not the logits of
// all N tokens (cuda_plan.cpp checks which plan it gives).
constexpr std::size_t kTightBudget = (std::size_t(32) << 20) + (std::size_t(480) << 10);

struct NamedSpec {
  const char* name;
  std::function<void(Spec&)> edit;
};

// Every case runs at each dtype; chunk_tokens is small so every case goes through several chunks (and by
// default compaction: a graph SWITCH over token counts), unless the case sets its own chunking.
const std::vector<NamedSpec>& cases() {
  static const std::vector<NamedSpec> table = {
      {"plain mean", [](Spec&) {}},
      {"half the labels ignored (compaction skips chunks)", [](Spec& s) { s.ignoredFraction = 0.5; s.gradBias = true; }},
      {"most labels ignored, packed segments", [](Spec& s) { s.ignoredFraction = 0.8; s.segments = 4; }},
      {"without compaction", [](Spec& s) { s.options.compact = false; s.ignoredFraction = 0.5; s.gradBias = true; }},
      {"without compaction, reduction none", [](Spec& s) {
         s.options.compact = false; s.options.reduction = Reduction::None; s.gradScale = true; }},
      {"bias and grad_bias", [](Spec& s) { s.bias = true; s.gradBias = true; }},
      {"vocabulary not a multiple of 8", [](Spec& s) { s.v = 1003; s.bias = true; s.gradBias = true; }},
      {"a long vocabulary (rows of 200-400 KB, beyond any shared memory)", [](Spec& s) {
         s.v = 100003; s.n = 80; s.d = 32; s.bias = true; s.gradBias = true; s.options.label_smoothing = 0.1; }},
      {"a long vocabulary with softcap, z-loss and a per-token scale", [](Spec& s) {
         s.v = 65539; s.n = 64; s.d = 32; s.options.softcap = 6.0; s.options.z_loss = 1e-3;
         s.options.reduction = Reduction::None; s.gradScale = true; s.ignoredFraction = 0.3; }},
      {"vocabulary of 1", [](Spec& s) { s.v = 1; s.ignoredFraction = 0.3; }},
      {"all labels ignored", [](Spec& s) { s.ignoredFraction = 1.0; s.gradBias = true; }},
      {"one valid label", [](Spec& s) { s.n = 40; s.onlyValidToken = 17; s.gradBias = true; }},
      {"label smoothing", [](Spec& s) { s.options.label_smoothing = 0.1; }},
      {"softcap with smoothing and logit scale", [](Spec& s) {
         s.options.softcap = 5.0; s.options.label_smoothing = 0.2; s.options.logit_scale = 1.7; s.bias = true;
         s.gradBias = true; }},
      {"z-loss", [](Spec& s) { s.options.z_loss = 1e-3; }},
      {"ignore_index inside the vocabulary", [](Spec& s) { s.options.ignore_index = 5; }},
      {"int32 labels", [](Spec& s) { s.labelType = IndexType::Int32; }},
      {"reduction sum with upstream scale", [](Spec& s) { s.options.reduction = Reduction::Sum; s.gradScale = true; }},
      {"reduction none with per-token scale", [](Spec& s) { s.options.reduction = Reduction::None; s.gradScale = true; }},
      {"mean over n_items pointer", [](Spec& s) { s.divisor = Spec::Divisor::Pointer; }},
      {"mean over n_items value", [](Spec& s) { s.divisor = Spec::Divisor::Value; s.gradScale = true; }},
      {"shift within rows", [](Spec& s) { s.options.shift.kind = ShiftKind::Rows; s.options.shift.seq_len = 50; }},
      {"shift within packed segments", [](Spec& s) { s.segments = 5; s.labelType = IndexType::Int32; }},
      {"packed segments, int64 cu_seqlens", [](Spec& s) { s.segments = 3; s.cuSeqlensType = IndexType::Int64; }},
      {"strided hidden and grad_hidden", [](Spec& s) { s.hiddenPad = 8; }},
      {"one chunk (grad_weight written without the fp32 accumulator)", [](Spec& s) { s.options.chunk_tokens = 0; }},
      {"one chunk without compaction", [](Spec& s) { s.options.chunk_tokens = 0; s.options.compact = false; }},
      {"one chunk with grad_weight and grad_weight_accumulate", [](Spec& s) {
         s.options.chunk_tokens = 0; s.accumulate = true; }},
      {"tight budget: a count that fits one chunk spans the accumulator's region", [](Spec& s) {
         s.options.chunk_tokens = 0; s.ignoredFraction = 0.5; s.options.workspace_budget = kTightBudget;
         s.options.memory = MemoryMode::Accumulate; }},
      {"tight budget, most labels valid: chunks and the fp32 accumulator", [](Spec& s) {
         s.options.chunk_tokens = 0; s.ignoredFraction = 0.05; s.options.workspace_budget = kTightBudget;
         s.options.memory = MemoryMode::Accumulate; s.gradBias = true; }},
      {"compaction branches of up to ten chunks", [](Spec& s) {
         s.n = 1200; s.ignoredFraction = 0.35; s.bias = true; s.gradBias = true; }},
      {"odd chunk size", [](Spec& s) { s.options.chunk_tokens = 77; }},
      {"grad_weight_accumulate only", [](Spec& s) { s.gradWeight = false; s.accumulate = true; }},
      {"grad_weight and grad_weight_accumulate", [](Spec& s) { s.accumulate = true; }},
      {"forward only", [](Spec& s) { s.gradHidden = s.gradWeight = false; }},
      {"forward only without compaction (two logits buffers, side stream)", [](Spec& s) {
         s.gradHidden = s.gradWeight = false; s.options.compact = false; }},
      {"grad_hidden only", [](Spec& s) { s.gradWeight = false; }},
      {"low memory: vocabulary slices", [](Spec& s) {
         s.options.memory = MemoryMode::LowMemory; s.options.chunk_tokens = 0; s.bias = true; s.gradBias = true;
         s.v = 1003; s.options.workspace_budget = (std::size_t(33) << 20) + (std::size_t(256) << 10); }},
      {"low memory with accumulate and softcap", [](Spec& s) {
         s.options.memory = MemoryMode::LowMemory; s.options.chunk_tokens = 64; s.accumulate = true;
         s.options.softcap = 4.0; s.options.label_smoothing = 0.1; }},
      {"auto picks low memory under a small budget", [](Spec& s) {
         s.options.chunk_tokens = 0; s.v = 3000; s.d = 256;
         s.options.workspace_budget = (std::size_t(34) << 20); }},
      // Mixed precision: fp32 grad_weight and grad_bias, chunks accumulating in grad_weight itself.
      {"fp32 parameter gradients, chunks accumulate in place", [](Spec& s) {
         s.fp32ParamGrads = true; s.bias = true; s.gradBias = true; s.ignoredFraction = 0.3; }},
      {"fp32 parameter gradients, one chunk", [](Spec& s) {
         s.fp32ParamGrads = true; s.options.chunk_tokens = 0; s.options.label_smoothing = 0.1; }},
      {"fp32 parameter gradients without compaction, with grad_weight_accumulate", [](Spec& s) {
         s.fp32ParamGrads = true; s.options.compact = false; s.accumulate = true; s.bias = true; s.gradBias = true; }},
      {"fp32 parameter gradients, tight budget", [](Spec& s) {
         s.fp32ParamGrads = true; s.options.chunk_tokens = 0; s.ignoredFraction = 0.05;
         s.options.workspace_budget = kTightBudget; s.options.memory = MemoryMode::Accumulate; }},
      // Low memory with a dense grad_weight: the lean plan, every buffer inside grad_weight (plan.h).
      {"lean low memory, none ignored (identity branch)", [](Spec& s) {
         s.options.memory = MemoryMode::LowMemory; s.options.chunk_tokens = 0; s.ignoredFraction = 0.0; }},
      {"lean low memory, 10% ignored, odd vocabulary, bias", [](Spec& s) {
         s.options.memory = MemoryMode::LowMemory; s.options.chunk_tokens = 0; s.v = 2003; s.bias = true;
         s.gradBias = true; }},
      {"lean low memory, half ignored, many branches", [](Spec& s) {
         s.options.memory = MemoryMode::LowMemory; s.options.chunk_tokens = 0; s.n = 1200; s.ignoredFraction = 0.5; }},
      {"lean low memory, 95% ignored, smoothing and z-loss", [](Spec& s) {
         s.options.memory = MemoryMode::LowMemory; s.options.chunk_tokens = 0; s.ignoredFraction = 0.95;
         s.options.label_smoothing = 0.1; s.options.z_loss = 1e-3; }},
      {"lean low memory, all ignored", [](Spec& s) {
         s.options.memory = MemoryMode::LowMemory; s.options.chunk_tokens = 0; s.ignoredFraction = 1.0; s.gradBias = true; }},
      {"lean low memory without compaction, strided hidden", [](Spec& s) {
         s.options.memory = MemoryMode::LowMemory; s.options.compact = false; s.options.chunk_tokens = 0;
         s.hiddenPad = 8; s.ignoredFraction = 0.3; }},
      {"lean low memory, grad_weight only", [](Spec& s) {
         s.options.memory = MemoryMode::LowMemory; s.options.chunk_tokens = 0; s.gradHidden = false; }},
      {"lean low memory, reduction none, packed segments", [](Spec& s) {
         s.options.memory = MemoryMode::LowMemory; s.options.chunk_tokens = 0; s.options.reduction = Reduction::None;
         s.gradScale = true; s.segments = 3; }},
      {"lean low memory with grad_weight_accumulate, fp32 parameter gradients", [](Spec& s) {
         s.options.memory = MemoryMode::LowMemory; s.options.chunk_tokens = 0; s.accumulate = true;
         s.fp32ParamGrads = true; s.v = 1003; s.bias = true; s.gradBias = true; }},
      {"low memory, grad_weight_accumulate only (slices in the workspace)", [](Spec& s) {
         s.options.memory = MemoryMode::LowMemory; s.options.chunk_tokens = 64; s.gradWeight = false;
         s.accumulate = true; s.ignoredFraction = 0.3; }},
      {"fp32 parameter gradients, low memory", [](Spec& s) {
         s.fp32ParamGrads = true; s.options.memory = MemoryMode::LowMemory; s.options.chunk_tokens = 64;
         s.v = 1003; s.bias = true; s.gradBias = true; s.options.softcap = 4.0; }},
  };
  return table;
}

}  // namespace

TEST_CASE("CUDA matches the fp64 reference for every option and dtype", "[cuda]") {
  // LMFUSE_TEST_CASE: only the cases whose name contains it; LMFUSE_TEST_CASE_INDEX: only the case at this
  // index of the table, or the cases at indices first-last (a part per process under a sanitizer, say).
  const char* only = std::getenv("LMFUSE_TEST_CASE");
  std::size_t first = 0, last = cases().size() - 1;
  if (const char* index = std::getenv("LMFUSE_TEST_CASE_INDEX")) {
    char* end = nullptr;
    first = last = std::strtoul(index, &end, 10);
    if (*end == '-') last = std::strtoul(end + 1, &end, 10);
    REQUIRE(*end == '\0');
    if (first >= cases().size()) {
      WARN("no case at index " << first << " of " << cases().size());
      return;
    }
  }
  if (!lmfuse::cuda_available()) {
    WARN("skipped: no CUDA device visible");
    return;
  }
  for (DType dtype : {DType::BFloat16, DType::Float16, DType::Float32}) {
    for (std::size_t k = 0; k < cases().size(); ++k) {
      const NamedSpec& named = cases()[k];
      if (only && !std::strstr(named.name, only)) continue;
      if (k < first || k > last) continue;
      Spec spec;
      spec.dtype = dtype;
      spec.options.chunk_tokens = 128;
      named.edit(spec);
      INFO("case: " << named.name << ", " << dtypeName(dtype) << ", N=" << spec.n << " D=" << spec.d << " V="
                    << spec.v);
      Scenario scenario(spec);
      Result got = scenario.run();
      Reference want = scenario.expected();
      Tolerance tol = toleranceFor(dtype);
      compare("loss", got.loss, want.loss, tol.loss);
      if (spec.lse) compare("lse", got.lse, want.lse, tol.loss);
      if (spec.gradHidden) compare("grad_hidden", got.gradHidden, want.gradHidden, tol.gradient);
      if (spec.gradWeight) compare("grad_weight", got.gradWeight, want.gradWeight, tol.gradient);
      if (spec.gradBias) compare("grad_bias", got.gradBias, want.gradBias, tol.gradient);
      if (spec.accumulate) compare("grad_weight_accumulate increment", got.accumulate, want.gradWeight, tol.gradient);
      // The same call on the CPU reference backend, within the same bounds (it stores in the dtype too).
      Result cpu = scenario.runOnCpu();
      compare("loss vs CPU backend", got.loss, cpu.loss, tol.loss);
      if (spec.gradHidden) compare("grad_hidden vs CPU backend", got.gradHidden, cpu.gradHidden, tol.gradient);
      if (spec.gradWeight) compare("grad_weight vs CPU backend", got.gradWeight, cpu.gradWeight, tol.gradient);
      if (spec.gradBias) compare("grad_bias vs CPU backend", got.gradBias, cpu.gradBias, tol.gradient);
      if (spec.accumulate) compare("accumulate vs CPU backend", got.accumulate, cpu.accumulate, tol.gradient);
      if (spec.ignoredFraction == 1.0 && spec.options.ignore_index == -100) {
        // Documented: a mean over nothing is 0 with zero gradients, exactly.
        CHECK(got.loss[0] == 0.0);
        for (double g : got.gradHidden) REQUIRE(g == 0.0);
        for (double g : got.gradWeight) REQUIRE(g == 0.0);
      }
    }
  }
}

TEST_CASE("fp32 parameter gradients of a half problem keep the fp32 accumulation: no half rounding", "[cuda]") {
  if (!lmfuse::cuda_available()) {
    WARN("skipped: no CUDA device visible");
    return;
  }
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    for (int64_t chunk : {int64_t(0), int64_t(96)}) {  // one chunk; chunks accumulating in grad_weight
      INFO(dtypeName(dtype) << ", chunk_tokens " << chunk);
      Spec spec;
      spec.dtype = dtype;
      spec.options.chunk_tokens = chunk;
      spec.fp32ParamGrads = true;
      spec.gradHidden = false;
      spec.accumulate = true;  // the same product added to an fp32 array of zeros: the fp32 sum itself
      spec.accumulateFromZero = true;
      Scenario scenario(spec);
      Result got = scenario.run();
      // The fp32 output is the fp32 sum (not its half rounding, which is ~2^-9 away, relatively) ...
      compare("grad_weight vs the fp32 sum", got.gradWeight, got.accumulate, 1e-6);
      // ... and is not made of half-precision values.
      int64_t notHalf = 0;
      std::vector<unsigned char> scratch(2);
      for (double g : got.gradWeight) notHalf += storeRounded(scratch, dtype, 0, float(g)) != g;
      CHECK(notHalf > int64_t(got.gradWeight.size()) / 2);
      compare("grad_weight vs fp64", got.gradWeight, scenario.expected().gradWeight, toleranceFor(dtype).gradient);
    }
  }
}
