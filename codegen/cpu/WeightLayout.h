// Weight layouts: the one place that knows how a packed weight's elements are ordered. The
// compiler packs with these functions; the runtime's kernels and loader read through them.
//
// LinearBf16N16K2 (plan WeightLayoutDef::LinearBf16N16K2): a linear weight with N outputs of K
// inputs, in BF16, ordered for vdpbf16ps. Output columns are grouped in blocks of 16; a block is
// one contiguous panel of ceil(K/2) K pairs; a K pair is 16 columns x 2 consecutive k, 64 bytes,
// one cache line:
//
//   element (n, k) at uint16 index ((n / 16) * kPairs + k / 2) * 32 + (n % 16) * 2 + k % 2
//
// N is padded to a multiple of 16 and K to a multiple of 2 with zeros, so a kernel never reads a
// partial line. One 32-bit broadcast of an activation pair (x[2p], x[2p+1]) times one 64-byte
// line gives 16 columns' partial dot products: the weight stream is sequential per block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hetc::codegen {

// float -> bf16 rounding to nearest even, as vcvtne2ps2bf16 does: a NaN stays a (quiet) NaN and
// a denormal input becomes a zero of its sign. Inline: the KV append rounds every element it
// writes with it.
inline uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  // The hardware's definition (convert_fp32_to_bfloat16 in the SDM): NaN keeps its top half and
  // becomes quiet; a denormal is a zero; otherwise add 0x7fff plus the lowest kept bit.
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  if ((bits & 0x7f800000u) == 0)
    return static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t lsb = (bits >> 16) & 1;
  return static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

inline float bf16ToFloat(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

struct LinearBf16N16K2 {
  static constexpr uint64_t kBlockColumns = 16;
  static constexpr uint64_t kPairBytes = kBlockColumns * 2 * sizeof(uint16_t); // 64

  uint64_t n = 0; // outputs (columns of the result)
  uint64_t k = 0; // inputs

  uint64_t kPairs() const { return (k + 1) / 2; }
  uint64_t blocks() const { return (n + kBlockColumns - 1) / kBlockColumns; }
  uint64_t blockBytes() const { return kPairs() * kPairBytes; }
  // Payload bytes; use sizeChecked where n and k come from an untrusted file.
  uint64_t bytes() const { return blocks() * blockBytes(); }
  // Index in uint16 elements of (row n, k) = W[n][k].
  uint64_t index(uint64_t row, uint64_t col) const {
    return ((row / kBlockColumns) * kPairs() + col / 2) * (kBlockColumns * 2) +
           (row % kBlockColumns) * 2 + col % 2;
  }
  // bytes() without overflow: false when it does not fit 64 bits.
  static bool sizeChecked(uint64_t n, uint64_t k, uint64_t &bytes);
};

// Packs the f32 matrix `src` into `dst` (LinearBf16N16K2{n, k}.bytes() bytes, padding zeroed).
// `src` is W as [N, K] row-major when `srcIsKN` is false, or as ONNX MatMul's [K, N] row-major
// (y = x @ src) when true.
void packLinearBf16(const float *src, bool srcIsKN, uint64_t n, uint64_t k, uint16_t *dst);

// Row `row` of W ([K] floats) from a packed weight: a tied embedding's table lookup, and tests.
void unpackLinearBf16Row(const uint16_t *packed, uint64_t n, uint64_t k, uint64_t row, float *out);

// Activation rows for the BF16 kernels, as bf16 pairs (x[2p], x[2p+1]) (an odd K's last pair
// padded with a zero) in groups of 16 rows: a group is ceil(K/2) K steps of 64 bytes, each the
// 16 rows' pairs side by side, so one K step of a kernel reads one line for all its rows (one
// stream, not one per row):
//
//   pair p of row r at 32-bit index ((r / 16) * kPairs + p) * 16 + r % 16
struct Bf16Rows {
  static constexpr uint64_t kGroupRows = 16;
  static uint64_t groupBytes(uint64_t k) { return (k + 1) / 2 * kGroupRows * 4; }
  // Bytes that hold `rows` rows (whole groups); a multiple of 64.
  static uint64_t bytes(uint64_t rows, uint64_t k) {
    return (rows + kGroupRows - 1) / kGroupRows * groupBytes(k);
  }
  static uint64_t pairIndex(uint64_t row, uint64_t pair, uint64_t k) {
    return ((row / kGroupRows) * ((k + 1) / 2) + pair) * kGroupRows + row % kGroupRows;
  }
};

// Activation rows for AMX A tiles (LinearAmxBf16), row-major: row r at 32-bit index
// r * rowBytes(k) / 4, a row being the pairs (x[2p], x[2p+1]) of Bf16Rows (an odd K's last pair
// padded with a zero). A tile row is 16 consecutive pairs of one row. Rows are padded to an odd
// number of 64-byte lines, so the 32 rows two A tiles load fall in 32 different L1 sets rather
// than a few (a power-of-two stride would map them all to one). The padding is never read.
struct Bf16RowMajor {
  static uint64_t rowBytes(uint64_t k) {
    const uint64_t lines = ((k + 1) / 2 * 4 + 63) / 64;
    return (lines % 2 ? lines : lines + 1) * 64;
  }
  static uint64_t bytes(uint64_t rows, uint64_t k) { return rows * rowBytes(k); }
  static uint64_t pairIndex(uint64_t row, uint64_t pair, uint64_t k) {
    return row * (rowBytes(k) / 4) + pair;
  }
};

// Converts rows [rowBegin, rowEnd) of x into the Bf16Rows layout at `dst`: destination row r
// comes from source row rowIndex[r] (or r when rowIndex is null) at x + source * xStride floats.
void convertRowsToBf16(const float *x, size_t xStride, const uint32_t *rowIndex, size_t k,
                       uint32_t *dst, size_t rowBegin, size_t rowEnd);
// The same in plain C++ (what runs without AVX-512 BF16); bit-identical to the above.
void convertRowsToBf16Portable(const float *x, size_t xStride, const uint32_t *rowIndex, size_t k,
                               uint32_t *dst, size_t rowBegin, size_t rowEnd);

// The same rows into the Bf16RowMajor layout (row r of dst from source row rowIndex[r] or r).
void convertRowsToBf16RowMajor(const float *x, size_t xStride, const uint32_t *rowIndex, size_t k,
                               uint32_t *dst, size_t rowBegin, size_t rowEnd);
void convertRowsToBf16RowMajorPortable(const float *x, size_t xStride, const uint32_t *rowIndex,
                                       size_t k, uint32_t *dst, size_t rowBegin, size_t rowEnd);

} // namespace hetc::codegen
