// The chunk kernels over bf16 and int8 blocks, included by the translation units that build them
// for one instruction set. The includer defines HETC_BLOCKS_TARGET (the target attribute of every
// function here) and, before the include, a struct Pairs with
//   static __m512 dot(__m512 acc, __m512i pairs, const uint32_t *broadcast): acc[i] +=
//       pairs.bf16[2i] * b.bf16[0] + pairs.bf16[2i+1] * b.bf16[1], b the bf16 pair at broadcast;
//   static __m256i round(__m512 x): the 16 floats rounded to bf16, to nearest even;
// and a struct Words with
//   static __m512i dot(__m512i acc, __m512i words, const uint32_t *broadcast): acc[i] +=
//       words.i16[2i] * b.i16[0] + words.i16[2i+1] * b.i16[1] in int32, b the int16 pair at
//       broadcast (exact: no operand here is -32768 on both sides of a product).
// Everything is in an anonymous namespace: no code for one target reaches another translation
// unit through a shared inline function. The functions with vector code carry the target.

namespace {

constexpr size_t kLanes = 16;
constexpr __mmask16 kAllLanes = 0xffff;
static_assert(kLanes == kKvBlockPositions, "a block's 16 positions are one vector of scores");
// Query dims up to 128 (64 pairs) have their bf16 pairs in a buffer on the stack.
constexpr size_t kMaxPairs = 64;
// Blocks between the one being computed and the one whose lines are prefetched, every line of
// them: measured on Zen 5, prefetching every second or fourth line is slower than none.
constexpr size_t kPrefetchBlocks = 2;
// Over int8 blocks (half the bytes of a bf16 block, about its time to compute): measured on Zen 5
// with one thread over 32K positions, 4 blocks ahead took 1.50 ms a layer, 8 blocks 1.41-1.46.
constexpr size_t kInt8PrefetchBlocks = 8;
// Likewise for the line of each of an int8 block's two scale streams.
constexpr size_t kPrefetchScaleBlocks = 8;

HETC_BLOCKS_TARGET inline __mmask16 firstLanes(size_t count) {
  return count >= kLanes ? kAllLanes : static_cast<__mmask16>((1u << count) - 1);
}

// exp(x) as 2^n * p(r), as the row kernels compute it (KernelsAvx512.cpp): within 2 ulp of
// std::exp, 0 or the smallest subnormal below -104.
HETC_BLOCKS_TARGET inline __m512 exp512(__m512 x) {
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

// cap * tanh(s / cap), as KernelsAvx512.cpp's softCap512 computes it (the same bits).
HETC_BLOCKS_TARGET inline __m512 softCap512(__m512 s, float cap) {
  const __m512 y = _mm512_div_ps(s, _mm512_set1_ps(cap));
  const __m512 e = exp512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), _mm512_abs_ps(y)));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 magnitude = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(y),
                                        _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __m512 t = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(magnitude), sign));
  return _mm512_mul_ps(t, _mm512_set1_ps(cap));
}

// ALiBi's bias of positions j0 .. j0 + 15, as KernelsAvx512.cpp's addPositionBias512 (the same
// bits as the portable kernel's).
HETC_BLOCKS_TARGET inline __m512 addPositionBias512(__m512 s, float slope, size_t j0) {
  const __m512 positions = _mm512_add_ps(
      _mm512_set1_ps(static_cast<float>(j0)),
      _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  return _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(slope), positions));
}

HETC_BLOCKS_TARGET inline __m512 widenBf16(__m256i x) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16));
}

// A line of 32 bf16 block elements (16 pairs), its lanes outside `lanes` zero.
HETC_BLOCKS_TARGET inline __m512i loadPairs(const uint16_t *at, __mmask32 lanes) {
  return lanes == 0xffffffffu ? _mm512_loadu_si512(at) : _mm512_maskz_loadu_epi16(lanes, at);
}

