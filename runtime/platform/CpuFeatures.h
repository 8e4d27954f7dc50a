// The host CPU's features, in the plan's terms (plan::CpuFeatureBits). Detection lives in
// codegen/cpu/isa/CpuFeatures.h, the one place the kernels and the executor both ask.
#pragma once

#include "codegen/cpu/isa/CpuFeatures.h"

#include <cstdint>
#include <string>

namespace hetc {

// Features of the host as plan::CpuFeatureBits, detected once per process (see
// codegen::hostCpuFeatures for HETC_DISABLE_CPU_FEATURES). On non-x86 hosts this is 0.
inline uint64_t hostCpuFeatures() { return codegen::hostCpuFeatures(); }

// Space-separated lowercase names of the set bits in plan order: "x86-64 avx2 fma avx512f".
// Bits this runtime does not know are named by number ("bit40"); 0 gives "none".
inline std::string describeCpuFeatures(uint64_t bits) { return codegen::describeCpuFeatures(bits); }

} // namespace hetc
