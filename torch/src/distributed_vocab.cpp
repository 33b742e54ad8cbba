// lmfuse::vocab_parallel_linear_cross_entropy (contract in <lmfuse/distributed.h>): the runtime's two
// vocabulary-parallel passes (vocab_parallel.h) around c10d all-reduces, as an autograd function. The
// forward pass computes the statistics and the loss; the backward pass computes the gradients with the
// upstream gradient applied by the runtime, then all-reduces grad_hidden.
#include <lmfuse/distributed.h>
#include <lmfuse/vocab_parallel.h>

#include <ATen/Parallel.h>
#include <algorithm>
#include <cstdint>
#include <c10/core/DeviceGuard.h>
#include <torch/autograd.h>

#include "distributed_check.h"
#include "distributed_mean.h"

#ifdef LMFUSE_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>  // defines: getCurrentCUDAStream (the stream the passes run on)
#endif

namespace lmfuse {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Group = c10::intrusive_ptr<c10d::ProcessGroup>;

constexpr const char* kWho = "lmfuse::vocab_parallel_linear_cross_entropy: ";

/// The operands as the runtime takes them; the tensors keep the memory the Problem points to alive.
struct ShardOperands {
  torch::Tensor hidden, weight, bias, labels, n_items;
  std::vector<int64_t> leading_shape;
  Problem problem;
  VocabShard shard;
  Options options;
  Context context;
};

void checkLocal(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                const torch::Tensor& labels) {
  TORCH_CHECK(hidden.defined() && weight.defined() && labels.defined(), kWho,
              "hidden, weight_shard and labels must be defined tensors");
  TORCH_CHECK(hidden.dim() >= 1, kWho, "hidden must have a last (hidden) dimension, got a scalar");
  TORCH_CHECK(weight.dim() == 2 && weight.size(1) == hidden.size(-1) && weight.size(0) > 0, kWho,
              "weight_shard must be [V_rank, ", hidden.size(-1), "] with V_rank > 0, got ", weight.sizes());
  const auto dtype = hidden.scalar_type();
  TORCH_CHECK(dtype == torch::kFloat || dtype == torch::kHalf || dtype == torch::kBFloat16 ||
                  (dtype == torch::kDouble && hidden.device().is_cpu()),
              kWho, "hidden has dtype ", dtype, "; supported are Float, Half, BFloat16, and Double on the CPU");
  TORCH_CHECK(weight.scalar_type() == dtype && (!bias.defined() || bias.scalar_type() == dtype), kWho,
              "weight_shard and bias_shard must have hidden's dtype ", dtype);
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), kWho,
              "bias_shard must be [", weight.size(0), "], got ", bias.sizes());
  for (const torch::Tensor* tensor : {&weight, &bias, &labels})
    TORCH_CHECK(!tensor->defined() || tensor->device() == hidden.device(), kWho,
                "every operand must be on hidden's device ", hidden.device());
  TORCH_CHECK(labels.scalar_type() == torch::kLong || labels.scalar_type() == torch::kInt, kWho,
              "labels has dtype ", labels.scalar_type(), "; supported are Long and Int");
  TORCH_CHECK(labels.numel() * hidden.size(-1) == hidden.numel(), kWho, "labels has ", labels.numel(),
              " elements but hidden ", hidden.sizes(), " has ", hidden.numel() / std::max<int64_t>(hidden.size(-1), 1),
              " tokens");
}

/// Contiguous, its first element 16-byte aligned (the CUDA passes' cuBLASLt operands): copied only when not.
torch::Tensor alignedContiguous(const torch::Tensor& tensor) {
  torch::Tensor dense = tensor.contiguous();
  return reinterpret_cast<std::uintptr_t>(dense.data_ptr()) % 16 == 0 ? dense : dense.clone();
}

