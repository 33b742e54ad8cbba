// lmfuse::skipped_logits: the logits a rewritten head line returns on the fused path (contract in
// <lmfuse/torch.h>). It answers shape questions and refuses every use of its values, naming the site.
//
// How: a TensorImpl without storage whose dispatch key set holds the PrivateUse3 backend (a key
// reserved for out-of-tree backends; the custom backends we know of take PrivateUse1). A boxed
// fallback registered for that key (and its autograd key) throws for every operator that reaches it;
// it finds the site in the operator's tensor arguments. Composite operators (reshape, to, ...) run
// their decomposition first and reach the fallback through the primitive they call; those that read
// memory without a dispatch of their own (copy_'s TensorIterator) ask for strides first, and the
// strides of this tensor throw the same error (SizesStridesPolicy::CustomStrides), and so does its storage
// (LibTorch 2.x's copy_ asks for it first). sizes, dim, numel,
// dtype, device and options are plain TensorImpl fields, so they answer without any dispatch.
// The same TensorImpl constructor, policy and fallback registration exist in LibTorch 1.13 and 2.x.
// Reshapes on the fused path (skipped_logits_after) run the original's code on a meta tensor made from
// the sizes and the strides this tensor records (logits_stand_in.h) and wrap the result the same way.
// Where the original's logits would record a graph, skipped ones record one too: requires_grad(), is_leaf()
// and grad_fn() answer as the original's (a guard such as `if (logits.requires_grad())` takes the same
// branch), and a backward that reaches their node refuses, naming the site.
#include <lmfuse/torch.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <vector>

#include "autocast_rule.h"
#include "errors.h"
#include "logits_stand_in.h"

namespace lmfuse {
namespace {

constexpr c10::DispatchKey kSkippedKey = c10::DispatchKey::PrivateUse3;

std::string refusal(const std::string& site, const std::string& what) {
  return "lmfuse: the logits of " + site + " were not computed: the fused linear + cross-entropy replaced " +
         "them, and only their shape can be read (" + what + " needs their values). To compute them, run " +
         "with LMFUSE_RETURN_LOGITS=1 (or call lmfuse::set_return_logits(true)), or mark the site with " +
         "// NOLINT(lmfuse) so that lmfuse leaves it alone.";
}

// Where a skipped tensor's values would come from: the meta stand-in of the head's output. A skipped tensor's
// own stand-in shares its storage as long as every reshape since was a view, so a rewritten call that must
// compute the original loss (floating labels, Byte class indices, fp64) can read the values at its offset and
// strides. The reshapes' code is never kept to be run again: it may read locals of a block that has ended.
struct Lineage {
  at::Tensor root;
};

class SkippedLogitsImpl final : public c10::TensorImpl {
public:
  // `standIn` is the meta tensor with what the original's tensor would have: sizes, strides (a slice's are not
  // contiguous; never answered, strides_custom refuses), dtype and, through a chain of views, the storage of the
  // head's stand-in; it is used for the next reshape and to compute the values when they are needed.
  SkippedLogitsImpl(at::Tensor standIn, c10::Device device, std::string site, std::shared_ptr<const Lineage> lineage)
      : c10::TensorImpl(c10::DispatchKeySet(kSkippedKey), standIn.dtype(), device),
        standIn_(std::move(standIn)),
        site_(std::move(site)),
        lineage_(std::move(lineage)) {
    set_sizes_contiguous(standIn_.sizes());
    set_custom_sizes_strides(SizesStridesPolicy::CustomStrides);  // after the sizes: the setter asserts
    set_storage_access_should_throw();  // LibTorch's own error, where storage() below is not virtual
  }
  const std::string& site() const { return site_; }
  const at::Tensor& standIn() const { return standIn_; }
  const std::shared_ptr<const Lineage>& lineage() const { return lineage_; }

