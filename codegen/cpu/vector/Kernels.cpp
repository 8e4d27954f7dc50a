// Portable float32 kernels. Plain loops the compiler can vectorise without reassociating
// floating-point sums: every reduction has an order fixed by the source.
#include "codegen/cpu/vector/Kernels.h"

#include "codegen/cpu/linear/ActivationRows.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace hetc::kernels {
namespace {

static_assert(kDotLanes == 8, "reduceLanes below is written for 8 lanes");

template <typename T> inline T reduceLanes(const T *lanes) {
  return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) +
         ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
}

// kDotLanes floats as one value, so each lane's sum is a plain float accumulation the compiler
// maps to SIMD registers (SSE on baseline x86-64, one AVX register with -mavx) without shuffles.
typedef float LaneVector __attribute__((vector_size(kDotLanes * sizeof(float))));

// Loads through references rather than return values: returning a vector type wider than the
// baseline ISA's registers is an ABI hazard the compiler warns about.
inline void loadLanes(LaneVector &v, const float *p) { std::memcpy(&v, p, sizeof(v)); }

// The last `count` < kDotLanes elements in the low lanes, zeros above.
inline void loadTail(LaneVector &v, const float *p, size_t count) {
  v = LaneVector{};
  for (size_t l = 0; l < count; ++l)
    v[l] = p[l];
}

// The R x C dot products of R rows of x with C rows of w, each load shared across the block.
// Lane l of each product sums the products of elements l, l + kDotLanes, ... in order; the lanes
// are then combined in a fixed tree. Every product is exactly dot(x[r], w[c], k): the blocking
// never changes a value, only how many independent sums are in flight.
template <size_t R, size_t C>
inline void dotBlock(const float *const *x, const float *w, size_t k, float (*out)[C]) {
  LaneVector acc[R][C] = {};
  const size_t whole = k - k % kDotLanes;
  LaneVector wv[C], xv;
  for (size_t i = 0; i < whole; i += kDotLanes) {
    for (size_t c = 0; c < C; ++c)
      loadLanes(wv[c], w + c * k + i);
    for (size_t r = 0; r < R; ++r) {
      loadLanes(xv, x[r] + i);
      for (size_t c = 0; c < C; ++c)
        acc[r][c] += xv * wv[c];
    }
  }
  if (whole < k) {
    // Zero lanes add +0 * +0, which leaves every partial sum as it was (up to the sign of a zero).
    for (size_t c = 0; c < C; ++c)
      loadTail(wv[c], w + c * k + whole, k - whole);
    for (size_t r = 0; r < R; ++r) {
      loadTail(xv, x[r] + whole, k - whole);
      for (size_t c = 0; c < C; ++c)
        acc[r][c] += xv * wv[c];
    }
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t c = 0; c < C; ++c) {
      float lanes[kDotLanes];
      std::memcpy(lanes, &acc[r][c], sizeof(lanes));
      out[r][c] = reduceLanes(lanes);
    }
}

// Rows of x per pass over a block of w, and columns of w per block: a block of
// kColumnBlock rows of w stays in cache while every row block of x passes over it, so w streams
// from memory once per step.
constexpr size_t kRowBlock = 4;
constexpr size_t kColumnBlock = 16;

// Columns per dotBlock for R rows: about eight accumulators (two SSE registers each) at most.
template <size_t R> constexpr size_t kColumnsPerBlock = R == 1 ? 4 : R == 2 ? 2 : 1;

template <size_t R>
void linearRowBlock(const float *const *xRows, float *const *yRows, const float *w, size_t k,
                    size_t colBegin, size_t colEnd) {
  constexpr size_t C = kColumnsPerBlock<R>;
  size_t n = colBegin;
  for (; n + C <= colEnd; n += C) {
    float out[R][C];
    dotBlock<R, C>(xRows, w + n * k, k, out);
    for (size_t r = 0; r < R; ++r)
      for (size_t c = 0; c < C; ++c)
        yRows[r][n + c] = out[r][c];
  }
  for (; n < colEnd; ++n) {
    float out[R][1];
    dotBlock<R, 1>(xRows, w + n * k, k, out);
    for (size_t r = 0; r < R; ++r)
      yRows[r][n] = out[r][0];
  }
}

