// Stand-ins for logits that have their shape and no values (meta tensors): the fused path runs the
// original's reshapes of the logits on them, to learn the shapes the original would have seen without
// computing the logits (skipped_logits_after, and the check of LossOptions::logits_as_passed).
#pragma once

#include <torch/types.h>

namespace lmfuse::torch_detail {

/// A meta tensor with the sizes, strides and dtype of `logits`: skipped logits (the strides they record),
/// computed logits, or a stand-in already (returned as it is).
torch::Tensor logitsStandIn(const torch::Tensor& logits);

/// A contiguous meta tensor with the shape and dtype F::linear(hidden, weight) would return.
torch::Tensor logitsStandIn(const torch::Tensor& hidden, const torch::Tensor& weight);

/// The values of skipped logits (skipped_logits, or skipped_logits_after of them) given the head's logits
/// `headLogits` (what F::linear(hidden, weight, bias) returns): the head's logits seen through the views the
/// stand-in records; an Unsupported error where a reshape since the head copied (its code is not kept: it may
/// read locals whose block has ended). For the original loss of a rewritten call; autograd follows.
torch::Tensor skippedLogitsValues(const torch::Tensor& skipped, const torch::Tensor& headLogits);

}  // namespace lmfuse::torch_detail
