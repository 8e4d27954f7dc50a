// Plans with BF16 weights packed as LinearBf16N16K2: the loader's checks of the layout, the
// engine's kernel choice and bf16 row conversions, agreement with the float32 plan of the same
// weights, results independent of threads and batching, the fused residual epilogue and a tied
// embedding read from the packed lm_head weight.
#include "EngineTestSupport.h"
#include "FloatBits.h"
#include "TestPlans.h"

#include "codegen/cpu/isa/CpuFeatures.h"
#include "codegen/cpu/linear/Linear.h"
#include "runtime/executor/Engine.h"
#include "runtime/format/Plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace hetc {
namespace {

using test::LoadedTinyPlan;
using test::TinyPlan;
using test::TinyPlanShape;

TinyPlanShape bf16Shape() {
  TinyPlanShape shape;
  shape.vocab = 97; // not a multiple of 16: the last block of lm_head is partial
  shape.hidden = 40;
  shape.layers = 2;
  shape.heads = 6;
  shape.kv_heads = 2;
  shape.head_dim = 24;
  shape.intermediate = 72;
  shape.max_batch = 3;
  shape.max_seq = 64;
  shape.max_step_tokens = 20; // more than the 16 rows one kernel call takes
  shape.seed = 11;
  shape.packed_bf16_linear = true;
  return shape;
}

using test::expectSameBits;
using test::promptOf;
using test::teacherForced;

const std::vector<std::vector<int32_t>> kPrompts = {promptOf(7, 3, 97), promptOf(2, 50, 97),
                                                    promptOf(11, 20, 97)};

TEST(EngineBf16Test, RunsTheHostsBestLinearKernelWithOneConversionPerInput) {
  LoadedTinyPlan loaded(bf16Shape());
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(2);
  ASSERT_TRUE(engine);
  const codegen::LinearKernelInfo best =
      codegen::chooseLinearBf16Kernel(codegen::linearKernelFeatures());
  size_t linears = 0, conversions = 0;
  for (const KernelUse &use : engine->kernelSummary()) {
    if (use.opKind == "Linear" || use.opKind == "LmHead") {
      EXPECT_EQ(use.kernel, best.label);
      linears += use.count;
    }
    if (use.opKind == "ConvertRowsBf16")
      conversions += use.count;
  }
  EXPECT_EQ(linears, 7u * 2 + 1);
  // Per layer the rows of normed (q, k, v), attn (o), normed again (gate, up) and act (down),
  // and the LmHead's gathered rows: converted once each, only for kernels that read bf16 rows.
  EXPECT_EQ(conversions, best.readsBf16Rows ? 4u * 2 + 1 : 0u);
  const std::vector<float> logits = teacherForced(*engine, kPrompts, 3);
  ASSERT_FALSE(logits.empty());
  EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
  EXPECT_TRUE(std::any_of(logits.begin(), logits.end(), [](float v) { return v != 0.0f; }));
}

// With and without q/k/v biases (which the float32 plan's reference test checks exactly).
TEST(EngineBf16Test, CloseToTheFloat32PlanOfTheSameWeights) {
  for (const bool qkvBias : {false, true}) {
    SCOPED_TRACE(qkvBias ? "q/k/v biases" : "no biases");
    TinyPlanShape shape = bf16Shape();
    shape.qkv_bias = qkvBias;
    LoadedTinyPlan bf16(shape);
    shape.packed_bf16_linear = false;
    LoadedTinyPlan f32(shape);
    ASSERT_TRUE(bf16.plan && f32.plan);
    std::unique_ptr<Engine> a = bf16.engine(2), b = f32.engine(2);
    ASSERT_TRUE(a && b);
    const std::vector<float> got = teacherForced(*a, kPrompts, 4);
    const std::vector<float> want = teacherForced(*b, kPrompts, 4);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    for (size_t row = 0; row < got.size() / 97; ++row) {
      double maxRef = 0, maxDiff = 0;
      for (size_t i = row * 97; i < (row + 1) * 97; ++i) {
        maxRef = std::max(maxRef, std::abs(double(want[i])));
        maxDiff = std::max(maxDiff, std::abs(double(got[i]) - want[i]));
      }
      worst = std::max(worst, maxDiff / maxRef);
    }
    // Weights and activations rounded to bf16 (8 significant bits) through two layers.
    EXPECT_LT(worst, 2e-2);
    EXPECT_GT(worst, 0.0) << "the BF16 plan cannot be exactly the float32 one";
  }
}

TEST(EngineBf16Test, ResultsDoNotDependOnThreadsOrBatching) {
  LoadedTinyPlan loaded(bf16Shape());
  ASSERT_TRUE(loaded.plan);
  std::vector<float> reference;
  for (unsigned threads : {1u, 2u, 3u}) {
    std::unique_ptr<Engine> engine = loaded.engine(threads);
    ASSERT_TRUE(engine);
    const std::vector<float> logits = teacherForced(*engine, kPrompts, 3);
    if (reference.empty())
      reference = logits;
    else
      expectSameBits(logits, reference, std::to_string(threads) + " threads");
  }
  auto fromBatch = [&](const std::vector<float> &batch, size_t sequences, size_t i) {
    std::vector<float> rows;
    for (size_t s = 0; s <= 3; ++s) {
      const size_t at = (s * sequences + i) * 97;
      rows.insert(rows.end(), batch.begin() + at, batch.begin() + at + 97);
    }
    return rows;
  };
  // Each prompt alone (fewer rows per kernel call) gives the same bits as the ragged batch of
  // 20 rows, where the linear kernel is the same for both row counts; LinearAmxBf16 runs tiles
  // from kAmxMinRows rows and LinearAvx512Bf16 below, whose sums differ in order: there only
  // close.
  const codegen::LinearKernelInfo kernel =
      codegen::chooseLinearBf16Kernel(codegen::linearKernelFeatures());
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    std::unique_ptr<Engine> engine = loaded.engine(2);
    ASSERT_TRUE(engine);
    const std::vector<float> alone = teacherForced(*engine, {kPrompts[i]}, 3);
    const std::string what = "prompt " + std::to_string(i) + " alone";
    const std::vector<float> batched = fromBatch(reference, kPrompts.size(), i);
    if (codegen::readsBf16RowMajor(kernel, kPrompts[i].size()) ==
        codegen::readsBf16RowMajor(kernel, 20)) {
      expectSameBits(alone, batched, what);
      continue;
    }
    ASSERT_EQ(alone.size(), batched.size());
    float largest = 0;
    for (float v : batched)
      largest = std::max(largest, std::abs(v));
    for (size_t e = 0; e < alone.size(); ++e)
      ASSERT_LE(std::abs(alone[e] - batched[e]), 1e-3f * largest) << what << ": element " << e;
  }
  // Prompts 0 and 2 together (18 rows) against all three (20 rows): the same kernel for both
  // prefills and both decodes on every host, so the same bits.
  std::unique_ptr<Engine> engine = loaded.engine(2);
  ASSERT_TRUE(engine);
  const std::vector<float> pair = teacherForced(*engine, {kPrompts[0], kPrompts[2]}, 3);
  expectSameBits(fromBatch(pair, 2, 0), fromBatch(reference, 3, 0), "prompt 0 beside prompt 2");
  expectSameBits(fromBatch(pair, 2, 1), fromBatch(reference, 3, 2), "prompt 2 beside prompt 0");
}

