// The sampler against scalar references on hand-made logits: greedy and top-k 1 are argmaxFirst,
// each filter keeps what its definition keeps, penalties touch exactly the seen ids, draws follow
// the distribution (a chi-square bound, deterministic given the seed), a seed repeats its draws,
// and choosing allocates nothing.
#include "AllocationCounter.h"

#include "codegen/cpu/vector/Kernels.h"
#include "runtime/sampling/Sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

namespace hetc {
namespace {

// A known distribution, its ids shuffled so that no filter can lean on the order of ids.
const std::vector<double> kProbabilities = {0.06, 0.25, 0.04, 0.4, 0.1, 0.15};
std::vector<float> logitsOf(const std::vector<double> &p) {
  std::vector<float> logits;
  for (double q : p)
    logits.push_back(static_cast<float>(std::log(q)) + 3.0f); // a shift softmax ignores
  return logits;
}

std::vector<int32_t> drawMany(const SamplingParams &params, const std::vector<float> &logits,
                              size_t count, const std::vector<int32_t> &prompt = {}) {
  Sampler sampler(static_cast<uint32_t>(logits.size()), 1);
  sampler.begin(0, params, prompt.data(), prompt.size());
  std::vector<int32_t> ids;
  for (size_t i = 0; i < count; ++i)
    ids.push_back(sampler.choose(0, logits.data()));
  return ids;
}

std::set<int32_t> support(const std::vector<int32_t> &ids) {
  return std::set<int32_t>(ids.begin(), ids.end());
}

SamplingParams sampled(uint64_t seed = 1) {
  SamplingParams params;
  params.temperature = 1.0f;
  params.seed = seed;
  return params;
}

// Pearson's statistic of `ids` against `expected` (probabilities over the ids that may occur).
double chiSquare(const std::vector<int32_t> &ids, const std::vector<double> &expected) {
  std::vector<double> observed(expected.size(), 0.0);
  for (int32_t id : ids)
    observed[id] += 1.0;
  double statistic = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == 0.0) {
      EXPECT_EQ(observed[i], 0.0) << "id " << i << " has probability 0";
      continue;
    }
    const double e = expected[i] * ids.size();
    statistic += (observed[i] - e) * (observed[i] - e) / e;
  }
  return statistic;
}

// The 0.999 quantile of chi-square with 1..5 degrees of freedom.
double chiSquareBound(size_t degrees) {
  const double bounds[] = {0.0, 10.83, 13.82, 16.27, 18.47, 20.52};
  return bounds[degrees];
}

TEST(Sampler, GreedyAndTopKOneAreArgmaxFirst) {
  // Ties for the largest logit: argmaxFirst takes the first, and so must the sampler.
  std::vector<float> logits(257);
  for (size_t i = 0; i < logits.size(); ++i)
    logits[i] = static_cast<float>((i * 37) % 101) * 0.25f - 10.0f;
  const size_t expected = kernels::argmaxFirst(logits.data(), logits.size());
  ASSERT_EQ(std::count(logits.begin(), logits.end(), logits[expected]), 3);

  SamplingParams greedy; // the default
  EXPECT_TRUE(greedy.greedy());
  for (int32_t id : drawMany(greedy, logits, 5))
    EXPECT_EQ(id, static_cast<int32_t>(expected));
  for (uint64_t seed : {1u, 2u, 99u}) {
    SamplingParams topOne = sampled(seed);
    topOne.temperature = 1.7f;
    topOne.topK = 1;
    for (int32_t id : drawMany(topOne, logits, 20))
      EXPECT_EQ(id, static_cast<int32_t>(expected)) << "seed " << seed;
  }
}

