// Plans with integer linear weights, INT8 (LinearInt8N16K4, hetc compile --weights int8) and INT4
// (LinearInt4N16K8, --weights int4, groups of 16, 32 and 64): the engine's kernel choice and one
// row quantization per input, results independent of threads and batching, the fused residual and
// swiglu epilogues, closeness to the BF16 plan of the same weights, and the loader's checks of
// the layouts.
#include "EngineTestSupport.h"
#include "TestPlans.h"

#include "codegen/cpu/linear/Linear.h"
#include "codegen/cpu/isa/CpuFeatures.h"
#include "codegen/cpu/linear/LinearInt4.h"
#include "codegen/cpu/linear/LinearInt8.h"
#include "runtime/executor/Engine.h"
#include "runtime/format/Format.h"
#include "runtime/format/Plan.h"
#include "runtime/format/WeightLayout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace hetc {
namespace {

using test::expectSameBits;
using test::LoadedTinyPlan;
using test::promptOf;
using test::teacherForced;
using test::TinyPlan;
using test::TinyPlanShape;

constexpr uint32_t kVocab = 97;

// A weight format under test: int8, or int4 with groups of `group` k; with `lmHead`, the lm_head
// in that format too, tied to the embedding (which then gathers its rows from it).
struct Format {
  const char *name;
  uint32_t group; // 0: int8
  bool lmHead = false;
};

TinyPlanShape shapeOf(const Format &format) {
  TinyPlanShape shape;
  shape.vocab = kVocab; // not a multiple of 16: the last block of lm_head is partial
  shape.hidden = 40;    // K not a multiple of 16 (nor of 64: the quantized rows are padded)
  shape.layers = 2;
  shape.heads = 6;
  shape.kv_heads = 2;
  shape.head_dim = 24;
  shape.intermediate = 72;
  shape.max_batch = 3;
  shape.max_seq = 64;
  shape.max_step_tokens = 20; // more than the 16 rows a decode kernel is made for
  shape.seed = 11;
  shape.packed_bf16_linear = true; // the lm_head
  shape.packed_int8_linear = format.group == 0;
  shape.packed_int4_group = format.group;
  shape.integer_lm_head = format.lmHead;
  shape.tied_embeddings = format.lmHead;
  return shape;
}

TinyPlanShape int8Shape() { return shapeOf({"int8", 0}); }

class EngineIntegerTest : public ::testing::TestWithParam<Format> {};

const std::vector<std::vector<int32_t>> kPrompts = {promptOf(7, 3, kVocab), promptOf(2, 50, kVocab),
                                                    promptOf(11, 20, kVocab)};

TEST_P(EngineIntegerTest, RunsTheIntegerKernelWithOneQuantizationPerInput) {
  const bool int4 = GetParam().group != 0;
  LoadedTinyPlan loaded(shapeOf(GetParam()));
  ASSERT_TRUE(loaded.plan);
  std::unique_ptr<Engine> engine = loaded.engine(2);
  ASSERT_TRUE(engine);
  const std::string int8Kernel =
      int4 ? codegen::pickLinearInt4(codegen::hostCpuFeatures()).name
           : codegen::pickLinearInt8(codegen::hostCpuFeatures()).name;
  const std::string quantizeKernel =
      int4 ? codegen::pickQuantizeRowsInt8Signed(codegen::hostCpuFeatures()).name
           : codegen::pickQuantizeRowsInt8(codegen::hostCpuFeatures()).name;
  const codegen::LinearKernelInfo bf16Kernel =
      codegen::chooseLinearBf16Kernel(codegen::linearKernelFeatures());
  size_t linears = 0, quantizations = 0, lmHeads = 0;
  for (const KernelUse &use : engine->kernelSummary()) {
    if (use.opKind == "Linear") {
      EXPECT_EQ(use.kernel, int8Kernel);
      linears += use.count;
    }
    if (use.opKind == "LmHead") {
      EXPECT_EQ(use.kernel, GetParam().lmHead ? int8Kernel : bf16Kernel.label);
      lmHeads += use.count;
    }
    if (use.opKind == "Embedding")
      EXPECT_EQ(use.kernel, !GetParam().lmHead ? std::string(use.kernel)
                            : int4             ? "EmbeddingInt4Packed"
                                               : "EmbeddingInt8Packed");
    if (use.opKind == "QuantizeRowsInt8") {
      EXPECT_EQ(use.kernel, quantizeKernel);
      quantizations += use.count;
    }
  }
  EXPECT_EQ(linears, 7u * 2);
  EXPECT_EQ(lmHeads, 1u);
  // Per layer the rows of normed (q, k, v), attn (o), normed again (gate, up) and act (down).
  EXPECT_EQ(quantizations, 4u * 2);
  const std::vector<float> logits = teacherForced(*engine, kPrompts, 3);
  ASSERT_FALSE(logits.empty());
  EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
  EXPECT_TRUE(std::any_of(logits.begin(), logits.end(), [](float v) { return v != 0.0f; }));
}

// The int8 kernels' sums are exact integers and each row is quantized alone, so neither the
// threads nor the rows beside a row change its bits (the lm_head is BF16, whose kernel on hosts
// with AMX switches at kAmxMinRows rows, more than the 3 logits rows here).
TEST_P(EngineIntegerTest, ResultsDoNotDependOnThreadsOrBatching) {
  LoadedTinyPlan loaded(shapeOf(GetParam()));
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
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    std::unique_ptr<Engine> engine = loaded.engine(2);
    ASSERT_TRUE(engine);
    const std::vector<float> alone = teacherForced(*engine, {kPrompts[i]}, 3);
    std::vector<float> batched;
    for (size_t s = 0; s <= 3; ++s) {
      const size_t at = (s * kPrompts.size() + i) * kVocab;
      batched.insert(batched.end(), reference.begin() + at, reference.begin() + at + kVocab);
    }
    expectSameBits(alone, batched, "prompt " + std::to_string(i) + " alone");
  }
}