void linearRows(const float *const *xRows, float *const *yRows, size_t rowCount, const float *w,
                size_t k, size_t colBegin, size_t colEnd) {
  switch (rowCount) {
  case 4:
    linearRowBlock<4>(xRows, yRows, w, k, colBegin, colEnd);
    break;
  case 3:
    linearRowBlock<3>(xRows, yRows, w, k, colBegin, colEnd);
    break;
  case 2:
    linearRowBlock<2>(xRows, yRows, w, k, colBegin, colEnd);
    break;
  case 1:
    linearRowBlock<1>(xRows, yRows, w, k, colBegin, colEnd);
    break;
  default:
    break;
  }
}

static_assert(kRowBlock == 4, "linearRows dispatches blocks of up to 4 rows");

} // namespace

float dot(const float *a, const float *b, size_t n) {
  float out[1][1];
  dotBlock<1, 1>(&a, b, n, out);
  return out[0][0];
}

void embedding(const int32_t *tokens, const float *table, size_t hidden, float *out,
               size_t outStride, size_t rowBegin, size_t rowEnd) {
  for (size_t t = rowBegin; t < rowEnd; ++t)
    std::memcpy(out + t * outStride, table + static_cast<size_t>(tokens[t]) * hidden,
                hidden * sizeof(float));
}

void rmsNorm(const float *x, size_t xStride, const float *gamma, size_t cols, float eps, float *y,
             size_t yStride, size_t rowBegin, size_t rowEnd) {
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    const float *xr = x + t * xStride;
    float *yr = y + t * yStride;
    // Squares are rounded to float as PyTorch's x.pow(2) does; the sum is kept in double so the
    // mean is as close to PyTorch's (more accurate than a sequential float sum) as we can get.
    double lanes[kDotLanes] = {};
    const size_t whole = cols - cols % kDotLanes;
    for (size_t i = 0; i < whole; i += kDotLanes)
      for (size_t l = 0; l < kDotLanes; ++l) {
        float square = xr[i + l] * xr[i + l];
        lanes[l] += square;
      }
    for (size_t i = whole; i < cols; ++i) {
      float square = xr[i] * xr[i];
      lanes[i - whole] += square;
    }
    const float variance = static_cast<float>(reduceLanes(lanes) / static_cast<double>(cols));
    const float inverseRms = 1.0f / std::sqrt(variance + eps);
    for (size_t i = 0; i < cols; ++i)
      yr[i] = gamma[i] * (xr[i] * inverseRms);
  }
}

void layerNorm(const float *x, size_t xStride, const float *gamma, const float *beta, size_t cols,
               float eps, float *y, size_t yStride, size_t rowBegin, size_t rowEnd) {
  const size_t whole = cols - cols % kDotLanes;
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    const float *xr = x + t * xStride;
    float *yr = y + t * yStride;
    double sums[kDotLanes] = {};
    for (size_t i = 0; i < whole; i += kDotLanes)
      for (size_t l = 0; l < kDotLanes; ++l)
        sums[l] += xr[i + l];
    for (size_t i = whole; i < cols; ++i)
      sums[i - whole] += xr[i];
    const double mean = reduceLanes(sums) / static_cast<double>(cols);
    // The second pass over the row: no cancellation when the mean is large against the spread.
    double squares[kDotLanes] = {};
    for (size_t i = 0; i < whole; i += kDotLanes)
      for (size_t l = 0; l < kDotLanes; ++l) {
        const double d = xr[i + l] - mean;
        squares[l] += d * d;
      }
    for (size_t i = whole; i < cols; ++i) {
      const double d = xr[i] - mean;
      squares[i - whole] += d * d;
    }
    const double variance = reduceLanes(squares) / static_cast<double>(cols);
    const float meanF = static_cast<float>(mean);
    const float inverseDeviation = static_cast<float>(1.0 / std::sqrt(variance + eps));
    for (size_t i = 0; i < cols; ++i) {
      const float scaled = gamma[i] * ((xr[i] - meanF) * inverseDeviation);
      yr[i] = beta ? scaled + beta[i] : scaled;
    }
  }
}

