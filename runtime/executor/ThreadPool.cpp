#include "runtime/executor/ThreadPool.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <linux/futex.h>
#include <sched.h>
#include <string>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace hetc {
namespace {

// Polling before a thread sleeps: 1000 pause instructions are roughly 10 to 50 microseconds
// (the pause latency varies by CPU), longer than a typical phase of a decode step, short enough
// not to starve other processes on a shared machine.
constexpr unsigned kSpinIterations = 1000;
// One bit per CPU in a cpu_set_t; more threads than this cannot be described to the kernel.
constexpr unsigned kMaxThreads = CPU_SETSIZE;

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "futex words are plain 32-bit integers");

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void futexWait(std::atomic<uint32_t> *word, uint32_t expected) {
  // Returns at once if *word != expected; spurious wake-ups are handled by the callers' loops.
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

void futexWakeAll(std::atomic<uint32_t> *word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

// Waits until *word differs from `seen`, spinning first; returns the new value.
uint32_t waitForChange(std::atomic<uint32_t> &word, uint32_t seen,
                       std::atomic<uint32_t> &sleepers) {
  for (unsigned i = 0; i < kSpinIterations; ++i) {
    const uint32_t current = word.load(std::memory_order_acquire);
    if (current != seen)
      return current;
    cpuRelax();
  }
  // seq_cst pairs with the waker's seq_cst increment and sleepers load: either the waker sees
  // this sleeper, or the futex sees the new value and does not sleep.
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  uint32_t current;
  while ((current = word.load(std::memory_order_seq_cst)) == seen)
    futexWait(&word, seen);
  sleepers.fetch_sub(1, std::memory_order_relaxed);
  return current;
}

uint64_t nowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

} // namespace

PhaseProfile::PhaseProfile(size_t phases, unsigned threads)
    : phases_(phases), threads_(threads), stride_((phases + kLine - 1) / kLine * kLine + kLine),
      counters_(threads * stride_), dispatch_(threads * kLine, 0) {}

void PhaseProfile::reset() {
  std::fill(counters_.begin(), counters_.end(), Counter());
  std::fill(dispatch_.begin(), dispatch_.end(), 0);
  runs_ = 0;
}

void SpinFutexBarrier::wait() {
  if (threadCount_ == 1)
    return;
  const uint32_t generation = generation_.load(std::memory_order_acquire);
  // acq_rel: the last thread to arrive sees every other thread's writes of this phase and
  // publishes them with its release of the generation.
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == threadCount_) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) != 0)
      futexWakeAll(&generation_);
    return;
  }
  waitForChange(generation_, generation, sleepers_);
}

ThreadPool::ThreadPool(unsigned threadCount, bool pin, bool pinCaller)
    : threadCount_(threadCount), pin_(pin), pinCaller_(pin && pinCaller), barrier_(threadCount) {}

Result<std::unique_ptr<ThreadPool>> ThreadPool::create(unsigned threads, bool pin, bool pinCaller) {
  std::vector<int> allowed;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set))
        allowed.push_back(cpu);
  }
  if (allowed.empty()) {
    // Affinity unknown: count online processors and do not pin.
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu = 0; cpu < (online > 0 ? online : 1); ++cpu)
      allowed.push_back(static_cast<int>(cpu));
    pin = false;
  }
  if (threads == 0)
    threads = static_cast<unsigned>(allowed.size());
  if (threads > kMaxThreads)
    return Status::error("--threads " + std::to_string(threads) + " exceeds the maximum of " +
                         std::to_string(kMaxThreads));

  std::unique_ptr<ThreadPool> pool(new ThreadPool(threads, pin, pinCaller));
  pool->allowedCpus_ = std::move(allowed);
  pool->workers_.resize(threads - 1);
  pool->workerStarts_.resize(threads - 1);
  for (unsigned thread = 1; thread < threads; ++thread) {
    auto &start = pool->workerStarts_[thread - 1];
    start.pool = pool.get();
    start.thread = thread;
    int error =
        pthread_create(&pool->workers_[thread - 1], nullptr, &ThreadPool::workerMain, &start);
    if (error != 0)
      // The destructor stops and joins the workers already started.
      return Status::error("cannot start thread " + std::to_string(thread) + " of " +
                           std::to_string(threads) + ": " + std::strerror(error));
    ++pool->startedWorkers_;
  }
  return Result<std::unique_ptr<ThreadPool>>(std::move(pool));
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_seq_cst);
  runGeneration_.fetch_add(1, std::memory_order_seq_cst);
  futexWakeAll(&runGeneration_);
  for (unsigned i = 0; i < startedWorkers_; ++i)
    pthread_join(workers_[i], nullptr);
}

