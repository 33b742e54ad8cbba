// The one error path of the adapter (see errors.h).
#include "errors.h"

namespace lmfuse::torch_detail {

ErrorClass classOf(Check check) {
  switch (check) {
    case Check::LabelOutOfRange: return ErrorClass::IndexError;  // TORCH_CHECK_INDEX("Target ... is out of bounds.")
    case Check::LabelCount: return ErrorClass::ValueError;       // TORCH_CHECK_VALUE("Expected input batch_size ...")
    case Check::LabelCountNll:
    case Check::LabelType:
    case Check::LabelShape:
    case Check::Argument:
    case Check::Unsupported: return ErrorClass::Error;
  }
  return ErrorClass::Error;
}

void raise(Check check, const char* function, const char* file, uint32_t line, const std::string& message) {
  const c10::SourceLocation where{function, file, line};
  switch (classOf(check)) {
    case ErrorClass::IndexError: throw c10::IndexError(where, message);
    case ErrorClass::ValueError: throw c10::ValueError(where, message);
    case ErrorClass::TypeError: throw c10::TypeError(where, message);
    case ErrorClass::NotImplementedError: throw c10::NotImplementedError(where, message);
    case ErrorClass::Error: break;
  }
  throw c10::Error(where, message);
}

}  // namespace lmfuse::torch_detail
