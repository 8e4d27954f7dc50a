#include "runtime/format/WeightLayout.h"

#include "runtime/format/Bf16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace hetc {

bool LinearBf16N16K2::sizeChecked(uint64_t n, uint64_t k, uint64_t &bytes) {
  uint64_t paddedN, pairs, perBlock;
  if (__builtin_add_overflow(n, kBlockColumns - 1, &paddedN) ||
      __builtin_add_overflow(k, uint64_t{1}, &pairs))
    return false;
  pairs /= 2;
  const uint64_t blocks = paddedN / kBlockColumns;
  return !__builtin_mul_overflow(pairs, kPairBytes, &perBlock) &&
         !__builtin_mul_overflow(blocks, perBlock, &bytes);
}

namespace {

// Rows [row0, row0 + rows) of W as [rows, K] row-major, from the whole matrix `src` ([N, K], or
// [K, N] when `srcIsKN`): the input of the *Rows functions.
void gatherRows(const float *src, bool srcIsKN, uint64_t n, uint64_t k, uint64_t row0,
                uint64_t rows, float *out) {
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t col = 0; col < k; ++col)
      out[r * k + col] = srcIsKN ? src[col * n + row0 + r] : src[(row0 + r) * k + col];
}

// Calls pack(row0, rows, buffer) for each block of 16 rows of W, gathered into `buffer`.
template <typename Pack>
void forEachBlock(const float *src, bool srcIsKN, uint64_t n, uint64_t k, Pack pack) {
  constexpr uint64_t kRows = 16;
  std::vector<float> buffer(kRows * k);
  for (uint64_t row0 = 0; row0 < n; row0 += kRows) {
    const uint64_t rows = std::min(kRows, n - row0);
    gatherRows(src, srcIsKN, n, k, row0, rows, buffer.data());
    pack(row0, rows, buffer.data());
  }
}

} // namespace

void packLinearBf16Rows(const float *rows, uint64_t n, uint64_t k, uint64_t row0, uint64_t count,
                        uint16_t *panels) {
  const LinearBf16N16K2 layout{n, k};
  const uint64_t blocks = (count + LinearBf16N16K2::kBlockColumns - 1) / LinearBf16N16K2::kBlockColumns;
  std::memset(panels, 0, blocks * layout.blockBytes());
  const uint64_t base = layout.index(row0, 0);
  for (uint64_t r = 0; r < count; ++r)
    for (uint64_t col = 0; col < k; ++col)
      panels[layout.index(row0 + r, col) - base] = floatToBf16(rows[r * k + col]);
}

void packLinearBf16(const float *src, bool srcIsKN, uint64_t n, uint64_t k, uint16_t *dst) {
  const LinearBf16N16K2 layout{n, k};
  forEachBlock(src, srcIsKN, n, k, [&](uint64_t row0, uint64_t rows, const float *block) {
    packLinearBf16Rows(block, n, k, row0, rows, dst + layout.index(row0, 0));
  });
}

void unpackLinearBf16Row(const uint16_t *packed, uint64_t n, uint64_t k, uint64_t row, float *out) {
  const LinearBf16N16K2 layout{n, k};
  const uint16_t *pair = packed + layout.index(row, 0);
  // Consecutive pairs of one column are one line (32 elements) apart.
  for (uint64_t p = 0; p < k / 2; ++p) {
    out[2 * p] = bf16ToFloat(pair[p * 32]);
    out[2 * p + 1] = bf16ToFloat(pair[p * 32 + 1]);
  }
  if (k % 2)
    out[k - 1] = bf16ToFloat(pair[(k / 2) * 32]);
}

bool LinearInt8N16K4::segmentSizeChecked(uint64_t n, uint64_t k, uint64_t &bytes) {
  // Each factor is below 2^64 / 16 when n and k are below 2^58; beyond, refuse.
  constexpr uint64_t kLimit = uint64_t{1} << 58;
  if (n >= kLimit || k >= kLimit)
    return false;
  const LinearInt8N16K4 layout{n, k};
  uint64_t packed, tables;
  if (__builtin_mul_overflow(layout.blocks(), layout.blockBytes(), &packed) ||
      __builtin_mul_overflow(layout.paddedColumns(), uint64_t{8}, &tables))
    return false;
  return !__builtin_add_overflow(packed, tables, &bytes);
}

