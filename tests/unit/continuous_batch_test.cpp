// The serving loop: requests submitted from other threads while it runs give what each gives
// alone, bit for bit; the queue is bounded; a cancelled request frees its slot; log-probabilities
// are the model's log-softmax; the loop allocates nothing once requests are prepared.
#include "AllocationCounter.h"
#include "EngineTestSupport.h"
#include "TestPlans.h"

#include "runtime/executor/Engine.h"
#include "runtime/serving/ContinuousBatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

namespace hetc {
namespace {

using namespace std::chrono_literals;
using test::largerShape;
using test::LoadedTinyPlan;
using test::promptOf;
using test::TinyPlanShape;

struct Alone {
  std::vector<int32_t> tokens;
  std::vector<float> logits; // [maxNew, vocab]
};

Alone runAlone(const LoadedTinyPlan &loaded, const std::vector<int32_t> &prompt, uint32_t maxNew) {
  Alone alone;
  std::unique_ptr<Engine> engine = loaded.engine(1);
  if (!engine)
    return alone;
  alone.logits.assign(static_cast<size_t>(maxNew) * engine->vocab(), std::nanf(""));
  Result<GenerateResult> result = generateGreedy(*engine, {prompt}, maxNew, alone.logits.data());
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.message());
  if (result.ok())
    alone.tokens = result->tokens[0];
  return alone;
}

// largerShape with one slot: requests queue behind each other.
TinyPlanShape oneSlotShape() {
  TinyPlanShape shape = largerShape();
  shape.max_batch = 1;
  return shape;
}

std::shared_ptr<ServedRequest> requestOf(std::vector<int32_t> prompt, uint32_t maxNew,
                                         bool logprobs = false, uint32_t top = 0) {
  GenerationRequest generation;
  generation.prompt = std::move(prompt);
  generation.maxNew = maxNew;
  return std::make_shared<ServedRequest>(std::move(generation), logprobs, top);
}

// Waits for the request's end (bounded, so a broken loop fails the test instead of hanging it).
ServedRequest::End awaitEnd(ServedRequest &request) {
  for (int i = 0; i < 3000 && request.end() == ServedRequest::End::Running; ++i)
    request.wait(SIZE_MAX, 10ms);
  return request.end();
}

std::vector<int32_t> idsOf(ServedRequest &request) {
  const size_t count = request.wait(0, 0ms);
  std::vector<int32_t> ids(count);
  for (size_t k = 0; k < count; ++k)
    ids[k] = request.id(k);
  return ids;
}

// Eight requests from four threads, in waves, over three slots: each one's ids are its ids alone.
TEST(ContinuousBatchTest, RequestsFromOtherThreadsMatchRunningAlone) {
  LoadedTinyPlan loaded(largerShape());
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(2);
  ASSERT_TRUE(engine);
  const int32_t vocab = static_cast<int32_t>(engine->vocab());
  ContinuousBatch batch(*engine, 16);
  std::thread loop([&] { batch.run(); });

  const std::vector<size_t> lengths = {20, 3, 7, 12, 1, 30, 5, 4};
  const std::vector<uint32_t> maxNew = {5, 9, 4, 6, 3, 7, 2, 8};
  std::vector<std::shared_ptr<ServedRequest>> requests(lengths.size());
  std::vector<std::thread> clients;
  for (size_t c = 0; c < 4; ++c)
    clients.emplace_back([&, c] {
      for (size_t i = c; i < lengths.size(); i += 4) {
        requests[i] = requestOf(promptOf(lengths[i], static_cast<int32_t>(3 + 11 * i), vocab),
                                maxNew[i]);
        ASSERT_TRUE(batch.check(requests[i]->generation()).ok());
        ASSERT_EQ(batch.submit(requests[i]), ContinuousBatch::Admission::Queued);
        awaitEnd(*requests[i]);
      }
    });
  for (std::thread &client : clients)
    client.join();
  batch.stop();
  loop.join();

  for (size_t i = 0; i < lengths.size(); ++i) {
    ASSERT_TRUE(requests[i]);
    EXPECT_EQ(requests[i]->end(), ServedRequest::End::Length) << "request " << i;
    EXPECT_EQ(idsOf(*requests[i]),
              runAlone(loaded, requests[i]->generation().prompt, maxNew[i]).tokens)
        << "request " << i;
  }
  const ServingMetrics &metrics = batch.metrics();
  EXPECT_EQ(metrics.requestsQueued.load(), lengths.size());
  EXPECT_EQ(metrics.requestsFinished.load(), lengths.size());
  uint64_t prompt = 0, generated = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    prompt += lengths[i];
    generated += maxNew[i];
  }
  EXPECT_EQ(metrics.promptTokens.load(), prompt);
  EXPECT_EQ(metrics.generatedTokens.load(), generated);
  EXPECT_EQ(metrics.timeToFirstToken.count(), lengths.size());
  EXPECT_EQ(metrics.interTokenLatency.count(), generated - lengths.size());
  EXPECT_EQ(metrics.activeSlots.load(), 0u);
  EXPECT_EQ(metrics.queueDepth.load(), 0u);
}