void linear(const float *x, size_t xStride, size_t rows, const float *w, size_t k, float *y,
            size_t yStride, size_t colBegin, size_t colEnd) {
  for (size_t c0 = colBegin; c0 < colEnd; c0 += kColumnBlock) {
    const size_t c1 = std::min(colEnd, c0 + kColumnBlock);
    for (size_t r0 = 0; r0 < rows; r0 += kRowBlock) {
      const size_t count = std::min(kRowBlock, rows - r0);
      const float *xRows[kRowBlock];
      float *yRows[kRowBlock];
      for (size_t i = 0; i < count; ++i) {
        xRows[i] = x + (r0 + i) * xStride;
        yRows[i] = y + (r0 + i) * yStride;
      }
      linearRows(xRows, yRows, count, w, k, c0, c1);
    }
  }
}

void lmHead(const float *x, size_t xStride, const uint32_t *sourceRows, const uint32_t *outputRows,
            size_t count, const float *w, size_t k, float *logits, size_t logitsStride,
            size_t colBegin, size_t colEnd) {
  for (size_t c0 = colBegin; c0 < colEnd; c0 += kColumnBlock) {
    const size_t c1 = std::min(colEnd, c0 + kColumnBlock);
    for (size_t i0 = 0; i0 < count; i0 += kRowBlock) {
      const size_t blockCount = std::min(kRowBlock, count - i0);
      const float *xRows[kRowBlock];
      float *yRows[kRowBlock];
      for (size_t i = 0; i < blockCount; ++i) {
        xRows[i] = x + static_cast<size_t>(sourceRows[i0 + i]) * xStride;
        yRows[i] = logits + static_cast<size_t>(outputRows[i0 + i]) * logitsStride;
      }
      linearRows(xRows, yRows, blockCount, w, k, c0, c1);
    }
  }
}

void rope(float *x, size_t xStride, size_t heads, const RopeForm &form, const float *invFreq,
          const uint32_t *positions, size_t rowBegin, size_t rowEnd) {
  const size_t half = form.rotaryDim / 2;
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    float *xr = x + t * xStride;
    const float position = static_cast<float>(positions[t]);
    // One angle serves every head of the row. PyTorch builds emb = cat(freqs, freqs) (or, for
    // interleaved pairs, each frequency twice in a row), so both columns of a pair use the same
    // cos and sin.
    for (size_t i = 0; i < half; ++i) {
      const float angle = position * invFreq[i];
      const float c = std::cos(angle);
      const float s = std::sin(angle);
      const size_t a = form.interleaved ? 2 * i : i, b = form.interleaved ? 2 * i + 1 : i + half;
      for (size_t h = 0; h < heads; ++h) {
        float *xh = xr + h * form.headDim;
        const float first = xh[a];
        const float second = xh[b];
        xh[a] = first * c - second * s;
        xh[b] = second * c + first * s;
      }
    }
  }
}

namespace {

// quantizeInt8, with each element i handed to store(i, q) (a bf16 block stream scatters them).
template <typename Store> float quantizeInt8Each(const float *x, size_t n, Store store) {
  float largest = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float magnitude = std::abs(x[i]);
    // A NaN sticks, so that the row's scale is NaN and the attention shows it.
    largest = magnitude > largest || magnitude != magnitude ? magnitude : largest;
  }
  const float scale = largest / 127.0f;
  if (scale == 0.0f) {
    for (size_t i = 0; i < n; ++i)
      store(i, int8_t{0});
    return scale;
  }
  for (size_t i = 0; i < n; ++i) {
    // x / scale, not x * (127 / largest): the division a float32 reference does, bit for bit.
    // The clamp keeps a quotient that rounds past 127 in range. Adding and taking away 1.5 * 2^23
    // rounds it to an integer, half to even (the default rounding mode), without a libm call.
    // NaN (from a NaN or infinite row) stores 0 and leaves the row's scale to show it.
    const float quotient = std::min(std::max(x[i] / scale, -127.0f), 127.0f);
    const float rounded = (quotient + 0x1.8p23f) - 0x1.8p23f;
    store(i, rounded == rounded ? static_cast<int8_t>(rounded) : int8_t{0});
  }
  return scale;
}

} // namespace