void quantizeLinearInt8Segment(const float *src, bool srcIsKN, uint64_t n, uint64_t k,
                               uint8_t *segment) {
  const LinearInt8N16K4 layout{n, k};
  quantizeLinearInt8(src, srcIsKN, n, k, reinterpret_cast<int8_t *>(segment),
                     reinterpret_cast<float *>(segment + layout.scaleOffset()),
                     reinterpret_cast<int32_t *>(segment + layout.columnSumOffset()));
}

void quantizeLinearInt8Rows(const float *rows, uint64_t n, uint64_t k, uint64_t row0,
                            uint64_t count, int8_t *panels, float *scale, int32_t *columnSum) {
  const LinearInt8N16K4 layout{n, k};
  const uint64_t padded = (count + LinearInt8N16K4::kBlockColumns - 1) / 16 * 16;
  std::memset(panels, 0, padded / 16 * layout.blockBytes());
  const uint64_t base = layout.index(row0, 0);
  for (uint64_t r = 0; r < padded; ++r) {
    scale[r] = 0.0f;
    columnSum[r] = 0;
    if (r >= count)
      continue;
    const float *row = rows + r * k;
    float largest = 0.0f;
    for (uint64_t col = 0; col < k; ++col)
      largest = std::max(largest, std::fabs(row[col]));
    if (largest == 0.0f)
      continue;
    scale[r] = largest / 127.0f;
    const float inverse = 127.0f / largest;
    int32_t sum = 0;
    for (uint64_t col = 0; col < k; ++col) {
      const float q = std::nearbyint(row[col] * inverse);
      const int8_t value = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
      panels[layout.index(row0 + r, col) - base] = value;
      sum += value;
    }
    columnSum[r] = sum;
  }
}

void quantizeLinearInt8(const float *src, bool srcIsKN, uint64_t n, uint64_t k, int8_t *dst,
                        float *scale, int32_t *columnSum) {
  const LinearInt8N16K4 layout{n, k};
  if (n == 0)
    return;
  forEachBlock(src, srcIsKN, n, k, [&](uint64_t row0, uint64_t rows, const float *block) {
    quantizeLinearInt8Rows(block, n, k, row0, rows, dst + layout.index(row0, 0), scale + row0,
                           columnSum + row0);
  });
}

void unpackLinearInt8Row(const uint8_t *segment, uint64_t n, uint64_t k, uint64_t row, float *out) {
  const LinearInt8N16K4 layout{n, k};
  const float scale = reinterpret_cast<const float *>(segment + layout.scaleOffset())[row];
  for (uint64_t col = 0; col < k; ++col)
    out[col] = static_cast<float>(static_cast<int8_t>(segment[layout.index(row, col)])) * scale;
}

void unpackLinearInt4Row(const uint8_t *segment, uint64_t n, uint64_t k, uint64_t group,
                         uint64_t row, float *out) {
  const LinearInt4N16K8 layout{n, k, group};
  const float *scales = reinterpret_cast<const float *>(segment + layout.scaleOffset());
  const uint8_t *zeroPoints = segment + layout.zeroPointOffset();
  for (uint64_t col = 0; col < k; ++col) {
    const uint64_t g = layout.groupIndex(row, col / group);
    const int u = (segment[layout.byteIndex(row, col)] >> LinearInt4N16K8::nibbleShift(col)) & 0x0F;
    out[col] = static_cast<float>(u - zeroPoints[g]) * scales[g];
  }
}

