#include "runtime/serving/ElasticBatch.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

namespace hetc {
namespace {

std::string str(uint64_t value) { return std::to_string(value); }

bool samples(const SamplingParams &params) { return !params.greedy() || params.penalizes(); }

} // namespace

Status ElasticBatch::check(const Engine &engine, const std::vector<GenerationRequest> &requests) {
  if (requests.empty())
    return Status::error("no prompts given");
  std::vector<bool> slotNamed(engine.maxBatch(), false);
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest &request = requests[i];
    const std::string name = "request " + str(i);
    if (Status s = request.sampling.check(); !s)
      return Status::error(name + ": " + s.message());
    if (request.prompt.empty())
      return Status::error(name + " has an empty prompt");
    for (size_t j = 0; j < request.prompt.size(); ++j)
      if (request.prompt[j] < 0 || static_cast<uint32_t>(request.prompt[j]) >= engine.vocab())
        return Status::error(name + " token " + str(j) + " is id " +
                             std::to_string(request.prompt[j]) + " but the vocabulary has " +
                             str(engine.vocab()) + " ids (0.." + str(engine.vocab() - 1) + ")");
    if (request.slot == GenerationRequest::kAnySlot) {
      if (request.start != 0)
        return Status::error(name + " starts at position " + str(request.start) +
                             " but names no slot holding those positions");
    } else {
      if (request.slot >= engine.maxBatch())
        return Status::error(name + " names slot " + str(request.slot) +
                             " but the plan's --max-batch is " + str(engine.maxBatch()) +
                             " (slots 0.." + str(engine.maxBatch() - 1) + ")");
      if (slotNamed[request.slot])
        return Status::error(name + " names slot " + str(request.slot) +
                             ", which an earlier request names too");
      slotNamed[request.slot] = true;
      if (request.start > engine.cachedPositions(request.slot))
        return Status::error(name + " continues " + str(request.start) + " positions of slot " +
                             str(request.slot) + " but the slot holds " +
                             str(engine.cachedPositions(request.slot)));
    }
    const uint64_t needed = request.start + request.prompt.size() + request.maxNew;
    if (needed > engine.maxSeq())
      return Status::error(name + " needs " + str(needed) + " positions (" +
                           (request.start ? str(request.start) + " cached + " : std::string()) +
                           str(request.prompt.size()) + " prompt + " + str(request.maxNew) +
                           " new) but the plan's --max-seq is " + str(engine.maxSeq()));
  }
  return Status();
}

Result<ElasticBatch> ElasticBatch::create(Engine &engine, std::vector<GenerationRequest> requests) {
  if (Status s = check(engine, requests); !s)
    return s;
  ElasticBatch batch(engine);
  const size_t count = requests.size();
  batch.requests_ = std::move(requests);
  batch.outcomes_.resize(count);
  for (size_t i = 0; i < count; ++i) {
    // Decode steps point into these; they must never move.
    batch.outcomes_[i].tokens.reserve(batch.requests_[i].maxNew);
    if (batch.requests_[i].logits || samples(batch.requests_[i].sampling))
      batch.output_ = StepOutput::Logits;
  }
  for (const GenerationRequest &request : batch.requests_)
    if (samples(request.sampling)) {
      batch.sampler_ = Sampler(engine.vocab(), engine.maxBatch());
      break;
    }
  batch.state_.assign(count, State::Waiting);
  batch.fed_.assign(count, 0);
  batch.arrivalOrder_.resize(count);
  for (size_t i = 0; i < count; ++i)
    batch.arrivalOrder_[i] = i;
  std::stable_sort(batch.arrivalOrder_.begin(), batch.arrivalOrder_.end(), [&](size_t a, size_t b) {
    return batch.requests_[a].arrivalStep < batch.requests_[b].arrivalStep;
  });
  batch.slotBusy_.assign(engine.maxBatch(), false);
  batch.slotReserved_.assign(engine.maxBatch(), false);
  for (const GenerationRequest &request : batch.requests_)
    if (request.slot != GenerationRequest::kAnySlot)
      batch.slotReserved_[request.slot] = true;
  batch.active_.reserve(engine.maxBatch());
  batch.stepSequences_.reserve(engine.maxBatch());
  batch.stepRequests_.reserve(engine.maxBatch());
  return batch;
}

