// Comparison helpers for the runtime tests (include after <catch2/catch.hpp>).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"

namespace lmfuse::test {

/// Every element within `relative`·|expected| + `absolute`·(1 + max|expected|); NaN only where
/// expected is NaN.
inline void require_close(const std::string& name, const std::vector<double>& actual,
                          const std::vector<double>& expected, double relative, double absolute = 1e-10) {
  INFO(name);
  REQUIRE(actual.size() == expected.size());
  double largest = 0.0;
  for (double e : expected)
    if (std::isfinite(e)) largest = std::max(largest, std::fabs(e));
  for (std::size_t i = 0; i < actual.size(); ++i) {
    INFO(name << "[" << i << "]: runtime " << actual[i] << ", brute force " << expected[i]);
    if (std::isnan(expected[i])) {
      REQUIRE(std::isnan(actual[i]));
      continue;
    }
    REQUIRE(std::fabs(actual[i] - expected[i]) <= relative * std::fabs(expected[i]) + absolute * (1.0 + largest));
  }
}

/// Every output of the runtime against the brute force, with rounding bounds of the storage types
/// (param_dtype: that of grad_weight and grad_bias, fp32 under ParamGradKind::Float32).
inline void require_matches(const Result& runtime, const Result& expected, DType dtype, DType param_dtype) {
  double output = 2.0 * unit_roundoff(DType::Float32);  // loss, lse, grad_weight_accumulate: fp32
  double gradient = 2.0 * unit_roundoff(dtype), param_gradient = 2.0 * unit_roundoff(param_dtype);
  auto floor = [](DType type) { return type == DType::Float16 ? 1e-7 : 1e-10; };  // fp16 subnormal spacing 2^-24
  require_close("loss", runtime.loss, expected.loss, output);
  require_close("lse", runtime.lse, expected.lse, output);
  require_close("grad_hidden", runtime.grad_hidden, expected.grad_hidden, gradient, floor(dtype));
  require_close("grad_weight", runtime.grad_weight, expected.grad_weight, param_gradient, floor(param_dtype));
  require_close("grad_bias", runtime.grad_bias, expected.grad_bias, param_gradient, floor(param_dtype));
  require_close("grad_weight_accumulate", runtime.accumulate, expected.accumulate, output);
}

inline void require_matches(const Result& runtime, const Result& expected, DType dtype) {
  require_matches(runtime, expected, dtype, dtype);
}

inline bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

inline void require_bitwise(const Result& a, const Result& b) {
  CHECK(bitwise_equal(a.loss, b.loss));
  CHECK(bitwise_equal(a.lse, b.lse));
  CHECK(bitwise_equal(a.grad_hidden, b.grad_hidden));
  CHECK(bitwise_equal(a.grad_weight, b.grad_weight));
  CHECK(bitwise_equal(a.grad_bias, b.grad_bias));
  CHECK(bitwise_equal(a.accumulate, b.accumulate));
}

}  // namespace lmfuse::test
