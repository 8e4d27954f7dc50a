#include "hetc/runtime/CpuFeatures.h"

#include "hplan_generated.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace hetc {
namespace {

using plan::CpuFeatureBits;

constexpr uint64_t bit(CpuFeatureBits feature) { return static_cast<uint64_t>(feature); }

#if defined(__x86_64__)
struct CpuidRegs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(unsigned leaf, unsigned subleaf) {
  CpuidRegs r;
  // __get_cpuid_count checks the leaf against the maximum and leaves zeros when it is absent.
  __get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx);
  return r;
}

// XCR0: which register states the OS saves on context switch. Only valid when OSXSAVE is set.
uint64_t readXcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return static_cast<uint64_t>(hi) << 32 | lo;
}

uint64_t detectHostCpuFeatures() {
  uint64_t bits = bit(CpuFeatureBits::X86_64);
  const CpuidRegs leaf1 = cpuid(1, 0);
  const bool osxsave = (leaf1.ecx >> 27) & 1;
  const uint64_t xcr0 = osxsave ? readXcr0() : 0;
  // XMM and YMM state (bits 1, 2); opmask, upper ZMM and ZMM16-31 (bits 5-7); AMX tile
  // configuration and data (bits 17, 18).
  const bool osAvx = (xcr0 & 0x6) == 0x6;
  const bool osAvx512 = osAvx && (xcr0 & 0xe0) == 0xe0;
  const bool osAmx = (xcr0 & 0x60000) == 0x60000;

  const CpuidRegs leaf7 = cpuid(7, 0);
  const CpuidRegs leaf7sub1 = cpuid(7, 1);
  if (osAvx && ((leaf7.ebx >> 5) & 1))
    bits |= bit(CpuFeatureBits::AVX2);
  if (osAvx && ((leaf1.ecx >> 12) & 1))
    bits |= bit(CpuFeatureBits::FMA);
  if (osAvx512 && ((leaf7.ebx >> 16) & 1))
    bits |= bit(CpuFeatureBits::AVX512F);
  if (osAvx512 && ((leaf7.ebx >> 30) & 1))
    bits |= bit(CpuFeatureBits::AVX512BW);
  if (osAvx512 && ((leaf7sub1.eax >> 5) & 1))
    bits |= bit(CpuFeatureBits::AVX512_BF16);
  if (osAmx && ((leaf7.edx >> 24) & 1))
    bits |= bit(CpuFeatureBits::AMX_TILE);
  if (osAmx && ((leaf7.edx >> 22) & 1))
    bits |= bit(CpuFeatureBits::AMX_BF16);
  return bits;
}
#else
uint64_t detectHostCpuFeatures() { return 0; }
#endif

// Names for messages and inspect; the order is the bit order of plan::CpuFeatureBits.
struct FeatureName {
  CpuFeatureBits feature;
  const char *name;
};
constexpr FeatureName kFeatureNames[] = {
    {CpuFeatureBits::X86_64, "x86-64"},     {CpuFeatureBits::AVX2, "avx2"},
    {CpuFeatureBits::FMA, "fma"},           {CpuFeatureBits::AVX512F, "avx512f"},
    {CpuFeatureBits::AVX512BW, "avx512bw"}, {CpuFeatureBits::AVX512_BF16, "avx512-bf16"},
    {CpuFeatureBits::AMX_TILE, "amx-tile"}, {CpuFeatureBits::AMX_BF16, "amx-bf16"},
};

} // namespace

uint64_t hostCpuFeatures() {
  // Thread-safe one-time initialisation (C++11 static local).
  static const uint64_t bits = detectHostCpuFeatures();
  return bits;
}

std::string describeCpuFeatures(uint64_t bits) {
  std::string out;
  auto append = [&out](const std::string &name) {
    if (!out.empty())
      out += ' ';
    out += name;
  };
  for (int i = 0; i < 64; ++i) {
    const uint64_t mask = uint64_t{1} << i;
    if (!(bits & mask))
      continue;
    const char *name = nullptr;
    for (const FeatureName &known : kFeatureNames)
      if (bit(known.feature) == mask)
        name = known.name;
    append(name ? std::string(name) : "bit" + std::to_string(i));
  }
  return out.empty() ? "none" : out;
}

} // namespace hetc
