#include "codegen/cpu/attention/Attention.h"

#include "codegen/cpu/linear/ActivationRows.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace hetc::kernels {
namespace {

// Scores of this many positions are computed before the running max and sum are updated: one
// rescale of the output per block instead of per position.
constexpr size_t kScoreBlock = 64;

size_t ceilDiv(uint64_t a, uint64_t b) { return static_cast<size_t>((a + b - 1) / b); }

// The last row r in [0, rows) with before[r] <= value, by binary search over the per-row
// prefix sums `before` (non-decreasing, before[0] == 0); 0 when rows is 0.
template <typename T> size_t lastRowAtOrBefore(const T *before, size_t rows, T value) {
  size_t low = 0, high = rows;
  while (high - low > 1) {
    const size_t middle = (low + high) / 2;
    if (before[middle] <= value)
      low = middle;
    else
      high = middle;
  }
  return low;
}

} // namespace

namespace {

inline float widen(uint16_t x) { return bf16ToFloat(x); }

// The online softmax of one head over positions [begin, end), as every portable kernel runs it:
// blocks of kScoreBlock scores, the output rescaled when the max grows (exp(-inf) = 0 on the first
// block, when the output and sum are still zero). blockScores(j0, n, scores) fills the scores of
// positions j0..j0+n; addRow(j, w, acc) adds the value row of position j for the weight
// w = exp(score - max) and returns what the sum adds. Writes the head's state.
template <typename BlockScores, typename AddRow>
void portableOnlineSoftmax(size_t d, size_t begin, size_t end, float *acc, BlockScores blockScores,
                           AddRow addRow) {
  std::fill(acc, acc + d, 0.0f);
  float runningMax = -std::numeric_limits<float>::infinity();
  float runningSum = 0.0f;
  for (size_t j0 = begin; j0 < end; j0 += kScoreBlock) {
    const size_t blockLength = std::min(kScoreBlock, end - j0);
    float scores[kScoreBlock];
    blockScores(j0, blockLength, scores);
    float blockMax = -std::numeric_limits<float>::infinity();
    for (size_t j = 0; j < blockLength; ++j)
      blockMax = std::max(blockMax, scores[j]);
    const float newMax = std::max(runningMax, blockMax);
    const float correction = std::exp(runningMax - newMax);
    runningSum *= correction;
    for (size_t i = 0; i < d; ++i)
      acc[i] *= correction;
    for (size_t j = 0; j < blockLength; ++j)
      runningSum += addRow(j0 + j, std::exp(scores[j] - newMax), acc);
    runningMax = newMax;
  }
  acc[d] = runningMax;
  acc[d + 1] = runningSum;
}

// ALiBi's bias: scores[j] += slope * (j0 + j), a float32 product and sum (AttentionChunkFn).
void addPositionBias(float slope, size_t j0, float *scores, size_t n) {
  for (size_t j = 0; j < n; ++j)
    scores[j] += slope * static_cast<float>(j0 + j);
}

// Over float32 rows: dot() in its fixed lane order, std::exp.
void attentionChunkPortableRows(const float *q, const float *keys, const float *values,
                                const float *, const float *, size_t posStride, size_t group,
                                size_t headDim, float scale, float softcap, const float *slopes,
                                size_t begin, size_t end, float *state) {
  const size_t d = headDim;
  for (size_t h = 0; h < group; ++h) {
    const float *qh = q + h * d;
    auto blockScores = [&](size_t j0, size_t n, float *scores) {
      for (size_t j = 0; j < n; ++j) {
        __builtin_prefetch(keys + (j0 + j + 4) * posStride);
        scores[j] = scale * dot(qh, keys + (j0 + j) * posStride, d);
      }
      if (softcap > 0)
        softCap(softcap, scores, n);
      if (slopes)
        addPositionBias(slopes[h], j0, scores, n);
    };
    auto addRow = [&](size_t j, float weight, float *acc) {
      const float *v = values + j * posStride;
      __builtin_prefetch(v + 4 * posStride);
      for (size_t i = 0; i < d; ++i)
        acc[i] += weight * v[i];
      return weight;
    };
    portableOnlineSoftmax(d, begin, end, state + h * (d + 2), blockScores, addRow);
  }
}

// Over the blocks of a bf16 cache, the arithmetic every bf16 block kernel shares, as vdpbf16ps
// does it: the query rounded to bf16 (to nearest even), scores as float32 sums of exact products,
// and each weight exp(score - max) rounded to bf16 before it multiplies its value row; the sum
// that divides the output adds those rounded weights. Sums run in this kernel's own order.
void attentionChunkPortableBf16(const float *q, const uint16_t *keys, const uint16_t *values,
                                const float *, const float *, size_t, size_t group, size_t headDim,
                                float scale, float softcap, const float *slopes, size_t begin,
                                size_t end, float *state) {
  const size_t d = headDim;
  for (size_t h = 0; h < group; ++h) {
    const float *qh = q + h * d;
    auto blockScores = [&](size_t j0, size_t n, float *scores) {
      std::fill(scores, scores + n, 0.0f);
      for (size_t i = 0; i < d; ++i) {
        const float qi = widen(floatToBf16(qh[i]));
        // Dim i of a block's positions: every second element of one line from its first.
        for (size_t j = 0; j < n;) {
          const uint16_t *k = keys + kvBlockKeyIndex(j0 + j, i, d);
          const size_t inBlock = std::min(n - j, kKvBlockPositions - (j0 + j) % kKvBlockPositions);
          for (size_t l = 0; l < inBlock; ++l)
            scores[j + l] += qi * widen(k[2 * l]);
          j += inBlock;
        }
      }
      for (size_t j = 0; j < n; ++j)
        scores[j] = scale * scores[j];
      if (softcap > 0)
        softCap(softcap, scores, n);
      if (slopes)
        addPositionBias(slopes[h], j0, scores, n);
    };
    auto addRow = [&](size_t j, float weight, float *acc) {
      const float rounded = widen(floatToBf16(weight));
      // A position's V elements are every second one from its first (pairs of positions).
      const uint16_t *v = values + kvBlockValueIndex(j, 0, d);
      for (size_t i = 0; i < d; ++i)
        acc[i] += rounded * widen(v[2 * i]);
      return rounded;
    };
    portableOnlineSoftmax(d, begin, end, state + h * (d + 2), blockScores, addRow);
  }
}

// quantizeAttentionQuery's exponent e of a head's query, and its int16 of one element.
int queryExponent(const float *q, size_t d) {
  float largest = std::numeric_limits<float>::min();
  for (size_t i = 0; i < d; ++i)
    largest = std::max(largest, std::abs(q[i]));
  return std::ilogb(largest);
}
int16_t queryWord(float x, int e) {
  return static_cast<int16_t>(std::min(std::nearbyint(std::ldexp(x, 14 - e)), 32767.0f));
}

// Head dims up to this many have their query's int16 on the stack and their dots in 32 bits
// (d * 2^15 * 2^7 < 2^31); larger heads take each element's int16 again for each block (so that
// no step allocates) and sum in 64 bits. Either gives the integers of Attention.h.
constexpr size_t kPortableQueryWords = 256;

// Over the blocks of an int8 cache: the integer arithmetic of Attention.h, block by block of the
// cache's 16 positions.
template <typename Sum>
void portableInt8Heads(const float *q, const int8_t *keys, const int8_t *values,
                       const float *keyScales, const float *valueScales, size_t group, size_t d,
                       float scale, float softcap, const float *slopes, size_t begin, size_t end,
                       float *state) {
  constexpr bool kStored = std::is_same_v<Sum, int32_t>;
  int16_t stored[kStored ? kPortableQueryWords : 1];
  for (size_t h = 0; h < group; ++h) {
    const float *qh = q + h * d;
    const int queryE = queryExponent(qh, d);
    const float factor = std::ldexp(scale, queryE - 14);
    if constexpr (kStored)
      for (size_t i = 0; i < d; ++i)
        stored[i] = queryWord(qh[i], queryE);
    float *acc = state + h * (d + 2);
    std::fill(acc, acc + d, 0.0f);
    float runningMax = -std::numeric_limits<float>::infinity();
    float runningSum = 0.0f;
    for (size_t j0 = begin / kKvBlockPositions * kKvBlockPositions; j0 < end;
         j0 += kKvBlockPositions) {
      // The block's positions in [begin, end): j0 + [first, n).
      const size_t first = std::max(begin, j0) - j0;
      const size_t n = std::min(kKvBlockPositions, end - j0);
      Sum dots[kKvBlockPositions] = {};
      for (size_t i = 0; i < d; ++i) {
        const Sum word = kStored ? stored[i] : queryWord(qh[i], queryE);
        // Dim i of the block's positions: every second element of one line from its first.
        const int8_t *line = keys + kvBlockKeyIndex(j0, i, d);
        for (size_t l = first; l < n; ++l)
          dots[l] += word * line[2 * l];
      }
      float scores[kKvBlockPositions];
      float blockMax = -std::numeric_limits<float>::infinity();
      for (size_t l = first; l < n; ++l) {
        scores[l] = static_cast<float>(dots[l]) * (keyScales[j0 + l] * factor);
        if (softcap > 0)
          softCap(softcap, scores + l, 1);
        if (slopes)
          addPositionBias(slopes[h], j0 + l, scores + l, 1);
        blockMax = std::max(blockMax, scores[l]);
      }
      if (blockMax > runningMax) {
        // exp(-inf) = 0 on the first block, when the output and sum are still zero.
        const float correction = std::exp(runningMax - blockMax);
        for (size_t i = 0; i < d; ++i)
          acc[i] *= correction;
        runningSum *= correction;
        runningMax = blockMax;
      }
      float scaled[kKvBlockPositions];
      float largest = 0x1.0p-112f;
      for (size_t l = first; l < n; ++l) {
        const float w = std::exp(scores[l] - runningMax);
        runningSum += w;
        scaled[l] = w * valueScales[j0 + l];
        largest = std::max(largest, scaled[l]);
      }
      const int e = std::ilogb(largest);
      // x * 2^(14 - e) and float(sum) * 2^(e - 14) by exact powers of two (normal floats for
      // e >= -112), which round as ldexp would; x * 2^(14 - e) in [0, 2^15) rounded to nearest
      // even by adding and taking away 2^23.
      const float up = std::ldexp(1.0f, 14 - e), down = std::ldexp(1.0f, e - 14);
      int32_t words[kKvBlockPositions];
      const int8_t *rows[kKvBlockPositions];
      for (size_t l = first; l < n; ++l) {
        const float rounded = (scaled[l] * up + 0x1.0p23f) - 0x1.0p23f;
        words[l] = static_cast<int32_t>(std::min(rounded, 32767.0f));
        rows[l] = values + kvBlockValueIndex(j0 + l, 0, d);
      }
      // A position's V elements are every second one from its first (pairs of positions);
      // |sum| < 2^26: 32 bits for any head size.
      for (size_t i = 0; i < d; ++i) {
        int32_t sum = 0;
        for (size_t l = first; l < n; ++l)
          sum += words[l] * rows[l][2 * i];
        acc[i] += static_cast<float>(sum) * down;
      }
    }
    acc[d] = runningMax;
    acc[d + 1] = runningSum;
  }
}

void attentionChunkPortableInt8(const float *q, const int8_t *keys, const int8_t *values,
                                const float *keyScales, const float *valueScales, size_t,
                                size_t group, size_t headDim, float scale, float softcap,
                                const float *slopes, size_t begin, size_t end, float *state) {
  if (headDim <= kPortableQueryWords)
    portableInt8Heads<int32_t>(q, keys, values, keyScales, valueScales, group, headDim, scale,
                               softcap, slopes, begin, end, state);
  else
    portableInt8Heads<int64_t>(q, keys, values, keyScales, valueScales, group, headDim, scale,
                               softcap, slopes, begin, end, state);
}

void attentionMergePortable(float *into, const float *next, size_t group, size_t headDim) {
  const size_t d = headDim;
  for (size_t h = 0; h < group; ++h) {
    float *a = into + h * (d + 2);
    const float *b = next + h * (d + 2);
    // The side holding the larger max keeps its values (a factor of exp(0) = 1 is exact), so
    // only the other side is rescaled.
    if (a[d] >= b[d]) {
      const float factor = std::exp(b[d] - a[d]);
      for (size_t i = 0; i < d; ++i)
        a[i] = a[i] + b[i] * factor;
      a[d + 1] = a[d + 1] + b[d + 1] * factor;
    } else {
      const float factor = std::exp(a[d] - b[d]);
      for (size_t i = 0; i < d; ++i)
        a[i] = a[i] * factor + b[i];
      a[d + 1] = a[d + 1] * factor + b[d + 1];
      a[d] = b[d];
    }
  }
}

} // namespace