TEST(EngineBf16Test, FusedResidualGivesTheBitsOfTheSeparateAdd) {
  TinyPlanShape shape = bf16Shape();
  LoadedTinyPlan separate(shape);
  shape.fused_residual = true;
  LoadedTinyPlan fused(shape);
  ASSERT_TRUE(separate.plan && fused.plan);
  EXPECT_EQ(fused.plan->def().ops()->size() + 2 * shape.layers, separate.plan->def().ops()->size());
  std::unique_ptr<Engine> a = fused.engine(2), b = separate.engine(2);
  ASSERT_TRUE(a && b);
  expectSameBits(teacherForced(*a, kPrompts, 3), teacherForced(*b, kPrompts, 3), "fused residual");
}

// With BF16 and float32 weights, whichever linear of gate and up runs second, with a SiLU gate
// and a GELU one (GeGLU).
TEST(EngineBf16Test, FusedSwiGluGivesTheBitsOfTheSeparateOp) {
  for (const plan::ActivationFunctionDef gate :
       {plan::ActivationFunctionDef::Silu, plan::ActivationFunctionDef::GeluTanh})
  for (const bool packed : {true, false})
    for (const bool gateLast : {false, true}) {
      SCOPED_TRACE(std::string(packed ? "bf16" : "f32") + (gateLast ? ", gate last" : ", up last") +
                   ", gate " + plan::EnumNameActivationFunctionDef(gate));
      TinyPlanShape shape = bf16Shape();
      shape.packed_bf16_linear = packed;
      shape.gate = gate;
      LoadedTinyPlan separate(shape);
      shape.fused_swiglu = true;
      shape.swiglu_gate_last = gateLast;
      LoadedTinyPlan fused(shape);
      ASSERT_TRUE(separate.plan && fused.plan);
      EXPECT_EQ(fused.plan->def().ops()->size() + shape.layers, separate.plan->def().ops()->size());
      std::unique_ptr<Engine> a = fused.engine(2), b = separate.engine(3);
      ASSERT_TRUE(a && b);
      size_t swiGluOps = 0;
      for (const ResolvedOp &op : a->resolvedOps())
        swiGluOps += op.kind == OpKind::SwiGlu;
      EXPECT_EQ(swiGluOps, 0u) << "the fused plan runs no SwiGlu op";
      expectSameBits(teacherForced(*a, kPrompts, 3), teacherForced(*b, kPrompts, 3),
                     "fused swiglu");
    }
}