// A step whose middle sequence wants no logits (a prompt chunk mid-prefill): the logits rows are
// then not the step's consecutive sequences, and each must still reach its own sequence's row.
TEST_P(EngineIntegerTest, LogitsReachTheirSequencesWhenOneWantsNone) {
  LoadedTinyPlan loaded(shapeOf(GetParam()));
  ASSERT_TRUE(loaded.plan);
  std::vector<float> alone[3];
  for (size_t i = 0; i < 3; i += 2) {
    std::unique_ptr<Engine> engine = loaded.engine(2);
    ASSERT_TRUE(engine);
    const StepSequence seq{0, 0, kPrompts[i].data(), static_cast<uint32_t>(kPrompts[i].size()),
                           true};
    ASSERT_TRUE(engine->step(&seq, 1).ok());
    alone[i].assign(engine->logits(0), engine->logits(0) + kVocab);
  }
  std::unique_ptr<Engine> engine = loaded.engine(2);
  ASSERT_TRUE(engine);
  std::vector<StepSequence> step;
  for (uint32_t i = 0; i < 3; ++i)
    step.push_back({i, 0, kPrompts[i].data(), static_cast<uint32_t>(kPrompts[i].size()), i != 1});
  ASSERT_TRUE(engine->step(step.data(), step.size()).ok());
  for (size_t i = 0; i < 3; i += 2)
    expectSameBits(std::vector<float>(engine->logits(i), engine->logits(i) + kVocab), alone[i],
                   "sequence " + std::to_string(i));
}

TEST_P(EngineIntegerTest, FusedEpiloguesGiveTheBitsOfTheSeparateOps) {
  const TinyPlanShape shape = shapeOf(GetParam());
  LoadedTinyPlan separate(shape);
  ASSERT_TRUE(separate.plan);
  std::unique_ptr<Engine> plain = separate.engine(2);
  ASSERT_TRUE(plain);
  const std::vector<float> want = teacherForced(*plain, kPrompts, 3);
  for (int variant = 0; variant < 3; ++variant) {
    TinyPlanShape fusedShape = shape;
    fusedShape.fused_residual = variant == 0;
    fusedShape.fused_swiglu = variant != 0;
    fusedShape.swiglu_gate_last = variant == 2;
    const std::string what = variant == 0   ? "fused residual"
                             : variant == 1 ? "fused swiglu, up last"
                                            : "fused swiglu, gate last";
    LoadedTinyPlan fused(fusedShape);
    ASSERT_TRUE(fused.plan) << what;
    EXPECT_LT(fused.plan->def().ops()->size(), separate.plan->def().ops()->size()) << what;
    std::unique_ptr<Engine> engine = fused.engine(3);
    ASSERT_TRUE(engine) << what;
    expectSameBits(teacherForced(*engine, kPrompts, 3), want, what);
  }
}

// The same seed draws the same weights: int8 with a scale per output column and int8 rows stay
// within a few percent of BF16 (8 significant bits each) on these random layers; int4 (16 levels
// per group) within about ten times that.
TEST_P(EngineIntegerTest, CloseToTheBf16PlanOfTheSameWeights) {
  TinyPlanShape shape = shapeOf(GetParam());
  LoadedTinyPlan int8Plan(shape);
  shape.packed_int8_linear = false;
  shape.packed_int4_group = 0;
  LoadedTinyPlan bf16Plan(shape);
  ASSERT_TRUE(int8Plan.plan && bf16Plan.plan);
  std::unique_ptr<Engine> a = int8Plan.engine(2), b = bf16Plan.engine(2);
  ASSERT_TRUE(a && b);
  const std::vector<float> got = teacherForced(*a, kPrompts, 2);
  const std::vector<float> want = teacherForced(*b, kPrompts, 2);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t row = 0; row < got.size() / kVocab; ++row) {
    double maxRef = 0, maxDiff = 0;
    for (size_t i = row * kVocab; i < (row + 1) * kVocab; ++i) {
      maxRef = std::max(maxRef, std::abs(double(want[i])));
      maxDiff = std::max(maxDiff, std::abs(double(got[i]) - want[i]));
    }
    worst = std::max(worst, maxDiff / maxRef);
  }
  EXPECT_LT(worst, GetParam().group == 0 ? 5e-2 : 0.4);
  EXPECT_GT(worst, 0.0) << "integer weights should round differently from bf16";
}