bool ThreadPool::pinCurrentThread(unsigned thread) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(allowedCpus_[thread % allowedCpus_.size()], &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

void *ThreadPool::workerMain(void *argument) {
  auto *start = static_cast<WorkerStart *>(argument);
  start->pool->workerLoop(start->thread);
  return nullptr;
}

void ThreadPool::workerLoop(unsigned thread) {
  if (pin_ && pinCurrentThread(thread))
    pinnedThreads_.fetch_add(1, std::memory_order_relaxed);
  uint32_t seen = 0; // runGeneration_ at creation
  for (;;) {
    seen = waitForChange(runGeneration_, seen, idleSleepers_);
    if (stopping_.load(std::memory_order_acquire))
      return;
    runPhases(thread);
  }
}

void ThreadPool::runPhases(unsigned thread) {
  // Read the run once, before the first barrier: after the last barrier the caller may already
  // be publishing the next run into these fields.
  const size_t phaseCount = phaseCount_;
  const PhaseFunction function = function_;
  void *const context = context_;
  if (PhaseProfile *profile = profile_) {
    runPhasesProfiled(thread, *profile);
    return;
  }
  for (size_t phase = 0; phase < phaseCount; ++phase) {
    function(context, phase, thread, threadCount_);
    barrier_.wait();
  }
}

void ThreadPool::runPhasesProfiled(unsigned thread, PhaseProfile &profile) {
  const size_t phaseCount = phaseCount_;
  const PhaseFunction function = function_;
  void *const context = context_;
  uint64_t start = nowNs();
  profile.dispatch_[thread * PhaseProfile::kLine] += start - profile.publishedNs_;
  for (size_t phase = 0; phase < phaseCount; ++phase) {
    function(context, phase, thread, threadCount_);
    const uint64_t ran = nowNs();
    barrier_.wait();
    const uint64_t released = nowNs();
    if (phase < profile.phases_) {
      PhaseProfile::Counter &counter = profile.slot(phase, thread);
      counter.runNs += ran - start;
      counter.waitNs += released - ran;
    }
    start = released;
  }
  // Lets run() return only once every thread's counters of this run are written.
  profile.threadsRecorded_.fetch_add(1, std::memory_order_release);
}

void ThreadPool::run(size_t phaseCount, PhaseFunction function, void *context) {
  // Without a phase there is no barrier to wait for the workers' reads of the run below.
  if (phaseCount == 0)
    return;
  if (pinCaller_ && (!callerBindingTried_ || !pthread_equal(lastCaller_, pthread_self()))) {
    // The caller is thread 0: bind whichever thread calls, once each time the caller changes.
    if (pinCurrentThread(0) && !callerCounted_) {
      pinnedThreads_.fetch_add(1, std::memory_order_relaxed);
      callerCounted_ = true;
    }
    callerBindingTried_ = true;
    lastCaller_ = pthread_self();
  }
  phaseCount_ = phaseCount;
  function_ = function;
  context_ = context;
  PhaseProfile *const profile = profile_;
  if (profile) {
    profile->threadsRecorded_.store(0, std::memory_order_relaxed);
    profile->publishedNs_ = nowNs();
  }
  if (threadCount_ > 1) {
    // Publishes the run above to the workers (they load the generation with acquire).
    runGeneration_.fetch_add(1, std::memory_order_seq_cst);
    if (idleSleepers_.load(std::memory_order_seq_cst) != 0)
      futexWakeAll(&runGeneration_);
  }
  runPhases(0);
  if (profile) {
    while (profile->threadsRecorded_.load(std::memory_order_acquire) != threadCount_)
      cpuRelax();
    ++profile->runs_;
  }
}

} // namespace hetc
