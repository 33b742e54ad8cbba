// Namespace-scope tensors for the cases whose head reads a global (which a block's `using alt::hidden_in;`
// may hide at the loss).
#pragma once
#include <torch/torch.h>

extern torch::Tensor hidden_in;
namespace alt {
extern torch::Tensor hidden_in;
}  // namespace alt
