// The executor on the tiny test plans: results independent of threads, batching and chunking,
// agreement with a full-recompute reference written here, clear limit errors, and no allocation
// once decoding runs.
#include "ActivationReference.h"
#include "AllocationCounter.h"
#include "EngineTestSupport.h"
#include "TestPlans.h"

#include "runtime/executor/Engine.h"
#include "runtime/format/Plan.h"
#include "runtime/platform/HostMemory.h"
#include "runtime/serving/ElasticBatch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace hetc {
namespace {

using plan::DTypeDef;
using test::largerShape;
using test::LoadedTinyPlan;
using test::promptOf;
using test::TinyPlan;
using test::TinyPlanShape;

struct Generation {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<float> logits; // [prompts, maxNew, vocab]
};

Generation generate(Engine &engine, const std::vector<std::vector<int32_t>> &prompts,
                    uint32_t maxNew) {
  Generation out;
  out.logits.assign(prompts.size() * maxNew * engine.vocab(), std::nanf(""));
  Result<GenerateResult> result = generateGreedy(engine, prompts, maxNew, out.logits.data());
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.message());
  if (result.ok())
    out.tokens = result->tokens;
  return out;
}

// Bit-for-bit equality of two float arrays (NaN-safe, unlike ==).
bool sameBits(const float *a, const float *b, size_t count) {
  return std::memcmp(a, b, count * sizeof(float)) == 0;
}

