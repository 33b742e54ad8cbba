// CPU reference of lmfuse::linear_cross_entropy (flce.h): exact, with every sum in fp64 and run in a
// fixed order, so the result depends neither on the chunk size, the memory mode nor the thread count.
// Never holds N × V: tokens go through in chunks of valid tokens (ignored tokens and tokens without a
// target cost nothing) and the logits of one chunk live in the workspace (plan.h). Allocates nothing.
// An out-of-range label is never used as an index: its row's loss and gradient are NaN and the first
// such token is written to the workspace's label report for check().
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "../backend.h"
#include "../error_report.h"
#include "../loss_math.h"
#include "../storage.h"
#include "../targets.h"
#include "parallel.h"
#include "plan.h"
#include "reference.h"

namespace lmfuse::detail::cpu {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kRowBlock = 4;    // token rows sharing one read of a weight row
constexpr int64_t kVocabBlock = 8;  // weight rows sharing one read of a token row

template <class T>
class Reference {
  using Traits = StorageTraits<T>;

public:
  Reference(const Problem& problem, const Options& options, const Outputs& outputs, Workspace workspace,
            const Context& context)
      : problem_(problem), options_(options), outputs_(outputs),
        plan_(make_plan(problem, options, outputs.wants_gradients())),
        params_(LossParams<double>::from(options, problem.vocab)), threads_(resolve_threads(context)),
        hidden_(static_cast<const T*>(problem.hidden)), weight_(static_cast<const T*>(problem.weight)),
        bias_(static_cast<const T*>(problem.bias)) {
    char* base = static_cast<char*>(workspace.data);
    report_ = reinterpret_cast<LabelErrorReport*>(base);
    logits_ = reinterpret_cast<double*>(base + plan_.logits);
    hidden_rows_ = reinterpret_cast<double*>(base + plan_.hidden);
    grad_hidden_rows_ = reinterpret_cast<double*>(base + plan_.grad_hidden);
    row_token_ = reinterpret_cast<int64_t*>(base + plan_.row_token);
    row_label_ = reinterpret_cast<int64_t*>(base + plan_.row_label);
    row_loss_ = reinterpret_cast<double*>(base + plan_.row_loss);
    lse_store_ = reinterpret_cast<double*>(base + plan_.lse_store);
    weight_gradient_ = reinterpret_cast<double*>(base + plan_.weight_gradient);
    bias_gradient_ = reinterpret_cast<double*>(base + plan_.bias_gradient);
    wants_gradients_ = outputs.wants_gradients();
    wants_vocab_gradients_ = outputs.grad_weight || outputs.grad_weight_accumulate || outputs.grad_bias;
    wants_weight_gradient_ = outputs.grad_weight || outputs.grad_weight_accumulate;
  }

