// The decode benchmark's parts that do not depend on timing: the bytes a step reads, the refusal
// of options a plan cannot run, the synthetic KV fill, the kernel summary, and a profile whose
// per-op figures add up. Nothing here asserts how fast anything is.
#include "EngineTestSupport.h"
#include "TestPlans.h"

#include "runtime/executor/Engine.h"
#include "runtime/format/Plan.h"
#include "tools/report/DecodeBenchmark.h"
#include "tools/report/MemoryBandwidth.h"

#include "codegen/cpu/vector/VectorKernels.h"
#include "runtime/platform/CpuFeatures.h"
#include <gtest/gtest.h>
#include <map>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace hetc {
namespace {

using test::LoadedTinyPlan;
using test::TinyPlanShape;

// Small probe buffers keep the tests quick; the figures are not looked at.
DecodeBenchOptions quickOptions(uint64_t context, uint32_t batch, uint32_t gen) {
  DecodeBenchOptions options;
  options.context = context;
  options.batch = batch;
  options.gen = gen;
  options.bandwidth.bytes = 1 << 20;
  options.bandwidth.passes = 1;
  options.bandwidth.minSeconds = 0.0;
  return options;
}

// Weight floats of the tiny plan, written out from its shape rather than from the plan.
uint64_t tinyWeightFloats(const TinyPlanShape &s, uint32_t batch) {
  const uint64_t q = uint64_t{s.heads} * s.head_dim, kv = uint64_t{s.kv_heads} * s.head_dim;
  const uint64_t perLayer = q * s.hidden + 2 * kv * s.hidden + s.hidden * q +
                            3 * uint64_t{s.intermediate} * s.hidden + 2 * s.hidden;
  const uint64_t table = uint64_t{s.vocab} * s.hidden;
  const uint64_t lmHead = s.tied_embeddings ? 0 : table;
  const uint64_t embedding = s.tied_embeddings ? table : uint64_t{batch} * s.hidden;
  return s.layers * perLayer + s.hidden /* final norm */ + s.head_dim / 2 /* inv_freq */ + lmHead +
         embedding;
}

TEST(DecodeBenchTest, StepBytesCountEachWeightOnceAndKvAtTheAverageContext) {
  TinyPlanShape shape;
  shape.layers = 2;
  LoadedTinyPlan loaded(shape);
  ASSERT_TRUE(loaded.plan);
  for (uint32_t batch : {1u, 2u}) {
    const DecodeStepBytes bytes = decodeStepBytes(*loaded.plan, batch, 10, 4);
    EXPECT_EQ(bytes.weights, tinyWeightFloats(shape, batch) * sizeof(float)) << batch;
    EXPECT_EQ(bytes.embeddingRows, uint64_t{batch} * shape.hidden * sizeof(float));
    // K and V, every layer and KV head, head_dim floats each.
    EXPECT_EQ(bytes.kvPerPosition,
              uint64_t{2} * shape.layers * shape.kv_heads * shape.head_dim * sizeof(float));
    // Steps at positions 10..13 attend 11..14 positions: 12.5 on average.
    EXPECT_DOUBLE_EQ(bytes.averageAttended, 12.5);
    EXPECT_DOUBLE_EQ(bytes.kv(), 12.5 * bytes.kvPerPosition * batch);
    EXPECT_DOUBLE_EQ(bytes.total(), bytes.weights + bytes.kv());
  }
}

TEST(DecodeBenchTest, StepBytesCountATiedTableOnce) {
  TinyPlanShape shape;
  shape.tied_embeddings = true;
  LoadedTinyPlan loaded(shape);
  ASSERT_TRUE(loaded.plan);
  const DecodeStepBytes bytes = decodeStepBytes(*loaded.plan, 2, 0, 1);
  // The lm_head reads the whole table; the embedding's rows are part of it.
  EXPECT_EQ(bytes.weights, tinyWeightFloats(shape, 2) * sizeof(float));
  EXPECT_EQ(bytes.embeddingRows, 0u);
  EXPECT_DOUBLE_EQ(bytes.averageAttended, 1.0);
}

TEST(DecodeBenchTest, RefusesWhatThePlanCannotRun) {
  TinyPlanShape shape; // max_batch 2, max_seq 32, max_step_tokens 8
  LoadedTinyPlan loaded(shape);
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  auto refusal = [&](uint64_t context, uint32_t batch, uint32_t gen) {
    Status s = checkDecodeBench(*engine, quickOptions(context, batch, gen));
    EXPECT_FALSE(s.ok());
    return s.message();
  };
  EXPECT_EQ(refusal(0, 3, 4), "--batch 3 exceeds the plan's --max-batch 2");
  EXPECT_EQ(refusal(30, 1, 4),
            "--context 30 + --gen 4 need 34 positions but the plan's --max-seq is 32");
  EXPECT_EQ(refusal(33, 1, 1),
            "--context 33 + --gen 1 need 34 positions but the plan's --max-seq is 32");
  EXPECT_EQ(refusal(0, 0, 4), "--batch must be at least 1");
  EXPECT_EQ(refusal(0, 1, 0), "--gen must be at least 1");
  EXPECT_TRUE(checkDecodeBench(*engine, quickOptions(28, 2, 4)).ok());
  // The runner refuses the same way, before touching anything.
  Result<DecodeBenchReport> report = runDecodeBench(*engine, quickOptions(30, 1, 4));
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.message(),
            "--context 30 + --gen 4 need 34 positions but the plan's --max-seq is 32");

