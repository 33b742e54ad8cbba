// Trains in this unit (not named in SOURCES) through the header's forward.
#include "model.h"
#include "train_check.h"

int main() {
  const int64_t vocab = 61;
  auto train = usage::sgdTrainer<TinyLM>([&] { return TinyLM(vocab, 24); },
                                         [](TinyLM& model, const usage::Batch& batch) {
                                           return model->forward(batch.idx, batch.targets).second;
                                         });
  const int status = usage::compareWithOriginal(train, vocab, 1e-5);
  TinyLM model(vocab, 24);
  const usage::Batch batch = usage::randomBatch(vocab, usage::freshSeed());
  std::printf("evaluation loss %.6f\n", evaluate(model, batch.idx, batch.targets));
  return status;
}
