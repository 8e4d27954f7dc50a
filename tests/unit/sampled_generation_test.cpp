// Sampling in an elastic batch: a seeded sequence draws the same ids alone and beside others (in
// another slot, joining at another step), greedy requests still match generateGreedy, run()
// allocates nothing, and stopWhen ends a sequence where it says.
#include "AllocationCounter.h"
#include "EngineTestSupport.h"
#include "TestPlans.h"

#include "runtime/executor/Engine.h"
#include "runtime/serving/ElasticBatch.h"

#include <gtest/gtest.h>

#include <vector>

namespace hetc {
namespace {

using test::largerShape;
using test::LoadedTinyPlan;
using test::promptOf;

GenerationRequest sampledRequest(size_t length, int32_t first, uint32_t vocab, uint64_t seed) {
  GenerationRequest request;
  request.prompt = promptOf(length, first, static_cast<int32_t>(vocab));
  request.maxNew = 12;
  request.sampling.temperature = 1.5f;
  request.sampling.topK = 40;
  request.sampling.topP = 0.95f;
  request.sampling.repetitionPenalty = 1.1f;
  request.sampling.presencePenalty = 0.2f;
  request.sampling.seed = seed;
  return request;
}

std::vector<std::vector<int32_t>> run(const LoadedTinyPlan &loaded,
                                      std::vector<GenerationRequest> requests,
                                      size_t *allocations = nullptr) {
  std::unique_ptr<Engine> engine = loaded.engine(2);
  EXPECT_TRUE(engine);
  if (!engine)
    return {};
  Result<ElasticBatch> batch = ElasticBatch::create(*engine, std::move(requests));
  EXPECT_TRUE(batch.ok()) << batch.message();
  if (!batch.ok())
    return {};
  const size_t before = test::allocationCount();
  Status ran = batch->run();
  if (allocations)
    *allocations = test::allocationCount() - before;
  EXPECT_TRUE(ran.ok()) << ran.message();
  std::vector<std::vector<int32_t>> tokens;
  for (const RequestOutcome &outcome : batch->outcomes())
    tokens.push_back(outcome.tokens);
  return tokens;
}

TEST(SampledGeneration, ASeededSequenceDoesNotDependOnItsBatch) {
  LoadedTinyPlan loaded(largerShape());
  ASSERT_TRUE(loaded.plan);
  const uint32_t vocab = largerShape().vocab;
  const GenerationRequest a = sampledRequest(5, 3, vocab, 1234);
  const std::vector<int32_t> alone = run(loaded, {a})[0];
  ASSERT_EQ(alone.size(), a.maxNew);

  // Beside two others (one greedy, one sampled with another seed), joining later in slot 2.
  GenerationRequest joining = a;
  joining.arrivalStep = 2;
  GenerationRequest greedy;
  greedy.prompt = promptOf(9, 20, static_cast<int32_t>(vocab));
  greedy.maxNew = 16;
  size_t allocations = 1;
  const std::vector<std::vector<int32_t>> together =
      run(loaded, {greedy, sampledRequest(7, 40, vocab, 99), joining}, &allocations);
  ASSERT_EQ(together.size(), 3u);
  EXPECT_EQ(together[2], alone);
  EXPECT_EQ(allocations, 0u);

  // The same seed repeats; another seed (on the same prompt) draws otherwise.
  EXPECT_EQ(run(loaded, {a})[0], alone);
  GenerationRequest reseeded = a;
  reseeded.sampling.seed = 1235;
  EXPECT_NE(run(loaded, {reseeded})[0], alone);

  // Sampling really happened: greedy on the same prompt gives other ids.
  GenerationRequest argmax = a;
  argmax.sampling = SamplingParams();
  const std::vector<int32_t> greedyIds = run(loaded, {argmax})[0];
  EXPECT_NE(greedyIds, alone);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  Result<GenerateResult> reference = generateGreedy(*engine, {a.prompt}, a.maxNew);
  ASSERT_TRUE(reference.ok()) << reference.message();
  EXPECT_EQ(greedyIds, reference->tokens[0]);
}

TEST(SampledGeneration, StopWhenEndsTheSequence) {
  LoadedTinyPlan loaded(largerShape());
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  const uint32_t vocab = largerShape().vocab;
  Result<ElasticBatch> batch = ElasticBatch::create(
      *engine, {sampledRequest(4, 1, vocab, 5), sampledRequest(4, 2, vocab, 6)});
  ASSERT_TRUE(batch.ok()) << batch.message();
  std::vector<size_t> seen(2, 0);
  batch->stopWhen([&](size_t request, int32_t) { return ++seen[request] == 3 && request == 1; });
  ASSERT_TRUE(batch->run().ok());
  EXPECT_EQ(batch->outcomes()[0].tokens.size(), 12u);
  EXPECT_EQ(batch->outcomes()[1].tokens.size(), 3u);
}

TEST(SampledGeneration, BadParametersAreRefusedAtCreate) {
  LoadedTinyPlan loaded(largerShape());
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  GenerationRequest request = sampledRequest(4, 1, largerShape().vocab, 5);
  request.sampling.topP = 0.0f;
  Result<ElasticBatch> batch = ElasticBatch::create(*engine, {request});
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.message(), "request 0: --top-p 0: must be in (0, 1]");
}

} // namespace
} // namespace hetc
