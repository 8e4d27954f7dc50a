// The host CPU's features: detected once per process, the one place every kernel choice and the
// executor's check of a plan's required features ask.
#pragma once

#include <cstdint>
#include <string>

namespace hetc::codegen {

// Feature bits, numbered as the plan's CpuFeatureBits (runtime/format/hplan.fbs); the runtime
// checks at compile time that the two agree.
enum CpuFeature : uint64_t {
  kCpuX86_64 = uint64_t{1} << 0,
  kCpuAvx2 = uint64_t{1} << 1,
  kCpuFma = uint64_t{1} << 2,
  kCpuAvx512F = uint64_t{1} << 3,
  kCpuAvx512BW = uint64_t{1} << 4,
  kCpuAvx512Bf16 = uint64_t{1} << 5,
  kCpuAmxTile = uint64_t{1} << 6,
  kCpuAmxBf16 = uint64_t{1} << 7,
  kCpuAvx512Vnni = uint64_t{1} << 8,
};

// Features of the host, detected once per process with CPUID, and with XGETBV for whether the
// OS saves the AVX, AVX-512 and AMX register state (a CPU can have AMX while the kernel leaves it
// off). On non-x86 hosts this is 0.
//
// HETC_DISABLE_CPU_FEATURES (environment, read once) removes features by name, comma separated
// ("avx512-bf16,amx-tile"), so a more capable host can run and test what a lesser one would.
// Removing a feature also removes those that need it (no AVX-512 F means no AVX-512 BF16).
uint64_t hostCpuFeatures();

// True when every bit of `features` is in hostCpuFeatures().
inline bool hostHas(uint64_t features) { return (hostCpuFeatures() & features) == features; }

// Space-separated lowercase names of the set bits in bit order: "x86-64 avx2 fma avx512f".
// Bits without a name are named by number ("bit40"); 0 gives "none".
std::string describeCpuFeatures(uint64_t bits);

// The bit named `name` ("avx512-bf16"), or 0 for an unknown name.
uint64_t cpuFeatureNamed(const std::string &name);

} // namespace hetc::codegen