// The straightforward model: recompute the whole sequence from the plan's ops and weights in
// double, attention over the k/v buffers directly (no KV cache). Returns the last token's logits.
std::vector<double> referenceLogits(const TinyPlan &tiny, const std::vector<int32_t> &tokens) {
  const plan::PlanDefT &def = tiny.def;
  const size_t rows = tokens.size();
  std::vector<std::vector<double>> buffers(def.buffers.size());
  for (size_t b = 0; b < def.buffers.size(); ++b)
    buffers[b].assign(rows * def.buffers[b]->cols, 0.0);
  auto cols = [&](uint32_t buffer) { return static_cast<size_t>(def.buffers[buffer]->cols); };
  std::vector<double> logits;

  for (const auto &op : def.ops) {
    const uint32_t out = op->outputs.at(0);
    std::vector<double> &y = buffers[out];
    const size_t n = cols(out);
    switch (op->kind) {
    case plan::OpKindDef::Embedding: {
      const std::vector<float> table = tiny.tensorValues(op->weights[0]);
      for (size_t t = 0; t < rows; ++t)
        for (size_t i = 0; i < n; ++i)
          y[t * n + i] = table[tokens[t] * n + i];
      if (op->weights.size() > 1) { // learned positions: row t + offset
        const std::vector<float> positions = tiny.tensorValues(op->weights[1]);
        const size_t offset = op->params.AsEmbeddingParamsDef()->position_offset;
        for (size_t t = 0; t < rows; ++t)
          for (size_t i = 0; i < n; ++i)
            y[t * n + i] += positions[(t + offset) * n + i];
      }
      for (size_t e = 0; e < rows * n; ++e) // Gemma's scale, after the positions
        y[e] *= static_cast<double>(op->params.AsEmbeddingParamsDef()->scale);
      break;
    }
    case plan::OpKindDef::LayerNorm: {
      const std::vector<double> &x = buffers[op->inputs[0]];
      const std::vector<float> gamma = tiny.tensorValues(op->weights[0]);
      const auto *params = op->params.AsLayerNormParamsDef();
      const std::vector<float> beta =
          params->bias ? tiny.tensorValues(op->weights[1]) : std::vector<float>(n, 0.0f);
      for (size_t t = 0; t < rows; ++t) {
        double mean = 0, variance = 0;
        for (size_t i = 0; i < n; ++i)
          mean += x[t * n + i] / n;
        for (size_t i = 0; i < n; ++i)
          variance += (x[t * n + i] - mean) * (x[t * n + i] - mean) / n;
        const double inverseDeviation = 1.0 / std::sqrt(variance + params->eps);
        for (size_t i = 0; i < n; ++i)
          y[t * n + i] = (x[t * n + i] - mean) * inverseDeviation * gamma[i] + beta[i];
      }
      break;
    }
    case plan::OpKindDef::Activation: {
      const std::vector<double> &x = buffers[op->inputs[0]];
      const plan::ActivationFunctionDef function = op->params.AsActivationParamsDef()->function;
      for (size_t e = 0; e < rows * n; ++e)
        y[e] = test::activationReference(static_cast<kernels::ActivationFunction>(function), x[e]);
      break;
    }
    case plan::OpKindDef::RmsNorm: {
      const std::vector<double> &x = buffers[op->inputs[0]];
      const std::vector<float> gamma = tiny.tensorValues(op->weights[0]);
      const double eps = op->params.AsRmsNormParamsDef()->eps;
      for (size_t t = 0; t < rows; ++t) {
        double sum = 0;
        for (size_t i = 0; i < n; ++i)
          sum += x[t * n + i] * x[t * n + i];
        const double inverseRms = 1.0 / std::sqrt(sum / n + eps);
        for (size_t i = 0; i < n; ++i)
          y[t * n + i] = gamma[i] * x[t * n + i] * inverseRms;
      }
      break;
    }
    case plan::OpKindDef::Linear:
    case plan::OpKindDef::LmHead: {
      const std::vector<double> &x = buffers[op->inputs[0]];
      const std::vector<float> w = tiny.tensorValues(op->weights[0]);
      const size_t k = cols(op->inputs[0]);
      const bool lmHead = op->kind == plan::OpKindDef::LmHead;
      const bool hasBias = lmHead ? op->params.AsLmHeadParamsDef()->bias
                                  : op->params.AsLinearParamsDef()->bias;
      const std::vector<float> bias =
          hasBias ? tiny.tensorValues(op->weights.at(1)) : std::vector<float>(n, 0.0f);
      const double logitCap = lmHead ? op->params.AsLmHeadParamsDef()->softcap : 0.0;
      for (size_t t = lmHead ? rows - 1 : 0; t < rows; ++t)
        for (size_t col = 0; col < n; ++col) {
          double sum = bias[col];
          for (size_t i = 0; i < k; ++i)
            sum += x[t * k + i] * w[col * k + i];
          if (lmHead)
            logits.push_back(logitCap > 0 ? logitCap * std::tanh(sum / logitCap) : sum);
          else
            y[t * n + col] = sum;
        }
      break;
    }
    case plan::OpKindDef::Rope: {
      const auto *params = op->params.AsRopeParamsDef();
      const std::vector<float> invFreq = tiny.tensorValues(op->weights[0]);
      const size_t d = params->head_dim, half = d / 2;
      for (size_t t = 0; t < rows; ++t)
        for (size_t h = 0; h < params->heads; ++h)
          for (size_t i = 0; i < half; ++i) {
            const double angle = static_cast<float>(t) * invFreq[i]; // float32, as PyTorch
            double &x1 = y[t * n + h * d + i];
            double &x2 = y[t * n + h * d + i + half];
            const double a = x1, b = x2;
            x1 = a * std::cos(angle) - b * std::sin(angle);
            x2 = b * std::cos(angle) + a * std::sin(angle);
          }
      break;
    }
    case plan::OpKindDef::Attention: {
      const auto *params = op->params.AsAttentionParamsDef();
      const std::vector<double> &q = buffers[op->inputs[0]];
      const std::vector<double> &k = buffers[op->inputs[1]];
      const std::vector<double> &v = buffers[op->inputs[2]];
      const size_t d = params->head_dim, qCols = cols(op->inputs[0]), kvCols = cols(op->inputs[1]);
      const size_t group = params->heads / params->kv_heads;
      const double cap = params->softcap;
      const size_t window = params->sliding_window;
      for (size_t t = 0; t < rows; ++t)
        for (size_t h = 0; h < params->heads; ++h) {
          const size_t g = h / group;
          // Keys first..t: the last `window` of them with a sliding window.
          const size_t first = window != 0 && t + 1 > window ? t + 1 - window : 0;
          std::vector<double> weights(t + 1, 0.0);
          double maxScore = -1e300, sum = 0;
          for (size_t j = first; j <= t; ++j) {
            double s = 0;
            for (size_t i = 0; i < d; ++i)
              s += q[t * qCols + h * d + i] * k[j * kvCols + g * d + i];
            weights[j] = s * params->scale;
            if (cap > 0)
              weights[j] = cap * std::tanh(weights[j] / cap);
            if (!params->alibi_slopes.empty())
              weights[j] += params->alibi_slopes[h] * double(j);
            maxScore = std::max(maxScore, weights[j]);
          }
          for (size_t j = first; j <= t; ++j)
            sum += (weights[j] = std::exp(weights[j] - maxScore));
          for (size_t i = 0; i < d; ++i) {
            double o = 0;
            for (size_t j = first; j <= t; ++j)
              o += weights[j] / sum * v[j * kvCols + g * d + i];
            y[t * n + h * d + i] = o;
          }
        }
      break;
    }
    case plan::OpKindDef::SwiGlu: {
      const std::vector<double> &gate = buffers[op->inputs[0]], &up = buffers[op->inputs[1]];
      const auto function =
          static_cast<kernels::ActivationFunction>(op->params.AsSwiGluParamsDef()->function);
      for (size_t e = 0; e < rows * n; ++e)
        y[e] = test::activationReference(function, gate[e]) * up[e];
      break;
    }
    case plan::OpKindDef::Add: {
      const std::vector<double> a = buffers[op->inputs[0]], b = buffers[op->inputs[1]];
      for (size_t e = 0; e < rows * n; ++e)
        y[e] = a[e] + b[e];
      break;
    }
    }
  }
  return logits;
}

TEST(EngineTest, LogitsAreBitIdenticalForOneTwoAndThreeThreads) {
  for (const TinyPlanShape &shape :
       {TinyPlanShape(), largerShape(), test::optShape(plan::ActivationFunctionDef::Gelu)}) {
    LoadedTinyPlan loaded(shape);
    ASSERT_TRUE(loaded.plan);
    const int32_t vocab = static_cast<int32_t>(shape.vocab);
    const std::vector<std::vector<int32_t>> prompts = {promptOf(11, 3, vocab),
                                                       promptOf(4, 9, vocab)};
    std::unique_ptr<Engine> one = loaded.engine(1);
    ASSERT_TRUE(one);
    const Generation expected = generate(*one, prompts, 8);
    // Three threads on this two-core machine also exercises the futex wait of the barrier.
    for (unsigned threads : {2u, 3u}) {
      std::unique_ptr<Engine> many = loaded.engine(threads, /*pin=*/threads == 2);
      ASSERT_TRUE(many);
      ASSERT_EQ(many->threads(), threads);
      const Generation got = generate(*many, prompts, 8);
      EXPECT_EQ(got.tokens, expected.tokens) << threads << " threads";
      ASSERT_EQ(got.logits.size(), expected.logits.size());
      EXPECT_TRUE(sameBits(got.logits.data(), expected.logits.data(), got.logits.size()))
          << threads << " threads";
    }
  }
}