  [[noreturn]] void refuse(const char* what) const { TORCH_CHECK(false, refusal(site_, what)); }
  c10::IntArrayRef strides_custom() const override { refuse("reading its strides"); }
  // LibTorch 2.x's copy_ asks for the storage (do the two tensors alias?) before strides or dispatch; this
  // tensor has none. Virtual unless LibTorch was built with C10_DISABLE_TENSORIMPL_EXTENSIBILITY.
  const c10::Storage& storage() const { refuse("reading its storage"); }
  c10::SymIntArrayRef sym_strides_custom() const override { refuse("reading its strides"); }
  // Virtual in 1.13; later releases move contiguity to SymBool variants: no `override`, so the file
  // builds against both (where these are not virtual, the dispatch fallback still refuses the values, and
  // contiguous() answers with the tensor itself, reading none; refusing the SymBool query there too makes
  // LibTorch 2.11's copy_ crash instead of reaching the fallback).
  bool is_contiguous_custom(at::MemoryFormat) const { refuse("is_contiguous"); }
  bool is_strides_like_custom(at::MemoryFormat) const { refuse("reading its strides"); }
  bool is_non_overlapping_and_dense_custom() const { refuse("reading its strides"); }
  const char* tensorimpl_type_name() const override { return "lmfuse::SkippedLogitsImpl"; }
  // detach() and friends copy the TensorImpl: the copy must be skipped logits of the same site too.
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(const c10::VariableVersion& version,
                                                              bool allowMetadataChange) const override {
    return copy(c10::VariableVersion(version), allowMetadataChange);
  }
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(c10::VariableVersion&& version,
                                                              bool allowMetadataChange) const override {
    return copy(std::move(version), allowMetadataChange);
  }

private:
  c10::intrusive_ptr<c10::TensorImpl> copy(c10::VariableVersion&& version, bool allowMetadataChange) const {
    auto impl = c10::make_intrusive<SkippedLogitsImpl>(standIn_, device(), site_, lineage_);
    impl->set_version_counter(std::move(version));
    impl->set_allow_tensor_metadata_change(allowMetadataChange);
    return impl;
  }