float quantizeAttentionQuery(const float *q, size_t d, float scale, int16_t *out) {
  const int e = queryExponent(q, d);
  for (size_t i = 0; i < d; ++i)
    out[i] = queryWord(q[i], e);
  return std::ldexp(scale, e - 14);
}

const AttentionChunkKernel kAttentionChunkPortable = {
    &attentionChunkPortableRows, &attentionChunkPortableBf16, &attentionChunkPortableInt8,
    &attentionMergePortable};

void attentionFinish(const float *state, size_t group, size_t headDim, float *out) {
  const size_t d = headDim;
  for (size_t h = 0; h < group; ++h) {
    const float *acc = state + h * (d + 2);
    const float inverseSum = 1.0f / acc[d + 1];
    for (size_t i = 0; i < d; ++i)
      out[h * d + i] = acc[i] * inverseSum;
  }
}

void AttentionSplit::reserve(size_t maxRows, size_t kvHeads, size_t chunkPositions,
                             size_t stateCapacity) {
  maxRows_ = maxRows;
  kvHeads_ = std::max<size_t>(kvHeads, 1);
  chunkPositions_ = std::max<size_t>(chunkPositions, 1);
  stateCapacity_ = stateCapacity;
  rows_ = 0;
  splitRowCount_ = 0;
  statesUsed_ = 0;
  positions_.reset(new uint64_t[maxRows]());
  first_.reset(new uint64_t[maxRows]());
  chunks_.reset(new size_t[maxRows]());
  stateFirst_.reset(new size_t[maxRows]());
  unitsBefore_.reset(new size_t[maxRows + 1]());
  splitRows_.reset(new uint32_t[maxRows]());
}

