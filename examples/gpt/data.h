// A deterministic synthetic corpus: nothing is downloaded, and every machine generates the same tokens.
// Documents are walks of a sparse random Markov chain over the vocabulary (each token has four
// successors with probabilities 1/2, 1/4, 1/8, 1/8), separated by token 0, so a model can learn it
// and the loss falls. Integer arithmetic only (splitmix64): the corpus is bit-identical everywhere.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <utility>
#include <vector>

class SyntheticCorpus {
public:
  SyntheticCorpus(int64_t vocab, int64_t length, uint64_t seed);

  /// Batch `step`: idx [batch, seq] and the next-token targets [batch, seq], where a target that is a
  /// document separator is -1 (ignored by the loss, as padding is in real training).
  std::pair<torch::Tensor, torch::Tensor> batch(int64_t step, int64_t batch, int64_t seq) const;

private:
  std::vector<int64_t> tokens_;
  uint64_t seed_;
};
