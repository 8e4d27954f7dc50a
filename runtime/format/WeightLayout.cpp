#include "runtime/format/WeightLayout.h"

#include "runtime/format/Bf16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

void packLinearBf16(const float *src, bool srcIsKN, uint64_t n, uint64_t k, uint16_t *dst) {
  const LinearBf16N16K2 layout{n, k};
  std::memset(dst, 0, layout.bytes());
  // Walk the source in its own order (sequential reads); the writes stay within one block panel
  // per source row for [N, K], or stride across panels for [K, N].
  for (uint64_t a = 0; a < (srcIsKN ? k : n); ++a) {
    const float *row = src + a * (srcIsKN ? n : k);
    for (uint64_t b = 0; b < (srcIsKN ? n : k); ++b) {
      const uint64_t row_n = srcIsKN ? b : a, col_k = srcIsKN ? a : b;
      dst[layout.index(row_n, col_k)] = floatToBf16(row[b]);
    }
  }
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

void quantizeLinearInt8(const float *src, bool srcIsKN, uint64_t n, uint64_t k, int8_t *dst,
                        float *scale, int32_t *columnSum) {
  const LinearInt8N16K4 layout{n, k};
  std::memset(dst, 0, layout.bytes());
  auto at = [&](uint64_t row, uint64_t col) {
    return srcIsKN ? src[col * n + row] : src[row * k + col];
  };
  for (uint64_t row = 0; row < layout.paddedColumns(); ++row) {
    scale[row] = 0.0f;
    columnSum[row] = 0;
    if (row >= n)
      continue;
    float largest = 0.0f;
    for (uint64_t col = 0; col < k; ++col)
      largest = std::max(largest, std::fabs(at(row, col)));
    if (largest == 0.0f)
      continue;
    scale[row] = largest / 127.0f;
    const float inverse = 127.0f / largest;
    int32_t sum = 0;
    for (uint64_t col = 0; col < k; ++col) {
      const float q = std::nearbyint(at(row, col) * inverse);
      const int8_t value = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
      dst[layout.index(row, col)] = value;
      sum += value;
    }
    columnSum[row] = sum;
  }
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

void quantizeLinearInt4Segment(const float *src, bool srcIsKN, uint64_t n, uint64_t k,
                               uint64_t group, bool symmetric, uint8_t *segment) {
  const LinearInt4N16K8 layout{n, k, group};
  // Everything starts as padding: u = 0, scale 0, zp 0.
  std::memset(segment, 0, layout.segmentBytes());
  float *scales = reinterpret_cast<float *>(segment + layout.scaleOffset());
  uint8_t *zeroPoints = segment + layout.zeroPointOffset();
  auto at = [&](uint64_t row, uint64_t col) {
    return srcIsKN ? src[col * n + row] : src[row * k + col];
  };
  for (uint64_t row = 0; row < n; ++row)
    for (uint64_t g = 0; g < layout.groups(); ++g) {
      const uint64_t begin = g * group, end = std::min(k, begin + group);
      float scale, zp;
      if (symmetric) {
        float largest = 0.0f;
        for (uint64_t col = begin; col < end; ++col)
          largest = std::max(largest, std::fabs(at(row, col)));
        scale = largest / 7.0f;
        zp = 8.0f;
      } else {
        float lo = 0.0f, hi = 0.0f;
        for (uint64_t col = begin; col < end; ++col) {
          lo = std::min(lo, at(row, col));
          hi = std::max(hi, at(row, col));
        }
        scale = (hi - lo) / 15.0f;
        zp = scale == 0.0f ? 0.0f : std::clamp(std::nearbyint(-lo / scale), 0.0f, 15.0f);
      }
      scales[layout.groupIndex(row, g)] = scale;
      zeroPoints[layout.groupIndex(row, g)] = static_cast<uint8_t>(zp);
      for (uint64_t col = begin; col < end; ++col) {
        const float u =
            scale == 0.0f ? zp : std::clamp(std::nearbyint(at(row, col) / scale) + zp, 0.0f, 15.0f);
        segment[layout.byteIndex(row, col)] |=
            static_cast<uint8_t>(static_cast<unsigned>(u) << LinearInt4N16K8::nibbleShift(col));
      }
    }
}

} // namespace hetc
