#pragma once
#include <torch/torch.h>
using HeadType = torch::nn::Linear;
