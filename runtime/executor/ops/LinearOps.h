// The lm_head's argument block, which Engine::step reads after the phases: the logits rows it
// wrote, or in an argmax step the best (value, index) of each of its column tasks.
#pragma once

#include "runtime/executor/Op.h"

#include <cstdint>
#include <memory>

namespace hetc {

namespace codegen {
class LinearKernel;
} // namespace codegen

struct LmHeadArgs : OpArgs {
  ~LmHeadArgs() override;
  Rows in, out; // out: the plan's logits buffer [max_batch, vocab]
  size_t vocab = 0;
  size_t taskCount = 1, taskGrain = 1;  // column tasks
  const float *weight = nullptr;        // f32 [vocab, K], or
  const uint16_t *weightBf16 = nullptr; // packed BF16, run by `linear`
  const codegen::LinearKernel *linear = nullptr;
  uint32_t *bf16Rows = nullptr;
  // Argmax steps: each thread's tasks write their logits into the thread's window
  // ([max_batch, task grain] floats, in cache) and leave (max, index) per row in
  // taskBest*[task * maxBatch + row].
  size_t maxBatch = 0;
  float *windows = nullptr;
  size_t windowFloats = 0;
  std::unique_ptr<uint32_t[]> identityRows; // [max_batch] 0, 1, 2, ...
  std::unique_ptr<float[]> taskBestValues;
  std::unique_ptr<uint32_t[]> taskBestIndices;
};

// Tasks in column order, a later task winning only when strictly greater: the first maximum of
// each asking sequence's row (as torch.argmax), written to argmax[its index within the step].
void mergeLmHeadArgmax(const LmHeadArgs &args, const StepRows &step, int32_t *argmax);

} // namespace hetc
