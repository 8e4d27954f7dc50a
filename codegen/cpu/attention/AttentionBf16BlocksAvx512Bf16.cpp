// The block attention kernels for AVX-512 BF16 and VNNI: over bf16, vdpbf16ps against a pair of
// query dims or of weights broadcast from memory, vcvtneps2bf16 for the rounding; over int8,
// vpdpwssd likewise on int16 pairs.
#include "AttentionBf16Blocks.h"

#if defined(__x86_64__)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#define HETC_BLOCKS_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vnni")))

namespace hetc::kernels {
namespace {

struct Pairs {
  HETC_BLOCKS_TARGET static __m512 dot(__m512 acc, __m512i pairs, const uint32_t *broadcast) {
    const __m512i b = _mm512_set1_epi32(static_cast<int>(*broadcast));
    return _mm512_dpbf16_ps(acc, reinterpret_cast<const __m512bh &>(pairs),
                            reinterpret_cast<const __m512bh &>(b));
  }
  HETC_BLOCKS_TARGET static __m256i round(__m512 x) {
    const __m256bh rounded = _mm512_cvtneps_pbh(x);
    return reinterpret_cast<const __m256i &>(rounded);
  }
};

struct Words {
  // In asm: from _mm512_dpwssd_epi32 GCC 12 keeps each accumulator apart from the sum returned,
  // two register moves per instruction, and broadcasts the pair by an instruction of its own;
  // here the pair is the instruction's broadcast memory operand.
  HETC_BLOCKS_TARGET static __m512i dot(__m512i acc, __m512i words, const uint32_t *broadcast) {
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(words), "m"(*broadcast));
    return acc;
  }
};

} // namespace
} // namespace hetc::kernels

namespace hetc::kernels {
#include "AttentionBf16Blocks.inl"

AttentionBlockKernels attentionBlocksAvx512Bf16() { return kAttentionBlocks; }
} // namespace hetc::kernels

#pragma GCC diagnostic pop

#else

namespace hetc::kernels {
AttentionBlockKernels attentionBlocksAvx512Bf16() { return {}; }
} // namespace hetc::kernels

#endif
