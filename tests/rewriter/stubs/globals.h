// Namespace-scope tensors for the cases whose head reads a global (which a block's `using alt::hidden_in;`
// may hide at the loss).
#pragma once
#include <torch/torch.h>

extern torch::Tensor hidden_in;
namespace alt {
extern torch::Tensor hidden_in;
}  // namespace alt

// Namespace members a head's weight may name through a macro (which a block's namespace alias may redirect at the
// loss), and an operator a block's using-declaration may bring in.
namespace weights {
extern torch::Tensor w;
}  // namespace weights
namespace other_weights {
extern torch::Tensor w;
}  // namespace other_weights
namespace scaling {
torch::Tensor operator*(torch::Tensor &t, double factor);
}  // namespace scaling