TEST(Sampler, SameSeedRepeatsDifferentSeedsDiffer) {
  const std::vector<float> flat(1000, 0.5f);
  const std::vector<int32_t> a = drawMany(sampled(42), flat, 64);
  EXPECT_EQ(a, drawMany(sampled(42), flat, 64));
  EXPECT_NE(a, drawMany(sampled(43), flat, 64));
  // Not a constant either: a flat distribution over 1000 ids spreads 64 draws.
  EXPECT_GT(support(a).size(), 50u);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  SamplingParams params = sampled();
  params.topK = 3;
  EXPECT_EQ(support(drawMany(params, logitsOf(kProbabilities), 4000)),
            (std::set<int32_t>{3, 1, 5})); // 0.4, 0.25, 0.15
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  SamplingParams params = sampled();
  params.topP = 0.7f; // 0.4 + 0.25 = 0.65 < 0.7 <= 0.8
  EXPECT_EQ(support(drawMany(params, logitsOf(kProbabilities), 4000)),
            (std::set<int32_t>{3, 1, 5}));
  params.topP = 0.5f;
  EXPECT_EQ(support(drawMany(params, logitsOf(kProbabilities), 4000)), (std::set<int32_t>{3, 1}));
  params.topP = 0.3f;
  EXPECT_EQ(support(drawMany(params, logitsOf(kProbabilities), 100)), (std::set<int32_t>{3}));
  params.topP = 1.0f;
  EXPECT_EQ(support(drawMany(params, logitsOf(kProbabilities), 4000)).size(), 6u);
  // After top-k 3 the mass is renormalized (0.5, 0.3125, 0.1875): 0.99 needs every candidate.
  params.topK = 3;
  params.topP = 0.99f;
  EXPECT_EQ(support(drawMany(params, logitsOf(kProbabilities), 4000)),
            (std::set<int32_t>{3, 1, 5}));
  params.topP = 0.75f; // 0.5 + 0.3125 reaches it: renormalized, not 0.4 + 0.25 of the whole
  EXPECT_EQ(support(drawMany(params, logitsOf(kProbabilities), 4000)), (std::set<int32_t>{3, 1}));
  params.topK = 0;

  // A vocabulary past one sorting chunk: the mass is reached only after many candidates.
  std::vector<double> wide(300, 1.0 / 300);
  params.topP = 0.5f;
  const std::set<int32_t> kept = support(drawMany(params, logitsOf(wide), 20000));
  EXPECT_LE(kept.size(), 150u);
  EXPECT_GT(kept.size(), 140u);
  EXPECT_LT(*kept.rbegin(), 150); // equal logits: the lowest ids first
}

TEST(Sampler, MinPKeepsTokensAboveAShareOfTheLargest) {
  SamplingParams params = sampled();
  params.minP = 0.3f; // p >= 0.12
  EXPECT_EQ(support(drawMany(params, logitsOf(kProbabilities), 4000)),
            (std::set<int32_t>{3, 1, 5}));
  params.minP = 0.5f; // p >= 0.2
  EXPECT_EQ(support(drawMany(params, logitsOf(kProbabilities), 4000)), (std::set<int32_t>{3, 1}));
  params.minP = 1.0f;
  EXPECT_EQ(support(drawMany(params, logitsOf(kProbabilities), 100)), (std::set<int32_t>{3}));
}

TEST(Sampler, DrawsFollowTheDistribution) {
  // 20000 draws with a fixed seed: deterministic, so the bound is not a source of flakiness.
  EXPECT_LT(chiSquare(drawMany(sampled(7), logitsOf(kProbabilities), 20000), kProbabilities),
            chiSquareBound(5));

  // Temperature 2: p^(1/2), renormalized.
  SamplingParams hot = sampled(8);
  hot.temperature = 2.0f;
  std::vector<double> flattened;
  double total = 0.0;
  for (double p : kProbabilities)
    total += std::sqrt(p);
  for (double p : kProbabilities)
    flattened.push_back(std::sqrt(p) / total);
  EXPECT_LT(chiSquare(drawMany(hot, logitsOf(kProbabilities), 20000), flattened),
            chiSquareBound(5));

  // After top-p 0.7: the three kept ids, renormalized over 0.8.
  SamplingParams nucleus = sampled(9);
  nucleus.topP = 0.7f;
  const std::vector<double> kept = {0.0, 0.25 / 0.8, 0.0, 0.4 / 0.8, 0.0, 0.15 / 0.8};
  EXPECT_LT(chiSquare(drawMany(nucleus, logitsOf(kProbabilities), 20000), kept), chiSquareBound(2));
}

