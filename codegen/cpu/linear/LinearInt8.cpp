#include "codegen/cpu/linear/LinearInt8.h"

#include "codegen/cpu/isa/CpuFeatures.h"
#include "runtime/format/WeightLayout.h"

// GCC 12's AVX-512 headers use an undefined vector as the passthrough of unmasked intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hetc::codegen {

void quantizeRowsInt8(const float *x, size_t xStride, size_t rows, size_t k, uint8_t *xq,
                      size_t stride, float *rowScale) {
  for (size_t r = 0; r < rows; ++r) {
    const float *row = x + r * xStride;
    uint8_t *out = xq + r * stride;
    float largest = 0.0f;
    for (size_t i = 0; i < k; ++i)
      largest = std::max(largest, std::fabs(row[i]));
    std::memset(out, 128, stride);
    rowScale[r] = largest / 127.0f;
    if (largest == 0.0f)
      continue;
    const float inverse = 127.0f / largest;
    for (size_t i = 0; i < k; ++i) {
      const float q = std::clamp(std::nearbyint(row[i] * inverse), -127.0f, 127.0f);
      out[i] = static_cast<uint8_t>(static_cast<int32_t>(q) + 128);
    }
  }
}

void linearInt8Portable(const LinearInt8Call &call) {
  const LinearInt8N16K4 layout{call.colEnd, call.k};
  for (size_t r = 0; r < call.x.rows; ++r) {
    const uint8_t *xq = call.x.xq + r * call.x.stride;
    for (size_t n = call.colBegin; n < call.colEnd; ++n) {
      int32_t dot = 0;
      for (size_t i = 0; i < call.k; ++i)
        dot += static_cast<int32_t>(xq[i]) * call.w[layout.index(n, i)];
      dot -= 128 * call.columnSum[n];
      call.y[r * call.yStride + n] =
          static_cast<float>(dot) * call.x.rowScale[r] * call.scale[n];
    }
  }
}

namespace {

// Quad g of the panel (16 columns x 4 k) times rows' 4 activations, into `acc`.
template <int R>
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) inline void
quadRows(__m512i *acc, const uint8_t *const *xq, const int8_t *panel, size_t g) {
  const __m512i w = _mm512_loadu_si512(panel + g * 64);
  for (int i = 0; i < R; ++i) {
    int32_t four;
    std::memcpy(&four, xq[i] + g * 4, 4);
    acc[i] = _mm512_dpbusd_epi32(acc[i], _mm512_set1_epi32(four), w);
  }
}

// Rows [r0, r0 + R) over one 16-column block whose panel starts at `panel`. Each row sums into
// C accumulators (quads g, g + C, ...) so that few rows still keep C vpdpbusd chains in flight;
// integer sums, so the split changes no bit.
template <int R, int C>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
blockRows(const LinearInt8Call &call, const int8_t *panel, size_t quads, size_t column,
          size_t r0, __mmask16 store) {
  __m512i acc[C][R];
  for (int c = 0; c < C; ++c)
    for (int i = 0; i < R; ++i)
      acc[c][i] = _mm512_setzero_si512();
  const uint8_t *xq[R];
  for (int i = 0; i < R; ++i)
    xq[i] = call.x.xq + (r0 + i) * call.x.stride;
  size_t g = 0;
  for (; g + C <= quads; g += C)
    for (int c = 0; c < C; ++c)
      quadRows<R>(acc[c], xq, panel, g + c);
  for (; g < quads; ++g)
    quadRows<R>(acc[0], xq, panel, g);
  for (int c = 1; c < C; ++c)
    for (int i = 0; i < R; ++i)
      acc[0][i] = _mm512_add_epi32(acc[0][i], acc[c][i]);
  // Subtract 128 x the column sums: the offset that made the activations unsigned.
  const __m512i offset = _mm512_slli_epi32(_mm512_loadu_si512(call.columnSum + column), 7);
  const __m512 scale = _mm512_loadu_ps(call.scale + column);
  for (int i = 0; i < R; ++i) {
    const __m512 dot = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[0][i], offset));
    const __m512 y = _mm512_mul_ps(_mm512_mul_ps(dot, _mm512_set1_ps(call.x.rowScale[r0 + i])),
                                   scale);
    _mm512_mask_storeu_ps(call.y + (r0 + i) * call.yStride + column, store, y);
  }
}

} // namespace

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
linearInt8Avx512Vnni(const LinearInt8Call &call) {
  const LinearInt8N16K4 layout{call.colEnd, call.k};
  const size_t quads = layout.kQuads();
  for (size_t column = call.colBegin; column < call.colEnd; column += 16) {
    const int8_t *panel = call.w + (column / 16) * layout.blockBytes();
    const size_t width = std::min<size_t>(16, call.colEnd - column);
    const __mmask16 store = static_cast<__mmask16>((1u << width) - 1);
    size_t r = 0;
    // The block's panel (K x 16 bytes) stays in L1/L2 while groups of rows read it again.
    for (; r + 4 <= call.x.rows; r += 4)
      blockRows<4, 2>(call, panel, quads, column, r, store);
    switch (call.x.rows - r) {
    case 3:
      blockRows<3, 2>(call, panel, quads, column, r, store);
      break;
    case 2:
      blockRows<2, 4>(call, panel, quads, column, r, store);
      break;
    case 1:
      blockRows<1, 4>(call, panel, quads, column, r, store);
      break;
    default:
      break;
    }
  }
}

#pragma GCC diagnostic pop

LinearInt8Fn chooseLinearInt8Kernel() {
  return hostHas(kCpuAvx512F | kCpuAvx512BW | kCpuAvx512Vnni) ? linearInt8Avx512Vnni
                                                              : linearInt8Portable;
}

} // namespace hetc::codegen
