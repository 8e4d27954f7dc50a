// How the ops split a step's work among the pool's threads. Deterministic: a share depends only
// on the thread's index and the count, never on timing, and every element's arithmetic is the
// same whatever the split.
#pragma once

#include "runtime/executor/Op.h"

#include <algorithm>
#include <cstddef>

namespace hetc::ops {

inline size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

// Contiguous share [begin, end) of `total` units for `thread` of `threads`: neighbouring threads
// get neighbouring units (a Linear thread streams one block of W).
inline void shareOf(size_t total, unsigned thread, unsigned threads, size_t &begin, size_t &end) {
  begin = total * thread / threads;
  end = total * (thread + 1) / threads;
}

// The rows of a row-wise op this thread runs: the step's rows in tasks of `grain` rows, the
// tasks shared among the threads.
inline void rowShare(const StepRows &step, size_t grain, unsigned thread, unsigned threads,
                     size_t &begin, size_t &end) {
  size_t firstTask, lastTask;
  shareOf(ceilDiv(step.count, grain), thread, threads, firstTask, lastTask);
  begin = firstTask * grain;
  end = std::min(step.count, lastTask * grain);
}

// The grain of a row-wise op: the plan's task_grain (0: from task_count), at most the bound.
inline size_t rowGrain(uint64_t taskGrain, uint32_t taskCount, size_t maxStepTokens) {
  return taskGrain != 0 ? std::min<size_t>(taskGrain, maxStepTokens)
                        : ceilDiv(maxStepTokens, std::max<size_t>(taskCount, 1));
}

} // namespace hetc::ops