bool LinearInt4N16K8::segmentSizeChecked(uint64_t n, uint64_t k, uint64_t group, uint64_t &bytes) {
  // Below 2^58, n + 15 and k + group - 1 cannot overflow; the products are checked.
  constexpr uint64_t kLimit = uint64_t{1} << 58;
  if (!validGroup(group) || n >= kLimit || k >= kLimit)
    return false;
  const LinearInt4N16K8 layout{n, k, group};
  uint64_t packed, perBlock, tables, tableBytes;
  if (__builtin_mul_overflow(layout.kOcts(), kOctBytes, &perBlock) ||
      __builtin_mul_overflow(layout.blocks(), perBlock, &packed) ||
      __builtin_mul_overflow(layout.paddedColumns(), layout.groups(), &tables) ||
      __builtin_mul_overflow(tables, uint64_t{sizeof(float) + 1}, &tableBytes))
    return false;
  return !__builtin_add_overflow(packed, tableBytes, &bytes);
}

void quantizeLinearInt4Rows(const float *rows, uint64_t n, uint64_t k, uint64_t group,
                            bool symmetric, uint64_t row0, uint64_t count, uint8_t *panels,
                            float *scales, uint8_t *zeroPoints) {
  const LinearInt4N16K8 layout{n, k, group};
  const uint64_t blocks = (count + LinearInt4N16K8::kBlockColumns - 1) / 16;
  // Everything starts as padding: u = 0, scale 0, zp 0.
  std::memset(panels, 0, blocks * layout.blockBytes());
  std::memset(scales, 0, blocks * 16 * layout.groups() * sizeof(float));
  std::memset(zeroPoints, 0, blocks * 16 * layout.groups());
  const uint64_t base = layout.byteIndex(row0, 0), tableBase = layout.groupIndex(row0, 0);
  for (uint64_t r = 0; r < count; ++r) {
    const float *row = rows + r * k;
    for (uint64_t g = 0; g < layout.groups(); ++g) {
      const uint64_t begin = g * group, end = std::min(k, begin + group);
      float scale, zp;
      if (symmetric) {
        float largest = 0.0f;
        for (uint64_t col = begin; col < end; ++col)
          largest = std::max(largest, std::fabs(row[col]));
        scale = largest / 7.0f;
        zp = 8.0f;
      } else {
        float lo = 0.0f, hi = 0.0f;
        for (uint64_t col = begin; col < end; ++col) {
          lo = std::min(lo, row[col]);
          hi = std::max(hi, row[col]);
        }
        scale = (hi - lo) / 15.0f;
        zp = scale == 0.0f ? 0.0f : std::clamp(std::nearbyint(-lo / scale), 0.0f, 15.0f);
      }
      scales[layout.groupIndex(row0 + r, g) - tableBase] = scale;
      zeroPoints[layout.groupIndex(row0 + r, g) - tableBase] = static_cast<uint8_t>(zp);
      for (uint64_t col = begin; col < end; ++col) {
        const float u =
            scale == 0.0f ? zp : std::clamp(std::nearbyint(row[col] / scale) + zp, 0.0f, 15.0f);
        panels[layout.byteIndex(row0 + r, col) - base] |=
            static_cast<uint8_t>(static_cast<unsigned>(u) << LinearInt4N16K8::nibbleShift(col));
      }
    }
  }
}

void quantizeLinearInt4Segment(const float *src, bool srcIsKN, uint64_t n, uint64_t k,
                               uint64_t group, bool symmetric, uint8_t *segment) {
  const LinearInt4N16K8 layout{n, k, group};
  std::memset(segment, 0, layout.segmentBytes());
  auto *scales = reinterpret_cast<float *>(segment + layout.scaleOffset());
  uint8_t *zeroPoints = segment + layout.zeroPointOffset();
  forEachBlock(src, srcIsKN, n, k, [&](uint64_t row0, uint64_t rows, const float *block) {
    quantizeLinearInt4Rows(block, n, k, group, symmetric, row0, rows,
                           segment + layout.byteIndex(row0, 0),
                           scales + layout.groupIndex(row0, 0),
                           zeroPoints + layout.groupIndex(row0, 0));
  });
}

} // namespace hetc
