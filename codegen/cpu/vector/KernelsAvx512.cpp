// AVX-512 (F and BW) versions of the row-wise kernels and of the attention chunk kernel over
// float32 rows (bf16 and int8 blocks: AttentionBf16Blocks.inl).
//
// Every function here carries its own target attribute, so the file builds for baseline x86-64
// and none of its code runs unless the engine picked this set on a host with AVX-512. Inline
// functions are internal and carry the attribute too: no AVX-512 code can reach another
// translation unit through a shared inline function.
#include "codegen/cpu/vector/VectorKernels.h"

#include "codegen/cpu/attention/AttentionBf16Blocks.h"

#if defined(__x86_64__)

// GCC 12's AVX-512 headers build some intrinsics from deliberately undefined values, which
// -Wall reports wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#define HETC_AVX512 __attribute__((target("avx512f,avx512bw")))

namespace hetc::kernels {
namespace {

constexpr size_t kLanes = 16;
constexpr __mmask16 kAllLanes = 0xffff;

HETC_AVX512 inline __mmask16 firstLanes(size_t count) {
  return count >= kLanes ? kAllLanes : static_cast<__mmask16>((1u << count) - 1);
}

// exp(x) as 2^n * p(r), n = round(x / ln 2), r = x - n ln 2 in two parts, p Cephes' expf
// polynomial: within 2 ulp of std::exp. Below -104 it gives 0 (or the smallest subnormal), above
// 104 infinity; NaN stays NaN.
HETC_AVX512 inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(104.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(y, n);
}

// Sum of the 16 lanes in a fixed tree.
HETC_AVX512 inline float sumLanes(__m512 v) {
  const __m256 low = _mm512_castps512_ps256(v);
  const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  const __m256 s8 = _mm256_add_ps(low, high);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

// Lane p of the result is the sum of the 16 lanes of v[p], in a fixed tree: pairs of lanes
// within 128-bit blocks first, then the four blocks.
HETC_AVX512 inline __m512 sumEachOf16(const __m512 *v) {
  __m512 t[8], u[4];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[2 * i]), b = _mm512_castps_pd(t[2 * i + 1]);
    u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 w0 =
      _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xdd));
  const __m512 w1 =
      _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, 0x88), _mm512_shuffle_f32x4(w0, w1, 0xdd));
}

// ---- Attention -------------------------------------------------------------------------------

// Query heads processed together per pass over a chunk; a larger group (multi-query attention)
// takes several passes, the later ones reading the chunk from cache.
constexpr size_t kHeadBatch = 16;
// Blocks of 16 positions between a block and the rows its loop prefetches.
constexpr size_t kPrefetchBlocks = 1;

