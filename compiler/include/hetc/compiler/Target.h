// A target machine as data: the figures the cost model reads, each with the source it comes from.
//
// Targets live in compiler/targets/<name>.json, one file each; `hetc targets` lists them. The
// target "host" is this machine as `hetc calibrate` measured it (calibratedHostTargetPath()). Every
// figure is an object {"value": ..., "source": "..."} and the loader refuses a file with a missing,
// mistyped, out-of-range or unknown field, naming it. A target without "gpu" (and "pcie") is
// CPU-only; "cxl" is optional. Bandwidths are in GB/s (1e9 bytes), capacities in GiB.
#pragma once

#include "runtime/format/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hetc::compiler {

// One figure as the file states it, for listing: "cpu.cores" = "40" (LIA Table 2).
struct TargetFigure {
  std::string key;
  std::string value;
  std::string source;
};

struct CpuSpec {
  std::string model;
  uint32_t cores = 0;
  double baseGhz = 0;
  double amxPeakTflops = 0;
  double amxTflops = 0; // achieved BF16 GEMM throughput: the cost model's TH_AMX
  double avx512PeakTflops = 0;
  double avx512Tflops = 0;
};

struct DdrSpec {
  uint32_t channels = 0; // 0: not stated (optional: a measured host does not know them)
  uint32_t mts = 0;
  double capacityBytes = 0;
  double peakGbs = 0;
  double readGbs = 0; // achieved read bandwidth: the cost model's BW_CPU
};

// CXL Type-3 memory expanders, pages interleaved across them (LIA Observation-1).
struct CxlSpec {
  uint32_t expanders = 0;
  double capacityBytesEach = 0;
  double readGbsEach = 0;
  double capacityBytes() const { return expanders * capacityBytesEach; }
  double readGbs() const { return expanders * readGbsEach; }
};

struct GpuSpec {
  std::string model;
  double memoryBytes = 0;
  double reservedBytes = 0; // held by the driver and libraries, never available to a plan
  double peakBandwidthGbs = 0;
  double bandwidthGbs = 0; // achieved: the cost model's BW_GPU
  double peakTflops = 0;
  double tflops = 0; // achieved BF16 GEMM throughput: the cost model's TH_GPU
};

struct PcieSpec {
  uint32_t generation = 0;
  uint32_t lanes = 0;
  double peakGbs = 0;
  double gbs = 0; // achieved host-to-device bandwidth: the cost model's BW_PCIe
};

struct Target {
  std::string name;
  std::string description;
  std::string path; // the file it was read from
  CpuSpec cpu;
  DdrSpec ddr;
  std::optional<CxlSpec> cxl;
  std::optional<GpuSpec> gpu;   // absent: a CPU-only target
  std::optional<PcieSpec> pcie; // present exactly when gpu is
  std::vector<TargetFigure> figures;

  bool hasGpu() const { return gpu.has_value(); }
};

// Parses one target description; `origin` names it in errors ("spr-a100.json: cpu.cores: ...").
Result<Target> parseTarget(const std::string &jsonText, const std::string &origin);

// Reads and parses a target file.
Result<Target> loadTarget(const std::string &path);

// The name of this machine's measured target; the compiler's "host" target is its CPU alone.
inline constexpr const char *kHostTarget = "host";

// Where hetc calibrate writes this machine's target: $XDG_CACHE_HOME/hetc/host.json, else
// $HOME/.cache/hetc/host.json; empty when neither variable is set.
std::string calibratedHostTargetPath();

// Where target files are looked for, in order: <dir of the running program>/../share/hetc/targets
// (an installed or built tree) and the source tree's compiler/targets (a build that was not
// installed). Directories that do not exist are left out.
std::vector<std::string> targetDirectories();

// A target by name (the file <name>.json in the first directory that has it; "host": the
// calibrated file) or by path (any argument ending in ".json"). The error names the known targets.
Result<Target> findTarget(const std::string &nameOrPath);

// Every target in the directories and the calibrated host when there is one, sorted by name; a
// malformed file is an error naming it.
Result<std::vector<Target>> listTargets();

} // namespace hetc::compiler