TEST(EngineTest, RaggedBatchEqualsSeparateRuns) {
  for (const TinyPlanShape &shape :
       {TinyPlanShape(), largerShape(), test::optShape(plan::ActivationFunctionDef::Relu)}) {
    LoadedTinyPlan loaded(shape);
    ASSERT_TRUE(loaded.plan);
    const int32_t vocab = static_cast<int32_t>(shape.vocab);
    const std::vector<int32_t> a = promptOf(5, 1, vocab), b = promptOf(13, 2, vocab);
    const uint32_t maxNew = 7;
    std::unique_ptr<Engine> engine = loaded.engine(2);
    ASSERT_TRUE(engine);
    const Generation together = generate(*engine, {a, b}, maxNew);
    const Generation aloneA = generate(*engine, {a}, maxNew);
    const Generation aloneB = generate(*engine, {b}, maxNew);
    ASSERT_EQ(together.tokens.size(), 2u);
    EXPECT_EQ(together.tokens[0], aloneA.tokens[0]);
    EXPECT_EQ(together.tokens[1], aloneB.tokens[0]);
    const size_t perPrompt = maxNew * shape.vocab;
    EXPECT_TRUE(sameBits(together.logits.data(), aloneA.logits.data(), perPrompt));
    EXPECT_TRUE(sameBits(together.logits.data() + perPrompt, aloneB.logits.data(), perPrompt));
  }
}

TEST(EngineTest, ChunkedPrefillEqualsOneStepPrefill) {
  TinyPlanShape big = largerShape();
  big.max_step_tokens = 96 * 3;
  const int32_t vocab = static_cast<int32_t>(big.vocab);
  // 70 tokens cross an attention score block; 3 prompts fill every slot.
  const std::vector<std::vector<int32_t>> prompts = {promptOf(70, 5, vocab), promptOf(9, 4, vocab),
                                                     promptOf(1, 8, vocab)};
  LoadedTinyPlan reference(big);
  ASSERT_TRUE(reference.plan);
  std::unique_ptr<Engine> oneStep = reference.engine(2);
  ASSERT_TRUE(oneStep);
  const Generation expected = generate(*oneStep, prompts, 6);

  // max_step_tokens 1 also splits every decode step (3 sequences, one token per step).
  for (uint32_t stepTokens : {1u, 3u, 16u}) {
    TinyPlanShape small = big;
    small.max_step_tokens = stepTokens;
    LoadedTinyPlan chunked(small);
    ASSERT_TRUE(chunked.plan);
    std::unique_ptr<Engine> engine = chunked.engine(2);
    ASSERT_TRUE(engine);
    const Generation got = generate(*engine, prompts, 6);
    EXPECT_EQ(got.tokens, expected.tokens) << "max_step_tokens " << stepTokens;
    EXPECT_TRUE(sameBits(got.logits.data(), expected.logits.data(), got.logits.size()))
        << "max_step_tokens " << stepTokens;
  }
}

// A task grain beyond its op's axis is one task over the whole axis, never a wrapped task count:
// a plan whose grains are all 2^64-1 gives the compiler-grained plan's results bit for bit.
TEST(EngineTest, OversizedTaskGrainsRunAsOneTask) {
  const TinyPlanShape shape = largerShape();
  const int32_t vocab = static_cast<int32_t>(shape.vocab);
  const std::vector<std::vector<int32_t>> prompts = {promptOf(20, 5, vocab), promptOf(3, 4, vocab)};
  LoadedTinyPlan reference(shape);
  ASSERT_TRUE(reference.plan);
  std::unique_ptr<Engine> referenceEngine = reference.engine(2);
  ASSERT_TRUE(referenceEngine);
  const Generation expected = generate(*referenceEngine, prompts, 5);

  TinyPlan oversized = test::buildTinyPlan(shape);
  for (auto &op : oversized.def.ops)
    if (op->kind != plan::OpKindDef::Attention)
      op->task_grain = UINT64_MAX;
  test::ScratchDir dir;
  const std::string path = dir.file("oversized-grain.hplan");
  Status written = test::writeTinyPlan(path, oversized);
  ASSERT_TRUE(written.ok()) << written.message();
  Result<std::unique_ptr<Plan>> loaded = Plan::load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EngineOptions options;
  options.threads = 2;
  options.pin = false;
  std::unique_ptr<Engine> engine =
      test::createEngine(std::shared_ptr<const Plan>(std::move(loaded.value())), options);
  ASSERT_TRUE(engine);
  const Generation got = generate(*engine, prompts, 5);
  EXPECT_EQ(got.tokens, expected.tokens);
  EXPECT_TRUE(sameBits(got.logits.data(), expected.logits.data(), got.logits.size()));
}

