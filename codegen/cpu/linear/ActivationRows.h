// Activation rows for the BF16 linear kernels: the layouts the kernels read their inputs in, and
// the conversions from float32 rows into them. The weights' layout is the plan format's
// (runtime/format/WeightLayout.h).
#pragma once

#include "runtime/format/Bf16.h"
#include "runtime/format/WeightLayout.h"

#include <cstddef>
#include <cstdint>

namespace hetc::codegen {

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

// The name of the conversions the functions above run on this host ("Bf16RowsAvx512Bf16" or
// "Bf16RowsPortable"), into Bf16Rows alone or also into Bf16RowMajor for prefill tiles.
const char *convertRowsName(bool withRowMajor);

} // namespace hetc::codegen
