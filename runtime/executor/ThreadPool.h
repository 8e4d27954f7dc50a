// A fixed set of threads that replays a list of phases (one per phase of the engine's ops) with a
// barrier after each. Threads are created once; run() neither allocates nor creates anything.
#pragma once

#include "runtime/format/Status.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <pthread.h>
#include <vector>

namespace hetc {

// Every thread of the pool waits here after each phase. Spins briefly (a phase is often a few
// microseconds), then sleeps on a futex so an idle or oversubscribed machine is not burnt.
class SpinFutexBarrier {
public:
  explicit SpinFutexBarrier(unsigned threadCount) : threadCount_(threadCount) {}
  void wait();

private:
  const unsigned threadCount_;
  std::atomic<uint32_t> arrived_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<uint32_t> sleepers_{0};
};

// Where a pool's threads spend their time, summed over the runs since reset(): for each phase and
// thread the time in the phase function (run) and in the barrier after it (wait), and for each
// thread the time from run() publishing the run to the thread starting its first phase
// (dispatch). Sized once; recording neither allocates nor lets two threads write one cache line.
// Phases past the sized count are not recorded.
class PhaseProfile {
public:
  struct Counter {
    uint64_t runNs = 0;
    uint64_t waitNs = 0;
  };

  PhaseProfile(size_t phases, unsigned threads);
  void reset();
  size_t phases() const { return phases_; }
  unsigned threads() const { return threads_; }
  uint64_t runs() const { return runs_; }
  const Counter &at(size_t phase, unsigned thread) const {
    return counters_[thread * stride_ + phase];
  }
  uint64_t dispatchNs(unsigned thread) const { return dispatch_[thread * kLine]; }

private:
  friend class ThreadPool;
  static constexpr size_t kLine = 64 / sizeof(uint64_t); // uint64_t per cache line
  Counter &slot(size_t phase, unsigned thread) { return counters_[thread * stride_ + phase]; }

  size_t phases_;
  unsigned threads_;
  size_t stride_; // counters per thread: phases rounded up, plus a cache line of padding
  std::vector<Counter> counters_;
  std::vector<uint64_t> dispatch_; // one cache line per thread
  uint64_t runs_ = 0;
  uint64_t publishedNs_ = 0;                 // when the current run was published
  std::atomic<unsigned> threadsRecorded_{0}; // threads done recording the current run
};

class ThreadPool {
public:
  // Work of one phase for one thread: `thread` in [0, threadCount) picks its share statically.
  using PhaseFunction = void (*)(void *context, size_t phase, unsigned thread,
                                 unsigned threadCount);

  // `threads` = 0 uses every core this process may run on. With `pin`, worker i is bound to the
  // i-th allowed core; the caller of run() counts as thread 0 and is bound to the first on its
  // first run only with `pinCaller` too (a library does not move its caller's thread unasked).
  // A core that cannot be bound leaves that thread unpinned and the pool still works.
  static Result<std::unique_ptr<ThreadPool>> create(unsigned threads, bool pin,
                                                    bool pinCaller = false);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  // Runs phases 0..phaseCount-1 in order on every thread, the calling thread being thread 0,
  // with a barrier after each phase; returns when the last phase is done everywhere.
  // Not reentrant: one run at a time.
  void run(size_t phaseCount, PhaseFunction function, void *context);

  // Records where the time of each following run goes, or stops recording (null). Call between
  // runs only; `profile` must outlive its use. Refused (false) when sized for fewer threads.
  bool setProfile(PhaseProfile *profile) {
    if (profile && profile->threads() < threadCount_)
      return false;
    profile_ = profile;
    return true;
  }
  PhaseProfile *profile() const { return profile_; }

  unsigned threadCount() const { return threadCount_; }
  // Threads actually bound to a core (0 when pinning was not asked for or not possible).
  unsigned pinnedThreads() const { return pinnedThreads_.load(std::memory_order_relaxed); }

private:
  struct WorkerStart {
    ThreadPool *pool;
    unsigned thread;
  };
  ThreadPool(unsigned threadCount, bool pin, bool pinCaller);
  static void *workerMain(void *argument);
  void workerLoop(unsigned thread);
  void runPhases(unsigned thread);
  void runPhasesProfiled(unsigned thread, PhaseProfile &profile);
  bool pinCurrentThread(unsigned thread);

  const unsigned threadCount_;
  const bool pin_;
  const bool pinCaller_;
  std::vector<int> allowedCpus_;   // cores this process may run on, in ascending order
  std::vector<pthread_t> workers_; // threads 1..threadCount-1; sized once in create()
  std::vector<WorkerStart> workerStarts_;
  unsigned startedWorkers_ = 0;
  std::atomic<unsigned> pinnedThreads_{0};
  pthread_t lastCaller_{}; // the thread run() last bound (or tried to bind)
  bool callerBindingTried_ = false;
  bool callerCounted_ = false;

  // The current run, published to the workers by incrementing runGeneration_.
  size_t phaseCount_ = 0;
  PhaseFunction function_ = nullptr;
  void *context_ = nullptr;
  PhaseProfile *profile_ = nullptr;
  std::atomic<uint32_t> runGeneration_{0};
  std::atomic<uint32_t> idleSleepers_{0};
  std::atomic<bool> stopping_{false};
  SpinFutexBarrier barrier_;
};

} // namespace hetc
