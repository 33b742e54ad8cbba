#include <tiny/model.h>

#include "train_check.h"

int runScenario() {
  const int64_t vocab = 53;
  auto train = usage::sgdTrainer<TinyLM>([&] { return TinyLM(vocab, 20); },
                                         [](TinyLM& model, const usage::Batch& batch) {
                                           return model->forward(batch.idx, batch.targets).second;
                                         });
  return usage::compareWithOriginal(train, vocab, 1e-5);
}
