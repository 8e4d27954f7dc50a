// What a plan assigns to devices, and what this host and runtime can run.
//
// A plan compiled for a target with a GPU names, per op and stage, the device the cost model
// chose (hplan.fbs: OpDef.device, prefill_device, PlanDef.stages). This runtime has no GPU
// executor: it runs every op on the CPU, with the same kernels and so the same results as a plan
// for the host, and says so once per run (gpuFallbackNotice).
#pragma once

#include "runtime/format/Format.h"

#include <cstdint>
#include <string>

namespace hetc {

class Plan;

// How much of one stage the plan gives the GPU.
struct StageDevices {
  uint64_t sublayers = 0;    // decoder layers x 6, from the stage's layer groups
  uint64_t gpuSublayers = 0; // of those, the ones the groups' policies run on the GPU
  uint32_t gpuOps = 0;       // ops whose device for the stage is the GPU
};

struct PlanDevices {
  std::string target;
  std::string gpu; // the target's GPU; empty for a CPU-only target
  uint32_t ops = 0;
  bool hasStages = false; // the plan carries stage plans (schema 1.5)
  StageDevices prefill;
  StageDevices decode;
  bool anyGpu() const { return prefill.gpuOps > 0 || decode.gpuOps > 0; }
};

PlanDevices countPlanDevices(const Plan &plan);

// Whether this host has an NVIDIA GPU a runtime could use: the device node and the driver's
// library, looked for under `root` (for tests) and never opened or loaded.
struct GpuProbe {
  bool deviceNode = false;    // <root>/dev/nvidia0
  bool driverLibrary = false; // libcuda.so.1 in a library directory
  std::string driverPath;     // where it was found
  bool present() const { return deviceNode && driverLibrary; }
  // "no /dev/nvidia0, no libcuda.so.1", "/dev/nvidia0 and /usr/lib/.../libcuda.so.1", ...
  std::string describe() const;
};

GpuProbe probeGpu(const std::string &root = "");

// One line for stderr when the plan gives the GPU any op, empty otherwise: "hetc: notice: plan
// assigns 8 of 12 decode and 12 of 12 prefill sublayers to the GPU (target spr-h100, NVIDIA H100
// 80GB PCIe); this runtime does not split a plan between the CPU and the GPU and this host has no GPU (no /dev/nvidia0, no
// libcuda.so.1): running every op on the CPU".
std::string gpuFallbackNotice(const Plan &plan, const GpuProbe &probe);

// The same facts in full, for --verbose and reports, whatever the plan assigns: "target spr-h100
// (NVIDIA H100 80GB PCIe): GPU for 8 of 12 decode and 12 of 12 prefill sublayers (20 and 24 of
// 27 ops); run on the CPU here (no split execution; host: no /dev/nvidia0, no libcuda.so.1)".
std::string describePlanDevices(const Plan &plan, const GpuProbe &probe);

} // namespace hetc