// acc[h][dims] += sum_{j < n} weights[h][j] * values[j][dims] for H heads and V vectors of 16
// dims, the accumulators held in registers across the block.
template <int H, int V>
HETC_AVX512 void accumulateValues(float *const *acc, const float *weights, const float *values,
                                  size_t posStride, size_t n, const __mmask16 *masks) {
  // Fixed-count loops are unrolled explicitly: only then does GCC keep the arrays in registers
  // instead of storing every accumulator on each iteration.
  __m512 a[H][V];
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      a[h][v] = _mm512_maskz_loadu_ps(masks[v], acc[h] + v * kLanes);
  for (size_t j = 0; j < n; ++j) {
    const float *row = values + j * posStride;
    __m512 x[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      x[v] = _mm512_maskz_loadu_ps(masks[v], row + v * kLanes);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const __m512 w = _mm512_set1_ps(weights[h * kLanes + j]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        a[h][v] = _mm512_fmadd_ps(w, x[v], a[h][v]);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      _mm512_mask_storeu_ps(acc[h] + v * kLanes, masks[v], a[h][v]);
}

using AccumulateValuesFn = void (*)(float *const *, const float *, const float *, size_t, size_t,
                                    const __mmask16 *);

// Tiles of up to 4 heads x 4 vectors: 16 accumulators, 4 value vectors and a broadcast fit the
// 32 registers.
constexpr int kTileHeads = 4;
constexpr int kTileVectors = 4;

const AccumulateValuesFn kAccumulateTiles[kTileHeads][kTileVectors] = {
    {accumulateValues<1, 1>, accumulateValues<1, 2>, accumulateValues<1, 3>,
     accumulateValues<1, 4>},
    {accumulateValues<2, 1>, accumulateValues<2, 2>, accumulateValues<2, 3>,
     accumulateValues<2, 4>},
    {accumulateValues<3, 1>, accumulateValues<3, 2>, accumulateValues<3, 3>,
     accumulateValues<3, 4>},
    {accumulateValues<4, 1>, accumulateValues<4, 2>, accumulateValues<4, 3>,
     accumulateValues<4, 4>},
};

HETC_AVX512 inline void prefetchRow(const void *row, size_t bytes) {
  const char *p = static_cast<const char *>(row);
  for (size_t offset = 0; offset < bytes; offset += 64)
    _mm_prefetch(p + offset, _MM_HINT_T0);
}

// partial[j] holds the 16 lane sums of the dot product of query head qh with key row
// min(j, last) of the block starting at `rows`. NV > 0: the head has exactly NV vectors of 16
// dims (the last one masked) and sits in registers; NV = 0: any number, read from the cache.
// Full blocks (Tail false) walk the rows with a running pointer.
template <int NV, bool Tail>
HETC_AVX512 inline void keyDots(const float *qh, const float *rows, size_t posStride, size_t last,
                                size_t vectors, __mmask16 lastMask, __m512 *partial) {
  if constexpr (NV > 0) {
    __m512 qv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      qv[v] = _mm512_maskz_loadu_ps(v + 1 == NV ? lastMask : kAllLanes, qh + v * kLanes);
    const float *row = rows;
    // Opaque to the optimiser: otherwise GCC hoists the 16 x NV row addresses out of the caller's
    // head loop and spills them, which costs more than the adds it saves.
    __asm__("" : "+r"(row));
#pragma GCC unroll 16
    for (size_t j = 0; j < kLanes; ++j) {
      if constexpr (Tail)
        row = rows + std::min(j, last) * posStride;
      __m512 sum = _mm512_mul_ps(qv[0], _mm512_maskz_loadu_ps(NV == 1 ? lastMask : kAllLanes, row));
#pragma GCC unroll 8
      for (int v = 1; v < NV; ++v)
        sum = _mm512_fmadd_ps(
            qv[v], _mm512_maskz_loadu_ps(v + 1 == NV ? lastMask : kAllLanes, row + v * kLanes),
            sum);
      partial[j] = sum;
      if constexpr (!Tail)
        row += posStride;
    }
  } else {
    for (size_t v = 0; v < vectors; ++v) {
      const __mmask16 mask = v + 1 == vectors ? lastMask : kAllLanes;
      const __m512 qv = _mm512_maskz_loadu_ps(mask, qh + v * kLanes);
#pragma GCC unroll 16
      for (size_t j = 0; j < kLanes; ++j) {
        const float *row = rows + (Tail ? std::min(j, last) : j) * posStride;
        const __m512 product = _mm512_mul_ps(qv, _mm512_maskz_loadu_ps(mask, row + v * kLanes));
        partial[j] = v == 0 ? product : _mm512_add_ps(partial[j], product);
      }
    }
  }
}

// cap * tanh(s / cap) with tanh|y| = (1 - e) / (1 + e), e = exp(-2|y|) (exp512), the sign of y
// restored: within about 4e-7 * cap of std::tanh's (absolute; e's rounding, cancelling in 1 - e
// near 0), which moves a softmax weight by a relative 4e-7 * cap.
HETC_AVX512 inline __m512 softCap512(__m512 s, float cap) {
  const __m512 y = _mm512_div_ps(s, _mm512_set1_ps(cap));
  const __m512 e = exp512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), _mm512_abs_ps(y)));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 magnitude = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(y),
                                        _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __m512 t = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(magnitude), sign));
  return _mm512_mul_ps(t, _mm512_set1_ps(cap));
}

