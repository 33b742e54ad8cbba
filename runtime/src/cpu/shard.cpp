// CPU passes of the vocabulary-parallel loss (vocab_parallel.h): exact, every sum in fp64 in a fixed
// order, so each rank's statistics and gradients do not depend on the thread count. Arguments are
// validated by vocab_parallel.cpp; strides are dense-resolved there. Work is spread over tokens (pass 1,
// grad_hidden) and over the shard's rows (grad_weight, grad_bias); each recomputes the logits it needs
// instead of holding N × V_shard of them.
#include <cmath>
#include <limits>
#include <vector>

#include "../loss_math.h"
#include "../shard.h"
#include "../storage.h"
#include "../targets.h"
#include "parallel.h"

namespace lmfuse::detail {
// fp64 storage, for VocabShard::float64: loads and stores are exact.
template <>
struct StorageTraits<double> {
  static double load(double value) { return value; }
  static double store(double value) { return value; }
};
}  // namespace lmfuse::detail

namespace lmfuse::detail::cpu {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <class T>
class ShardPasses {
  using Traits = StorageTraits<T>;

public:
  ShardPasses(const Problem& problem, const VocabShard& shard, const Options& options, const Context& context)
      : problem_(problem), shard_(shard), options_(options),
        params_(LossParams<double>::from(options, shard.vocab_total)), threads_(resolve_threads(context)),
        hidden_(static_cast<const T*>(problem.hidden)), weight_(static_cast<const T*>(problem.weight)),
        bias_(static_cast<const T*>(problem.bias)) {}

  void statistics(const ShardStatistics& out) const {
    parallel_for(0, problem_.tokens, threads_, problem_.vocab * problem_.hidden_dim, [&](int64_t token) {
      double max = 0.0, sum = 0.0, target = 0.0, logit_sum = 0.0;
      int64_t label = 0;
      if (valid(token, label)) {
        max = -std::numeric_limits<double>::infinity();
        for (int64_t row = 0; row < problem_.vocab; ++row) {  // online max and sum of exponentials
          double z = transform_logit(logit(token, row), params_);
          if (z > max) {
            sum = sum * std::exp(max - z) + 1.0;
            max = z;
          } else {
            sum += std::exp(z - max);
          }
          logit_sum += z;
          if (row + shard_.vocab_begin == label) target = z;
        }
        if (label < 0 || label >= shard_.vocab_total) target = kNaN;
      }
      out.max[token] = max;
      out.sum_exp[token] = sum;
      out.target[token] = target;
      out.logit_sum[token] = logit_sum;
    });
  }

