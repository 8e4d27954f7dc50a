// The decode GEMV over a LinearInt8N16K4 weight (runtime/format/WeightLayout.h) and rows
// quantized as the CPU quantizes them (offset by 128, a scale per row: codegen/cpu/linear/
// LinearInt8.h), for up to kGemvInt8MaxRows rows. Its arithmetic is the CPU's, so it gives the
// CPU's bits: the dot product in int32 (exact, in any order), then
//   y = float(dot - 128 * columnSum[n]) * rowScale[r] * scale[n]  (+ residual, added last)
// each operation rounded alone (no fused multiply-add), as the CPU kernels compute it.
#pragma once

#include "codegen/cuda/linear/GemvBf16Layout.h" // HETC_HOST_DEVICE

#include <cstdint>

namespace hetc::codegen::cuda {

constexpr uint32_t kGemvInt8MaxRows = 8;

// Pointers are device addresses.
struct GemvInt8Args {
  const uint32_t *w = nullptr;       // the packed q, as 32-bit words: one k quad of one column
  const float *scale = nullptr;      // [paddedColumns]
  const int32_t *columnSum = nullptr; // [paddedColumns]
  const uint8_t *xq = nullptr;       // row r at xq + r * xStride bytes
  const float *rowScale = nullptr;   // [rows]
  const float *residual = nullptr;   // optional: row r at residual + r * residualStride
  float *y = nullptr;                // row r at y + r * yStride
  const uint32_t *rows = nullptr;    // the step's row count, at most kGemvInt8MaxRows
  uint64_t xStride = 0, residualStride = 0, yStride = 0;
  uint64_t n = 0, k = 0;
};

HETC_HOST_DEVICE inline uint64_t gemvKQuads(uint64_t k) { return (k + 3) / 4; }

// The word holding W[n][4q .. 4q + 3] (byte i is k = 4q + i): one 16-column block's quad q is 16
// consecutive words, one 64-byte line.
HETC_HOST_DEVICE inline uint64_t gemvInt8WordIndex(uint64_t column, uint64_t quad,
                                                   uint64_t kQuads) {
  return ((column / 16) * kQuads + quad) * 16 + column % 16;
}

// One of the 32 lanes of a 16-column block: column lane % 16, quads lane / 16, + 2, ...; the two
// halves' integer sums are added after. The row bytes past k are never read (the weight's are 0).
HETC_HOST_DEVICE inline void gemvInt8Lane(const GemvInt8Args &a, uint32_t rows, uint64_t block,
                                          uint32_t lane, int32_t *dot) {
  const uint64_t column = block * 16 + lane % 16;
  const uint64_t kQuads = gemvKQuads(a.k);
  for (uint64_t q = lane / 16; q < kQuads; q += 2) {
    const uint32_t word = a.w[gemvInt8WordIndex(column, q, kQuads)];
    for (uint32_t i = 0; i < 4 && 4 * q + i < a.k; ++i) {
      const int32_t w = static_cast<int8_t>(word >> (8 * i));
      for (uint32_t r = 0; r < rows; ++r)
        dot[r] += static_cast<int32_t>(a.xq[r * a.xStride + 4 * q + i]) * w;
    }
  }
}

HETC_HOST_DEVICE inline float gemvInt8Multiply(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b); // never contracted into an fma
#else
  return a * b; // the runtime builds with -ffp-contract=off
#endif
}
HETC_HOST_DEVICE inline float gemvInt8Add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// Column n of row r from its whole dot product, as the CPU's kernels finish it.
HETC_HOST_DEVICE inline float gemvInt8Finish(const GemvInt8Args &a, uint32_t r, uint64_t n,
                                             int32_t dot) {
  dot -= 128 * a.columnSum[n];
  float y = gemvInt8Multiply(gemvInt8Multiply(static_cast<float>(dot), a.rowScale[r]), a.scale[n]);
  if (a.residual)
    y = gemvInt8Add(y, a.residual[r * a.residualStride + n]);
  return y;
}

} // namespace hetc::codegen::cuda
