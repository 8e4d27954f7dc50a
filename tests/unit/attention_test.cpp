// Attention over the KV cache: the chunk kernel of every instruction set and KV element type
// (float32, bf16, int8 with row scales) against a plain double-precision softmax written here on
// the values the cache holds (an int8 row dequantised), over head sizes, GQA groups, chunk sizes
// and contexts that are not multiples of anything (1 to 2999 positions), with the positions after
// a row's own poisoned with NaN and the output poisoned too; then the position split: the same
// bits for one, two and three threads, for any capacity of split rows, and balanced unit
// boundaries.
#include "LongTailedRandom.h"
#include "TestKvCache.h"

#include "codegen/cpu/attention/Attention.h"
#include "codegen/cpu/vector/VectorKernels.h"
#include "hplan_generated.h"
#include "runtime/executor/ThreadPool.h"
#include "runtime/platform/CpuFeatures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace hetc::kernels {
namespace {

using test::LongTailedRandom;
using test::TestKvCache;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The kernel sets to test; AVX-512 only where the host runs it.
struct KernelSetCase {
  const char *name;
  const VectorKernels *kernels;
};

bool hostHas(plan::CpuFeatureBits features) {
  return (hostCpuFeatures() & static_cast<uint64_t>(features)) == static_cast<uint64_t>(features);
}
bool hostRunsAvx512() {
  return avx512VectorKernels() &&
         hostHas(plan::CpuFeatureBits::AVX512F | plan::CpuFeatureBits::AVX512BW);
}
bool hostRunsAvx512Bf16() {
  return hostRunsAvx512() && avx512Bf16VectorKernels() &&
         hostHas(plan::CpuFeatureBits::AVX512_BF16 | plan::CpuFeatureBits::AVX512_VNNI);
}

// Every set the host runs, not only the one the engine picks: the AVX-512 set's bf16 and int8
// kernels (pair products as multiply-adds, vpmaddwd) are what hosts without AVX-512 BF16 and
// VNNI run.
std::vector<KernelSetCase> kernelSets() {
  std::vector<KernelSetCase> sets = {{"portable", &portableVectorKernels()}};
  if (hostRunsAvx512())
    sets.push_back({"avx512", avx512VectorKernels()});
  if (hostRunsAvx512Bf16())
    sets.push_back({"avx512-bf16", avx512Bf16VectorKernels()});
  return sets;
}

// Runs the attention of `rows` rows the way the engine does, on one thread: the units of the
// cut in order, then the merges.
void runAttention(const VectorKernels &kernels, const AttentionOperands &op,
                  const uint32_t *positions, size_t rows, size_t chunkPositions, bool splitRows,
                  size_t stateCapacity = SIZE_MAX, size_t window = 0) {
  AttentionSplit split;
  size_t states = 0;
  for (size_t t = 0; t < rows; ++t)
    states += op.shape.kvHeads * ((positions[t] + chunkPositions) / chunkPositions);
  split.reserve(rows, op.shape.kvHeads, chunkPositions, std::min(states, stateCapacity));
  split.cut(positions, rows, splitRows, window);
  const size_t stateFloats =
      attentionStateFloats(op.shape.heads / op.shape.kvHeads, op.shape.headDim);
  std::vector<float> partials(std::max<size_t>(split.statesUsed(), 1) * stateFloats, kNaN);
  std::vector<float> work(2 * stateFloats, kNaN);
  attentionUnits(kernels.attentionChunk, split, op, 0, split.unitCount(), partials.data(),
                 work.data());
  attentionMergeItems(kernels.attentionChunk, split, op, 0, split.mergeItemCount(),
                      partials.data());
}

struct HeadShape {
  size_t heads, kvHeads, headDim;
};

const char *elementName(KvElement element) {
  return element == KvElement::F32 ? "f32" : element == KvElement::Bf16 ? "bf16" : "int8";
}

std::string describe(const HeadShape &s) {
  return std::to_string(s.heads) + "/" + std::to_string(s.kvHeads) + " heads of " +
         std::to_string(s.headDim);
}

// The query of one head as Attention.h defines it for an int8 cache, from its formulas: q'[i] =
// rint(q[i] * 2^(14 - e)) (2^15 kept as 32767), e = ilogb(max(max|q|, FLT_MIN)); returns q'[i] *
// 2^(e - 14), the query the integer dots take, as doubles.
std::vector<double> int16Query(const float *q, size_t d) {
  double largest = std::numeric_limits<float>::min();
  for (size_t i = 0; i < d; ++i)
    largest = std::max(largest, std::abs(double(q[i])));
  const int e = std::ilogb(largest);
  std::vector<double> out(d);
  for (size_t i = 0; i < d; ++i)
    out[i] =
        std::ldexp(std::min(std::nearbyint(std::ldexp(double(q[i]), 14 - e)), 32767.0), e - 14);
  return out;
}

// The attention of one row in double over positions [first, length) of `slot` (layer 1) of the
// cache, on the query as the kernels over a bf16 or int8 cache's blocks take it (bf16; int16 as
// int16Query): the output and, per element, the sum of |weight * value| its error scales with.
// Over int8, `quantization` gets the bound of what quantizing the weights moves each element: a
// weight u = rint(x * 2^(14-e)) is off by at most 1/2, i.e. by 2^(e-15) <= 2^-15 * M of x, M the
// largest scaled weight x = w * s_v of its block of 16 positions; the element moves by that times
// the int8 element of V, over the sum of the weights. (The kernels take their weights from a
// running max, which scales a block's x and its M alike.) With `softcap`, each scaled score s is
// softcap * tanh(s / softcap); with `slopes` (ALiBi), head h's score of position j gains
// slopes[h] * j.
void referenceAttention(const TestKvCache &cache, uint32_t slot, const float *q,
                        const HeadShape &hs, float scale, KvElement element, size_t first,
                        size_t length, std::vector<double> &want, std::vector<double> &magnitude,
                        std::vector<double> &quantization, double softcap = 0,
                        const float *slopes = nullptr) {
  const size_t d = hs.headDim, group = hs.heads / hs.kvHeads;
  want.assign(hs.heads * d, 0.0);
  magnitude.assign(hs.heads * d, 0.0);
  quantization.assign(hs.heads * d, 0.0);
  for (size_t h = 0; h < hs.heads; ++h) {
    const size_t g = h / group;
    std::vector<double> query(q + h * d, q + h * d + d);
    if (element == KvElement::Bf16)
      for (size_t i = 0; i < d; ++i)
        query[i] = bf16ToFloat(floatToBf16(q[h * d + i]));
    if (element == KvElement::Int8)
      query = int16Query(q + h * d, d);
    std::vector<double> scores(length - first);
    double maxScore = -1e300, sum = 0;
    for (size_t j = first; j < length; ++j) {
      double s = 0;
      for (size_t i = 0; i < d; ++i)
        s += query[i] * cache.key(1, slot, g, j, i);
      scores[j - first] = softcap > 0 ? softcap * std::tanh(s * scale / softcap) : s * scale;
      if (slopes)
        scores[j - first] += double(slopes[h]) * double(j);
      maxScore = std::max(maxScore, scores[j - first]);
    }
    for (double &s : scores)
      sum += (s = std::exp(s - maxScore));
    for (size_t i = 0; i < d; ++i)
      for (size_t j = first; j < length; ++j) {
        const double vj = cache.value(1, slot, g, j, i);
        want[h * d + i] += scores[j - first] / sum * vj;
        magnitude[h * d + i] += scores[j - first] / sum * std::abs(vj);
      }
    if (element != KvElement::Int8)
      continue;
    for (size_t b0 = first / kKvBlockPositions * kKvBlockPositions; b0 < length;
         b0 += kKvBlockPositions) {
      const size_t b1 = std::min(length, b0 + kKvBlockPositions);
      double largest = 0;
      for (size_t j = std::max(first, b0); j < b1; ++j)
        largest = std::max(largest, scores[j - first] * cache.scale(false, 1, slot, g, j));
      for (size_t i = 0; i < d; ++i)
        for (size_t j = std::max(first, b0); j < b1; ++j)
          quantization[h * d + i] += 0x1.0p-15 * largest / sum *
                                     std::abs(double(cache.quantized(false, 1, slot, g, j, i)));
    }
  }
}

TEST(AttentionTest, ChunkKernelsMatchSoftmaxReference) {
  // Head sizes around the 16-lane vectors (8, 24, 40, 200 have tails; 200 is past the sizes
  // held in registers); groups of 1, 3, 4, 8 and 20 (past one pass of 16 heads).
  const std::vector<HeadShape> shapes = {{3, 1, 24}, {6, 2, 24},   {8, 2, 64},  {4, 4, 16},
                                         {1, 1, 8},  {16, 2, 128}, {20, 1, 40}, {2, 1, 200}};
  const std::vector<size_t> lengths = {1, 2, 15, 16, 17, 100, 255, 256, 257, 700, 1029, 2999};
  // The engine's chunk, one of three 16-position blocks, and two that split blocks (37 also starts
  // chunks at odd positions, inside a pair of positions of a bf16 V block).
  const std::vector<size_t> chunkSizes = {kAttentionChunkPositions, 48, 40, 37};
  const size_t maxLength = 2999, poisonAfter = 40;
  for (const KvElement element : {KvElement::F32, KvElement::Bf16, KvElement::Int8})
    for (const KernelSetCase &set : kernelSets())
      for (const HeadShape &hs : shapes) {
        const size_t d = hs.headDim;
        LongTailedRandom random(static_cast<uint32_t>(hs.heads * 131 + d));
        TestKvCache cache(hs.kvHeads, d, maxLength + poisonAfter, 2, element);
        cache.fill(random, 1, 1, hs.kvHeads, maxLength);
        const size_t qStride = hs.heads * d + 5, outStride = hs.heads * d + 9;
        std::vector<float> q(qStride);
        for (float &e : q)
          e = random.next(4.0f);
        const uint32_t slot = 1;
        AttentionOperands op;
        op.q = q.data();
        op.qStride = qStride;
        op.outStride = outStride;
        op.cache = cache.view;
        op.shape = AttentionShape{1, hs.heads, hs.kvHeads, d, 1.0f / std::sqrt(float(d))};
        op.rowSlots = &slot;
        // ALiBi's slopes, of either sign and up to a bias of about 90 at the longest length.
        std::vector<float> slopes(hs.heads);
        for (float &slope : slopes)
          slope = 0.03f * random.next(1.0f);

        for (size_t length : lengths) {
          // Soft-capped scores (Gemma 2's) on every other length, so that every kernel runs both;
          // a cap of 10 bends the scores here (up to ~50) hard. ALiBi on two lengths in three,
          // with and without the cap.
          op.shape.softcap = length % 2 ? 10.0f : 0.0f;
          op.shape.slopes = length % 3 != 1 ? slopes.data() : nullptr;
          // Positions past the row's own are NaN for a while (int8 rows through their scales):
          // reading one shows in the output.
          for (size_t g = 0; g < hs.kvHeads; ++g)
            for (size_t p = length; p < length + poisonAfter; ++p)
              cache.poison(1, slot, g, p);

          // The reference in double, on the query as the kernels over a bf16 or int8 cache's
          // blocks round it.
          std::vector<double> want, magnitude, quantization;
          referenceAttention(cache, slot, q.data(), hs, op.shape.scale, element, 0, length, want,
                             magnitude, quantization, op.shape.softcap, op.shape.slopes);

          const uint32_t position = static_cast<uint32_t>(length - 1);
          for (size_t chunk : chunkSizes) {
            const std::string what = std::string(set.name) + " " + elementName(element) + " KV " +
                                     describe(hs) + " length " + std::to_string(length) +
                                     " chunk " + std::to_string(chunk) + " softcap " +
                                     std::to_string(op.shape.softcap) +
                                     (op.shape.slopes ? " ALiBi" : "");
            std::vector<float> split(outStride, kNaN), whole(outStride, kNaN);
            op.out = split.data();
            runAttention(*set.kernels, op, &position, 1, chunk, true);
            op.out = whole.data();
            runAttention(*set.kernels, op, &position, 1, chunk, false);
            bool anyNonZero = false;
            for (size_t e = 0; e < hs.heads * d; ++e) {
              ASSERT_FALSE(std::isnan(split[e])) << what << ": element " << e << " is NaN";
              anyNonZero = anyNonZero || split[e] != 0.0f;
              // Softmax in float32: a score error of a few ulps of |score| (up to ~50 here) moves
              // weights by ~1e-5 relative. Over bf16 blocks each weight is also rounded to bf16
              // (2^-9 relative) in the sum and in the division alike, which moves the output by up
              // to 2^-8 of the magnitude; over int8 the scores are the reference's to float32
              // rounding and the weights' quantization moves the output by at most
              // `quantization`.
              const double tolerance = element == KvElement::Bf16 ? 0x1.0p-8 : 3e-5;
              ASSERT_LE(std::abs(split[e] - want[e]),
                        tolerance * magnitude[e] + quantization[e] + 1e-30)
                  << what << ": element " << e << " is " << split[e] << ", reference " << want[e];
            }
            ASSERT_TRUE(anyNonZero) << what << ": the output is all zeros";
            ASSERT_EQ(std::memcmp(split.data(), whole.data(), outStride * sizeof(float)), 0)
                << what << ": a split row and a whole row differ (or the padding was written)";
            for (size_t e = hs.heads * d; e < outStride; ++e)
              ASSERT_TRUE(std::isnan(split[e])) << what << ": wrote past the row";
          }
          cache.restorePoisoned();
        }
      }
}

// A sliding window of W keys: a row at position p attends to p-W+1..p only. Windows of 1 key, of
// less than a block, across chunk boundaries and wider than the context; the positions before the
// window and after the row are NaN, so reading one shows; split and whole rows agree bit for bit.
TEST(AttentionTest, SlidingWindowAttendsToTheLastPositionsOnly) {
  const std::vector<HeadShape> shapes = {{3, 1, 24}, {8, 2, 64}};
  const std::vector<size_t> lengths = {1, 17, 257, 1029};
  const std::vector<size_t> windows = {1, 5, 16, 37, 600, 5000};
  const std::vector<size_t> chunkSizes = {kAttentionChunkPositions, 48, 37};
  const size_t maxLength = 1029, poisonAfter = 40;
  for (const KvElement element : {KvElement::F32, KvElement::Bf16, KvElement::Int8})
    for (const KernelSetCase &set : kernelSets())
      for (const HeadShape &hs : shapes) {
        const size_t d = hs.headDim;
        LongTailedRandom random(static_cast<uint32_t>(hs.heads * 17 + d));
        TestKvCache cache(hs.kvHeads, d, maxLength + poisonAfter, 2, element);
        const size_t qStride = hs.heads * d, outStride = hs.heads * d + 3;
        std::vector<float> q(qStride);
        for (float &e : q)
          e = random.next(4.0f);
        const uint32_t slot = 1;
        AttentionOperands op;
        op.q = q.data();
        op.qStride = qStride;
        op.outStride = outStride;
        op.cache = cache.view;
        op.shape = AttentionShape{1, hs.heads, hs.kvHeads, d, 1.0f / std::sqrt(float(d))};
        op.rowSlots = &slot;
        for (size_t length : lengths)
          for (size_t window : windows) {
            const size_t first = length > window ? length - window : 0;
            cache.fill(random, 1, 1, hs.kvHeads, maxLength);
            for (size_t g = 0; g < hs.kvHeads; ++g) {
              for (size_t p = 0; p < first; ++p)
                cache.poison(1, slot, g, p);
              for (size_t p = length; p < length + poisonAfter; ++p)
                cache.poison(1, slot, g, p);
            }
            std::vector<double> want, magnitude, quantization;
            referenceAttention(cache, slot, q.data(), hs, op.shape.scale, element, first, length,
                               want, magnitude, quantization);
            const uint32_t position = static_cast<uint32_t>(length - 1);
            for (size_t chunk : chunkSizes) {
              const std::string what = std::string(set.name) + " " + elementName(element) +
                                       " KV " + describe(hs) + " length " +
                                       std::to_string(length) + " window " +
                                       std::to_string(window) + " chunk " + std::to_string(chunk);
              std::vector<float> split(outStride, kNaN), whole(outStride, kNaN);
              op.out = split.data();
              runAttention(*set.kernels, op, &position, 1, chunk, true, SIZE_MAX, window);
              op.out = whole.data();
              runAttention(*set.kernels, op, &position, 1, chunk, false, SIZE_MAX, window);
              const double tolerance = element == KvElement::Bf16 ? 0x1.0p-8 : 3e-5;
              for (size_t e = 0; e < hs.heads * d; ++e)
                ASSERT_LE(std::abs(split[e] - want[e]),
                          tolerance * magnitude[e] + quantization[e] + 1e-30)
                    << what << ": element " << e << " is " << split[e] << ", reference "
                    << want[e];
              ASSERT_EQ(std::memcmp(split.data(), whole.data(), outStride * sizeof(float)), 0)
                  << what << ": a split row and a whole row differ (or the padding was written)";
            }
            cache.restorePoisoned();
          }
      }
}

// vcvtne2ps2bf16 and floatToBf16 round a float32 denormal to a zero of its sign; so must every
// set's bf16 weights. One position scores 90 above 31 others whose values are 1e38: their
// weights, exp(-90) = 8.2e-40, are denormal; kept, they would make the output 3.55, not 1.
TEST(AttentionTest, DenormalWeightsRoundToZeroInEverySet) {
  const size_t d = 16, length = 32;
  TestKvCache cache(1, d, length, 2, KvElement::Bf16);
  std::vector<float> k(d, 0.0f), v(d, 0.0f);
  for (size_t p = 0; p < length; ++p) {
    k[0] = p == 0 ? 180.0f : -180.0f; // scores +45 and -45 at scale 1/4
    v[0] = p == 0 ? 1.0f : 1e38f;
    cache.setRow(1, 1, 0, p, k.data(), v.data());
  }
  std::vector<float> q(d, 0.0f);
  q[0] = 1.0f;
  const uint32_t slot = 1, position = length - 1;
  AttentionOperands op;
  op.q = q.data();
  op.qStride = d;
  op.outStride = d;
  op.cache = cache.view;
  op.shape = AttentionShape{1, 1, 1, d, 0.25f};
  op.rowSlots = &slot;
  for (const KernelSetCase &set : kernelSets()) {
    std::vector<float> out(d, kNaN);
    op.out = out.data();
    runAttention(*set.kernels, op, &position, 1, kAttentionChunkPositions, false);
    EXPECT_EQ(out[0], 1.0f) << set.name;
    for (size_t i = 1; i < d; ++i)
      EXPECT_EQ(out[i], 0.0f) << set.name << " element " << i;
  }
}

// Phases of the pool for attentionWithThreads.
struct PoolAttention {
  const VectorKernels *kernels;
  const AttentionSplit *split;
  AttentionOperands op;
  float *partials;
  float *work;
  size_t stateFloats;
  std::atomic<size_t> *claimed; // 0 before the phases run
};

void poolAttentionPhase(void *context, size_t phase, unsigned thread, unsigned threads) {
  const PoolAttention &p = *static_cast<const PoolAttention *>(context);
  if (phase == 0) {
    attentionClaimedUnits(p.kernels->attentionChunk, *p.split, p.op, *p.claimed, threads,
                          p.partials, p.work + thread * 2 * p.stateFloats);
    return;
  }
  const size_t items = p.split->mergeItemCount();
  attentionMergeItems(p.kernels->attentionChunk, *p.split, p.op, items * thread / threads,
                      items * (thread + 1) / threads, p.partials);
}

// The engine's two phases on `threads` real threads, every row split, units claimed as the
// engine claims them.
void attentionWithThreads(const VectorKernels &kernels, const AttentionOperands &op,
                          const std::vector<uint32_t> &positions, unsigned threads) {
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::create(threads, false);
  ASSERT_TRUE(pool.ok()) << pool.message();
  AttentionSplit split;
  size_t states = 0;
  for (uint32_t p : positions)
    states += op.shape.kvHeads * (p / kAttentionChunkPositions + 1);
  split.reserve(positions.size(), op.shape.kvHeads, kAttentionChunkPositions, states);
  split.cut(positions.data(), positions.size(), true);
  const size_t stateFloats =
      attentionStateFloats(op.shape.heads / op.shape.kvHeads, op.shape.headDim);
  std::vector<float> partials(states * stateFloats, kNaN), work(2 * threads * stateFloats, kNaN);
  std::atomic<size_t> claimed{0};
  PoolAttention context{&kernels, &split, op, partials.data(), work.data(), stateFloats, &claimed};
  pool.value()->run(2, &poolAttentionPhase, &context);
}

void checkBitsDoNotDependOnThreadsOrSplit(KvElement element);

TEST(AttentionTest, BitsDoNotDependOnThreadsOrSplit) {
  for (const KvElement element : {KvElement::F32, KvElement::Bf16, KvElement::Int8}) {
    SCOPED_TRACE(std::string(elementName(element)) + " KV");
    checkBitsDoNotDependOnThreadsOrSplit(element);
  }
}

void checkBitsDoNotDependOnThreadsOrSplit(KvElement element) {
  const HeadShape hs{6, 2, 24}; // 3 query heads per KV head
  const size_t d = hs.headDim;
  LongTailedRandom random(11);
  TestKvCache cache(hs.kvHeads, d, 3000, 2, element);
  cache.fill(random, 1, 0, hs.kvHeads, 3000);
  cache.fill(random, 1, 1, hs.kvHeads, 3000);
  // One long sequence decoding alone, then a batch: the long one beside a short and a middle
  // one (different slots), so unit boundaries fall inside and between rows.
  const std::vector<std::vector<uint32_t>> steps = {{2999}, {2999, 0, 699}};
  const std::vector<std::vector<uint32_t>> stepSlots = {{0}, {0, 1, 1}};
  for (const KernelSetCase &set : kernelSets())
    for (size_t s = 0; s < steps.size(); ++s) {
      const std::vector<uint32_t> &positions = steps[s];
      const size_t rows = positions.size(), cols = hs.heads * d;
      std::vector<float> q(rows * cols);
      for (float &e : q)
        e = random.next(4.0f);
      AttentionOperands op;
      op.q = q.data();
      op.qStride = cols;
      op.outStride = cols;
      op.cache = cache.view;
      op.shape = AttentionShape{1, hs.heads, hs.kvHeads, d, 1.0f / std::sqrt(float(d))};
      op.rowSlots = stepSlots[s].data();

      std::vector<float> expected(rows * cols, kNaN);
      op.out = expected.data();
      runAttention(*set.kernels, op, positions.data(), rows, kAttentionChunkPositions, false);
      for (float e : expected)
        ASSERT_FALSE(std::isnan(e));
      for (unsigned threads : {1u, 2u, 3u}) {
        std::vector<float> got(rows * cols, kNaN);
        op.out = got.data();
        attentionWithThreads(*set.kernels, op, positions, threads);
        EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
            << set.name << " step " << s << ", " << threads << " threads";
      }
      // A scratch too small for every row: the rows past it run whole, with the same bits.
      for (size_t capacity : {size_t{0}, size_t{5}, size_t{2 * 12 + 1}}) {
        std::vector<float> got(rows * cols, kNaN);
        op.out = got.data();
        runAttention(*set.kernels, op, positions.data(), rows, kAttentionChunkPositions, true,
                     capacity);
        EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
            << set.name << " step " << s << ", capacity " << capacity;
      }
    }
}

// A chunk kernel that only counts its calls, to see which units the threads ran.
std::atomic<size_t> countedChunks{0};
void countChunk(const float *, const float *, const float *, const float *, const float *, size_t,
                size_t, size_t, float, float, const float *, size_t, size_t, float *) {
  countedChunks.fetch_add(1, std::memory_order_relaxed);
}
void mergeNothing(float *, const float *, size_t, size_t) {}

// Rows split by positions while the scratch lasts, the others whole; claimed by three threads,
// every chunk of every unit runs exactly once.
TEST(AttentionTest, ClaimedUnitsRunEveryChunkOnce) {
  const size_t kvHeads = 3, chunk = 64;
  const std::vector<uint32_t> positions = {2999, 0, 699, 64, 63, 5000};
  AttentionSplit split;
  split.reserve(positions.size(), kvHeads, chunk, 3 * 80 + 3 * 11); // rows 0 and 2 fit, not 5
  split.cut(positions.data(), positions.size(), true);
  ASSERT_TRUE(split.split(0));
  ASSERT_FALSE(split.split(1)); // one chunk: nothing to split
  ASSERT_TRUE(split.split(2));
  ASSERT_TRUE(split.split(3)); // 65 positions: two chunks
  ASSERT_FALSE(split.split(4));
  ASSERT_FALSE(split.split(5)); // past the capacity
  EXPECT_EQ(split.mergeItemCount(), 3 * kvHeads);
  size_t units = 0, chunkCalls = 0;
  for (uint32_t p : positions) {
    const size_t chunks = (size_t{p} + chunk) / chunk;
    chunkCalls += kvHeads * chunks;
  }
  for (size_t t = 0; t < positions.size(); ++t)
    units += split.split(t) ? kvHeads * split.chunks(t) : kvHeads;
  ASSERT_EQ(split.unitCount(), units);

  const AttentionChunkKernel counting = {&countChunk, nullptr, nullptr, &mergeNothing};
  VectorKernels kernels = portableVectorKernels();
  kernels.attentionChunk = counting;
  const size_t group = 2, headDim = 8;
  std::vector<float> q(positions.size() * kvHeads * group * headDim, 1.0f), out(q.size());
  std::vector<uint32_t> slots(positions.size(), 0);
  AttentionOperands op;
  op.q = q.data();
  op.qStride = kvHeads * group * headDim;
  op.out = out.data();
  op.outStride = op.qStride;
  op.shape = AttentionShape{0, kvHeads * group, kvHeads, headDim, 1.0f};
  op.rowSlots = slots.data();
  const size_t stateFloats = attentionStateFloats(group, headDim);
  for (unsigned threads : {1u, 3u}) {
    Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::create(threads, false);
    ASSERT_TRUE(pool.ok()) << pool.message();
    std::vector<float> partials(split.statesUsed() * stateFloats), work(2 * threads * stateFloats);
    std::atomic<size_t> claimed{0};
    PoolAttention context{&kernels,    &split,      op,      partials.data(),
                          work.data(), stateFloats, &claimed};
    countedChunks = 0;
    pool.value()->run(1, &poolAttentionPhase, &context);
    EXPECT_EQ(claimed.load(), split.unitCount()) << threads << " threads";
    EXPECT_EQ(countedChunks.load(), chunkCalls) << threads << " threads";
  }
}

// quantizeAttentionQuery against its formulas, bit for bit: the largest |q| sets the exponent
// (a zero query uses FLT_MIN's), 2^15 after rounding is kept as 32767 (and -2^15 as itself), and
// the factor is scale * 2^(e - 14).
TEST(AttentionTest, Int8QueryFollowsItsDefinition) {
  LongTailedRandom random(7);
  std::vector<std::vector<float>> queries = {std::vector<float>(8, 0.0f),
                                             {1.9999999f, -0.5f, 0.25f, 3e-5f},
                                             {-1.9999999f, 1.0f},
                                             {1.0f, -1.0f, 0.5f, 1e-30f},
                                             {0.75f, 0.375f, -0.1875f, 0.09375f}};
  std::vector<float> wide(128);
  for (float &e : wide)
    e = random.next(4.0f);
  queries.push_back(wide);
  for (const std::vector<float> &q : queries) {
    const size_t d = q.size();
    float largest = std::numeric_limits<float>::min();
    for (float e : q)
      largest = std::max(largest, std::abs(e));
    const int e = std::ilogb(largest);
    std::vector<int16_t> got(d, 0x5555);
    EXPECT_EQ(quantizeAttentionQuery(q.data(), d, 0.125f, got.data()), std::ldexp(0.125f, e - 14));
    for (size_t i = 0; i < d; ++i) {
      const double want = std::min(std::nearbyint(std::ldexp(double(q[i]), 14 - e)), 32767.0);
      EXPECT_EQ(got[i], static_cast<int16_t>(want)) << "element " << i << " of " << q[i];
    }
  }
  const float top[] = {1.9999999f};
  int16_t got = 0;
  quantizeAttentionQuery(top, 1, 1.0f, &got);
  EXPECT_EQ(got, 32767);
  const float bottom[] = {-1.9999999f};
  quantizeAttentionQuery(bottom, 1, 1.0f, &got);
  EXPECT_EQ(got, -32768);
}

// A chunk of one position leaves its score as the state's max, and a score involves no exp: so
// every set's score over an int8 cache must be the bits of Attention.h's formula, float(q' . k)
// * (s_k * f), from quantizeAttentionQuery's q' and f and the integer dot. The position's weight
// is exp(0) = 1 in every set, so its output is exact too: x = s_v, u = rint(s_v * 2^(14 - e)),
// element i float(u * v[i]) * 2^(e - 14), and the sum 1.
TEST(AttentionTest, Int8ScoresAndWeightsFollowTheirDefinitionInEverySet) {
  for (const size_t d : {size_t{24}, size_t{64}, size_t{128}, size_t{200}}) {
    const size_t group = 3, length = 40;
    LongTailedRandom random(static_cast<uint32_t>(d));
    TestKvCache cache(1, d, length, 2, KvElement::Int8);
    cache.fill(random, 1, 1, 1, length);
    std::vector<float> q(group * d);
    for (float &e : q)
      e = random.next(4.0f);
    const float scale = 1.0f / std::sqrt(float(d));
    const size_t base = cache.view.streamOffset(1, 1, 0);
    const auto *keys = static_cast<const int8_t *>(cache.view.at(true, base));
    const auto *values = static_cast<const int8_t *>(cache.view.at(false, base));
    const float *keyScales = cache.view.keyScales + cache.view.scaleOffset(1, 1, 0, 0);
    const float *valueScales = cache.view.valueScales + cache.view.scaleOffset(1, 1, 0, 0);
    for (const KernelSetCase &set : kernelSets())
      for (size_t j : {size_t{0}, size_t{5}, size_t{16}, size_t{31}, size_t{39}}) {
        std::vector<float> state(attentionStateFloats(group, d), kNaN);
        set.kernels->attentionChunk.int8(q.data(), keys, values, keyScales, valueScales, d, group,
                                         d, scale, 0.0f, nullptr, j, j + 1, state.data());
        for (size_t h = 0; h < group; ++h) {
          std::vector<int16_t> words(d);
          const float f = quantizeAttentionQuery(q.data() + h * d, d, scale, words.data());
          int64_t dot = 0;
          for (size_t i = 0; i < d; ++i)
            dot += int64_t{words[i]} * cache.quantized(true, 1, 1, 0, j, i);
          const float want = static_cast<float>(dot) * (cache.scale(true, 1, 1, 0, j) * f);
          EXPECT_EQ(state[h * (d + 2) + d], want)
              << set.name << " head dim " << d << " head " << h << " position " << j;
          const float valueScale = cache.scale(false, 1, 1, 0, j);
          const int e = std::ilogb(std::max(valueScale, 0x1.0p-112f));
          const double u =
              std::min(std::nearbyint(std::ldexp(double(valueScale), 14 - e)), 32767.0);
          for (size_t i = 0; i < d; ++i) {
            const float product = static_cast<float>(u * cache.quantized(false, 1, 1, 0, j, i));
            EXPECT_EQ(state[h * (d + 2) + i], std::ldexp(product, e - 14))
                << set.name << " head dim " << d << " head " << h << " position " << j
                << " element " << i;
          }
          EXPECT_EQ(state[h * (d + 2) + d + 1], 1.0f) << set.name;
        }
      }
  }
}

// The two AVX-512 builds of the int8 kernel differ only in vpdpwssd against vpmaddwd and an add,
// which give the same integers: the same bits, over head sizes with tails, chunk boundaries inside
// blocks and a sliding window.
TEST(AttentionTest, Int8KernelsOfBothAvx512SetsAgree) {
  if (!hostRunsAvx512Bf16())
    GTEST_SKIP() << "the host runs one AVX-512 set at most";
  const std::vector<HeadShape> shapes = {{3, 1, 24}, {8, 2, 64}, {16, 2, 128}, {20, 1, 40}};
  for (const HeadShape &hs : shapes) {
    const size_t d = hs.headDim, length = 1029;
    LongTailedRandom random(static_cast<uint32_t>(hs.heads * 29 + d));
    TestKvCache cache(hs.kvHeads, d, length + 40, 2, KvElement::Int8);
    cache.fill(random, 1, 1, hs.kvHeads, length);
    std::vector<float> q(hs.heads * d);
    for (float &e : q)
      e = random.next(4.0f);
    const uint32_t slot = 1, position = length - 1;
    AttentionOperands op;
    op.q = q.data();
    op.qStride = hs.heads * d;
    op.outStride = hs.heads * d;
    op.cache = cache.view;
    op.shape = AttentionShape{1, hs.heads, hs.kvHeads, d, 1.0f / std::sqrt(float(d))};
    op.rowSlots = &slot;
    for (size_t chunk : {kAttentionChunkPositions, size_t{37}})
      for (size_t window : {size_t{0}, size_t{600}}) {
        std::vector<float> vnni(hs.heads * d, kNaN), bw(hs.heads * d, kNaN);
        op.out = vnni.data();
        runAttention(*avx512Bf16VectorKernels(), op, &position, 1, chunk, true, SIZE_MAX, window);
        op.out = bw.data();
        runAttention(*avx512VectorKernels(), op, &position, 1, chunk, true, SIZE_MAX, window);
        EXPECT_EQ(std::memcmp(vnni.data(), bw.data(), vnni.size() * sizeof(float)), 0)
            << describe(hs) << " chunk " << chunk << " window " << window;
      }
  }
}

TEST(AttentionTest, FastestChunkKernelsArePresentWhereTheHostHasAvx512) {
  if (!hostRunsAvx512())
    GTEST_SKIP() << "the host has no AVX-512 F and BW: only the portable kernels run here";
  EXPECT_STREQ(vectorKernelsFor(hostCpuFeatures()).name,
               hostRunsAvx512Bf16() ? "avx512-bf16" : "avx512-f32");
  EXPECT_FALSE(vectorKernelsFor(hostCpuFeatures()).attentionChunk == kAttentionChunkPortable);
}

} // namespace
} // namespace hetc::kernels