  TinyPlanShape narrow;
  narrow.max_batch = 4;
  narrow.max_step_tokens = 2;
  LoadedTinyPlan narrowPlan(narrow);
  ASSERT_TRUE(narrowPlan.plan);
  std::unique_ptr<Engine> narrowEngine = narrowPlan.engine(1);
  ASSERT_TRUE(narrowEngine);
  Status s = checkDecodeBench(*narrowEngine, quickOptions(0, 3, 1));
  EXPECT_EQ(s.message(), "--batch 3 exceeds the plan's --max-step-tokens 2 (a decode step "
                         "carries one token of each sequence)");
}

TEST(DecodeBenchTest, SyntheticFillIsDeterministicAndIndependentOfThreads) {
  LoadedTinyPlan loaded(TinyPlanShape{});
  ASSERT_TRUE(loaded.plan);
  std::vector<std::vector<float>> logits;
  for (unsigned threads : {1u, 2u}) {
    std::unique_ptr<Engine> engine = loaded.engine(threads);
    ASSERT_TRUE(engine);
    EXPECT_EQ(engine->fillSyntheticKv(2, 4, 1).message(),
              "slot 2 is past the plan's --max-batch 2");
    EXPECT_EQ(engine->fillSyntheticKv(0, 33, 1).message(),
              "33 positions exceed the plan's --max-seq 32");
    ASSERT_TRUE(engine->fillSyntheticKv(1, 20, 9).ok());
    EXPECT_EQ(engine->cachedPositions(1), 20u);
    EXPECT_EQ(engine->cachedPositions(0), 0u);
    const int32_t token = 5;
    const StepSequence step{1, 20, &token, 1, true};
    ASSERT_TRUE(engine->step(&step, 1).ok());
    logits.emplace_back(engine->logits(0), engine->logits(0) + engine->vocab());
    for (float value : logits.back())
      ASSERT_TRUE(std::isfinite(value));
  }
  EXPECT_EQ(std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)), 0);
}