// ALiBi's bias of positions j0 .. j0 + 15: s + slope * position, a float32 product and sum as
// the portable kernel's (positions below 2^24 are exact floats).
HETC_AVX512 inline __m512 addPositionBias512(__m512 s, float slope, size_t j0) {
  const __m512 positions = _mm512_add_ps(
      _mm512_set1_ps(static_cast<float>(j0)),
      _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  return _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(slope), positions));
}

// One pass of up to kHeadBatch heads over positions [begin, end). Per block of 16 positions:
// the 16 scores of a head come out of one transposed reduction, the running max moves once per
// block (the output is rescaled only when it grows), and the weights are applied to the value
// rows in register tiles. Lane sums of the weights are reduced once, at the end.
template <int NV>
HETC_AVX512 void attentionHeads(const float *q, const float *keys, const float *values,
                                const float *, const float *, size_t posStride, size_t heads,
                                size_t d, float scale, float softcap, const float *slopes,
                                size_t begin, size_t end, float *state) {
  const size_t vectors = (d + kLanes - 1) / kLanes;
  const __mmask16 lastMask = firstLanes(d - (vectors - 1) * kLanes);
  const size_t rowBytes = d * sizeof(float);
  const float negativeInfinity = -std::numeric_limits<float>::infinity();

  float *acc[kHeadBatch];
  float runningMax[kHeadBatch];
  __m512 laneSums[kHeadBatch];
  alignas(64) float weights[kHeadBatch * kLanes];
  for (size_t h = 0; h < heads; ++h) {
    acc[h] = state + h * (d + 2);
    std::fill(acc[h], acc[h] + d, 0.0f);
    runningMax[h] = negativeInfinity;
    laneSums[h] = _mm512_setzero_ps();
  }
  const __m512 scaleVector = _mm512_set1_ps(scale);

  for (size_t j0 = begin; j0 < end; j0 += kLanes) {
    const size_t n = std::min(kLanes, end - j0);
    const __mmask16 valid = firstLanes(n);
    for (size_t j = j0 + kPrefetchBlocks * kLanes;
         j < std::min(end, j0 + (kPrefetchBlocks + 1) * kLanes); ++j) {
      prefetchRow(keys + j * posStride, rowBytes);
      prefetchRow(values + j * posStride, rowBytes);
    }
    const float *keyRows = keys + j0 * posStride;
    for (size_t h = 0; h < heads; ++h) {
      // Rows past the end repeat the last row: their scores are computed, then masked out.
      __m512 partial[kLanes];
      if (n == kLanes) {
        keyDots<NV, false>(q + h * d, keyRows, posStride, n - 1, vectors, lastMask, partial);
      } else {
        keyDots<NV, true>(q + h * d, keyRows, posStride, n - 1, vectors, lastMask, partial);
      }
      __m512 scores = _mm512_mul_ps(sumEachOf16(partial), scaleVector);
      if (softcap > 0)
        scores = softCap512(scores, softcap);
      if (slopes)
        scores = addPositionBias512(scores, slopes[h], j0);
      scores = _mm512_mask_mov_ps(_mm512_set1_ps(negativeInfinity), valid, scores);
      const float blockMax = _mm512_reduce_max_ps(scores);
      if (blockMax > runningMax[h]) {
        if (runningMax[h] != negativeInfinity) {
          const __m512 correction = exp512(_mm512_set1_ps(runningMax[h] - blockMax));
          for (size_t v = 0; v < vectors; ++v) {
            const __mmask16 mask = v + 1 == vectors ? lastMask : kAllLanes;
            float *at = acc[h] + v * kLanes;
            _mm512_mask_storeu_ps(at, mask,
                                  _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, at), correction));
          }
          laneSums[h] = _mm512_mul_ps(laneSums[h], correction);
        }
        runningMax[h] = blockMax;
      }
      const __m512 w =
          _mm512_maskz_mov_ps(valid, exp512(_mm512_sub_ps(scores, _mm512_set1_ps(runningMax[h]))));
      laneSums[h] = _mm512_add_ps(laneSums[h], w);
      _mm512_store_ps(weights + h * kLanes, w);
    }

    const float *valueRows = values + j0 * posStride;
    for (size_t h = 0; h < heads; h += kTileHeads) {
      const size_t tileHeads = std::min<size_t>(kTileHeads, heads - h);
      for (size_t v = 0; v < vectors; v += kTileVectors) {
        const size_t tileVectors = std::min<size_t>(kTileVectors, vectors - v);
        float *tileAcc[kTileHeads];
        __mmask16 masks[kTileVectors];
        for (size_t i = 0; i < tileHeads; ++i)
          tileAcc[i] = acc[h + i] + v * kLanes;
        for (size_t i = 0; i < tileVectors; ++i)
          masks[i] = v + i + 1 == vectors ? lastMask : kAllLanes;
        kAccumulateTiles[tileHeads - 1][tileVectors - 1](
            tileAcc, weights + h * kLanes, valueRows + v * kLanes, posStride, n, masks);
      }
    }
  }
  for (size_t h = 0; h < heads; ++h) {
    acc[h][d] = runningMax[h];
    acc[h][d + 1] = sumLanes(laneSums[h]);
  }
}

