#include "runtime/serving/Generate.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

namespace hetc {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

} // namespace

Status checkGenerateRequest(const Engine &engine, const std::vector<std::vector<int32_t>> &prompts,
                            uint32_t maxNew) {
  if (prompts.empty())
    return Status::error("no prompts given");
  if (prompts.size() > engine.maxBatch())
    return Status::error(std::to_string(prompts.size()) +
                         " prompts but the plan's --max-batch is " +
                         std::to_string(engine.maxBatch()));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> &prompt = prompts[i];
    if (prompt.empty())
      return Status::error("prompt " + std::to_string(i) + " is empty");
    const uint64_t needed = static_cast<uint64_t>(prompt.size()) + maxNew;
    if (needed > engine.maxSeq())
      return Status::error("prompt " + std::to_string(i) + " needs " + std::to_string(needed) +
                           " positions (" + std::to_string(prompt.size()) + " prompt + " +
                           std::to_string(maxNew) + " new) but the plan's --max-seq is " +
                           std::to_string(engine.maxSeq()));
    for (size_t j = 0; j < prompt.size(); ++j)
      if (prompt[j] < 0 || static_cast<uint32_t>(prompt[j]) >= engine.vocab())
        return Status::error("prompt " + std::to_string(i) + " token " + std::to_string(j) +
                             " is id " + std::to_string(prompt[j]) + " but the vocabulary has " +
                             std::to_string(engine.vocab()) + " ids (0.." +
                             std::to_string(engine.vocab() - 1) + ")");
  }
  return Status();
}

Result<GenerateResult> generateGreedy(Engine &engine,
                                      const std::vector<std::vector<int32_t>> &prompts,
                                      uint32_t maxNew, float *logitsOut) {
  if (Status s = checkGenerateRequest(engine, prompts, maxNew); !s)
    return s;
  const size_t count = prompts.size();
  const size_t vocab = engine.vocab();
  GenerateResult result;
  result.tokens.resize(count);
  for (auto &generated : result.tokens)
    generated.reserve(maxNew); // decode steps point into these; they must never move
  if (maxNew == 0)
    return result;

  std::vector<StepSequence> stepSequences;
  stepSequences.reserve(count);
  // Without logitsOut nobody reads the logits: the engine's LmHead then finds each argmax
  // without writing them.
  const StepOutput output = logitsOut ? StepOutput::Logits : StepOutput::Argmax;
  // Picks each asking sequence's next id from the step's logits or argmax.
  auto takeLogits = [&]() {
    for (size_t s = 0; s < stepSequences.size(); ++s) {
      if (!stepSequences[s].wantLogits)
        continue;
      const uint32_t sequence = stepSequences[s].slot; // prompt i runs in slot i
      std::vector<int32_t> &generated = result.tokens[sequence];
      if (!logitsOut) {
        generated.push_back(engine.argmax(s));
        continue;
      }
      const float *logits = engine.logits(s);
      std::memcpy(logitsOut + (sequence * static_cast<size_t>(maxNew) + generated.size()) * vocab,
                  logits, vocab * sizeof(float));
      generated.push_back(static_cast<int32_t>(kernels::argmaxFirst(logits, vocab)));
    }
  };

  // Prefill: pack prompt tokens in prompt order, max_step_tokens per step.
  const Clock::time_point prefillStart = Clock::now();
  std::vector<size_t> fed(count, 0);
  for (size_t next = 0; next < count;) {
    stepSequences.clear();
    size_t budget = engine.maxStepTokens();
    for (size_t i = next; i < count && budget > 0; ++i) {
      const size_t length = prompts[i].size();
      const size_t take = std::min(length - fed[i], budget);
      StepSequence seq;
      seq.slot = static_cast<uint32_t>(i);
      seq.start = fed[i];
      seq.tokens = prompts[i].data() + fed[i];
      seq.count = static_cast<uint32_t>(take);
      seq.wantLogits = fed[i] + take == length;
      stepSequences.push_back(seq);
      budget -= take;
    }
    if (Status s = engine.step(stepSequences.data(), stepSequences.size(), output); !s)
      return s;
    ++result.prefillSteps;
    takeLogits();
    for (const StepSequence &seq : stepSequences) {
      fed[seq.slot] += seq.count;
      if (fed[seq.slot] == prompts[seq.slot].size())
        next = seq.slot + 1;
    }
  }
  result.prefillSeconds = secondsSince(prefillStart);

  // Decode: each sequence feeds its last generated id, all together (several steps only when
  // max_step_tokens is below the number of sequences).
  const Clock::time_point decodeStart = Clock::now();
  for (uint32_t k = 1; k < maxNew; ++k) {
    for (size_t first = 0; first < count;) {
      const size_t last = std::min(count, first + engine.maxStepTokens());
      stepSequences.clear();
      for (size_t i = first; i < last; ++i) {
        StepSequence seq;
        seq.slot = static_cast<uint32_t>(i);
        seq.start = prompts[i].size() + k - 1;
        seq.tokens = &result.tokens[i].back();
        seq.count = 1;
        seq.wantLogits = true;
        stepSequences.push_back(seq);
      }
      if (Status s = engine.step(stepSequences.data(), stepSequences.size(), output); !s)
        return s;
      ++result.decodeSteps;
      takeLogits();
      first = last;
    }
  }
  result.decodeSeconds = secondsSince(decodeStart);
  return result;
}

} // namespace hetc
