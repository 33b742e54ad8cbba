// The CPU backend's entry points (backend.h): workspace size from the plan, the reference computation,
// scale_grads and check. Arguments arrive validated by api.cpp.
#include "../backend.h"

#include <cstring>

#include "../error_report.h"
#include "../storage.h"
#include "parallel.h"
#include "plan.h"
#include "reference.h"

namespace lmfuse::detail::cpu {
namespace {

// rows × dim elements of a strided gradient, each multiplied by `factor` in fp64 and rounded once.
template <class T>
void scale_rows(void* data, int64_t rows, int64_t dim, int64_t stride, double factor, int threads) {
  if (!data) return;
  parallel_for(0, rows, threads, dim, [&](int64_t row) {
    T* values = static_cast<T*>(data) + row * stride;
    for (int64_t d = 0; d < dim; ++d)
      values[d] = StorageTraits<T>::store(StorageTraits<T>::load(values[d]) * factor);
  });
}

void scale_rows(DType dtype, void* data, int64_t rows, int64_t dim, int64_t stride, double factor, int threads) {
  switch (dtype) {
    case DType::Float32: scale_rows<float>(data, rows, dim, stride, factor, threads); break;
    case DType::Float16: scale_rows<Half>(data, rows, dim, stride, factor, threads); break;
    case DType::BFloat16: scale_rows<BFloat16>(data, rows, dim, stride, factor, threads); break;
  }
}

}  // namespace

std::size_t workspace_size(const Problem& problem, const Options& options, bool with_gradients) {
  return make_plan(problem, options, with_gradients).total;
}

void linear_cross_entropy(const Problem& problem, const Options& options, const Outputs& outputs,
                          Workspace workspace, const Context& context) {
  run_reference(problem, options, outputs, workspace, context);
}

void scale_grads(const Problem& problem, const Outputs& outputs, const float* upstream, const Context& context) {
  double factor = double(*upstream);
  if (factor == 1.0) return;  // x·1 = x exactly
  int threads = resolve_threads(context);
  const DType params = param_grad_dtype(problem.dtype, outputs.param_grads);
  scale_rows(problem.dtype, outputs.grad_hidden, problem.tokens, problem.hidden_dim, outputs.grad_hidden_stride,
             factor, threads);
  scale_rows(params, outputs.grad_weight, problem.vocab, problem.hidden_dim, outputs.grad_weight_stride, factor,
             threads);
  scale_rows(params, outputs.grad_bias, 1, problem.vocab, problem.vocab, factor, threads);
}

void check(Workspace workspace, const Context&) {
  LabelErrorReport report;
  std::memcpy(&report, workspace.data, sizeof report);
  throw_if_reported("lmfuse::check", report);
}

}  // namespace lmfuse::detail::cpu