using AttentionHeadsFn = void (*)(const float *, const float *, const float *, const float *,
                                  const float *, size_t, size_t, size_t, float, float,
                                  const float *, size_t, size_t, float *);

// Heads of up to 8 vectors (head_dim <= 128) keep the query in registers; longer ones read it.
AttentionHeadsFn attentionHeadsFor(size_t headDim) {
  switch ((headDim + kLanes - 1) / kLanes) {
  case 1:
    return attentionHeads<1>;
  case 2:
    return attentionHeads<2>;
  case 3:
    return attentionHeads<3>;
  case 4:
    return attentionHeads<4>;
  case 5:
    return attentionHeads<5>;
  case 6:
    return attentionHeads<6>;
  case 7:
    return attentionHeads<7>;
  case 8:
    return attentionHeads<8>;
  default:
    return attentionHeads<0>;
  }
}

HETC_AVX512 void attentionChunkAvx512(const float *q, const float *keys, const float *values,
                                      const float *keyScales, const float *valueScales,
                                      size_t posStride, size_t group, size_t headDim, float scale,
                                      float softcap, const float *slopes, size_t begin, size_t end,
                                      float *state) {
  const AttentionHeadsFn run = attentionHeadsFor(headDim);
  for (size_t h = 0; h < group; h += kHeadBatch)
    run(q + h * headDim, keys, values, keyScales, valueScales, posStride,
        std::min(kHeadBatch, group - h), headDim, scale, softcap, slopes ? slopes + h : nullptr,
        begin, end, state + h * (headDim + 2));
}

// The portable merge's arithmetic on 16-lane vectors, exp512 for the factor.
HETC_AVX512 void attentionMergeAvx512(float *into, const float *next, size_t group,
                                      size_t headDim) {
  const size_t d = headDim;
  for (size_t h = 0; h < group; ++h) {
    float *a = into + h * (d + 2);
    const float *b = next + h * (d + 2);
    const bool keepInto = a[d] >= b[d];
    const __m512 factor = exp512(_mm512_set1_ps(keepInto ? b[d] - a[d] : a[d] - b[d]));
    for (size_t i = 0; i < d; i += kLanes) {
      const __mmask16 mask = firstLanes(d - i);
      const __m512 x = _mm512_maskz_loadu_ps(mask, a + i), y = _mm512_maskz_loadu_ps(mask, b + i);
      _mm512_mask_storeu_ps(
          a + i, mask, keepInto ? _mm512_fmadd_ps(y, factor, x) : _mm512_fmadd_ps(x, factor, y));
    }
    const float scale = _mm512_cvtss_f32(factor);
    a[d + 1] = keepInto ? a[d + 1] + b[d + 1] * scale : a[d + 1] * scale + b[d + 1];
    if (!keepInto)
      a[d] = b[d];
  }
}