TEST(EngineTest, MatchesFullRecomputeReference) {
  TinyPlanShape tied, biased = largerShape();
  tied.tied_embeddings = true;
  biased.qkv_bias = true;
  std::vector<TinyPlanShape> shapes = {TinyPlanShape(), largerShape(), tied, biased};
  for (plan::ActivationFunctionDef function :
       {plan::ActivationFunctionDef::Relu, plan::ActivationFunctionDef::Gelu,
        plan::ActivationFunctionDef::GeluTanh, plan::ActivationFunctionDef::ReluSquared})
    shapes.push_back(test::optShape(function));
  // Gemma 2's forms (embedding scale, GeGLU, soft-capped scores and logits, a window on alternate
  // layers) with an unfused swiglu; engine_bf16_test runs them fused.
  shapes.push_back(test::gemmaShape());
  // Phi-2's lm_head bias, also before a soft-cap.
  TinyPlanShape lmHeadBias = largerShape();
  lmHeadBias.lm_head_bias = true;
  shapes.push_back(lmHeadBias);
  TinyPlanShape cappedBias = test::gemmaShape();
  cappedBias.lm_head_bias = true;
  shapes.push_back(cappedBias);
  // ALiBi (BLOOM's slopes) on the larger shape, and with Gemma's soft-capped scores and windows.
  TinyPlanShape alibi = largerShape(), cappedAlibi = test::gemmaShape();
  alibi.alibi = cappedAlibi.alibi = true;
  shapes.push_back(alibi);
  shapes.push_back(cappedAlibi);
  for (const TinyPlanShape &shape : shapes) {
    LoadedTinyPlan loaded(shape);
    ASSERT_TRUE(loaded.plan);
    const int32_t vocab = static_cast<int32_t>(shape.vocab);
    const size_t longPrompt = std::min<size_t>(70, shape.max_seq - 8);
    const std::vector<std::vector<int32_t>> prompts = {promptOf(longPrompt, 6, vocab),
                                                       promptOf(3, 11, vocab)};
    const uint32_t maxNew = 6;
    std::unique_ptr<Engine> engine = loaded.engine(2);
    ASSERT_TRUE(engine);
    const Generation got = generate(*engine, prompts, maxNew);
    ASSERT_EQ(got.tokens.size(), prompts.size());

    for (size_t s = 0; s < prompts.size(); ++s) {
      std::vector<int32_t> sequence = prompts[s];
      for (uint32_t k = 0; k < maxNew; ++k) {
        const std::vector<double> want = referenceLogits(loaded.tiny, sequence);
        const float *have = got.logits.data() + (s * maxNew + k) * shape.vocab;
        double largest = 0, worst = 0;
        size_t best = 0, second = 1;
        for (size_t i = 0; i < shape.vocab; ++i) {
          largest = std::max(largest, std::abs(want[i]));
          worst = std::max(worst, std::abs(have[i] - want[i]));
          if (want[i] > want[best]) {
            second = best;
            best = i;
          } else if (i != best && want[i] > want[second]) {
            second = i;
          }
        }
        ASSERT_GT(largest, 0.0);
        EXPECT_LE(worst, 1e-5 * largest) << "sequence " << s << " token " << k;
        // The greedy choice agrees unless the reference's top two are closer than the tolerance.
        if (want[best] - want[second] > 1e-4 * largest)
          EXPECT_EQ(got.tokens[s][k], static_cast<int32_t>(best))
              << "sequence " << s << " token " << k;
        sequence.push_back(got.tokens[s][k]);
      }
    }
  }
}