// The attention rotating q and k itself, with a BF16 and a float32 KV cache.
TEST(EngineBf16Test, FusedRopeGivesTheBitsOfTheSeparateOps) {
  for (const plan::DTypeDef kv : {plan::DTypeDef::BF16, plan::DTypeDef::F32}) {
    SCOPED_TRACE(kv == plan::DTypeDef::BF16 ? "bf16 KV" : "f32 KV");
    TinyPlanShape shape = bf16Shape();
    shape.kv_dtype = kv;
    LoadedTinyPlan separate(shape);
    shape.fused_rope = true;
    LoadedTinyPlan fused(shape);
    ASSERT_TRUE(separate.plan && fused.plan);
    EXPECT_EQ(fused.plan->def().ops()->size() + 2 * shape.layers,
              separate.plan->def().ops()->size());
    std::unique_ptr<Engine> a = fused.engine(2), b = separate.engine(3);
    ASSERT_TRUE(a && b);
    for (const ResolvedOp &op : a->resolvedOps())
      EXPECT_NE(op.kind, OpKind::Rope) << "the fused plan runs no Rope op";
    expectSameBits(teacherForced(*a, kPrompts, 3), teacherForced(*b, kPrompts, 3), "fused rope");
  }
}

TEST(EngineBf16Test, TiedTableIsThePackedLmHeadWeight) {
  TinyPlanShape shape = bf16Shape();
  shape.tied_embeddings = true;
  LoadedTinyPlan packed(shape);
  ASSERT_TRUE(packed.plan);
  const plan::PlanDef &def = packed.plan->def();
  EXPECT_EQ(def.ops()->Get(0)->weights()->Get(0),
            def.ops()->Get(def.ops()->size() - 1)->weights()->Get(0))
      << "the embedding and lm_head read one tensor";
  std::unique_ptr<Engine> engine = packed.engine(2);
  ASSERT_TRUE(engine);
  bool packedEmbedding = false;
  for (const KernelUse &use : engine->kernelSummary())
    packedEmbedding |= use.opKind == "Embedding" && use.kernel == "EmbeddingBf16Packed";
  EXPECT_TRUE(packedEmbedding);

  // Against the float32 plan whose table holds the same (bf16) values.
  shape.packed_bf16_linear = false;
  TinyPlan f32 = test::buildTinyPlan(shape);
  const std::vector<float> table = packed.tiny.tensorValues(0);
  std::vector<uint8_t> &bytes = f32.segments.at(f32.def.tensors.at(0)->segment);
  ASSERT_EQ(bytes.size(), table.size() * sizeof(float));
  std::memcpy(bytes.data(), table.data(), bytes.size());
  test::ScratchDir dir;
  ASSERT_TRUE(test::writeTinyPlan(dir.file("f32.hplan"), f32).ok());
  Result<std::unique_ptr<Plan>> f32Plan = Plan::load(dir.file("f32.hplan"));
  ASSERT_TRUE(f32Plan.ok()) << f32Plan.message();
  Result<std::unique_ptr<Engine>> f32Engine =
      Engine::create(std::shared_ptr<const Plan>(std::move(f32Plan.value())), {2, false});
  ASSERT_TRUE(f32Engine.ok()) << f32Engine.message();
  const std::vector<float> got = teacherForced(*engine, kPrompts, 2);
  const std::vector<float> want = teacherForced(*f32Engine.value(), kPrompts, 2);
  ASSERT_EQ(got.size(), want.size());
  for (size_t row = 0; row < got.size() / 97; ++row) {
    double maxRef = 0, maxDiff = 0;
    for (size_t i = row * 97; i < (row + 1) * 97; ++i) {
      maxRef = std::max(maxRef, std::abs(double(want[i])));
      maxDiff = std::max(maxDiff, std::abs(double(got[i]) - want[i]));
    }
    EXPECT_LT(maxDiff / maxRef, 2e-2) << "row " << row;
  }
}

// Mistakes in a packed plan are refused by the loader with the tensor or op named.
TEST(EngineBf16Test, LoaderChecksThePackedLayout) {
  test::expectLoaderRefuses(
      bf16Shape(), {
                       {"segment one block short",
                        [](TinyPlan &t) {
                          const int w = t.tensorIndex("model.layers.0.self_attn.q_proj.weight");
                          auto &bytes = t.segments.at(t.def.tensors.at(w)->segment);
                          bytes.resize(bytes.size() - 64);
                        },
                        "LinearBf16N16K2 needs"},
                       {"shape of the unpadded size",
                        [](TinyPlan &t) {
                          const int w = t.tensorIndex("lm_head.weight");
                          t.def.tensors.at(w)->shape = {96, 40};
                        },
                        "lm_head.weight"},
                       {"float32 in the BF16 layout",
                        [](TinyPlan &t) {
                          const int w = t.tensorIndex("model.layers.0.mlp.up_proj.weight");
                          t.def.tensors.at(w)->dtype = plan::DTypeDef::F32;
                        },
                        "the layout holds BF16"},
                       {"residual without its input",
                        [](TinyPlan &t) {
                          const int op = t.opIndex("model.layers.0.self_attn.o_proj");
                          plan::LinearParamsDefT params;
                          params.residual = true;
                          t.def.ops.at(op)->params.Set(std::move(params));
                        },
                        "with a residual takes 2"},
                   });
}

} // namespace
} // namespace hetc