// A line of 32 int8 block elements sign-extended to int16, each 32-bit lane the pair (even, odd);
// with `bytes`, the bytes outside it zero (and not read).
HETC_BLOCKS_TARGET inline __m512i loadWords(const int8_t *at) {
  return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(at)));
}
HETC_BLOCKS_TARGET inline __m512i loadWords(const int8_t *at, __mmask64 bytes) {
  return _mm512_cvtepi8_epi16(_mm512_castsi512_si256(_mm512_maskz_loadu_epi8(bytes, at)));
}

HETC_BLOCKS_TARGET inline void prefetchLines(const void *at, size_t bytes) {
  const char *p = static_cast<const char *>(at);
  for (size_t offset = 0; offset < bytes; offset += 64)
    _mm_prefetch(p + offset, _MM_HINT_T0);
}

// H query heads over positions [begin, end) of one KV head of d <= 128 dims in NV vectors of 16
// (the last one partial when d % 16 != 0). Per block of 16 positions: 16 scores per head from
// d/2 K lines, each against a broadcast pair of query dims; the running max moves once per block
// (the output is rescaled only when it grows); the weights, rounded to bf16, go to the V pairs of
// positions in registers.
template <int H, int NV>
HETC_BLOCKS_TARGET void
headsOverBlocks(const float *q, const uint16_t *keys, const uint16_t *values, const float *,
                const float *, size_t d, float scale, float softcap, const float *slopes, size_t begin,
                size_t end, float *state) {
  using Element = uint16_t;
  const size_t pairs = d / 2;
  const size_t blockElements = kLanes * d;
  const float negativeInfinity = -std::numeric_limits<float>::infinity();
  // The last V vector's bf16 lanes (two per output dim) and float lanes.
  const __mmask32 lastPairLanes =
      static_cast<__mmask32>((uint64_t{1} << (2 * (d - (NV - 1) * kLanes))) - 1);
  const __mmask16 lastLanes = firstLanes(d - (NV - 1) * kLanes);

  alignas(64) uint32_t queryPairs[H][kMaxPairs];
  for (int h = 0; h < H; ++h)
    for (size_t i = 0; i < d; i += kLanes) {
      const __mmask16 mask = firstLanes(d - i);
      _mm512_mask_storeu_epi16(
          reinterpret_cast<uint16_t *>(queryPairs[h]) + i, mask,
          _mm512_castsi256_si512(Pairs::round(_mm512_maskz_loadu_ps(mask, q + h * d + i))));
    }
  __m512 acc[H][NV];
  float runningMax[H];
  __m512 sums[H];
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      acc[h][v] = _mm512_setzero_ps();
    runningMax[h] = negativeInfinity;
    sums[h] = _mm512_setzero_ps();
  }
  alignas(64) uint16_t weights[H][kLanes];
  const __m512 scaleVector = _mm512_set1_ps(scale);

  // The lanes of the block at j0 that hold positions in [begin, end).
  auto validLanes = [&](size_t j0) {
    return static_cast<__mmask16>(firstLanes(end - j0) & ~firstLanes(std::max(begin, j0) - j0));
  };
  // The scaled scores of the block at j0, -inf in lanes outside [begin, end) (which read what
  // the block holds there).
  auto blockScores = [&](size_t j0, __m512 *scores) HETC_BLOCKS_TARGET {
    const Element *keyBlock = keys + j0 * d;
    // Opaque to the optimiser, so that it reads the pairs as broadcast operands instead of
    // hoisting them into registers it then has to spill.
    const uint32_t *qp = &queryPairs[0][0];
    __asm__("" : "+r"(qp));
    __m512 s[H][2];
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
      s[h][0] = s[h][1] = _mm512_setzero_ps();
    size_t p = 0;
    for (; p + 2 <= pairs; p += 2) {
      const __m512i k0 = loadPairs(keyBlock + p * 2 * kLanes, 0xffffffffu);
      const __m512i k1 = loadPairs(keyBlock + (p + 1) * 2 * kLanes, 0xffffffffu);
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h) {
        s[h][0] = Pairs::dot(s[h][0], k0, qp + h * kMaxPairs + p);
        s[h][1] = Pairs::dot(s[h][1], k1, qp + h * kMaxPairs + p + 1);
      }
    }
    if (p < pairs) {
      const __m512i k0 = loadPairs(keyBlock + p * 2 * kLanes, 0xffffffffu);
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h)
        s[h][0] = Pairs::dot(s[h][0], k0, qp + h * kMaxPairs + p);
    }
    const __mmask16 valid = validLanes(j0);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const __m512 dots = _mm512_add_ps(s[h][0], s[h][1]);
      __m512 scaled = _mm512_mul_ps(dots, scaleVector);
      if (softcap > 0)
        scaled = softCap512(scaled, softcap);
      if (slopes)
        scaled = addPositionBias512(scaled, slopes[h], j0);
      scores[h] = _mm512_mask_mov_ps(_mm512_set1_ps(negativeInfinity), valid, scaled);
    }
  };

  // Software-pipelined: the scores of the next block are computed between this block's softmax
  // and its weighted sum, so that their independent chains of vdpbf16ps overlap the softmax's
  // dependent steps (max, exp, rounding) instead of waiting behind them.
  __m512 scores[H];
  blockScores(begin / kLanes * kLanes, scores);
  for (size_t j0 = begin / kLanes * kLanes; j0 < end; j0 += kLanes) {
    // The block's positions in [begin, end): lanes [first, n).
    const size_t first = std::max(begin, j0) - j0, n = std::min(kLanes, end - j0);
    const __mmask16 valid = validLanes(j0);
    const Element *valueBlock = values + j0 * d;
    // Past `end` too: a thread's next chunk is usually the next positions of the same stream,
    // and a prefetch outside what is mapped is dropped, never a fault.
    prefetchLines(keys + j0 * d + kPrefetchBlocks * blockElements, blockElements * sizeof(Element));
    prefetchLines(valueBlock + kPrefetchBlocks * blockElements, blockElements * sizeof(Element));

#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      // The horizontal max only when a score passes the running one: after the first blocks of
      // a chunk that is rare, and the compare is one instruction.
      if (_mm512_cmp_ps_mask(scores[h], _mm512_set1_ps(runningMax[h]), _CMP_GT_OQ) != 0) {
        const float blockMax = _mm512_reduce_max_ps(scores[h]);
        if (runningMax[h] != negativeInfinity) {
          const __m512 correction = exp512(_mm512_set1_ps(runningMax[h] - blockMax));
#pragma GCC unroll 8
          for (int v = 0; v < NV; ++v)
            acc[h][v] = _mm512_mul_ps(acc[h][v], correction);
          sums[h] = _mm512_mul_ps(sums[h], correction);
        }
        runningMax[h] = blockMax;
      }
      const __m512 w = _mm512_maskz_mov_ps(
          valid, exp512(_mm512_sub_ps(scores[h], _mm512_set1_ps(runningMax[h]))));
      const __m256i rounded = Pairs::round(w);
      _mm256_store_si256(reinterpret_cast<__m256i *>(weights[h]), rounded);
      sums[h] = _mm512_add_ps(sums[h], widenBf16(rounded));
    }
    if (j0 + kLanes < end)
      blockScores(j0 + kLanes, scores);

    const uint32_t *wp = reinterpret_cast<const uint32_t *>(&weights[0][0]);
    __asm__("" : "+r"(wp));
    // Pairs of positions; in a pair half outside [begin, end) that position is masked to zero
    // (its weight is zero, but 0 times a NaN left in the block would not be).
    for (size_t i = first / 2; i < (n + 1) / 2; ++i) {
      const Element *pair = valueBlock + i * 2 * d;
      const __mmask32 outside =
          (2 * i + 1 == n ? 0xaaaaaaaau : 0u) | (2 * i < first ? 0x55555555u : 0u);
      __m512i x[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        const __mmask32 lanes = (v + 1 == NV ? lastPairLanes : 0xffffffffu) & ~outside;
        x[v] = loadPairs(pair + v * 2 * kLanes, lanes);
      }
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v)
          acc[h][v] = Pairs::dot(acc[h][v], x[v], wp + h * (kLanes / 2) + i);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
    float *out = state + h * (d + 2);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      _mm512_mask_storeu_ps(out + v * kLanes, v + 1 == NV ? lastLanes : kAllLanes, acc[h][v]);
    out[d] = runningMax[h];
    out[d + 1] = _mm512_reduce_add_ps(sums[h]);
  }
}