void AttentionSplit::cut(const uint32_t *rowPositions, size_t rows, bool splitRows,
                         size_t window) {
  rows_ = std::min(rows, maxRows_);
  splitRowCount_ = 0;
  statesUsed_ = 0;
  unitsBefore_[0] = 0;
  for (size_t t = 0; t < rows_; ++t) {
    const uint64_t positions = static_cast<uint64_t>(rowPositions[t]) + 1;
    const uint64_t first = window != 0 && positions > window ? positions - window : 0;
    const size_t chunks = ceilDiv(positions, chunkPositions_) - first / chunkPositions_;
    positions_[t] = positions;
    first_[t] = first;
    chunks_[t] = chunks;
    const size_t states = kvHeads_ * chunks;
    size_t units = kvHeads_;
    stateFirst_[t] = kWhole;
    if (splitRows && chunks > 1 && states <= stateCapacity_ - statesUsed_) {
      stateFirst_[t] = statesUsed_;
      statesUsed_ += states;
      splitRows_[splitRowCount_++] = static_cast<uint32_t>(t);
      units = states;
    }
    unitsBefore_[t + 1] = unitsBefore_[t] + units;
  }
}

size_t AttentionSplit::rowOfUnit(size_t unit) const {
  // The last row whose units start at or before `unit`; rows have at least one unit each.
  return lastRowAtOrBefore(unitsBefore_.get(), rows_, unit);
}