// The summary against what the plan holds (counted from the test's own plan, not from the engine)
// and the kernels this host picks (asked of codegen directly).
TEST(DecodeBenchTest, KernelSummaryCoversEveryOp) {
  LoadedTinyPlan loaded(TinyPlanShape{});
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  std::map<std::string, size_t> planKinds;
  for (const auto &op : loaded.tiny.def.ops)
    ++planKinds[plan::EnumNameOpKindDef(op->kind)];
  ASSERT_GT(planKinds["Attention"], 0u);
  ASSERT_GT(planKinds["Linear"], 0u);
  std::map<std::string, size_t> expected = planKinds;
  expected["KvAppend"] = expected["AttentionMerge"] = planKinds["Attention"];
  const char *vectorSet = kernels::vectorKernelsFor(hostCpuFeatures()).name;
  std::map<std::string, size_t> seen;
  for (const KernelUse &use : engine->kernelSummary()) {
    seen[use.opKind] += use.count;
    if (use.opKind == "Linear" || use.opKind == "LmHead")
      EXPECT_EQ(use.kernel, "LinearF32Portable") << "f32 weights";
    if (use.opKind == "RmsNorm" || use.opKind == "SwiGlu" || use.opKind == "Add")
      EXPECT_EQ(use.kernel, vectorSet) << use.opKind;
  }
  EXPECT_EQ(seen, expected);
}

TEST(DecodeBenchTest, ReportAndProfileAddUp) {
  LoadedTinyPlan loaded(TinyPlanShape{});
  ASSERT_TRUE(loaded.plan);
  for (KvFill fill : {KvFill::Auto, KvFill::Synthetic}) {
    std::unique_ptr<Engine> engine = loaded.engine(2, /*pin=*/false, /*profile=*/true);
    ASSERT_TRUE(engine);
    ASSERT_TRUE(engine->profile());
    DecodeBenchOptions options = quickOptions(12, 2, 5);
    options.fill = fill;
    Result<DecodeBenchReport> result = runDecodeBench(*engine, options);
    ASSERT_TRUE(result.ok()) << result.message();
    const DecodeBenchReport &r = *result;
    EXPECT_EQ(r.fill, fill == KvFill::Auto ? KvFill::Prefill : KvFill::Synthetic);
    EXPECT_EQ(engine->cachedPositions(0), 12u + 5u);
    EXPECT_EQ(engine->cachedPositions(1), 12u + 5u);
    EXPECT_GT(r.tokensPerS, 0.0);
    EXPECT_NEAR(r.tokensPerS * r.msPerToken / 1e3, 2.0, 1e-9); // two tokens per step
    EXPECT_DOUBLE_EQ(r.bytes.total(), decodeStepBytes(*loaded.plan, 2, 12, 5).total());
    EXPECT_GT(r.bandwidthBefore.bestGbs, 0.0);
    EXPECT_GT(r.bandwidthAfter.bestGbs, 0.0);
    EXPECT_EQ(r.measuredGbs, std::max(r.bandwidthBefore.bestGbs, r.bandwidthAfter.bestGbs));
    EXPECT_NEAR(r.rooflineFraction, r.achievedGbs / r.measuredGbs, 1e-12);
    EXPECT_GT(r.pairedRooflineFraction, 0.0);
    EXPECT_LE(r.pairedRooflineMin, r.pairedRooflineFraction);
    EXPECT_GE(r.pairedRooflineMax, r.pairedRooflineFraction);
    EXPECT_EQ(r.threads, 2u);

    ASSERT_TRUE(r.profiled);
    const DecodeProfile &p = r.profile;
    EXPECT_EQ(p.steps, 5u);
    EXPECT_EQ(engine->profile()->runs(), 5u);
    ASSERT_EQ(p.ops.size(), engine->phases().size());
    double run = 0, wait = 0;
    for (const OpTime &op : p.ops) {
      EXPECT_GT(op.runMs + op.waitMs, 0.0) << op.name;
      EXPECT_GE(op.maxThreadRunMs, op.runMs * (1 - 1e-9)) << op.name; // the max over threads
      if (op.kind == "Linear" || op.kind == "LmHead" || op.kind == "Attention")
        EXPECT_GT(op.runMs, 0.0) << op.name;
      run += op.runMs;
      wait += op.waitMs;
    }
    EXPECT_NEAR(run, p.runMs, 1e-9);
    EXPECT_NEAR(wait, p.waitMs, 1e-9);
    double kindRun = 0, kindWait = 0;
    size_t kindOps = 0;
    for (const KindTime &kind : p.kinds) {
      kindRun += kind.runMs;
      kindWait += kind.waitMs;
      kindOps += kind.ops;
    }
    EXPECT_NEAR(kindRun, p.runMs, 1e-9);
    EXPECT_NEAR(kindWait, p.waitMs, 1e-9);
    EXPECT_EQ(kindOps, p.ops.size());
    // Each thread's run + wait lies inside the step's wall time.
    EXPECT_LE(p.runMs + p.waitMs, p.stepMs * (1 + 1e-9));
    EXPECT_NEAR(p.runMs + p.waitMs + p.dispatchMs, p.stepMs, 1e-9);
    EXPECT_LE(p.stepMs, r.msPerToken * (1 + 1e-9));
    EXPECT_GE(p.overheadFraction, 0.0);
    EXPECT_LE(p.overheadFraction, 1.0);

    // The split: attention is the KV append, the chunks and their merge, the rest is fixed.
    double attentionMs = 0;
    for (size_t i = 0; i < p.ops.size(); ++i) {
      const OpKind kind = engine->resolvedOps()[engine->phases()[i].firstOp].kind;
      EXPECT_EQ(p.ops[i].attention, kind == OpKind::KvAppend || kind == OpKind::Attention ||
                                        kind == OpKind::AttentionMerge)
          << p.ops[i].name;
      if (p.ops[i].attention)
        attentionMs += p.ops[i].runMs + p.ops[i].waitMs;
    }
    const DecodeTimeSplit &split = r.split;
    EXPECT_GT(split.attentionMs, 0.0);
    EXPECT_NEAR(split.attentionMs, attentionMs, 1e-12);
    EXPECT_NEAR(split.fixedMs + split.attentionMs, r.msPerToken, 1e-9);
    EXPECT_NEAR(split.attentionShare, split.attentionMs / r.msPerToken, 1e-12);
    EXPECT_NEAR(split.attentionGbs, r.bytes.kv() / (split.attentionMs / 1e3) / 1e9, 1e-9);
    EXPECT_NEAR(split.fixedGbs, r.bytes.weights / (split.fixedMs / 1e3) / 1e9, 1e-9);
    EXPECT_NEAR(split.attentionRooflineFraction, split.attentionGbs / r.measuredGbs, 1e-12);
    EXPECT_NEAR(split.fixedRooflineFraction, split.fixedGbs / r.measuredGbs, 1e-12);
  }
}

