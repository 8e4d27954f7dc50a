#include "runtime/sampling/Sampler.h"

#include "codegen/cpu/vector/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace hetc {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

// Top-p sorts this many more candidates at a time: the mass is usually reached within the first
// few, so the rest of the vocabulary is never sorted.
constexpr size_t kTopPChunk = 64;

} // namespace

Status SamplingParams::check() const {
  if (!std::isfinite(temperature) || temperature < 0.0f)
    return Status::error("--temperature " + number(temperature) + ": must be >= 0 (0: greedy)");
  if (!(topP > 0.0f && topP <= 1.0f))
    return Status::error("--top-p " + number(topP) + ": must be in (0, 1]");
  if (!(minP >= 0.0f && minP <= 1.0f))
    return Status::error("--min-p " + number(minP) + ": must be in [0, 1]");
  if (!std::isfinite(repetitionPenalty) || repetitionPenalty <= 0.0f)
    return Status::error("--repetition-penalty " + number(repetitionPenalty) +
                         ": must be > 0 (1: none)");
  if (!(frequencyPenalty >= -2.0f && frequencyPenalty <= 2.0f))
    return Status::error("--frequency-penalty " + number(frequencyPenalty) +
                         ": must be in [-2, 2]");
  if (!(presencePenalty >= -2.0f && presencePenalty <= 2.0f))
    return Status::error("--presence-penalty " + number(presencePenalty) + ": must be in [-2, 2]");
  return Status();
}

Sampler::Sampler(uint32_t vocab, uint32_t slots)
    : vocab_(vocab), sequences_(slots), generated_(static_cast<size_t>(vocab) * slots, 0),
      inPrompt_(static_cast<size_t>(vocab) * slots, 0), work_(slots ? vocab : 0),
      candidates_(slots ? vocab : 0), probabilities_(slots ? vocab : 0) {}

void Sampler::begin(uint32_t slot, const SamplingParams &params, const int32_t *prompt,
                    size_t count) {
  Sequence &sequence = sequences_[slot];
  sequence.params = params;
  sequence.random.seed(params.seed);
  uint32_t *generated = generated_.data() + static_cast<size_t>(slot) * vocab_;
  uint8_t *inPrompt = inPrompt_.data() + static_cast<size_t>(slot) * vocab_;
  std::fill(generated, generated + vocab_, 0u);
  std::fill(inPrompt, inPrompt + vocab_, uint8_t{0});
  addContext(slot, prompt, count);
}

void Sampler::addContext(uint32_t slot, const int32_t *ids, size_t count) {
  uint8_t *inPrompt = inPrompt_.data() + static_cast<size_t>(slot) * vocab_;
  for (size_t i = 0; i < count; ++i)
    if (ids[i] >= 0 && static_cast<uint32_t>(ids[i]) < vocab_)
      inPrompt[ids[i]] = 1;
}

void Sampler::accept(uint32_t slot, int32_t id) {
  if (id >= 0 && static_cast<uint32_t>(id) < vocab_)
    ++generated_[static_cast<size_t>(slot) * vocab_ + id];
}

void Sampler::penalize(uint32_t slot, float *w) const {
  const SamplingParams &params = sequences_[slot].params;
  const uint32_t *generated = generated_.data() + static_cast<size_t>(slot) * vocab_;
  const uint8_t *inPrompt = inPrompt_.data() + static_cast<size_t>(slot) * vocab_;
  for (uint32_t id = 0; id < vocab_; ++id) {
    if (generated[id] == 0 && !inPrompt[id])
      continue;
    if (params.repetitionPenalty != 1.0f)
      w[id] = w[id] > 0.0f ? w[id] / params.repetitionPenalty : w[id] * params.repetitionPenalty;
    if (generated[id] > 0)
      w[id] -= static_cast<float>(generated[id]) * params.frequencyPenalty + params.presencePenalty;
  }
}

double Sampler::uniform(Sequence &sequence) {
  // 53 random bits, not std::uniform_real_distribution, whose output the standard leaves open.
  return static_cast<double>(sequence.random() >> 11) * 0x1.0p-53;
}

int32_t Sampler::choose(uint32_t slot, const float *logits) {
  Sequence &sequence = sequences_[slot];
  const SamplingParams &params = sequence.params;
  if (params.greedy() && !params.penalizes())
    return static_cast<int32_t>(kernels::argmaxFirst(logits, vocab_));

  float *w = work_.data();
  std::memcpy(w, logits, vocab_ * sizeof(float));
  if (params.penalizes())
    penalize(slot, w);
  if (params.greedy())
    return static_cast<int32_t>(kernels::argmaxFirst(w, vocab_));

  for (uint32_t id = 0; id < vocab_; ++id)
    w[id] /= params.temperature;
  // Most likely first; equal logits by id, so every selection below is deterministic.
  const auto before = [w](uint32_t a, uint32_t b) {
    return w[a] > w[b] || (w[a] == w[b] && a < b);
  };
  uint32_t *c = candidates_.data();
  for (uint32_t id = 0; id < vocab_; ++id)
    c[id] = id;
  size_t n = vocab_;
  if (params.topK > 0 && params.topK < n) {
    std::nth_element(c, c + params.topK - 1, c + n, before);
    n = params.topK;
  }

  // Softmax over the candidates, in double, from the largest logit.
  const uint32_t top = *std::min_element(c, c + n, before);
  const double largest = w[top];
  if (!std::isfinite(largest))
    return static_cast<int32_t>(top);
  double *p = probabilities_.data();
  double mass = 0.0;
  for (size_t j = 0; j < n; ++j) {
    p[c[j]] = std::exp(static_cast<double>(w[c[j]]) - largest);
    mass += p[c[j]];
  }

  if (params.topP < 1.0f) {
    // The fewest most likely candidates whose share of the mass reaches top_p, sorting only as
    // far as needed.
    const double target = static_cast<double>(params.topP) * mass;
    double kept = 0.0;
    size_t sorted = 0;
    bool reached = false;
    while (!reached && sorted < n) {
      const size_t end = std::min(n, sorted + kTopPChunk);
      std::partial_sort(c + sorted, c + end, c + n, before);
      for (; sorted < end && !reached; ++sorted) {
        kept += p[c[sorted]];
        reached = kept >= target;
      }
    }
    n = sorted; // all of them when rounding kept the sum short of the target
  }

  if (params.minP > 0.0f) {
    // p / p_max = exp(logit - largest) >= min_p; the largest always stays. Order is kept.
    size_t kept = 0;
    for (size_t j = 0; j < n; ++j)
      if (p[c[j]] >= static_cast<double>(params.minP))
        c[kept++] = c[j];
    n = kept;
  }

  double total = 0.0;
  for (size_t j = 0; j < n; ++j)
    total += p[c[j]];
  const double u = uniform(sequence) * total;
  double cumulative = 0.0;
  for (size_t j = 0; j < n; ++j) {
    cumulative += p[c[j]];
    if (u < cumulative)
      return static_cast<int32_t>(c[j]);
  }
  return static_cast<int32_t>(c[n - 1]); // u within rounding of the total
}

} // namespace hetc