void attentionUnits(const AttentionChunkKernel &chunk, const AttentionSplit &split,
                    const AttentionOperands &op, size_t unitBegin, size_t unitEnd, float *partials,
                    float *work) {
  if (unitBegin >= unitEnd)
    return;
  const AttentionShape &shape = op.shape;
  const size_t d = shape.headDim;
  const size_t group = shape.heads / shape.kvHeads;
  const size_t stateFloats = attentionStateFloats(group, d);
  const size_t chunkPositions = split.chunkPositions();
  size_t row = split.rowOfUnit(unitBegin);
  for (size_t unit = unitBegin; unit < unitEnd; ++unit) {
    while (unit >= split.unitsBefore(row + 1))
      ++row;
    const size_t local = unit - split.unitsBefore(row);
    const size_t chunks = split.chunks(row);
    const size_t positions = static_cast<size_t>(split.positions(row));
    const size_t first = static_cast<size_t>(split.first(row));
    const size_t firstChunk = split.firstChunk(row);
    const size_t head = split.split(row) ? local / chunks : local;
    const size_t base = op.cache.streamOffset(shape.layer, op.rowSlots[row], head);
    const void *keys = op.cache.at(true, base);
    const void *values = op.cache.at(false, base);
    const float *q = op.q + row * op.qStride + head * group * d;
    const float *slopes = shape.slopes ? shape.slopes + head * group : nullptr;
    // Chunk c (counted from the row's first) covers its part of [first, positions).
    auto runChunk = [&](size_t c, float *state) {
      const size_t start = (firstChunk + c) * chunkPositions;
      const size_t begin = std::max(first, start);
      const size_t end = std::min(positions, start + chunkPositions);
      switch (op.cache.element) {
      case KvElement::F32:
        chunk.f32(q, static_cast<const float *>(keys), static_cast<const float *>(values), nullptr,
                  nullptr, op.cache.posStride, group, d, shape.scale, shape.softcap, slopes, begin, end, state);
        return;
      case KvElement::Bf16:
        chunk.bf16(q, static_cast<const uint16_t *>(keys), static_cast<const uint16_t *>(values),
                   nullptr, nullptr, op.cache.posStride, group, d, shape.scale, shape.softcap, slopes, begin, end, state);
        return;
      case KvElement::Int8: {
        const size_t scaleBase = op.cache.scaleOffset(shape.layer, op.rowSlots[row], head, 0);
        chunk.int8(q, static_cast<const int8_t *>(keys), static_cast<const int8_t *>(values),
                   op.cache.keyScales + scaleBase, op.cache.valueScales + scaleBase,
                   op.cache.posStride, group, d, shape.scale, shape.softcap, slopes, begin, end, state);
        return;
      }
      }
    };
    if (split.split(row)) {
      runChunk(local % chunks, partials + (split.stateFirst(row) + local) * stateFloats);
      continue;
    }
    // The whole row: the same chunks and the same merges as a split row's, in one place.
    float *merged = work;
    float *next = work + stateFloats;
    for (size_t c = 0; c < chunks; ++c) {
      runChunk(c, c == 0 ? merged : next);
      if (c > 0)
        chunk.merge(merged, next, group, d);
    }
    attentionFinish(merged, group, d, op.out + row * op.outStride + head * group * d);
  }
}

