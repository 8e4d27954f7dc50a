// Choosing the next id from a row of logits: greedy, or sampled after penalties and filters.
//
// Per sequence: penalties over the ids it has seen (repetition: its prompt and what it generated;
// frequency and presence: what it generated), then temperature, top-k, top-p, min-p, and a draw
// from the softmax of what is left, in the order llama.cpp and Hugging Face apply them. A draw
// uses the sequence's own random stream, seeded by its parameters, so a run is repeatable and a
// sequence draws the same ids whatever else shares the batch. Buffers are sized once, by vocab and
// slots; choosing an id allocates nothing.
#pragma once

#include "runtime/format/Status.h"

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace hetc {

struct SamplingParams {
  float temperature = 0.0f;       // 0: greedy (the first of the largest logits)
  uint32_t topK = 0;              // keep the k most likely ids; 0: all
  float topP = 1.0f;              // keep the fewest most likely ids whose mass reaches p; 1: all
  float minP = 0.0f;              // keep ids with p >= minP * (largest p); 0: all
  float repetitionPenalty = 1.0f; // seen ids: positive logits / it, negative ones * it; 1: none
  float frequencyPenalty = 0.0f;  // generated ids: logit -= count * it
  float presencePenalty = 0.0f;   // generated ids: logit -= it once
  uint64_t seed = 0;              // the sequence's random stream

  bool greedy() const { return temperature == 0.0f; }
  bool penalizes() const {
    return repetitionPenalty != 1.0f || frequencyPenalty != 0.0f || presencePenalty != 0.0f;
  }
  // One message per parameter out of range, named as the CLI flag.
  Status check() const;
};

class Sampler {
public:
  // Room for `slots` sequences at once over a vocabulary of `vocab` ids (none: sizes nothing).
  Sampler(uint32_t vocab, uint32_t slots);

  // A sequence takes `slot`: its random stream restarts from params.seed and the ids it has seen
  // are the prompt's. O(vocab + prompt); allocates nothing.
  void begin(uint32_t slot, const SamplingParams &params, const int32_t *prompt, size_t count);
  // More ids the repetition penalty counts as the prompt's: a restored conversation's history.
  void addContext(uint32_t slot, const int32_t *ids, size_t count);
  // The next id of the sequence in `slot` from its logits row (left unchanged). Does not record
  // the id: accept() does, once the caller keeps it.
  int32_t choose(uint32_t slot, const float *logits);
  // Records a generated id: it counts for the penalties from the next choose() on.
  void accept(uint32_t slot, int32_t id);
  // The penalties choose() applies first, on a row in place: only ids the sequence has seen change.
  void penalize(uint32_t slot, float *logits) const;

  uint32_t vocab() const { return vocab_; }

private:
  struct Sequence {
    SamplingParams params;
    std::mt19937_64 random;
  };
  double uniform(Sequence &sequence); // in [0, 1), the same on every platform

  uint32_t vocab_;
  std::vector<Sequence> sequences_;   // per slot
  std::vector<uint32_t> generated_;   // [slot, vocab]: times each id was generated
  std::vector<uint8_t> inPrompt_;     // [slot, vocab]: 1 where the prompt holds the id
  std::vector<float> work_;           // [vocab]: the row being penalized and scaled
  std::vector<uint32_t> candidates_;  // [vocab]: ids still in play, most likely first once sorted
  std::vector<double> probabilities_; // [vocab]: softmax of the candidates, in their order
};

} // namespace hetc
