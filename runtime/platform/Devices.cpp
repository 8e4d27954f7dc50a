#include "runtime/platform/Devices.h"

#include "runtime/format/Plan.h"

#include <cstdlib>
#include <sys/stat.h>
#include <vector>

namespace hetc {
namespace {

using namespace plan;

// Where the NVIDIA driver installs libcuda.so.1 (Debian and Ubuntu, RPM systems, containers with
// the NVIDIA runtime, WSL). The toolkit's stubs/libcuda.so is not a driver and is not looked for.
const char *const kDriverDirectories[] = {
    "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib",
    "/usr/local/nvidia/lib64",   "/usr/lib/wsl/lib",
};

bool exists(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

unsigned popcount(uint8_t bits) { return static_cast<unsigned>(__builtin_popcount(bits)); }

const StagePlanDef *stageOf(const PlanDef &def, StageDef stage) {
  if (!def.stages())
    return nullptr;
  for (const StagePlanDef *s : *def.stages())
    if (s->stage() == stage)
      return s;
  return nullptr;
}

StageDevices countStage(const PlanDef &def, StageDef stage) {
  StageDevices devices;
  if (const StagePlanDef *s = stageOf(def, stage); s && s->groups()) {
    for (const LayerGroupDef *group : *s->groups()) {
      const uint8_t cpu = static_cast<uint8_t>(group->policy()) & kAllCostSublayers;
      devices.sublayers += uint64_t{group->layer_count()} * kCostSublayerCount;
      devices.gpuSublayers += uint64_t{group->layer_count()} * (kCostSublayerCount - popcount(cpu));
    }
  }
  for (const OpDef *op : *def.ops()) {
    const DeviceDef device = stage == StageDef::Decode ? op->device() : op->prefill_device();
    devices.gpuOps += device == DeviceDef::GPU;
  }
  return devices;
}

std::string stagePhrase(const StageDevices &devices, const char *stage, bool bySublayers,
                        uint32_t ops) {
  if (bySublayers)
    return std::to_string(devices.gpuSublayers) + " of " + std::to_string(devices.sublayers) + " " +
           stage;
  return std::to_string(devices.gpuOps) + " of " + std::to_string(ops) + " " + stage;
}

} // namespace

PlanDevices countPlanDevices(const Plan &plan) {
  const PlanDef &def = plan.def();
  PlanDevices devices;
  devices.target = def.target() ? def.target()->str() : "";
  devices.gpu = def.target_gpu() ? def.target_gpu()->str() : "";
  devices.ops = def.ops()->size();
  devices.hasStages = def.stages() && def.stages()->size() > 0;
  devices.prefill = countStage(def, StageDef::Prefill);
  devices.decode = countStage(def, StageDef::Decode);
  return devices;
}

std::string GpuProbe::describe() const {
  std::string node = deviceNode ? "/dev/nvidia0" : "no /dev/nvidia0";
  std::string driver = driverLibrary ? driverPath : "no libcuda.so.1";
  return node + (deviceNode && driverLibrary ? " and " : ", ") + driver;
}

GpuProbe probeGpu(const std::string &root) {
  GpuProbe probe;
  probe.deviceNode = exists(root + "/dev/nvidia0");
  std::vector<std::string> directories;
  // The loader's own search path first, as dlopen would; a test's root has none.
  if (const char *paths = root.empty() ? std::getenv("LD_LIBRARY_PATH") : nullptr) {
    std::string list = paths;
    for (size_t begin = 0; begin <= list.size();) {
      const size_t end = list.find(':', begin);
      const std::string dir = list.substr(begin, end == std::string::npos ? end : end - begin);
      if (!dir.empty())
        directories.push_back(dir);
      if (end == std::string::npos)
        break;
      begin = end + 1;
    }
  }
  for (const char *dir : kDriverDirectories)
    directories.push_back(root + dir);
  for (const std::string &dir : directories) {
    const std::string path = dir + "/libcuda.so.1";
    if (exists(path)) {
      probe.driverLibrary = true;
      probe.driverPath = path;
      break;
    }
  }
  return probe;
}

std::string gpuFallbackNotice(const Plan &plan, const GpuProbe &probe) {
  const PlanDevices devices = countPlanDevices(plan);
  if (!devices.anyGpu())
    return "";
  const char *unit = devices.hasStages ? "sublayers" : "ops";
  std::string text =
      "hetc: notice: plan assigns " +
      stagePhrase(devices.decode, "decode", devices.hasStages, devices.ops) + " and " +
      stagePhrase(devices.prefill, "prefill", devices.hasStages, devices.ops) + " " + unit +
      " to the GPU (target " + devices.target + (devices.gpu.empty() ? "" : ", " + devices.gpu) +
      "); this runtime does not split a plan between the CPU and the GPU";
  if (probe.present())
    text += " (this host has a GPU: " + probe.describe() + ")";
  else
    text += " and this host has no GPU (" + probe.describe() + ")";
  return text + ": running every op on the CPU";
}

std::string describePlanDevices(const Plan &plan, const GpuProbe &probe) {
  const PlanDevices devices = countPlanDevices(plan);
  std::string text = "target " + devices.target + " (" +
                     (devices.gpu.empty() ? std::string("CPU only") : devices.gpu) + "): ";
  if (!devices.anyGpu()) {
    text += "every op on the CPU";
  } else {
    text += "GPU for ";
    if (devices.hasStages)
      text += std::to_string(devices.decode.gpuSublayers) + " of " +
              std::to_string(devices.decode.sublayers) + " decode and " +
              std::to_string(devices.prefill.gpuSublayers) + " of " +
              std::to_string(devices.prefill.sublayers) + " prefill sublayers (";
    text += std::to_string(devices.decode.gpuOps) + " and " +
            std::to_string(devices.prefill.gpuOps) + " of " + std::to_string(devices.ops) + " ops" +
            (devices.hasStages ? ")" : " in decode and prefill") +
            "; run on the CPU here (no split execution";
    text += ")";
  }
  return text + "; host: " + probe.describe();
}

} // namespace hetc