float quantizeInt8(const float *x, size_t n, int8_t *q) {
  return quantizeInt8Each(x, n, [q](size_t i, int8_t value) { q[i] = value; });
}

void storeKvRow(const KvCacheView &cache, bool keys, size_t layer, size_t slot, size_t head,
                size_t pos, const float *row, size_t headDim) {
  switch (cache.element) {
  case KvElement::F32:
    std::memcpy(cache.at(keys, cache.elementOffset(keys, layer, slot, head, pos, 0)), row,
                headDim * sizeof(float));
    return;
  case KvElement::Bf16: {
    uint16_t *stream =
        static_cast<uint16_t *>(cache.at(keys, cache.streamOffset(layer, slot, head)));
    for (size_t d = 0; d < headDim; ++d)
      stream[keys ? kvBlockKeyIndex(pos, d, headDim) : kvBlockValueIndex(pos, d, headDim)] =
          floatToBf16(row[d]);
    return;
  }
  case KvElement::Int8: {
    int8_t *stream = static_cast<int8_t *>(cache.at(keys, cache.streamOffset(layer, slot, head)));
    cache.scales(keys)[cache.scaleOffset(layer, slot, head, pos)] =
        quantizeInt8Each(row, headDim, [&](size_t d, int8_t value) {
          stream[keys ? kvBlockKeyIndex(pos, d, headDim) : kvBlockValueIndex(pos, d, headDim)] =
              value;
        });
    return;
  }
  }
}

namespace {

// Copies between row-ordered elements and the cache, either way (rows are only read when
// copying in): a row at a time from a float32 stream, element by element through the blocks of
// a bf16 or int8 one.
template <bool kOut>
void copyKvRows(const KvCacheView &cache, bool keys, size_t layer, size_t slot, size_t head,
                size_t pos, size_t count, size_t headDim, char *rows) {
  if (!cache.blocks()) {
    const size_t rowBytes = headDim * cache.elementBytes();
    for (size_t t = 0; t < count; ++t) {
      char *row = rows + t * rowBytes;
      void *stored = cache.at(keys, cache.elementOffset(keys, layer, slot, head, pos + t, 0));
      if constexpr (kOut)
        std::memcpy(row, stored, rowBytes);
      else
        std::memcpy(stored, row, rowBytes);
    }
    return;
  }
  char *stream = static_cast<char *>(cache.at(keys, cache.streamOffset(layer, slot, head)));
  const size_t bytes = cache.elementBytes();
  for (size_t t = 0; t < count; ++t)
    for (size_t d = 0; d < headDim; ++d) {
      char *stored = stream + bytes * (keys ? kvBlockKeyIndex(pos + t, d, headDim)
                                            : kvBlockValueIndex(pos + t, d, headDim));
      char *element = rows + (t * headDim + d) * bytes;
      if constexpr (kOut)
        std::memcpy(element, stored, bytes);
      else
        std::memcpy(stored, element, bytes);
    }
}

} // namespace

void copyKvRowsOut(const KvCacheView &cache, bool keys, size_t layer, size_t slot, size_t head,
                   size_t pos, size_t count, size_t headDim, void *rows) {
  copyKvRows<true>(cache, keys, layer, slot, head, pos, count, headDim, static_cast<char *>(rows));
}