// ---- Row-wise kernels ------------------------------------------------------------------------

HETC_AVX512 void embeddingAvx512(const int32_t *tokens, const float *table, size_t hidden,
                                 float *out, size_t outStride, size_t rowBegin, size_t rowEnd) {
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    const float *from = table + static_cast<size_t>(tokens[t]) * hidden;
    float *to = out + t * outStride;
    size_t i = 0;
    for (; i + kLanes <= hidden; i += kLanes)
      _mm512_storeu_ps(to + i, _mm512_loadu_ps(from + i));
    if (i < hidden) {
      const __mmask16 mask = firstLanes(hidden - i);
      _mm512_mask_storeu_ps(to + i, mask, _mm512_maskz_loadu_ps(mask, from + i));
    }
  }
}

// The portable kernel's arithmetic exactly: squares rounded to float, summed in double into 8
// lanes (element i into lane i mod 8, in order), the lanes combined in the same tree.
HETC_AVX512 void rmsNormAvx512(const float *x, size_t xStride, const float *gamma, size_t cols,
                               float eps, float *y, size_t yStride, size_t rowBegin,
                               size_t rowEnd) {
  static_assert(kDotLanes == 8, "the double lanes below mirror the portable kernel's 8 lanes");
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    const float *xr = x + t * xStride;
    float *yr = y + t * yStride;
    __m512d lanes = _mm512_setzero_pd();
    size_t i = 0;
    for (; i + kLanes <= cols; i += kLanes) {
      const __m512 v = _mm512_loadu_ps(xr + i);
      const __m512 square = _mm512_mul_ps(v, v);
      lanes = _mm512_add_pd(lanes, _mm512_cvtps_pd(_mm512_castps512_ps256(square)));
      lanes = _mm512_add_pd(lanes, _mm512_cvtps_pd(_mm256_castpd_ps(
                                       _mm512_extractf64x4_pd(_mm512_castps_pd(square), 1))));
    }
    if (i < cols) {
      // Masked-off elements add +0 to lanes that hold sums of squares: no change.
      const __m512 v = _mm512_maskz_loadu_ps(firstLanes(cols - i), xr + i);
      const __m512 square = _mm512_mul_ps(v, v);
      lanes = _mm512_add_pd(lanes, _mm512_cvtps_pd(_mm512_castps512_ps256(square)));
      if (cols - i > 8)
        lanes = _mm512_add_pd(lanes, _mm512_cvtps_pd(_mm256_castpd_ps(
                                         _mm512_extractf64x4_pd(_mm512_castps_pd(square), 1))));
    }
    alignas(64) double l[8];
    _mm512_store_pd(l, lanes);
    const double sum = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    const float variance = static_cast<float>(sum / static_cast<double>(cols));
    const __m512 inverseRms = _mm512_set1_ps(1.0f / std::sqrt(variance + eps));
    for (i = 0; i < cols; i += kLanes) {
      const __mmask16 mask = firstLanes(cols - i);
      const __m512 v = _mm512_maskz_loadu_ps(mask, xr + i);
      const __m512 g = _mm512_maskz_loadu_ps(mask, gamma + i);
      _mm512_mask_storeu_ps(yr + i, mask, _mm512_mul_ps(g, _mm512_mul_ps(v, inverseRms)));
    }
  }
}

