// The one error path of the runtime's host code. Argument checks (validate.cpp) throw lmfuse::Error
// through LMFUSE_REQUIRE, whose message starts with the public function that was called and names the
// offending argument. Failures found inside a backend (a CUDA or cuBLASLt call, a budget the plan cannot
// meet, memory the backend cannot use) throw detail::Failure through LMFUSE_FAIL, which does not know the
// public function; api.cpp runs every backend call through reported(), which turns a Failure into the
// same "<function>: <what>" Error. So every message the caller sees starts with the function it called.
#pragma once

#include <sstream>
#include <string>

#include "lmfuse/flce.h"

// LMFUSE_REQUIRE(function, condition, message): `message` is a stream expression, e.g.
//   LMFUSE_REQUIRE(fn, stride >= dim, "problem.weight_stride (" << stride << ") is smaller than ...");
#define LMFUSE_REQUIRE(function, condition, message)                  \
  do {                                                                \
    if (!(condition)) {                                               \
      std::ostringstream lmfuse_error_text_;                          \
      lmfuse_error_text_ << (function) << ": " << message;            \
      throw ::lmfuse::Error(lmfuse_error_text_.str());                \
    }                                                                 \
  } while (0)

// LMFUSE_FAIL(message): a backend failure; api.cpp's reported() prefixes the public function.
#define LMFUSE_FAIL(message)                                          \
  do {                                                                \
    std::ostringstream lmfuse_error_text_;                            \
    lmfuse_error_text_ << message;                                    \
    throw ::lmfuse::detail::Failure(lmfuse_error_text_.str());        \
  } while (0)

namespace lmfuse::detail {

/// A failure inside a backend, without the public function's name (an Error all the same, so a path
/// that is not wrapped still throws what flce.h promises).
class Failure : public Error {
public:
  using Error::Error;
};

/// Runs a backend call; a Failure leaves it as Error "<function>: <what>".
template <class Body>
auto reported(const char* function, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Failure& failure) {
    throw Error(std::string(function) + ": " + failure.what());
  }
}

}  // namespace lmfuse::detail
