// Engines on the tiny test plan for the runtime's tests: the plan written to disk and loaded the
// way `hetc run` loads it, and engines created on it with any failure reported to the test.
#pragma once

#include "FloatBits.h"
#include "TestPlans.h"

#include "runtime/executor/Engine.h"
#include "runtime/format/Plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hetc::test {

// The engine for `plan`, or null after recording a test failure with the reason.
inline std::unique_ptr<Engine> createEngine(const std::shared_ptr<const Plan> &plan,
                                            const EngineOptions &options) {
  Result<std::unique_ptr<Engine>> created = Engine::create(plan, options);
  EXPECT_TRUE(created.ok()) << (created.ok() ? "" : created.message());
  return created.ok() ? std::move(created.value()) : nullptr;
}

// A shape that exercises more than the defaults: two layers, three query heads per KV head,
// head_dim 24, more positions than one attention score block (64), odd widths.
inline TinyPlanShape largerShape() {
  TinyPlanShape shape;
  shape.vocab = 97;
  shape.hidden = 40;
  shape.layers = 2;
  shape.heads = 6;
  shape.kv_heads = 2;
  shape.head_dim = 24;
  shape.intermediate = 72;
  shape.max_batch = 3;
  shape.max_seq = 96;
  shape.max_step_tokens = 16;
  shape.seed = 7;
  return shape;
}

// largerShape as an OPT-style decoder (LayerNorm, fc1 -> `function` -> fc2, learned positions).
inline TinyPlanShape optShape(plan::ActivationFunctionDef function) {
  TinyPlanShape shape = largerShape();
  shape.opt = true;
  shape.activation = function;
  return shape;
}

// Deterministic prompt ids below `vocab`.
inline std::vector<int32_t> promptOf(size_t length, int32_t first, int32_t vocab) {
  std::vector<int32_t> ids(length);
  for (size_t i = 0; i < length; ++i)
    ids[i] = static_cast<int32_t>((first + 7 * i + i * i) % vocab);
  return ids;
}

// Feeds each prompt in its own slot in one step (a ragged prefill), then `decode` steps of one
// fixed token per sequence; returns every step's logits of every sequence, in order.
inline std::vector<float>
teacherForced(Engine &engine, const std::vector<std::vector<int32_t>> &prompts, size_t decode) {
  std::vector<float> out;
  std::vector<StepSequence> step;
  for (size_t i = 0; i < prompts.size(); ++i)
    step.push_back({static_cast<uint32_t>(i), 0, prompts[i].data(),
                    static_cast<uint32_t>(prompts[i].size()), true});
  std::vector<int32_t> next(prompts.size());
  for (size_t s = 0; s <= decode; ++s) {
    Status status = engine.step(step.data(), step.size());
    EXPECT_TRUE(status.ok()) << status.message();
    if (!status.ok())
      return {};
    for (size_t i = 0; i < prompts.size(); ++i) {
      const float *logits = engine.logits(i);
      out.insert(out.end(), logits, logits + engine.vocab());
      next[i] = static_cast<int32_t>((7 * s + 3 * prompts[i][0] + 1) % engine.vocab());
      step[i].start += step[i].count;
      step[i].tokens = &next[i];
      step[i].count = 1;
    }
  }
  return out;
}

// Every element of `a` and `b` has the same bits.
inline void expectSameBits(const std::vector<float> &a, const std::vector<float> &b,
                           const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(bitsOf(a[i]), bitsOf(b[i])) << what << ": element " << i;
}

// A mistake made in a tiny plan before it is written, and words the loader's refusal must hold.
struct PlanMistake {
  const char *what;
  void (*apply)(TinyPlan &);
  const char *expected;
};

// Each mistake, made alone in the plan of `shape`, is refused by the loader naming `expected`.
inline void expectLoaderRefuses(const TinyPlanShape &shape,
                                const std::vector<PlanMistake> &mistakes) {
  for (const PlanMistake &mistake : mistakes) {
    TinyPlan tiny = buildTinyPlan(shape);
    mistake.apply(tiny);
    ScratchDir dir;
    const std::string path = dir.file("bad.hplan");
    ASSERT_TRUE(writeTinyPlan(path, tiny).ok()) << mistake.what;
    Result<std::unique_ptr<Plan>> loaded = Plan::load(path);
    ASSERT_FALSE(loaded.ok()) << mistake.what;
    EXPECT_NE(loaded.message().find(mistake.expected), std::string::npos)
        << mistake.what << ": " << loaded.message();
  }
}

// A tiny plan written to disk and loaded the way `hetc run` loads it. `plan` stays null (after a
// recorded failure) if writing or loading fails.
struct LoadedTinyPlan {
  explicit LoadedTinyPlan(const TinyPlanShape &shape) : tiny(buildTinyPlan(shape)) {
    const std::string path = dir.file("tiny.hplan");
    Status written = writeTinyPlan(path, tiny);
    EXPECT_TRUE(written.ok()) << written.message();
    Result<std::unique_ptr<Plan>> loaded = Plan::load(path);
    EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.message());
    if (loaded.ok())
      plan = std::shared_ptr<const Plan>(std::move(loaded.value()));
  }

  std::unique_ptr<Engine> engine(unsigned threads, bool pin = false, bool profile = false) const {
    EngineOptions options;
    options.threads = threads;
    options.pin = pin;
    options.profile = profile;
    return createEngine(plan, options);
  }

  ScratchDir dir;
  TinyPlan tiny;
  std::shared_ptr<const Plan> plan;
};

} // namespace hetc::test
