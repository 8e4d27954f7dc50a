// The decode GEMV over a LinearBf16N16K2 weight (runtime/format/WeightLayout.h), for up to
// kGemvMaxRows rows: its argument block and the index arithmetic the CUDA kernel and the software
// device's run of it share, so the CPU's unit tests check what the GPU computes with.
//
// y[r][n] = sum over k of x[r][k] * W[n][k], in float, for r < *rows (read from device memory:
// the step block a captured graph reads), n < n.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define HETC_HOST_DEVICE __host__ __device__
#else
#define HETC_HOST_DEVICE
#endif

namespace hetc::codegen::cuda {

constexpr uint32_t kGemvMaxRows = 8;

// Pointers are device addresses.
struct GemvBf16Args {
  const uint32_t *w = nullptr;  // the packed weight, as 32-bit words: one k pair of one column each
  const float *x = nullptr;     // row r at x + r * xStride
  float *y = nullptr;           // row r at y + r * yStride
  const uint32_t *rows = nullptr; // the step's row count, at most kGemvMaxRows
  uint64_t xStride = 0, yStride = 0;
  uint64_t n = 0, k = 0;
};

HETC_HOST_DEVICE inline uint64_t gemvKPairs(uint64_t k) { return (k + 1) / 2; }

// The 32-bit word holding (W[n][2p], W[n][2p+1]): low half the even k. One 16-column block's
// pair p is 16 consecutive words, so the 16 lanes reading one pair read one 64-byte line.
HETC_HOST_DEVICE inline uint64_t gemvWordIndex(uint64_t column, uint64_t pair, uint64_t kPairs) {
  return ((column / 16) * kPairs + pair) * 16 + column % 16;
}

HETC_HOST_DEVICE inline float gemvFloatOfBits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// A bf16 half of a word as float (bf16 is the float's upper 16 bits).
HETC_HOST_DEVICE inline float gemvBf16Low(uint32_t word) { return gemvFloatOfBits(word << 16); }
HETC_HOST_DEVICE inline float gemvBf16High(uint32_t word) {
  return gemvFloatOfBits(word & 0xFFFF0000u);
}

// The work of one of the 32 lanes that compute one 16-column block: column (lane % 16) of the
// block, the k pairs p = lane / 16, lane / 16 + 2, ...; the two halves' sums are then added
// (lane + 16 into lane). Accumulates into acc[0, rows).
HETC_HOST_DEVICE inline void gemvLane(const GemvBf16Args &a, uint32_t rows, uint64_t block,
                                      uint32_t lane, float *acc) {
  const uint64_t column = block * 16 + lane % 16;
  const uint64_t kPairs = gemvKPairs(a.k);
  for (uint64_t p = lane / 16; p < kPairs; p += 2) {
    const uint32_t word = a.w[gemvWordIndex(column, p, kPairs)];
    const float w0 = gemvBf16Low(word), w1 = gemvBf16High(word);
    const uint64_t k0 = 2 * p;
    for (uint32_t r = 0; r < rows; ++r) {
      const float *x = a.x + r * a.xStride;
      // K is padded with zero weights: x past k is not read.
      acc[r] += x[k0] * w0 + (k0 + 1 < a.k ? x[k0 + 1] * w1 : 0.0f);
    }
  }
}

} // namespace hetc::codegen::cuda
