// The scratch every attention op of an engine shares: the step's cuts into units (Engine::step
// cuts each once per step, as every layer attends the same positions: one cut per distinct
// sliding window of the plan's layers), the units claimed so far in
// the current attention phase, the chunk states of rows split across threads and each thread's
// two working states. Sized at create() from the bounds (Engine::allocateAttentionScratch).
#pragma once

#include "codegen/cpu/attention/Attention.h"

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

namespace hetc {

struct AttentionScratch {
  ~AttentionScratch();
  // The step cut for the layers of one sliding window (0: none).
  struct Cut {
    size_t window = 0;
    kernels::AttentionSplit split;
  };
  std::vector<std::unique_ptr<Cut>> cuts; // one per distinct window, in order of first use
  // The cut of `window`, made on first use (at resolve; Engine::allocateAttentionScratch then
  // reserves every cut).
  const kernels::AttentionSplit &splitFor(size_t window) {
    for (const std::unique_ptr<Cut> &cut : cuts)
      if (cut->window == window)
        return cut->split;
    cuts.push_back(std::make_unique<Cut>());
    cuts.back()->window = window;
    return cuts.back()->split;
  }
  // Reset by the KV append phase before each attention phase (the barrier publishes it). On a
  // line of its own: every thread's claims write it while they read the fields around it.
  alignas(64) std::atomic<size_t> claimed{0};
  alignas(64) float *states =
      nullptr;            // never zeroed: each chunk writes its state before the merge reads
  float *work = nullptr;  // [threads][2][stateFloats]
  size_t stateFloats = 0; // the largest state of any attention op
};

} // namespace hetc
