// Shared pieces of the CUDA runtime tests: device buffers, storage rounding, random inputs, the fp64
// brute-force reference (every option of flce.h, computed from the same rounded inputs the GPU sees),
// and norm-wise error measures. The reference builds the whole N × V logits on purpose: it is the
// simplest correct implementation, and the test sizes are small.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/device_state.h"
#include "lmfuse/flce.h"

namespace lmfuse_test {

using namespace lmfuse;

inline void cudaOk(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}
#define TEST_CUDA(call) ::lmfuse_test::cudaOk((call), #call)

class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) { TEST_CUDA(cudaMalloc(&data_, bytes ? bytes : 1)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~DeviceBuffer() { if (data_) cudaFree(data_); }
  void* get() const { return data_; }
  template <class T> T* as() const { return static_cast<T*>(data_); }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host) { TEST_CUDA(cudaMemcpy(data_, host, bytes_, cudaMemcpyHostToDevice)); }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(bytes_);
    TEST_CUDA(cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost));
    return host;
  }
  void poison() { TEST_CUDA(cudaMemset(data_, 0xff, bytes_)); }  // NaN in every float format

private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

inline std::size_t dtypeBytes(DType dtype) { return dtype == DType::Float32 ? 4 : 2; }

/// Stores value in dtype at element i of raw storage, and returns the stored value read back.
inline double storeRounded(std::vector<unsigned char>& raw, DType dtype, std::size_t i, float value) {
  if (dtype == DType::Float32) {
    std::memcpy(raw.data() + 4 * i, &value, 4);
    return value;
  }
  if (dtype == DType::Float16) {
    __half h = __float2half_rn(value);
    std::memcpy(raw.data() + 2 * i, &h, 2);
    return __half2float(h);
  }
  __nv_bfloat16 b = __float2bfloat16_rn(value);
  std::memcpy(raw.data() + 2 * i, &b, 2);
  return __bfloat162float(b);
}

inline double loadStored(const std::vector<unsigned char>& raw, DType dtype, std::size_t i) {
  if (dtype == DType::Float32) {
    float f;
    std::memcpy(&f, raw.data() + 4 * i, 4);
    return f;
  }
  if (dtype == DType::Float16) {
    __half h;
    std::memcpy(&h, raw.data() + 2 * i, 2);
    return __half2float(h);
  }
  __nv_bfloat16 b;
  std::memcpy(&b, raw.data() + 2 * i, 2);
  return __bfloat162float(b);
}

/// A host matrix in storage form (raw) and its exactly-rounded values (values).
struct Stored {
  std::vector<unsigned char> raw;
  std::vector<double> values;
};

inline Stored randomStored(std::mt19937_64& rng, DType dtype, std::size_t count, double scale) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Stored s{std::vector<unsigned char>(count * dtypeBytes(dtype)), std::vector<double>(count)};
  for (std::size_t i = 0; i < count; ++i) s.values[i] = storeRounded(s.raw, dtype, i, float(scale * uniform(rng)));
  return s;
}

struct Reference {
  std::vector<double> loss;       // [1] or [N]
  std::vector<double> lse;        // [N]
  std::vector<double> gradHidden, gradWeight, gradBias;
};

/// Target label index of token i after the shift (flce.h), or -1 when none; labels as int64.
inline int64_t referenceTargetPosition(const Shift& shift, const std::vector<int64_t>& cuSeqlens, int64_t n, int64_t i) {
  if (shift.kind == ShiftKind::None) return i;
  if (shift.kind == ShiftKind::Rows) return (i % shift.seq_len == shift.seq_len - 1) ? -1 : i + 1;
  for (int64_t k = 0; k < shift.segments; ++k)
    if (cuSeqlens[k] <= i && i < cuSeqlens[k + 1]) return (i + 1 < cuSeqlens[k + 1] && i + 1 < n) ? i + 1 : -1;
  return -1;
}

