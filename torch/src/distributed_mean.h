// The data-parallel global mean of <lmfuse/distributed.h>, for the adapter: what linear_cross_entropy
// does with LossOptions::process_group set. No c10d type in this header.
#pragma once

#include <lmfuse/torch.h>

namespace lmfuse::distributed_detail {

/// The labelled tokens of labels under options (ignore_index, shift), as one fp32 element on labels'
/// device, counted on the device.
torch::Tensor labelledCount(const torch::Tensor& labels, const LossOptions& options);

/// options without process_group, with n_items = labelledCount summed over the group (one all-reduce, no
/// host synchronisation), after the agreement check of distributed_check.h.
LossOptions withGlobalMean(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                           const torch::Tensor& labels, const LossOptions& options);

}  // namespace lmfuse::distributed_detail
