#include "codegen/cpu/isa/CpuFeatures.h"

#include <cstdio>
#include <cstdlib>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace hetc::codegen {
namespace {

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

uint64_t detectCpuFeatures() {
  uint64_t bits = kCpuX86_64;
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
    bits |= kCpuAvx2;
  if (osAvx && ((leaf1.ecx >> 12) & 1))
    bits |= kCpuFma;
  if (osAvx512 && ((leaf7.ebx >> 16) & 1))
    bits |= kCpuAvx512F;
  if (osAvx512 && ((leaf7.ebx >> 30) & 1))
    bits |= kCpuAvx512BW;
  if (osAvx512 && ((leaf7sub1.eax >> 5) & 1))
    bits |= kCpuAvx512Bf16;
  if (osAvx512 && ((leaf7.ecx >> 11) & 1))
    bits |= kCpuAvx512Vnni;
  if (osAmx && ((leaf7.edx >> 24) & 1))
    bits |= kCpuAmxTile;
  if (osAmx && ((leaf7.edx >> 22) & 1))
    bits |= kCpuAmxBf16;
  return bits;
}
#else
uint64_t detectCpuFeatures() { return 0; }
#endif

struct FeatureName {
  uint64_t bit;
  const char *name;
  uint64_t needs; // features this one is unusable without
};
constexpr FeatureName kFeatureNames[] = {
    {kCpuX86_64, "x86-64", 0},
    {kCpuAvx2, "avx2", kCpuX86_64},
    {kCpuFma, "fma", kCpuX86_64},
    {kCpuAvx512F, "avx512f", kCpuAvx2 | kCpuFma},
    {kCpuAvx512BW, "avx512bw", kCpuAvx512F},
    {kCpuAvx512Bf16, "avx512-bf16", kCpuAvx512BW},
    {kCpuAmxTile, "amx-tile", kCpuX86_64},
    {kCpuAmxBf16, "amx-bf16", kCpuAmxTile},
    {kCpuAvx512Vnni, "avx512-vnni", kCpuAvx512BW},
};

// Clears, repeatedly, every feature whose prerequisites are gone.
uint64_t closeOverPrerequisites(uint64_t bits) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const FeatureName &f : kFeatureNames)
      if ((bits & f.bit) && (bits & f.needs) != f.needs) {
        bits &= ~f.bit;
        changed = true;
      }
  }
  return bits;
}

uint64_t disabledByEnvironment() {
  const char *text = std::getenv("HETC_DISABLE_CPU_FEATURES");
  if (!text)
    return 0;
  uint64_t disabled = 0;
  std::string list(text);
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos)
      comma = list.size();
    const std::string name = list.substr(start, comma - start);
    if (!name.empty()) {
      const uint64_t bit = cpuFeatureNamed(name);
      if (bit == 0)
        std::fprintf(stderr,
                     "hetc: warning: HETC_DISABLE_CPU_FEATURES names unknown feature '%s'\n",
                     name.c_str());
      disabled |= bit;
    }
    start = comma + 1;
  }
  return disabled;
}

} // namespace

uint64_t hostCpuFeatures() {
  // Thread-safe one-time initialisation (C++11 static local).
  static const uint64_t bits = [] {
    const uint64_t detected = detectCpuFeatures();
    const uint64_t disabled = disabledByEnvironment();
    return disabled ? closeOverPrerequisites(detected & ~disabled) : detected;
  }();
  return bits;
}

std::string describeCpuFeatures(uint64_t bits) {
  std::string out;
  for (int i = 0; i < 64; ++i) {
    const uint64_t mask = uint64_t{1} << i;
    if (!(bits & mask))
      continue;
    const char *name = nullptr;
    for (const FeatureName &known : kFeatureNames)
      if (known.bit == mask)
        name = known.name;
    if (!out.empty())
      out += ' ';
    out += name ? std::string(name) : "bit" + std::to_string(i);
  }
  return out.empty() ? "none" : out;
}

uint64_t cpuFeatureNamed(const std::string &name) {
  for (const FeatureName &known : kFeatureNames)
    if (name == known.name)
      return known.bit;
  return 0;
}

} // namespace hetc::codegen
