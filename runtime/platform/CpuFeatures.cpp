// The plan's CpuFeatureBits and codegen's CpuFeature are one numbering; a schema change that
// moves a bit fails here rather than in a plan refused or accepted by mistake.
#include "runtime/platform/CpuFeatures.h"

#include "hplan_generated.h"

namespace hetc {
namespace {

using plan::CpuFeatureBits;

constexpr bool same(CpuFeatureBits planBit, uint64_t codegenBit) {
  return static_cast<uint64_t>(planBit) == codegenBit;
}

static_assert(same(CpuFeatureBits::X86_64, codegen::kCpuX86_64));
static_assert(same(CpuFeatureBits::AVX2, codegen::kCpuAvx2));
static_assert(same(CpuFeatureBits::FMA, codegen::kCpuFma));
static_assert(same(CpuFeatureBits::AVX512F, codegen::kCpuAvx512F));
static_assert(same(CpuFeatureBits::AVX512BW, codegen::kCpuAvx512BW));
static_assert(same(CpuFeatureBits::AVX512_BF16, codegen::kCpuAvx512Bf16));
static_assert(same(CpuFeatureBits::AMX_TILE, codegen::kCpuAmxTile));
static_assert(same(CpuFeatureBits::AMX_BF16, codegen::kCpuAmxBf16));
static_assert(same(CpuFeatureBits::AVX512_VNNI, codegen::kCpuAvx512Vnni));
static_assert(static_cast<uint64_t>(CpuFeatureBits::ANY) ==
                  (codegen::kCpuX86_64 | codegen::kCpuAvx2 | codegen::kCpuFma |
                   codegen::kCpuAvx512F | codegen::kCpuAvx512BW | codegen::kCpuAvx512Bf16 |
                   codegen::kCpuAmxTile | codegen::kCpuAmxBf16 | codegen::kCpuAvx512Vnni),
              "a plan feature bit has no codegen counterpart");

} // namespace
} // namespace hetc
