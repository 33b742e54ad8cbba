// A few LibTorch declarations, shaped like the real ones where the rewriter looks (namespaces,
// ModuleHolder<LinearImpl>, options setters, default arguments), so unit cases parse in
// milliseconds. Not a LibTorch: nothing here is ever run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

namespace c10 {
struct nullopt_t {
  constexpr explicit nullopt_t(int) {}
};
constexpr nullopt_t nullopt{0};
template <class T> class optional {
public:
  optional() = default;
  optional(nullopt_t) {}
  optional(const T &Value) : value_(Value), has_(true) {}
  bool has_value() const { return has_; }
  explicit operator bool() const { return has_; }
  const T &operator*() const { return value_; }
  T &operator*() { return value_; }
  const T *operator->() const { return &value_; }
  const T &value() const { return value_; }
  T &value() { return value_; }
  T *operator->() { return &value_; }
  void reset() { has_ = false; }
  template <class... Args> T &emplace(Args &&...) {
    has_ = true;
    return value_;
  }

private:
  T value_{};
  bool has_ = false;
};
template <class T> bool operator==(const optional<T> &value, nullopt_t) { return !value.has_value(); }
template <class T> bool operator!=(const optional<T> &value, nullopt_t) { return value.has_value(); }
enum class ScalarType { Long, Int, Float, Double, Half, BFloat16 };
constexpr auto kLong = ScalarType::Long;
constexpr auto kInt64 = ScalarType::Long;
constexpr auto kInt = ScalarType::Int;
constexpr auto kFloat = ScalarType::Float;
constexpr auto kFloat32 = ScalarType::Float;
constexpr auto kDouble = ScalarType::Double;
constexpr auto kHalf = ScalarType::Half;
constexpr auto kBFloat16 = ScalarType::BFloat16;
template <class T> class ArrayRef {
public:
  ArrayRef() = default;
  ArrayRef(const T &single) {}
  ArrayRef(const T *data, size_t length) {}
  ArrayRef(const std::vector<T> &values) {}
  ArrayRef(const std::initializer_list<T> &values) {}
  size_t size() const;
  const T &operator[](size_t index) const;
};
using IntArrayRef = ArrayRef<int64_t>;
enum class DeviceType { CPU, CUDA };
constexpr auto kCPU = DeviceType::CPU;
constexpr auto kCUDA = DeviceType::CUDA;
struct Device {
  Device(DeviceType type, int index = -1) {}
};
struct TensorOptions {
  TensorOptions() = default;
  TensorOptions(Device device) {}
  TensorOptions(DeviceType type) {}
};
}  // namespace c10

