// One randomly drawn problem on the device, with every output poisoned before each call so an element
// the runtime forgets to write shows up as NaN. A Spec says what to draw; Scenario owns the buffers,
// runs the CUDA call (eagerly or inside a captured graph) and returns the outputs as doubles, next to
// the fp64 reference of harness.h.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>

#include "harness.h"

namespace lmfuse_test {

/// CHECKs that `got` is within `bound` of `want` (relativeError), naming `what` in the failure.
inline void compare(const char* what, const std::vector<double>& got, const std::vector<double>& want, double bound) {
  double error = relativeError(got, want);
  INFO(what << ": relative error " << error << " (bound " << bound << ")");
  CHECK(error <= bound);
}

struct Spec {
  int64_t n = 300, d = 64, v = 1000;
  DType dtype = DType::BFloat16;
  IndexType labelType = IndexType::Int64;
  bool bias = false;
  double ignoredFraction = 0.1;
  int64_t onlyValidToken = -1;   // >= 0: every other label is ignore_index
  int64_t outOfRangeToken = -1;  // >= 0: that token's label is set to V (outside the vocabulary)
  int64_t hiddenPad = 0;         // extra elements per row of hidden / grad_hidden (strided layouts)
  // >= 0: that token's hidden row is loudScale times weight row V / 2, so its logit there stands far above
  // its others (an isolated maximum: bf16 logits still give its softmax to the dtype's precision).
  int64_t loudToken = -1;
  double loudScale = 1.0;
  bool loudTokenLabelled = true; // the loud token's label: a valid one, or ignore_index
  bool gradHidden = true, gradWeight = true, gradBias = false, accumulate = false, lse = true;
  bool fp32ParamGrads = false;    // grad_weight and grad_bias in fp32 (ParamGradKind::Float32)
  bool accumulateFromZero = false;  // grad_weight_accumulate starts at 0 instead of random values
  enum class Divisor { Count, Pointer, Value } divisor = Divisor::Count;
  bool zeroDivisor = false;      // with Divisor::Pointer: the divisor read through n_items is 0 (a Mean over nothing)
  bool gradScale = false;        // scalar (Mean/Sum) or per token (None), random in [0.5, 1.5]
  int segments = 0;              // > 0: ShiftKind::Segments with this many packed segments
  IndexType cuSeqlensType = IndexType::Int32;
  Options options;               // the rest (reduction, smoothing, softcap, chunking, memory mode, ...)
};

struct Result {
  std::vector<double> loss, lse, gradHidden, gradWeight, gradBias, accumulate;
  std::vector<unsigned char> rawLoss, rawGradHidden, rawGradWeight, rawGradBias;  // for bitwise comparisons
};

/// CHECKs that every output of the two calls is bitwise equal.
inline void requireBitwiseEqual(const Result& a, const Result& b) {
  CHECK(a.rawLoss == b.rawLoss);
  CHECK(a.lse == b.lse);
  CHECK(a.rawGradHidden == b.rawGradHidden);
  CHECK(a.rawGradWeight == b.rawGradWeight);
  CHECK(a.rawGradBias == b.rawGradBias);
}

class Scenario {
public:
  explicit Scenario(const Spec& specIn) : spec_(specIn), options_(specIn.options) {
    if (spec_.gradBias) spec_.bias = true;  // a gradient of the bias needs a bias
    const Spec& spec = spec_;
    auto& g = rng();
    const int64_t n = spec.n, d = spec.d, v = spec.v;
    hiddenStride_ = d + spec.hiddenPad;
    h_ = randomStored(g, spec.dtype, std::size_t(n * hiddenStride_), 1.0);
    w_ = randomStored(g, spec.dtype, std::size_t(v * d), 4.0 / std::sqrt(double(d)));
    if (spec.loudToken >= 0)
      for (int64_t k = 0; k < d; ++k) {
        const std::size_t i = std::size_t(spec.loudToken * hiddenStride_ + k);
        h_.values[i] = storeRounded(h_.raw, spec.dtype, i, float(w_.values[(v / 2) * d + k] * spec.loudScale));
      }
    hValues_.resize(n * d);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < d; ++k) hValues_[i * d + k] = h_.values[i * hiddenStride_ + k];
    if (spec.bias) b_ = randomStored(g, spec.dtype, std::size_t(v), 1.0);
    drawLabels(spec.ignoredFraction);
    if (spec.segments > 0) {
      // Random boundaries; the last segment ends before the last token so trailing tokens are unused.
      std::vector<int64_t> cuts;
      std::uniform_int_distribution<int64_t> cut(1, n - 2);
      for (int s = 0; s < spec.segments - 1; ++s) cuts.push_back(cut(g));
      cuts.push_back(n - 1 - n / 10);
      std::sort(cuts.begin(), cuts.end());
      cuSeqlens_ = {0};
      for (int64_t c : cuts) cuSeqlens_.push_back(std::max(c, cuSeqlens_.back()));
      options_.shift.kind = ShiftKind::Segments;
      options_.shift.segments = spec.segments;
      options_.shift.cu_seqlens_type = spec.cuSeqlensType;
    }
    if (spec.gradScale) {
      std::uniform_real_distribution<float> scale(0.5f, 1.5f);
      gradScale_.resize(options_.reduction == Reduction::None ? n : 1);
      for (auto& s : gradScale_) s = scale(g);
    }
    if (spec.divisor != Spec::Divisor::Count)
      nItems_ = spec.zeroDivisor ? 0.0 : double(std::uniform_int_distribution<int>(1, 3 * int(n))(g));