  void run() {
    int64_t valid = scan_labels();
    resolve_scale(valid);
    if (plan_.fused && wants_vocab_gradients_) clear_vocab_gradients(problem_.vocab);

    double total = 0.0;  // Σ loss_i in token order
    int64_t cursor = 0;
    while (int64_t rows = gather_chunk(cursor)) {
      load_hidden(rows);
      compute_logits(rows, 0, problem_.vocab);
      row_statistics(rows);
      for (int64_t row = 0; row < rows; ++row) {
        total += row_loss_[row];
        if (options_.reduction == Reduction::None) outputs_.loss[row_token_[row]] = float(row_loss_[row]);
      }
      if (outputs_.grad_hidden) grad_hidden_rows(rows);
      if (plan_.fused && wants_vocab_gradients_) accumulate_vocab_gradients(rows, problem_.vocab);
    }
    if (options_.reduction == Reduction::Sum) *outputs_.loss = float(total);
    if (options_.reduction == Reduction::Mean) *outputs_.loss = float(empty_mean_ ? 0.0 : total / divisor_);

    if (!wants_vocab_gradients_) return;
    if (plan_.fused) {
      write_vocab_gradients(0, problem_.vocab);
      return;
    }
    for (int64_t first = 0; first < problem_.vocab; first += plan_.vocab_slice) {
      int64_t count = std::min(plan_.vocab_slice, problem_.vocab - first);
      slice_pass(first, count);
    }
  }

private:
  // First pass over the labels: counts valid tokens (the Mean divisor), fills the label report, and
  // writes the outputs of tokens without a valid target (zero loss, lse and grad_hidden).
  int64_t scan_labels() {
    *report_ = LabelErrorReport{kNoLabelError, 0, 0, problem_.vocab, options_.ignore_index};
    int64_t valid = 0;
    for (int64_t token = 0; token < problem_.tokens; ++token) {
      int64_t position = target_position(options_.shift, problem_.tokens, token);
      int64_t label = position == kNoTarget ? options_.ignore_index
                                            : load_index(problem_.labels, problem_.label_type, position);
      if (label != options_.ignore_index) {
        ++valid;
        if (!in_vocab(label) && report_->token == kNoLabelError) {
          report_->token = token;
          report_->label = label;
          report_->label_position = position;
        }
        continue;
      }
      if (options_.reduction == Reduction::None) outputs_.loss[token] = 0.0f;
      if (outputs_.lse) outputs_.lse[token] = 0.0f;
      if (outputs_.grad_hidden) {
        T* row = static_cast<T*>(outputs_.grad_hidden) + token * outputs_.grad_hidden_stride;
        for (int64_t d = 0; d < problem_.hidden_dim; ++d) row[d] = Traits::store(0.0);
      }
    }
    return valid;
  }

  void resolve_scale(int64_t valid) {
    divisor_ = 1.0;
    if (options_.reduction == Reduction::Mean) {
      if (options_.n_items) divisor_ = double(*options_.n_items);
      else if (options_.n_items_value > 0.0) divisor_ = options_.n_items_value;
      else divisor_ = double(valid);
      empty_mean_ = !(divisor_ > 0.0);  // also a NaN divisor read through n_items
    }
    scalar_upstream_ = options_.reduction != Reduction::None && options_.grad_scale ? double(*options_.grad_scale) : 1.0;
  }

  bool in_vocab(int64_t label) const { return label >= 0 && label < problem_.vocab; }

  // Upstream gradient of one token's loss, divided by the Mean's divisor.
  double coefficient(int64_t token) const {
    double upstream = scalar_upstream_;
    if (options_.reduction == Reduction::None && options_.grad_scale) upstream = double(options_.grad_scale[token]);
    return upstream / divisor_;
  }

  // dL/dx of one logit given its z; the same expression in both schedules keeps them bitwise equal.
  double logit_dx(double z, bool is_target, double lse, double coefficient, bool label_in_vocab) const {
    if (empty_mean_) return 0.0;
    if (!label_in_vocab) return kNaN;
    return coefficient * logit_gradient(z, is_target, lse, params_) * transform_derivative_at(z, params_);
  }

  // The next chunk of up to chunk_tokens valid tokens, in token order, from `cursor` on.
  int64_t gather_chunk(int64_t& cursor) {
    int64_t rows = 0;
    while (cursor < problem_.tokens && rows < plan_.chunk_tokens) {
      int64_t token = cursor++;
      int64_t position = target_position(options_.shift, problem_.tokens, token);
      if (position == kNoTarget) continue;
      int64_t label = load_index(problem_.labels, problem_.label_type, position);
      if (label == options_.ignore_index) continue;
      row_token_[rows] = token;
      row_label_[rows] = label;
      ++rows;
    }
    return rows;
  }

  void load_hidden(int64_t rows) {
    const int64_t dim = problem_.hidden_dim;
    parallel_for(0, rows, threads_, dim, [&](int64_t row) {
      const T* source = hidden_ + row_token_[row] * problem_.hidden_stride;
      double* target = hidden_rows_ + row * dim;
      for (int64_t d = 0; d < dim; ++d) target[d] = Traits::load(source[d]);
    });
  }

