// The thread pool's PhaseProfile: what it records, where, and that it records nothing when off.
// The only times asserted are lower bounds that follow from a sleep, never speeds.
#include "runtime/executor/ThreadPool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace hetc {
namespace {

std::unique_ptr<ThreadPool> makePool(unsigned threads) {
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::create(threads, false);
  EXPECT_TRUE(pool.ok());
  return pool.ok() ? std::move(pool.value()) : nullptr;
}

// Phase 1 keeps thread 0 busy for 2 ms; the others reach the barrier at once.
void phaseWithSlowThread0(void *, size_t phase, unsigned thread, unsigned) {
  if (phase == 1 && thread == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

constexpr uint64_t kMs = 1000000;

TEST(PhaseProfileTest, RecordsRunAndBarrierWaitPerPhaseAndThread) {
  std::unique_ptr<ThreadPool> pool = makePool(2);
  ASSERT_TRUE(pool);
  PhaseProfile profile(3, 2);
  ASSERT_TRUE(pool->setProfile(&profile));
  for (int run = 0; run < 4; ++run)
    pool->run(3, &phaseWithSlowThread0, nullptr);
  EXPECT_EQ(profile.runs(), 4u);
  // Thread 0 ran phase 1 for at least 4 x 2 ms; thread 1 waited for it in the barrier.
  EXPECT_GE(profile.at(1, 0).runNs, 8 * kMs);
  EXPECT_GE(profile.at(1, 1).waitNs, 4 * kMs);
  EXPECT_LT(profile.at(1, 1).runNs, profile.at(1, 0).runNs);
  for (size_t phase = 0; phase < 3; ++phase)
    for (unsigned thread = 0; thread < 2; ++thread)
      EXPECT_GT(profile.at(phase, thread).runNs + profile.at(phase, thread).waitNs, 0u)
          << "phase " << phase << " thread " << thread;

  profile.reset();
  EXPECT_EQ(profile.runs(), 0u);
  for (size_t phase = 0; phase < 3; ++phase)
    for (unsigned thread = 0; thread < 2; ++thread) {
      EXPECT_EQ(profile.at(phase, thread).runNs, 0u);
      EXPECT_EQ(profile.at(phase, thread).waitNs, 0u);
      EXPECT_EQ(profile.dispatchNs(thread), 0u);
    }
}

TEST(PhaseProfileTest, PhasesPastTheSizedCountAreRunButNotRecorded) {
  std::unique_ptr<ThreadPool> pool = makePool(2);
  ASSERT_TRUE(pool);
  PhaseProfile profile(1, 2);
  ASSERT_TRUE(pool->setProfile(&profile));
  pool->run(3, &phaseWithSlowThread0, nullptr); // phase 1 is the slow one
  EXPECT_EQ(profile.runs(), 1u);
  EXPECT_LT(profile.at(0, 0).runNs, 2 * kMs);
}

TEST(PhaseProfileTest, OffRecordsNothingAndTooSmallIsRefused) {
  std::unique_ptr<ThreadPool> pool = makePool(2);
  ASSERT_TRUE(pool);
  PhaseProfile tooSmall(3, 1);
  EXPECT_FALSE(pool->setProfile(&tooSmall));
  pool->run(3, &phaseWithSlowThread0, nullptr);
  EXPECT_EQ(tooSmall.runs(), 0u);
  EXPECT_EQ(tooSmall.at(1, 0).runNs, 0u);

  PhaseProfile profile(3, 2);
  ASSERT_TRUE(pool->setProfile(&profile));
  pool->run(3, &phaseWithSlowThread0, nullptr);
  ASSERT_TRUE(pool->setProfile(nullptr));
  const uint64_t recorded = profile.at(1, 0).runNs;
  pool->run(3, &phaseWithSlowThread0, nullptr);
  EXPECT_EQ(profile.runs(), 1u);
  EXPECT_EQ(profile.at(1, 0).runNs, recorded);
}

TEST(PhaseProfileTest, OneThreadPool) {
  std::unique_ptr<ThreadPool> pool = makePool(1);
  ASSERT_TRUE(pool);
  PhaseProfile profile(3, 1);
  ASSERT_TRUE(pool->setProfile(&profile));
  pool->run(3, &phaseWithSlowThread0, nullptr);
  EXPECT_EQ(profile.runs(), 1u);
  EXPECT_GE(profile.at(1, 0).runNs, 2 * kMs);
}

} // namespace
} // namespace hetc