// The smallest "largest scaled weight" of a block (Attention.h): 2^(e - 14) stays a normal float.
constexpr float kInt8WeightFloor = 0x1.0p-112f;

// The max of each of up to 4 vectors in every lane of one quarter: x[h]'s in quarter h (for
// H < 4 the last vector fills the rest).
template <int H> HETC_BLOCKS_TARGET inline __m512 quarterMaxima(const __m512 *x) {
  const __m512 a = x[0], b = x[H > 1 ? 1 : 0], c = x[H > 2 ? 2 : H - 1], e = x[H - 1];
  // Quarters [a02, a13, b02, b13] and [c02, c13, e02, e13], then [a, b, c, e] of 4 lanes each.
  const __m512 ab =
      _mm512_max_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
  const __m512 ce =
      _mm512_max_ps(_mm512_shuffle_f32x4(c, e, 0x44), _mm512_shuffle_f32x4(c, e, 0xee));
  __m512 m = _mm512_max_ps(_mm512_shuffle_f32x4(ab, ce, 0x88), _mm512_shuffle_f32x4(ab, ce, 0xdd));
  m = _mm512_max_ps(m, _mm512_permute_ps(m, 0x4e));
  return _mm512_max_ps(m, _mm512_permute_ps(m, 0xb1));
}