TEST(EngineTest, LimitErrorsNameTheLimit) {
  LoadedTinyPlan loaded(TinyPlanShape{}); // max_batch 2, max_seq 32, max_step_tokens 8, vocab 64
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  auto generateError = [&](const std::vector<std::vector<int32_t>> &prompts, uint32_t maxNew) {
    Result<GenerateResult> result = generateGreedy(*engine, prompts, maxNew);
    EXPECT_FALSE(result.ok());
    return result.ok() ? std::string() : result.message();
  };
  EXPECT_EQ(generateError({{1}, {2}, {3}}, 4), "3 prompts but the plan's --max-batch is 2");
  EXPECT_EQ(generateError({{1}, std::vector<int32_t>(30, 1)}, 4),
            "prompt 1 needs 34 positions (30 prompt + 4 new) but the plan's --max-seq is 32");
  EXPECT_EQ(generateError({{1, 64}}, 4),
            "prompt 0 token 1 is id 64 but the vocabulary has 64 ids (0..63)");
  EXPECT_EQ(generateError({{-1}}, 4),
            "prompt 0 token 0 is id -1 but the vocabulary has 64 ids (0..63)");
  EXPECT_EQ(generateError({}, 4), "no prompts given");
  EXPECT_EQ(generateError({{}}, 4), "prompt 0 is empty");

  const int32_t tokens[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  auto stepError = [&](std::vector<StepSequence> sequences) {
    Status status = engine->step(sequences.data(), sequences.size());
    EXPECT_FALSE(status.ok());
    return status.message();
  };
  EXPECT_EQ(stepError({{0, 0, tokens, 9, true}}),
            "the step has 9 tokens but the plan's --max-step-tokens is 8");
  EXPECT_EQ(stepError({{2, 0, tokens, 1, true}}),
            "sequence 0 uses slot 2 but the plan's --max-batch is 2 (slots 0..1)");
  EXPECT_EQ(stepError({{0, 0, tokens, 1, true}, {1, 0, tokens, 1, true}, {0, 0, tokens, 1, true}}),
            "the step has 3 sequences but the plan's --max-batch is 2");
  EXPECT_EQ(stepError({{1, 0, tokens, 1, true}, {1, 0, tokens, 1, true}}),
            "slot 1 appears more than once in the step");
  EXPECT_EQ(stepError({{0, 30, tokens, 3, true}}),
            "sequence 0 needs positions up to 33 but the plan's --max-seq is 32");
  EXPECT_EQ(stepError({{0, 0, tokens, 0, true}}), "sequence 0 has no tokens");
  EXPECT_EQ(stepError({}), "a step needs at least one sequence");

  // A slot cannot skip positions it never cached.
  ASSERT_TRUE(engine->step(std::vector<StepSequence>{{0, 0, tokens, 4, true}}.data(), 1).ok());
  EXPECT_EQ(engine->cachedPositions(0), 4u);
  EXPECT_EQ(stepError({{0, 5, tokens, 1, true}}),
            "sequence 0 starts at position 5 but slot 0 holds only 4 cached positions");
  EXPECT_EQ(stepError({{1, 1, tokens, 1, true}}),
            "sequence 0 starts at position 1 but slot 1 holds only 0 cached positions");

  // Failed steps changed nothing: a run afterwards matches a fresh engine.
  std::unique_ptr<Engine> fresh = loaded.engine(1);
  const Generation after = generate(*engine, {{5, 6, 7}}, 4);
  const Generation clean = generate(*fresh, {{5, 6, 7}}, 4);
  EXPECT_EQ(after.tokens, clean.tokens);
  EXPECT_TRUE(sameBits(after.logits.data(), clean.logits.data(), after.logits.size()));
}

TEST(EngineTest, RefusesAPlanOverTheHostsMemory) {
  // 2^32 - 1 positions of K and V, 256 bytes each over the slots and heads: 1 TiB of KV cache.
  TinyPlanShape shape;
  shape.max_seq = UINT32_MAX;
  LoadedTinyPlan loaded(shape);
  ASSERT_TRUE(loaded.plan);
  const uint64_t kvBytes = loaded.plan->def().kv_cache()->arena_size();
  ASSERT_GE(kvBytes, uint64_t{1} << 39);
  if (std::optional<uint64_t> available = availableMemoryBytes();
      !available || *available > kvBytes)
    GTEST_SKIP() << "this host has "
                 << (available ? std::to_string(*available >> 30) + " GiB"
                               : std::string("no MemAvailable"))
                 << " available: a 1 TiB KV cache fits, or nothing can be checked";
  EngineOptions options;
  options.threads = 1;
  options.pin = false;
  Result<std::unique_ptr<Engine>> engine = Engine::create(loaded.plan, options);
  ASSERT_FALSE(engine.ok());
  EXPECT_THAT(engine.message(),
              ::testing::StartsWith("the plan's KV cache (" +
                                    std::to_string((kvBytes + (1 << 20) - 1) >> 20) +
                                    " MiB) and activations ("));
  EXPECT_THAT(engine.message(),
              ::testing::EndsWith(" MiB this host has available; compile it with a smaller "
                                  "--max-seq or --max-batch"));
}

TEST(EngineTest, RefusesWhatThePortableKernelsCannotRun) {
  TinyPlanShape bf16;
  bf16.weight_dtype = plan::DTypeDef::BF16;
  LoadedTinyPlan loaded(bf16);
  ASSERT_TRUE(loaded.plan);
  Result<std::unique_ptr<Engine>> created = Engine::create(loaded.plan, {});
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.message().find("BF16"), std::string::npos) << created.message();
  EXPECT_NE(created.message().find("f32 only"), std::string::npos) << created.message();
}

// Prefills three ragged prompts, then runs 20 decode steps returning `output`, and counts every
// allocation from the first decode step on (nothing may warm up); nullopt if a step failed.
std::optional<size_t> decodeAllocations(unsigned threads, StepOutput output,
                                        const TinyPlanShape &shape = largerShape()) {
  LoadedTinyPlan loaded(shape);
  if (!loaded.plan)
    return std::nullopt;
  std::unique_ptr<Engine> engine = loaded.engine(threads);
  if (!engine)
    return std::nullopt;
  // Everything the loop touches exists before counting starts.
  const int32_t prompts[3][5] = {{1, 2, 3, 4, 5}, {6, 7}, {8, 9, 10}};
  const uint32_t lengths[3] = {5, 2, 3};
  int32_t next[3] = {0, 0, 0};
  StepSequence sequences[3];
  for (uint32_t s = 0; s < 3; ++s)
    sequences[s] = {s, 0, prompts[s], lengths[s], true};
  if (!engine->step(sequences, 3, output).ok())
    return std::nullopt;

  bool allOk = true;
  const size_t before = test::allocationCount();
  for (int step = 0; step < 20; ++step) {
    for (uint32_t s = 0; s < 3; ++s) {
      next[s] =
          output == StepOutput::Argmax
              ? engine->argmax(s)
              : static_cast<int32_t>(kernels::argmaxFirst(engine->logits(s), engine->vocab()));
      sequences[s].start += sequences[s].count;
      sequences[s].tokens = &next[s];
      sequences[s].count = 1;
    }
    allOk = engine->step(sequences, 3, output).ok() && allOk;
  }
  const size_t allocations = test::allocationCount() - before;
  if (!allOk)
    return std::nullopt;
  return allocations;
}

