// The host CPU's features, in the plan's terms (plan::CpuFeatureBits).
#pragma once

#include <cstdint>
#include <string>

namespace hetc {

// Features of the host as plan::CpuFeatureBits, detected once per process with CPUID, and with
// XGETBV for whether the OS saves the AVX, AVX-512 and AMX register state (a CPU can have AMX
// while the kernel leaves it off). On non-x86 hosts this is 0.
uint64_t hostCpuFeatures();

// Space-separated lowercase names of the set bits in plan order: "x86-64 avx2 fma avx512f".
// Bits this runtime does not know are named by number ("bit40"); 0 gives "none".
std::string describeCpuFeatures(uint64_t bits);

} // namespace hetc
