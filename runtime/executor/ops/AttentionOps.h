// The scratch every attention op of an engine shares: the step's cut into units (Engine::step
// cuts it once per step, as every layer attends the same positions), the units claimed so far in
// the current attention phase, the chunk states of rows split across threads and each thread's
// two working states. Sized at create() from the bounds (Engine::allocateAttentionScratch).
#pragma once

#include "codegen/cpu/attention/Attention.h"

#include <atomic>
#include <cstddef>

namespace hetc {

struct AttentionScratch {
  ~AttentionScratch();
  kernels::AttentionSplit split;
  // Reset by the KV append phase before each attention phase (the barrier publishes it). On a
  // line of its own: every thread's claims write it while they read the fields around it.
  alignas(64) std::atomic<size_t> claimed{0};
  alignas(64) float *states =
      nullptr;            // never zeroed: each chunk writes its state before the merge reads
  float *work = nullptr;  // [threads][2][stateFloats]
  size_t stateFloats = 0; // the largest state of any attention op
  size_t window = 0;      // the plan's sliding window (AttentionParamsDef.sliding_window), 0: none
};

} // namespace hetc