  // x[row, j] = h_row · W_(first + j) + b_(first + j) for j < count, rows of `count` logits. A tile of
  // kRowBlock rows × kVocabBlock vocabulary rows keeps 32 independent sums in flight, each still added
  // in d order (so every x is the same plain sequential dot product, whatever the tiling).
  void compute_logits(int64_t rows, int64_t first, int64_t count) {
    const int64_t dim = problem_.hidden_dim;
    const int64_t vocab_blocks = (count + kVocabBlock - 1) / kVocabBlock;
    parallel_for(0, vocab_blocks, threads_, rows * dim * kVocabBlock, [&](int64_t vocab_block) {
      const int64_t j0 = vocab_block * kVocabBlock, vocab_rows = std::min(kVocabBlock, count - j0);
      const T* w[kVocabBlock];
      for (int64_t jj = 0; jj < kVocabBlock; ++jj)
        w[jj] = weight_ + (first + j0 + std::min(jj, vocab_rows - 1)) * problem_.weight_stride;
      for (int64_t row0 = 0; row0 < rows; row0 += kRowBlock) {
        const int64_t block = std::min(kRowBlock, rows - row0);
        const double* h[kRowBlock];
        for (int64_t k = 0; k < kRowBlock; ++k) h[k] = hidden_rows_ + (row0 + std::min(k, block - 1)) * dim;
        double dot[kRowBlock][kVocabBlock] = {};
        for (int64_t d = 0; d < dim; ++d) {
          double wd[kVocabBlock];
          for (int64_t jj = 0; jj < kVocabBlock; ++jj) wd[jj] = Traits::load(w[jj][d]);
          for (int64_t k = 0; k < kRowBlock; ++k)
            for (int64_t jj = 0; jj < kVocabBlock; ++jj) dot[k][jj] += h[k][d] * wd[jj];
        }
        for (int64_t jj = 0; jj < vocab_rows; ++jj) {
          double b = bias_ ? Traits::load(bias_[first + j0 + jj]) : 0.0;
          for (int64_t k = 0; k < block; ++k) logits_[(row0 + k) * count + j0 + jj] = dot[k][jj] + b;
        }
      }
    });
  }

  // Per row: z in place of x, lse, loss, the lse output, then dx in place of z when gradients are asked.
  void row_statistics(int64_t rows) {
    const int64_t vocab = problem_.vocab;
    parallel_for(0, rows, threads_, 8 * vocab, [&](int64_t row) {
      double* logits = logits_ + row * vocab;
      int64_t token = row_token_[row], label = row_label_[row];
      bool label_in_vocab = in_vocab(label);
      double maximum = -std::numeric_limits<double>::infinity(), logit_sum = 0.0;
      for (int64_t j = 0; j < vocab; ++j) {
        double z = transform_logit(logits[j], params_);
        logits[j] = z;
        if (z > maximum) maximum = z;
        logit_sum += z;
      }
      double exp_sum = 0.0;
      for (int64_t j = 0; j < vocab; ++j) exp_sum += std::exp(logits[j] - maximum);
      double lse = maximum + std::log(exp_sum);
      row_loss_[row] = label_in_vocab ? row_loss(lse, logits[label], logit_sum, params_) : kNaN;
      if (outputs_.lse) outputs_.lse[token] = float(lse);
      if (!plan_.fused && wants_vocab_gradients_) lse_store_[token] = lse;
      if (!wants_gradients_) return;
      double scale = coefficient(token);
      for (int64_t j = 0; j < vocab; ++j) logits[j] = logit_dx(logits[j], j == label, lse, scale, label_in_vocab);
    });
  }

