// Stage plans: Optimization-1's resident layers, Optimization-2, memory per tier and the
// placements of LIA section 6 and Gupta et al., against the figures the papers publish.
#include "hetc/compiler/DevicePlan.h"

#include <gtest/gtest.h>

namespace hetc::compiler {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Target target(const char *name) {
  Result<Target> found = findTarget(name);
  EXPECT_TRUE(found) << found.message();
  return found ? *found : Target{};
}

StagePlan plan(const Target &t, const char *model, Stage stage, uint64_t batch, uint64_t len,
               Placement placement = Placement::Ddr, Timing timing = Timing::Serial,
               bool resident = true) {
  PlanRequest r;
  r.model = findModel(model);
  r.target = &t;
  r.stage = stage;
  r.batch = batch;
  r.len = len;
  r.placement = placement;
  r.timing = timing;
  r.residentLayers = resident;
  Result<StagePlan> planned = planStage(r);
  EXPECT_TRUE(planned) << planned.message();
  return planned ? *planned : StagePlan{};
}

// A request as LIA's evaluation runs it: prefill of L_in, then L_out - 1 decode steps.
double inferenceSeconds(const Target &t, const char *model, uint64_t batch, uint64_t lenIn,
                        uint64_t lenOut, Timing timing, bool resident) {
  double seconds =
      plan(t, model, Stage::Prefill, batch, lenIn, Placement::Ddr, timing, resident).seconds;
  for (uint64_t step = 0; step + 1 < lenOut; ++step)
    seconds += plan(t, model, Stage::Decode, batch, lenIn + step, Placement::Ddr, timing, resident)
                   .seconds;
  return seconds;
}

uint32_t layersIn(const StagePlan &p, const std::string &group) {
  for (const LayerGroup &g : p.groups)
    if (g.name == group)
      return g.layers;
  return 0;
}

// LIA 5.2: "With B = 1 and L = 2016, LIA stores 62% of decoder layers [of OPT-30B] using 35 GB
// of GPU memory" on an A100 40GB: 30 of 48 layers of 1.15 GiB each.
TEST(DevicePlan, ResidentLayersFillSpareGpuMemory) {
  const Target spr = target("spr-a100");
  const StagePlan p = plan(spr, "opt-30b", Stage::Prefill, 1, 2016);
  const uint32_t resident = layersIn(p, "gpu-resident");
  EXPECT_GE(resident, 28u);
  EXPECT_LE(resident, 32u);
  EXPECT_EQ(resident + layersIn(p, "streamed"), 48u);
  const double layerBytes = layerSize(*findModel("opt-30b"), Stage::Prefill, 1, 2016).weightBytes();
  EXPECT_NEAR(resident * layerBytes / kGiB, 35.0, 3.5);
  EXPECT_EQ(p.groups.front().name, "streamed"); // the plan's policy is the streamed layers'
  // Without Optimization-1 every layer streams.
  const StagePlan none =
      plan(spr, "opt-30b", Stage::Prefill, 1, 2016, Placement::Ddr, Timing::Serial, false);
  EXPECT_EQ(layersIn(none, "streamed"), 48u);
  EXPECT_GT(none.seconds, p.seconds);
  // A model that fits whole: every layer resident, and the plan's policy is theirs.
  const StagePlan small = plan(target("spr-h100"), "llama-3-8b", Stage::Decode, 1, 1024);
  ASSERT_EQ(small.groups.size(), 1u);
  EXPECT_EQ(small.groups[0].name, "gpu-resident");
  EXPECT_EQ(small.groups[0].layers, 32u);
}

// LIA Table 4 (OPT-30B, L_in 256, L_out 32, SPR-A100): Optimization-1 halves the latency at
// B = 1 (10.09 s against 5.05 s) and matters little at B = 900 (297 against 291);
// Optimization-2 matters nothing at B = 1 and most at B = 900 (444 against 291).
TEST(DevicePlan, OptimizationsMatterWhereTheAblationSays) {
  const Target spr = target("spr-a100");
  auto seconds = [&](uint64_t batch, Timing timing, bool resident) {
    return inferenceSeconds(spr, "opt-30b", batch, 256, 32, timing, resident);
  };
  const double all1 = seconds(1, Timing::Overlapped, true);
  const double all900 = seconds(900, Timing::Overlapped, true);
  const double noOpt1At1 = seconds(1, Timing::Overlapped, false) / all1;
  const double noOpt1At900 = seconds(900, Timing::Overlapped, false) / all900;
  const double noOpt2At1 = seconds(1, Timing::Serial, true) / all1;
  const double noOpt2At900 = seconds(900, Timing::Serial, true) / all900;
  EXPECT_NEAR(noOpt1At1, 10.09 / 5.05, 0.3);
  EXPECT_LT(noOpt1At900, 1.1);
  EXPECT_LT(noOpt2At1, 1.1);
  EXPECT_GT(noOpt2At900, 1.2);
  EXPECT_GT(noOpt2At900, noOpt2At1);
  EXPECT_GT(noOpt1At1, noOpt1At900);
}

// LIA 1: OPT-175B at L = 1024 needs 330 GB at B = 1 and 1.6 TB at B = 256 (the first in GiB,
// the second in 1e12 bytes, as the text's own figures only agree that way).
TEST(DevicePlan, MemoryMatchesLiasFootprints) {
  const Target spr = target("spr-a100");
  auto hostBytes = [&](uint64_t batch) {
    const StagePlan p =
        plan(spr, "opt-175b", Stage::Decode, batch, 1024, Placement::Ddr, Timing::Serial, false);
    return p.memory[int(Tier::Ddr)].total() + p.memory[int(Tier::Cxl)].total();
  };
  EXPECT_NEAR(hostBytes(1) / kGiB, 330, 0.05 * 330);
  EXPECT_NEAR(hostBytes(256) / 1e12, 1.6, 0.05 * 1.6);
  const StagePlan big = plan(spr, "opt-175b", Stage::Decode, 256, 1024);
  EXPECT_FALSE(big.notes.empty()); // more than the machine's 512 GiB of DDR, and says so
}

// LIA Table 3 and Observation-1: parameters on CXL cost nothing at B = 900, where the GPU
// computes every parameter sublayer (the link, not CXL, limits the copies); Observation-2: the
// CPU computing from CXL is slow.
TEST(DevicePlan, ParametersOnCxl) {
  const Target spr = target("spr-a100");
  for (Stage stage : {Stage::Prefill, Stage::Decode}) {
    const StagePlan ddr = plan(spr, "opt-30b", stage, 900, 64, Placement::Ddr);
    const StagePlan cxl = plan(spr, "opt-30b", stage, 900, 64, Placement::Cxl);
    EXPECT_EQ(cxl.policy(), ddr.policy());
    EXPECT_NEAR(cxl.seconds / ddr.seconds, 1.0, 0.01) << stageName(stage);
    EXPECT_GT(cxl.memory[int(Tier::Cxl)].weights, 0);
    EXPECT_EQ(cxl.memory[int(Tier::Ddr)].weights, 0);
    EXPECT_GT(cxl.memory[int(Tier::Ddr)].kv, 0);
  }
  const StagePlan ddr =
      plan(spr, "opt-30b", Stage::Decode, 1, 64, Placement::Ddr, Timing::Serial, false);
  const StagePlan cxl =
      plan(spr, "opt-30b", Stage::Decode, 1, 64, Placement::Cxl, Timing::Serial, false);
  EXPECT_GT(cxl.seconds, 1.5 * ddr.seconds);
}

// Auto keeps everything in DDR while it fits and moves parameters to CXL when it does not.
TEST(DevicePlan, AutoPlacement) {
  const Target spr = target("spr-a100");
  EXPECT_EQ(plan(spr, "opt-30b", Stage::Decode, 1, 512, Placement::Auto).placement, Placement::Ddr);
  // OPT-30B at B = 1500, L = 256: 57 GiB of weights and 492 GiB of KV exceed 512 GiB of DDR.
  const StagePlan big = plan(spr, "opt-30b", Stage::Decode, 1500, 256, Placement::Auto);
  EXPECT_EQ(big.placement, Placement::Cxl);
  EXPECT_LE(big.memory[int(Tier::Ddr)].total(), big.memory[int(Tier::Ddr)].capacity);
}

// Gupta et al.: HeLM puts FC1 on the GPU; All-CPU leaves the GPU to the KV cache.
TEST(DevicePlan, GuptaPlacements) {
  const Target spr = target("spr-a100");
  const StagePlan helm = plan(spr, "opt-30b", Stage::Decode, 1, 128, Placement::Helm);
  EXPECT_GT(layersIn(helm, "fc1-on-gpu"), 0u);
  EXPECT_EQ(layersIn(helm, "gpu-resident"), 0u);
  for (const LayerGroup &g : helm.groups)
    EXPECT_EQ(g.placement.weightHostTier, Tier::Cxl); // the slow host tier
  const StagePlan allCpu = plan(spr, "opt-175b", Stage::Decode, 44, 128, Placement::AllCpu);
  EXPECT_EQ(allCpu.groups.size(), 1u);
  EXPECT_EQ(allCpu.groups[0].placement.kvTier, Tier::Gpu);
  EXPECT_GT(allCpu.memory[int(Tier::Gpu)].kv, 0);
  EXPECT_EQ(allCpu.memory[int(Tier::Ddr)].kv, 0);
  // With the cache on the GPU, attention there needs no transfer, so it stays there.
  EXPECT_FALSE(allCpu.policy().onCpu(1));
}

TEST(DevicePlan, CpuOnlyTarget) {
  const Target cpu = target("spr-cpu");
  const StagePlan p = plan(cpu, "opt-175b", Stage::Prefill, 64, 512);
  EXPECT_EQ(p.policy(), Policy::allCpu());
  EXPECT_EQ(p.gpuSeconds, 0);
  EXPECT_EQ(p.pcieSeconds, 0);
  EXPECT_FALSE(p.memory[int(Tier::Gpu)].present);
  EXPECT_DOUBLE_EQ(p.seconds, p.cpuSeconds);
}

TEST(DevicePlan, StageTotalsAddUp) {
  const Target spr = target("spr-a100");
  const StagePlan p = plan(spr, "llama-2-70b", Stage::Decode, 1000, 512);
  double seconds = 0;
  for (const LayerGroup &g : p.groups)
    seconds += g.layers * g.best().time.serial;
  EXPECT_DOUBLE_EQ(p.seconds, seconds);
  EXPECT_NEAR(p.serialSeconds, p.cpuSeconds + p.gpuSeconds + p.pcieSeconds, 1e-9 * p.seconds);
  const RankedPolicy &runnerUp = p.groups.front().ranking[1];
  EXPECT_GE(p.secondsWith(runnerUp), p.seconds);
}

TEST(DevicePlan, RefusesWhatTheTargetCannotDo) {
  const Target cpu = target("spr-cpu");
  PlanRequest r;
  r.model = findModel("opt-30b");
  r.target = &cpu;
  r.placement = Placement::Helm;
  EXPECT_EQ(planStage(r).message(), "placement helm needs a GPU; spr-cpu has none");
  r.placement = Placement::Ddr;
  r.batch = 0;
  EXPECT_EQ(planStage(r).message(), "batch must be at least 1");
  Target noCxl = target("spr-a100");
  noCxl.cxl.reset();
  r.target = &noCxl;
  r.batch = 1;
  r.placement = Placement::Cxl;
  EXPECT_EQ(planStage(r).message(), "placement cxl needs a CXL tier; spr-a100 has none");
}

} // namespace
} // namespace hetc::compiler
