// The pool runs every phase on every thread, in order, with the barrier making each phase's
// writes visible to the next.
#include "runtime/executor/ThreadPool.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <atomic>
#include <vector>

namespace hetc {
namespace {

struct PhaseLog {
  static constexpr size_t kPhases = 5;
  unsigned threads = 0;
  uint64_t run = 0;             // runs started, set by the caller between runs
  std::vector<uint64_t> visits; // [phase][thread]: runs that reached this phase
  std::atomic<uint64_t> orderViolations{0};
};

void logPhase(void *context, size_t phase, unsigned thread, unsigned threadCount) {
  auto &log = *static_cast<PhaseLog *>(context);
  // Every thread must have finished the previous phase of this run (plain reads: the barrier
  // is what orders them).
  if (phase > 0)
    for (unsigned t = 0; t < threadCount; ++t)
      if (log.visits[(phase - 1) * threadCount + t] != log.run)
        log.orderViolations.fetch_add(1);
  log.visits[phase * threadCount + thread] += 1;
}

TEST(ThreadPoolTest, RunsEveryPhaseOnEveryThreadInOrder) {
  for (unsigned threads : {1u, 2u, 3u, 5u}) {
    Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::create(threads, /*pin=*/false);
    ASSERT_TRUE(pool.ok()) << pool.message();
    ASSERT_EQ((*pool)->threadCount(), threads);
    PhaseLog log;
    log.threads = threads;
    log.visits.assign(PhaseLog::kPhases * threads, 0);
    for (int run = 1; run <= 300; ++run) {
      log.run = static_cast<uint64_t>(run);
      (*pool)->run(PhaseLog::kPhases, &logPhase, &log);
    }
    EXPECT_EQ(log.orderViolations.load(), 0u) << threads << " threads";
    for (uint64_t visits : log.visits)
      EXPECT_EQ(visits, 300u) << threads << " threads";
  }
}

int allowedCoreCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

TEST(ThreadPoolTest, ZeroThreadsMeansEveryAllowedCore) {
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::create(0, /*pin=*/false);
  ASSERT_TRUE(pool.ok()) << pool.message();
  const int allowed = allowedCoreCount();
  ASSERT_GT(allowed, 0);
  EXPECT_EQ((*pool)->threadCount(), static_cast<unsigned>(allowed));
}

void noWork(void *, size_t, unsigned, unsigned) {}

// Pinning binds the workers; the caller's own thread only when asked (pinCaller).
TEST(ThreadPoolTest, PinsTheCallerOnlyWhenAsked) {
  const int allowed = allowedCoreCount();
  if (allowed < 2)
    GTEST_SKIP() << "needs two allowed cores to see a binding, this process has " << allowed;
  cpu_set_t original;
  ASSERT_EQ(sched_getaffinity(0, sizeof(original), &original), 0);
  for (bool pinCaller : {false, true}) {
    Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::create(2, /*pin=*/true, pinCaller);
    ASSERT_TRUE(pool.ok()) << pool.message();
    (*pool)->run(1, &noWork, nullptr);
    cpu_set_t now;
    ASSERT_EQ(sched_getaffinity(0, sizeof(now), &now), 0);
    if (pinCaller) {
      EXPECT_EQ(CPU_COUNT(&now), 1) << "the caller is bound to one core";
      EXPECT_EQ((*pool)->pinnedThreads(), 2u);
    } else {
      EXPECT_EQ(CPU_COUNT(&now), allowed) << "the caller's affinity is left alone";
      EXPECT_EQ((*pool)->pinnedThreads(), 1u) << "the worker alone";
    }
    pool.value().reset();
    ASSERT_EQ(sched_setaffinity(0, sizeof(original), &original), 0);
  }
}

} // namespace
} // namespace hetc