ShardOperands prepare(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                      const torch::Tensor& labels, const LossOptions& options, int64_t begin, int64_t total,
                      const torch::Tensor& n_items) {
  ShardOperands operands;
  const int64_t dim = hidden.size(-1);
  operands.leading_shape.assign(hidden.sizes().begin(), hidden.sizes().end() - 1);
  operands.hidden = alignedContiguous(hidden.reshape({-1, dim}));
  operands.weight = alignedContiguous(weight);
  operands.bias = bias.defined() ? bias.contiguous() : torch::Tensor();
  operands.labels = labels.reshape({-1}).contiguous();

  Problem& problem = operands.problem;
  problem.tokens = operands.hidden.size(0);
  problem.hidden_dim = dim;
  problem.vocab = weight.size(0);
  const auto dtype = hidden.scalar_type();
  problem.dtype = dtype == torch::kHalf ? DType::Float16 : dtype == torch::kBFloat16 ? DType::BFloat16 : DType::Float32;
  problem.hidden = operands.hidden.data_ptr();
  problem.weight = operands.weight.data_ptr();
  problem.bias = operands.bias.defined() ? operands.bias.data_ptr() : nullptr;
  problem.labels = operands.labels.data_ptr();
  problem.label_type = labels.scalar_type() == torch::kLong ? IndexType::Int64 : IndexType::Int32;
  operands.shard = VocabShard{begin, total, dtype == torch::kDouble};

  Options& runtime = operands.options;
  runtime.ignore_index = options.ignore_index();
  runtime.label_smoothing = options.label_smoothing();
  runtime.softcap = options.softcap();
  runtime.logit_scale = options.logit_scale();
  runtime.z_loss = options.z_loss();
  runtime.reduction = options.reduction();
  if (n_items.defined()) {
    operands.n_items = n_items.reshape({1}).to(torch::kFloat).contiguous();
    runtime.n_items = operands.n_items.data_ptr<float>();
  }
  if (options.shift()) {
    runtime.shift.kind = ShiftKind::Rows;
    runtime.shift.seq_len = labels.dim() >= 1 ? labels.size(-1) : 1;
  }
  if (hidden.device().is_cpu()) {
    operands.context.device = DeviceKind::Cpu;
    operands.context.threads = at::get_num_threads();
  } else {
#ifdef LMFUSE_TORCH_CUDA
    operands.context.device = DeviceKind::Cuda;
    operands.context.stream = c10::cuda::getCurrentCUDAStream(hidden.device().index()).stream();
#else
    TORCH_CHECK(false, kWho, "hidden is on ", hidden.device(), ", but lmfuse_torch was built for the CPU only");
#endif
  }
  return operands;
}

/// The runtime's workspace for a pass, from LibTorch's allocator on the operands' device (none on the CPU).
struct PassWorkspace {
  torch::Tensor bytes;
  Workspace workspace;
};

PassWorkspace passWorkspace(const ShardOperands& operands, bool withGradients) {
  PassWorkspace pass;
  const std::size_t size = vocab_parallel_workspace_size(operands.problem, operands.shard, operands.options,
                                                         withGradients, operands.context);
  if (size == 0) return pass;
  pass.bytes = torch::empty({static_cast<int64_t>(size)}, operands.hidden.options().dtype(torch::kByte));
  pass.workspace = Workspace{pass.bytes.data_ptr(), size};
  return pass;
}

template <typename Call>
void callRuntime(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    TORCH_CHECK(false, kWho, error.what());
  }
}

void allReduce(const Group& group, torch::Tensor& tensor, c10d::ReduceOp op) {
  std::vector<torch::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  group->allreduce(tensors, options)->wait();  // NCCL: a stream dependency, no host synchronisation
}

/// Pass 1, the two all-reduces and the combination: [3, N] fp64 rows lse, target logit, logit sum.
torch::Tensor globalStatistics(const ShardOperands& operands, const Group& group) {
  const int64_t tokens = operands.problem.tokens;
  torch::Tensor local = torch::empty({4, tokens}, operands.hidden.options().dtype(torch::kDouble));
  ShardStatistics out{local[0].data_ptr<double>(), local[1].data_ptr<double>(), local[2].data_ptr<double>(),
                      local[3].data_ptr<double>()};
  callRuntime([&] {
    const PassWorkspace pass = passWorkspace(operands, false);
    vocab_parallel_statistics(operands.problem, operands.shard, operands.options, out, pass.workspace, operands.context);
  });
  torch::Tensor max = local[0].clone();
  allReduce(group, max, c10d::ReduceOp::MAX);
  // Each rank's sum of exponentials moved to the global max, then one sum of the three per-token rows.
  torch::Tensor sums = torch::stack({local[1] * torch::exp(local[0] - max), local[2], local[3]});
  allReduce(group, sums, c10d::ReduceOp::SUM);
  return torch::stack({max + torch::log(sums[0]), sums[1], sums[2]});
}

void saveOptions(AutogradContext* ctx, const LossOptions& options, const Group& group, int64_t begin, int64_t total) {
  auto& saved = ctx->saved_data;
  saved["ignore_index"] = options.ignore_index();
  saved["label_smoothing"] = options.label_smoothing();
  saved["reduction"] = static_cast<int64_t>(options.reduction());
  saved["shift"] = options.shift();
  saved["softcap"] = options.softcap();
  saved["logit_scale"] = options.logit_scale();
  saved["z_loss"] = options.z_loss();
  saved["vocab_begin"] = begin;
  saved["vocab_total"] = total;
  saved["group"] = c10::IValue::make_capsule(group);
}

