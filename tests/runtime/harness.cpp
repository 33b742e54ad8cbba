// Test harness of the CPU runtime (see harness.h).
#include "harness.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace lmfuse::test {
namespace {

int64_t element_bytes(DType dtype) { return dtype == DType::Float32 ? 4 : 2; }

// Exact encoding only: every value the harness stores is representable in the dtype.
void encode(std::vector<unsigned char>& bytes, DType dtype, int64_t index, double value) {
  float f = float(value);
  if (double(f) != value) throw std::logic_error("harness: value not representable in float");
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (dtype == DType::Float32) {
    std::memcpy(bytes.data() + index * 4, &bits, 4);
    return;
  }
  uint16_t half = 0;
  if (dtype == DType::BFloat16) {
    if (bits & 0xffffu) throw std::logic_error("harness: value not representable in bf16");
    half = uint16_t(bits >> 16);
  } else {
    double magnitude = std::fabs(value);
    uint16_t sign = std::signbit(value) ? 0x8000 : 0;
    if (magnitude == 0.0) {
      half = sign;
    } else {
      int exponent = std::ilogb(magnitude);  // magnitude = m · 2^exponent, m in [1, 2)
      if (exponent < -14 || exponent > 15) throw std::logic_error("harness: value outside normal fp16 range");
      double mantissa = (std::ldexp(magnitude, -exponent) - 1.0) * 1024.0;
      if (mantissa != std::floor(mantissa)) throw std::logic_error("harness: value not representable in fp16");
      half = uint16_t(sign | uint16_t((exponent + 15) << 10) | uint16_t(mantissa));
    }
  }
  std::memcpy(bytes.data() + index * 2, &half, 2);
}

std::vector<unsigned char> encode_all(const std::vector<double>& values, DType dtype, int64_t rows, int64_t dim,
                                      int64_t stride) {
  int64_t row_stride = stride ? stride : dim;
  std::vector<unsigned char> bytes(std::size_t(std::max<int64_t>(rows * row_stride, 1) * element_bytes(dtype)), 0xEE);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < dim; ++d) encode(bytes, dtype, r * row_stride + d, values[std::size_t(r * dim + d)]);
  return bytes;
}

template <class Index>
std::vector<unsigned char> encode_indices(const std::vector<int64_t>& values) {
  std::vector<unsigned char> bytes(std::max<std::size_t>(values.size(), 1) * sizeof(Index));
  for (std::size_t i = 0; i < values.size(); ++i) {
    Index value = Index(values[i]);
    std::memcpy(bytes.data() + i * sizeof(Index), &value, sizeof(Index));
  }
  return bytes;
}

std::vector<double> random_values(std::mt19937_64& rng, std::size_t count, DType dtype, double scale) {
  std::vector<double> values(count);
  if (dtype == DType::Float32) {
    std::uniform_real_distribution<double> uniform(-scale, scale);
    for (double& v : values) v = double(float(uniform(rng)));
  } else {
    // A power-of-two scale keeps k · scale / 128 exact in both 16-bit formats.
    double step = std::ldexp(1.0, std::ilogb(scale) - 7);
    std::uniform_int_distribution<int> grid(-255, 255);
    for (double& v : values) v = grid(rng) * step;
  }
  return values;
}

}  // namespace

uint64_t fresh_seed() {
  if (const char* fixed = std::getenv("LMFUSE_TEST_SEED")) return std::strtoull(fixed, nullptr, 10);
  return (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
}

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::Float32: return std::ldexp(1.0, -24);
    case DType::Float16: return std::ldexp(1.0, -11);
    case DType::BFloat16: return std::ldexp(1.0, -8);
  }
  return 0.0;
}