void copyKvRowsIn(const KvCacheView &cache, bool keys, size_t layer, size_t slot, size_t head,
                  size_t pos, size_t count, size_t headDim, const void *rows) {
  copyKvRows<false>(cache, keys, layer, slot, head, pos, count, headDim,
                    const_cast<char *>(static_cast<const char *>(rows)));
}

void kvAppend(const float *k, size_t kStride, const float *v, size_t vStride,
              const KvCacheView &cache, const AttentionShape &shape, const uint32_t *rowSlots,
              const uint32_t *rowPositions, size_t rowBegin, size_t rowEnd, size_t headBegin,
              size_t headEnd) {
  const size_t d = shape.headDim;
  for (size_t t = rowBegin; t < rowEnd; ++t)
    for (size_t g = headBegin; g < headEnd; ++g) {
      storeKvRow(cache, true, shape.layer, rowSlots[t], g, rowPositions[t], k + t * kStride + g * d,
                 d);
      storeKvRow(cache, false, shape.layer, rowSlots[t], g, rowPositions[t],
                 v + t * vStride + g * d, d);
    }
}

void add(const float *a, size_t aStride, const float *b, size_t bStride, size_t cols, float *y,
         size_t yStride, size_t rowBegin, size_t rowEnd) {
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    const float *ar = a + t * aStride;
    const float *br = b + t * bStride;
    float *yr = y + t * yStride;
    for (size_t i = 0; i < cols; ++i)
      yr[i] = ar[i] + br[i];
  }
}

namespace {

// f(v) of one element, the same operations in the same order for every caller.
inline float activate(ActivationFunction function, float v) {
  // sqrt(2 / pi) and 1 / sqrt(2), rounded to float as PyTorch's float kernels use them.
  constexpr float kTanhScale = 0.7978845608028654f;
  constexpr float kErfScale = 0.7071067811865476f;
  switch (function) {
  case ActivationFunction::Relu:
    return v > 0.0f ? v : 0.0f;
  case ActivationFunction::Gelu:
    return 0.5f * v * (1.0f + std::erf(v * kErfScale));
  case ActivationFunction::GeluTanh:
    return 0.5f * v * (1.0f + std::tanh(kTanhScale * (v + 0.044715f * (v * v * v))));
  case ActivationFunction::Silu:
    return v / (1.0f + std::exp(-v));
  case ActivationFunction::ReluSquared: {
    const float r = v > 0.0f ? v : 0.0f;
    return r * r;
  }
  }
  return v;
}

} // namespace

void activation(ActivationFunction function, const float *x, size_t xStride, size_t cols, float *y,
                size_t yStride, size_t rowBegin, size_t rowEnd) {
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    const float *xr = x + t * xStride;
    float *yr = y + t * yStride;
    for (size_t i = 0; i < cols; ++i)
      yr[i] = activate(function, xr[i]);
  }
}

void gated(ActivationFunction function, const float *gate, size_t gateStride, const float *up,
           size_t upStride, size_t cols, float *y, size_t yStride, size_t rowBegin, size_t rowEnd) {
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    const float *g = gate + t * gateStride;
    const float *u = up + t * upStride;
    float *yr = y + t * yStride;
    for (size_t i = 0; i < cols; ++i)
      yr[i] = activate(function, g[i]) * u[i];
  }
}

void scaleRows(float scale, float *y, size_t yStride, size_t cols, size_t rowBegin, size_t rowEnd) {
  for (size_t t = rowBegin; t < rowEnd; ++t) {
    float *yr = y + t * yStride;
    for (size_t i = 0; i < cols; ++i)
      yr[i] *= scale;
  }
}

void softCap(float cap, float *y, size_t count) {
  for (size_t i = 0; i < count; ++i)
    y[i] = std::tanh(y[i] / cap) * cap;
}

size_t argmaxFirst(const float *values, size_t count) {
  size_t best = 0;
  for (size_t i = 1; i < count; ++i)
    if (values[i] > values[best])
      best = i;
  return best;
}

} // namespace hetc::kernels
