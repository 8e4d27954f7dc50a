// The device plan a compiled plan carries (DeviceAssignment.h): spans of layers in order, the
// placement fixed by decode at the bounds, tables that answer what the planner answers under that
// placement, and reasons that name the decision.
#include "hetc/compiler/DeviceAssignment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hetc::compiler {
namespace {

using ::testing::HasSubstr;

Target target(const char *name) {
  Result<Target> found = findTarget(name);
  EXPECT_TRUE(found) << found.message();
  return found ? *found : Target{};
}

DeviceAssignmentRequest request(const ModelShape &model, const Target &t, uint64_t maxBatch,
                                uint64_t maxSeq, uint64_t maxStepTokens) {
  DeviceAssignmentRequest r;
  r.model = &model;
  r.target = &t;
  r.maxBatch = maxBatch;
  r.maxSeq = maxSeq;
  r.maxStepTokens = maxStepTokens;
  return r;
}

DeviceAssignment assign(const DeviceAssignmentRequest &r) {
  Result<DeviceAssignment> assignment = assignDevices(r);
  EXPECT_TRUE(assignment) << assignment.message();
  return assignment ? *assignment : DeviceAssignment{};
}

void expectSpansCoverLayers(const StageAssignment &stage, uint32_t layers) {
  uint32_t next = 0;
  for (const LayerSpan &span : stage.spans) {
    EXPECT_EQ(span.firstLayer, next) << span.group;
    EXPECT_GT(span.layers, 0u) << span.group;
    next += span.layers;
  }
  EXPECT_EQ(next, layers);
}

// The table's answer at (batch, len) for every span, as the planner gives it under the same fixed
// placement.
void expectTableMatchesPlanner(const DeviceAssignment &a, const DeviceAssignmentRequest &r,
                               Stage stage, uint64_t batch, uint64_t len) {
  const StageAssignment &assigned = a.stage(stage);
  PlanRequest point;
  point.model = r.model;
  point.target = r.target;
  point.stage = stage;
  point.batch = batch;
  point.len = len;
  point.placement = a.placement;
  point.residentLayers = r.residentLayers;
  point.residentLayerCount = a.residentLayers;
  Result<StagePlan> plan = planStage(point);
  ASSERT_TRUE(plan) << plan.message();
  const PolicyRow *row = &assigned.table.rows.front();
  for (const PolicyRow &candidate : assigned.table.rows)
    if (candidate.len <= len)
      row = &candidate;
  ASSERT_EQ(row->len, len) << "the table has a row at every length asked here";
  const PolicyRange *range = nullptr;
  for (const PolicyRange &candidate : row->ranges)
    if (batch >= candidate.firstBatch && batch <= candidate.lastBatch)
      range = &candidate;
  ASSERT_NE(range, nullptr) << batch;
  ASSERT_EQ(range->groupPolicies.size(), assigned.spans.size());
  for (size_t i = 0; i < assigned.spans.size(); ++i) {
    const LayerSpan &span = assigned.spans[i];
    const LayerGroup *group = nullptr;
    for (const LayerGroup &candidate : plan->groups)
      if (candidate.name == span.group)
        group = &candidate;
    ASSERT_NE(group, nullptr) << span.group;
    EXPECT_EQ(group->layers, span.layers) << span.group;
    EXPECT_EQ(range->groupPolicies[i], group->best().policy)
        << stageName(stage) << " " << span.group << " at " << batch << " x " << len;
  }
}

TEST(DeviceAssignment, TableLengthsArePowersOfTwoAndTheBound) {
  EXPECT_EQ(policyTableLengths(1), (std::vector<uint64_t>{1}));
  EXPECT_EQ(policyTableLengths(512),
            (std::vector<uint64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}));
  EXPECT_EQ(policyTableLengths(100), (std::vector<uint64_t>{1, 2, 4, 8, 16, 32, 64, 100}));
}