void attentionClaimedUnits(const AttentionChunkKernel &chunk, const AttentionSplit &split,
                           const AttentionOperands &op, std::atomic<size_t> &claimed,
                           unsigned threads, float *partials, float *work) {
  const size_t units = split.unitCount();
  size_t first = claimed.load(std::memory_order_relaxed);
  while (first < units) {
    const size_t take = std::max<size_t>(1, (units - first) / (2 * size_t{threads}));
    if (!claimed.compare_exchange_weak(first, first + take, std::memory_order_relaxed))
      continue; // `first` now holds what another thread left
    attentionUnits(chunk, split, op, first, first + take, partials, work);
    first = claimed.load(std::memory_order_relaxed);
  }
}

void attentionMergeItems(const AttentionChunkKernel &chunk, const AttentionSplit &split,
                         const AttentionOperands &op, size_t itemBegin, size_t itemEnd,
                         float *partials) {
  const AttentionShape &shape = op.shape;
  const size_t d = shape.headDim;
  const size_t group = shape.heads / shape.kvHeads;
  const size_t stateFloats = attentionStateFloats(group, d);
  for (size_t item = itemBegin; item < itemEnd; ++item) {
    const size_t row = split.splitRow(item / split.kvHeads());
    const size_t head = item % split.kvHeads();
    const size_t chunks = split.chunks(row);
    float *merged = partials + (split.stateFirst(row) + head * chunks) * stateFloats;
    for (size_t c = 1; c < chunks; ++c)
      chunk.merge(merged, merged + c * stateFloats, group, d);
    attentionFinish(merged, group, d, op.out + row * op.outStride + head * group * d);
  }
}

} // namespace hetc::kernels
