// Packed weight layouts of the plan file: the one place that knows how a packed weight's elements
// are ordered. The compiler packs with these functions; the loader checks sizes and the kernels
// read through them.
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
//
// LinearInt8N16K4: the same for int8 weights with a float32 scale per output column (W[n][k] ~
// scale[n] * q[n][k], q in [-127, 127]), ordered for vpdpbusd: a block's panel is ceil(K/4) K
// quads of 16 columns x 4 consecutive k, 64 bytes:
//
//   element (n, k) at int8 index ((n / 16) * kQuads + k / 4) * 64 + (n % 16) * 4 + k % 4
//
// A plan stores one segment per weight: the packed q (bytes()), then scale[paddedColumns()]
// (float32) and columnSum[paddedColumns()] (int32), each 64-byte aligned since bytes() is a
// multiple of 64.
//
// LinearInt4N16K8: 4-bit weights with a scale and a zero point per output column and group of
// `group` consecutive k (16, 32, 64 or 128), W[n][k] ~ scale[n][g] * (u[n][k] - zp[n][g]), u in
// [0, 15]; a 64-byte line packs two vpdpbusd K quads of 16 columns, one per nibble, followed in
// the segment by the scales and zero points of each block's groups, 16 columns contiguous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hetc {

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
// The same for rows [row0, row0 + count) of W alone (row0 a multiple of 16; `rows` [count, K]
// row-major) into their blocks' panels, which start at `panels` (index(row0, 0) of the whole):
// ceil(count / 16) panels, rows past `count` zero. Packing a weight block by block this way
// gives packLinearBf16's bytes while holding one block of it.
void packLinearBf16Rows(const float *rows, uint64_t n, uint64_t k, uint64_t row0, uint64_t count,
                        uint16_t *panels);

// Row `row` of W ([K] floats) from a packed weight: a tied embedding's table lookup, and tests.
void unpackLinearBf16Row(const uint16_t *packed, uint64_t n, uint64_t k, uint64_t row, float *out);

struct LinearInt8N16K4 {
  static constexpr uint64_t kBlockColumns = 16;
  static constexpr uint64_t kQuadBytes = kBlockColumns * 4; // 64

  uint64_t n = 0;
  uint64_t k = 0;

  uint64_t kQuads() const { return (k + 3) / 4; }
  uint64_t blocks() const { return (n + kBlockColumns - 1) / kBlockColumns; }
  uint64_t paddedColumns() const { return blocks() * kBlockColumns; }
  uint64_t blockBytes() const { return kQuads() * kQuadBytes; }
  // Bytes of the packed q; the plan's segment then holds the scales and the column sums.
  uint64_t bytes() const { return blocks() * blockBytes(); }
  uint64_t scaleOffset() const { return bytes(); }
  uint64_t columnSumOffset() const { return bytes() + paddedColumns() * sizeof(float); }
  uint64_t segmentBytes() const { return columnSumOffset() + paddedColumns() * sizeof(int32_t); }
  uint64_t index(uint64_t row, uint64_t col) const {
    return ((row / kBlockColumns) * kQuads() + col / 4) * kQuadBytes + (row % kBlockColumns) * 4 +
           col % 4;
  }
  // segmentBytes() without overflow: false when it does not fit 64 bits.
  static bool segmentSizeChecked(uint64_t n, uint64_t k, uint64_t &bytes);
};

// Row `row` of W ([K] floats, q * scale in float32) from a LinearInt8N16K4 segment: a tied
// embedding's table lookup.
void unpackLinearInt8Row(const uint8_t *segment, uint64_t n, uint64_t k, uint64_t row, float *out);

// Quantizes the f32 matrix `src` (as packLinearBf16 takes it) symmetrically per output column:
// scale[n] = max |W[n][.]| / 127 (0 for a zero column), q = round-half-even(W / scale). Writes the
// packed q to `dst` (LinearInt8N16K4{n, k}.bytes(), padding zeroed), and, for paddedColumns()
// columns (padding 0), `scale` and `columnSum` (the sum of column n's q, which kernels that offset
// unsigned activations by 128 subtract).
void quantizeLinearInt8(const float *src, bool srcIsKN, uint64_t n, uint64_t k, int8_t *dst,
                        float *scale, int32_t *columnSum);
// The same for rows [row0, row0 + count) of W alone (row0 a multiple of 16, `rows` [count, K]):
// their panels at `panels` (index(row0, 0) of the whole), and scale and columnSum of rows row0..
// for ceil(count / 16) * 16 rows (padding 0).
void quantizeLinearInt8Rows(const float *rows, uint64_t n, uint64_t k, uint64_t row0,
                            uint64_t count, int8_t *panels, float *scale, int32_t *columnSum);
// The same into one plan segment of LinearInt8N16K4{n, k}.segmentBytes() bytes.
void quantizeLinearInt8Segment(const float *src, bool srcIsKN, uint64_t n, uint64_t k,
                               uint8_t *segment);

