// What every gallery model shares: LibTorch, the functional namespace alias, the {logits, loss} pair.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace gallery {
namespace F = torch::nn::functional;
using LogitsAndLoss = std::pair<torch::Tensor, torch::Tensor>;
}  // namespace gallery
