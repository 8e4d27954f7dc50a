// Plans for a GPU target on this runtime: what they assign is counted and said, the GPU probe
// looks where the driver lives, and the plan runs on the CPU to the same bits as a host plan.
#include "EngineTestSupport.h"

#include "runtime/platform/Devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace hetc {
namespace {

using test::addDevicePlan;
using test::buildTinyPlan;
using test::ScratchDir;
using test::TinyPlan;
using test::TinyPlanShape;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint8_t kPartialCpu = 0x06; // (0,1,1,0,0,0): attention on the CPU
constexpr uint8_t kAllGpu = 0x00;
constexpr uint8_t kAllCpu = 0x3f;

std::shared_ptr<const Plan> writeAndLoad(const ScratchDir &dir, TinyPlan &tiny,
                                         const std::string &name) {
  const std::string path = dir.file(name);
  const Status written = test::writeTinyPlan(path, tiny);
  EXPECT_TRUE(written.ok()) << written.message();
  Result<std::unique_ptr<Plan>> loaded = Plan::load(path);
  EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.message());
  return loaded.ok() ? std::shared_ptr<const Plan>(std::move(loaded.value())) : nullptr;
}

void touch(const std::string &path) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << "";
}

TEST(Devices, PolicyAndSublayerNames) {
  EXPECT_EQ(policyText(kPartialCpu), "(0,1,1,0,0,0)");
  EXPECT_EQ(policyText(kAllCpu), "(1,1,1,1,1,1)");
  EXPECT_EQ(costSublayersText(0x06), "qk+sv");
  EXPECT_EQ(costSublayersText(0x20), "fc2");
  EXPECT_EQ(costSublayersText(0), "-");
  EXPECT_EQ(firstCostSublayer(0x06), 1u);
  EXPECT_EQ(firstCostSublayer(0), kCostSublayerCount);
}

TEST(Devices, ProbeLooksForTheDeviceNodeAndTheDriver) {
  ScratchDir root;
  GpuProbe none = probeGpu(root.path());
  EXPECT_FALSE(none.deviceNode);
  EXPECT_FALSE(none.driverLibrary);
  EXPECT_FALSE(none.present());
  EXPECT_EQ(none.describe(), "no /dev/nvidia0, no libcuda.so.1");

  touch(root.file("dev/nvidia0"));
  GpuProbe nodeOnly = probeGpu(root.path());
  EXPECT_TRUE(nodeOnly.deviceNode);
  EXPECT_FALSE(nodeOnly.present()) << "a device node without the driver's library is not usable";
  // The toolkit's link-time libcuda.so.1 (under lib64/stubs) is not a driver.
  touch(root.file("usr/local/cuda/lib64/stubs/libcuda.so.1"));
  EXPECT_FALSE(probeGpu(root.path()).driverLibrary);

  touch(root.file("usr/lib/x86_64-linux-gnu/libcuda.so.1"));
  GpuProbe both = probeGpu(root.path());
  EXPECT_TRUE(both.present());
  EXPECT_EQ(both.driverPath, root.file("usr/lib/x86_64-linux-gnu/libcuda.so.1"));
  EXPECT_THAT(both.describe(), HasSubstr("/dev/nvidia0 and "));
}