namespace at {
using namespace c10;
namespace indexing {
struct TensorIndex;
}  // namespace indexing
class Tensor {
public:
  Tensor() = default;
  void reset();  // the handle holds no tensor after it (non-const: it changes the handle, not the storage)
  bool defined() const;
  int64_t size(int64_t dim) const;
  int64_t dim() const;
  IntArrayRef sizes() const;
  int64_t numel() const;
  ScalarType scalar_type() const;
  Tensor view(IntArrayRef shape) const;
  Tensor reshape(IntArrayRef shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  // A defaulted parameter, as LibTorch declares it: `contiguous()` is written without arguments.
  enum class MemoryFormat { Contiguous, Preserve };
  Tensor contiguous(MemoryFormat memory_format = MemoryFormat::Contiguous) const;
  Tensor to(ScalarType type, bool non_blocking = false) const;
  Tensor to(TensorOptions options = {}, bool non_blocking = false) const;
  Device device() const;
  Tensor slice(int64_t dim = 0, optional<int64_t> start = nullopt, optional<int64_t> end = nullopt,
               int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor index(ArrayRef<at::indexing::TensorIndex> indices) const;
  Tensor index(std::initializer_list<at::indexing::TensorIndex> indices) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const;
  Tensor tanh() const;
  // In-place methods are const, as in LibTorch: a Tensor is a handle to shared storage.
  const Tensor &tanh_() const;
  const Tensor &mul_(double value) const;
  const Tensor &div_(double value) const;
  const Tensor &add_(double value) const;
  const Tensor &zero_() const;
  const Tensor &copy_(const Tensor &source) const;
  // These make the tensor a view of another's storage (ATen: `set_`; the variable's data: `set_data`).
  const Tensor &set_(const Tensor &source) const;
  void set_data(const Tensor &new_data) const;
  Tensor &operator+=(double value);
  Tensor &operator=(double value) &&;
  template <class T> T *data_ptr() const;
  void *data_ptr() const;
  Tensor clone() const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim, optional<ScalarType> dtype = nullopt) const;
  Tensor argmax(int64_t dim) const;
  Tensor mean() const;
  Tensor detach() const;
  double item() const;
  Tensor operator*(double value) const;
  Tensor operator/(double value) const;
  Tensor operator+(const Tensor &other) const;
  Tensor operator*(const Tensor &other) const;
  Tensor operator==(const Tensor &other) const;
  Tensor matmul(const Tensor &other) const;
  Tensor mm(const Tensor &mat2) const;
  Tensor t() const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor pow(double exponent) const;
  Tensor sum() const;
  void backward(const Tensor &gradient = {}, optional<bool> retain_graph = nullopt, bool create_graph = false) const;
};
namespace Reduction {
enum Reduction { None, Mean, Sum, END };
}
// ATen/TensorIndexing.h: x.index({Slice(), Slice(None, -1)}) and x.index({"...", Slice(1, None)}).
namespace indexing {
constexpr c10::nullopt_t None = c10::nullopt;
struct EllipsisIndexType final {
  EllipsisIndexType() {}
};
extern const EllipsisIndexType Ellipsis;
struct Slice final {
public:
  Slice(c10::optional<int64_t> start_index = c10::nullopt, c10::optional<int64_t> stop_index = c10::nullopt,
        c10::optional<int64_t> step_index = c10::nullopt);
  int64_t start() const;
  int64_t stop() const;
  int64_t step() const;
};
struct TensorIndex final {
  TensorIndex(c10::nullopt_t);
  TensorIndex(at::indexing::EllipsisIndexType);
  TensorIndex(const char *str);
  TensorIndex(int64_t integer);
  TensorIndex(int integer);
  template <class T, class = typename std::enable_if<std::is_same<bool, T>::value>::type> TensorIndex(T boolean);
  TensorIndex(Slice slice);
  TensorIndex(Tensor tensor);
};
}  // namespace indexing
Tensor tanh(const Tensor &self);
Tensor log_softmax(const Tensor &self, int64_t dim, optional<ScalarType> dtype = nullopt);
Tensor matmul(const Tensor &self, const Tensor &other);
// Not LibTorch's: an overload with one more parameter, as user code could declare in namespace at.
Tensor matmul(const Tensor &self, const Tensor &other, double scale);
Tensor mm(const Tensor &self, const Tensor &mat2);
Tensor nll_loss(const Tensor &self, const Tensor &target, const optional<Tensor> &weight = {},
                int64_t reduction = Reduction::Mean, int64_t ignore_index = -100);
Tensor linear(const Tensor &input, const Tensor &weight, const optional<Tensor> &bias = {});
Tensor cross_entropy_loss(const Tensor &self, const Tensor &target, const optional<Tensor> &weight = {},
                          int64_t reduction = Reduction::Mean, int64_t ignore_index = -100,
                          double label_smoothing = 0.0);
Tensor zeros(IntArrayRef shape);
Tensor zeros_like(const Tensor &self);
// A draw from a random generator, the one given or the default one (ATen/Functions.h's pair of overloads).
struct Generator {};
Tensor randint(int64_t high, IntArrayRef size);
Tensor randint(int64_t high, IntArrayRef size, optional<Generator> generator);
Tensor from_blob(void *data, IntArrayRef sizes);
// The thread's autograd and autocast mode (c10/core/GradMode.h, ATen/autocast_mode.h).
struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};
struct AutoGradMode {
  explicit AutoGradMode(bool enabled);
  ~AutoGradMode();
};
struct NoGradGuard : AutoGradMode {
  NoGradGuard() : AutoGradMode(false) {}
};
namespace impl {  // ATen/VmapMode.h
struct VmapMode {
  static int64_t current_vmap_level();
  static int64_t increment_nesting();
  static int64_t decrement_nesting();
};
}  // namespace impl
namespace autocast {
bool is_cpu_enabled();
void set_cpu_enabled(bool enabled);
}  // namespace autocast
}  // namespace at
namespace c10 { namespace impl {  // c10/core/impl/LocalDispatchKeySet.h
struct PODLocalDispatchKeySet {};
extern thread_local PODLocalDispatchKeySet raw_local_dispatch_key_set;
void _force_tls_local_dispatch_key_set(PODLocalDispatchKeySet key_set);
PODLocalDispatchKeySet tls_local_dispatch_key_set();
struct ForceDispatchKeyGuard {
  explicit ForceDispatchKeyGuard(PODLocalDispatchKeySet key_set);
  ~ForceDispatchKeyGuard();
};
}}  // namespace c10::impl
namespace c10 {  // c10/core/AutogradState.h: the thread's grad, inference and forward-grad modes
struct AutogradState {
  AutogradState(bool grad_mode, bool inference_mode, bool fw_grad_mode);
  static AutogradState &get_tls_state();
  bool get_grad_mode() const;
};
// ATen/core/List.h: a list with reference semantics, whose methods are const and whose copies share elements.
template <class T> class List {
public:
  List();
  void push_back(const T &value) const;
  T get(size_t position) const;
  void set(size_t position, const T &value) const;
};
}  // namespace c10
namespace at {  // ATen ops that write an argument their name does not say
Tensor batch_norm(const Tensor &input, const Tensor &weight, const Tensor &bias, const Tensor &running_mean,
                  const Tensor &running_var, bool training, double momentum, double eps, bool cudnn_enabled);
Tensor batch_norm_update_stats(const Tensor &input, const Tensor &running_mean, const Tensor &running_var,
                              double momentum);  // returns a tuple in LibTorch
namespace native {  // ATen/native helpers that write their first argument, taken by const reference
void copy_ignoring_overlaps(const Tensor &dst, const Tensor &src);
bool resize_output(const Tensor &output, IntArrayRef shape);
}  // namespace native
// The process's arithmetic (ATen/Context.h).
struct Context {
  bool setFlushDenormal(bool on);
};
Context &globalContext();
}  // namespace at