TEST(DecodeBenchTest, OneEngineServesASweep) {
  // A point after a longer one overwrites the slots: its steps decode exactly what a fresh
  // engine's do (the stale positions past the context are never attended).
  LoadedTinyPlan loaded(TinyPlanShape{});
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> reused = loaded.engine(2);
  std::unique_ptr<Engine> fresh = loaded.engine(2);
  ASSERT_TRUE(reused && fresh);
  for (KvFill fill : {KvFill::Synthetic, KvFill::Prefill}) {
    DecodeBenchOptions longer = quickOptions(24, 2, 4), shorter = quickOptions(12, 2, 3);
    longer.fill = shorter.fill = fill;
    ASSERT_TRUE(runDecodeBench(*reused, longer).ok());
    Result<DecodeBenchReport> again = runDecodeBench(*reused, shorter);
    ASSERT_TRUE(again.ok()) << again.message();
    ASSERT_TRUE(runDecodeBench(*fresh, shorter).ok());
    for (uint32_t slot = 0; slot < 2; ++slot) {
      EXPECT_EQ(reused->cachedPositions(slot), 12u + 3u);
      EXPECT_EQ(reused->argmax(slot), fresh->argmax(slot)) << slot;
    }
    EXPECT_EQ(again->context, 12u);
    EXPECT_DOUBLE_EQ(again->bytes.averageAttended, 12 + (3 + 1) / 2.0);
  }
}

