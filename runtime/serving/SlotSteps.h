// The step loop both batches share: the sequences holding the plan's slots, what each feeds in the
// next step, and the id each one gets from it.
//
// A joined sequence prefills its prompt in chunks, then decodes one id a step until it has
// maxNew ids, generates one of its stop ids, or its owner ends it. Every step carries one token of
// each decoding sequence (in turns when there are more of them than max_step_tokens) and, in what
// is left, the next prompt chunk of each prefilling one in joining order, so joiners prefill in the
// steps where the others decode. ElasticBatch admits requests by arrival step; ContinuousBatch
// admits them as a server receives them. Neither step() nor join() allocates.
#pragma once

#include "runtime/executor/Engine.h"
#include "runtime/format/Status.h"
#include "runtime/sampling/Sampler.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hetc {

// One sequence as the loop sees it. The pointers belong to the caller and must stay valid, and
// `generated` must not move, until the sequence leaves its slot.
struct SlotSequence {
  const int32_t *prompt = nullptr; // at least one id
  size_t promptSize = 0;
  uint64_t start = 0;              // cached positions of the slot the prompt continues
  uint32_t maxNew = 0;             // 0: only prefill the prompt
  const int32_t *stopIds = nullptr; // generation ends right after any of these (kept as the last)
  size_t stopIdCount = 0;
  const SamplingParams *sampling = nullptr; // null: greedy
  const int32_t *context = nullptr; // ids before the prompt the repetition penalty counts
  size_t contextSize = 0;
  bool wantLogits = false;          // the observer gets each id's logits row even when greedy
  std::vector<int32_t> *generated = nullptr; // receives the ids; capacity >= maxNew
};

// What the loop reports, on the thread that calls step().
class SlotObserver {
public:
  virtual ~SlotObserver() = default;
  // The slot's sequence has fed its whole prompt in this step.
  virtual void promptFed(uint32_t /*slot*/) {}
  // The slot's sequence got `id` (already appended to `generated`); `logits` is the row it was
  // chosen from, or null when the step found argmaxes only. True ends the sequence after it.
  virtual bool generated(uint32_t slot, int32_t id, const float *logits) = 0;
  // The sequence has ended and its slot is free: it may take another sequence now.
  virtual void finished(uint32_t slot) = 0;
};

struct SlotStepCounts {
  uint64_t steps = 0;         // engine steps run
  uint64_t prefillTokens = 0; // prompt ids fed
  uint64_t decodeTokens = 0;  // generated ids fed back
  uint64_t mixedSteps = 0;    // steps holding prompt ids of one sequence and decode ids of another
};

class SlotSteps {
public:
  // `sampling`: some sequence may sample or penalize, so the sampler is sized for every slot.
  SlotSteps(Engine &engine, bool sampling);

  // `sequence` takes free slot `slot`; its first tokens go into the next step.
  void join(uint32_t slot, const SlotSequence &sequence);
  // Ends the slot's sequence before its end (a client that left); observer.finished is not called.
  void leave(uint32_t slot);
  bool busy(uint32_t slot) const { return slots_[slot].state != State::Free; }
  size_t activeCount() const { return active_.size(); }
  uint32_t slotCount() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t vocab() const { return engine_->vocab(); }

  // One engine step over the active sequences (at least one). Fails only when the engine does.
  Status step(SlotObserver &observer);
  const SlotStepCounts &counts() const { return counts_; }

private:
  enum class State : uint8_t { Free, Prefilling, Decoding };
  struct Slot {
    SlotSequence sequence;
    State state = State::Free;
    size_t fed = 0; // prompt ids fed so far
  };
  void pack();
  void end(uint32_t slot);

  Engine *engine_;
  Sampler sampler_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> active_; // slots holding sequences, in joining order
  std::vector<StepSequence> stepSequences_;
  std::vector<uint32_t> stepSlots_; // the slot of each StepSequence
  SlotStepCounts counts_;
};

} // namespace hetc
