// Serving: requests submitted from any thread join the running batch between steps.
//
// One thread runs the loop (run()). Between two steps it hands free slots (the lowest first) to
// queued requests in arrival order and frees the slots of requests their owners cancelled; the
// steps themselves are SlotSteps', so a joiner prefills in the steps where the others decode and a
// sequence's ids do not depend on what else is in the batch. Requests wait in a bounded queue while
// every slot is busy; past its bound submit() refuses them. Each generated id (with its
// log-probability when asked) is published to its request, whose owner waits for it on another
// thread. Per step nothing is allocated: a request's buffers are sized when it is prepared.
#pragma once

#include "runtime/serving/ElasticBatch.h"
#include "runtime/serving/ServingMetrics.h"
#include "runtime/serving/SlotSteps.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hetc {

// A generated id's log-probability and the most likely alternatives, from the model's logits
// (before penalties and temperature: the distribution the model gave).
struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

class ServedRequest {
public:
  static constexpr uint32_t kMaxTopLogprobs = 20;

  enum class End : uint8_t {
    Running,   // not ended yet (queued or in a slot)
    Length,    // maxNew ids
    StopId,    // one of stopIds, kept as the last id
    Stopped,   // its owner found the end (a stop string in the text): stop() was called
    Cancelled, // its owner cancelled it (a client that left)
    Failed,    // an engine step failed: failure() says why
  };

  // What to generate: prompt, maxNew, stopIds and sampling (slot and start are not used: a
  // served request takes any free slot from position 0). `logprobs` asks for each id's
  // log-probability and `topLogprobs` for that many alternatives (at most kMaxTopLogprobs).
  ServedRequest(GenerationRequest generation, bool logprobs, uint32_t topLogprobs);

  const GenerationRequest &generation() const { return generation_; }
  bool logprobs() const { return logprobs_ || topLogprobs_ > 0; }
  uint32_t topLogprobs() const { return topLogprobs_; }

  // Owner side. Blocks until more than `seen` ids are published, the request ends, or `timeout`
  // passes; returns how many ids are published. Ids below that count no longer change.
  size_t wait(size_t seen, std::chrono::milliseconds timeout);
  End end() const;
  std::string failure() const;
  int32_t id(size_t k) const { return ids_[k]; }
  float logprob(size_t k) const { return logprobs_ ? chosenLogprobs_[k] : 0.0f; }
  const TokenLogprob *alternatives(size_t k) const { return &alternatives_[k * topLogprobs_]; }
  // The owner no longer wants ids: the slot is freed before the next step. cancel(): nobody will
  // read them (a client that left); stop(): the answer is complete (a stop string in the text).
  void cancel() { ending_.store(Ending::Cancel, std::memory_order_relaxed); }
  void stop() { ending_.store(Ending::Stop, std::memory_order_relaxed); }
  bool cancelled() const { return ending_.load(std::memory_order_relaxed) != Ending::None; }

private:
  friend class ContinuousBatch;
  void publish(int32_t id, const float *logits, uint32_t vocab);
  void finish(End end, std::string failure = {});

  GenerationRequest generation_;
  bool logprobs_;
  uint32_t topLogprobs_;
  std::unique_ptr<int32_t[]> ids_;                // [maxNew]
  std::unique_ptr<float[]> chosenLogprobs_;       // [maxNew] when logprobs
  std::unique_ptr<TokenLogprob[]> alternatives_;  // [maxNew, topLogprobs]
  enum class Ending : uint8_t { None, Cancel, Stop };
  std::atomic<Ending> ending_{Ending::None};
  // How the loop ends a request its owner cancelled or stopped, counting it in `metrics`.
  void endByOwner(ServingMetrics &metrics);

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  size_t count_ = 0; // ids published
  End end_ = End::Running;
  std::string failure_;

  // Kept by the loop thread alone.
  std::chrono::steady_clock::time_point submitted_;
  std::chrono::steady_clock::time_point lastId_;
  std::vector<int32_t> generated_; // the ids as SlotSteps appends them; capacity maxNew
};

class ContinuousBatch : private SlotObserver {
public:
  // `maxQueue`: requests that may wait while every slot is busy (0: none); one more is refused.
  ContinuousBatch(Engine &engine, size_t maxQueue);
  ~ContinuousBatch() override;

  // The checks a request must pass (ids, positions, sampling), as one message naming its field.
  Status check(const GenerationRequest &generation) const;

  enum class Admission : uint8_t { Queued, QueueFull, Stopped };
  // Any thread. The request must have passed check(). Queued: it is the loop's until it ends.
  Admission submit(std::shared_ptr<ServedRequest> request);

  // The loop: runs steps while requests hold slots, sleeps while none does, returns after stop().
  // A failing engine step ends the requests in that step as Failed; the others go on.
  void run();
  // One turn of the loop, without waiting: frees the slots of cancelled requests, admits queued
  // ones, and runs one step if any slot is held. False when no slot is held (nothing ran).
  bool runStep();
  // Any thread: run() returns after the current step; queued and running requests end Cancelled.
  void stop();
  // Any thread: submit() refuses every new request (Stopped) while the loop goes on with the
  // queued and running ones (a server draining before it stops).
  void refuseNew();

  // Seconds until a slot is likely to be free for a request queued now, at least 1: for 429
  // responses' Retry-After.
  uint32_t retryAfterSeconds() const;

  const ServingMetrics &metrics() const { return metrics_; }
  uint32_t slots() const { return steps_.slotCount(); }
  size_t maxQueue() const { return maxQueue_; }
  uint64_t maxSeq() const { return engine_->maxSeq(); }

private:
  void admitLocked();
  void dropCancelled();
  // Ends the slot's sequence if it runs and hands back its request.
  std::shared_ptr<ServedRequest> vacate(uint32_t slot);
  bool generated(uint32_t slot, int32_t id, const float *logits) override;
  void finished(uint32_t slot) override;

  Engine *engine_;
  SlotSteps steps_;
  ServingMetrics metrics_;
  std::vector<std::shared_ptr<ServedRequest>> slotRequest_; // per slot; null when free

  mutable std::mutex queueMutex_;
  std::condition_variable queueChanged_;
  // A ring of maxQueue + slots entries, so queuing allocates nothing. A request is refused when
  // the queued and the slot-holding requests fill it: a slot that has just been freed counts as
  // free even before the loop hands it to a queued request.
  std::vector<std::shared_ptr<ServedRequest>> queue_;
  size_t maxQueue_;
  std::atomic<uint32_t> held_{0}; // slots held; lowered before a request's end is published
  size_t queueHead_ = 0;
  size_t queued_ = 0;
  bool stopping_ = false;
  bool refusing_ = false; // refuseNew()
};

} // namespace hetc