namespace torch {
using namespace at;
using c10::nullopt;
using c10::optional;

namespace autograd {
using variable_list = std::vector<Tensor>;
variable_list grad(const variable_list &outputs, const variable_list &inputs, const variable_list &grad_outputs = {},
                   optional<bool> retain_graph = nullopt, bool create_graph = false, bool allow_unused = false);
void backward(const variable_list &tensors, const variable_list &grad_tensors = {},
              optional<bool> retain_graph = nullopt, bool create_graph = false);
}  // namespace autograd

namespace enumtype {
struct kNone {};
struct kMean {};
struct kSum {};
}  // namespace enumtype
extern const enumtype::kNone kNone;
extern const enumtype::kMean kMean;
extern const enumtype::kSum kSum;

namespace nn {
class Module {
public:
  virtual ~Module() = default;
  template <class M> M register_module(const char *name, M module) { return module; }
  void to(ScalarType type);
  virtual void train(bool on = true);
  void eval();
  virtual bool is_training() const noexcept;
};

template <class Contained> class ModuleHolder {
public:
  ModuleHolder() : impl_(new Contained()) {}
  ModuleHolder(decltype(nullptr)) {}
  template <class... Args> explicit ModuleHolder(Args &&...args) : impl_(new Contained(args...)) {}
  Contained *operator->() const { return impl_; }
  Contained *operator->() { return impl_; }
  template <class... Args> Tensor operator()(Args &&...args) { return impl_->forward(args...); }

private:
  Contained *impl_ = nullptr;
};

#define TORCH_MODULE(Name)                                                                             \
  class Name : public torch::nn::ModuleHolder<Name##Impl> {                                            \
  public:                                                                                              \
    using torch::nn::ModuleHolder<Name##Impl>::ModuleHolder;                                           \
  }

struct LinearOptions {
  LinearOptions(int64_t in, int64_t out) {}
  LinearOptions &bias(bool value) { return *this; }
};
class LinearImpl : public Module {
public:
  LinearImpl(int64_t in, int64_t out) {}
  explicit LinearImpl(const LinearOptions &options) {}
  Tensor forward(const Tensor &input);
  Tensor weight;
  Tensor bias;
};
TORCH_MODULE(Linear);

class EmbeddingImpl : public Module {
public:
  EmbeddingImpl(int64_t count, int64_t dim) {}
  Tensor forward(const Tensor &indices);
  Tensor weight;
};
TORCH_MODULE(Embedding);

class LayerNormImpl : public Module {
public:
  explicit LayerNormImpl(IntArrayRef shape) {}
  Tensor forward(const Tensor &input);
};
TORCH_MODULE(LayerNorm);

class SequentialImpl : public Module {
public:
  template <class... Modules> explicit SequentialImpl(Modules &&...modules) {}
  Tensor forward(const Tensor &input);
};
TORCH_MODULE(Sequential);

class ReductionOption {
public:
  ReductionOption(enumtype::kNone) {}
  ReductionOption(enumtype::kMean) {}
  ReductionOption(enumtype::kSum) {}
};

struct CrossEntropyLossOptions {
  CrossEntropyLossOptions &weight(const Tensor &value) { return *this; }
  CrossEntropyLossOptions &ignore_index(int64_t value) { return *this; }
  CrossEntropyLossOptions &reduction(const ReductionOption &value) { return *this; }
  CrossEntropyLossOptions &label_smoothing(double value) { return *this; }
};

class CrossEntropyLossImpl : public Module {
public:
  explicit CrossEntropyLossImpl(const CrossEntropyLossOptions &options_ = {}) {}
  Tensor forward(const Tensor &input, const Tensor &target);
  CrossEntropyLossOptions options;
  Tensor weight;
};
TORCH_MODULE(CrossEntropyLoss);

struct NLLLossOptions {
  NLLLossOptions &weight(const Tensor &value) { return *this; }
  NLLLossOptions &ignore_index(int64_t value) { return *this; }
  NLLLossOptions &reduction(const ReductionOption &value) { return *this; }
};
class NLLLossImpl : public Module {
public:
  explicit NLLLossImpl(const NLLLossOptions &options_ = {}) {}
  Tensor forward(const Tensor &input, const Tensor &target);
  NLLLossOptions options;
  Tensor weight;
};
TORCH_MODULE(NLLLoss);

namespace init {
Tensor normal_(Tensor tensor, double mean = 0, double std = 1);
}  // namespace init

namespace functional {
using CrossEntropyFuncOptions = CrossEntropyLossOptions;
Tensor cross_entropy(const Tensor &input, const Tensor &target, const CrossEntropyFuncOptions &options = {});
Tensor linear(const Tensor &input, const Tensor &weight, const Tensor &bias = {});
Tensor gelu(const Tensor &input);
struct ReLUFuncOptions {
  ReLUFuncOptions(bool inplace = false) {}
  ReLUFuncOptions &inplace(bool value) { return *this; }
};
Tensor relu(Tensor input, const ReLUFuncOptions &options = {});
struct EmbeddingFuncOptions {
  EmbeddingFuncOptions &max_norm(optional<double> value) { return *this; }
};
Tensor embedding(const Tensor &input, const Tensor &weight, const EmbeddingFuncOptions &options = {});
struct NormalizeFuncOptions {
  NormalizeFuncOptions &dim(int64_t value) { return *this; }
  NormalizeFuncOptions &out(const optional<Tensor> &value) { return *this; }
};
Tensor normalize(const Tensor &input, NormalizeFuncOptions options = {});
using NLLLossFuncOptions = NLLLossOptions;
Tensor nll_loss(const Tensor &input, const Tensor &target, const NLLLossFuncOptions &options = {});
struct LogSoftmaxFuncOptions {
  LogSoftmaxFuncOptions(int64_t dim) {}
  LogSoftmaxFuncOptions &dtype(optional<ScalarType> value) { return *this; }
};
Tensor log_softmax(const Tensor &input, const LogSoftmaxFuncOptions &options);
}  // namespace functional
}  // namespace nn
}  // namespace torch
