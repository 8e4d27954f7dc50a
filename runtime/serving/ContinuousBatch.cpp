#include "runtime/serving/ContinuousBatch.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hetc {
namespace {

using Clock = std::chrono::steady_clock;

double secondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

} // namespace

ServedRequest::ServedRequest(GenerationRequest generation, bool logprobs, uint32_t topLogprobs)
    : generation_(std::move(generation)), logprobs_(logprobs || topLogprobs > 0),
      topLogprobs_(std::min(topLogprobs, kMaxTopLogprobs)) {
  const size_t maxNew = generation_.maxNew;
  ids_ = std::make_unique<int32_t[]>(maxNew);
  if (logprobs_)
    chosenLogprobs_ = std::make_unique<float[]>(maxNew);
  if (topLogprobs_ > 0)
    alternatives_ = std::make_unique<TokenLogprob[]>(maxNew * topLogprobs_);
  generated_.reserve(maxNew);
}

size_t ServedRequest::wait(size_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return count_ > seen || end_ != End::Running; });
  return count_;
}

ServedRequest::End ServedRequest::end() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return end_;
}

std::string ServedRequest::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

// Log-probabilities of the model's distribution: logit - log(sum(exp(logits))).
void ServedRequest::publish(int32_t id, const float *logits, uint32_t vocab) {
  const size_t k = count_; // only this thread changes count_
  ids_[k] = id;
  if (logprobs_ && logits) {
    float largest = -std::numeric_limits<float>::infinity();
    for (uint32_t v = 0; v < vocab; ++v)
      largest = std::max(largest, logits[v]);
    double sum = 0.0;
    for (uint32_t v = 0; v < vocab; ++v)
      sum += std::exp(static_cast<double>(logits[v]) - largest);
    const double logSum = largest + std::log(sum);
    chosenLogprobs_[k] = static_cast<float>(logits[id] - logSum);
    // The topLogprobs largest, most likely first (the lower id first among equals).
    // (No alternatives are allocated when none are asked for: no element is named then.)
    TokenLogprob *top = alternatives_.get() + k * topLogprobs_;
    uint32_t kept = 0;
    for (uint32_t v = 0; v < vocab && topLogprobs_ > 0; ++v) {
      const float value = logits[v];
      if (kept == topLogprobs_ && value <= top[kept - 1].logprob)
        continue;
      uint32_t at = std::min(kept, topLogprobs_ - 1);
      while (at > 0 && top[at - 1].logprob < value) {
        top[at] = top[at - 1];
        --at;
      }
      top[at] = {static_cast<int32_t>(v), value};
      kept = std::min(kept + 1, topLogprobs_);
    }
    for (uint32_t j = 0; j < kept; ++j)
      top[j].logprob = static_cast<float>(top[j].logprob - logSum);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
  }
  changed_.notify_all();
}

void ServedRequest::finish(End end, std::string failure) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    end_ = end;
    failure_ = std::move(failure);
  }
  changed_.notify_all();
}

void ServedRequest::endByOwner(ServingMetrics &metrics) {
  if (ending_.load(std::memory_order_relaxed) == Ending::Stop) {
    metrics.requestsFinished.fetch_add(1, std::memory_order_relaxed);
    finish(End::Stopped);
  } else {
    metrics.requestsCancelled.fetch_add(1, std::memory_order_relaxed);
    finish(End::Cancelled);
  }
}

ContinuousBatch::ContinuousBatch(Engine &engine, size_t maxQueue)
    : engine_(&engine), steps_(engine, /*sampling=*/true), slotRequest_(engine.maxBatch()),
      queue_(maxQueue + engine.maxBatch()), maxQueue_(maxQueue) {}

ContinuousBatch::~ContinuousBatch() { stop(); }

Status ContinuousBatch::check(const GenerationRequest &generation) const {
  if (generation.slot != GenerationRequest::kAnySlot || generation.start != 0)
    return Status::error("a served request takes any slot from position 0");
  return ElasticBatch::checkRequest(*engine_, generation, "request");
}

ContinuousBatch::Admission ContinuousBatch::submit(std::shared_ptr<ServedRequest> request) {
  request->submitted_ = Clock::now();
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    if (stopping_ || refusing_)
      return Admission::Stopped;
    if (queued_ + held_.load() >= queue_.size()) {
      metrics_.requestsRejected.fetch_add(1, std::memory_order_relaxed);
      return Admission::QueueFull;
    }
    queue_[(queueHead_ + queued_) % queue_.size()] = std::move(request);
    ++queued_;
    metrics_.queueDepth.store(static_cast<uint32_t>(queued_), std::memory_order_relaxed);
    metrics_.requestsQueued.fetch_add(1, std::memory_order_relaxed);
  }
  queueChanged_.notify_one();
  return Admission::Queued;
}

// Queued requests take the lowest free slots in arrival order; one cancelled while it waited ends
// without a slot.
void ContinuousBatch::admitLocked() {
  uint32_t slot = 0;
  while (queued_ > 0) {
    std::shared_ptr<ServedRequest> &head = queue_[queueHead_];
    if (!head->cancelled()) {
      while (slot < steps_.slotCount() && steps_.busy(slot))
        ++slot;
      if (slot == steps_.slotCount())
        break;
    }
    std::shared_ptr<ServedRequest> request = std::move(head);
    queueHead_ = (queueHead_ + 1) % queue_.size();
    --queued_;
    if (request->cancelled()) {
      request->endByOwner(metrics_);
      continue;
    }
    const Clock::time_point now = Clock::now();
    metrics_.queueWait.observe(secondsBetween(request->submitted_, now));
    const GenerationRequest &generation = request->generation_;
    SlotSequence sequence;
    sequence.prompt = generation.prompt.data();
    sequence.promptSize = generation.prompt.size();
    sequence.maxNew = generation.maxNew;
    sequence.stopIds = generation.stopIds.data();
    sequence.stopIdCount = generation.stopIds.size();
    sequence.sampling = &generation.sampling;
    sequence.context = generation.context.data();
    sequence.contextSize = generation.context.size();
    sequence.wantLogits = request->logprobs();
    sequence.generated = &request->generated_;
    steps_.join(slot, sequence);
    held_.fetch_add(1);
    slotRequest_[slot] = std::move(request);
  }
  metrics_.queueDepth.store(static_cast<uint32_t>(queued_), std::memory_order_relaxed);
  metrics_.activeSlots.store(static_cast<uint32_t>(steps_.activeCount()),
                             std::memory_order_relaxed);
}