TEST(Devices, NoticeCountsWhatThePlanGivesTheGpu) {
  ScratchDir dir;
  ScratchDir emptyRoot;
  const GpuProbe none = probeGpu(emptyRoot.path());
  TinyPlanShape shape;
  shape.layers = 2;

  TinyPlan host = buildTinyPlan(shape);
  std::shared_ptr<const Plan> hostPlan = writeAndLoad(dir, host, "host.hplan");
  ASSERT_TRUE(hostPlan);
  EXPECT_EQ(gpuFallbackNotice(*hostPlan, none), "");
  EXPECT_EQ(describePlanDevices(*hostPlan, none),
            "target host (CPU only): every op on the CPU; host: no /dev/nvidia0, no libcuda.so.1");

  TinyPlan gpu = buildTinyPlan(shape);
  addDevicePlan(gpu, kPartialCpu, kAllGpu);
  std::shared_ptr<const Plan> gpuPlan = writeAndLoad(dir, gpu, "gpu.hplan");
  ASSERT_TRUE(gpuPlan);
  const PlanDevices devices = countPlanDevices(*gpuPlan);
  EXPECT_EQ(devices.decode.sublayers, 12u);
  EXPECT_EQ(devices.decode.gpuSublayers, 8u);
  EXPECT_EQ(devices.prefill.gpuSublayers, 12u);
  // Every op of the two layers but the attentions in decode; all of them in prefill.
  EXPECT_EQ(devices.decode.gpuOps, 2u * 15 - 2);
  EXPECT_EQ(devices.prefill.gpuOps, 2u * 15);
  EXPECT_EQ(gpuFallbackNotice(*gpuPlan, none),
            "hetc: notice: plan assigns 8 of 12 decode and 12 of 12 prefill sublayers to the GPU "
            "(target spr-h100, NVIDIA H100 80GB PCIe); this runtime does not split a plan between the CPU and the GPU and this "
            "host has no GPU (no /dev/nvidia0, no libcuda.so.1): running every op on the CPU");

  ScratchDir withGpu;
  touch(withGpu.file("dev/nvidia0"));
  touch(withGpu.file("usr/lib64/libcuda.so.1"));
  const std::string present = gpuFallbackNotice(*gpuPlan, probeGpu(withGpu.path()));
  EXPECT_THAT(present, HasSubstr("this runtime does not split a plan between the CPU and the GPU (this host has a GPU: "));
  EXPECT_THAT(present, Not(HasSubstr("no GPU (")));
  EXPECT_THAT(present, HasSubstr("running every op on the CPU"));

  // A plan that keeps every sublayer on the CPU needs no notice, whatever its target.
  TinyPlan cpu = buildTinyPlan(shape);
  addDevicePlan(cpu, kAllCpu, kAllCpu);
  std::shared_ptr<const Plan> cpuPlan = writeAndLoad(dir, cpu, "cpu.hplan");
  ASSERT_TRUE(cpuPlan);
  EXPECT_EQ(gpuFallbackNotice(*cpuPlan, none), "");
}

// The same weights planned for the host and for a GPU target: the engine runs both on the CPU
// with the same kernels, so prefill and decode logits agree bit for bit.
TEST(Devices, GpuPlanRunsOnTheCpuToTheHostPlansBits) {
  ScratchDir dir;
  TinyPlanShape shape = test::largerShape();
  TinyPlan host = buildTinyPlan(shape);
  TinyPlan gpu = buildTinyPlan(shape);
  addDevicePlan(gpu, kPartialCpu, kAllGpu);
  std::shared_ptr<const Plan> hostPlan = writeAndLoad(dir, host, "host.hplan");
  std::shared_ptr<const Plan> gpuPlan = writeAndLoad(dir, gpu, "gpu.hplan");
  ASSERT_TRUE(hostPlan && gpuPlan);
  EngineOptions options;
  options.threads = 2;
  options.pin = false;
  std::unique_ptr<Engine> onHost = test::createEngine(hostPlan, options);
  std::unique_ptr<Engine> onGpuPlan = test::createEngine(gpuPlan, options);
  ASSERT_TRUE(onHost && onGpuPlan);

  const std::vector<int32_t> prompt = test::promptOf(11, 3, static_cast<int32_t>(shape.vocab));
  std::vector<int32_t> next(1);
  uint64_t position = 0;
  for (int step = 0; step < 6; ++step) {
    const bool prefill = step == 0;
    StepSequence sequence;
    sequence.slot = 1;
    sequence.start = position;
    sequence.tokens = prefill ? prompt.data() : next.data();
    sequence.count = prefill ? static_cast<uint32_t>(prompt.size()) : 1;
    sequence.wantLogits = true;
    ASSERT_TRUE(onHost->step(&sequence, 1).ok());
    ASSERT_TRUE(onGpuPlan->step(&sequence, 1).ok());
    const float *a = onHost->logits(0);
    const float *b = onGpuPlan->logits(0);
    EXPECT_EQ(std::memcmp(a, b, shape.vocab * sizeof(float)), 0) << "step " << step;
    position += sequence.count;
    next[0] = static_cast<int32_t>(std::max_element(a, a + shape.vocab) - a);
  }
}

} // namespace
} // namespace hetc