// OPT-175B streamed on SPR-A100 (no resident layers): LIA's decode switch, in the reason too.
TEST(DeviceAssignment, Opt175bDecodeSwitchIsInTheTableAndTheReason) {
  const Target spr = target("spr-a100");
  DeviceAssignmentRequest r = request(*findModel("opt-175b"), spr, 900, 512, 512);
  r.residentLayers = false;
  const DeviceAssignment a = assign(r);
  EXPECT_EQ(a.residentLayers, 0u);
  ASSERT_EQ(a.decode.spans.size(), 1u);
  EXPECT_EQ(a.decode.spans[0].group, "streamed");
  EXPECT_EQ(a.decode.spans[0].policy, Policy::partialCpu()); // at B = 900
  EXPECT_EQ(a.decode.batch, 900u);
  EXPECT_EQ(a.decode.len, 512u);
  EXPECT_EQ(a.prefill.batch, 1u);
  EXPECT_EQ(a.prefill.len, 512u);
  EXPECT_THAT(a.decode.reason,
              HasSubstr("decode on spr-a100 at B=900, L=512: layers 0-95 streamed from DDR run "
                        "partial CPU (0,1,1,0,0,0)"));
  // The README's published-versus-predicted row: all-CPU to 850, then (0,1,1,0,0,0) from 853.
  EXPECT_THAT(a.decode.reason, HasSubstr("at L=512: B 1-850 all CPU (1,1,1,1,1,1), B 851-852 "
                                         "(1,1,1,0,0,0), B 853-900 partial CPU (0,1,1,0,0,0)"));
  for (uint64_t batch : {1u, 850u, 851u, 853u, 900u})
    for (uint64_t len : {1u, 64u, 512u})
      expectTableMatchesPlanner(a, r, Stage::Decode, batch, len);
  for (uint64_t batch : {1u, 2u, 900u})
    expectTableMatchesPlanner(a, r, Stage::Prefill, batch, 512);
}

TEST(DeviceAssignment, TheH100TakesTheGpuAtSmallerBatches) {
  const ModelShape &opt = *findModel("opt-175b");
  const Target a100 = target("spr-a100"), h100 = target("spr-h100");
  DeviceAssignmentRequest onA100 = request(opt, a100, 600, 512, 512);
  DeviceAssignmentRequest onH100 = request(opt, h100, 600, 512, 512);
  onA100.residentLayers = onH100.residentLayers = false;
  EXPECT_EQ(assign(onA100).decode.spans[0].policy, Policy::allCpu());
  EXPECT_EQ(assign(onH100).decode.spans[0].policy, Policy::partialCpu());
}

// Llama-3-70B at 64 x 8192 on SPR-H100: some layers fit in GPU memory beside the streamed ones'
// working set; they come first, keep their weights on the GPU, and prefill keeps them.
TEST(DeviceAssignment, ResidentLayersComeFirstAndFixThePlacement) {
  const Target h100 = target("spr-h100");
  const ModelShape &llama = *findModel("llama-3-70b");
  const DeviceAssignmentRequest r = request(llama, h100, 64, 8192, 1024);
  const DeviceAssignment a = assign(r);
  PlanRequest heaviest;
  heaviest.model = &llama;
  heaviest.target = &h100;
  heaviest.batch = 64;
  heaviest.len = 8192;
  const StagePlan plan = *planStage(heaviest);
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(a.residentLayers, plan.groups[1].layers);
  EXPECT_GT(a.residentLayers, 0u);
  EXPECT_LT(a.residentLayers, llama.layers);
  EXPECT_EQ(a.gpu, h100.gpu->model);
  for (const StageAssignment *stage : {&a.prefill, &a.decode}) {
    SCOPED_TRACE(stageName(stage->stage));
    expectSpansCoverLayers(*stage, llama.layers);
    ASSERT_EQ(stage->spans.size(), 2u);
    EXPECT_EQ(stage->spans[0].group, "gpu-resident");
    EXPECT_EQ(stage->spans[0].layers, a.residentLayers);
    EXPECT_EQ(stage->spans[1].group, "streamed");
  }
  EXPECT_EQ(a.weightTier(0, 0), Tier::Gpu);
  EXPECT_EQ(a.weightTier(a.residentLayers - 1, 5), Tier::Gpu);
  EXPECT_EQ(a.weightTier(a.residentLayers, 0), Tier::Ddr);
  EXPECT_EQ(a.kvTier, Tier::Ddr);
  EXPECT_THAT(a.tierReason, HasSubstr("layers 0-" + std::to_string(a.residentLayers - 1) + " (" +
                                      std::to_string(a.residentLayers) +
                                      " of 80) keep their weights in GPU memory"));
  for (uint64_t batch : {1u, 17u, 64u})
    for (uint64_t len : {1u, 1024u, 8192u}) {
      expectTableMatchesPlanner(a, r, Stage::Decode, batch, len);
      expectTableMatchesPlanner(a, r, Stage::Prefill, batch, len);
    }
}