  // grad_hidden[token] = Σ_j dx[row, j] · W_j, summed in j order, stored in the output dtype.
  void grad_hidden_rows(int64_t rows) {
    const int64_t dim = problem_.hidden_dim, vocab = problem_.vocab;
    int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
    parallel_for(0, blocks, threads_, kRowBlock * vocab * dim, [&](int64_t block_index) {
      int64_t row0 = block_index * kRowBlock, block = std::min(kRowBlock, rows - row0);
      double* sums = grad_hidden_rows_ + row0 * dim;
      std::memset(sums, 0, sizeof(double) * std::size_t(block * dim));
      // Four weight rows per sweep over a sum row, added one after the other (still in j order).
      int64_t j = 0;
      for (; j + 4 <= vocab; j += 4) {
        const T* w0 = weight_ + j * problem_.weight_stride;
        const T *w1 = w0 + problem_.weight_stride, *w2 = w1 + problem_.weight_stride, *w3 = w2 + problem_.weight_stride;
        for (int64_t k = 0; k < block; ++k) {
          const double* dx = logits_ + (row0 + k) * vocab + j;
          double* sum = sums + k * dim;
          for (int64_t d = 0; d < dim; ++d) {
            double value = sum[d];
            value += dx[0] * Traits::load(w0[d]);
            value += dx[1] * Traits::load(w1[d]);
            value += dx[2] * Traits::load(w2[d]);
            value += dx[3] * Traits::load(w3[d]);
            sum[d] = value;
          }
        }
      }
      for (; j < vocab; ++j) {
        const T* w = weight_ + j * problem_.weight_stride;
        for (int64_t k = 0; k < block; ++k) {
          const double dx = logits_[(row0 + k) * vocab + j];
          double* sum = sums + k * dim;
          for (int64_t d = 0; d < dim; ++d) sum[d] += dx * Traits::load(w[d]);
        }
      }
      for (int64_t k = 0; k < block; ++k) {
        T* out = static_cast<T*>(outputs_.grad_hidden) + row_token_[row0 + k] * outputs_.grad_hidden_stride;
        for (int64_t d = 0; d < dim; ++d) out[d] = Traits::store(sums[k * dim + d]);
      }
    });
  }

  void clear_vocab_gradients(int64_t count) {
    if (wants_weight_gradient_)
      std::memset(weight_gradient_, 0, sizeof(double) * std::size_t(count * problem_.hidden_dim));
    std::memset(bias_gradient_, 0, sizeof(double) * std::size_t(count));
  }

  // Accumulator row j += Σ_row dx[row, j] · h_row (rows in token order); dx rows hold `count` logits.
  void accumulate_vocab_gradients(int64_t rows, int64_t count) {
    const int64_t dim = problem_.hidden_dim;
    parallel_for(0, count, threads_, rows * (dim + 1), [&](int64_t j) {
      double* weight_sum = weight_gradient_ + j * dim;
      for (int64_t row = 0; row < rows; ++row) bias_gradient_[j] += logits_[row * count + j];
      if (!wants_weight_gradient_) return;
      // Four token rows per sweep over the accumulator row, added one after the other (token order).
      int64_t row = 0;
      for (; row + 4 <= rows; row += 4) {
        const double dx0 = logits_[row * count + j], dx1 = logits_[(row + 1) * count + j],
                     dx2 = logits_[(row + 2) * count + j], dx3 = logits_[(row + 3) * count + j];
        const double* h0 = hidden_rows_ + row * dim;
        const double *h1 = h0 + dim, *h2 = h1 + dim, *h3 = h2 + dim;
        for (int64_t d = 0; d < dim; ++d) {
          double value = weight_sum[d];
          value += dx0 * h0[d];
          value += dx1 * h1[d];
          value += dx2 * h2[d];
          value += dx3 * h3[d];
          weight_sum[d] = value;
        }
      }
      for (; row < rows; ++row) {
        const double dx = logits_[row * count + j];
        const double* h = hidden_rows_ + row * dim;
        for (int64_t d = 0; d < dim; ++d) weight_sum[d] += dx * h[d];
      }
    });
  }