// Sums in 8 double lanes as the portable kernels' kDotLanes lanes take them: element i of a
// vector of 16 floats goes to lane i mod 8, the low 8 (lowPd) before the high 8 (highPd).
HETC_AVX512 inline __m512d addLowHighPd(__m512d lanes, __m512d low, __m512d high) {
  return _mm512_add_pd(_mm512_add_pd(lanes, low), high);
}
HETC_AVX512 inline __m512d lowPd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
HETC_AVX512 inline __m512d highPd(__m512 v) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
HETC_AVX512 inline double reduceLanesPd(__m512d lanes) {
  alignas(64) double l[8];
  _mm512_store_pd(l, lanes);
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

// The portable kernel's arithmetic exactly: both passes in double into 8 lanes (element i into
// lane i mod 8, in order), the lanes combined in the same tree, the row formed in float.
HETC_AVX512 void layerNormAvx512(const float *x, size_t xStride, const float *gamma,
                                 const float *beta, size_t cols, float eps, float *y,
                                 size_t yStride, size_t rowBegin, size_t rowEnd) {
  static_assert(kDotLanes == 8, "the double lanes below mirror the portable kernel's 8 lanes");
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    const float *xr = x + t * xStride;
    float *yr = y + t * yStride;
    __m512d sums = _mm512_setzero_pd();
    for (size_t i = 0; i < cols; i += kLanes) {
      // Masked-off elements are +0 and add nothing.
      const __m512 v = _mm512_maskz_loadu_ps(firstLanes(cols - i), xr + i);
      sums = addLowHighPd(sums, lowPd(v), highPd(v));
    }
    const double mean = reduceLanesPd(sums) / static_cast<double>(cols);
    const __m512d meanPd = _mm512_set1_pd(mean);
    __m512d squares = _mm512_setzero_pd();
    for (size_t i = 0; i < cols; i += kLanes) {
      const size_t count = std::min(kLanes, cols - i);
      const __m512 v = _mm512_maskz_loadu_ps(firstLanes(count), xr + i);
      // Masked-off elements would add mean^2: keep them at +0.
      const __mmask8 lowMask = static_cast<__mmask8>(firstLanes(std::min<size_t>(count, 8)));
      const __mmask8 highMask =
          static_cast<__mmask8>(count > 8 ? firstLanes(count - 8) : __mmask16(0));
      const __m512d dLow = _mm512_maskz_sub_pd(lowMask, lowPd(v), meanPd);
      const __m512d dHigh = _mm512_maskz_sub_pd(highMask, highPd(v), meanPd);
      squares = addLowHighPd(squares, _mm512_mul_pd(dLow, dLow), _mm512_mul_pd(dHigh, dHigh));
    }
    const double variance = reduceLanesPd(squares) / static_cast<double>(cols);
    const __m512 meanPs = _mm512_set1_ps(static_cast<float>(mean));
    const __m512 inverseDeviation =
        _mm512_set1_ps(static_cast<float>(1.0 / std::sqrt(variance + eps)));
    for (size_t i = 0; i < cols; i += kLanes) {
      const __mmask16 mask = firstLanes(cols - i);
      const __m512 v = _mm512_maskz_loadu_ps(mask, xr + i);
      const __m512 g = _mm512_maskz_loadu_ps(mask, gamma + i);
      __m512 out = _mm512_mul_ps(g, _mm512_mul_ps(_mm512_sub_ps(v, meanPs), inverseDeviation));
      if (beta)
        out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(mask, beta + i));
      _mm512_mask_storeu_ps(yr + i, mask, out);
    }
  }
}

