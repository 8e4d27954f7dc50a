#include "codegen/cpu/linear/LinearInt4.h"

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

namespace {

size_t granulesOf(size_t k) { return (k + kInt4GranuleK - 1) / kInt4GranuleK; }

// S[r][g]: the row's granule sums that group g covers (the last group may cover fewer).
inline int32_t groupSum(const int32_t *sums, size_t granules, size_t group, size_t g) {
  const size_t perGroup = group / kInt4GranuleK;
  const size_t end = std::min(granules, (g + 1) * perGroup);
  int32_t s = 0;
  for (size_t j = g * perGroup; j < end; ++j)
    s += sums[j];
  return s;
}

} // namespace

void quantizeRowsInt8Signed(const float *x, size_t xStride, size_t rows, size_t k, int8_t *xq,
                            size_t stride, float *rowScale, int32_t *granuleSums,
                            size_t sumsStride) {
  const size_t granules = granulesOf(k);
  for (size_t r = 0; r < rows; ++r) {
    const float *row = x + r * xStride;
    int8_t *out = xq + r * stride;
    int32_t *sums = granuleSums + r * sumsStride;
    float largest = 0.0f;
    for (size_t i = 0; i < k; ++i)
      largest = std::max(largest, std::fabs(row[i]));
    std::memset(out, 0, stride);
    std::fill(sums, sums + granules, 0);
    rowScale[r] = largest / 127.0f;
    if (largest == 0.0f)
      continue;
    const float inverse = 127.0f / largest;
    for (size_t i = 0; i < k; ++i) {
      const float q = std::clamp(std::nearbyint(row[i] * inverse), -127.0f, 127.0f);
      out[i] = static_cast<int8_t>(q);
      sums[i / kInt4GranuleK] += out[i];
    }
  }
}

namespace {

// Lanes [i, i + 16) that are below k.
inline __mmask16 tailMask(size_t k, size_t i) {
  if (i >= k)
    return 0;
  return static_cast<__mmask16>(k - i >= 16 ? 0xffff : (1u << (k - i)) - 1);
}

// 16 values of the row scaled, rounded half to even (as std::nearbyint in the default rounding
// mode) and clamped: the lanes outside `m` are 0.
__attribute__((target("avx512f,avx512bw"))) inline __m512i quantize16(const float *p, __mmask16 m,
                                                                      __m512 inverse) {
  const __m512 q = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, p), inverse),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_cvtps_epi32(
      _mm512_min_ps(_mm512_max_ps(q, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f)));
}

} // namespace

__attribute__((target("avx512f,avx512bw"))) void
quantizeRowsInt8SignedAvx512(const float *x, size_t xStride, size_t rows, size_t k, int8_t *xq,
                             size_t stride, float *rowScale, int32_t *granuleSums,
                             size_t sumsStride) {
  const size_t granules = granulesOf(k);
  for (size_t r = 0; r < rows; ++r) {
    const float *row = x + r * xStride;
    int8_t *out = xq + r * stride;
    int32_t *sums = granuleSums + r * sumsStride;
    __m512 largest = _mm512_setzero_ps();
    for (size_t i = 0; i < k; i += 16)
      largest =
          _mm512_max_ps(largest, _mm512_abs_ps(_mm512_maskz_loadu_ps(tailMask(k, i), row + i)));
    const float maxAbs = _mm512_reduce_max_ps(largest);
    std::memset(out, 0, stride);
    rowScale[r] = maxAbs / 127.0f;
    if (maxAbs == 0.0f) {
      std::fill(sums, sums + granules, 0);
      continue;
    }
    const __m512 inverse = _mm512_set1_ps(127.0f / maxAbs);
    // A granule is one zmm of 16 floats (kInt4GranuleK): its sum is that vector's.
    static_assert(kInt4GranuleK == 16);
    for (size_t j = 0; j < granules; ++j) {
      const size_t i = j * kInt4GranuleK;
      const __mmask16 m = tailMask(k, i);
      const __m512i q = quantize16(row + i, m, inverse);
      _mm512_mask_cvtepi32_storeu_epi8(out + i, m, q);
      sums[j] = _mm512_reduce_add_epi32(q);
    }
  }
}