    hidden_ = upload(h_.raw);
    weight_ = upload(w_.raw);
    if (spec.bias) bias_ = upload(b_.raw);
    labelsDevice_ = uploadIndices(labels_, spec.labelType);
    if (spec.segments > 0) cuSeqlensDevice_ = uploadIndices(cuSeqlens_, spec.cuSeqlensType);
    if (!gradScale_.empty()) gradScaleDevice_ = upload(bytesOf(gradScale_));
    if (spec.divisor == Spec::Divisor::Pointer) {
      float value = float(nItems_);
      nItemsDevice_ = upload(bytesOf(std::vector<float>{value}));
    }
    std::uniform_real_distribution<float> unitFloat(-1.0f, 1.0f);
    accumulateStart_.resize(std::size_t(v * d));
    for (auto& a : accumulateStart_) a = spec.accumulateFromZero ? 0.0f : unitFloat(g);

    const std::size_t e = dtypeBytes(spec.dtype), pe = dtypeBytes(paramDType());
    loss_ = DeviceBuffer(4 * std::size_t(options_.reduction == Reduction::None ? n : 1));
    lse_ = DeviceBuffer(4 * std::size_t(n));
    gradHidden_ = DeviceBuffer(e * std::size_t(n * hiddenStride_));
    gradWeight_ = DeviceBuffer(pe * std::size_t(v * d));
    gradBias_ = DeviceBuffer(pe * std::size_t(v));
    accumulate_ = DeviceBuffer(4 * std::size_t(v * d));
    workspace_ = DeviceBuffer(lmfuse::workspace_size(problem(), options(), true, context()));
  }

  Problem problem() const {
    Problem p;
    p.tokens = spec_.n;
    p.hidden_dim = spec_.d;
    p.vocab = spec_.v;
    p.dtype = spec_.dtype;
    p.hidden = hidden_.get();
    p.hidden_stride = hiddenStride_;
    p.weight = weight_.get();
    p.bias = spec_.bias ? bias_.get() : nullptr;
    p.labels = labelsDevice_.get();
    p.label_type = spec_.labelType;
    return p;
  }
  Options options() const {
    Options o = options_;
    if (spec_.segments > 0) o.shift.cu_seqlens = cuSeqlensDevice_.get();
    if (spec_.divisor == Spec::Divisor::Pointer) o.n_items = nItemsDevice_.as<float>();
    if (spec_.divisor == Spec::Divisor::Value) o.n_items_value = nItems_;
    if (!gradScale_.empty()) o.grad_scale = gradScaleDevice_.as<float>();
    return o;
  }
  Outputs outputs() const {
    Outputs out;
    out.loss = loss_.as<float>();
    if (spec_.lse) out.lse = lse_.as<float>();
    if (spec_.gradHidden) { out.grad_hidden = gradHidden_.get(); out.grad_hidden_stride = hiddenStride_; }
    if (spec_.gradWeight) out.grad_weight = gradWeight_.get();
    if (spec_.gradBias) out.grad_bias = gradBias_.get();
    if (spec_.accumulate) out.grad_weight_accumulate = accumulate_.as<float>();
    if (spec_.fp32ParamGrads) out.param_grads = ParamGradKind::Float32;
    return out;
  }
  /// Storage type of grad_weight and grad_bias.
  DType paramDType() const { return spec_.fp32ParamGrads ? DType::Float32 : spec_.dtype; }
  Context context(cudaStream_t stream = nullptr) const {
    Context c;
    c.device = DeviceKind::Cuda;
    c.stream = stream;
    return c;
  }
  Workspace workspace() const { return {workspace_.get(), workspace_.bytes()}; }

