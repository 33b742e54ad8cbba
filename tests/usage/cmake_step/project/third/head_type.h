#pragma once
#include <torch/torch.h>
#include <cstdio>
// Found only if common/ is searched after third/: a head whose forward is not a plain Linear.
struct CappedLinearImpl : torch::nn::Module {
  CappedLinearImpl(int64_t, int64_t) {}
  torch::Tensor forward(const torch::Tensor &x) { std::puts("CAPPED_HEAD"); return x; }
  torch::Tensor weight, bias;
};
using HeadType = torch::nn::ModuleHolder<CappedLinearImpl>;