LossOptions loadOptions(AutogradContext* ctx) {
  auto& saved = ctx->saved_data;
  return LossOptions()
      .ignore_index(saved["ignore_index"].toInt())
      .label_smoothing(saved["label_smoothing"].toDouble())
      .reduction(static_cast<Reduction>(saved["reduction"].toInt()))
      .shift(saved["shift"].toBool())
      .softcap(saved["softcap"].toDouble())
      .logit_scale(saved["logit_scale"].toDouble())
      .z_loss(saved["z_loss"].toDouble());
}

class VocabParallelCrossEntropy : public torch::autograd::Function<VocabParallelCrossEntropy> {
public:
  // bias and n_items arrive as empty placeholders when absent (LibTorch 1.13's apply takes no undefined tensor).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& biasOrEmpty, bool hasBias, const torch::Tensor& labels,
                               const torch::Tensor& n_itemsOrEmpty, bool hasNItems, const LossOptions& options,
                               const Group& group, int64_t begin, int64_t total) {
    const torch::Tensor bias = hasBias ? biasOrEmpty : torch::Tensor();
    const torch::Tensor n_items = hasNItems ? n_itemsOrEmpty : torch::Tensor();
    const c10::DeviceGuard guard(hidden.device());
    const ShardOperands operands = prepare(hidden, weight, bias, labels, options, begin, total, n_items);
    const torch::Tensor statistics = globalStatistics(operands, group);
    const bool perToken = options.reduction() == Reduction::None;
    torch::Tensor loss = torch::empty({perToken ? operands.problem.tokens : 1}, statistics.options());
    GlobalStatistics in{statistics[0].data_ptr<double>(), statistics[1].data_ptr<double>(),
                        statistics[2].data_ptr<double>()};
    ShardOutputs out;
    out.loss = loss.data_ptr<double>();
    callRuntime([&] {
      const PassWorkspace pass = passWorkspace(operands, false);
      vocab_parallel_loss(operands.problem, operands.shard, operands.options, in, out, pass.workspace, operands.context);
    });

    ctx->save_for_backward({hidden, weight, biasOrEmpty, labels, n_itemsOrEmpty, statistics});
    ctx->saved_data["has_bias"] = hasBias;
    ctx->saved_data["has_n_items"] = hasNItems;
    saveOptions(ctx, options, group, begin, total);
    const auto dtype = options.dtype().value_or(hidden.scalar_type());
    if (perToken) return loss.view(operands.leading_shape).to(dtype);
    return loss.reshape(std::vector<int64_t>{}).to(dtype);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &hidden = saved[0], &weight = saved[1], &labels = saved[3], &statistics = saved[5];
    const torch::Tensor bias = ctx->saved_data["has_bias"].toBool() ? saved[2] : torch::Tensor();
    const torch::Tensor n_items = ctx->saved_data["has_n_items"].toBool() ? saved[4] : torch::Tensor();
    const LossOptions options = loadOptions(ctx);
    const Group group = c10::static_intrusive_pointer_cast<c10d::ProcessGroup>(ctx->saved_data["group"].toCapsule());
    const c10::DeviceGuard guard(hidden.device());
    ShardOperands operands = prepare(hidden, weight, bias, labels, options, ctx->saved_data["vocab_begin"].toInt(),
                                     ctx->saved_data["vocab_total"].toInt(), n_items);
    const bool perToken = options.reduction() == Reduction::None;
    const torch::Tensor upstream = grad_outputs[0].to(torch::kFloat).reshape({perToken ? -1 : 1}).contiguous();
    operands.options.grad_scale = upstream.data_ptr<float>();

    // grad_hidden is needed by every rank's all-reduce, even where hidden itself needs no gradient here.
    torch::Tensor grad_hidden = torch::empty({operands.problem.tokens, operands.problem.hidden_dim}, operands.hidden.options());
    torch::Tensor grad_weight, grad_bias;
    if (ctx->needs_input_grad(1)) grad_weight = torch::empty_like(operands.weight);
    if (bias.defined() && ctx->needs_input_grad(2)) grad_bias = torch::empty_like(operands.bias);
    torch::Tensor loss = torch::empty({perToken ? operands.problem.tokens : 1}, statistics.options());
    GlobalStatistics in{statistics[0].data_ptr<double>(), statistics[1].data_ptr<double>(),
                        statistics[2].data_ptr<double>()};
    ShardOutputs out;
    out.loss = loss.data_ptr<double>();
    out.grad_hidden = grad_hidden.data_ptr();
    if (grad_weight.defined()) out.grad_weight = grad_weight.data_ptr();
    if (grad_bias.defined()) out.grad_bias = grad_bias.data_ptr();
    callRuntime([&] {
      const PassWorkspace pass = passWorkspace(operands, true);
      vocab_parallel_loss(operands.problem, operands.shard, operands.options, in, out, pass.workspace, operands.context);
    });
    allReduce(group, grad_hidden, c10d::ReduceOp::SUM);

    variable_list grads(11);  // one per forward argument after ctx
    if (ctx->needs_input_grad(0)) grads[0] = grad_hidden.view(hidden.sizes());
    grads[1] = grad_weight;
    grads[2] = grad_bias;
    return grads;
  }
};

}  // namespace