// Arrived requests take slots in arrival order: a named slot is always free for its request;
// the others take the lowest slot nobody holds or names, and wait, in order, when there is none.
void ElasticBatch::admit() {
  bool anySlotWaits = false;
  for (size_t k = nextArrival_; k < arrivalOrder_.size(); ++k) {
    const size_t r = arrivalOrder_[k];
    if (requests_[r].arrivalStep > step_)
      break;
    if (state_[r] != State::Waiting)
      continue;
    uint32_t slot = requests_[r].slot;
    if (slot == GenerationRequest::kAnySlot) {
      if (anySlotWaits)
        continue;
      for (slot = 0; slot < slotBusy_.size() && (slotBusy_[slot] || slotReserved_[slot]); ++slot) {
      }
      if (slot == slotBusy_.size()) {
        anySlotWaits = true;
        continue;
      }
    }
    slotBusy_[slot] = true;
    outcomes_[r].slot = slot;
    outcomes_[r].joinedAtStep = step_;
    state_[r] = State::Prefilling;
    if (samples(requests_[r].sampling)) {
      sampler_.begin(slot, requests_[r].sampling, requests_[r].prompt.data(),
                     requests_[r].prompt.size());
      sampler_.addContext(slot, requests_[r].context.data(), requests_[r].context.size());
    }
    active_.push_back(r); // capacity max_batch: one per slot
  }
  while (nextArrival_ < arrivalOrder_.size() &&
         state_[arrivalOrder_[nextArrival_]] != State::Waiting)
    ++nextArrival_;
}

// One token of each decoding sequence first (in turns when there are more of them than
// max_step_tokens), then prompt chunks in joining order while max_step_tokens lasts.
void ElasticBatch::packStep() {
  stepSequences_.clear();
  stepRequests_.clear();
  size_t budget = engine_->maxStepTokens();
  size_t decoding = 0;
  for (size_t r : active_)
    decoding += state_[r] == State::Decoding;
  const size_t first = decoding > budget ? step_ % active_.size() : 0;
  for (size_t k = 0; k < active_.size() && budget > 0; ++k) {
    const size_t r = active_[(first + k) % active_.size()];
    if (state_[r] != State::Decoding)
      continue;
    const std::vector<int32_t> &tokens = outcomes_[r].tokens;
    StepSequence seq;
    seq.slot = outcomes_[r].slot;
    seq.start = requests_[r].start + requests_[r].prompt.size() + tokens.size() - 1;
    seq.tokens = &tokens.back();
    seq.count = 1;
    seq.wantLogits = true;
    stepSequences_.push_back(seq);
    stepRequests_.push_back(r);
    --budget;
  }
  for (size_t k = 0; k < active_.size() && budget > 0; ++k) {
    const size_t r = active_[k];
    if (state_[r] != State::Prefilling)
      continue;
    const GenerationRequest &request = requests_[r];
    const size_t take = std::min(request.prompt.size() - fed_[r], budget);
    StepSequence seq;
    seq.slot = outcomes_[r].slot;
    seq.start = request.start + fed_[r];
    seq.tokens = request.prompt.data() + fed_[r];
    seq.count = static_cast<uint32_t>(take);
    seq.wantLogits = fed_[r] + take == request.prompt.size() && request.maxNew > 0;
    stepSequences_.push_back(seq);
    stepRequests_.push_back(r);
    budget -= take;
  }
}

void ElasticBatch::takeStepResults() {
  const size_t vocab = engine_->vocab();
  bool prefill = false, decode = false;
  for (size_t s = 0; s < stepSequences_.size(); ++s) {
    const size_t r = stepRequests_[s];
    const GenerationRequest &request = requests_[r];
    RequestOutcome &outcome = outcomes_[r];
    if (state_[r] == State::Prefilling) {
      prefill = true;
      fed_[r] += stepSequences_[s].count;
      stats_.prefillTokens += stepSequences_[s].count;
      if (fed_[r] < request.prompt.size())
        continue;
      state_[r] = State::Decoding;
      ++promptsFed_;
    } else {
      decode = true;
      ++stats_.decodeTokens;
    }
    if (request.maxNew > 0) {
      int32_t next;
      if (output_ == StepOutput::Logits) {
        const float *logits = engine_->logits(s);
        if (request.logits)
          std::memcpy(request.logits + outcome.tokens.size() * vocab, logits,
                      vocab * sizeof(float));
        if (samples(request.sampling)) {
          next = sampler_.choose(outcome.slot, logits);
          sampler_.accept(outcome.slot, next);
        } else {
          next = static_cast<int32_t>(kernels::argmaxFirst(logits, vocab));
        }
      } else {
        next = engine_->argmax(s);
      }
      outcome.tokens.push_back(next); // reserved at create()
      if (onToken_)
        onToken_(r, next);
    }
    bool stopped = false;
    if (request.maxNew > 0) {
      const int32_t last = outcome.tokens.back();
      stopped =
          std::find(request.stopIds.begin(), request.stopIds.end(), last) != request.stopIds.end();
      if (stopWhen_ && stopWhen_(r, last))
        stopped = true;
    }
    if (outcome.tokens.size() == request.maxNew || stopped) {
      state_[r] = State::Finished;
      outcome.finishedAtStep = step_;
      slotBusy_[outcome.slot] = false;
      if (request.slot != GenerationRequest::kAnySlot)
        slotReserved_[request.slot] = false;
      active_.erase(std::find(active_.begin(), active_.end(), r));
      ++finished_;
    }
  }
  stats_.mixedSteps += prefill && decode;
}