// Requests queued before the loop starts run to their ends with no allocation in the loop;
// past the queue's bound a request is refused; stop() ends what is left as Cancelled.
TEST(ContinuousBatchTest, BoundedQueueAndNoAllocationPerStep) {
  LoadedTinyPlan loaded(largerShape());
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  const int32_t vocab = static_cast<int32_t>(engine->vocab());
  // Room for the 3 free slots and 5 queue places: the ninth is refused.
  ContinuousBatch batch(*engine, 5);
  std::vector<std::shared_ptr<ServedRequest>> requests;
  for (size_t i = 0; i < 8; ++i) {
    requests.push_back(requestOf(promptOf(4 + 3 * i, static_cast<int32_t>(i), vocab), 6,
                                 /*logprobs=*/i % 2 == 0, /*top=*/i == 4 ? 3 : 0));
    ASSERT_EQ(batch.submit(requests.back()), ContinuousBatch::Admission::Queued);
  }
  EXPECT_EQ(batch.submit(requestOf({1, 2}, 2)), ContinuousBatch::Admission::QueueFull);
  EXPECT_EQ(batch.metrics().requestsRejected.load(), 1u);
  EXPECT_EQ(batch.metrics().queueDepth.load(), 8u);
  EXPECT_GE(batch.retryAfterSeconds(), 1u);

  std::thread stopper([&] {
    for (auto &request : requests)
      awaitEnd(*request);
    batch.stop();
  });
  const size_t before = test::allocationCount();
  batch.run();
  const size_t allocations = test::allocationCount() - before;
  stopper.join();
  EXPECT_EQ(allocations, 0u);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i]->end(), ServedRequest::End::Length);
    EXPECT_EQ(idsOf(*requests[i]), runAlone(loaded, requests[i]->generation().prompt, 6).tokens);
  }
  EXPECT_EQ(batch.submit(requestOf({1, 2}, 2)), ContinuousBatch::Admission::Stopped);
}

// A cancelled request leaves its slot at the next step and the waiting one takes it; a request
// cancelled while it waits never joins.
TEST(ContinuousBatchTest, CancelledRequestsFreeTheirSlots) {
  LoadedTinyPlan loaded(oneSlotShape());
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  const int32_t vocab = static_cast<int32_t>(engine->vocab());
  ContinuousBatch batch(*engine, 4);
  auto hog = requestOf(promptOf(5, 1, vocab), 80);
  auto skipped = requestOf(promptOf(5, 2, vocab), 4);
  auto next = requestOf(promptOf(6, 3, vocab), 4);
  ASSERT_EQ(batch.submit(hog), ContinuousBatch::Admission::Queued);
  ASSERT_EQ(batch.submit(skipped), ContinuousBatch::Admission::Queued);
  ASSERT_EQ(batch.submit(next), ContinuousBatch::Admission::Queued);
  skipped->cancel();
  // Steps run on this thread, so the cancel lands at a known step.
  while (hog->wait(0, 0ms) < 3)
    ASSERT_TRUE(batch.runStep());
  hog->cancel();
  ASSERT_TRUE(batch.runStep()); // frees the hog's slot; `next` joins (`skipped` never does)
  EXPECT_EQ(hog->end(), ServedRequest::End::Cancelled);
  EXPECT_EQ(idsOf(*hog).size(), 3u);
  EXPECT_EQ(skipped->end(), ServedRequest::End::Cancelled);
  EXPECT_TRUE(idsOf(*skipped).empty());
  // stop(): the owner found its end (a stop string); it counts as finished, not cancelled.
  while (next->wait(0, 0ms) < 1)
    ASSERT_TRUE(batch.runStep());
  next->stop();
  EXPECT_FALSE(batch.runStep()); // frees the slot; nothing else waits, so no step runs
  EXPECT_EQ(next->end(), ServedRequest::End::Stopped);
  const std::vector<int32_t> nextIds = idsOf(*next);
  const std::vector<int32_t> nextAlone = runAlone(loaded, next->generation().prompt, 4).tokens;
  ASSERT_GE(nextIds.size(), 1u);
  ASSERT_LT(nextIds.size(), 4u);
  EXPECT_TRUE(std::equal(nextIds.begin(), nextIds.end(), nextAlone.begin()));
  EXPECT_EQ(batch.metrics().requestsFinished.load(), 1u);
  auto last = requestOf(promptOf(6, 3, vocab), 4);
  ASSERT_EQ(batch.submit(last), ContinuousBatch::Admission::Queued);
  while (batch.runStep()) {
  }
  EXPECT_EQ(last->end(), ServedRequest::End::Length);
  EXPECT_EQ(idsOf(*last), runAlone(loaded, last->generation().prompt, 4).tokens);
  EXPECT_EQ(batch.metrics().requestsCancelled.load(), 2u);
}

