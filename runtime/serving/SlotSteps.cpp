#include "runtime/serving/SlotSteps.h"

#include <algorithm>

namespace hetc {
namespace {

bool samples(const SlotSequence &sequence) {
  return sequence.sampling && (!sequence.sampling->greedy() || sequence.sampling->penalizes());
}

} // namespace

SlotSteps::SlotSteps(Engine &engine, bool sampling)
    : engine_(&engine), sampler_(engine.vocab(), sampling ? engine.maxBatch() : 0),
      slots_(engine.maxBatch()) {
  active_.reserve(engine.maxBatch());
  stepSequences_.reserve(engine.maxBatch());
  stepSlots_.reserve(engine.maxBatch());
}

void SlotSteps::join(uint32_t slot, const SlotSequence &sequence) {
  Slot &s = slots_[slot];
  s.sequence = sequence;
  s.state = State::Prefilling;
  s.fed = 0;
  if (samples(sequence)) {
    sampler_.begin(slot, *sequence.sampling, sequence.prompt, sequence.promptSize);
    sampler_.addContext(slot, sequence.context, sequence.contextSize);
  }
  active_.push_back(slot); // capacity max_batch: one per slot
}

void SlotSteps::leave(uint32_t slot) {
  if (slots_[slot].state != State::Free)
    end(slot);
}

void SlotSteps::end(uint32_t slot) {
  slots_[slot].state = State::Free;
  active_.erase(std::find(active_.begin(), active_.end(), slot));
}

// One token of each decoding sequence first (in turns when there are more of them than
// max_step_tokens), then prompt chunks in joining order while max_step_tokens lasts.
void SlotSteps::pack() {
  stepSequences_.clear();
  stepSlots_.clear();
  size_t budget = engine_->maxStepTokens();
  size_t decoding = 0;
  for (uint32_t slot : active_)
    decoding += slots_[slot].state == State::Decoding;
  const size_t first = decoding > budget ? counts_.steps % active_.size() : 0;
  for (size_t k = 0; k < active_.size() && budget > 0; ++k) {
    const uint32_t slot = active_[(first + k) % active_.size()];
    const Slot &s = slots_[slot];
    if (s.state != State::Decoding)
      continue;
    const std::vector<int32_t> &tokens = *s.sequence.generated;
    StepSequence seq;
    seq.slot = slot;
    seq.start = s.sequence.start + s.sequence.promptSize + tokens.size() - 1;
    seq.tokens = &tokens.back();
    seq.count = 1;
    seq.wantLogits = true;
    stepSequences_.push_back(seq);
    stepSlots_.push_back(slot);
    --budget;
  }
  for (size_t k = 0; k < active_.size() && budget > 0; ++k) {
    const uint32_t slot = active_[k];
    const Slot &s = slots_[slot];
    if (s.state != State::Prefilling)
      continue;
    const size_t take = std::min(s.sequence.promptSize - s.fed, budget);
    StepSequence seq;
    seq.slot = slot;
    seq.start = s.sequence.start + s.fed;
    seq.tokens = s.sequence.prompt + s.fed;
    seq.count = static_cast<uint32_t>(take);
    seq.wantLogits = s.fed + take == s.sequence.promptSize && s.sequence.maxNew > 0;
    stepSequences_.push_back(seq);
    stepSlots_.push_back(slot);
    budget -= take;
  }
}

Status SlotSteps::step(SlotObserver &observer) {
  pack();
  // Logits only when some sequence needs its row; otherwise the engine finds argmaxes, which
  // are the same ids.
  StepOutput output = StepOutput::Argmax;
  for (uint32_t slot : stepSlots_)
    if (samples(slots_[slot].sequence) || slots_[slot].sequence.wantLogits)
      output = StepOutput::Logits;
  if (Status s = engine_->step(stepSequences_.data(), stepSequences_.size(), output); !s)
    return s;
  ++counts_.steps;

  const size_t vocab = engine_->vocab();
  bool prefill = false, decode = false;
  for (size_t k = 0; k < stepSequences_.size(); ++k) {
    const uint32_t slot = stepSlots_[k];
    Slot &s = slots_[slot];
    const SlotSequence &sequence = s.sequence;
    if (s.state == State::Prefilling) {
      prefill = true;
      s.fed += stepSequences_[k].count;
      counts_.prefillTokens += stepSequences_[k].count;
      if (s.fed < sequence.promptSize)
        continue;
      s.state = State::Decoding;
      observer.promptFed(slot);
    } else {
      decode = true;
      ++counts_.decodeTokens;
    }
    if (sequence.maxNew == 0) {
      end(slot);
      observer.finished(slot);
      continue;
    }
    int32_t next;
    const float *logits = nullptr;
    if (output == StepOutput::Logits) {
      logits = engine_->logits(k);
      if (samples(sequence)) {
        next = sampler_.choose(slot, logits);
        sampler_.accept(slot, next);
      } else {
        next = static_cast<int32_t>(kernels::argmaxFirst(logits, vocab));
      }
    } else {
      next = engine_->argmax(k);
    }
    sequence.generated->push_back(next); // capacity maxNew
    bool stopped = observer.generated(slot, next, logits);
    stopped = stopped || std::find(sequence.stopIds, sequence.stopIds + sequence.stopIdCount,
                                   next) != sequence.stopIds + sequence.stopIdCount;
    if (stopped || sequence.generated->size() == sequence.maxNew) {
      end(slot);
      observer.finished(slot);
    }
  }
  counts_.mixedSteps += prefill && decode;
  return Status();
}

} // namespace hetc