// Quarter h of x (h < 4) in every quarter. The shuffle's selector must be a constant to clang,
// hence one call per h; unrolled, each is the one instruction.
HETC_BLOCKS_TARGET inline __m512 broadcastQuarter(__m512 x, int h) {
  switch (h) {
  case 0:
    return _mm512_shuffle_f32x4(x, x, 0x00);
  case 1:
    return _mm512_shuffle_f32x4(x, x, 0x55);
  case 2:
    return _mm512_shuffle_f32x4(x, x, 0xaa);
  default:
    return _mm512_shuffle_f32x4(x, x, 0xff);
  }
}

// H query heads over positions [begin, end) of one KV head of an int8 cache, d <= 128 dims in NV
// vectors of 16, with the integer arithmetic of Attention.h. Per block of 16 positions: 16 int32
// dots per head from d/2 K lines sign-extended to int16, each against a broadcast pair of the
// head's int16 query; the running max moves as the bf16 kernel moves it; each head's weights,
// scaled by their V scales, are quantized to int16 against the block's largest and go to the V
// pairs of positions (int32 sums in registers, one per head and vector of dims), which the block
// adds to the output in float32. The output accumulates in `state` itself: the int8 loads may
// alias it, so it stays in memory and leaves the registers to the integer sums.
template <int H, int NV>
HETC_BLOCKS_TARGET void headsOverInt8Blocks(const float *q, const int8_t *keys,
                                            const int8_t *values, const float *keyScales,
                                            const float *valueScales, size_t d, float scale,
                                            float softcap, const float *slopes, size_t begin,
                                            size_t end, float *state) {
  const size_t pairs = d / 2;
  const size_t blockElements = kLanes * d;
  const float negativeInfinity = -std::numeric_limits<float>::infinity();
  // The last vector of dims: its bytes in a V line (two per dim) and its float lanes.
  const size_t lastDims = d - (NV - 1) * kLanes;
  const bool lastFull = lastDims == kLanes;
  const __mmask64 lastLineBytes = (uint64_t{1} << (2 * lastDims)) - 1;
  const __mmask16 lastLanes = firstLanes(lastDims);

  // quantizeAttentionQuery in vectors, the same bits: the largest |q| (at least FLT_MIN, a normal
  // float, whose exponent bits less the bias are its ilogb), q * 2^(14 - e) exact by vscalefps,
  // rounded to nearest even, 2^15 saturated to 32767.
  alignas(64) int16_t queryWords[H][2 * kMaxPairs];
  float factors[H];
  for (int h = 0; h < H; ++h) {
    __m512 largest = _mm512_set1_ps(std::numeric_limits<float>::min());
    for (size_t i = 0; i < d; i += kLanes)
      largest = _mm512_max_ps(
          largest, _mm512_abs_ps(_mm512_maskz_loadu_ps(firstLanes(d - i), q + h * d + i)));
    const float top = _mm512_reduce_max_ps(largest);
    uint32_t bits;
    std::memcpy(&bits, &top, sizeof bits);
    const int e = static_cast<int>(bits >> 23) - 127;
    const __m512 shift = _mm512_set1_ps(static_cast<float>(14 - e));
    for (size_t i = 0; i < d; i += kLanes) {
      const __mmask16 mask = firstLanes(d - i);
      const __m512i words =
          _mm512_cvtps_epi32(_mm512_scalef_ps(_mm512_maskz_loadu_ps(mask, q + h * d + i), shift));
      _mm512_mask_storeu_epi16(queryWords[h] + i, mask,
                               _mm512_castsi256_si512(_mm512_cvtsepi32_epi16(words)));
    }
    factors[h] = std::ldexp(scale, e - 14);
  }
  float runningMax[H];
  __m512 sums[H];
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
    std::fill(state + h * (d + 2), state + h * (d + 2) + d, 0.0f);
    runningMax[h] = negativeInfinity;
    sums[h] = _mm512_setzero_ps();
  }
  alignas(64) int16_t weights[H][kLanes];
  __m512 scaled[H], units[H];

  auto validLanes = [&](size_t j0) {
    return static_cast<__mmask16>(firstLanes(end - j0) & ~firstLanes(std::max(begin, j0) - j0));
  };
  // Output vector v of head h, in the state: load, and store back.
  auto outputAt = [&](int h, int v) { return state + h * (d + 2) + v * kLanes; };
  auto loadOutput = [&](int h, int v) HETC_BLOCKS_TARGET {
    return v + 1 < NV || lastFull ? _mm512_loadu_ps(outputAt(h, v))
                                  : _mm512_maskz_loadu_ps(lastLanes, outputAt(h, v));
  };
  auto storeOutput = [&](int h, int v, __m512 x) HETC_BLOCKS_TARGET {
    if (v + 1 < NV || lastFull)
      _mm512_storeu_ps(outputAt(h, v), x);
    else
      _mm512_mask_storeu_ps(outputAt(h, v), lastLanes, x);
  };
  // The scores of the block at j0, -inf in lanes outside [begin, end) (whose dots are of whatever
  // the block holds there, finite: integers).
  auto blockScores = [&](size_t j0, __m512 *scores) HETC_BLOCKS_TARGET {
    const int8_t *keyBlock = keys + j0 * d;
    const uint32_t *qp = reinterpret_cast<const uint32_t *>(&queryWords[0][0]);
    __asm__("" : "+r"(qp));
    __m512i s[H][2];
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
      s[h][0] = s[h][1] = _mm512_setzero_si512();
    size_t p = 0;
    for (; p + 2 <= pairs; p += 2) {
      const __m512i k0 = loadWords(keyBlock + p * 2 * kLanes);
      const __m512i k1 = loadWords(keyBlock + (p + 1) * 2 * kLanes);
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h) {
        s[h][0] = Words::dot(s[h][0], k0, qp + h * kMaxPairs + p);
        s[h][1] = Words::dot(s[h][1], k1, qp + h * kMaxPairs + p + 1);
      }
    }
    if (p < pairs) {
      const __m512i k0 = loadWords(keyBlock + p * 2 * kLanes);
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h)
        s[h][0] = Words::dot(s[h][0], k0, qp + h * kMaxPairs + p);
    }
    const __mmask16 valid = validLanes(j0);
    // Lanes outside load no scale.
    const __m512 keyScale = _mm512_maskz_loadu_ps(valid, keyScales + j0);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const __m512 dots = _mm512_cvtepi32_ps(_mm512_add_epi32(s[h][0], s[h][1]));
      __m512 scaled = _mm512_mul_ps(dots, _mm512_mul_ps(keyScale, _mm512_set1_ps(factors[h])));
      if (softcap > 0)
        scaled = softCap512(scaled, softcap);
      if (slopes)
        scaled = addPositionBias512(scaled, slopes[h], j0);
      scores[h] = _mm512_mask_mov_ps(_mm512_set1_ps(negativeInfinity), valid, scaled);
    }
  };

  // Software-pipelined as the bf16 kernel.
  __m512 scores[H];
  blockScores(begin / kLanes * kLanes, scores);
  for (size_t j0 = begin / kLanes * kLanes; j0 < end; j0 += kLanes) {
    const size_t first = std::max(begin, j0) - j0, n = std::min(kLanes, end - j0);
    const __mmask16 valid = validLanes(j0);
    const int8_t *valueBlock = values + j0 * d;
    prefetchLines(keys + j0 * d + kInt8PrefetchBlocks * blockElements, blockElements);
    prefetchLines(valueBlock + kInt8PrefetchBlocks * blockElements, blockElements);
    // A block's scales are one line of each stream, which the loads below would otherwise wait
    // for from memory.
    _mm_prefetch(reinterpret_cast<const char *>(keyScales + j0 + kPrefetchScaleBlocks * kLanes),
                 _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char *>(valueScales + j0 + kPrefetchScaleBlocks * kLanes),
                 _MM_HINT_T0);
    const __m512 valueScale = _mm512_maskz_loadu_ps(valid, valueScales + j0);

#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      if (_mm512_cmp_ps_mask(scores[h], _mm512_set1_ps(runningMax[h]), _CMP_GT_OQ) != 0) {
        const float blockMax = _mm512_reduce_max_ps(scores[h]);
        if (runningMax[h] != negativeInfinity) {
          const __m512 correction = exp512(_mm512_set1_ps(runningMax[h] - blockMax));
#pragma GCC unroll 8
          for (int v = 0; v < NV; ++v)
            storeOutput(h, v, _mm512_mul_ps(loadOutput(h, v), correction));
          sums[h] = _mm512_mul_ps(sums[h], correction);
        }
        runningMax[h] = blockMax;
      }
      const __m512 w = _mm512_maskz_mov_ps(
          valid, exp512(_mm512_sub_ps(scores[h], _mm512_set1_ps(runningMax[h]))));
      sums[h] = _mm512_add_ps(sums[h], w);
      scaled[h] = _mm512_mul_ps(w, valueScale);
    }
    // Each head's largest x (at least 2^-112) in every lane of its quarter, then per head
    // 2^(14 - e) and 2^(e - 14) from its exponent bits (both normal floats, exact powers of two):
    // x * 2^(14 - e) < 2^15 rounded to nearest even, 2^15 saturated to 32767.
    const __m512i biased =
        _mm512_srli_epi32(_mm512_castps_si512(_mm512_max_ps(quarterMaxima<H>(scaled),
                                                            _mm512_set1_ps(kInt8WeightFloor))),
                          23);
    const __m512 up = _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(127 + 14 + 127), biased), 23));
    const __m512 down =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(biased, _mm512_set1_epi32(14)), 23));
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      units[h] = broadcastQuarter(down, h);
      const __m512i u = _mm512_cvtps_epi32(_mm512_mul_ps(scaled[h], broadcastQuarter(up, h)));
      _mm256_store_si256(reinterpret_cast<__m256i *>(weights[h]), _mm512_cvtsepi32_epi16(u));
    }
    if (j0 + kLanes < end)
      blockScores(j0 + kLanes, scores);

    const uint32_t *wp = reinterpret_cast<const uint32_t *>(&weights[0][0]);
    __asm__("" : "+r"(wp));
    __m512i blockSums[H][NV];
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v)
        blockSums[h][v] = _mm512_setzero_si512();
    // Pairs of positions; a position outside [begin, end) has the weight 0, and its elements are
    // integers, so the product is 0 whatever the block holds there.
    for (size_t i = first / 2; i < (n + 1) / 2; ++i) {
      const int8_t *pair = valueBlock + i * 2 * d;
      __m512i x[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v)
        x[v] = v + 1 < NV || lastFull ? loadWords(pair + v * 2 * kLanes)
                                      : loadWords(pair + v * 2 * kLanes, lastLineBytes);
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v)
          blockSums[h][v] = Words::dot(blockSums[h][v], x[v], wp + h * (kLanes / 2) + i);
    }
    // output + float(sum) * 2^(e - 14): the product is exact, so the multiply-add rounds once,
    // as the add of the product would.
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v)
        storeOutput(
            h, v, _mm512_fmadd_ps(_mm512_cvtepi32_ps(blockSums[h][v]), units[h], loadOutput(h, v)));
  }
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
    float *out = state + h * (d + 2);
    out[d] = runningMax[h];
    out[d + 1] = _mm512_reduce_add_ps(sums[h]);
  }
}