  /// New random labels with this fraction ignored, written into the same device buffer, so a graph
  /// captured earlier reads them at its next launch.
  void redrawLabels(double ignoredFraction) {
    drawLabels(ignoredFraction);
    labelsDevice_.upload(indexBytes(labels_, spec_.labelType).data());
  }

  /// Poisons every output and the workspace (and resets the accumulator to its start values): a value
  /// the runtime forgets to write, or a workspace byte it reads before writing, shows up as NaN.
  void prepareOutputs() {
    for (DeviceBuffer* b : {&loss_, &lse_, &gradHidden_, &gradWeight_, &gradBias_, &workspace_}) b->poison();
    accumulate_.upload(accumulateStart_.data());
  }

  /// Eager call on the legacy stream, then synchronise.
  Result run() {
    prepareOutputs();
    lmfuse::linear_cross_entropy(problem(), options(), outputs(), workspace(), context());
    TEST_CUDA(cudaDeviceSynchronize());
    return collect();
  }

  Result collect() const {
    Result r;
    const int64_t n = spec_.n, d = spec_.d, v = spec_.v;
    r.rawLoss = loss_.download();
    r.loss = floatsToDoubles(r.rawLoss);
    if (spec_.lse) r.lse = floatsToDoubles(lse_.download());
    if (spec_.gradHidden) {
      r.rawGradHidden = gradHidden_.download();
      r.gradHidden = toDoubles(r.rawGradHidden, spec_.dtype, std::size_t(n * d), std::size_t(d), std::size_t(hiddenStride_));
    }
    if (spec_.gradWeight) {
      r.rawGradWeight = gradWeight_.download();
      r.gradWeight = toDoubles(r.rawGradWeight, paramDType(), std::size_t(v * d));
    }
    if (spec_.gradBias) {
      r.rawGradBias = gradBias_.download();
      r.gradBias = toDoubles(r.rawGradBias, paramDType(), std::size_t(v));
    }
    if (spec_.accumulate) {
      r.accumulate = floatsToDoubles(accumulate_.download());
      for (std::size_t i = 0; i < r.accumulate.size(); ++i) r.accumulate[i] -= accumulateStart_[i];
    }
    return r;
  }

  /// The same call through the CPU reference backend (lmfuse's own oracle) on host copies of the inputs.
  Result runOnCpu() const {
    const int64_t n = spec_.n, d = spec_.d, v = spec_.v;
    const std::size_t e = dtypeBytes(spec_.dtype), pe = dtypeBytes(paramDType());
    std::vector<int64_t> labels64 = labels_, cu64 = cuSeqlens_;
    std::vector<int32_t> labels32(labels_.begin(), labels_.end()), cu32(cuSeqlens_.begin(), cuSeqlens_.end());
    Problem p = problem();
    p.hidden = h_.raw.data();
    p.weight = w_.raw.data();
    p.bias = spec_.bias ? b_.raw.data() : nullptr;
    p.labels = spec_.labelType == IndexType::Int64 ? static_cast<const void*>(labels64.data()) : labels32.data();
    Options o = options();
    if (spec_.segments > 0)
      o.shift.cu_seqlens = spec_.cuSeqlensType == IndexType::Int64 ? static_cast<const void*>(cu64.data()) : cu32.data();
    float nItems = float(nItems_);
    if (spec_.divisor == Spec::Divisor::Pointer) o.n_items = &nItems;
    if (!gradScale_.empty()) o.grad_scale = gradScale_.data();
    Context cpu;
    cpu.device = DeviceKind::Cpu;
    std::vector<float> loss(options_.reduction == Reduction::None ? n : 1), lse(n);
    std::vector<unsigned char> gh(e * std::size_t(n * hiddenStride_)), gw(pe * std::size_t(v * d)), gb(pe * std::size_t(v));
    std::vector<float> accumulate = accumulateStart_;
    Outputs out = outputs();
    out.loss = loss.data();
    if (out.lse) out.lse = lse.data();
    if (out.grad_hidden) out.grad_hidden = gh.data();
    if (out.grad_weight) out.grad_weight = gw.data();
    if (out.grad_bias) out.grad_bias = gb.data();
    if (out.grad_weight_accumulate) out.grad_weight_accumulate = accumulate.data();
    std::vector<unsigned char> workspace(lmfuse::workspace_size(p, o, out.wants_gradients(), cpu));
    lmfuse::linear_cross_entropy(p, o, out, {workspace.data(), workspace.size()}, cpu);
    Result r;
    r.loss.assign(loss.begin(), loss.end());
    if (spec_.lse) r.lse.assign(lse.begin(), lse.end());
    if (spec_.gradHidden) r.gradHidden = toDoubles(gh, spec_.dtype, std::size_t(n * d), std::size_t(d), std::size_t(hiddenStride_));
    if (spec_.gradWeight) r.gradWeight = toDoubles(gw, paramDType(), std::size_t(v * d));
    if (spec_.gradBias) r.gradBias = toDoubles(gb, paramDType(), std::size_t(v));
    if (spec_.accumulate) {
      r.accumulate.resize(accumulate.size());
      for (std::size_t i = 0; i < accumulate.size(); ++i) r.accumulate[i] = double(accumulate[i]) - accumulateStart_[i];
    }
    return r;
  }

