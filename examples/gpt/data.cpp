// The synthetic corpus of data.h.
#include "data.h"

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

SyntheticCorpus::SyntheticCorpus(int64_t vocab, int64_t length, uint64_t seed) : seed_(seed) {
  tokens_.reserve(static_cast<size_t>(length));
  uint64_t state = seed;
  int64_t current = 0;
  for (int64_t i = 0; i < length; ++i) {
    state = splitmix64(state);
    if (state % 64 == 0) {  // a document ends about every 64 tokens
      current = 0;
    } else {
      const uint64_t draw = (state >> 8) % 8;  // successor 0: 4/8, 1: 2/8, 2: 1/8, 3: 1/8
      const uint64_t choice = draw < 4 ? 0 : draw < 6 ? 1 : draw < 7 ? 2 : 3;
      current = 1 + static_cast<int64_t>(splitmix64(seed ^ (static_cast<uint64_t>(current) * 4 + choice)) %
                                         static_cast<uint64_t>(vocab - 1));
    }
    tokens_.push_back(current);
  }
}

std::pair<torch::Tensor, torch::Tensor> SyntheticCorpus::batch(int64_t step, int64_t batch, int64_t seq) const {
  auto idx = torch::empty({batch, seq}, torch::kLong);
  auto targets = torch::empty({batch, seq}, torch::kLong);
  auto* in = idx.data_ptr<int64_t>();
  auto* out = targets.data_ptr<int64_t>();
  const uint64_t span = tokens_.size() - static_cast<uint64_t>(seq) - 1;
  for (int64_t b = 0; b < batch; ++b) {
    const uint64_t start = splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(step * batch + b))) % span;
    for (int64_t t = 0; t < seq; ++t) {
      in[b * seq + t] = tokens_[start + t];
      const int64_t next = tokens_[start + t + 1];
      out[b * seq + t] = next == 0 ? -1 : next;
    }
  }
  return {idx, targets};
}
