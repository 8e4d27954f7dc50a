// Generation (greedy, or sampled per request) with sequences joining and leaving between steps, on
// one plan.
//
// Each request arrives at a step of the batch's own count. An arrived request takes a free slot
// (the lowest) and runs in the SlotSteps loop: joiners prefill in the steps where the others
// decode, and a sequence that has its max_new ids leaves at once, its slot taking the next
// arrival. Requests wait, in order, while every slot is busy. Nothing is re-planned, and run()
// allocates nothing.
#pragma once

#include "runtime/executor/Engine.h"
#include "runtime/format/Status.h"
#include "runtime/sampling/Sampler.h"
#include "runtime/serving/SlotSteps.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hetc {

struct GenerationRequest {
  std::vector<int32_t> prompt; // ids to feed, at least one
  uint32_t maxNew = 0;         // ids to generate; 0 only prefills the prompt
  uint64_t arrivalStep = 0;    // the first step the sequence may join
  // A slot whose first `start` cached positions the sequence continues (a restored session); the
  // slot is then kept for it from the first step. kAnySlot: the lowest free slot, from position 0.
  static constexpr uint32_t kAnySlot = UINT32_MAX;
  uint32_t slot = kAnySlot;
  uint64_t start = 0;
  // When not null, receives [maxNew, vocab] float32: row k the logits generated id k was picked
  // from. Steps then write logits (with none asked for, the engine only finds each argmax).
  float *logits = nullptr;
  // Generation also ends right after any of these ids (the tokenizer's end of sequence), which is
  // kept as the last id; empty: after maxNew ids only.
  std::vector<int32_t> stopIds;
  // How the next id is chosen; the default is greedy (the first of the largest logits).
  SamplingParams sampling;
  // Ids before the prompt that the repetition penalty sees too (the history of a restored
  // session, whose KV cache holds them); not fed.
  std::vector<int32_t> context;
};

// What happened to one request. Steps count from 0 as the batch runs them; steps where no
// sequence had arrived are skipped, not run.
struct RequestOutcome {
  std::vector<int32_t> tokens; // the maxNew generated ids (fewer when a stop id ended them)
  uint32_t slot = 0;
  uint64_t joinedAtStep = 0;   // the step of its first prompt token
  uint64_t finishedAtStep = 0; // the step that produced its last id (or took its last prompt token)
};

struct ElasticBatchStats {
  uint64_t steps = 0;         // engine steps run
  uint64_t prefillTokens = 0; // prompt ids fed
  uint64_t decodeTokens = 0;  // generated ids fed back
  uint64_t mixedSteps = 0;    // steps holding prompt ids of one sequence and decode ids of another
  uint32_t mostActive = 0;    // the most sequences that held slots at once
  double seconds = 0.0;       // wall time of run()
  // Steps and wall time until every request had fed its whole prompt (and got its first id).
  uint64_t promptSteps = 0;
  double promptSeconds = 0.0;
};

class ElasticBatch : private SlotObserver {
public:
  // Checks every request against the plan (ids, positions, slots) and sizes everything run()
  // touches. The engine must outlive the batch; fixed slots must already hold `start` positions.
  static Result<ElasticBatch> create(Engine &engine, std::vector<GenerationRequest> requests);
  // The checks of create() alone, so a caller can refuse requests before sizing anything for them.
  static Status check(const Engine &engine, const std::vector<GenerationRequest> &requests);
  // The checks of one request; messages start with `name`.
  static Status checkRequest(const Engine &engine, const GenerationRequest &request,
                             const std::string &name);

  // Runs every request to its end. Allocates nothing; fails on the first failing step.
  Status run();
  // Called with (request index, id) for each id as it is generated, in step order: for printing
  // text as it comes.
  void onToken(std::function<void(size_t, int32_t)> observer) { onToken_ = std::move(observer); }
  // Called with (request index, id) after onToken's observer; true ends the request right after
  // that id (a stop string its text now holds).
  void stopWhen(std::function<bool(size_t, int32_t)> predicate) {
    stopWhen_ = std::move(predicate);
  }

  const std::vector<GenerationRequest> &requests() const { return requests_; }
  const std::vector<RequestOutcome> &outcomes() const { return outcomes_; }
  const ElasticBatchStats &stats() const { return stats_; }

  ElasticBatch(ElasticBatch &&) = default;

private:
  ElasticBatch(Engine &engine, bool sampling) : steps_(engine, sampling) {}
  void admit();
  void promptFed(uint32_t slot) override;
  bool generated(uint32_t slot, int32_t id, const float *logits) override;
  void finished(uint32_t slot) override;

  enum class State : uint8_t { Waiting, Joined, Finished };

  SlotSteps steps_;
  std::function<void(size_t, int32_t)> onToken_;
  std::function<bool(size_t, int32_t)> stopWhen_;
  std::vector<GenerationRequest> requests_;
  std::vector<RequestOutcome> outcomes_;
  ElasticBatchStats stats_;
  uint64_t step_ = 0;
  size_t finished_ = 0;

  // Sized at create(): per request, per slot.
  std::vector<State> state_;
  std::vector<size_t> arrivalOrder_; // request indices by (arrivalStep, index)
  size_t nextArrival_ = 0;           // first of arrivalOrder_ not yet admitted or skipped
  size_t promptsFed_ = 0;            // requests whose whole prompt has been fed
  std::vector<bool> slotReserved_;   // per slot: named by a request that has not finished
  std::vector<size_t> slotRequest_;  // per busy slot: the request holding it
};

// Greedy generation of a fixed batch: an ElasticBatch whose requests all arrive at step 0, prompt i
// in slot i from position 0. Long prompts are prefilled over several steps of at most the plan's
// max_step_tokens; a sequence whose prompt is fed decodes in the steps where later prompts still
// prefill.
struct GenerateResult {
  std::vector<std::vector<int32_t>> tokens; // per prompt: the maxNew generated ids
  uint32_t prefillSteps = 0;                // steps until every prompt was fed (first ids included)
  uint32_t decodeSteps = 0;                 // the steps after
  double prefillSeconds = 0.0;              // their wall times
  double decodeSeconds = 0.0;
};

// Checks a request against the plan's bounds (prompt count, positions, ids) without running it,
// so a caller can refuse it before sizing anything for it; generateGreedy checks the same.
Status checkGenerateRequest(const Engine &engine, const std::vector<std::vector<int32_t>> &prompts,
                            uint32_t maxNew);

// Returns maxNew ids per prompt (no end-of-sequence stop). `logitsOut`, when not null, receives
// [prompts.size(), maxNew, vocab] float32 logits: entry (i, k) is the distribution generated id
// k of prompt i was picked from. Without it the engine finds each next id in argmax steps and
// writes no logits (same ids either way).
Result<GenerateResult> generateGreedy(Engine &engine,
                                      const std::vector<std::vector<int32_t>> &prompts,
                                      uint32_t maxNew, float *logitsOut = nullptr);

} // namespace hetc