TEST(EngineTest, DecodeStepsDoNotAllocate) {
  for (unsigned threads : {1u, 2u})
    EXPECT_EQ(decodeAllocations(threads, StepOutput::Logits), std::optional<size_t>(0))
        << "with " << threads << " threads";
  // LayerNorm, Activation and the learned positions the embedding adds.
  EXPECT_EQ(decodeAllocations(2, StepOutput::Logits,
                              test::optShape(plan::ActivationFunctionDef::GeluTanh)),
            std::optional<size_t>(0))
      << "the OPT-style plan";
}

TEST(EngineTest, ProfiledDecodeStepsDoNotAllocate) {
  LoadedTinyPlan loaded(largerShape());
  ASSERT_TRUE(loaded.plan);
  EngineOptions options;
  options.threads = 2;
  options.pin = false;
  options.profile = true;
  Result<std::unique_ptr<Engine>> created = Engine::create(loaded.plan, options);
  ASSERT_TRUE(created.ok()) << created.message();
  Engine &engine = *created.value();
  const int32_t prompt[4] = {1, 2, 3, 4};
  int32_t next = 0;
  StepSequence sequence{0, 0, prompt, 4, true};
  ASSERT_TRUE(engine.step(&sequence, 1).ok());
  const size_t before = test::allocationCount();
  bool allOk = true;
  for (int step = 0; step < 10; ++step) {
    next = static_cast<int32_t>(kernels::argmaxFirst(engine.logits(0), engine.vocab()));
    sequence.start += sequence.count;
    sequence.tokens = &next;
    sequence.count = 1;
    allOk = engine.step(&sequence, 1).ok() && allOk;
  }
  engine.resetProfile();
  EXPECT_TRUE(allOk);
  EXPECT_EQ(test::allocationCount() - before, 0u);
}

std::unique_ptr<Engine> engineWith(const std::shared_ptr<const Plan> &plan, unsigned threads,
                                   bool portableKernels) {
  EngineOptions options;
  options.threads = threads;
  options.pin = false;
  options.portableKernels = portableKernels;
  return test::createEngine(plan, options);
}

// One sequence long enough for its decode rows to be split by positions over the threads (more
// chunks than threads): the logits of 1, 2 and 3 threads must agree bit for bit, with either
// kernel set.
TEST(EngineTest, LongSequenceIsBitIdenticalForOneTwoAndThreeThreads) {
  for (const DTypeDef kvDtype : {DTypeDef::F32, DTypeDef::BF16, DTypeDef::INT8}) {
    SCOPED_TRACE(std::string(plan::EnumNameDTypeDef(kvDtype)) + " KV");
    TinyPlanShape shape = largerShape();
    shape.max_batch = 2;
    shape.max_seq = 2100;
    shape.max_step_tokens = 64;
    shape.kv_dtype = kvDtype;
    LoadedTinyPlan loaded(shape);
    ASSERT_TRUE(loaded.plan);
    const std::vector<std::vector<int32_t>> prompts = {
        promptOf(2000, 3, static_cast<int32_t>(shape.vocab))};
    for (bool portable : {false, true}) {
      std::unique_ptr<Engine> one = engineWith(loaded.plan, 1, portable);
      ASSERT_TRUE(one);
      ASSERT_LT(3 * one->attentionChunkPositions(), 2000u);
      const Generation expected = generate(*one, prompts, 6);
      for (unsigned threads : {2u, 3u}) {
        std::unique_ptr<Engine> many = engineWith(loaded.plan, threads, portable);
        ASSERT_TRUE(many);
        const Generation got = generate(*many, prompts, 6);
        EXPECT_EQ(got.tokens, expected.tokens)
            << threads << " threads, " << one->vectorKernels().name;
        EXPECT_TRUE(sameBits(got.logits.data(), expected.logits.data(), got.logits.size()))
            << threads << " threads, " << one->vectorKernels().name;
      }
    }
  }
}

// A BF16 KV cache holds K and V rounded to bf16: the logits move by about the rounding (2^-9
// relative per element), not more, with the portable and the AVX-512 attention alike; and the
// attention reports the cache it reads.
TEST(EngineTest, Bf16KvCacheStaysCloseToF32) {
  TinyPlanShape shape = largerShape();
  shape.max_seq = 600;
  LoadedTinyPlan f32(shape);
  shape.kv_dtype = DTypeDef::BF16;
  LoadedTinyPlan bf16(shape);
  ASSERT_TRUE(f32.plan && bf16.plan);
  const int32_t vocab = static_cast<int32_t>(shape.vocab);
  const std::vector<std::vector<int32_t>> prompts = {promptOf(500, 5, vocab),
                                                     promptOf(7, 2, vocab)};
  for (bool portable : {false, true}) {
    std::unique_ptr<Engine> exact = engineWith(f32.plan, 2, portable);
    std::unique_ptr<Engine> rounded = engineWith(bf16.plan, 2, portable);
    ASSERT_TRUE(exact && rounded);
    bool reportsBf16 = false;
    for (const KernelUse &use : rounded->kernelSummary())
      reportsBf16 |= use.opKind == "Attention" && use.kernel.find("bf16 kv") != std::string::npos;
    EXPECT_TRUE(reportsBf16) << rounded->vectorKernels().name;
    const Generation want = generate(*exact, prompts, 6);
    const Generation got = generate(*rounded, prompts, 6);
    ASSERT_EQ(got.logits.size(), want.logits.size());
    double largest = 0, worst = 0;
    for (size_t i = 0; i < want.logits.size(); ++i) {
      largest = std::max(largest, std::abs(double(want.logits[i])));
      worst = std::max(worst, std::abs(double(got.logits[i]) - want.logits[i]));
    }
    EXPECT_GT(worst, 0.0) << "no rounding at all: the cache is not bf16";
    EXPECT_LE(worst, 1e-2 * largest) << rounded->vectorKernels().name;
  }
}

