// Greedy generation over an Engine: chunked prefill of every prompt, then decode steps that
// advance all sequences together.
#pragma once

#include "runtime/executor/Engine.h"
#include "runtime/format/Status.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hetc {

struct GenerateResult {
  std::vector<std::vector<int32_t>> tokens; // per prompt: the maxNew generated ids
  uint32_t prefillSteps = 0;
  uint32_t decodeSteps = 0;
  double prefillSeconds = 0.0; // wall time of the prefill steps, first tokens included
  double decodeSeconds = 0.0;
};

// Checks a request against the plan's bounds (prompt count, positions, ids) without running it,
// so a caller can refuse it before sizing anything for it; generateGreedy checks the same.
Status checkGenerateRequest(const Engine &engine, const std::vector<std::vector<int32_t>> &prompts,
                            uint32_t maxNew);

// Prompt i runs in slot i from position 0. Each step carries at most the plan's max_step_tokens
// tokens, so long prompts are prefilled over several steps; only the step holding a prompt's
// last token produces its logits. Returns maxNew ids per prompt (no end-of-sequence stop).
// `logitsOut`, when not null, receives [prompts.size(), maxNew, vocab] float32 logits: entry
// (i, k) is the distribution generated id k of prompt i was picked from. Without it the engine
// finds each next id in argmax steps and writes no logits (same ids either way).
Result<GenerateResult> generateGreedy(Engine &engine,
                                      const std::vector<std::vector<int32_t>> &prompts,
                                      uint32_t maxNew, float *logitsOut = nullptr);

} // namespace hetc