torch::Tensor vocab_parallel_linear_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight_shard,
                                                  const torch::Tensor& bias_shard, const torch::Tensor& labels,
                                                  const Group& group, const LossOptions& options, int64_t vocab_begin) {
  TORCH_CHECK(group, kWho, "the process group is null");
  std::string localError;  // this rank's own arguments, reported through the agreement check
  try {
    checkLocal(hidden, weight_shard, bias_shard, labels);
    TORCH_CHECK(!(options.n_items().defined() && options.process_group()), kWho,
                "n_items and process_group both set the Mean's divisor; pass one of them");
    TORCH_CHECK(options.reduction() == Reduction::Mean || !options.process_group(), kWho,
                "process_group sets the divisor of a Mean, but the reduction is not Mean");
  } catch (const c10::Error& error) {
    localError = error.what_without_backtrace();
  }
  const bool shaped = localError.empty();
  using distributed_detail::Field;
  std::vector<Field> fields = distributed_detail::optionFields(options);
  fields.push_back({"tokens", shaped ? hidden.numel() / hidden.size(-1) : -1});
  fields.push_back({"hidden dimension", shaped ? hidden.size(-1) : -1});
  fields.push_back({"dtype of hidden", shaped ? static_cast<int64_t>(hidden.scalar_type()) : -1});
  fields.push_back({"dtype of labels", shaped ? static_cast<int64_t>(labels.scalar_type()) : -1});
  fields.push_back({"labels' last dimension (the shift's rows)", shaped && labels.dim() ? labels.size(-1) : -1});
  fields.push_back({"bias (set)", bias_shard.defined()});
  fields.push_back({"vocab_begin (given or not)", vocab_begin >= 0});
  fields.push_back({"shard rows", shaped ? weight_shard.size(0) : 0, false});
  fields.push_back({"vocab_begin", vocab_begin, false});
  // The shards must tile [0, total) exactly: in rank order, or as the ranks' vocab_begin say.
  const std::size_t rowsField = fields.size() - 2, beginField = fields.size() - 1;
  const int size = group->getSize(), rank = group->getRank();
  auto layout = [&](const distributed_detail::Table& table) {
    std::vector<std::pair<int64_t, int64_t>> ranges;  // (begin, rows) per rank
    int64_t total = 0;
    for (int r = 0; r < size; ++r) {
      ranges.emplace_back(vocab_begin >= 0 ? table[r][beginField] : total, table[r][rowsField]);
      total += table[r][rowsField];
    }
    return std::make_pair(ranges, total);
  };
  auto checkTiling = [&](const distributed_detail::Table& table) {
    const auto [ranges, total] = layout(table);
    std::string listing;
    for (int r = 0; r < size; ++r)
      listing += (r ? ", " : "") + std::to_string(ranges[r].first) + "/" + std::to_string(ranges[r].second);
    std::vector<int> order(size);
    for (int r = 0; r < size; ++r) order[r] = r;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return ranges[a] < ranges[b]; });
    int64_t next = 0;
    for (int r : order) {
      TORCH_CHECK(ranges[r].first == next, kWho, "the vocabulary shards do not tile [0, ", total, "): rank ", r,
                  " starts at row ", ranges[r].first, " where ", next == 0 ? "the vocabulary starts" : "the previous shard ends",
                  " (", next, "); ranks' begin/rows: ", listing);
      next += ranges[r].second;
    }
  };
  const auto device = hidden.defined() ? hidden.device() : torch::Device(torch::kCPU);
  const auto [ranges, total] =
      layout(distributed_detail::checkAgreement(group, device, kWho, fields, localError, checkTiling));

  torch::Tensor n_items = options.n_items();
  if (options.process_group()) {  // data parallel × vocabulary parallel: the count over the data group
    std::vector<torch::Tensor> count{distributed_detail::labelledCount(labels, options)};
    options.process_group()->group->allreduce(count)->wait();
    n_items = count[0];
  }
  const torch::Tensor placeholder = torch::empty({0}, hidden.options());
  return VocabParallelCrossEntropy::apply(hidden, weight_shard, bias_shard.defined() ? bias_shard : placeholder,
                                          bias_shard.defined(), labels, n_items.defined() ? n_items : placeholder,
                                          n_items.defined(), options, group, ranges[rank].first, total);
}

}  // namespace lmfuse
