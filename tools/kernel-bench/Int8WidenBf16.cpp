#include "Int8WidenBf16.h"

#include "runtime/format/WeightLayout.h"

// GCC 12's AVX-512 headers use an undefined vector as the passthrough of unmasked intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace hetc::bench {
namespace {

// Rows [r0, r0 + R) over one 16-column block. Each 64-byte line (16 columns x 4 k) widens to two
// vectors of bf16 pairs, columns 0-7 and 8-15, whose 32-bit lanes alternate the pairs (k0, k1)
// and (k2, k3) of one column; a row's 4 activations broadcast as 64 bits match that order, and
// the two lanes of a column are added at the end.
template <int R>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void
blockRows(const uint16_t *xb, size_t xStride, size_t r0, const int8_t *panel, size_t quads,
          const float *scale, float *y, size_t yStride, size_t column, size_t width) {
  __m512 acc[R][2];
  for (int i = 0; i < R; ++i)
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (size_t g = 0; g < quads; ++g) {
    const int8_t *line = panel + g * 64;
    __m512 f[4];
    for (int part = 0; part < 4; ++part)
      f[part] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i *>(line + 16 * part))));
    const __m512bh low = _mm512_cvtne2ps_pbh(f[1], f[0]);  // columns 0-7
    const __m512bh high = _mm512_cvtne2ps_pbh(f[3], f[2]); // columns 8-15
    for (int i = 0; i < R; ++i) {
      int64_t four;
      std::memcpy(&four, xb + (r0 + i) * xStride + 4 * g, 8);
      const __m512bh x = (__m512bh)_mm512_set1_epi64(four);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], low, x);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], high, x);
    }
  }
  const __m512 scales = _mm512_loadu_ps(scale + column);
  const __mmask16 store = static_cast<__mmask16>((1u << width) - 1);
  for (int i = 0; i < R; ++i) {
    // Lane pairs (2c, 2c + 1) hold column c's two halves: add, keep the even lanes.
    const __m512 lowSum = _mm512_add_ps(acc[i][0], _mm512_permute_ps(acc[i][0], 0xB1));
    const __m512 highSum = _mm512_add_ps(acc[i][1], _mm512_permute_ps(acc[i][1], 0xB1));
    const __m512 both = _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castps_pd(_mm512_maskz_compress_ps(0x5555, lowSum)),
        _mm256_castps_pd(_mm512_castps512_ps256(_mm512_maskz_compress_ps(0x5555, highSum))), 1));
    _mm512_mask_storeu_ps(y + (r0 + i) * yStride + column, store, _mm512_mul_ps(both, scales));
  }
}

} // namespace

void linearInt8WidenBf16(const uint16_t *xb, size_t xStride, size_t rows, const int8_t *w,
                         const float *scale, size_t k, float *y, size_t yStride, size_t colBegin,
                         size_t colEnd) {
  const LinearInt8N16K4 layout{colEnd, k};
  const size_t quads = layout.kQuads();
  for (size_t column = colBegin; column < colEnd; column += 16) {
    const int8_t *panel = w + (column / 16) * layout.blockBytes();
    const size_t width = std::min<size_t>(16, colEnd - column);
    size_t r = 0;
    for (; r + 4 <= rows; r += 4)
      blockRows<4>(xb, xStride, r, panel, quads, scale, y, yStride, column, width);
    for (; r < rows; ++r)
      blockRows<1>(xb, xStride, r, panel, quads, scale, y, yStride, column, width);
  }
}

} // namespace hetc::bench

#pragma GCC diagnostic pop