double decode(const std::vector<unsigned char>& bytes, DType dtype, int64_t index) {
  if (dtype == DType::Float32) {
    float f;
    std::memcpy(&f, bytes.data() + index * 4, 4);
    return f;
  }
  uint16_t half;
  std::memcpy(&half, bytes.data() + index * 2, 2);
  if (dtype == DType::BFloat16) {
    uint32_t bits = uint32_t(half) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  int exponent = (half >> 10) & 0x1f, mantissa = half & 0x3ff;
  double sign = (half & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

Case random_case(std::mt19937_64& rng, int64_t tokens, int64_t dim, int64_t vocab, DType dtype, bool with_bias,
                 double ignored_fraction, double scale) {
  Case c;
  c.tokens = tokens;
  c.dim = dim;
  c.vocab = vocab;
  c.dtype = dtype;
  c.hidden = random_values(rng, std::size_t(tokens * dim), dtype, scale);
  c.weight = random_values(rng, std::size_t(vocab * dim), dtype, scale);
  if (with_bias) c.bias = random_values(rng, std::size_t(vocab), dtype, scale);
  std::uniform_int_distribution<int64_t> label(0, vocab - 1);
  std::bernoulli_distribution ignored(ignored_fraction);
  for (int64_t t = 0; t < tokens; ++t) c.labels.push_back(ignored(rng) ? c.options.ignore_index : label(rng));
  c.store();
  return c;
}

void Case::store() {
  hidden_bytes = encode_all(hidden, dtype, tokens, dim, hidden_stride);
  weight_bytes = encode_all(weight, dtype, vocab, dim, weight_stride);
  bias_bytes = bias.empty() ? std::vector<unsigned char>() : encode_all(bias, dtype, 1, vocab, 0);
  label_bytes = label_type == IndexType::Int32 ? encode_indices<int32_t>(labels) : encode_indices<int64_t>(labels);
  cu_bytes = options.shift.cu_seqlens_type == IndexType::Int32 ? encode_indices<int32_t>(cu_seqlens)
                                                                : encode_indices<int64_t>(cu_seqlens);
}

Problem Case::problem() const {
  Problem p;
  p.tokens = tokens;
  p.hidden_dim = dim;
  p.vocab = vocab;
  p.dtype = dtype;
  p.hidden = hidden_bytes.data();
  p.hidden_stride = hidden_stride;
  p.weight = weight_bytes.data();
  p.weight_stride = weight_stride;
  p.bias = bias.empty() ? nullptr : bias_bytes.data();
  p.labels = label_bytes.data();
  p.label_type = label_type;
  return p;
}

Options Case::bound_options() const {
  Options o = options;
  if (o.shift.kind == ShiftKind::Segments) {
    o.shift.cu_seqlens = cu_bytes.data();
    o.shift.segments = int64_t(cu_seqlens.size()) - 1;
  }
  o.grad_scale = grad_scale.empty() ? nullptr : grad_scale.data();
  o.n_items = n_items_pointer ? &n_items_host : nullptr;
  return o;
}

int64_t Case::target(int64_t token) const {
  const Shift& shift = options.shift;
  if (shift.kind == ShiftKind::None) return labels[std::size_t(token)];
  if (shift.kind == ShiftKind::Rows) {
    bool last_of_row = (token % shift.seq_len) == shift.seq_len - 1;
    return last_of_row ? options.ignore_index : labels[std::size_t(token + 1)];
  }
  // Segments: a linear scan for the segment holding token and token + 1.
  for (std::size_t k = 0; k + 1 < cu_seqlens.size(); ++k) {
    if (token >= cu_seqlens[k] && token + 1 < cu_seqlens[k + 1]) return labels[std::size_t(token + 1)];
  }
  return options.ignore_index;
}

Result run_runtime(const Case& c, const RunConfig& config) {
  Problem problem = c.problem();
  Options options = c.bound_options();
  options.chunk_tokens = config.chunk_tokens;
  options.memory = config.memory;
  options.workspace_budget = config.budget;
  Context context;
  context.threads = config.threads;
  const Wants& wants = config.wants;
  const int64_t n = c.tokens, d = c.dim, v = c.vocab, size = element_bytes(c.dtype);
  const int64_t hidden_stride = d + wants.grad_hidden_pad, weight_stride = d + wants.grad_weight_pad;

  std::vector<float> loss(std::size_t(options.reduction == Reduction::None ? n : 1), -7.0f);
  std::vector<float> lse(std::size_t(n), -7.0f);
  std::vector<unsigned char> grad_hidden(std::size_t(n * hidden_stride * size), 0xCD);
  const DType param_dtype = wants.fp32_param_grads ? DType::Float32 : c.dtype;
  const int64_t param_size = element_bytes(param_dtype);
  std::vector<unsigned char> grad_weight(std::size_t(v * weight_stride * param_size), 0xCD);
  std::vector<unsigned char> grad_bias(std::size_t(v * param_size), 0xCD);
  std::vector<float> accumulate = c.accumulate_init;
  accumulate.resize(std::size_t(v * d), 0.0f);

  Outputs outputs;
  outputs.loss = loss.data();
  if (wants.lse) outputs.lse = lse.data();
  if (wants.grad_hidden) {
    outputs.grad_hidden = grad_hidden.data();
    outputs.grad_hidden_stride = hidden_stride;
  }
  if (wants.grad_weight) {
    outputs.grad_weight = grad_weight.data();
    outputs.grad_weight_stride = weight_stride;
  }
  if (wants.grad_bias && !c.bias.empty()) outputs.grad_bias = grad_bias.data();
  if (wants.accumulate) outputs.grad_weight_accumulate = accumulate.data();
  if (wants.fp32_param_grads) outputs.param_grads = ParamGradKind::Float32;

  std::size_t bytes = workspace_size(problem, options, outputs.wants_gradients(), context);
  std::vector<double> workspace((bytes + sizeof(double) - 1) / sizeof(double) + 2);
  linear_cross_entropy(problem, options, outputs, Workspace{workspace.data(), bytes}, context);

  Result r;
  r.loss.assign(loss.begin(), loss.end());
  if (wants.lse) r.lse.assign(lse.begin(), lse.end());
  auto rows = [&](const std::vector<unsigned char>& bytes_, DType dtype, int64_t count, int64_t stride) {
    std::vector<double> out;
    for (int64_t i = 0; i < count; ++i)
      for (int64_t k = 0; k < d; ++k) out.push_back(decode(bytes_, dtype, i * stride + k));
    return out;
  };
  if (wants.grad_hidden) r.grad_hidden = rows(grad_hidden, c.dtype, n, hidden_stride);
  if (wants.grad_weight) r.grad_weight = rows(grad_weight, param_dtype, v, weight_stride);
  if (outputs.grad_bias)
    for (int64_t j = 0; j < v; ++j) r.grad_bias.push_back(decode(grad_bias, param_dtype, j));
  if (wants.accumulate) r.accumulate.assign(accumulate.begin(), accumulate.end());
  return r;
}

namespace {

struct Forward {
  std::vector<double> x, z, loss, lse;  // x, z: [N, V]
  std::vector<int64_t> target;          // ignore_index when none
  double divisor = 1.0, reduced = 0.0;
  bool empty_mean = false;
};

Forward forward(const Case& c) {
  const int64_t n = c.tokens, d = c.dim, v = c.vocab;
  const Options& o = c.options;
  Forward f;
  f.x.assign(std::size_t(n * v), 0.0);
  f.z.assign(std::size_t(n * v), 0.0);
  f.loss.assign(std::size_t(n), 0.0);
  f.lse.assign(std::size_t(n), 0.0);
  int64_t valid = 0;
  for (int64_t t = 0; t < n; ++t) {
    int64_t y = c.target(t);
    f.target.push_back(y);
    if (y == o.ignore_index) continue;
    ++valid;
    double maximum = -INFINITY;
    for (int64_t j = 0; j < v; ++j) {
      double x = c.bias.empty() ? 0.0 : c.bias[std::size_t(j)];
      double dot = 0.0;
      for (int64_t k = 0; k < d; ++k) dot += c.hidden[std::size_t(t * d + k)] * c.weight[std::size_t(j * d + k)];
      x += dot;
      double s = o.logit_scale * x;
      double z = o.softcap > 0 ? o.softcap * std::tanh(s / o.softcap) : s;
      f.x[std::size_t(t * v + j)] = x;
      f.z[std::size_t(t * v + j)] = z;
      maximum = std::max(maximum, z);
    }
    double sum = 0.0, mean_z = 0.0;
    for (int64_t j = 0; j < v; ++j) {
      sum += std::exp(f.z[std::size_t(t * v + j)] - maximum);
      mean_z += f.z[std::size_t(t * v + j)] / double(v);
    }
    double lse = maximum + std::log(sum);
    f.lse[std::size_t(t)] = lse;
    bool in_range = y >= 0 && y < v;
    double target_z = in_range ? f.z[std::size_t(t * v + y)] : NAN;
    // PyTorch's label smoothing: (1 − ε)·(−log p_y) + ε·mean_j(−log p_j), plus the z-loss.
    f.loss[std::size_t(t)] = (1 - o.label_smoothing) * (lse - target_z) + o.label_smoothing * (lse - mean_z) +
                             o.z_loss * lse * lse;
  }
  if (o.reduction == Reduction::Mean) {
    f.divisor = c.n_items_pointer ? double(c.n_items_host) : o.n_items_value > 0 ? o.n_items_value : double(valid);
    f.empty_mean = !(f.divisor > 0);
  }
  for (double l : f.loss) f.reduced += l;
  f.reduced = f.empty_mean ? 0.0 : f.reduced / f.divisor;
  return f;
}

double upstream(const Case& c, int64_t token) {
  if (c.grad_scale.empty()) return 1.0;
  return c.options.reduction == Reduction::None ? c.grad_scale[std::size_t(token)] : c.grad_scale[0];
}

}  // namespace

double brute_force_objective(const Case& c) {
  Forward f = forward(c);
  if (c.options.reduction != Reduction::None) return upstream(c, 0) * f.reduced;
  double total = 0.0;
  for (int64_t t = 0; t < c.tokens; ++t) total += upstream(c, t) * f.loss[std::size_t(t)];
  return total;
}

Result brute_force(const Case& c, const Wants& wants) {
  const int64_t n = c.tokens, d = c.dim, v = c.vocab;
  const Options& o = c.options;
  Forward f = forward(c);
  Result r;
  if (o.reduction == Reduction::None) r.loss = f.loss;
  else r.loss = {f.reduced};
  if (wants.lse) r.lse = f.lse;

  // dx[t, j] for every token; zero rows for tokens without a target.
  std::vector<double> dx(std::size_t(n * v), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    int64_t y = f.target[std::size_t(t)];
    if (y == o.ignore_index || f.empty_mean) continue;
    double lse = f.lse[std::size_t(t)], scale = upstream(c, t) / f.divisor;
    for (int64_t j = 0; j < v; ++j) {
      double z = f.z[std::size_t(t * v + j)], p = std::exp(z - lse);
      double dz = p * (1 + 2 * o.z_loss * lse) - o.label_smoothing / double(v) - (j == y ? 1 - o.label_smoothing : 0.0);
      if (y < 0 || y >= v) dz = NAN;
      double chain = o.logit_scale;
      if (o.softcap > 0) {
        double th = std::tanh(o.logit_scale * f.x[std::size_t(t * v + j)] / o.softcap);
        chain *= 1 - th * th;
      }
      dx[std::size_t(t * v + j)] = dz * chain * scale;
    }
  }
  if (wants.grad_hidden) {
    r.grad_hidden.assign(std::size_t(n * d), 0.0);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < v; ++j)
        for (int64_t k = 0; k < d; ++k)
          r.grad_hidden[std::size_t(t * d + k)] += dx[std::size_t(t * v + j)] * c.weight[std::size_t(j * d + k)];
  }
  std::vector<double> grad_weight(std::size_t(v * d), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < v; ++j)
      for (int64_t k = 0; k < d; ++k)
        grad_weight[std::size_t(j * d + k)] += dx[std::size_t(t * v + j)] * c.hidden[std::size_t(t * d + k)];
  if (wants.grad_weight) r.grad_weight = grad_weight;
  if (wants.accumulate) {
    r.accumulate = grad_weight;
    for (std::size_t i = 0; i < r.accumulate.size(); ++i)
      if (i < c.accumulate_init.size()) r.accumulate[i] += c.accumulate_init[i];
  }
  if (wants.grad_bias && !c.bias.empty()) {
    r.grad_bias.assign(std::size_t(v), 0.0);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < v; ++j) r.grad_bias[std::size_t(j)] += dx[std::size_t(t * v + j)];
  }
  return r;
}

}  // namespace lmfuse::test
