// A few LibTorch declarations, shaped like the real ones (ModuleHolder<LinearImpl>, functional
// cross_entropy with its options), so the CLI tests parse in milliseconds instead of seconds.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>

namespace c10 {
template <typename T> using optional = std::optional<T>;
inline constexpr std::nullopt_t nullopt = std::nullopt;
template <typename T> class ArrayRef {
public:
  ArrayRef(const T &One) : Data(&One), Length(1) {}
  ArrayRef(std::initializer_list<T> List) : Data(List.begin()), Length(List.size()) {}
private:
  const T *Data;
  size_t Length;
};
}  // namespace c10

namespace at {
enum class ScalarType { Float, Long };
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kLong = ScalarType::Long;
using IntArrayRef = c10::ArrayRef<int64_t>;
class Tensor {
public:
  Tensor() = default;
  Tensor view(IntArrayRef Shape) const;
  Tensor reshape(IntArrayRef Shape) const;
  Tensor slice(int64_t Dim, int64_t Start = 0, int64_t End = INT64_MAX) const;
  Tensor to(ScalarType Type) const;
  Tensor tanh() const;
  Tensor operator*(double Scale) const;
  const Tensor &mul_(double Scale) const;
  int64_t size(int64_t Dim) const;
  bool defined() const;
};
Tensor linear(const Tensor &Input, const Tensor &Weight, const Tensor &Bias = {});
}  // namespace at

namespace torch {
using at::Tensor;
using at::kFloat;
using at::kLong;
namespace enumtype {
struct kMean {};
struct kSum {};
struct kNone {};
}  // namespace enumtype
inline constexpr enumtype::kMean kMean{};
inline constexpr enumtype::kSum kSum{};
namespace nn {
class Module {
public:
  virtual ~Module() = default;
};
template <typename Contained> class ModuleHolder {
public:
  ModuleHolder(std::nullptr_t) {}
  Contained *operator->();
  template <typename... Args>
  auto operator()(Args &&...Arguments) -> decltype(std::declval<Contained &>().forward(std::forward<Args>(Arguments)...));
};
class LinearImpl : public Module {
public:
  Tensor forward(const Tensor &Input);
  Tensor weight;
  Tensor bias;
};
class Linear : public ModuleHolder<LinearImpl> {
public:
  using ModuleHolder<LinearImpl>::ModuleHolder;
};
namespace functional {
struct CrossEntropyFuncOptions {
  CrossEntropyFuncOptions &ignore_index(int64_t Value);
  CrossEntropyFuncOptions &label_smoothing(double Value);
  CrossEntropyFuncOptions &reduction(enumtype::kMean Value);
  CrossEntropyFuncOptions &reduction(enumtype::kSum Value);
  CrossEntropyFuncOptions &weight(const Tensor &Value);
};
Tensor cross_entropy(const Tensor &Input, const Tensor &Target, const CrossEntropyFuncOptions &Options = {});
Tensor linear(const Tensor &Input, const Tensor &Weight, const Tensor &Bias = {});
}  // namespace functional
}  // namespace nn
}  // namespace torch

// LibTorch's assertion macro: its message names the file through __FILE__, expanded where the check is written.
namespace c10::detail {
[[noreturn]] void torchCheckFail(const char *function, const char *file, unsigned line, const char *message);
}  // namespace c10::detail
#define TORCH_CHECK(cond, message) \
  ((cond) ? (void)0 : ::c10::detail::torchCheckFail(__func__, __FILE__, __LINE__, message))
