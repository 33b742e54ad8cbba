// The one error-checking macro of the runtime's host code: a failed condition throws lmfuse::Error whose
// message starts with the public function that was called and names the offending argument.
#pragma once

#include <sstream>

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
