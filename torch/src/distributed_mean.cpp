// The data-parallel global mean (distributed_mean.h): each rank divides its own tokens' loss by the
// labelled count of the whole group, so summing the ranks' gradients gives the whole batch's mean.
#include "distributed_mean.h"

#include "distributed_check.h"
#include "fused_call.h"

namespace lmfuse::distributed_detail {
namespace {
constexpr const char* kWho = "lmfuse::linear_cross_entropy (process_group): ";
}  // namespace

torch::Tensor labelledCount(const torch::Tensor& labels, const LossOptions& options) {
  torch::Tensor scored = labels;
  if (options.shift()) scored = labels.size(-1) > 0 ? labels.narrow(-1, 1, labels.size(-1) - 1) : labels;
  return scored.ne(options.ignore_index()).sum().to(torch::kFloat).reshape({1});
}

LossOptions withGlobalMean(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                           const torch::Tensor& labels, const LossOptions& options) {
  const auto& group = options.process_group()->group;
  LossOptions local = options;
  local.process_group(nullptr);

  std::string localError;  // this rank's own arguments, checked before the others are waited for
  try {
    TORCH_CHECK(options.reduction() == Reduction::Mean, kWho, "process_group sets the divisor of a Mean, but "
                "the reduction is ", options.reduction() == Reduction::Sum ? "Sum" : "None");
    TORCH_CHECK(!options.n_items().defined(), kWho, "n_items and process_group both set the Mean's divisor; "
                "pass one of them");
    torch_detail::prepareOperands(hidden, weight, bias, labels, local);
  } catch (const c10::Error& error) {
    localError = error.what_without_backtrace();
  }
  std::vector<Field> fields = optionFields(options);
  fields.push_back({"hidden dimension", hidden.defined() && hidden.dim() ? hidden.size(-1) : -1});
  fields.push_back({"vocabulary", weight.defined() && weight.dim() == 2 ? weight.size(0) : -1});
  fields.push_back({"bias (set)", bias.defined()});
  fields.push_back({"dtype of hidden", hidden.defined() ? static_cast<int64_t>(hidden.scalar_type()) : -1});
  checkAgreement(group, hidden.defined() ? hidden.device() : torch::Device(torch::kCPU), kWho, fields, localError);

  std::vector<torch::Tensor> count{labelledCount(labels, options)};
  group->allreduce(count)->wait();  // NCCL: the current stream waits for the reduction, the host does not
  return local.n_items(count[0]);
}

}  // namespace lmfuse::distributed_detail
