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

__attribute__((target("avx512f,avx512bw"))) void
quantizeRowsInt8Avx512(const float *x, size_t xStride, size_t rows, size_t k, uint8_t *xq,
                       size_t stride, float *rowScale) {
  for (size_t r = 0; r < rows; ++r) {
    const float *row = x + r * xStride;
    uint8_t *out = xq + r * stride;
    __m512 largest = _mm512_setzero_ps();
    for (size_t i = 0; i < k; i += 16) {
      const __mmask16 m = static_cast<__mmask16>(k - i >= 16 ? 0xffff : (1u << (k - i)) - 1);
      largest = _mm512_max_ps(largest, _mm512_abs_ps(_mm512_maskz_loadu_ps(m, row + i)));
    }
    const float maxAbs = _mm512_reduce_max_ps(largest);
    std::memset(out, 128, stride);
    rowScale[r] = maxAbs / 127.0f;
    if (maxAbs == 0.0f)
      continue;
    const __m512 inverse = _mm512_set1_ps(127.0f / maxAbs);
    const __m512 low = _mm512_set1_ps(-127.0f), high = _mm512_set1_ps(127.0f);
    const __m512i offset = _mm512_set1_epi32(128);
    for (size_t i = 0; i < k; i += 16) {
      const __mmask16 m = static_cast<__mmask16>(k - i >= 16 ? 0xffff : (1u << (k - i)) - 1);
      // Round half to even, as std::nearbyint in the default rounding mode.
      __m512 q = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + i), inverse),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      q = _mm512_min_ps(_mm512_max_ps(q, low), high);
      const __m512i u = _mm512_add_epi32(_mm512_cvtps_epi32(q), offset);
      _mm512_mask_cvtepi32_storeu_epi8(out + i, m, u);
    }
  }
}

const Implementation<QuantizeRowsInt8Fn> &pickQuantizeRowsInt8(uint64_t cpuFeatures) {
  static const Implementation<QuantizeRowsInt8Fn> kList[] = {
      {"QuantizeRowsInt8Avx512", kCpuAvx512F | kCpuAvx512BW, quantizeRowsInt8Avx512},
      {"QuantizeRowsInt8Portable", 0, quantizeRowsInt8},
  };
  return pickImplementation(kList, cpuFeatures);
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
      float y = static_cast<float>(dot) * call.x.rowScale[r] * call.scale[n];
      if (call.residual)
        y += call.residual[r * call.residualStride + n];
      call.y[r * call.yStride + n] = y;
    }
  }
}

namespace {

// Rows [r0, r0 + R) over B consecutive 16-column blocks from column `column` (the first block's
// panel at `panel`, the next ones blockBytes apart). Each quad step loads B weight lines and
// broadcasts each row's 4 activations once for all of them: R x B independent vpdpbusd chains.
template <int R, int B>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
blocksRows(const LinearInt8Call &call, const int8_t *panel, size_t blockBytes, size_t quads,
           size_t column, size_t r0) {
  __m512i acc[B][R];
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < R; ++i)
      acc[b][i] = _mm512_setzero_si512();
  const uint8_t *xq[R];
  for (int i = 0; i < R; ++i)
    xq[i] = call.x.xq + (r0 + i) * call.x.stride;
  for (size_t g = 0; g < quads; ++g) {
    __m512i w[B];
    for (int b = 0; b < B; ++b)
      w[b] = _mm512_loadu_si512(panel + b * blockBytes + g * 64);
    for (int i = 0; i < R; ++i) {
      int32_t four;
      std::memcpy(&four, xq[i] + g * 4, 4);
      const __m512i x = _mm512_set1_epi32(four);
      for (int b = 0; b < B; ++b)
        acc[b][i] = _mm512_dpbusd_epi32(acc[b][i], x, w[b]);
    }
  }
  for (int b = 0; b < B; ++b) {
    const size_t first = column + 16 * b;
    const size_t width = std::min<size_t>(16, call.colEnd - first);
    const __mmask16 store = static_cast<__mmask16>((1u << width) - 1);
    // Subtract 128 x the column sums: the offset that made the activations unsigned.
    const __m512i offset = _mm512_slli_epi32(_mm512_loadu_si512(call.columnSum + first), 7);
    const __m512 scale = _mm512_loadu_ps(call.scale + first);
    for (int i = 0; i < R; ++i) {
      const __m512 dot = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[b][i], offset));
      __m512 y = _mm512_mul_ps(_mm512_mul_ps(dot, _mm512_set1_ps(call.x.rowScale[r0 + i])), scale);
      if (call.residual)
        y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(
                                 store, call.residual + (r0 + i) * call.residualStride + first));
      _mm512_mask_storeu_ps(call.y + (r0 + i) * call.yStride + first, store, y);
    }
  }
}

// Every row over B blocks: 4 rows at a time, then the rest.
template <int B>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
blocksAllRows(const LinearInt8Call &call, const int8_t *panel, size_t blockBytes, size_t quads,
              size_t column) {
  size_t r = 0;
  // The blocks' panels (K x 16 bytes each) stay in L1/L2 while groups of rows read them again.
  for (; r + 4 <= call.x.rows; r += 4)
    blocksRows<4, B>(call, panel, blockBytes, quads, column, r);
  switch (call.x.rows - r) {
  case 3:
    blocksRows<3, B>(call, panel, blockBytes, quads, column, r);
    break;
  case 2:
    blocksRows<2, B>(call, panel, blockBytes, quads, column, r);
    break;
  case 1:
    blocksRows<1, B>(call, panel, blockBytes, quads, column, r);
    break;
  default:
    break;
  }
}

} // namespace

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
linearInt8Avx512Vnni(const LinearInt8Call &call) {
  const LinearInt8N16K4 layout{call.colEnd, call.k};
  const size_t quads = layout.kQuads(), blockBytes = layout.blockBytes();
  size_t column = call.colBegin;
  for (; column + 64 <= call.colEnd; column += 64)
    blocksAllRows<4>(call, call.w + (column / 16) * blockBytes, blockBytes, quads, column);
  for (; column < call.colEnd; column += 16)
    blocksAllRows<1>(call, call.w + (column / 16) * blockBytes, blockBytes, quads, column);
}

#pragma GCC diagnostic pop

const Implementation<LinearInt8Fn> &pickLinearInt8(uint64_t cpuFeatures) {
  static const Implementation<LinearInt8Fn> kList[] = {
      {"LinearInt8Avx512Vnni", kCpuAvx512F | kCpuAvx512BW | kCpuAvx512Vnni, linearInt8Avx512Vnni},
      {"LinearInt8Portable", 0, linearInt8Portable},
  };
  return pickImplementation(kList, cpuFeatures);
}

} // namespace hetc::codegen