TEST(Sampler, PenaltiesChangeExactlyTheSeenIds) {
  const uint32_t vocab = 8;
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, -3.0f, 4.0f, 1.5f, -0.5f, 0.0f};
  SamplingParams params = sampled();
  params.repetitionPenalty = 2.0f;
  params.frequencyPenalty = 0.5f;
  params.presencePenalty = 0.25f;
  Sampler sampler(vocab, 2);
  const std::vector<int32_t> prompt = {0, 1, 1};
  sampler.begin(1, params, prompt.data(), prompt.size());
  sampler.accept(1, 4);
  sampler.accept(1, 4);
  sampler.accept(1, 3);

  std::vector<float> row = logits;
  sampler.penalize(1, row.data());
  // Scalar reference: repetition over prompt and generated ids, then count * frequency +
  // presence over the generated ones.
  std::vector<float> expected = logits;
  expected[0] = 2.0f / 2.0f;                       // prompt, positive: divided
  expected[1] = -1.0f * 2.0f;                      // prompt, negative: multiplied
  expected[4] = 4.0f / 2.0f - (2 * 0.5f + 0.25f);  // generated twice
  expected[3] = -3.0f * 2.0f - (1 * 0.5f + 0.25f); // generated once
  for (uint32_t id = 0; id < vocab; ++id)
    EXPECT_EQ(row[id], expected[id]) << "id " << id;

  // Greedy with penalties takes the argmax of the penalized row: 4 (4.0 -> 0.75) loses to 5 (1.5).
  SamplingParams greedy = params;
  greedy.temperature = 0.0f;
  sampler.begin(0, greedy, prompt.data(), prompt.size());
  EXPECT_EQ(sampler.choose(0, logits.data()), 4);
  sampler.accept(0, 4);
  sampler.accept(0, 4);
  EXPECT_EQ(sampler.choose(0, logits.data()), 5);
  // begin() forgets the previous sequence of the slot.
  sampler.begin(0, greedy, nullptr, 0);
  EXPECT_EQ(sampler.choose(0, logits.data()), 4);
  // Context counts as the prompt's, for the repetition penalty only: 4 -> 2.0, 5 -> 0.75.
  const std::vector<int32_t> history = {4, 5};
  sampler.addContext(0, history.data(), history.size());
  row = logits;
  sampler.penalize(0, row.data());
  EXPECT_EQ(row[4], 2.0f);
  EXPECT_EQ(row[5], 0.75f);
  EXPECT_EQ(row[0], 2.0f);
  EXPECT_EQ(sampler.choose(0, logits.data()), 0); // ties with 4 at 2.0: the first
}

TEST(Sampler, ChoosingAllocatesNothing) {
  const uint32_t vocab = 5000;
  std::vector<float> logits(vocab);
  for (uint32_t i = 0; i < vocab; ++i)
    logits[i] = std::sin(0.37f * i) * 4.0f;
  SamplingParams params = sampled(3);
  params.temperature = 0.8f;
  params.topK = 400;
  params.topP = 0.9f;
  params.minP = 0.02f;
  params.repetitionPenalty = 1.1f;
  params.frequencyPenalty = 0.2f;
  params.presencePenalty = 0.1f;
  Sampler sampler(vocab, 4);
  const std::vector<int32_t> prompt = {1, 2, 3};
  SamplingParams wide = params;
  wide.topK = 0; // top-p over the whole vocabulary
  const size_t before = test::allocationCount();
  sampler.begin(2, params, prompt.data(), prompt.size());
  sampler.begin(3, wide, prompt.data(), prompt.size());
  for (int step = 0; step < 200; ++step) {
    sampler.accept(2, sampler.choose(2, logits.data()));
    sampler.accept(3, sampler.choose(3, logits.data()));
  }
  EXPECT_EQ(test::allocationCount() - before, 0u);
}

TEST(Sampler, ParametersOutOfRangeAreRefused) {
  SamplingParams params;
  EXPECT_TRUE(params.check().ok());
  params.topP = 1.5f;
  ASSERT_FALSE(params.check().ok());
  EXPECT_EQ(params.check().message(), "--top-p 1.5: must be in (0, 1]");
  params = SamplingParams();
  params.temperature = -1.0f;
  EXPECT_FALSE(params.check().ok());
  params = SamplingParams();
  params.minP = 2.0f;
  EXPECT_FALSE(params.check().ok());
  params = SamplingParams();
  params.repetitionPenalty = 0.0f;
  EXPECT_FALSE(params.check().ok());
  params = SamplingParams();
  params.frequencyPenalty = 3.0f;
  EXPECT_FALSE(params.check().ok());
  params = SamplingParams();
  params.presencePenalty = std::nanf("");
  EXPECT_FALSE(params.check().ok());
}

} // namespace
} // namespace hetc
