#include "codegen/cpu/linear/ActivationRows.h"

#include "codegen/cpu/isa/CpuFeatures.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hetc::codegen {

void convertRowsToBf16Portable(const float *x, size_t xStride, const uint32_t *rowIndex, size_t k,
                               uint32_t *dst, size_t rowBegin, size_t rowEnd) {
  const size_t pairs = (k + 1) / 2;
  for (size_t r = rowBegin; r < rowEnd; ++r) {
    const float *source = x + (rowIndex ? rowIndex[r] : r) * xStride;
    uint32_t *out = dst + Bf16Rows::pairIndex(r, 0, k);
    for (size_t p = 0; p < pairs; ++p) {
      const uint32_t even = floatToBf16(source[2 * p]);
      const uint32_t odd = 2 * p + 1 < k ? floatToBf16(source[2 * p + 1]) : 0;
      out[p * Bf16Rows::kGroupRows] = even | odd << 16;
    }
  }
}

void convertRowsToBf16RowMajorPortable(const float *x, size_t xStride, const uint32_t *rowIndex,
                                       size_t k, uint32_t *dst, size_t rowBegin, size_t rowEnd) {
  const size_t pairs = (k + 1) / 2;
  for (size_t r = rowBegin; r < rowEnd; ++r) {
    const float *source = x + (rowIndex ? rowIndex[r] : r) * xStride;
    uint32_t *out = dst + Bf16RowMajor::pairIndex(r, 0, k);
    for (size_t p = 0; p < pairs; ++p) {
      const uint32_t even = floatToBf16(source[2 * p]);
      const uint32_t odd = 2 * p + 1 < k ? floatToBf16(source[2 * p + 1]) : 0;
      out[p] = even | odd << 16;
    }
  }
}

namespace {

#if defined(__x86_64__)
// The bf16 pairs of the next min(left, 32) values of a row, 16 pairs in one vector: one
// vcvtne2ps2bf16. Loads beyond `left` read zeros, which pad an odd K's last pair.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline __m512i
bf16PairsOf(const float *source, size_t left) {
  const __mmask16 loLoad = static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1);
  const __mmask16 hiLoad = static_cast<__mmask16>(left <= 16   ? 0
                                                  : left >= 32 ? 0xffff
                                                               : (1u << (left - 16)) - 1);
  const __m512 lo = _mm512_maskz_loadu_ps(loLoad, source);
  const __m512 hi = _mm512_maskz_loadu_ps(hiLoad, source + 16);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

// The pairs of those values that exist: all 16 but at the end of an odd or short row.
inline __mmask16 pairsMask(size_t left) {
  return left >= 32 ? 0xffff : static_cast<__mmask16>((1u << (left + 1) / 2) - 1);
}

// 16 pairs of a row at a time: one conversion and one 64-byte store.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void
convertRowsRowMajorAvx512Bf16(const float *x, size_t xStride, const uint32_t *rowIndex, size_t k,
                              uint32_t *dst, size_t rowBegin, size_t rowEnd) {
  for (size_t r = rowBegin; r < rowEnd; ++r) {
    const float *source = x + (rowIndex ? rowIndex[r] : r) * xStride;
    uint32_t *out = dst + Bf16RowMajor::pairIndex(r, 0, k);
    for (size_t i = 0; i < k; i += 32)
      _mm512_mask_storeu_epi32(out + i / 2, pairsMask(k - i), bf16PairsOf(source + i, k - i));
  }
}

// 16 pairs of a row at a time: one conversion, then a scatter to 16 lines 64 bytes apart.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void
convertRowsAvx512Bf16(const float *x, size_t xStride, const uint32_t *rowIndex, size_t k,
                      uint32_t *dst, size_t rowBegin, size_t rowEnd) {
  const __m512i lines =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(static_cast<int>(Bf16Rows::kGroupRows)));
  for (size_t r = rowBegin; r < rowEnd; ++r) {
    const float *source = x + (rowIndex ? rowIndex[r] : r) * xStride;
    uint32_t *out = dst + Bf16Rows::pairIndex(r, 0, k);
    for (size_t i = 0; i < k; i += 32)
      _mm512_mask_i32scatter_epi32(out + i / 2 * Bf16Rows::kGroupRows, pairsMask(k - i), lines,
                                   bf16PairsOf(source + i, k - i), 4);
  }
}
#endif

using ConvertRows = void (*)(const float *, size_t, const uint32_t *, size_t, uint32_t *, size_t,
                             size_t);

// The conversions this host runs, into each layout, and their name; chosen once.
struct RowConversion {
  ConvertRows rows;
  ConvertRows rowMajor;
  const char *name;
  const char *nameWithRowMajor;
};

const RowConversion &hostRowConversion() {
  static const RowConversion conversion = [] {
#if defined(__x86_64__)
    if (hostHas(kCpuAvx512Bf16))
      return RowConversion{&convertRowsAvx512Bf16, &convertRowsRowMajorAvx512Bf16,
                           "Bf16RowsAvx512Bf16", "Bf16RowsAvx512Bf16 + Bf16RowMajor (prefill)"};
#endif
    return RowConversion{&convertRowsToBf16Portable, &convertRowsToBf16RowMajorPortable,
                         "Bf16RowsPortable", "Bf16RowsPortable + Bf16RowMajor (prefill)"};
  }();
  return conversion;
}

} // namespace

void convertRowsToBf16(const float *x, size_t xStride, const uint32_t *rowIndex, size_t k,
                       uint32_t *dst, size_t rowBegin, size_t rowEnd) {
  hostRowConversion().rows(x, xStride, rowIndex, k, dst, rowBegin, rowEnd);
}

void convertRowsToBf16RowMajor(const float *x, size_t xStride, const uint32_t *rowIndex, size_t k,
                               uint32_t *dst, size_t rowBegin, size_t rowEnd) {
  hostRowConversion().rowMajor(x, xStride, rowIndex, k, dst, rowBegin, rowEnd);
}

const char *convertRowsName(bool withRowMajor) {
  return withRowMajor ? hostRowConversion().nameWithRowMajor : hostRowConversion().name;
}

} // namespace hetc::codegen
