// Park & Egger's split-point search, fed their own measured OPT-30B operator latencies (Fig. 6(a)
// and 7(a), tests/cost/data). The expected splits and latencies are worked out by hand from the
// tables with Eq. 5-7 (one batch) and Eq. 14 (two batches).
#include "hetc/compiler/OperatorSplit.h"

#include <gtest/gtest.h>

namespace hetc::compiler {
namespace {

const std::string kData = HETC_COST_TEST_DATA;

std::vector<OperatorTime> table(const char *file) {
  Result<std::vector<OperatorTime>> ops = loadOperatorTimes(kData + "/" + file);
  EXPECT_TRUE(ops) << ops.message();
  return ops ? *ops : std::vector<OperatorTime>{};
}

// Operators: LN.0 Q K V Scores Softmax WV Output LN.1 FC.0 FC.1 (positions 0..11).
TEST(OperatorSplit, SingleBatchFig6a) {
  const std::vector<OperatorTime> ops = table("park_egger_opt30b_fig6a.csv");
  ASSERT_EQ(ops.size(), 11u);
  const SplitSearch s = searchSplits(ops, 1);

  // GPU only: every transfer, 0.001 + 3 x 4.214 + 2 x 15.344 + 4.214 + 0.001 + 2 x 16.856.
  EXPECT_NEAR(s.gpuOnly.latencyMs, 81.258, 1e-9);

  // Fig. 14's family, a CPU prefix: LN.0..V on the CPU (17.58 ms) beside the rest's transfers
  // (68.615 ms), 15.6% below GPU only.
  EXPECT_EQ(s.prefixOnly.gpuBegin, 4);
  EXPECT_EQ(s.prefixOnly.gpuEnd, 11);
  EXPECT_NEAR(s.prefixOnly.cpuMs, 17.58, 1e-9);
  EXPECT_NEAR(s.prefixOnly.latencyMs, 68.615, 1e-9);
  // Cutting Scores in eighths (Fig. 14(b)): half of it joins the prefix, 17.58 + 38.764 on the
  // CPU against 68.615 - 7.672 on the link: 60.943 ms, 11.2% below the whole-operator prefix.
  EXPECT_EQ(s.prefixCut.gpuBegin, 4.5);
  EXPECT_NEAR(s.prefixCut.latencyMs, 60.943, 1e-9);
  EXPECT_TRUE(s.prefixCut.cutsOperator);

  // Eq. 6 allows a CPU suffix too: FC.0 and FC.1 on the CPU (47.409 ms) beside the transfers of
  // LN.0..LN.1 (47.546 ms) balance best, 41.5% below GPU only; no two-point split or cut of
  // Scores does better.
  EXPECT_EQ(s.single.gpuBegin, 0);
  EXPECT_EQ(s.single.gpuEnd, 9);
  EXPECT_EQ(s.single.splitPoints, 1u);
  EXPECT_NEAR(s.single.cpuMs, 47.409, 1e-9);
  EXPECT_NEAR(s.single.latencyMs, 47.546, 1e-9);
  EXPECT_NEAR(s.best.latencyMs, 47.546, 1e-9);
  EXPECT_FALSE(s.best.cutsOperator);
  EXPECT_NEAR(1 - s.best.latencyMs / s.gpuOnly.latencyMs, 0.415, 0.001);
  EXPECT_EQ(describeSplit(ops, s.best),
            "gpu: LN.0, Q, K, V, Scores, Softmax, WV, Output, LN.1 | cpu: FC.0, FC.1");
}

// Two batches of 25 share the weights: the CPU works both, and each batch's KV cache and GPU
// work after the first add to the link's time (Eq. 14).
TEST(OperatorSplit, TwoBatchesFig7a) {
  const std::vector<OperatorTime> ops = table("park_egger_opt30b_fig7a.csv");
  const SplitSearch s = searchSplits(ops, 2);
  // GPU only: 66.338 of transfers + the second batch's GPU work (4.631) and KV (15.768).
  EXPECT_NEAR(s.gpuOnly.latencyMs, 86.737, 1e-9);
  // Two split points, as Fig. 7(b): LN.0, Q, K and FC.1 on the CPU, 2 x 30.206 = 60.412 ms,
  // beside 59.594 ms on the link; 30.4% below GPU only.
  EXPECT_EQ(s.twoPoints.gpuBegin, 3);
  EXPECT_EQ(s.twoPoints.gpuEnd, 10);
  EXPECT_EQ(s.twoPoints.splitPoints, 2u);
  EXPECT_NEAR(s.twoPoints.cpuMs, 60.412, 1e-9);
  EXPECT_NEAR(s.twoPoints.h2dMs, 59.594, 1e-9);
  EXPECT_NEAR(s.best.latencyMs, 60.412, 1e-9);
  EXPECT_NEAR(1 - s.best.latencyMs / s.gpuOnly.latencyMs, 0.304, 0.001);
  // One split point at best: a CPU suffix, FC.1 (2 x 19.891 against 68.707 on the link).
  EXPECT_NEAR(s.single.latencyMs, 68.707, 1e-9);
  // Fig. 7(c)'s single split after a cut of Scores: LN.0..V and 3/8 of Scores on the CPU,
  // 2 x (15.345 + 3/8 x 36.45) = 58.028 against 67.000 on the link; better than the whole-
  // operator prefix (LN.0..V, 73.087), so the cut pays where only a prefix runs on the CPU.
  EXPECT_NEAR(s.prefixOnly.latencyMs, 73.087, 1e-9);
  EXPECT_EQ(s.prefixCut.gpuBegin, 4.375);
  EXPECT_NEAR(s.prefixCut.cpuMs, 58.0275, 1e-9);
  EXPECT_NEAR(s.prefixCut.latencyMs, 67.000375, 1e-9);
}

TEST(OperatorSplit, CutOfScoresOnItsOwn) {
  // Scores alone, splittable in 8: the cut balances CPU and link where whole operators cannot.
  std::vector<OperatorTime> ops = {{"Scores", 8.0, 0.5, 8.0, true, true}};
  const SplitSearch s = searchSplits(ops, 1);
  EXPECT_NEAR(s.gpuOnly.latencyMs, 8.0, 1e-12);
  EXPECT_NEAR(s.twoPoints.latencyMs, 8.0, 1e-12);
  EXPECT_TRUE(s.best.cutsOperator);
  EXPECT_NEAR(s.best.latencyMs, 4.0, 1e-12); // half on each side
  EXPECT_EQ(s.best.gpuEnd - s.best.gpuBegin, 0.5);
  EXPECT_NE(describeSplit(ops, s.best).find("cpu: 0.5 of Scores"), std::string::npos);
}

TEST(OperatorSplit, MalformedTablesAreRefused) {
  struct Case {
    const char *text;
    const char *message;
  };
  const Case cases[] = {
      {"", "t.csv: empty (expected the header op,h2d_ms,cpu_ms,gpu_ms,cache,splittable and one "
           "line per operator)"},
      {"op,h2d,cpu\n", "t.csv:1: expected the header op,h2d_ms,cpu_ms,gpu_ms,cache,splittable"},
      {"op,h2d_ms,cpu_ms,gpu_ms,cache,splittable\n", "t.csv: no operators"},
      {"op,h2d_ms,cpu_ms,gpu_ms,cache,splittable\nQ,1,2\n", "t.csv:2: expected 6 fields, got 3"},
      {"op,h2d_ms,cpu_ms,gpu_ms,cache,splittable\nQ,1,-2,0,0,0\n",
       "t.csv:2: cpu_ms: '-2' is not a non-negative number of milliseconds"},
      {"op,h2d_ms,cpu_ms,gpu_ms,cache,splittable\n# note\nQ,1,2,x,0,0\n",
       "t.csv:3: gpu_ms: 'x' is not a non-negative number of milliseconds"},
      {"op,h2d_ms,cpu_ms,gpu_ms,cache,splittable\nQ,1,2,0,yes,0\n",
       "t.csv:2: cache: expected 0 or 1, got 'yes'"},
      {"op,h2d_ms,cpu_ms,gpu_ms,cache,splittable\n,1,2,0,0,0\n", "t.csv:2: op: empty name"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(parseOperatorTimes(c.text, "t.csv").message(), c.message) << c.text;
  EXPECT_EQ(loadOperatorTimes("/nonexistent.csv").message(),
            "cannot read operator times /nonexistent.csv");
}

// The model's own per-operator predictions: one operator per weight or cache, splittable scores.
TEST(OperatorSplit, PredictedOperatorsCoverTheLayer) {
  Result<Target> spr = findTarget("spr-a100");
  ASSERT_TRUE(spr) << spr.message();
  const Machine machine = Machine::of(*spr);
  const ModelShape &llama = *findModel("llama-3-70b");
  const std::vector<OperatorTime> ops =
      predictOperatorTimes(llama, machine, 16, 1024, LayerPlacement{});
  ASSERT_EQ(ops.size(), 9u); // q k v scores wv out gate up down
  const LayerSize size = layerSize(llama, Stage::Decode, 16, 1024);
  double h2d = 0;
  for (const OperatorTime &op : ops)
    h2d += op.h2dMs;
  // Every weight and the whole cache cross the link once when the GPU computes everything.
  const double bytes = size.weightBytes() + size.sublayers[1].yBytes + size.sublayers[2].yBytes;
  EXPECT_NEAR(h2d, 1e3 * bytes / machine.pcieBytesPerS, 1e-9);
  EXPECT_TRUE(ops[3].splittable);
  EXPECT_TRUE(ops[3].cacheData);
  EXPECT_EQ(ops[8].name, "down");
}

} // namespace
} // namespace hetc::compiler