// An INT8 KV cache holds each K and V row to within half its scale (max|row| / 127 / 2): an
// error up to 2^-8 of the row's largest element, where bf16's is 2^-9 of each element. The logits
// move by more than with bf16 (1.4e-3 of their largest magnitude against 5e-4 here, 500
// positions of the tiny model's random weights) and the bound is 1e-2, looser than bf16's
// because small elements of a row with a large one lose most of their bits; the portable and the
// AVX-512 attention alike; the attention and the append report the cache they use.
TEST(EngineTest, Int8KvCacheStaysCloseToF32) {
  TinyPlanShape shape = largerShape();
  shape.max_seq = 600;
  LoadedTinyPlan f32(shape);
  shape.kv_dtype = DTypeDef::INT8;
  LoadedTinyPlan int8(shape);
  shape.kv_dtype = DTypeDef::BF16;
  LoadedTinyPlan bf16(shape);
  ASSERT_TRUE(f32.plan && int8.plan && bf16.plan);
  const int32_t vocab = static_cast<int32_t>(shape.vocab);
  const std::vector<std::vector<int32_t>> prompts = {promptOf(500, 5, vocab),
                                                     promptOf(7, 2, vocab)};
  auto worstError = [](const Generation &got, const Generation &want) {
    double largest = 0, worst = 0;
    for (size_t i = 0; i < want.logits.size(); ++i) {
      largest = std::max(largest, std::abs(double(want.logits[i])));
      worst = std::max(worst, std::abs(double(got.logits[i]) - want.logits[i]));
    }
    return worst / largest;
  };
  for (bool portable : {false, true}) {
    std::unique_ptr<Engine> exact = engineWith(f32.plan, 2, portable);
    std::unique_ptr<Engine> quantized = engineWith(int8.plan, 2, portable);
    std::unique_ptr<Engine> rounded = engineWith(bf16.plan, 2, portable);
    ASSERT_TRUE(exact && quantized && rounded);
    const std::string kernels = quantized->vectorKernels().name;
    bool attentionReadsInt8 = false, appendWritesInt8 = false;
    for (const KernelUse &use : quantized->kernelSummary()) {
      attentionReadsInt8 |=
          use.opKind == "Attention" && use.kernel.find("int8 kv") != std::string::npos;
      appendWritesInt8 |= use.opKind == "KvAppend" && use.kernel.find("int8") != std::string::npos;
    }
    EXPECT_TRUE(attentionReadsInt8 && appendWritesInt8) << kernels;
    const Generation want = generate(*exact, prompts, 6);
    const Generation got = generate(*quantized, prompts, 6);
    const Generation bf16Got = generate(*rounded, prompts, 6);
    ASSERT_EQ(got.logits.size(), want.logits.size());
    const double int8Error = worstError(got, want), bf16Error = worstError(bf16Got, want);
    RecordProperty(portable ? "int8_error_portable" : "int8_error", std::to_string(int8Error));
    RecordProperty(portable ? "bf16_error_portable" : "bf16_error", std::to_string(bf16Error));
    EXPECT_GT(int8Error, bf16Error) << kernels << ": the cache does not look quantised to int8";
    EXPECT_LE(int8Error, 1e-2) << kernels;
  }
}

// The vector kernels compute what the portable ones do, up to the rounding of exp.
TEST(EngineTest, VectorKernelsAgreeWithPortableKernels) {
  LoadedTinyPlan loaded(largerShape());
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> portable = engineWith(loaded.plan, 2, true);
  std::unique_ptr<Engine> best = engineWith(loaded.plan, 2, false);
  ASSERT_TRUE(portable && best);
  EXPECT_STREQ(portable->vectorKernels().name, "portable-f32");
  if (&best->vectorKernels() == &portable->vectorKernels())
    GTEST_SKIP() << "the host has no AVX-512: both engines run the portable kernels";
  const int32_t vocab = static_cast<int32_t>(largerShape().vocab);
  const std::vector<std::vector<int32_t>> prompts = {promptOf(70, 6, vocab), promptOf(3, 1, vocab)};
  const Generation want = generate(*portable, prompts, 6);
  const Generation got = generate(*best, prompts, 6);
  EXPECT_EQ(got.tokens, want.tokens);
  double largest = 0, worst = 0;
  for (size_t i = 0; i < want.logits.size(); ++i) {
    largest = std::max(largest, std::abs(double(want.logits[i])));
    worst = std::max(worst, std::abs(double(got.logits[i]) - want.logits[i]));
  }
  EXPECT_LE(worst, 1e-5 * largest);
}

