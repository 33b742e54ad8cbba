// The key a recorded CUDA graph of a call is found by: every argument it depends on (sizes, options, every
// pointer) and the device's least tile-product fill, which picks the kernels of each product.
// Contract: two calls get the same key exactly when their arguments' fields are equal, whatever bytes the
// structs' padding holds. The padding of a struct built field by field (as every caller builds them) is
// indeterminate, so a key copied from whole structs could differ between equal calls, and every call would
// record its graph again. The key is the fields' bytes, one field after another; a struct that gains a field
// fails the size checks here until the field is keyed too. Host code only, no allocation beyond the key.
#pragma once

#include <lmfuse/flce.h>

#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

namespace lmfuse::detail {

class CallKeyWriter {
public:
  template <class... Fields>
  void add(const Fields&... fields) {
    (append(fields), ...);
  }
  std::vector<unsigned char> take() { return std::move(bytes_); }

private:
  template <class Field>
  void append(const Field& field) {
    static_assert(std::is_scalar<Field>::value, "key scalar fields one by one: a struct's padding is indeterminate");
    const auto* at = reinterpret_cast<const unsigned char*>(&field);
    bytes_.insert(bytes_.end(), at, at + sizeof field);
  }
  std::vector<unsigned char> bytes_;
};

// The structs as keyed below (LP64): a new field changes these sizes.
static_assert(sizeof(Problem) == 88 && sizeof(Shift) == 40 && sizeof(Options) == 152 && sizeof(Outputs) == 72 &&
                  sizeof(Workspace) == 16,
              "a runtime argument struct changed: key its new field in callKey");

inline std::vector<unsigned char> callKey(const Problem& p, const Options& o, const Outputs& out,
                                          const Workspace& w, double tileMinimumFill, double tileWeightMinimumFill) {
  CallKeyWriter key;
  key.add(p.tokens, p.hidden_dim, p.vocab, p.dtype, p.hidden, p.hidden_stride, p.weight, p.weight_stride, p.bias,
          p.labels, p.label_type);
  key.add(o.ignore_index, o.label_smoothing, o.softcap, o.logit_scale, o.z_loss, o.reduction, o.n_items,
          o.n_items_value, o.grad_scale, o.grad_scale_count, o.workspace_budget, o.memory, o.chunk_tokens, o.compact);
  key.add(o.shift.kind, o.shift.seq_len, o.shift.cu_seqlens, o.shift.cu_seqlens_type, o.shift.segments);
  key.add(out.loss, out.lse, out.grad_hidden, out.grad_hidden_stride, out.grad_weight, out.grad_weight_stride,
          out.grad_weight_accumulate, out.grad_bias, out.param_grads);
  key.add(w.data, w.bytes, tileMinimumFill, tileWeightMinimumFill);
  return key.take();
}

}  // namespace lmfuse::detail