const Implementation<QuantizeRowsInt8SignedFn> &pickQuantizeRowsInt8Signed(uint64_t cpuFeatures) {
  static const Implementation<QuantizeRowsInt8SignedFn> kList[] = {
      {"QuantizeRowsInt8SignedAvx512", kCpuAvx512F | kCpuAvx512BW, quantizeRowsInt8SignedAvx512},
      {"QuantizeRowsInt8SignedPortable", 0, quantizeRowsInt8Signed},
  };
  return pickImplementation(kList, cpuFeatures);
}

void linearInt4Portable(const LinearInt4Call &call) {
  const LinearInt4N16K8 layout{call.n, call.k, call.group};
  const float *scales = reinterpret_cast<const float *>(call.w + layout.scaleOffset());
  const uint8_t *zeroPoints = call.w + layout.zeroPointOffset();
  const size_t groups = layout.groups(), granules = granulesOf(call.k);
  for (size_t r = 0; r < call.rows; ++r) {
    const int8_t *xq = call.xq + r * call.stride;
    const int32_t *sums = call.granuleSums + r * call.sumsStride;
    for (size_t n = call.colBegin; n < call.colEnd; ++n) {
      float acc = 0.0f;
      for (size_t g = 0; g < groups; ++g) {
        const size_t begin = g * call.group, end = std::min(call.k, begin + call.group);
        int32_t dot = 0;
        for (size_t i = begin; i < end; ++i) {
          const int32_t u =
              (call.w[layout.byteIndex(n, i)] >> LinearInt4N16K8::nibbleShift(i)) & 0x0F;
          dot += static_cast<int32_t>(xq[i]) * u;
        }
        dot -= static_cast<int32_t>(zeroPoints[layout.groupIndex(n, g)]) *
               groupSum(sums, granules, call.group, g);
        acc = std::fma(static_cast<float>(dot), scales[layout.groupIndex(n, g)], acc);
      }
      float y = acc * call.rowScale[r];
      if (call.residual)
        y += call.residual[r * call.residualStride + n];
      call.y[r * call.yStride + n] = y;
    }
  }
}