  void loss(const GlobalStatistics& in, const ShardOutputs& out) const {
    const bool none = options_.reduction == Reduction::None;
    int64_t count = 0;
    double total = 0.0;  // Σ loss_i in token order
    for (int64_t token = 0; token < problem_.tokens; ++token) {
      int64_t label = 0;
      double loss = 0.0;
      if (valid(token, label)) {
        ++count;
        loss = row_loss(in.lse[token], in.target[token], in.logit_sum[token], params_);
        total += loss;
      }
      if (none) out.loss[token] = loss;
    }
    double divisor = 1.0;
    bool empty_mean = false;
    if (options_.reduction == Reduction::Mean) {
      divisor = options_.n_items ? double(*options_.n_items)
                                 : options_.n_items_value > 0.0 ? options_.n_items_value : double(count);
      empty_mean = !(divisor > 0.0);  // zero valid rows, or a divisor ≤ 0 or NaN: 0 with zero gradients
      *out.loss = empty_mean ? 0.0 : total / divisor;
    }
    if (options_.reduction == Reduction::Sum) *out.loss = total;
    if (!out.wants_gradients()) return;

    // The factor every dx_ij of token i carries: upstream gradient, and 1/divisor for Mean.
    auto token_scale = [&](int64_t token) {
      if (empty_mean) return 0.0;
      double upstream = options_.grad_scale ? double(options_.grad_scale[none ? token : 0]) : 1.0;
      return options_.reduction == Reduction::Mean ? upstream / divisor : upstream;
    };
    auto dx = [&](int64_t token, int64_t label, int64_t row) {
      int64_t global = row + shard_.vocab_begin;
      if (label < 0 || label >= shard_.vocab_total) return empty_mean ? 0.0 : kNaN;
      double x = logit(token, row);
      double z = transform_logit(x, params_);
      double dz = logit_gradient(z, global == label, in.lse[token], params_);
      return dz * transform_derivative(x, params_) * token_scale(token);
    };

    const int64_t dim = problem_.hidden_dim;
    if (out.grad_hidden) {
      T* grad = static_cast<T*>(out.grad_hidden);
      parallel_for(0, problem_.tokens, threads_, problem_.vocab * dim, [&](int64_t token) {
        std::vector<double> sum(dim, 0.0);
        int64_t label = 0;
        if (valid(token, label)) {
          for (int64_t row = 0; row < problem_.vocab; ++row) {
            double d = dx(token, label, row);
            const T* w = weight_ + row * problem_.weight_stride;
            for (int64_t k = 0; k < dim; ++k) sum[k] += d * Traits::load(w[k]);
          }
        }
        for (int64_t k = 0; k < dim; ++k) grad[token * dim + k] = Traits::store(sum[k]);
      });
    }
    if (out.grad_weight || out.grad_bias) {
      T* grad_weight = static_cast<T*>(out.grad_weight);
      T* grad_bias = static_cast<T*>(out.grad_bias);
      parallel_for(0, problem_.vocab, threads_, problem_.tokens * dim, [&](int64_t row) {
        std::vector<double> sum(dim, 0.0);
        double bias_sum = 0.0;
        for (int64_t token = 0; token < problem_.tokens; ++token) {
          int64_t label = 0;
          if (!valid(token, label)) continue;
          double d = dx(token, label, row);
          bias_sum += d;
          const T* h = hidden_ + token * problem_.hidden_stride;
          for (int64_t k = 0; k < dim; ++k) sum[k] += d * Traits::load(h[k]);
        }
        if (grad_weight)
          for (int64_t k = 0; k < dim; ++k) grad_weight[row * dim + k] = Traits::store(sum[k]);
        if (grad_bias) grad_bias[row] = Traits::store(bias_sum);
      });
    }
  }

private:
  // A token is scored when it has a target under the shift and that target is not ignore_index.
  bool valid(int64_t token, int64_t& label) const {
    int64_t position = target_position(options_.shift, problem_.tokens, token);
    if (position == kNoTarget) return false;
    label = load_index(problem_.labels, problem_.label_type, position);
    return label != options_.ignore_index;
  }

  double logit(int64_t token, int64_t row) const {
    const T* h = hidden_ + token * problem_.hidden_stride;
    const T* w = weight_ + row * problem_.weight_stride;
    double x = 0.0;
    for (int64_t k = 0; k < problem_.hidden_dim; ++k) x += Traits::load(h[k]) * Traits::load(w[k]);
    return bias_ ? x + Traits::load(bias_[row]) : x;
  }

  const Problem& problem_;
  const VocabShard& shard_;
  const Options& options_;
  LossParams<double> params_;
  int threads_;
  const T* hidden_;
  const T* weight_;
  const T* bias_;
};

template <class Body>
void with_storage(const Problem& problem, const VocabShard& shard, const Body& body) {
  if (shard.float64) return body(double{});
  switch (problem.dtype) {
    case DType::Float32: return body(float{});
    case DType::Float16: return body(Half{});
    case DType::BFloat16: return body(BFloat16{});
  }
}

}  // namespace

void shard_statistics(const Problem& problem, const VocabShard& shard, const Options& options,
                      const ShardStatistics& statistics, const Context& context) {
  with_storage(problem, shard, [&](auto tag) {
    ShardPasses<decltype(tag)>(problem, shard, options, context).statistics(statistics);
  });
}

void shard_loss(const Problem& problem, const VocabShard& shard, const Options& options,
                const GlobalStatistics& statistics, const ShardOutputs& outputs, const Context& context) {
  with_storage(problem, shard, [&](auto tag) {
    ShardPasses<decltype(tag)>(problem, shard, options, context).loss(statistics, outputs);
  });
}

}  // namespace lmfuse::detail::cpu
