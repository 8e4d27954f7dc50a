// Elastic batches: sequences that join and leave between steps, in reused slots, give what each
// gives alone, bit for bit, and the steps allocate nothing.
#include "AllocationCounter.h"
#include "EngineTestSupport.h"
#include "TestPlans.h"

#include "runtime/executor/Engine.h"
#include "runtime/serving/ElasticBatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace hetc {
namespace {

using test::largerShape;
using test::LoadedTinyPlan;
using test::promptOf;
using test::TinyPlanShape;

struct Schedule {
  std::vector<GenerationRequest> requests;
  std::vector<std::vector<float>> logits; // per request [maxNew, vocab]
};

// Request i: a prompt of lengths[i] ids, maxNew[i] new, arriving at step arrivals[i].
Schedule scheduleOf(const std::vector<size_t> &lengths, const std::vector<uint32_t> &maxNew,
                    const std::vector<uint64_t> &arrivals, uint32_t vocab) {
  Schedule schedule;
  schedule.logits.resize(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    schedule.logits[i].assign(static_cast<size_t>(maxNew[i]) * vocab, std::nanf(""));
    GenerationRequest request;
    request.prompt =
        promptOf(lengths[i], static_cast<int32_t>(3 + 11 * i), static_cast<int32_t>(vocab));
    request.maxNew = maxNew[i];
    request.arrivalStep = arrivals[i];
    request.logits = schedule.logits[i].data();
    schedule.requests.push_back(request);
  }
  return schedule;
}

struct Alone {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

// The request run by itself, through generateGreedy on an engine of its own.
Alone runAlone(const LoadedTinyPlan &loaded, const GenerationRequest &request) {
  Alone alone;
  std::unique_ptr<Engine> engine = loaded.engine(1);
  if (!engine)
    return alone;
  alone.logits.assign(static_cast<size_t>(request.maxNew) * engine->vocab(), std::nanf(""));
  Result<GenerateResult> result =
      generateGreedy(*engine, {request.prompt}, request.maxNew, alone.logits.data());
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.message());
  if (result.ok())
    alone.tokens = result->tokens[0];
  return alone;
}

// Runs the schedule on `threads` threads and checks every sequence against its run alone, that
// run() allocated nothing, and that the schedule really had sequences wait, share steps between
// prefill and decode, and reuse slots.
void checkSchedule(const TinyPlanShape &shape, const std::vector<size_t> &lengths,
                   const std::vector<uint32_t> &maxNew, const std::vector<uint64_t> &arrivals) {
  LoadedTinyPlan loaded(shape);
  ASSERT_TRUE(loaded.plan);
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(std::to_string(threads) + " threads, max_step_tokens " +
                 std::to_string(shape.max_step_tokens));
    std::unique_ptr<Engine> engine = loaded.engine(threads);
    ASSERT_TRUE(engine);
    Schedule schedule = scheduleOf(lengths, maxNew, arrivals, shape.vocab);
    Result<ElasticBatch> created = ElasticBatch::create(*engine, schedule.requests);
    ASSERT_TRUE(created.ok()) << created.message();
    ElasticBatch &batch = created.value();

    const size_t before = test::allocationCount();
    Status ran = batch.run();
    const size_t allocations = test::allocationCount() - before;
    ASSERT_TRUE(ran.ok()) << ran.message();
    EXPECT_EQ(allocations, 0u);

    std::multiset<uint32_t> slotsUsed;
    size_t waited = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      const RequestOutcome &outcome = batch.outcomes()[i];
      const Alone alone = runAlone(loaded, schedule.requests[i]);
      EXPECT_EQ(outcome.tokens, alone.tokens) << "request " << i;
      ASSERT_EQ(schedule.logits[i].size(), alone.logits.size());
      EXPECT_EQ(alone.logits.empty() ? 0
                                     : std::memcmp(schedule.logits[i].data(), alone.logits.data(),
                                                   alone.logits.size() * sizeof(float)),
                0)
          << "request " << i << " logits";
      EXPECT_GE(outcome.joinedAtStep, arrivals[i]) << "request " << i;
      EXPECT_GE(outcome.finishedAtStep, outcome.joinedAtStep) << "request " << i;
      waited += outcome.joinedAtStep > arrivals[i];
      slotsUsed.insert(outcome.slot);
    }
    // Not a test of the batch's arithmetic but of the schedule: it must exercise what it claims.
    EXPECT_GT(waited, 0u) << "no request waited for a slot";
    EXPECT_LT(std::set<uint32_t>(slotsUsed.begin(), slotsUsed.end()).size(), lengths.size())
        << "no slot was reused";
    EXPECT_GT(batch.stats().mixedSteps, 0u) << "no step held prefill and decode together";
    EXPECT_EQ(batch.stats().mostActive, shape.max_batch);
    size_t promptTokens = 0, decodeTokens = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      promptTokens += lengths[i];
      decodeTokens += maxNew[i] > 0 ? maxNew[i] - 1 : 0;
    }
    EXPECT_EQ(batch.stats().prefillTokens, promptTokens);
    EXPECT_EQ(batch.stats().decodeTokens, decodeTokens);
  }
}