TEST(DeviceAssignment, CxlHoldsTheWeightsWhenOnlyThatFits) {
  const Target h100 = target("spr-h100");
  const ModelShape &opt = *findModel("opt-66b");
  // 123 GiB of weights and 432 GiB of KV cache do not fit DDR's 512 GiB together; with the
  // weights on the 256 GiB of CXL they do.
  const DeviceAssignment a = assign(request(opt, h100, 48, 4096, 512));
  EXPECT_EQ(a.placement, Placement::Cxl);
  EXPECT_EQ(a.weightHostTier, Tier::Cxl);
  EXPECT_EQ(a.kvTier, Tier::Ddr);
  EXPECT_EQ(a.weightTier(opt.layers - 1, 0), Tier::Cxl);
  EXPECT_THAT(a.tierReason, HasSubstr("weights on CXL"));
  EXPECT_THAT(a.decode.reason, HasSubstr("streamed from CXL"));
}

TEST(DeviceAssignment, CpuOnlyTargetRunsEverySublayerOnTheCpu) {
  const Target cpu = target("spr-cpu");
  const ModelShape &llama = *findModel("llama-3-8b");
  const DeviceAssignment a = assign(request(llama, cpu, 8, 2048, 256));
  EXPECT_TRUE(a.gpu.empty());
  EXPECT_EQ(a.residentLayers, 0u);
  for (const StageAssignment *stage : {&a.prefill, &a.decode}) {
    expectSpansCoverLayers(*stage, llama.layers);
    for (const LayerSpan &span : stage->spans)
      EXPECT_EQ(span.policy, Policy::allCpu());
    for (const PolicyRow &row : stage->table.rows)
      for (const PolicyRange &range : row.ranges)
        EXPECT_EQ(range.groupPolicies, std::vector<Policy>{Policy::allCpu()});
  }
  EXPECT_EQ(a.weightTier(0, 0), Tier::Ddr);
  EXPECT_THAT(a.tierReason, HasSubstr("spr-cpu has no GPU"));
}

TEST(DeviceAssignment, HostWithoutACostModel) {
  const DeviceAssignment a = cpuOnlyAssignment("host", 2, 4, 128, 512);
  EXPECT_TRUE(a.gpu.empty());
  for (const StageAssignment *stage : {&a.prefill, &a.decode}) {
    ASSERT_EQ(stage->spans.size(), 1u);
    EXPECT_EQ(stage->spans[0].layers, 2u);
    EXPECT_EQ(stage->spans[0].policy, Policy::allCpu());
    EXPECT_EQ(stage->seconds, 0);
    ASSERT_EQ(stage->table.rows.size(), 1u);
    ASSERT_EQ(stage->table.rows[0].ranges.size(), 1u);
    EXPECT_EQ(stage->table.rows[0].ranges[0].lastBatch, 4u);
    EXPECT_THAT(stage->reason, HasSubstr("no cost model"));
  }
  EXPECT_EQ(a.decode.len, 128u);
  EXPECT_EQ(a.prefill.len, 128u); // one step's tokens, at most max-seq
}

TEST(DeviceAssignment, BadRequestsAreRefused) {
  const Target spr = target("spr-a100");
  DeviceAssignmentRequest r = request(*findModel("opt-30b"), spr, 0, 512, 512);
  EXPECT_FALSE(assignDevices(r));
  r.maxBatch = 1;
  r.target = nullptr;
  EXPECT_FALSE(assignDevices(r));
}

} // namespace
} // namespace hetc::compiler