// Angles and their cos and sin as the portable kernel forms them (float32 product, std::cos and
// std::sin), 16 at a time, each set applied to every head of the row.
HETC_AVX512 void ropeAvx512(float *x, size_t xStride, size_t heads, const RopeForm &form,
                            const float *invFreq, const uint32_t *positions, size_t rowBegin,
                            size_t rowEnd) {
  // Interleaved pairs and partial rotation run the portable kernel: the same operations, so the
  // same bits, on a form whose pairs are not two contiguous halves.
  if (form.interleaved || form.rotaryDim != form.headDim)
    return rope(x, xStride, heads, form, invFreq, positions, rowBegin, rowEnd);
  const size_t headDim = form.headDim, half = headDim / 2;
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    float *xr = x + t * xStride;
    const float position = static_cast<float>(positions[t]);
    for (size_t i0 = 0; i0 < half; i0 += kLanes) {
      const size_t count = std::min(kLanes, half - i0);
      const __mmask16 mask = firstLanes(count);
      alignas(64) float cosines[kLanes] = {}, sines[kLanes] = {};
      for (size_t i = 0; i < count; ++i) {
        const float angle = position * invFreq[i0 + i];
        cosines[i] = std::cos(angle);
        sines[i] = std::sin(angle);
      }
      const __m512 c = _mm512_load_ps(cosines), s = _mm512_load_ps(sines);
      for (size_t h = 0; h < heads; ++h) {
        float *first = xr + h * headDim + i0;
        float *second = first + half;
        const __m512 a = _mm512_maskz_loadu_ps(mask, first);
        const __m512 b = _mm512_maskz_loadu_ps(mask, second);
        _mm512_mask_storeu_ps(first, mask, _mm512_sub_ps(_mm512_mul_ps(a, c), _mm512_mul_ps(b, s)));
        _mm512_mask_storeu_ps(second, mask,
                              _mm512_add_ps(_mm512_mul_ps(b, c), _mm512_mul_ps(a, s)));
      }
    }
  }
}

// erf(x) as Abramowitz and Stegun's 7.1.26: 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1 / (1 +
// p |x|), with the sign of x; absolute error at most 1.5e-7 (and float rounding), which in
// 0.5 x (1 + erf(x / sqrt 2)) is at most 1e-7 |x|.
HETC_AVX512 inline __m512 erf512(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x);
  const __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f),
                                 _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), ax,
                                                 _mm512_set1_ps(1.0f)));
  __m512 poly = _mm512_set1_ps(1.061405429f);
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-1.453152027f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(1.421413741f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-0.284496736f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(0.254829592f));
  poly = _mm512_mul_ps(poly, t);
  const __m512 tail = _mm512_mul_ps(poly, exp512(_mm512_sub_ps(_mm512_setzero_ps(),
                                                               _mm512_mul_ps(ax, ax))));
  const __m512 magnitude = _mm512_sub_ps(_mm512_set1_ps(1.0f), tail);
  // The sign bit of x on the magnitude (integer ops: AVX-512F has no float and/or).
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x),
                                        _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(magnitude), sign));
}

// ReLU as the max with 0 (NaN gives 0, as the portable kernel does: the same bits), squared by
// one product as the portable kernel squares it. The GELU
// forms in vectors, within 1e-6 |x| of the portable kernel's std::erf and std::tanh: the erf form
// by erf512, the tanh form as x / (1 + exp(-2 z)), which is 0.5 x (1 + tanh z) exactly. SiLU as
// x / (1 + exp(-x)), the form PyTorch's CPU kernel evaluates.
HETC_AVX512 inline __m512 activate512(ActivationFunction function, __m512 v) {
  const __m512 one = _mm512_set1_ps(1.0f);
  switch (function) {
  case ActivationFunction::Relu:
    return _mm512_max_ps(v, _mm512_setzero_ps());
  case ActivationFunction::Gelu: {
    const __m512 e = erf512(_mm512_mul_ps(v, _mm512_set1_ps(0.7071067811865476f)));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), _mm512_add_ps(one, e));
  }
  case ActivationFunction::GeluTanh: {
    const __m512 cube = _mm512_mul_ps(_mm512_mul_ps(v, v), v);
    const __m512 z = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f),
                                   _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), cube, v));
    const __m512 e = exp512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), z));
    return _mm512_div_ps(v, _mm512_add_ps(one, e));
  }
  case ActivationFunction::Silu:
    return _mm512_div_ps(v, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), v))));
  case ActivationFunction::ReluSquared: {
    const __m512 r = _mm512_max_ps(v, _mm512_setzero_ps());
    return _mm512_mul_ps(r, r);
  }
  }
  return v;
}

