#include "runtime/serving/ServingMetrics.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cmath>
#include <cstdio>

namespace hetc {
namespace {

void line(std::string &out, const char *format, ...) __attribute__((format(printf, 2, 3)));
void line(std::string &out, const char *format, ...) {
  char buffer[256];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  if (n > 0)
    out.append(buffer, std::min<size_t>(static_cast<size_t>(n), sizeof buffer - 1));
  out += '\n';
}

void counter(std::string &out, const char *name, const char *help, uint64_t value) {
  line(out, "# HELP %s %s", name, help);
  line(out, "# TYPE %s counter", name);
  line(out, "%s %" PRIu64, name, value);
}

void gauge(std::string &out, const char *name, const char *help, uint64_t value) {
  line(out, "# HELP %s %s", name, help);
  line(out, "# TYPE %s gauge", name);
  line(out, "%s %" PRIu64, name, value);
}

} // namespace

void SecondsHistogram::observe(double seconds) {
  size_t b = 0;
  while (b < kBounds.size() && seconds > kBounds[b])
    ++b;
  if (b < kBounds.size())
    buckets_[b].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sumMicros_.fetch_add(static_cast<uint64_t>(std::llround(std::max(seconds, 0.0) * 1e6)),
                       std::memory_order_relaxed);
}

void SecondsHistogram::write(std::string &out, const char *name, const char *help) const {
  line(out, "# HELP %s %s", name, help);
  line(out, "# TYPE %s histogram", name);
  // Read the total first: buckets observed after it only make the +Inf line look short by them.
  const uint64_t total = count();
  uint64_t cumulative = 0;
  for (size_t b = 0; b < kBounds.size(); ++b) {
    cumulative += buckets_[b].load(std::memory_order_relaxed);
    line(out, "%s_bucket{le=\"%g\"} %" PRIu64, name, kBounds[b], cumulative);
  }
  line(out, "%s_bucket{le=\"+Inf\"} %" PRIu64, name, std::max(total, cumulative));
  line(out, "%s_sum %.6f", name, sum());
  line(out, "%s_count %" PRIu64, name, std::max(total, cumulative));
}

std::string ServingMetrics::prometheus(uint32_t slots, size_t maxQueue) const {
  std::string out;
  auto load = [](const auto &value) { return static_cast<uint64_t>(value.load()); };
  counter(out, "hetc_requests_queued_total", "Requests accepted into the queue.",
          load(requestsQueued));
  counter(out, "hetc_requests_rejected_total", "Requests refused with 429 because the queue was full.",
          load(requestsRejected));
  counter(out, "hetc_requests_finished_total", "Requests that ended by max_tokens, a stop id or a stop string.",
          load(requestsFinished));
  counter(out, "hetc_requests_cancelled_total", "Requests whose client left before the end.",
          load(requestsCancelled));
  counter(out, "hetc_requests_failed_total", "Requests ended by a failing engine step.",
          load(requestsFailed));
  counter(out, "hetc_prompt_tokens_total", "Prompt tokens fed.", load(promptTokens));
  counter(out, "hetc_generation_tokens_total", "Tokens generated.", load(generatedTokens));
  counter(out, "hetc_steps_total", "Engine steps run.", load(steps));
  gauge(out, "hetc_queue_depth", "Requests waiting for a slot.", load(queueDepth));
  gauge(out, "hetc_queue_capacity", "Requests that may wait for a slot (--max-queue).", maxQueue);
  gauge(out, "hetc_active_slots", "Slots holding a sequence.", load(activeSlots));
  gauge(out, "hetc_slots", "Slots of the plan (--max-batch).", slots);
  queueWait.write(out, "hetc_queue_wait_seconds", "Time from a request's arrival to its slot.");
  timeToFirstToken.write(out, "hetc_time_to_first_token_seconds",
                         "Time from a request's arrival to its first generated token.");
  interTokenLatency.write(out, "hetc_inter_token_latency_seconds",
                          "Time between consecutive tokens of a request.");
  requestDuration.write(out, "hetc_request_duration_seconds",
                        "Time from a request's arrival to its end.");
  return out;
}

} // namespace hetc