// 4-bit group-wise weights, unsigned nibbles u in [0, 15] with a float32 scale and a uint8 zero
// point per (output column n, group g = k / group):
//
//   W[n][k] ~ scale[n][g] * (u[n][k] - zp[n][g])
//
// K is padded to kPadded, a multiple of `group`, and N to 16 * blocks(). A block's panel is
// kOcts() lines of 64 bytes; the line of K oct o (k in [8o, 8o + 8)) holds, for each of the 16
// columns, the 4 bytes of k = 8o..8o+3 in their low nibbles and k = 8o+4..8o+7 in their high
// nibbles:
//
//   element (n, k) at byte ((n / 16) * kOcts + k / 8) * 64 + (n % 16) * 4 + k % 4,
//   low nibble when (k / 4) % 2 == 0, high nibble otherwise
//
// so `line & 0x0F` and `(line >> 4) & 0x0F` are two K quads in vpdpbusd's order (a dword per
// column of 4 consecutive k), the unsigned operand as they are. The segment then holds
// scale[paddedColumns() * groups()] (float32, at scaleOffset()) and zp[paddedColumns() *
// groups()] (uint8, at zeroPointOffset()), both indexed ((n / 16) * groups + g) * 16 + n % 16:
// one block's 16 scales of a group are one zmm load, its 16 zero points one 16-byte load. The
// padding (k >= K, and the padded columns) holds u = 0; the padded columns' scales and zero
// points are 0.
struct LinearInt4N16K8 {
  static constexpr uint64_t kBlockColumns = 16;
  static constexpr uint64_t kOctBytes = 64; // 16 columns x 8 k, a nibble each

  uint64_t n = 0;
  uint64_t k = 0;
  uint64_t group = 32; // 16, 32, 64 or 128

  static bool validGroup(uint64_t group) {
    return group == 16 || group == 32 || group == 64 || group == 128;
  }
  uint64_t kPadded() const { return (k + group - 1) / group * group; }
  uint64_t groups() const { return kPadded() / group; }
  uint64_t kOcts() const { return kPadded() / 8; }
  uint64_t blocks() const { return (n + kBlockColumns - 1) / kBlockColumns; }
  uint64_t paddedColumns() const { return blocks() * kBlockColumns; }
  uint64_t blockBytes() const { return kOcts() * kOctBytes; }
  // Bytes of the packed nibbles (a multiple of 64, so the scales are 64-byte aligned).
  uint64_t bytes() const { return blocks() * blockBytes(); }
  uint64_t scaleOffset() const { return bytes(); }
  uint64_t zeroPointOffset() const {
    return scaleOffset() + paddedColumns() * groups() * sizeof(float);
  }
  uint64_t segmentBytes() const { return zeroPointOffset() + paddedColumns() * groups(); }
  // Byte of element (row n, col k), and the shift of its nibble in that byte (0 or 4).
  uint64_t byteIndex(uint64_t row, uint64_t col) const {
    return ((row / kBlockColumns) * kOcts() + col / 8) * kOctBytes + (row % kBlockColumns) * 4 +
           col % 4;
  }
  static unsigned nibbleShift(uint64_t col) { return (col / 4) % 2 ? 4 : 0; }
  // Index of (row n, group g) in the scales and in the zero points.
  uint64_t groupIndex(uint64_t row, uint64_t g) const {
    return ((row / kBlockColumns) * groups() + g) * kBlockColumns + row % kBlockColumns;
  }
  // segmentBytes() without overflow: false when it does not fit 64 bits or the group is not 16,
  // 32, 64 or 128.
  static bool segmentSizeChecked(uint64_t n, uint64_t k, uint64_t group, uint64_t &bytes);
};

// Row `row` of W ([K] floats, float(u - zp) * scale in float32) from a LinearInt4N16K8 segment:
// a tied embedding's table lookup.
void unpackLinearInt4Row(const uint8_t *segment, uint64_t n, uint64_t k, uint64_t group,
                         uint64_t row, float *out);

// Quantizes the f32 matrix `src` (as packLinearBf16 takes it) per output column and group into
// one plan segment of LinearInt4N16K8{n, k, group}.segmentBytes() bytes. Over the valid k of
// each (n, g), in float32 with the default rounding (round-half-even, as std::nearbyint):
//
//   asymmetric: lo = min(0, min w), hi = max(0, max w), scale = (hi - lo) / 15,
//               zp = clamp(nearbyint(-lo / scale), 0, 15),
//               u = clamp(nearbyint(w / scale) + zp, 0, 15)
//   symmetric:  scale = max |w| / 7, zp = 8, u = clamp(nearbyint(w / scale) + 8, 0, 15)
//
// The divisions are w / scale (not w times a reciprocal). The range includes 0 so that zero is
// exact, as in a decoder's padding and ReLU outputs. A group whose scale is 0 (all zeros, or so
// small that the division underflows) gets scale 0, zp 0 (asymmetric) or 8 (symmetric) and
// u = zp: it decodes to zeros.
void quantizeLinearInt4Segment(const float *src, bool srcIsKN, uint64_t n, uint64_t k,
                               uint64_t group, bool symmetric, uint8_t *segment);
// The same for rows [row0, row0 + count) of W alone (row0 a multiple of 16, `rows` [count, K]):
// their panels at `panels` (byteIndex(row0, 0) of the whole) and their blocks' scales and zero
// points at `scales` and `zeroPoints` (groupIndex(row0, 0) of the whole), ceil(count / 16)
// blocks, the padding as quantizeLinearInt4Segment leaves it.
void quantizeLinearInt4Rows(const float *rows, uint64_t n, uint64_t k, uint64_t group,
                            bool symmetric, uint64_t row0, uint64_t count, uint8_t *panels,
                            float *scales, uint8_t *zeroPoints);

} // namespace hetc