// A plan whose lm_head rows repeat, so logits tie exactly: rows 0..19 are zero, row r >= 20
// copies row 20 + (r - 20) % 5. The largest logit is then shared by several ids in different
// LmHead tasks (tasks of 16 columns), or by all of 0..19 when every other logit is negative.
std::shared_ptr<const Plan> planWithTiedLogits(const TinyPlanShape &shape, test::ScratchDir &dir) {
  TinyPlan tiny = test::buildTinyPlan(shape);
  const int tensor = tiny.tensorIndex("lm_head.weight");
  EXPECT_GE(tensor, 0);
  std::vector<uint8_t> &bytes = tiny.segments.at(tiny.def.tensors[tensor]->segment);
  const size_t rowBytes = shape.hidden * sizeof(float);
  EXPECT_EQ(bytes.size(), shape.vocab * rowBytes);
  for (size_t r = 0; r < shape.vocab; ++r) {
    if (r < 20)
      std::memset(bytes.data() + r * rowBytes, 0, rowBytes);
    else if (r >= 25)
      std::memcpy(bytes.data() + r * rowBytes, bytes.data() + (20 + (r - 20) % 5) * rowBytes,
                  rowBytes);
  }
  const std::string path = dir.file("tied-logits.hplan");
  EXPECT_TRUE(test::writeTinyPlan(path, tiny).ok());
  Result<std::unique_ptr<Plan>> loaded = Plan::load(path);
  EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.message());
  return loaded.ok() ? std::shared_ptr<const Plan>(std::move(loaded.value())) : nullptr;
}

// Argmax steps leave the first largest logit's id, what argmaxFirst finds in the logits of the
// same step, on ties and otherwise; greedy generation gives the same ids either way.
TEST(EngineTest, ArgmaxStepsPickTheFirstLargestLogit) {
  TinyPlanShape tied;
  tied.tied_embeddings = true;
  TinyPlanShape packed = largerShape();
  packed.packed_bf16_linear = true;
  test::ScratchDir dir;
  std::vector<std::pair<std::string, std::shared_ptr<const Plan>>> plans;
  for (const auto &[name, shape] :
       std::vector<std::pair<std::string, TinyPlanShape>>{{"default", TinyPlanShape()},
                                                          {"larger", largerShape()},
                                                          {"tied", tied},
                                                          {"packed bf16", packed}}) {
    LoadedTinyPlan loaded(shape);
    plans.push_back({name, loaded.plan});
  }
  plans.push_back({"tied logits", planWithTiedLogits(largerShape(), dir)});

  for (const auto &[name, plan] : plans) {
    ASSERT_TRUE(plan) << name;
    const int32_t vocab = static_cast<int32_t>(plan->def().model()->vocab());
    std::unique_ptr<Engine> withLogits = engineWith(plan, 2, false);
    std::unique_ptr<Engine> argmaxOnly = engineWith(plan, 2, false);
    ASSERT_TRUE(withLogits && argmaxOnly) << name;

    // Step by step: both engines see the same tokens; sequence 1 asks for nothing.
    const std::vector<int32_t> a = promptOf(5, 2, vocab), b = promptOf(2, 5, vocab),
                               c = promptOf(3, 7, vocab);
    StepSequence sequences[3] = {
        {0, 0, a.data(), 5, true}, {1, 0, b.data(), 2, false}, {2, 0, c.data(), 3, true}};
    size_t ties = 0;
    int32_t next[3];
    for (int step = 0; step < 8; ++step) {
      const size_t count = std::min<size_t>(3, withLogits->maxBatch());
      ASSERT_TRUE(withLogits->step(sequences, count, StepOutput::Logits).ok()) << name;
      ASSERT_TRUE(argmaxOnly->step(sequences, count, StepOutput::Argmax).ok()) << name;
      for (size_t s = 0; s < count; ++s) {
        if (!sequences[s].wantLogits) {
          EXPECT_EQ(argmaxOnly->argmax(s), -1) << name;
          next[s] = sequences[s].tokens[sequences[s].count - 1];
          continue;
        }
        const float *logits = withLogits->logits(s);
        const int32_t want = static_cast<int32_t>(kernels::argmaxFirst(logits, vocab));
        ties += std::count(logits, logits + vocab, logits[want]) > 1;
        EXPECT_EQ(argmaxOnly->argmax(s), want) << name << " step " << step << " sequence " << s;
        next[s] = want;
      }
      for (size_t s = 0; s < count; ++s) {
        sequences[s].start += sequences[s].count;
        sequences[s].tokens = &next[s];
        sequences[s].count = 1;
      }
    }
    if (name == "tied logits")
      EXPECT_GT(ties, 0u) << "the tied plan should produce tied logits";

    // Greedy generation: the argmax path (no logits asked) gives the logits path's ids.
    std::unique_ptr<Engine> fresh = engineWith(plan, 2, false);
    const std::vector<std::vector<int32_t>> prompts = {promptOf(7, 1, vocab),
                                                       promptOf(3, 4, vocab)};
    const Generation logitsRun = generate(*fresh, prompts, 6);
    Result<GenerateResult> argmaxRun = generateGreedy(*fresh, prompts, 6);
    ASSERT_TRUE(argmaxRun.ok()) << argmaxRun.message();
    EXPECT_EQ(argmaxRun->tokens, logitsRun.tokens) << name;
  }
}

TEST(EngineTest, ArgmaxDecodeStepsDoNotAllocate) {
  for (unsigned threads : {1u, 2u})
    EXPECT_EQ(decodeAllocations(threads, StepOutput::Argmax), std::optional<size_t>(0))
        << "with " << threads << " threads";
}

} // namespace
} // namespace hetc