// Three slots, seven sequences: prompts chunked over steps (20 and 30 ids at 16 per step), a
// sequence that arrives while every slot is busy, one after the batch has gone idle, one that
// only prefills.
TEST(ElasticBatchTest, JoiningAndLeavingSequencesMatchRunningAlone) {
  checkSchedule(largerShape(), {20, 3, 7, 12, 1, 30, 5, 4}, {5, 9, 4, 6, 3, 7, 2, 0},
                {0, 0, 1, 2, 4, 5, 60, 61});
}

// Fewer step tokens than decoding sequences: decodes take turns, prompts wait for room.
TEST(ElasticBatchTest, DecodesTakeTurnsWhenStepTokensAreScarce) {
  TinyPlanShape shape = largerShape();
  shape.max_step_tokens = 2;
  checkSchedule(shape, {5, 3, 4, 6}, {6, 7, 3, 4}, {0, 0, 1, 3});
}

TEST(ElasticBatchTest, RefusesRequestsThePlanCannotRun) {
  LoadedTinyPlan loaded(TinyPlanShape{}); // max_batch 2, max_seq 32, vocab 64
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  auto error = [&](std::vector<GenerationRequest> requests) {
    Result<ElasticBatch> created = ElasticBatch::create(*engine, std::move(requests));
    EXPECT_FALSE(created.ok());
    return created.ok() ? std::string() : created.message();
  };
  auto request = [](std::vector<int32_t> prompt, uint32_t maxNew, uint32_t slot, uint64_t start) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.maxNew = maxNew;
    r.slot = slot;
    r.start = start;
    return r;
  };
  const uint32_t any = GenerationRequest::kAnySlot;
  EXPECT_EQ(error({}), "no prompts given");
  EXPECT_EQ(error({request({}, 2, any, 0)}), "request 0 has an empty prompt");
  EXPECT_EQ(error({request({1}, 2, any, 0), request({1, 64}, 2, any, 0)}),
            "request 1 token 1 is id 64 but the vocabulary has 64 ids (0..63)");
  EXPECT_EQ(error({request(std::vector<int32_t>(30, 1), 3, any, 0)}),
            "request 0 needs 33 positions (30 prompt + 3 new) but the plan's --max-seq is 32");
  EXPECT_EQ(error({request({1}, 2, 2, 0)}),
            "request 0 names slot 2 but the plan's --max-batch is 2 (slots 0..1)");
  EXPECT_EQ(error({request({1}, 2, 1, 0), request({1}, 2, 1, 0)}),
            "request 1 names slot 1, which an earlier request names too");
  EXPECT_EQ(error({request({1}, 2, 0, 3)}),
            "request 0 continues 3 positions of slot 0 but the slot holds 0");
  EXPECT_EQ(error({request({1}, 2, any, 3)}),
            "request 0 starts at position 3 but names no slot holding those positions");

  // A named slot continues its cached positions: 4 cached + 2 prompt + 27 new is one too many.
  const int32_t tokens[4] = {1, 2, 3, 4};
  StepSequence fill{0, 0, tokens, 4, false};
  ASSERT_TRUE(engine->step(&fill, 1).ok());
  EXPECT_EQ(error({request({1, 2}, 27, 0, 4)}),
            "request 0 needs 33 positions (4 cached + 2 prompt + 27 new) but the plan's --max-seq "
            "is 32");
}

} // namespace
} // namespace hetc

namespace hetc {
namespace {

// A stop id (the tokenizer's end of sequence) ends its sequence right after it is generated, kept
// as the last id, and frees the slot for the next arrival; the observer sees every id in order.
TEST(ElasticBatchTest, StopIdsEndSequencesEarly) {
  LoadedTinyPlan loaded(largerShape());
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  const int32_t vocab = static_cast<int32_t>(engine->vocab());
  GenerationRequest request;
  request.prompt = promptOf(9, 5, vocab);
  request.maxNew = 10;
  const Alone alone = runAlone(loaded, request);
  ASSERT_EQ(alone.tokens.size(), 10u);

  // Stop at the id generated fourth (at its first occurrence, which may be earlier).
  const int32_t stop = alone.tokens[3];
  const size_t firstStop =
      std::find(alone.tokens.begin(), alone.tokens.end(), stop) - alone.tokens.begin();
  request.stopIds = {stop};
  std::vector<GenerationRequest> requests = {request, request};
  Result<ElasticBatch> batch = ElasticBatch::create(*engine, requests);
  ASSERT_TRUE(batch.ok()) << batch.message();
  std::vector<std::vector<int32_t>> seen(2);
  batch->onToken([&](size_t r, int32_t id) { seen[r].push_back(id); });
  ASSERT_TRUE(batch->run().ok());
  const std::vector<int32_t> expected(alone.tokens.begin(), alone.tokens.begin() + firstStop + 1);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(batch->outcomes()[r].tokens, expected);
    EXPECT_EQ(seen[r], expected);
  }
}

} // namespace
} // namespace hetc