HETC_AVX512 void activationAvx512(ActivationFunction function, const float *x, size_t xStride,
                                  size_t cols, float *y, size_t yStride, size_t rowBegin,
                                  size_t rowEnd) {
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    const float *xr = x + t * xStride;
    float *yr = y + t * yStride;
    for (size_t i = 0; i < cols; i += kLanes) {
      const __mmask16 mask = firstLanes(cols - i);
      _mm512_mask_storeu_ps(yr + i, mask,
                            activate512(function, _mm512_maskz_loadu_ps(mask, xr + i)));
    }
  }
}

HETC_AVX512 void gatedAvx512(ActivationFunction function, const float *gate, size_t gateStride,
                             const float *up, size_t upStride, size_t cols, float *y,
                             size_t yStride, size_t rowBegin, size_t rowEnd) {
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    const float *g = gate + t * gateStride;
    const float *u = up + t * upStride;
    float *yr = y + t * yStride;
    for (size_t i = 0; i < cols; i += kLanes) {
      const __mmask16 mask = firstLanes(cols - i);
      const __m512 f = activate512(function, _mm512_maskz_loadu_ps(mask, g + i));
      _mm512_mask_storeu_ps(yr + i, mask, _mm512_mul_ps(f, _mm512_maskz_loadu_ps(mask, u + i)));
    }
  }
}

HETC_AVX512 void addAvx512(const float *a, size_t aStride, const float *b, size_t bStride,
                           size_t cols, float *y, size_t yStride, size_t rowBegin, size_t rowEnd) {
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    const float *ar = a + t * aStride;
    const float *br = b + t * bStride;
    float *yr = y + t * yStride;
    for (size_t i = 0; i < cols; i += kLanes) {
      const __mmask16 mask = firstLanes(cols - i);
      _mm512_mask_storeu_ps(
          yr + i, mask,
          _mm512_add_ps(_mm512_maskz_loadu_ps(mask, ar + i), _mm512_maskz_loadu_ps(mask, br + i)));
    }
  }
}

} // namespace

const VectorKernels *avx512VectorKernels() {
  static const VectorKernels kernels = {
      "avx512-f32",
      "avx512-f32, bf16 kv blocks (pair products as float32 multiply-adds)",
      "avx512-f32, int8 kv blocks (int16 pair products, vpmaddwd)",
      &embeddingAvx512,
      &rmsNormAvx512,
      &layerNormAvx512,
      &ropeAvx512,
      &gatedAvx512,
      &activationAvx512,
      &addAvx512,
      {&attentionChunkAvx512, attentionBlocksAvx512().bf16, attentionBlocksAvx512().int8,
       &attentionMergeAvx512},
  };
  return &kernels;
}

const VectorKernels *avx512Bf16VectorKernels() {
  static const VectorKernels kernels = {
      "avx512-bf16",
      "avx512-bf16, bf16 kv blocks (vdpbf16ps)",
      "avx512-bf16, int8 kv blocks (vpdpwssd)",
      &embeddingAvx512,
      &rmsNormAvx512,
      &layerNormAvx512,
      &ropeAvx512,
      &gatedAvx512,
      &activationAvx512,
      &addAvx512,
      {&attentionChunkAvx512, attentionBlocksAvx512Bf16().bf16, attentionBlocksAvx512Bf16().int8,
       &attentionMergeAvx512},
  };
  return &kernels;
}

} // namespace hetc::kernels

#pragma GCC diagnostic pop

#else

namespace hetc::kernels {
const VectorKernels *avx512VectorKernels() { return nullptr; }
const VectorKernels *avx512Bf16VectorKernels() { return nullptr; }
} // namespace hetc::kernels

#endif