TEST(DecodeBenchTest, SweepSkipsWhatThePlanCannotRunAndSaysWhy) {
  TinyPlanShape shape; // max_batch 2, max_seq 32, max_step_tokens 8
  LoadedTinyPlan loaded(shape);
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  Result<DecodeSweep> sweep =
      planDecodeSweep(*engine, {16, 0, 40, 8, 8}, {3, 1, 2}, 4, 0, std::nullopt);
  ASSERT_TRUE(sweep.ok()) << sweep.message();
  // Batch-major, ascending, duplicates gone.
  std::vector<std::pair<uint32_t, uint64_t>> points;
  for (const DecodeSweepPoint &p : sweep->points)
    points.push_back({p.batch, p.context});
  EXPECT_EQ(points, (std::vector<std::pair<uint32_t, uint64_t>>{
                        {1, 0}, {1, 8}, {1, 16}, {2, 0}, {2, 8}, {2, 16}}));
  ASSERT_EQ(sweep->skipped.size(), 6u);
  EXPECT_EQ(sweep->skipped[0].point.batch, 1u);
  EXPECT_EQ(sweep->skipped[0].point.context, 40u);
  EXPECT_EQ(sweep->skipped[0].reason,
            "--context 40 + --gen 4 need 44 positions but the plan's --max-seq is 32");
  EXPECT_EQ(sweep->skipped[2].point.batch, 3u);
  EXPECT_EQ(sweep->skipped[2].reason, "--batch 3 exceeds the plan's --max-batch 2");

  Result<DecodeSweep> none = planDecodeSweep(*engine, {30, 40}, {1, 3}, 4, 0, std::nullopt);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.message(),
            "no point of the sweep can run: --context 30 + --gen 4 need 34 positions but the "
            "plan's --max-seq is 32; --context 40 + --gen 4 need 44 positions but the plan's "
            "--max-seq is 32; --batch 3 exceeds the plan's --max-batch 2");
  EXPECT_EQ(planDecodeSweep(*engine, {0}, {1}, 0, 0, std::nullopt).message(),
            "--gen must be at least 1");
  EXPECT_EQ(planDecodeSweep(*engine, {0}, {0, 1}, 4, 0, std::nullopt).message(),
            "--batch must be at least 1");
  EXPECT_EQ(planDecodeSweep(*engine, {}, {1}, 4, 0, std::nullopt).message(),
            "the sweep has no context");
}

TEST(DecodeBenchTest, SweepCountsTheKvPositionsEarlierPointsLeftResident) {
  TinyPlanShape shape;
  LoadedTinyPlan loaded(shape);
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(1);
  ASSERT_TRUE(engine);
  const uint64_t perPosition = decodeStepBytes(*loaded.plan, 1, 0, 1).kvPerPosition;

  KvResidency residency(perPosition, 2);
  EXPECT_EQ(residency.newBytes(2, 20), 40 * perPosition);
  residency.touch(1, 20);
  EXPECT_EQ(residency.newBytes(1, 12), 0u);               // slot 0 already holds 20
  EXPECT_EQ(residency.newBytes(2, 12), 12 * perPosition); // slot 1 does not
  EXPECT_EQ(residency.newBytes(2, 24), (4 + 24) * perPosition);

  EXPECT_FALSE(memoryShortfall(900, 0, 1000).has_value()); // 10% kept free
  EXPECT_EQ(memoryShortfall(901, 0, 1000).value_or(""),
            "the KV cache needs 0.00 GiB more memory (and the bandwidth probe 0.00 GiB) but "
            "0.00 GiB is available, of which 10% is kept free");
  EXPECT_TRUE(memoryShortfall(500, 401, 1000).has_value());
  EXPECT_TRUE(memoryShortfall(500, 0, 1000, 401).has_value());
  EXPECT_EQ(
      memoryShortfall(uint64_t{3} << 30, uint64_t{1} << 30, uint64_t{4} << 30, uint64_t{1} << 29)
          .value_or(""),
      "the KV cache needs 3.00 GiB more memory (and the bandwidth probe 1.00 GiB) after "
      "0.50 GiB for earlier points but 4.00 GiB is available, of which 10% is kept free");

  // Room for 28 positions: batch 1 up to context 16 takes 20 of slot 0, batch 2 at context 0
  // then 4 of slot 1; at context 8 slot 1 would need 8 more.
  const uint64_t available = (24 + 4) * perPosition * 10 / 9 + 9;
  Result<DecodeSweep> sweep = planDecodeSweep(*engine, {0, 8, 16}, {1, 2}, 4, 0, available);
  ASSERT_TRUE(sweep.ok()) << sweep.message();
  ASSERT_EQ(sweep->points.size(), 4u);
  EXPECT_EQ(sweep->points[3].batch, 2u);
  EXPECT_EQ(sweep->points[3].context, 0u);
  ASSERT_EQ(sweep->skipped.size(), 2u);
  EXPECT_EQ(sweep->skipped[0].point.context, 8u);
  EXPECT_NE(sweep->skipped[0].reason.find("for earlier points"), std::string::npos)
      << sweep->skipped[0].reason;
  // The probe's buffer counts too.
  EXPECT_FALSE(planDecodeSweep(*engine, {0}, {1}, 4, available, available).ok());
}

