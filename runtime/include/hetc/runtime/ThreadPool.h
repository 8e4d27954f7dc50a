// A fixed set of threads that replays a list of phases (one per op of the task collection) with a
// barrier after each. Threads are created once; run() neither allocates nor creates anything.
#pragma once

#include "hetc/runtime/Status.h"

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

class ThreadPool {
public:
  // Work of one phase for one thread: `thread` in [0, threadCount) picks its share statically.
  using PhaseFunction = void (*)(void *context, size_t phase, unsigned thread,
                                 unsigned threadCount);

  // `threads` = 0 uses every core this process may run on. With `pin`, thread i is bound to the
  // i-th allowed core (the caller of run() counts as thread 0 and is bound on its first run);
  // a core that cannot be bound leaves that thread unpinned and the pool still works.
  static Result<std::unique_ptr<ThreadPool>> create(unsigned threads, bool pin);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  // Runs phases 0..phaseCount-1 in order on every thread, the calling thread being thread 0,
  // with a barrier after each phase; returns when the last phase is done everywhere.
  // Not reentrant: one run at a time.
  void run(size_t phaseCount, PhaseFunction function, void *context);

  unsigned threadCount() const { return threadCount_; }
  // Threads actually bound to a core (0 when pinning was not asked for or not possible).
  unsigned pinnedThreads() const { return pinnedThreads_.load(std::memory_order_relaxed); }

private:
  struct WorkerStart {
    ThreadPool *pool;
    unsigned thread;
  };
  ThreadPool(unsigned threadCount, bool pin);
  static void *workerMain(void *argument);
  void workerLoop(unsigned thread);
  void runPhases(unsigned thread);
  bool pinCurrentThread(unsigned thread);

  const unsigned threadCount_;
  const bool pin_;
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
  std::atomic<uint32_t> runGeneration_{0};
  std::atomic<uint32_t> idleSleepers_{0};
  std::atomic<bool> stopping_{false};
  SpinFutexBarrier barrier_;
};

} // namespace hetc
