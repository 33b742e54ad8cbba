// The one error path of the adapter. A rewritten call stands for LibTorch's F::linear + F::cross_entropy
// (or nll_loss), so every error it raises where the original would also raise is of the c10 class the
// original raises: `catch (const c10::IndexError&)` around the loss takes the same path in both programs.
// Each check names what it checks (Check); classOf() is the table from that to the class, taken from the
// TORCH_CHECK_* variant LibTorch's own check uses (aten/src/ATen/native/LossNLL.cpp, Loss.cpp, Linear.cpp).
#pragma once

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <cstdint>
#include <string>

namespace lmfuse::torch_detail {

enum class Check {
  Argument,           ///< anything else: shapes, dtypes, devices, options (TORCH_CHECK: c10::Error)
  LabelOutOfRange,    ///< a class index outside [0, V) and not ignore_index (nll_loss: TORCH_CHECK_INDEX)
  LabelCount,         ///< labels of another batch size than the input's rows (cross_entropy's
                      ///< nll_loss_nd: TORCH_CHECK_VALUE)
  LabelCountNll,      ///< the same, where the original called nll_loss itself (TORCH_CHECK: c10::Error)
  LabelType,          ///< class indices that are not Long (the kernel's dtype check: c10::Error)
  LabelShape,         ///< a target of another rank ("0D or 1D target tensor expected": c10::Error)
  Unsupported,        ///< what the original computes and the fused path cannot (c10::Error, naming the way out)
};

enum class ErrorClass { Error, IndexError, ValueError, TypeError, NotImplementedError };

/// The c10 exception class LibTorch raises for the check (the one table).
ErrorClass classOf(Check check);

/// Throws the c10 exception of classOf(check) with `message`.
[[noreturn]] void raise(Check check, const char* function, const char* file, uint32_t line, const std::string& message);

}  // namespace lmfuse::torch_detail

// LMFUSE_TORCH_CHECK(Check::LabelCount, condition, message parts...): TORCH_CHECK with the class the
// original raises for that check (`check` a torch_detail::Check).
#define LMFUSE_TORCH_CHECK(check, condition, ...)                                                              \
  do {                                                                                                         \
    if (C10_UNLIKELY(!(condition)))                                                                            \
      ::lmfuse::torch_detail::raise((check), __func__, __FILE__,                                               \
                                    static_cast<uint32_t>(__LINE__), ::c10::str(__VA_ARGS__));                 \
  } while (0)