template <typename Element>
using HeadsFn = void (*)(const float *, const Element *, const Element *, const float *,
                         const float *, size_t, float, float, const float *, size_t, size_t,
                         float *);

// Up to 4 heads at a time with up to 4 vectors of dims (16 accumulators), 2 past that.
constexpr size_t maxHeadsPerPass(size_t vectors) { return vectors <= 4 ? 4 : 2; }

template <int H, int NV, typename Element> constexpr HeadsFn<Element> headsOf() {
  if constexpr (std::is_same_v<Element, int8_t>)
    return headsOverInt8Blocks<H, NV>;
  else
    return headsOverBlocks<H, NV>;
}

template <int NV, typename Element> HeadsFn<Element> headsFor(size_t heads) {
  if constexpr (maxHeadsPerPass(NV) == 4) {
    if (heads == 4)
      return headsOf<4, NV, Element>();
    if (heads == 3)
      return headsOf<3, NV, Element>();
  }
  return heads == 2 ? headsOf<2, NV, Element>() : headsOf<1, NV, Element>();
}

template <typename Element> HeadsFn<Element> headsFor(size_t vectors, size_t heads) {
  switch (vectors) {
  case 1:
    return headsFor<1, Element>(heads);
  case 2:
    return headsFor<2, Element>(heads);
  case 3:
    return headsFor<3, Element>(heads);
  case 4:
    return headsFor<4, Element>(heads);
  case 5:
    return headsFor<5, Element>(heads);
  case 6:
    return headsFor<6, Element>(heads);
  case 7:
    return headsFor<7, Element>(heads);
  default:
    return headsFor<8, Element>(heads);
  }
}

