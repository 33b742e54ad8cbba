// The operator torch.ops.lmfuse.linear_cross_entropy: the same function, callable from Python after
// torch.ops.load_library("liblmfuse_torch.so") and from TorchScript.
// Registered as a CompositeImplicitAutograd kernel: it runs above autograd on every backend, and the
// autograd function it calls (adapter.cpp) records its own backward node, so CPU, CUDA, no-grad and
// inference mode all take the one code path the C++ API takes. memory: "auto" (the default), "accumulate"
// or "low" (MemoryMode::LowMemory: on CUDA the lean plan, whose scratch space is grad_weight itself).
#include <lmfuse/torch.h>

#include <torch/library.h>

namespace lmfuse {
namespace {

Reduction reductionFromName(c10::string_view name) {
  if (name == "mean") return Reduction::Mean;
  if (name == "sum") return Reduction::Sum;
  if (name == "none") return Reduction::None;
  TORCH_CHECK(false, "lmfuse::linear_cross_entropy: reduction must be \"mean\", \"sum\" or \"none\", got \"",
              std::string(name.data(), name.size()), "\"");
  return Reduction::Mean;
}

MemoryMode memoryFromName(c10::string_view name) {
  if (name == "auto") return MemoryMode::Auto;
  if (name == "accumulate") return MemoryMode::Accumulate;
  if (name == "low") return MemoryMode::LowMemory;
  TORCH_CHECK(false, "lmfuse::linear_cross_entropy: memory must be \"auto\", \"accumulate\" or \"low\", got \"",
              std::string(name.data(), name.size()), "\"");
  return MemoryMode::Auto;
}

torch::Tensor linearCrossEntropyOp(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const c10::optional<torch::Tensor>& bias, const torch::Tensor& labels,
                                   int64_t ignore_index, double label_smoothing, c10::string_view reduction,
                                   bool shift, double softcap, double logit_scale, double z_loss,
                                   const c10::optional<torch::Tensor>& n_items,
                                   c10::optional<c10::ScalarType> dtype, c10::string_view memory) {
  LossOptions options = LossOptions()
                            .ignore_index(ignore_index)
                            .label_smoothing(label_smoothing)
                            .reduction(reductionFromName(reduction))
                            .shift(shift)
                            .softcap(softcap)
                            .logit_scale(logit_scale)
                            .z_loss(z_loss)
                            .memory(memoryFromName(memory));
  if (n_items.has_value()) options.n_items(*n_items);
  options.dtype(dtype);
  return linear_cross_entropy(hidden, weight, bias.value_or(torch::Tensor()), labels, options);
}

}  // namespace
}  // namespace lmfuse

TORCH_LIBRARY(lmfuse, m) {
  m.def(
      "linear_cross_entropy(Tensor hidden, Tensor weight, Tensor? bias, Tensor labels, int ignore_index=-100, "
      "float label_smoothing=0.0, str reduction=\"mean\", bool shift=False, float softcap=0.0, "
      "float logit_scale=1.0, float z_loss=0.0, Tensor? n_items=None, ScalarType? dtype=None, "
      "str memory=\"auto\") -> Tensor");
}

TORCH_LIBRARY_IMPL(lmfuse, CompositeImplicitAutograd, m) {
  m.impl("linear_cross_entropy", TORCH_FN(lmfuse::linearCrossEntropyOp));
}