namespace {

// Software prefetch distances along each block's weight lines (as LinearAvx512Bf16's default),
// and its scales and zero points (64 and 16 bytes a group): with them, cold weights at 1 to 16
// rows were read about 1.1 to 1.8 times faster than with the hardware prefetcher alone (2
// threads, each pass reading several blocks' panels and tables at once).
constexpr size_t kPrefetchBytes = 2048;
constexpr size_t kPrefetchScales = 8 * 16;      // floats: 8 groups ahead
constexpr size_t kPrefetchZeroPoints = 32 * 16; // bytes: 32 groups ahead

// K quads per granule sum.
constexpr size_t kGranuleQuads = kInt4GranuleK / 4;

// What every pass over the weights needs, derived once per call.
struct Int4Geometry {
  const uint8_t *packed;
  const float *scales;
  const uint8_t *zeroPoints;
  size_t blockBytes;
  size_t groups;
  size_t quads;         // valid K quads: ceil(k / 4)
  size_t quadsPerGroup; // group / 4
  size_t granules;      // ceil(k / kInt4GranuleK)
};

// One group of rows [r0, r0 + R) over B consecutive 16-column blocks (the first block's index
// `block`): `quads` valid K quads from quad q0, covered by `granules` granule sums from granule
// j0. Each row's int32 accumulators start at -zp * S (vpmaddwd of the zero points, widened to
// dwords, with -S; both fit int16), then one line of each block per K oct gives two vpdpbusd per
// row and block (its low and its high nibbles against the row's two broadcast quads); the
// group's sums go to float and into the row's float accumulators with one fused multiply-add by
// the scales. Each weight line read prefetches the one `ahead` bytes further. Inlined with
// constant `quads` and `granules` for the full groups.
template <int R, int B>
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) inline void
groupStep(const Int4Geometry &geo, const int8_t *const *xq, const int32_t *const *granuleSums,
          size_t block, size_t ahead, size_t g, size_t quads, size_t granules,
          __m512 (&sum)[B][R]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const size_t q0 = g * geo.quadsPerGroup, j0 = g * (geo.quadsPerGroup / kGranuleQuads);
  const size_t table = (block * geo.groups + g) * 16; // block b's is groups * 16 further
  for (int b = 0; b < B; ++b) {
    _mm_prefetch(
        reinterpret_cast<const char *>(geo.scales + table + b * geo.groups * 16 + kPrefetchScales),
        _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char *>(geo.zeroPoints + table + b * geo.groups * 16 +
                                                kPrefetchZeroPoints),
                 _MM_HINT_T0);
  }
  __m512i acc[B][R];
  {
    __m512i zp[B];
    for (int b = 0; b < B; ++b)
      zp[b] = _mm512_cvtepu8_epi32(_mm_loadu_si128(
          reinterpret_cast<const __m128i *>(geo.zeroPoints + table + b * geo.groups * 16)));
    for (int i = 0; i < R; ++i) {
      int32_t groupSum = 0;
      for (size_t j = 0; j < granules; ++j)
        groupSum += granuleSums[i][j0 + j];
      const __m512i negS = _mm512_set1_epi32(-groupSum);
      for (int b = 0; b < B; ++b)
        acc[b][i] = _mm512_madd_epi16(zp[b], negS);
    }
  }
  const uint8_t *lines = geo.packed + block * geo.blockBytes + (q0 / 2) * 64;
  size_t o = 0;
  for (; 2 * o + 2 <= quads; ++o) {
    __m512i lo[B], hi[B];
    for (int b = 0; b < B; ++b) {
      const uint8_t *line = lines + b * geo.blockBytes + o * 64;
      _mm_prefetch(reinterpret_cast<const char *>(line + ahead), _MM_HINT_T0);
      const __m512i v = _mm512_loadu_si512(line);
      lo[b] = _mm512_and_si512(v, low4);
      hi[b] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
    for (int i = 0; i < R; ++i) {
      int32_t first, second;
      std::memcpy(&first, xq[i] + (q0 + 2 * o) * 4, 4);
      std::memcpy(&second, xq[i] + (q0 + 2 * o) * 4 + 4, 4);
      const __m512i xa = _mm512_set1_epi32(first), xb = _mm512_set1_epi32(second);
      for (int b = 0; b < B; ++b) {
        acc[b][i] = _mm512_dpbusd_epi32(acc[b][i], lo[b], xa);
        acc[b][i] = _mm512_dpbusd_epi32(acc[b][i], hi[b], xb);
      }
    }
  }
  if (2 * o < quads) { // the last group's odd quad: its line's high nibbles are padding
    __m512i lo[B];
    for (int b = 0; b < B; ++b)
      lo[b] = _mm512_and_si512(_mm512_loadu_si512(lines + b * geo.blockBytes + o * 64), low4);
    for (int i = 0; i < R; ++i) {
      int32_t first;
      std::memcpy(&first, xq[i] + (q0 + 2 * o) * 4, 4);
      const __m512i xa = _mm512_set1_epi32(first);
      for (int b = 0; b < B; ++b)
        acc[b][i] = _mm512_dpbusd_epi32(acc[b][i], lo[b], xa);
    }
  }
  for (int b = 0; b < B; ++b) {
    const __m512 scale = _mm512_loadu_ps(geo.scales + table + b * geo.groups * 16);
    for (int i = 0; i < R; ++i)
      sum[b][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[b][i]), scale, sum[b][i]);
  }
}

// Rows [r0, r0 + R) over B consecutive 16-column blocks from column `column`, every group; Q is
// the group's K quads (group / 4), so that the full groups' loops are unrolled.
template <int R, int B, int Q>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
blocksRows(const LinearInt4Call &call, const Int4Geometry &geo, size_t column, size_t ahead,
           size_t r0) {
  __m512 sum[B][R];
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < R; ++i)
      sum[b][i] = _mm512_setzero_ps();
  const int8_t *xq[R];
  const int32_t *granuleSums[R];
  for (int i = 0; i < R; ++i) {
    xq[i] = call.xq + (r0 + i) * call.stride;
    granuleSums[i] = call.granuleSums + (r0 + i) * call.sumsStride;
  }
  const size_t block = column / 16;
  // A group is full when all its quads are valid; only the last one may not be.
  const size_t fullGroups = geo.quads / Q;
  for (size_t g = 0; g < fullGroups; ++g)
    groupStep<R, B>(geo, xq, granuleSums, block, ahead, g, Q, Q / kGranuleQuads, sum);
  if (fullGroups < geo.groups)
    groupStep<R, B>(geo, xq, granuleSums, block, ahead, fullGroups, geo.quads - fullGroups * Q,
                    geo.granules - fullGroups * (Q / kGranuleQuads), sum);
  for (int b = 0; b < B; ++b) {
    const size_t first = column + 16 * b;
    const size_t width = std::min<size_t>(16, call.colEnd - first);
    const __mmask16 store = static_cast<__mmask16>((1u << width) - 1);
    for (int i = 0; i < R; ++i) {
      __m512 y = _mm512_mul_ps(sum[b][i], _mm512_set1_ps(call.rowScale[r0 + i]));
      if (call.residual)
        y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(
                                 store, call.residual + (r0 + i) * call.residualStride + first));
      _mm512_mask_storeu_ps(call.y + (r0 + i) * call.yStride + first, store, y);
    }
  }
}