// The AttentionChunkFn: passes of up to maxHeadsPerPass heads over the chunk, the later ones
// reading it from cache. Heads past 128 dims take the portable kernel.
template <typename Element>
void attentionChunkBlocks(const float *q, const Element *keys, const Element *values,
                          const float *keyScales, const float *valueScales, size_t posStride,
                          size_t group, size_t headDim, float scale, float softcap,
                          const float *slopes, size_t begin, size_t end, float *state) {
  if (headDim > 2 * kMaxPairs) {
    if constexpr (std::is_same_v<Element, int8_t>)
      kAttentionChunkPortable.int8(q, keys, values, keyScales, valueScales, posStride, group,
                                   headDim, scale, softcap, slopes, begin, end, state);
    else
      kAttentionChunkPortable.bf16(q, keys, values, keyScales, valueScales, posStride, group,
                                   headDim, scale, softcap, slopes, begin, end, state);
    return;
  }
  const size_t vectors = (headDim + kLanes - 1) / kLanes;
  const size_t perPass = maxHeadsPerPass(vectors);
  for (size_t h = 0; h < group; h += perPass) {
    const size_t heads = std::min(perPass, group - h);
    headsFor<Element>(vectors, heads)(q + h * headDim, keys, values, keyScales, valueScales,
                                      headDim, scale, softcap, slopes ? slopes + h : nullptr,
                                      begin, end, state + h * (headDim + 2));
  }
}

constexpr AttentionBlockKernels kAttentionBlocks = {&attentionChunkBlocks<uint16_t>,
                                                    &attentionChunkBlocks<int8_t>};

} // namespace
