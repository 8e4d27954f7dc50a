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

Status ElasticBatch::checkRequest(const Engine &engine, const GenerationRequest &request,
                                  const std::string &name) {
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
  return Status();
}

Status ElasticBatch::check(const Engine &engine, const std::vector<GenerationRequest> &requests) {
  if (requests.empty())
    return Status::error("no prompts given");
  std::vector<bool> slotNamed(engine.maxBatch(), false);
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest &request = requests[i];
    const std::string name = "request " + str(i);
    if (Status s = checkRequest(engine, request, name); !s)
      return s;
    if (request.slot != GenerationRequest::kAnySlot) {
      if (slotNamed[request.slot])
        return Status::error(name + " names slot " + str(request.slot) +
                             ", which an earlier request names too");
      slotNamed[request.slot] = true;
    }
  }
  return Status();
}

Result<ElasticBatch> ElasticBatch::create(Engine &engine, std::vector<GenerationRequest> requests) {
  if (Status s = check(engine, requests); !s)
    return s;
  bool sampling = false;
  for (const GenerationRequest &request : requests)
    sampling = sampling || samples(request.sampling);
  ElasticBatch batch(engine, sampling);
  const size_t count = requests.size();
  batch.requests_ = std::move(requests);
  batch.outcomes_.resize(count);
  for (size_t i = 0; i < count; ++i)
    // Decode steps point into these; they must never move.
    batch.outcomes_[i].tokens.reserve(batch.requests_[i].maxNew);
  batch.state_.assign(count, State::Waiting);
  batch.arrivalOrder_.resize(count);
  for (size_t i = 0; i < count; ++i)
    batch.arrivalOrder_[i] = i;
  std::stable_sort(batch.arrivalOrder_.begin(), batch.arrivalOrder_.end(), [&](size_t a, size_t b) {
    return batch.requests_[a].arrivalStep < batch.requests_[b].arrivalStep;
  });
  batch.slotReserved_.assign(engine.maxBatch(), false);
  batch.slotRequest_.assign(engine.maxBatch(), 0);
  for (const GenerationRequest &request : batch.requests_)
    if (request.slot != GenerationRequest::kAnySlot)
      batch.slotReserved_[request.slot] = true;
  return batch;
}

// Arrived requests take slots in arrival order: a named slot is always free for its request;
// the others take the lowest slot nobody holds or names, and wait, in order, when there is none.
void ElasticBatch::admit() {
  bool anySlotWaits = false;
  for (size_t k = nextArrival_; k < arrivalOrder_.size(); ++k) {
    const size_t r = arrivalOrder_[k];
    const GenerationRequest &request = requests_[r];
    if (request.arrivalStep > step_)
      break;
    if (state_[r] != State::Waiting)
      continue;
    uint32_t slot = request.slot;
    if (slot == GenerationRequest::kAnySlot) {
      if (anySlotWaits)
        continue;
      for (slot = 0; slot < steps_.slotCount() && (steps_.busy(slot) || slotReserved_[slot]);
           ++slot) {
      }
      if (slot == steps_.slotCount()) {
        anySlotWaits = true;
        continue;
      }
    }
    outcomes_[r].slot = slot;
    outcomes_[r].joinedAtStep = step_;
    state_[r] = State::Joined;
    slotRequest_[slot] = r;
    SlotSequence sequence;
    sequence.prompt = request.prompt.data();
    sequence.promptSize = request.prompt.size();
    sequence.start = request.start;
    sequence.maxNew = request.maxNew;
    sequence.stopIds = request.stopIds.data();
    sequence.stopIdCount = request.stopIds.size();
    sequence.sampling = &request.sampling;
    sequence.context = request.context.data();
    sequence.contextSize = request.context.size();
    sequence.wantLogits = request.logits != nullptr;
    sequence.generated = &outcomes_[r].tokens;
    steps_.join(slot, sequence);
  }
  while (nextArrival_ < arrivalOrder_.size() &&
         state_[arrivalOrder_[nextArrival_]] != State::Waiting)
    ++nextArrival_;
}

void ElasticBatch::promptFed(uint32_t /*slot*/) { ++promptsFed_; }

bool ElasticBatch::generated(uint32_t slot, int32_t id, const float *logits) {
  const size_t r = slotRequest_[slot];
  const GenerationRequest &request = requests_[r];
  if (request.logits) {
    const size_t vocab = steps_.vocab();
    std::memcpy(request.logits + (outcomes_[r].tokens.size() - 1) * vocab, logits,
                vocab * sizeof(float));
  }
  if (onToken_)
    onToken_(r, id);
  return stopWhen_ && stopWhen_(r, id);
}

void ElasticBatch::finished(uint32_t slot) {
  const size_t r = slotRequest_[slot];
  state_[r] = State::Finished;
  outcomes_[r].finishedAtStep = step_;
  if (requests_[r].slot != GenerationRequest::kAnySlot)
    slotReserved_[slot] = false;
  ++finished_;
}

Status ElasticBatch::run() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  while (finished_ < requests_.size()) {
    admit();
    if (steps_.activeCount() == 0) {
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
        std::max<uint32_t>(stats_.mostActive, static_cast<uint32_t>(steps_.activeCount()));
    if (Status s = steps_.step(*this); !s)
      return s;
    ++step_;
    if (promptsFed_ == requests_.size() && stats_.promptSteps == 0) {
      stats_.promptSteps = steps_.counts().steps;
      stats_.promptSeconds = std::chrono::duration<double>(Clock::now() - start).count();
    }
  }
  const SlotStepCounts &counts = steps_.counts();
  stats_.steps = counts.steps;
  stats_.prefillTokens = counts.prefillTokens;
  stats_.decodeTokens = counts.decodeTokens;
  stats_.mixedSteps = counts.mixedSteps;
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
