// The block attention kernels for AVX-512 F and BW: over bf16, each pair product of vdpbf16ps
// done as two float32 multiply-adds on the pair's halves, widened exactly (odd element first, as
// the instruction adds them); over int8, each int16 pair product of vpdpwssd as vpmaddwd and an
// int32 add (the same integers).
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

#define HETC_BLOCKS_TARGET __attribute__((target("avx512f,avx512bw")))

namespace hetc::kernels {
namespace {

struct Pairs {
  HETC_BLOCKS_TARGET static __m512 dot(__m512 acc, __m512i pairs, const uint32_t *broadcast) {
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
    const __m512i b = _mm512_set1_epi32(static_cast<int>(*broadcast));
    acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(pairs, high)),
                          _mm512_castsi512_ps(_mm512_and_si512(b, high)), acc);
    return _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16)),
                           _mm512_castsi512_ps(_mm512_slli_epi32(b, 16)), acc);
  }
  // floatToBf16 (runtime/format/Bf16.h), as vcvtne2ps2bf16 rounds: to nearest even by adding
  // 0x7fff and the lowest kept bit, a denormal to a zero of its sign (a weight exp(s - max) is
  // one from s - max < -87). The weights and queries this rounds are finite.
  HETC_BLOCKS_TARGET static __m256i round(__m512 x) {
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i lowestKept = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded =
        _mm512_add_epi32(bits, _mm512_add_epi32(lowestKept, _mm512_set1_epi32(0x7fff)));
    const __mmask16 normal = _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0x7f800000));
    const __m512i sign = _mm512_and_si512(bits, _mm512_set1_epi32(static_cast<int>(0x80000000u)));
    return _mm512_cvtepi32_epi16(
        _mm512_srli_epi32(_mm512_mask_mov_epi32(sign, normal, rounded), 16));
  }
};

struct Words {
  HETC_BLOCKS_TARGET static __m512i dot(__m512i acc, __m512i words, const uint32_t *broadcast) {
    return _mm512_add_epi32(
        acc, _mm512_madd_epi16(words, _mm512_set1_epi32(static_cast<int>(*broadcast))));
  }
};

} // namespace
} // namespace hetc::kernels

namespace hetc::kernels {
#include "AttentionBf16Blocks.inl"

AttentionBlockKernels attentionBlocksAvx512() { return kAttentionBlocks; }
} // namespace hetc::kernels

#pragma GCC diagnostic pop

#else

namespace hetc::kernels {
AttentionBlockKernels attentionBlocksAvx512() { return {}; }
} // namespace hetc::kernels

#endif