TEST(DecodeBenchTest, NoProfileOrPairedStepsUnlessAsked) {
  LoadedTinyPlan loaded(TinyPlanShape{});
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(2);
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->profile(), nullptr);
  DecodeBenchOptions options = quickOptions(0, 1, 2);
  options.pairedSteps = false;
  Result<DecodeBenchReport> r = runDecodeBench(*engine, options);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(r->profiled);
  EXPECT_TRUE(r->profile.ops.empty());
  EXPECT_EQ(r->pairedRooflineFraction, 0.0);
  EXPECT_EQ(r->fill, KvFill::Prefill); // nothing to fill at context 0
}

TEST(MemoryBandwidthTest, ReadsTheWholeBufferWithEveryThread) {
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::create(2, false);
  ASSERT_TRUE(pool.ok());
  ReadBandwidthOptions options;
  options.bytes = (1 << 20) + 5; // rounded up to whole pages
  options.passes = 3;
  options.minSeconds = 0.0;
  Result<ReadBandwidth> bw = measureReadBandwidth(*pool.value(), options);
  ASSERT_TRUE(bw.ok()) << bw.message();
  EXPECT_EQ(bw->bufferBytes, (1u << 20) + 4096u);
  EXPECT_EQ(bw->passBytes, bw->bufferBytes);
  EXPECT_EQ(bw->passes, 3u);
  EXPECT_EQ(bw->threads, 2u);
  EXPECT_GT(bw->bestGbs, 0.0);
  EXPECT_LE(bw->medianGbs, bw->bestGbs);
  EXPECT_TRUE(std::string(bw->loads) == "avx512" || std::string(bw->loads) == "64-bit");
  EXPECT_EQ(bw->lastLevelCacheBytes, lastLevelCacheBytes());

  // Passes longer or shorter than the buffer go round it as a ring.
  for (uint64_t passBytes : {uint64_t{5} << 19, uint64_t{3} << 18}) {
    options.passBytes = passBytes;
    Result<ReadBandwidth> ring = measureReadBandwidth(*pool.value(), options);
    ASSERT_TRUE(ring.ok()) << ring.message();
    EXPECT_EQ(ring->passBytes, passBytes);
    EXPECT_EQ(ring->passes, 3u);
    EXPECT_GT(ring->bestGbs, 0.0);
  }
}

TEST(MemoryBandwidthTest, IsNotRecordedInThePoolsProfile) {
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::create(2, false);
  ASSERT_TRUE(pool.ok());
  PhaseProfile profile(1, 2);
  ASSERT_TRUE(pool.value()->setProfile(&profile));
  ReadBandwidthOptions options;
  options.bytes = 1 << 20;
  options.passes = 2;
  options.minSeconds = 0.0;
  ASSERT_TRUE(measureReadBandwidth(*pool.value(), options).ok());
  EXPECT_EQ(profile.runs(), 0u);
  EXPECT_EQ(pool.value()->profile(), &profile); // recording again afterwards
}

} // namespace
} // namespace hetc