INSTANTIATE_TEST_SUITE_P(Formats, EngineIntegerTest,
                         ::testing::Values(Format{"int8", 0}, Format{"int4_g16", 16},
                                           Format{"int4_g32", 32}, Format{"int4_g64", 64},
                                           Format{"int8_lm_head", 0, true},
                                           Format{"int4_g32_lm_head", 32, true}),
                         [](const ::testing::TestParamInfo<Format> &info) {
                           return std::string(info.param.name);
                         });

// Mistakes in an int8 plan are refused by the loader with the tensor or op named.
TEST(EngineInt8Test, LoaderChecksTheInt8Layout) {
  test::expectLoaderRefuses(
      int8Shape(),
      {
          {"segment without its column sums",
           [](TinyPlan &t) {
             const int w = t.tensorIndex("model.layers.0.self_attn.q_proj.weight");
             auto &bytes = t.segments.at(t.def.tensors.at(w)->segment);
             bytes.resize(bytes.size() - 4 * 144);
           },
           "LinearInt8N16K4 needs"},
          {"bf16 in the int8 layout",
           [](TinyPlan &t) {
             const int w = t.tensorIndex("model.layers.1.mlp.down_proj.weight");
             t.def.tensors.at(w)->dtype = plan::DTypeDef::BF16;
           },
           "the layout holds INT8"},
          {"int8 in the float32 layout",
           [](TinyPlan &t) {
             const int w = t.tensorIndex("model.layers.0.mlp.up_proj.weight");
             t.def.tensors.at(w)->layout = plan::WeightLayoutDef::LinearNK;
           },
           "an INT8 weight is LinearInt8N16K4"},
          {"an int8 lm_head in a plan of schema 1.13",
           [](TinyPlan &t) {
             const int w = t.tensorIndex("lm_head.weight");
             const auto &tensor = t.def.tensors.at(w);
             tensor->dtype = plan::DTypeDef::INT8;
             tensor->layout = plan::WeightLayoutDef::LinearInt8N16K4;
             t.segments.at(tensor->segment)
                 .resize(LinearInt8N16K4{tensor->shape[0], tensor->shape[1]}.segmentBytes());
             t.def.schema_version = kPlanSchemaMajor << 16 | 13;
           },
           "does not allow for an lm_head (added in 1.14)"},
          {"a plan of schema 1.12",
           [](TinyPlan &t) { t.def.schema_version = kPlanSchemaMajor << 16 | 12; },
           "added in 1.13"},
      });
}

// An integer lm_head and a table gathered from it are schema 1.14's.
TEST(EngineIntegerLmHeadTest, LoaderChecksTheSchema) {
  test::expectLoaderRefuses(
      shapeOf({"int4", 32, true}),
      {{"a tied int4 table in a plan of schema 1.13",
        [](TinyPlan &t) { t.def.schema_version = kPlanSchemaMajor << 16 | 13; },
        "does not allow for a table (added in 1.14)"}});
}

TEST(EngineInt4Test, LoaderChecksTheInt4Layout) {
  test::expectLoaderRefuses(
      shapeOf({"int4", 32}),
      {
          {"segment without its zero points",
           [](TinyPlan &t) {
             const int w = t.tensorIndex("model.layers.0.self_attn.k_proj.weight");
             auto &bytes = t.segments.at(t.def.tensors.at(w)->segment);
             bytes.resize(bytes.size() - 48 * 2);
           },
           "LinearInt4N16K8 needs"},
          {"a group of 8",
           [](TinyPlan &t) {
             const int w = t.tensorIndex("model.layers.1.mlp.gate_proj.weight");
             t.def.tensors.at(w)->group_size = 8;
           },
           "groups of 16, 32, 64 or 128"},
          {"a group of 16 over a segment packed in groups of 32",
           [](TinyPlan &t) {
             const int w = t.tensorIndex("model.layers.1.mlp.gate_proj.weight");
             t.def.tensors.at(w)->group_size = 16;
           },
           "LinearInt4N16K8 needs"},
          {"groups of 16 in a plan of schema 1.13",
           [](TinyPlan &t) {
             const int w = t.tensorIndex("model.layers.1.mlp.gate_proj.weight");
             t.def.tensors.at(w)->group_size = 16;
             t.def.schema_version = kPlanSchemaMajor << 16 | 13;
           },
           "has group_size 16, which schema 1.13 does not have (added in 1.14)"},
          {"int8 in the int4 layout",
           [](TinyPlan &t) {
             const int w = t.tensorIndex("model.layers.0.mlp.up_proj.weight");
             t.def.tensors.at(w)->dtype = plan::DTypeDef::INT8;
           },
           "the layout holds INT4"},
          {"int4 in the bf16 layout",
           [](TinyPlan &t) {
             const int w = t.tensorIndex("model.layers.0.mlp.down_proj.weight");
             t.def.tensors.at(w)->layout = plan::WeightLayoutDef::LinearBf16N16K2;
           },
           "LinearBf16N16K2 but dtype INT4"},
      });
}

} // namespace
} // namespace hetc
