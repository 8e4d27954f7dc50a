// What a serving loop counts, read by any thread while it runs (the server's /metrics): plain
// atomics and fixed-bucket histograms, so counting allocates nothing.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hetc {

// A Prometheus-style histogram of seconds: cumulative counts per upper bound, sum and count.
class SecondsHistogram {
public:
  static constexpr std::array<double, 14> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,    1.0,   2.5,  5.0,   10.0, 30.0};
  void observe(double seconds);
  // Prometheus text exposition of this histogram as `name` (HELP and TYPE lines included).
  void write(std::string &out, const char *name, const char *help) const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return static_cast<double>(sumMicros_.load(std::memory_order_relaxed)) * 1e-6; }

private:
  std::array<std::atomic<uint64_t>, kBounds.size()> buckets_{}; // not cumulative: one per bound
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sumMicros_{0};
};

struct ServingMetrics {
  std::atomic<uint64_t> requestsQueued{0};    // accepted into the queue
  std::atomic<uint64_t> requestsRejected{0};  // refused: queue full
  std::atomic<uint64_t> requestsFinished{0};  // ended by length, stop id or stop string
  std::atomic<uint64_t> requestsCancelled{0}; // cancelled by their owner (a client that left)
  std::atomic<uint64_t> requestsFailed{0};    // ended by a failing step
  std::atomic<uint64_t> promptTokens{0};      // prompt ids fed
  std::atomic<uint64_t> generatedTokens{0};   // ids generated
  std::atomic<uint64_t> steps{0};             // engine steps run
  std::atomic<uint32_t> queueDepth{0};        // requests waiting for a slot now
  std::atomic<uint32_t> activeSlots{0};       // slots held now
  SecondsHistogram queueWait;                 // submit to joining a slot
  SecondsHistogram timeToFirstToken;          // submit to the first id
  SecondsHistogram interTokenLatency;         // between consecutive ids of a request
  SecondsHistogram requestDuration;           // submit to the end

  // Prometheus text exposition of every metric, names prefixed "hetc_".
  std::string prometheus(uint32_t slots, size_t maxQueue) const;
};

} // namespace hetc
