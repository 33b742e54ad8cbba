// The runtime's fp16/bf16 conversions (runtime/src/storage.h): round-to-nearest-even at the edges that
// matter (ties, overflow, subnormals, NaN), exact round trips of every 16-bit pattern, and fp64 values
// rounded once (not twice) against an independent correctly-rounding reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "harness.h"
#include "storage.h"

namespace lmfuse::test {
namespace {

using detail::BFloat16;
using detail::Half;

float from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

// Correct rounding of a double to `precision` significant bits (normal range), ties to even.
double round_to_precision(double value, int precision) {
  int exponent;
  double mantissa = std::frexp(value, &exponent);  // value = mantissa · 2^exponent, |mantissa| in [0.5, 1)
  return std::ldexp(std::nearbyint(std::ldexp(mantissa, precision)), exponent - precision);
}

}  // namespace

TEST_CASE("bf16 rounds to nearest even", "[runtime][storage]") {
  CHECK(detail::to_bfloat16(1.0f).bits == 0x3f80);
  CHECK(detail::to_bfloat16(from_bits(0x3f808000)).bits == 0x3f80);  // tie, even below
  CHECK(detail::to_bfloat16(from_bits(0x3f818000)).bits == 0x3f82);  // tie, even above
  CHECK(detail::to_bfloat16(from_bits(0x3f808001)).bits == 0x3f81);  // just above the tie
  CHECK(detail::to_bfloat16(-INFINITY).bits == 0xff80);
  CHECK(detail::to_bfloat16(from_bits(0x7f7fffff)).bits == 0x7f80);  // FLT_MAX rounds to inf
  CHECK(std::isnan(detail::to_float(detail::to_bfloat16(std::nanf("")))));
  CHECK(std::isnan(detail::to_float(detail::to_bfloat16(from_bits(0x7f800001)))));  // signalling NaN stays NaN
}

TEST_CASE("fp16 rounds to nearest even, with subnormals and overflow", "[runtime][storage]") {
  CHECK(detail::to_half(1.0f).bits == 0x3c00);
  CHECK(detail::to_half(65504.0f).bits == 0x7bff);
  CHECK(detail::to_half(65519.996f).bits == 0x7bff);
  CHECK(detail::to_half(65520.0f).bits == 0x7c00);  // tie between 65504 and 2^16: even is inf
  CHECK(detail::to_half(-1e9f).bits == 0xfc00);
  CHECK(detail::to_half(std::ldexp(1.0f, -24)).bits == 0x0001);
  CHECK(detail::to_half(std::ldexp(1.0f, -25)).bits == 0x0000);         // tie, even is 0
  CHECK(detail::to_half(std::ldexp(3.0f, -25)).bits == 0x0002);         // tie, even is 2
  CHECK(detail::to_half(std::ldexp(1.0f, -14)).bits == 0x0400);         // smallest normal
  CHECK(detail::to_half(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00);  // tie, even below
  CHECK(detail::to_half(1.0f + std::ldexp(3.0f, -11)).bits == 0x3c02);  // tie, even above
  CHECK(std::isnan(detail::to_float(detail::to_half(std::nanf("")))));
}

TEST_CASE("Every 16-bit pattern round-trips and decodes as the test's own decoder does", "[runtime][storage]") {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    uint16_t pattern = uint16_t(bits);
    std::vector<unsigned char> bytes(2);
    std::memcpy(bytes.data(), &pattern, 2);
    float half = detail::to_float(Half{pattern});
    float bfloat = detail::to_float(BFloat16{pattern});
    double half_expected = decode(bytes, DType::Float16, 0), bfloat_expected = decode(bytes, DType::BFloat16, 0);
    if (std::isnan(half_expected)) {
      REQUIRE(std::isnan(half));
    } else {
      REQUIRE(double(half) == half_expected);
      REQUIRE(detail::to_half(half).bits == pattern);
    }
    if (std::isnan(bfloat_expected)) {
      REQUIRE(std::isnan(bfloat));
    } else {
      REQUIRE(double(bfloat) == bfloat_expected);
      REQUIRE(detail::to_bfloat16(bfloat).bits == pattern);
    }
  }
}

TEST_CASE("fp64 values are rounded once to fp16 and bf16", "[runtime][storage]") {
  uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> exponent(-8, 8), offset(-3, 3), sign(0, 1);
  using Half16 = detail::StorageTraits<Half>;
  using BFloat = detail::StorageTraits<BFloat16>;
  for (int precision : {8, 11}) {
    std::uniform_int_distribution<int64_t> mantissa(int64_t(1) << precision, (int64_t(2) << precision) - 1);
    for (int i = 0; i < 20000; ++i) {
      // An exact tie of the format (odd multiple of half a unit), or a few fp64 ulps either side:
      // a double rounding through float would break these.
      double tie = std::ldexp(double(2 * mantissa(rng) + 1), exponent(rng) - precision - 1);
      double value = (sign(rng) ? -1.0 : 1.0) * (tie + offset(rng) * std::ldexp(tie, -50));
      INFO("value " << value << ", precision " << precision);
      if (precision == 8) REQUIRE(BFloat::load(BFloat::store(value)) == round_to_precision(value, 8));
      else REQUIRE(Half16::load(Half16::store(value)) == round_to_precision(value, 11));
      REQUIRE(double(detail::StorageTraits<float>::store(value)) == round_to_precision(value, 24));
    }
  }
}

}  // namespace lmfuse::test
