// Storage dtypes: fp16 and bf16 <-> float/double conversions with round-to-nearest-even (NaN stays NaN,
// overflow gives ±inf, fp16 subnormals are exact), and typed reads of labels and cu_seqlens.
// Host and device (LMFUSE_HD); no dependency on CUDA's or LibTorch's half types, so the CPU reference
// builds anywhere and rounds exactly as the hardware conversion instructions do.
#pragma once

#include <cstdint>
#include <cstring>

#include "hd.h"
#include "lmfuse/flce.h"

namespace lmfuse::detail {

/// Raw 16-bit storage; the value is only reached through the conversions below.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

LMFUSE_HD inline uint32_t float_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return bits;
}

LMFUSE_HD inline float bits_float(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

LMFUSE_HD inline float to_float(BFloat16 value) { return bits_float(uint32_t(value.bits) << 16); }

LMFUSE_HD inline BFloat16 to_bfloat16(float value) {
  uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return BFloat16{uint16_t((bits >> 16) | 0x0040u)};  // quiet NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // ties go to the even neighbour
  return BFloat16{uint16_t((bits + rounding) >> 16)};
}

LMFUSE_HD inline float to_float(Half value) {
  uint32_t sign = uint32_t(value.bits & 0x8000u) << 16;
  uint32_t exponent = (value.bits >> 10) & 0x1fu;
  uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24, exact in float
    float magnitude = float(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // inf or NaN
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

LMFUSE_HD inline Half to_half(float value) {
  uint32_t bits = float_bits(value);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  bits &= 0x7fffffffu;
  if (bits > 0x7f800000u) return Half{uint16_t(sign | 0x7e00u)};   // NaN
  if (bits >= 0x477ff000u) return Half{uint16_t(sign | 0x7c00u)};  // ≥ 65520 rounds to inf
  if (bits < 0x38800000u) {
    // Below 2^-14 the result is subnormal: adding 0.5 puts the fp16 subnormal ulp (2^-24) at the float
    // ulp of 0.5, so the float adder performs the round-to-nearest-even for us.
    float shifted = bits_float(bits) + 0.5f;
    return Half{uint16_t(sign | (float_bits(shifted) - 0x3f000000u))};
  }
  uint32_t mantissa_odd = (bits >> 13) & 1u;
  bits += 0xc8000fffu + mantissa_odd;  // rebias the exponent (127 → 15) and round to nearest even
  return Half{uint16_t(sign | (bits >> 13))};
}

/// double → float rounded to odd: a second rounding to a format with at least two fewer mantissa bits
/// (fp16, bf16) then equals one correct rounding of the double, so fp64 results are stored exactly
/// rounded, never double-rounded.
LMFUSE_HD inline float to_float_round_odd(double value) {
  float nearest = float(value);
  uint32_t bits = float_bits(nearest);
  bool finite = (bits & 0x7f800000u) != 0x7f800000u;
  if (!finite || double(nearest) == value) return nearest;
  // Inexact: truncate toward zero (one step of the magnitude's bit pattern), then force the last bit.
  bool rounded_away = value > 0.0 ? double(nearest) > value : double(nearest) < value;
  if (rounded_away) bits -= 1u;
  return bits_float(bits | 1u);
}

/// One conversion interface per storage type, so typed loops are written once.
template <class Storage>
struct StorageTraits;

template <>
struct StorageTraits<float> {
  LMFUSE_HD static double load(float value) { return value; }
  LMFUSE_HD static float store(double value) { return float(value); }
};

template <>
struct StorageTraits<Half> {
  LMFUSE_HD static double load(Half value) { return to_float(value); }
  LMFUSE_HD static Half store(double value) { return to_half(to_float_round_odd(value)); }
};

template <>
struct StorageTraits<BFloat16> {
  LMFUSE_HD static double load(BFloat16 value) { return to_float(value); }
  LMFUSE_HD static BFloat16 store(double value) { return to_bfloat16(to_float_round_odd(value)); }
};

/// Bytes per element of a storage dtype.
LMFUSE_HD inline int64_t dtype_size(DType dtype) { return dtype == DType::Float32 ? 4 : 2; }
LMFUSE_HD inline int64_t index_size(IndexType type) { return type == IndexType::Int32 ? 4 : 8; }

/// Storage dtype of grad_weight and grad_bias (Outputs::param_grads): the one place that decides it.
LMFUSE_HD inline DType param_grad_dtype(DType problem_dtype, ParamGradKind kind) {
  return kind == ParamGradKind::Float32 ? DType::Float32 : problem_dtype;
}

/// Element `index` of an int32 or int64 array.
LMFUSE_HD inline int64_t load_index(const void* base, IndexType type, int64_t index) {
  return type == IndexType::Int32 ? int64_t(static_cast<const int32_t*>(base)[index])
                                  : static_cast<const int64_t*>(base)[index];
}

}  // namespace lmfuse::detail