void ContinuousBatch::dropCancelled() {
  for (uint32_t slot = 0; slot < slotRequest_.size(); ++slot) {
    if (!slotRequest_[slot] || !slotRequest_[slot]->cancelled())
      continue;
    std::shared_ptr<ServedRequest> request = vacate(slot);
    metrics_.requestDuration.observe(secondsBetween(request->submitted_, Clock::now()));
    request->endByOwner(metrics_);
  }
}

bool ContinuousBatch::runStep() {
  dropCancelled();
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    admitLocked();
  }
  if (steps_.activeCount() == 0)
    return false;
  const uint64_t prefillBefore = steps_.counts().prefillTokens;
  if (Status s = steps_.step(*this); !s) {
    // The sequences of the failed step hold positions they never got: end them all.
    for (uint32_t slot = 0; slot < slotRequest_.size(); ++slot) {
      if (!slotRequest_[slot])
        continue;
      metrics_.requestsFailed.fetch_add(1, std::memory_order_relaxed);
      vacate(slot)->finish(ServedRequest::End::Failed, s.message());
    }
    return true;
  }
  metrics_.steps.fetch_add(1, std::memory_order_relaxed);
  metrics_.promptTokens.fetch_add(steps_.counts().prefillTokens - prefillBefore,
                                  std::memory_order_relaxed);
  metrics_.activeSlots.store(static_cast<uint32_t>(steps_.activeCount()),
                             std::memory_order_relaxed);
  return true;
}

void ContinuousBatch::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(queueMutex_);
      if (stopping_)
        break;
    }
    if (runStep())
      continue;
    std::unique_lock<std::mutex> lock(queueMutex_);
    queueChanged_.wait(lock, [&] { return stopping_ || queued_ > 0; });
  }
  // Stopped: nothing more runs.
  for (uint32_t slot = 0; slot < slotRequest_.size(); ++slot)
    if (slotRequest_[slot])
      vacate(slot)->finish(ServedRequest::End::Cancelled);
  std::lock_guard<std::mutex> lock(queueMutex_);
  for (; queued_ > 0; --queued_, queueHead_ = (queueHead_ + 1) % queue_.size())
    std::move(queue_[queueHead_])->finish(ServedRequest::End::Cancelled);
  metrics_.queueDepth.store(0, std::memory_order_relaxed);
  metrics_.activeSlots.store(0, std::memory_order_relaxed);
}

void ContinuousBatch::refuseNew() {
  std::lock_guard<std::mutex> lock(queueMutex_);
  refusing_ = true;
}

void ContinuousBatch::stop() {
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    stopping_ = true;
  }
  queueChanged_.notify_all();
}

uint32_t ContinuousBatch::retryAfterSeconds() const {
  const uint64_t ended = metrics_.requestDuration.count();
  const double mean = ended ? metrics_.requestDuration.sum() / static_cast<double>(ended) : 1.0;
  size_t queued;
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    queued = queued_;
  }
  // The queue drains at about slots requests per mean request time.
  const double seconds = mean * static_cast<double>(queued + 1) / std::max(1u, slots());
  return static_cast<uint32_t>(std::clamp(std::ceil(seconds), 1.0, 3600.0));
}

bool ContinuousBatch::generated(uint32_t slot, int32_t id, const float *logits) {
  ServedRequest &request = *slotRequest_[slot];
  const Clock::time_point now = Clock::now();
  if (request.generated_.size() == 1)
    metrics_.timeToFirstToken.observe(secondsBetween(request.submitted_, now));
  else
    metrics_.interTokenLatency.observe(secondsBetween(request.lastId_, now));
  request.lastId_ = now;
  metrics_.generatedTokens.fetch_add(1, std::memory_order_relaxed);
  request.publish(id, logits, engine_->vocab());
  return request.cancelled();
}

// The slot's count and gauge drop before the caller publishes the request's end, so an owner that
// sees its end and submits again finds the slot counted free.
std::shared_ptr<ServedRequest> ContinuousBatch::vacate(uint32_t slot) {
  steps_.leave(slot); // nothing when SlotSteps has ended the sequence itself
  held_.fetch_sub(1);
  metrics_.activeSlots.store(static_cast<uint32_t>(steps_.activeCount()),
                             std::memory_order_relaxed);
  return std::move(slotRequest_[slot]);
}

void ContinuousBatch::finished(uint32_t slot) {
  std::shared_ptr<ServedRequest> request = vacate(slot);
  metrics_.requestDuration.observe(secondsBetween(request->submitted_, Clock::now()));
  const std::vector<int32_t> &stops = request->generation_.stopIds;
  if (request->cancelled()) {
    request->endByOwner(metrics_);
    return;
  }
  metrics_.requestsFinished.fetch_add(1, std::memory_order_relaxed);
  const bool stopId = !request->generated_.empty() &&
                      std::find(stops.begin(), stops.end(), request->generated_.back()) != stops.end();
  request->finish(stopId ? ServedRequest::End::StopId : ServedRequest::End::Length);
}

} // namespace hetc