  at::Tensor standIn_;
  std::string site_;
  std::shared_ptr<const Lineage> lineage_;
};

// The node of skipped logits' graph, where the head's backward (or a reshape's) would be.
struct SkippedLogitsBackward final : torch::autograd::Node {
  explicit SkippedLogitsBackward(std::string site) : site_(std::move(site)) {}
  torch::autograd::variable_list apply(torch::autograd::variable_list&&) override {
    TORCH_CHECK(false, refusal(site_, "a backward through them"));
    return {};
  }
  std::string name() const override { return "lmfuse::SkippedLogitsBackward"; }
  std::string site_;
};

// Gives skipped logits the graph the original's would have: a node whose inputs are the tensors From holds,
// when grad mode is on and one of them requires grad (as for F::linear's result from hidden, weight and bias,
// or a reshape's from the logits).
torch::Tensor withGraph(torch::Tensor skipped, const std::string& site, const torch::autograd::variable_list& from) {
  if (!torch::autograd::compute_requires_grad(from)) return skipped;
  std::shared_ptr<SkippedLogitsBackward> node(new SkippedLogitsBackward(site), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(from));
  torch::autograd::create_gradient_edge(skipped, std::move(node));
  return skipped;
}

const SkippedLogitsImpl* asSkipped(const torch::Tensor& tensor) {
  return tensor.defined() ? dynamic_cast<const SkippedLogitsImpl*>(tensor.unsafeGetTensorImpl()) : nullptr;
}

const SkippedLogitsImpl* asSkipped(const c10::IValue& value) {
  return value.isTensor() ? asSkipped(value.toTensor()) : nullptr;
}

torch::Tensor makeSkipped(at::Tensor standIn, c10::Device device, std::string site,
                          std::shared_ptr<const Lineage> lineage) {
  return at::detail::make_tensor<SkippedLogitsImpl>(std::move(standIn), device, std::move(site), std::move(lineage));
}

// A new meta tensor with the stand-in's sizes, strides, offset and storage: code run on it cannot change the
// recorded one, and its views keep the storage of the head's stand-in.
at::Tensor aliasOf(const at::Tensor& standIn) {
  return standIn.as_strided(standIn.sizes(), standIn.strides(), standIn.storage_offset());
}

torch::Tensor metaTensor(c10::IntArrayRef sizes, c10::IntArrayRef strides, torch::ScalarType dtype) {
  return at::empty_strided(sizes, strides, at::TensorOptions().dtype(dtype).device(at::kMeta));
}

bool sameStorage(const at::Tensor& a, const at::Tensor& b) {
  return a.storage().unsafeGetStorageImpl() == b.storage().unsafeGetStorageImpl();
}

// The boxed fallback: the first skipped-logits argument of the operator names the site.
void refuseOperator(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t arguments = op.schema().arguments().size();
  std::string site = "a rewritten loss site";
  for (size_t i = stack->size() - std::min(arguments, stack->size()); i < stack->size(); ++i) {
    const c10::IValue& value = (*stack)[i];
    const SkippedLogitsImpl* skipped = asSkipped(value);
    if (!skipped && value.isTensorList()) {
      for (const at::Tensor& tensor : value.toTensorList().vec())
        if ((skipped = dynamic_cast<const SkippedLogitsImpl*>(tensor.unsafeGetTensorImpl()))) break;
    }
    if (skipped) {
      site = skipped->site();
      break;
    }
  }
  TORCH_CHECK(false, refusal(site, op.schema().operator_name().name));
}

}  // namespace

torch::Tensor skipped_logits(const torch::Tensor& hidden, const torch::Tensor& weight, const char* site,
                             int64_t hidden_rank) {
  return skipped_logits(hidden, weight, torch::Tensor(), site, hidden_rank);
}

torch::Tensor skipped_logits(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                             const char* site, int64_t hidden_rank) {
  TORCH_CHECK(hidden.defined() && weight.defined() && hidden.dim() >= 1 && weight.dim() == 2,
              "lmfuse::skipped_logits(", site, "): needs hidden [..., D] and weight [V, D]");
  // The words torch::mm uses, so a caller that matches on them sees the original's error.
  TORCH_CHECK(hidden_rank == 0 || hidden.dim() == hidden_rank, "self must be a matrix (lmfuse::skipped_logits(",
              site, "): the head's product takes a ", hidden_rank, "-D input, not ", hidden.dim(), "-D)");
  // F::linear's own checks of the operands' devices, shapes and dtypes, made where the original makes them
  // (on stand-ins without values, in the dtypes autocast would give them): a head that throws in the
  // original throws here, at the head, not first at the loss, where a `try` around the loss alone would
  // catch it.
  TORCH_CHECK(hidden.device() == weight.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ", hidden.device(),
              " and ", weight.device(), "! (lmfuse::skipped_logits(", site, "): the head's input and weight)");
  TORCH_CHECK(!bias.defined() || bias.device() == weight.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ", bias.device(),
              " and ", weight.device(), "! (lmfuse::skipped_logits(", site, "): the head's bias and weight)");
  const auto valueless = [](const torch::Tensor& tensor) {
    return at::empty(tensor.sizes(), at::TensorOptions().dtype(torch_detail::autocastType(tensor)).device(at::kMeta));
  };
  const torch::Tensor hiddenStandIn = valueless(hidden), weightStandIn = valueless(weight);
  TORCH_CHECK(hiddenStandIn.scalar_type() == weightStandIn.scalar_type(),
              "expected mat1 and mat2 to have the same dtype, but got: ", hiddenStandIn.scalar_type(), " != ",
              weightStandIn.scalar_type(), " (lmfuse::skipped_logits(", site, "): the head's input and weight)");
  const torch::Tensor product = at::linear(hiddenStandIn, weightStandIn);
  // F::linear adds the bias by expanding it to the product's shape (addmm's input, or add_): one of another
  // length throws there, with expand's words.
  if (bias.defined()) valueless(bias).expand(product.sizes());
  const torch::Tensor standIn = torch_detail::logitsStandIn(hidden, weight);
  auto lineage = std::make_shared<Lineage>();
  lineage->root = standIn;
  const std::string where(site ? site : "?");
  return withGraph(makeSkipped(standIn, hidden.device(), where, std::move(lineage)), where, {hidden, weight, bias});
}

torch::Tensor skipped_logits_after(const torch::Tensor& skipped,
                                   const std::function<torch::Tensor(const torch::Tensor&)>& code) {
  const SkippedLogitsImpl* impl = asSkipped(skipped);
  if (!impl) return code(skipped);  // computed logits: the original's reshape on them
  const torch::Tensor result = code(torch_detail::logitsStandIn(skipped));
  TORCH_CHECK(result.defined() && result.is_meta(), "lmfuse::skipped_logits_after(", impl->site(),
              "): the reshape did not give a tensor of the logits' shape");
  return withGraph(makeSkipped(result, skipped.device(), impl->site(), impl->lineage()), impl->site(), {skipped});
}

bool is_skipped_logits(const torch::Tensor& tensor) { return asSkipped(tensor) != nullptr; }

namespace torch_detail {

torch::Tensor logitsStandIn(const torch::Tensor& logits) {
  TORCH_CHECK(logits.defined(), "lmfuse: the logits of a rewritten site are an undefined tensor");
  if (logits.is_meta()) return logits;
  if (const SkippedLogitsImpl* impl = asSkipped(logits)) return aliasOf(impl->standIn());
  return metaTensor(logits.sizes(), logits.strides(), logits.scalar_type());
}

torch::Tensor skippedLogitsValues(const torch::Tensor& skipped, const torch::Tensor& headLogits) {
  const SkippedLogitsImpl* impl = asSkipped(skipped);
  TORCH_CHECK(impl, "lmfuse: skippedLogitsValues needs skipped logits");
  const Lineage& lineage = *impl->lineage();
  TORCH_CHECK(headLogits.sizes() == lineage.root.sizes(), "lmfuse: the logits of ", impl->site(), " are ",
              lineage.root.sizes(), ", but the head computes ", headLogits.sizes());
  const at::Tensor& standIn = impl->standIn();
  // Views all the way (view, reshape of contiguous logits, flatten, slice, ...): the values are the head's
  // logits at the stand-in's offset and strides, whatever code made them (no code is run again).
  LMFUSE_TORCH_CHECK(Check::Unsupported,
                     sameStorage(standIn, lineage.root) && standIn.scalar_type() == headLogits.scalar_type(),
                     "lmfuse::linear_cross_entropy: the loss replaced at ", impl->site(),
                     " is computed as the original computes it (inputs or a loss the fused loss does not take), and its "
                     "logits were copied between the head and the loss (a contiguous() of a slice, a cast), which "
                     "the rewritten call cannot make again; mark the site // NOLINT(lmfuse) to keep the original");
  return headLogits.contiguous().as_strided(standIn.sizes(), standIn.strides(), standIn.storage_offset());
}

torch::Tensor logitsStandIn(const torch::Tensor& hidden, const torch::Tensor& weight) {
  std::vector<int64_t> sizes(hidden.sizes().begin(), hidden.sizes().end() - 1);
  sizes.push_back(weight.size(0));
  return at::empty(sizes, at::TensorOptions().dtype(linearResultType(hidden, weight)).device(at::kMeta));
}

}  // namespace torch_detail

}  // namespace lmfuse

TORCH_LIBRARY_IMPL(_, PrivateUse3, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&lmfuse::refuseOperator>());
}
TORCH_LIBRARY_IMPL(_, AutogradPrivateUse3, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&lmfuse::refuseOperator>());
}