// With no queue places, a request is taken only into a free slot; a slot counts free as soon as
// its request's end is published, before the loop runs again.
TEST(ContinuousBatchTest, AFinishedRequestsSlotIsFreeAtOnce) {
  LoadedTinyPlan loaded(oneSlotShape());
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  const int32_t vocab = static_cast<int32_t>(engine->vocab());
  ContinuousBatch batch(*engine, 0);
  auto first = requestOf(promptOf(4, 1, vocab), 3);
  ASSERT_EQ(batch.submit(first), ContinuousBatch::Admission::Queued);
  EXPECT_EQ(batch.submit(requestOf(promptOf(4, 2, vocab), 3)),
            ContinuousBatch::Admission::QueueFull);
  while (first->end() == ServedRequest::End::Running)
    ASSERT_TRUE(batch.runStep());
  EXPECT_EQ(batch.metrics().activeSlots.load(), 0u);
  auto second = requestOf(promptOf(4, 2, vocab), 3);
  ASSERT_EQ(batch.submit(second), ContinuousBatch::Admission::Queued);
  while (batch.runStep()) {
  }
  EXPECT_EQ(idsOf(*second), runAlone(loaded, second->generation().prompt, 3).tokens);
}

// Each id's log-probability is log-softmax of the logits it was chosen from, and the alternatives
// are the most likely ids in order with theirs.
TEST(ContinuousBatchTest, LogprobsAreTheModelsLogSoftmax) {
  LoadedTinyPlan loaded(largerShape());
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  const uint32_t vocab = engine->vocab();
  ContinuousBatch batch(*engine, 2);
  const uint32_t top = 5;
  auto request = requestOf(promptOf(7, 4, static_cast<int32_t>(vocab)), 6, true, top);
  ASSERT_EQ(batch.submit(request), ContinuousBatch::Admission::Queued);
  std::thread loop([&] { batch.run(); });
  awaitEnd(*request);
  batch.stop();
  loop.join();

  const Alone alone = runAlone(loaded, request->generation().prompt, 6);
  ASSERT_EQ(idsOf(*request), alone.tokens);
  for (size_t k = 0; k < alone.tokens.size(); ++k) {
    const float *row = &alone.logits[k * vocab];
    double sum = 0.0;
    const float largest = *std::max_element(row, row + vocab);
    for (uint32_t v = 0; v < vocab; ++v)
      sum += std::exp(static_cast<double>(row[v]) - largest);
    const double logSum = largest + std::log(sum);
    EXPECT_NEAR(request->logprob(k), row[alone.tokens[k]] - logSum, 1e-5) << "id " << k;
    std::vector<uint32_t> order(vocab);
    for (uint32_t v = 0; v < vocab; ++v)
      order[v] = v;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return row[a] > row[b]; });
    const TokenLogprob *alternatives = request->alternatives(k);
    for (uint32_t j = 0; j < top; ++j) {
      EXPECT_EQ(alternatives[j].id, static_cast<int32_t>(order[j])) << "id " << k << " rank " << j;
      EXPECT_NEAR(alternatives[j].logprob, row[order[j]] - logSum, 1e-5);
    }
    // Greedy: the chosen id is the most likely one.
    EXPECT_EQ(alternatives[0].id, alone.tokens[k]);
  }
}

} // namespace
} // namespace hetc