Status ElasticBatch::run() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  while (finished_ < requests_.size()) {
    admit();
    if (active_.empty()) {
      // Nothing holds a slot: go straight to the next arrival.
      size_t k = nextArrival_;
      while (k < arrivalOrder_.size() && requests_[arrivalOrder_[k]].arrivalStep <= step_)
        ++k;
      if (k == arrivalOrder_.size())
        return Status::error("no waiting request can take a slot");
      step_ = requests_[arrivalOrder_[k]].arrivalStep;
      continue;
    }
    stats_.mostActive =
        std::max<uint32_t>(stats_.mostActive, static_cast<uint32_t>(active_.size()));
    packStep();
    if (Status s = engine_->step(stepSequences_.data(), stepSequences_.size(), output_); !s)
      return s;
    ++stats_.steps;
    takeStepResults();
    ++step_;
    if (promptsFed_ == requests_.size() && stats_.promptSteps == 0) {
      stats_.promptSteps = stats_.steps;
      stats_.promptSeconds = std::chrono::duration<double>(Clock::now() - start).count();
    }
  }
  stats_.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return Status();
}

Status checkGenerateRequest(const Engine &engine, const std::vector<std::vector<int32_t>> &prompts,
                            uint32_t maxNew) {
  if (prompts.empty())
    return Status::error("no prompts given");
  if (prompts.size() > engine.maxBatch())
    return Status::error(std::to_string(prompts.size()) +
                         " prompts but the plan's --max-batch is " +
                         std::to_string(engine.maxBatch()));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> &prompt = prompts[i];
    if (prompt.empty())
      return Status::error("prompt " + std::to_string(i) + " is empty");
    const uint64_t needed = static_cast<uint64_t>(prompt.size()) + maxNew;
    if (needed > engine.maxSeq())
      return Status::error("prompt " + std::to_string(i) + " needs " + std::to_string(needed) +
                           " positions (" + std::to_string(prompt.size()) + " prompt + " +
                           std::to_string(maxNew) + " new) but the plan's --max-seq is " +
                           std::to_string(engine.maxSeq()));
    for (size_t j = 0; j < prompt.size(); ++j)
      if (prompt[j] < 0 || static_cast<uint32_t>(prompt[j]) >= engine.vocab())
        return Status::error("prompt " + std::to_string(i) + " token " + std::to_string(j) +
                             " is id " + std::to_string(prompt[j]) + " but the vocabulary has " +
                             std::to_string(engine.vocab()) + " ids (0.." +
                             std::to_string(engine.vocab() - 1) + ")");
  }
  return Status();
}

Result<GenerateResult> generateGreedy(Engine &engine,
                                      const std::vector<std::vector<int32_t>> &prompts,
                                      uint32_t maxNew, float *logitsOut) {
  if (Status s = checkGenerateRequest(engine, prompts, maxNew); !s)
    return s;
  GenerateResult result;
  result.tokens.resize(prompts.size());
  if (maxNew == 0)
    return result;
  std::vector<GenerationRequest> requests(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    requests[i].prompt = prompts[i];
    requests[i].maxNew = maxNew;
    requests[i].slot = static_cast<uint32_t>(i);
    if (logitsOut)
      requests[i].logits = logitsOut + i * static_cast<size_t>(maxNew) * engine.vocab();
  }
  Result<ElasticBatch> batch = ElasticBatch::create(engine, std::move(requests));
  if (!batch)
    return batch.status();
  if (Status s = batch.value().run(); !s)
    return s;
  const ElasticBatchStats &stats = batch.value().stats();
  for (size_t i = 0; i < prompts.size(); ++i)
    result.tokens[i] = batch.value().outcomes()[i].tokens;
  result.prefillSteps = static_cast<uint32_t>(stats.promptSteps);
  result.decodeSteps = static_cast<uint32_t>(stats.steps - stats.promptSteps);
  result.prefillSeconds = stats.promptSeconds;
  result.decodeSeconds = stats.seconds - stats.promptSeconds;
  return result;
}

} // namespace hetc
