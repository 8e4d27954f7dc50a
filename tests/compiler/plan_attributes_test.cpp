// The planning attributes (PlanAttributes.h): what a pass writes is what the next pass and the
// emitter read, field for field, and a malformed entry is one error naming its path.
#include "hetc/compiler/PlanAttributes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hetc::planning {
namespace {

using compiler::DeviceAssignment;
using compiler::LayerSpan;
using compiler::PolicyRange;
using compiler::PolicyRow;
using compiler::StageAssignment;
using ::testing::HasSubstr;

// A module to hang attributes on, and the errors its readers report.
class PlanAttributesTest : public ::testing::Test {
protected:
  PlanAttributesTest()
      : module_(mlir::ModuleOp::create(mlir::UnknownLoc::get(&context_))), builder_(&context_),
        handler_(&context_, [this](mlir::Diagnostic &diag) {
          errors_.push_back(diag.str());
          return mlir::success();
        }) {}
  ~PlanAttributesTest() override { module_->erase(); }

  mlir::MLIRContext context_;
  mlir::ModuleOp module_;
  mlir::Builder builder_;
  mlir::ScopedDiagnosticHandler handler_;
  std::vector<std::string> errors_;
};

// A GPU target's assignment: resident and streamed groups, several policy ranges.
DeviceAssignment h100Assignment() {
  Result<compiler::Target> target = compiler::findTarget("spr-h100");
  EXPECT_TRUE(target) << target.message();
  compiler::DeviceAssignmentRequest request;
  request.model = compiler::findModel("llama-3-70b");
  request.target = &*target;
  request.maxBatch = 64;
  request.maxSeq = 8192;
  request.maxStepTokens = 1024;
  Result<DeviceAssignment> assignment = compiler::assignDevices(request);
  EXPECT_TRUE(assignment) << assignment.message();
  return assignment ? *assignment : DeviceAssignment{};
}

void expectSameStage(const StageAssignment &got, const StageAssignment &want) {
  EXPECT_EQ(got.stage, want.stage);
  EXPECT_EQ(got.batch, want.batch);
  EXPECT_EQ(got.len, want.len);
  EXPECT_DOUBLE_EQ(got.seconds, want.seconds);
  EXPECT_EQ(got.reason, want.reason);
  ASSERT_EQ(got.spans.size(), want.spans.size());
  for (size_t i = 0; i < want.spans.size(); ++i) {
    const LayerSpan &g = got.spans[i], &w = want.spans[i];
    EXPECT_EQ(g.group, w.group) << i;
    EXPECT_EQ(g.firstLayer, w.firstLayer) << i;
    EXPECT_EQ(g.layers, w.layers) << i;
    EXPECT_EQ(g.policy, w.policy) << i;
    EXPECT_DOUBLE_EQ(g.layerSeconds, w.layerSeconds) << i;
  }
  EXPECT_EQ(got.table.stage, want.stage);
  ASSERT_EQ(got.table.rows.size(), want.table.rows.size());
  for (size_t r = 0; r < want.table.rows.size(); ++r) {
    const PolicyRow &g = got.table.rows[r], &w = want.table.rows[r];
    EXPECT_EQ(g.len, w.len) << r;
    ASSERT_EQ(g.ranges.size(), w.ranges.size()) << r;
    for (size_t k = 0; k < w.ranges.size(); ++k) {
      const PolicyRange &gr = g.ranges[k], &wr = w.ranges[k];
      EXPECT_EQ(gr.firstBatch, wr.firstBatch);
      EXPECT_EQ(gr.lastBatch, wr.lastBatch);
      EXPECT_EQ(gr.groupPolicies, wr.groupPolicies);
    }
  }
}

TEST_F(PlanAttributesTest, DevicePlanRoundTrips) {
  const DeviceAssignment written = h100Assignment();
  ASSERT_GT(written.decode.spans.size(), 1u) << "resident and streamed layers";
  ASSERT_FALSE(written.decode.table.rows.empty());
  module_->setAttr(kDevicePlan, devicePlanAttr(builder_, written));
  mlir::FailureOr<DeviceAssignment> read = readDevicePlan(module_, "the test");
  ASSERT_TRUE(mlir::succeeded(read)) << (errors_.empty() ? "" : errors_.front());
  EXPECT_EQ(read->target, "spr-h100");
  EXPECT_EQ(read->gpu, written.gpu);
  EXPECT_EQ(read->timing, written.timing);
  EXPECT_EQ(read->placement, written.placement);
  EXPECT_EQ(read->residentLayers, written.residentLayers);
  EXPECT_EQ(read->weightHostTier, written.weightHostTier);
  EXPECT_EQ(read->kvTier, written.kvTier);
  EXPECT_EQ(read->activationTier, written.activationTier);
  EXPECT_EQ(read->tierReason, written.tierReason);
  expectSameStage(read->prefill, written.prefill);
  expectSameStage(read->decode, written.decode);
  EXPECT_TRUE(errors_.empty());
}

TEST_F(PlanAttributesTest, DevicePlanErrorsNameTheEntry) {
  mlir::FailureOr<DeviceAssignment> missing = readDevicePlan(module_, "the emitter");
  EXPECT_TRUE(mlir::failed(missing));
  ASSERT_EQ(errors_.size(), 1u);
  EXPECT_EQ(errors_[0], "the emitter needs the module's hetc.device_plan attribute; run "
                        "hetc-assign-devices first");

  // One policy of the decode table made three-valued.
  mlir::DictionaryAttr plan = devicePlanAttr(builder_, h100Assignment());
  std::string text;
  llvm::raw_string_ostream os(text);
  plan.print(os);
  const std::string policies = "policies = [\"";
  const size_t at = text.find(policies, text.find("decode = "));
  ASSERT_NE(at, std::string::npos);
  text.replace(at + policies.size(), 2, "(2");
  mlir::Attribute corrupted = mlir::parseAttribute(text, &context_);
  ASSERT_TRUE(corrupted);
  module_->setAttr(kDevicePlan, corrupted);
  errors_.clear();
  EXPECT_TRUE(mlir::failed(readDevicePlan(module_, "the emitter")));
  ASSERT_EQ(errors_.size(), 1u);
  EXPECT_THAT(errors_[0], HasSubstr("the module's hetc.device_plan.decode.table[0].ranges[0] has "
                                    "policies '(2"));
  EXPECT_THAT(errors_[0], HasSubstr("not a policy \"(p1,...,p6)\" of zeros and ones"));

  // A tier the plan does not know.
  module_->setAttr(kDevicePlan, devicePlanAttr(builder_, h100Assignment()));
  mlir::NamedAttrList fields(mlir::cast<mlir::DictionaryAttr>(module_->getAttr(kDevicePlan)));
  fields.set("kv_tier", builder_.getStringAttr("hbm"));
  module_->setAttr(kDevicePlan, fields.getDictionary(&context_));
  errors_.clear();
  EXPECT_TRUE(mlir::failed(readDevicePlan(module_, "the emitter")));
  ASSERT_EQ(errors_.size(), 1u);
  EXPECT_EQ(errors_[0],
            "the module's hetc.device_plan has kv_tier 'hbm'; expected gpu, ddr or cxl");
}

TEST_F(PlanAttributesTest, ModuleDictionariesRoundTrip) {
  ModelAttrs model{Architecture::Opt, 32000, 4096, 32, 32, 8, 128, 14336, 1e-5f, true};
  BoundsAttrs bounds{4, 1 << 20, 512};
  KvCacheAttrs kv;
  kv.dtype = plan::DTypeDef::INT8;
  kv.layers = 32;
  kv.slots = 4;
  kv.kvHeads = 8;
  kv.maxSeq = 1 << 20;
  kv.headDim = 128;
  std::optional<KvLayout> layout = kvLayout(kv.dtype, 32, 4, 8, 128, 1 << 20);
  ASSERT_TRUE(layout);
  kv.layout = *layout;
  std::vector<PlannedBuffer> buffers = {
      {"hidden.0", plan::BufferRoleDef::Hidden, 0, 512, 4096, 16384},
      {"logits", plan::BufferRoleDef::Logits, 8388608, 4, 32000, 128000}};
  module_->setAttr(kModel, model.toAttr(builder_));
  module_->setAttr(kBounds, bounds.toAttr(builder_));
  module_->setAttr(kKvCache, kv.toAttr(builder_));
  llvm::SmallVector<mlir::Attribute> entries;
  for (const PlannedBuffer &buffer : buffers)
    entries.push_back(buffer.toAttr(builder_));
  module_->setAttr(kBuffers, builder_.getArrayAttr(entries));

  mlir::FailureOr<ModelAttrs> m = ModelAttrs::read(module_, "the test");
  mlir::FailureOr<BoundsAttrs> b = BoundsAttrs::read(module_, "the test");
  mlir::FailureOr<KvCacheAttrs> k = KvCacheAttrs::read(module_, "the test");
  mlir::FailureOr<llvm::SmallVector<PlannedBuffer>> p = readPlannedBuffers(module_, "the test");
  ASSERT_TRUE(mlir::succeeded(m) && mlir::succeeded(b) && mlir::succeeded(k) && mlir::succeeded(p))
      << (errors_.empty() ? "" : errors_.front());
  EXPECT_EQ(m->architecture, Architecture::Opt);
  EXPECT_FALSE(m->shape().gatedFfn); // fc1 -> activation -> fc2
  EXPECT_EQ(m->vocab, 32000);
  EXPECT_EQ(m->hidden, 4096);
  EXPECT_EQ(m->layers, 32);
  EXPECT_EQ(m->heads, 32);
  EXPECT_EQ(m->kvHeads, 8);
  EXPECT_EQ(m->headDim, 128);
  EXPECT_EQ(m->intermediate, 14336);
  EXPECT_EQ(m->rmsEps, 1e-5f);
  EXPECT_TRUE(m->tiedEmbeddings);
  EXPECT_EQ(b->maxBatch, 4);
  EXPECT_EQ(b->maxSeq, 1 << 20);
  EXPECT_EQ(b->maxStepTokens, 512);
  EXPECT_EQ(k->dtype, plan::DTypeDef::INT8);
  EXPECT_EQ(k->maxSeq, 1 << 20);
  EXPECT_EQ(k->layout.arenaSize, layout->arenaSize);
  EXPECT_EQ(k->layout.posStride, layout->posStride);
  EXPECT_EQ(k->layout.headStride, layout->headStride);
  EXPECT_EQ(k->layout.slotStride, layout->slotStride);
  EXPECT_EQ(k->layout.layerStride, layout->layerStride);
  EXPECT_EQ(k->layout.vOffset, layout->vOffset);
  EXPECT_EQ(k->layout.kScaleOffset, layout->kScaleOffset);
  EXPECT_EQ(k->layout.vScaleOffset, layout->vScaleOffset);
  EXPECT_EQ(k->layout.scaleLayerStride, layout->scaleLayerStride);
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[1].name, "logits");
  EXPECT_EQ((*p)[1].role, plan::BufferRoleDef::Logits);
  EXPECT_EQ((*p)[1].offset, 8388608);
  EXPECT_EQ((*p)[1].rows, 4);
  EXPECT_EQ((*p)[1].cols, 32000);
  EXPECT_EQ((*p)[1].rowStride, 128000);
  EXPECT_TRUE(errors_.empty());

  // A dimension out of its range is named with its attribute.
  model.kvHeads = int64_t{1} << 33;
  module_->setAttr(kModel, model.toAttr(builder_));
  EXPECT_TRUE(mlir::failed(ModelAttrs::read(module_, "the test")));
  ASSERT_EQ(errors_.size(), 1u);
  EXPECT_EQ(errors_[0], "the module's hetc.model has no positive 32-bit 'kv_heads'");
}

TEST_F(PlanAttributesTest, TiersHaveOneNameEach) {
  for (compiler::Tier tier : {compiler::Tier::Gpu, compiler::Tier::Ddr, compiler::Tier::Cxl})
    EXPECT_EQ(tierNamed(tierAttrName(tier)), tier);
  EXPECT_EQ(tierNamed("GPU"), std::nullopt);
}

} // namespace
} // namespace hetc::planning