  // Sliced schedule: the weight and bias gradient of vocabulary rows [first, first + count), from a
  // second pass over the tokens that recomputes only this slice's logits.
  void slice_pass(int64_t first, int64_t count) {
    clear_vocab_gradients(count);
    int64_t cursor = 0;
    while (int64_t rows = gather_chunk(cursor)) {
      load_hidden(rows);
      compute_logits(rows, first, count);
      parallel_for(0, rows, threads_, 8 * count, [&](int64_t row) {
        double* logits = logits_ + row * count;
        int64_t token = row_token_[row], label = row_label_[row];
        bool label_in_vocab = in_vocab(label);
        double lse = lse_store_[token], scale = coefficient(token);
        for (int64_t j = 0; j < count; ++j) {
          double z = transform_logit(logits[j], params_);
          logits[j] = logit_dx(z, first + j == label, lse, scale, label_in_vocab);
        }
      });
      accumulate_vocab_gradients(rows, count);
    }
    write_vocab_gradients(first, count);
  }

  void write_vocab_gradients(int64_t first, int64_t count) {
    const int64_t dim = problem_.hidden_dim;
    parallel_for(0, count, threads_, dim, [&](int64_t j) {
      const double* sums = weight_gradient_ + j * dim;
      if (outputs_.grad_weight)
        store_param(outputs_.grad_weight, (first + j) * outputs_.grad_weight_stride, sums, dim);
      if (outputs_.grad_weight_accumulate) {
        float* out = outputs_.grad_weight_accumulate + (first + j) * dim;
        for (int64_t d = 0; d < dim; ++d) out[d] = float(double(out[d]) + sums[d]);
      }
      if (outputs_.grad_bias) store_param(outputs_.grad_bias, first + j, bias_gradient_ + j, 1);
    });
  }

  // count values rounded once from fp64 into grad_weight / grad_bias storage (Outputs::param_grads).
  void store_param(void* base, int64_t offset, const double* values, int64_t count) const {
    if (param_grad_dtype(problem_.dtype, outputs_.param_grads) == DType::Float32 && !std::is_same<T, float>::value)
      store_values<float>(base, offset, values, count);
    else
      store_values<T>(base, offset, values, count);
  }

  template <class U>
  static void store_values(void* base, int64_t offset, const double* values, int64_t count) {
    U* out = static_cast<U*>(base) + offset;
    for (int64_t i = 0; i < count; ++i) out[i] = StorageTraits<U>::store(values[i]);
  }

  const Problem& problem_;
  const Options& options_;
  const Outputs& outputs_;
  const Plan plan_;
  const LossParams<double> params_;
  const int threads_;
  const T* hidden_;
  const T* weight_;
  const T* bias_;

  LabelErrorReport* report_ = nullptr;
  double* logits_ = nullptr;
  double* hidden_rows_ = nullptr;
  double* grad_hidden_rows_ = nullptr;
  int64_t* row_token_ = nullptr;
  int64_t* row_label_ = nullptr;
  double* row_loss_ = nullptr;
  double* lse_store_ = nullptr;
  double* weight_gradient_ = nullptr;
  double* bias_gradient_ = nullptr;

  bool wants_gradients_ = false;
  bool wants_vocab_gradients_ = false;
  bool wants_weight_gradient_ = false;
  double divisor_ = 1.0;
  bool empty_mean_ = false;
  double scalar_upstream_ = 1.0;
};

}  // namespace

void run_reference(const Problem& problem, const Options& options, const Outputs& outputs,
                   Workspace workspace, const Context& context) {
  switch (problem.dtype) {
    case DType::Float32: Reference<float>(problem, options, outputs, workspace, context).run(); break;
    case DType::Float16: Reference<Half>(problem, options, outputs, workspace, context).run(); break;
    case DType::BFloat16: Reference<BFloat16>(problem, options, outputs, workspace, context).run(); break;
  }
}

}  // namespace lmfuse::detail::cpu