// Every row over B blocks: RMax rows at a time, then the rest. The blocks' panels stay in L1/L2
// while the next rows read them again.
template <int B, int RMax, int Q>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
blocksAllRows(const LinearInt4Call &call, const Int4Geometry &geo, size_t column) {
  // The weight lines to prefetch: kPrefetchBytes further along each block's panel when one pass
  // takes every row; otherwise the same line of the next pass's blocks, so that the memory works
  // while the later passes compute on the lines the first one brought in.
  const size_t ahead = call.rows > RMax ? B * geo.blockBytes : kPrefetchBytes;
  size_t r = 0;
  for (; r + RMax <= call.rows; r += RMax)
    blocksRows<RMax, B, Q>(call, geo, column, ahead, r);
  switch (call.rows - r) {
  case 3:
    blocksRows<3, B, Q>(call, geo, column, ahead, r);
    break;
  case 2:
    blocksRows<2, B, Q>(call, geo, column, ahead, r);
    break;
  case 1:
    blocksRows<1, B, Q>(call, geo, column, ahead, r);
    break;
  default:
    break;
  }
}

// Every column of the call with groups of 4 * Q k.
template <int Q>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void allColumns(const LinearInt4Call &call,
                                                                       const Int4Geometry &geo) {
  size_t column = call.colBegin;
  // Up to 2 rows, four blocks' weight streams at once (16 accumulators); more rows share each
  // line's unpacking 4 rows at a time over two blocks (16 accumulators too).
  if (call.rows <= 2)
    for (; column + 64 <= call.colEnd; column += 64)
      blocksAllRows<4, 2, Q>(call, geo, column);
  for (; column + 32 <= call.colEnd; column += 32)
    blocksAllRows<2, 4, Q>(call, geo, column);
  for (; column < call.colEnd; column += 16)
    blocksAllRows<1, 4, Q>(call, geo, column);
}

} // namespace

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
linearInt4Avx512Vnni(const LinearInt4Call &call) {
  const LinearInt4N16K8 layout{call.n, call.k, call.group};
  const Int4Geometry geo{call.w,
                         reinterpret_cast<const float *>(call.w + layout.scaleOffset()),
                         call.w + layout.zeroPointOffset(),
                         layout.blockBytes(),
                         layout.groups(),
                         (call.k + 3) / 4,
                         call.group / 4,
                         granulesOf(call.k)};
  switch (call.group) {
  case 16:
    allColumns<4>(call, geo);
    break;
  case 32:
    allColumns<8>(call, geo);
    break;
  case 64:
    allColumns<16>(call, geo);
    break;
  case 128:
    allColumns<32>(call, geo);
    break;
  default: // no plan holds another group (LinearInt4N16K8::validGroup); still write the window
    linearInt4Portable(call);
    break;
  }
}

#pragma GCC diagnostic pop

const Implementation<LinearInt4Fn> &pickLinearInt4(uint64_t cpuFeatures) {
  static const Implementation<LinearInt4Fn> kList[] = {
      {"LinearInt4Avx512Vnni", kCpuAvx512F | kCpuAvx512BW | kCpuAvx512Vnni, linearInt4Avx512Vnni},
      {"LinearInt4Portable", 0, linearInt4Portable},
  };
  return pickImplementation(kList, cpuFeatures);
}

} // namespace hetc::codegen