/// fp64 brute force of flce.h. gradScale: scalar (Mean/Sum) or [N] (None); empty = 1.
inline Reference reference(int64_t n, int64_t d, int64_t v, const std::vector<double>& h, const std::vector<double>& w,
                           const std::vector<double>* bias, const std::vector<int64_t>& labels, const Options& o,
                           const std::vector<int64_t>& cuSeqlens, const std::vector<double>& gradScale,
                           double nItems) {
  Reference r;
  r.lse.assign(n, 0.0);
  r.gradHidden.assign(n * d, 0.0);
  r.gradWeight.assign(v * d, 0.0);
  r.gradBias.assign(v, 0.0);
  std::vector<double> rowLoss(n, 0.0), dx(v);
  std::vector<char> valid(n, 0);
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t pos = referenceTargetPosition(o.shift, cuSeqlens, n, i);
    if (pos >= 0 && labels[pos] != o.ignore_index) { valid[i] = 1; ++count; }
  }
  double divisor = nItems > 0 ? nItems : double(count);
  double lossFactor = o.reduction == Reduction::Mean ? (divisor > 0 ? 1.0 / divisor : 0.0) : 1.0;
  std::vector<double> z(v), dzdx(v);
  for (int64_t i = 0; i < n; ++i) {
    if (!valid[i]) continue;
    int64_t y = labels[referenceTargetPosition(o.shift, cuSeqlens, n, i)];
    for (int64_t j = 0; j < v; ++j) {
      double x = bias ? (*bias)[j] : 0.0;
      for (int64_t k = 0; k < d; ++k) x += h[i * d + k] * w[j * d + k];
      double s = o.logit_scale * x;
      if (o.softcap > 0) {
        double t = std::tanh(s / o.softcap);
        z[j] = o.softcap * t;
        dzdx[j] = (1 - t * t) * o.logit_scale;
      } else {
        z[j] = s;
        dzdx[j] = o.logit_scale;
      }
    }
    double m = -INFINITY, sum = 0, sumZ = 0;
    for (int64_t j = 0; j < v; ++j) m = std::max(m, z[j]);
    for (int64_t j = 0; j < v; ++j) { sum += std::exp(z[j] - m); sumZ += z[j]; }
    double lse = m + std::log(sum), eps = o.label_smoothing;
    rowLoss[i] = lse - (1 - eps) * z[y] - eps / double(v) * sumZ + o.z_loss * lse * lse;
    r.lse[i] = lse;
    double g = o.reduction == Reduction::None ? (gradScale.empty() ? 1.0 : gradScale[i])
                                              : (gradScale.empty() ? 1.0 : gradScale[0]) * lossFactor;
    for (int64_t j = 0; j < v; ++j) {
      double dz = (1 + 2 * o.z_loss * lse) * std::exp(z[j] - lse) - eps / double(v) - (j == y ? 1 - eps : 0.0);
      dx[j] = dz * dzdx[j] * g;
      r.gradBias[j] += dx[j];
      for (int64_t k = 0; k < d; ++k) {
        r.gradHidden[i * d + k] += dx[j] * w[j * d + k];
        r.gradWeight[j * d + k] += dx[j] * h[i * d + k];
      }
    }
  }
  if (o.reduction == Reduction::None) {
    r.loss = rowLoss;
  } else {
    double total = 0;
    for (double l : rowLoss) total += l;
    r.loss = {total * lossFactor};
  }
  return r;
}

/// ‖a − b‖ / ‖b‖ (‖a‖ when b is zero); NaN anywhere gives infinity.
inline double relativeError(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

inline std::vector<double> toDoubles(const std::vector<unsigned char>& raw, DType dtype, std::size_t count,
                                     std::size_t rowLength = 0, std::size_t stride = 0) {
  std::vector<double> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t at = rowLength ? (i / rowLength) * stride + i % rowLength : i;
    out[i] = loadStored(raw, dtype, at);
  }
  return out;
}

inline std::vector<double> floatsToDoubles(const std::vector<unsigned char>& raw) {
  std::vector<double> out(raw.size() / 4);
  for (std::size_t i = 0; i < out.size(); ++i) {
    float f;
    std::memcpy(&f, raw.data() + 4 * i, 4);
    out[i] = f;
  }
  return out;
}

/// True when LMFUSE_TEST_NO_GRAPHS is set (scripts/gpu/runtime.sh sets it, with LMFUSE_CUDA_EAGER, for
/// racecheck and synccheck, which cannot follow a graph's conditional nodes through whole calls): the tests
/// then skip the calls they capture and their graph-against-eager comparisons; every other call still
/// runs, eagerly. The kernel-level graph tests ([plain], [conditional]: one backend kernel, no cuBLASLt)
/// still build their graphs, which both tools follow.
inline bool graphsSkipped() {
  const char* value = std::getenv("LMFUSE_TEST_NO_GRAPHS");
  return value && *value && std::strcmp(value, "0") != 0;
}

/// The graphs the backend keeps for uncaptured calls (conditional.h: RecordedGraphs), destroyed and
/// cleared: a call that records one afterwards shows up in the returned list.
inline std::vector<lmfuse::detail::cuda::RecordedGraphs::Entry>& recordedGraphsCleared() {
  auto& kept = lmfuse::detail::cuda::deviceState().recorded.entries;
  for (auto& entry : kept) TEST_CUDA(cudaGraphExecDestroy(entry.exec));
  kept.clear();
  return kept;
}

/// Sets an environment variable (unsets it for nullptr) for the guard's lifetime, then restores it.
class ScopedEnvironment {
public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old, hadValue_ = true;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;
  ~ScopedEnvironment() {
    if (hadValue_) setenv(name_.c_str(), saved_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

private:
  std::string name_, saved_;
  bool hadValue_ = false;
};

inline std::mt19937_64& rng() {
  static std::mt19937_64 generator{std::random_device{}()};
  return generator;
}

}  // namespace lmfuse_test