  Reference expected() const {
    std::vector<double> scale(gradScale_.begin(), gradScale_.end());
    double nItems = spec_.divisor == Spec::Divisor::Count ? 0.0 : double(float(nItems_));
    return reference(spec_.n, spec_.d, spec_.v, hValues_, w_.values, spec_.bias ? &b_.values : nullptr, labels_,
                     options_, cuSeqlens_, scale, nItems);
  }

  /// Changes options for the following calls (the workspace follows).
  void editOptions(const std::function<void(Options&)>& edit) {
    edit(options_);
    workspace_ = DeviceBuffer(lmfuse::workspace_size(problem(), options(), true, context()));
  }

  const Spec& spec() const { return spec_; }
  /// The inputs as the device holds them (hidden dense [N, D], weight [V, D]), and the labels as drawn.
  const std::vector<double>& hiddenValues() const { return hValues_; }
  const std::vector<double>& weightValues() const { return w_.values; }
  const std::vector<int64_t>& labels() const { return labels_; }
  DeviceBuffer& rawLossBuffer() { return loss_; }

private:
  template <class T> static std::vector<unsigned char> bytesOf(const std::vector<T>& values) {
    std::vector<unsigned char> raw(values.size() * sizeof(T));
    std::memcpy(raw.data(), values.data(), raw.size());
    return raw;
  }
  static DeviceBuffer upload(const std::vector<unsigned char>& raw) {
    DeviceBuffer b(raw.size());
    b.upload(raw.data());
    return b;
  }
  void drawLabels(double ignoredFraction) {
    auto& g = rng();
    std::uniform_int_distribution<int64_t> label(0, spec_.v - 1);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    labels_.resize(spec_.n);
    for (auto& l : labels_) l = unit(g) < ignoredFraction ? options_.ignore_index : label(g);
    if (spec_.onlyValidToken >= 0) {
      for (auto& l : labels_) l = options_.ignore_index;
      labels_[spec_.onlyValidToken] = label(g);
    }
    if (spec_.outOfRangeToken >= 0) labels_[spec_.outOfRangeToken] = spec_.v;
    if (spec_.loudToken >= 0)
      labels_[spec_.loudToken] = spec_.loudTokenLabelled ? (spec_.v / 2 + 1 + label(g) % (spec_.v - 1)) % spec_.v
                                                         : options_.ignore_index;
  }
  static std::vector<unsigned char> indexBytes(const std::vector<int64_t>& values, IndexType type) {
    if (type == IndexType::Int64) return bytesOf(values);
    std::vector<int32_t> narrow(values.begin(), values.end());
    return bytesOf(narrow);
  }
  static DeviceBuffer uploadIndices(const std::vector<int64_t>& values, IndexType type) {
    return upload(indexBytes(values, type));
  }

  Spec spec_;
  Options options_;
  int64_t hiddenStride_ = 0;
  Stored h_, w_, b_;
  std::vector<double> hValues_;
  std::vector<int64_t> labels_, cuSeqlens_;
  std::vector<float> gradScale_, accumulateStart_;
  double nItems_ = 0;
  DeviceBuffer hidden_, weight_, bias_, labelsDevice_, cuSeqlensDevice_, gradScaleDevice_, nItemsDevice_;
  DeviceBuffer loss_, lse_, gradHidden_, gradWeight_, gradBias_, accumulate_, workspace_;
};

}  // namespace lmfuse_test
