// Every portable kernel against a plain double-precision reference written here, over shapes
// with tails (sizes that are not multiples of the lane or block widths), on long-tailed random
// data. Outputs are poisoned with NaN first, so an element a kernel forgets stays NaN and fails;
// an output of all zeros is refused even when the reference agrees.
#include "ActivationReference.h"
#include "LongTailedRandom.h"
#include "TestKvCache.h"

#include "codegen/cpu/vector/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace hetc::kernels {
namespace {

using test::LongTailedRandom;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// got[i] must be within rtol * magnitude[i] of want[i], where magnitude is the sum of absolute
// terms that formed want[i] (so cancellation does not demand impossible accuracy).
void expectClose(const std::vector<float> &got, const std::vector<double> &want,
                 const std::vector<double> &magnitude, double rtol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  bool anyNonZero = false;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << ": element " << i << " was never written";
    anyNonZero = anyNonZero || got[i] != 0.0f;
    ASSERT_LE(std::abs(got[i] - want[i]), rtol * magnitude[i] + 1e-30)
        << what << ": element " << i << " is " << got[i] << ", reference " << want[i];
  }
  ASSERT_TRUE(anyNonZero) << what << ": the output is all zeros";
}

// Strides a little larger than the width, as plans pad rows to 64 bytes.
size_t paddedStride(size_t cols) { return cols + 5; }

TEST(KernelsTest, DotMatchesReferenceOverTails) {
  LongTailedRandom random(1);
  for (size_t n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 100, 257, 1000, 4099}) {
    std::vector<float> a = random.vector(n), b = random.vector(n);
    double want = 0, magnitude = 0;
    for (size_t i = 0; i < n; ++i) {
      want += double(a[i]) * b[i];
      magnitude += std::abs(double(a[i]) * b[i]);
    }
    expectClose({dot(a.data(), b.data(), n)}, {want}, {magnitude}, 1e-6,
                "dot n=" + std::to_string(n));
  }
}

TEST(KernelsTest, EmbeddingCopiesRows) {
  LongTailedRandom random(2);
  const size_t vocab = 37, hidden = 19, rows = 11, stride = paddedStride(hidden);
  std::vector<float> table = random.vector(vocab * hidden);
  std::vector<int32_t> tokens(rows);
  for (auto &token : tokens)
    token = static_cast<int32_t>(random.index(vocab));
  tokens[0] = 0;
  tokens[1] = vocab - 1;
  std::vector<float> out(rows * stride, kNaN);
  embedding(tokens.data(), table.data(), hidden, out.data(), stride, 0, 5);
  embedding(tokens.data(), table.data(), hidden, out.data(), stride, 5, rows);
  for (size_t t = 0; t < rows; ++t)
    for (size_t i = 0; i < hidden; ++i)
      ASSERT_EQ(out[t * stride + i], table[tokens[t] * hidden + i]) << t << "," << i;
}

TEST(KernelsTest, RmsNormMatchesReference) {
  LongTailedRandom random(3);
  for (size_t cols : {1, 7, 8, 16, 33, 100, 4099})
    for (size_t rows : {1, 3, 5}) {
      const size_t stride = paddedStride(cols);
      const float eps = 1e-5f;
      std::vector<float> x = random.vector(rows * stride), gamma(cols);
      for (float &g : gamma)
        g = 1.0f + 0.2f * random.next(5.0f);
      std::vector<double> want(rows * cols), magnitude(rows * cols);
      for (size_t t = 0; t < rows; ++t) {
        double sum = 0;
        for (size_t i = 0; i < cols; ++i)
          sum += double(x[t * stride + i]) * x[t * stride + i];
        const double inverseRms = 1.0 / std::sqrt(sum / cols + eps);
        for (size_t i = 0; i < cols; ++i) {
          want[t * cols + i] = gamma[i] * (x[t * stride + i] * inverseRms);
          magnitude[t * cols + i] = std::abs(want[t * cols + i]);
        }
      }
      const std::string what = "rmsNorm cols=" + std::to_string(cols);
      std::vector<float> y(rows * stride, kNaN);
      rmsNorm(x.data(), stride, gamma.data(), cols, eps, y.data(), stride, 0, rows);
      std::vector<float> got;
      for (size_t t = 0; t < rows; ++t)
        got.insert(got.end(), y.begin() + t * stride, y.begin() + t * stride + cols);
      expectClose(got, want, magnitude, 2e-6, what);

      // In place gives the same values.
      std::vector<float> inPlace = x;
      rmsNorm(inPlace.data(), stride, gamma.data(), cols, eps, inPlace.data(), stride, 0, rows);
      for (size_t t = 0; t < rows; ++t)
        for (size_t i = 0; i < cols; ++i)
          ASSERT_EQ(inPlace[t * stride + i], y[t * stride + i]) << what << " in place";
    }
}

// Rows of `cols` elements out of rows of `stride`; the padding in between must still be NaN.
std::vector<float> unpadded(const std::vector<float> &y, size_t rows, size_t cols, size_t stride,
                            const std::string &what) {
  std::vector<float> out;
  for (size_t t = 0; t < rows; ++t) {
    out.insert(out.end(), y.begin() + t * stride, y.begin() + t * stride + cols);
    for (size_t i = cols; i < stride && t * stride + i < y.size(); ++i)
      EXPECT_TRUE(std::isnan(y[t * stride + i])) << what << ": padding of row " << t << " written";
  }
  return out;
}

// Two-pass in double: the mean, then the variance about it. A row far from zero (offset 1000,
// spread 1) is where a one-pass float sum of squares loses the variance to cancellation.
TEST(KernelsTest, LayerNormMatchesReference) {
  LongTailedRandom random(12);
  for (const float offset : {0.0f, 1000.0f})
    for (const bool withBeta : {true, false})
      for (size_t cols : {1, 7, 8, 16, 33, 100, 4099}) {
        if (cols == 1 && !withBeta)
          continue; // a row of one element normalises to 0
        const size_t rows = 5, stride = paddedStride(cols);
        const float eps = 1e-5f;
        std::vector<float> x = random.vector(rows * stride), gamma(cols), beta(cols);
        for (float &v : x)
          v += offset;
        for (size_t i = 0; i < cols; ++i) {
          gamma[i] = 1.0f + 0.2f * random.next(5.0f);
          beta[i] = random.next();
        }
        std::vector<double> want, magnitude;
        for (size_t t = 0; t < rows; ++t) {
          const float *xr = x.data() + t * stride;
          double mean = 0, variance = 0;
          for (size_t i = 0; i < cols; ++i)
            mean += xr[i];
          mean /= cols;
          for (size_t i = 0; i < cols; ++i)
            variance += (xr[i] - mean) * (xr[i] - mean);
          const double inverseDeviation = 1.0 / std::sqrt(variance / cols + eps);
          for (size_t i = 0; i < cols; ++i) {
            const double b = withBeta ? beta[i] : 0.0;
            want.push_back(gamma[i] * ((xr[i] - mean) * inverseDeviation) + b);
            magnitude.push_back(std::abs(gamma[i]) * (std::abs(xr[i]) + std::abs(mean)) *
                                    inverseDeviation +
                                std::abs(b));
          }
        }
        const std::string what = "layerNorm cols=" + std::to_string(cols) +
                                 " offset=" + std::to_string(offset) +
                                 (withBeta ? " with beta" : " without beta");
        const float *betaData = withBeta ? beta.data() : nullptr;
        std::vector<float> y(rows * stride, kNaN);
        layerNorm(x.data(), stride, gamma.data(), betaData, cols, eps, y.data(), stride, 0, 2);
        layerNorm(x.data(), stride, gamma.data(), betaData, cols, eps, y.data(), stride, 2, rows);
        expectClose(unpadded(y, rows, cols, stride, what), want, magnitude, 4e-6, what);

        // In place gives the same bits.
        std::vector<float> inPlace = x;
        layerNorm(inPlace.data(), stride, gamma.data(), betaData, cols, eps, inPlace.data(), stride,
                  0, rows);
        for (size_t t = 0; t < rows; ++t)
          for (size_t i = 0; i < cols; ++i)
            ASSERT_EQ(inPlace[t * stride + i], y[t * stride + i]) << what << " in place";
      }
}

TEST(KernelsTest, ActivationMatchesReference) {
  LongTailedRandom random(13);
  for (const ActivationFunction function :
       {ActivationFunction::Relu, ActivationFunction::Gelu, ActivationFunction::GeluTanh,
        ActivationFunction::ReluSquared})
    for (size_t cols : {1, 7, 16, 33, 100, 4099}) {
      const size_t rows = 5, stride = paddedStride(cols);
      // |x| up to 10, where erf and tanh saturate.
      std::vector<float> x = random.vector(rows * stride, 10.0f);
      x[0] = 1.0f; // a positive element, so no function's output is all zeros
      std::vector<double> want, magnitude;
      for (size_t t = 0; t < rows; ++t)
        for (size_t i = 0; i < cols; ++i) {
          const double v = x[t * stride + i];
          want.push_back(test::activationReference(function, v));
          // 0.5 x (1 + f(x)) with |f| <= 1: the terms are at most |x| in size; a square is x^2,
          // rounded once.
          magnitude.push_back(function == ActivationFunction::ReluSquared ? v * v : std::abs(v));
        }
      const std::string what = "activation " + std::to_string(static_cast<int>(function)) +
                               " cols=" + std::to_string(cols);
      std::vector<float> y(rows * stride, kNaN);
      activation(function, x.data(), stride, cols, y.data(), stride, 0, 3);
      activation(function, x.data(), stride, cols, y.data(), stride, 3, rows);
      expectClose(unpadded(y, rows, cols, stride, what), want, magnitude,
                  function == ActivationFunction::Relu          ? 0.0
                  : function == ActivationFunction::ReluSquared ? 6e-8 // half a float ulp
                                                                : 2e-6,
                  what);

      std::vector<float> inPlace = x;
      activation(function, inPlace.data(), stride, cols, inPlace.data(), stride, 0, rows);
      for (size_t t = 0; t < rows; ++t)
        for (size_t i = 0; i < cols; ++i)
          ASSERT_EQ(inPlace[t * stride + i], y[t * stride + i]) << what << " in place";
    }
}

struct LinearReference {
  std::vector<double> value, magnitude; // [rows, n]
};

LinearReference referenceLinear(const std::vector<float> &x, size_t xStride,
                                const std::vector<size_t> &rows, const std::vector<float> &w,
                                size_t n, size_t k) {
  LinearReference ref;
  for (size_t row : rows)
    for (size_t col = 0; col < n; ++col) {
      double sum = 0, magnitude = 0;
      for (size_t i = 0; i < k; ++i) {
        sum += double(x[row * xStride + i]) * w[col * k + i];
        magnitude += std::abs(double(x[row * xStride + i]) * w[col * k + i]);
      }
      ref.value.push_back(sum);
      ref.magnitude.push_back(magnitude);
    }
  return ref;
}

TEST(KernelsTest, LinearMatchesReferenceAndIgnoresBlocking) {
  LongTailedRandom random(4);
  for (size_t k : {1, 7, 8, 16, 17, 64, 100, 259})
    for (size_t n : {1, 5, 16, 17, 33, 100})
      for (size_t rows : {1, 2, 3, 4, 5, 7, 9}) {
        const std::string what = "linear rows=" + std::to_string(rows) + " n=" + std::to_string(n) +
                                 " k=" + std::to_string(k);
        const size_t xStride = paddedStride(k), yStride = paddedStride(n);
        std::vector<float> x = random.vector(rows * xStride);
        std::vector<float> w = random.vector(n * k);
        std::vector<float> y(rows * yStride, kNaN);
        linear(x.data(), xStride, rows, w.data(), k, y.data(), yStride, 0, n);

        std::vector<size_t> allRows;
        for (size_t t = 0; t < rows; ++t)
          allRows.push_back(t);
        const LinearReference ref = referenceLinear(x, xStride, allRows, w, n, k);
        std::vector<float> got;
        for (size_t t = 0; t < rows; ++t)
          got.insert(got.end(), y.begin() + t * yStride, y.begin() + t * yStride + n);
        expectClose(got, ref.value, ref.magnitude, 1e-6, what);
        for (size_t t = 0; t < rows; ++t)
          for (size_t col = n; col < yStride; ++col)
            ASSERT_TRUE(std::isnan(y[t * yStride + col])) << what << ": wrote past the row";

        // Any split of the columns, and each row computed alone, give the same bits.
        std::vector<float> split(rows * yStride, kNaN);
        const size_t cut = n / 3;
        linear(x.data(), xStride, rows, w.data(), k, split.data(), yStride, cut, n);
        linear(x.data(), xStride, rows, w.data(), k, split.data(), yStride, 0, cut);
        for (size_t t = 0; t < rows; ++t) {
          std::vector<float> single(n, kNaN);
          linear(x.data() + t * xStride, xStride, 1, w.data(), k, single.data(), n, 0, n);
          for (size_t col = 0; col < n; ++col) {
            ASSERT_EQ(split[t * yStride + col], y[t * yStride + col]) << what << " column split";
            ASSERT_EQ(single[col], y[t * yStride + col]) << what << " single row";
          }
        }
      }
}

TEST(KernelsTest, LmHeadWritesGatheredRows) {
  LongTailedRandom random(5);
  const size_t k = 45, n = 70, rows = 9, xStride = paddedStride(k), logitsStride = paddedStride(n);
  std::vector<float> x = random.vector(rows * xStride), w = random.vector(n * k);
  const std::vector<uint32_t> sourceRows = {2, 3, 8, 0, 5}; // last rows of 5 sequences
  const std::vector<uint32_t> outputRows = {0, 1, 2, 4, 5}; // sequence 3 asked for none
  std::vector<float> logits(6 * logitsStride, kNaN);
  lmHead(x.data(), xStride, sourceRows.data(), outputRows.data(), sourceRows.size(), w.data(), k,
         logits.data(), logitsStride, 0, 29);
  lmHead(x.data(), xStride, sourceRows.data(), outputRows.data(), sourceRows.size(), w.data(), k,
         logits.data(), logitsStride, 29, n);
  std::vector<size_t> gathered(sourceRows.begin(), sourceRows.end());
  const LinearReference ref = referenceLinear(x, xStride, gathered, w, n, k);
  std::vector<float> got;
  for (uint32_t out : outputRows)
    got.insert(got.end(), logits.begin() + out * logitsStride,
               logits.begin() + out * logitsStride + n);
  expectClose(got, ref.value, ref.magnitude, 1e-6, "lmHead");
  for (size_t col = 0; col < n; ++col)
    ASSERT_TRUE(std::isnan(logits[3 * logitsStride + col])) << "row 3 must stay untouched";
}

// Every form: rotate-half and interleaved pairs, over whole heads and over their first columns
// (partial rotary); the columns past rotary_dim, and the padding past each row, keep their bits.
TEST(KernelsTest, RopeMatchesEachForm) {
  LongTailedRandom random(6);
  for (const bool interleaved : {false, true})
    for (size_t headDim : {2, 8, 24, 64, 128})
      for (size_t rotaryDim : {headDim, headDim / 2, size_t{2}})
        for (size_t heads : {1, 3, 4}) {
          if (rotaryDim % 2 != 0 || rotaryDim == 0)
            continue;
          const size_t rows = 6, cols = heads * headDim, stride = paddedStride(cols);
          const size_t half = rotaryDim / 2;
          std::vector<float> invFreq(half);
          for (size_t i = 0; i < half; ++i)
            invFreq[i] = static_cast<float>(1.0 / std::pow(500000.0, 2.0 * i / rotaryDim));
          const std::vector<uint32_t> positions = {0, 1, 2, 17, 4095, 131071};
          std::vector<float> x = random.vector(rows * stride);
          const std::vector<float> before = x;
          std::vector<double> want, magnitude;
          for (size_t t = 0; t < rows; ++t)
            for (size_t h = 0; h < heads; ++h)
              for (size_t i = 0; i < headDim; ++i) {
                const float *xh = before.data() + t * stride + h * headDim;
                if (i >= rotaryDim) {
                  want.push_back(xh[i]);
                  magnitude.push_back(0.0); // passes through: exactly
                  continue;
                }
                // Column i's pair, its angle index, and whether it is the pair's first.
                const size_t j = interleaved ? i / 2 : i % half;
                const bool first = interleaved ? i % 2 == 0 : i < half;
                const size_t a = interleaved ? 2 * j : j, b = interleaved ? 2 * j + 1 : j + half;
                // The angle is a float32 product, as PyTorch forms it; cos and sin in double.
                const double angle = static_cast<float>(positions[t]) * invFreq[j];
                const double c = std::cos(angle), s = std::sin(angle);
                const double x1 = xh[a], x2 = xh[b];
                want.push_back(first ? x1 * c - x2 * s : x2 * c + x1 * s);
                magnitude.push_back(first ? std::abs(x1 * c) + std::abs(x2 * s)
                                          : std::abs(x2 * c) + std::abs(x1 * s));
              }
          const RopeForm form{headDim, rotaryDim, interleaved};
          rope(x.data(), stride, heads, form, invFreq.data(), positions.data(), 0, 2);
          rope(x.data(), stride, heads, form, invFreq.data(), positions.data(), 2, rows);
          std::vector<float> got;
          for (size_t t = 0; t < rows; ++t)
            got.insert(got.end(), x.begin() + t * stride, x.begin() + t * stride + cols);
          const std::string what = std::string("rope ") + (interleaved ? "interleaved" : "half") +
                                   " heads=" + std::to_string(heads) +
                                   " head_dim=" + std::to_string(headDim) +
                                   " rotary_dim=" + std::to_string(rotaryDim);
          expectClose(got, want, magnitude, 4e-6, what);
          for (size_t e = 0; e < got.size(); ++e)
            if (magnitude[e] == 0.0)
              ASSERT_EQ(got[e], static_cast<float>(want[e])) << what << ": element " << e;
          for (size_t t = 0; t < rows; ++t)
            for (size_t c = cols; c < stride; ++c)
              ASSERT_TRUE(std::memcmp(&x[t * stride + c], &before[t * stride + c], 4) == 0)
                  << what << ": padding of row " << t;
        }
}

// The attention over the cache is tested in attention_test.cpp.
TEST(KernelsTest, KvAppendWritesEachRowAtItsSlotAndPosition) {
  LongTailedRandom random(7);
  struct HeadShape {
    size_t heads, kvHeads, headDim;
  };
  for (const KvElement element : {KvElement::F32, KvElement::Bf16, KvElement::Int8})
    for (HeadShape hs : {HeadShape{1, 1, 8}, HeadShape{3, 1, 24}, HeadShape{4, 2, 16},
                         HeadShape{6, 2, 24}, HeadShape{8, 8, 64}}) {
      const bool int8 = element == KvElement::Int8;
      const std::string what = std::string("kvAppend ") +
                               (element == KvElement::Bf16 ? "bf16"
                                : int8                     ? "int8"
                                                           : "f32") +
                               " heads=" + std::to_string(hs.heads) + "/" +
                               std::to_string(hs.kvHeads) +
                               " head_dim=" + std::to_string(hs.headDim);
      const size_t maxSeq = 300, d = hs.headDim;
      test::TestKvCache cache(hs.kvHeads, d, maxSeq, 3, element);
      AttentionShape shape{1, hs.heads, hs.kvHeads, d, 1.0f / std::sqrt(float(d))};

      // The step: slot 2 prefills positions 0..4, slot 0 decodes at 70, slot 1 continues at
      // 200..201.
      const std::vector<uint32_t> slots = {2, 2, 2, 2, 2, 0, 1, 1};
      const std::vector<uint32_t> positions = {0, 1, 2, 3, 4, 70, 200, 201};
      const size_t rows = slots.size();
      const size_t kvStride = paddedStride(hs.kvHeads * d);
      std::vector<float> k(rows * kvStride), v(rows * kvStride);
      for (float &e : k)
        e = random.next(4.0f);
      for (float &e : v)
        e = random.next(30.0f);
      // Row 3's first head is all zeros: an int8 row of scale 0.
      std::fill(k.begin() + 3 * kvStride, k.begin() + 3 * kvStride + d, 0.0f);
      std::fill(v.begin() + 3 * kvStride, v.begin() + 3 * kvStride + d, 0.0f);
      // A bf16 cache holds each value rounded to nearest even, as the linear kernels round.
      auto stored = [&](float x) {
        return element == KvElement::Bf16 ? bf16ToFloat(floatToBf16(x)) : x;
      };

      // Rows 0..2 with every head, the rest in two shares of the heads (as threads of a step
      // with fewer rows than threads append them).
      kvAppend(k.data(), kvStride, v.data(), kvStride, cache.view, shape, slots.data(),
               positions.data(), 0, 3, 0, hs.kvHeads);
      kvAppend(k.data(), kvStride, v.data(), kvStride, cache.view, shape, slots.data(),
               positions.data(), 3, rows, 0, hs.kvHeads / 2);
      kvAppend(k.data(), kvStride, v.data(), kvStride, cache.view, shape, slots.data(),
               positions.data(), 3, rows, hs.kvHeads / 2, hs.kvHeads);
      size_t written = 0;
      for (size_t t = 0; t < rows; ++t)
        for (size_t g = 0; g < hs.kvHeads; ++g) {
          for (bool keys : {true, false}) {
            const float *x = (keys ? k.data() : v.data()) + t * kvStride + g * d;
            if (!int8) {
              for (size_t i = 0; i < d; ++i) {
                const double got = keys ? cache.key(1, slots[t], g, positions[t], i)
                                        : cache.value(1, slots[t], g, positions[t], i);
                ASSERT_EQ(got, stored(x[i])) << what;
              }
              continue;
            }
            // int8: the row's scale is max|x| / 127, each element x / scale rounded to nearest
            // even, so the dequantised row is within scale / 2 of x (and a float32 rounding of
            // the quotient); a zero row is zeros with scale 0.
            float largest = 0.0f;
            for (size_t i = 0; i < d; ++i)
              largest = std::max(largest, std::abs(x[i]));
            const float scale = cache.scale(keys, 1, slots[t], g, positions[t]);
            ASSERT_EQ(scale, largest / 127.0f) << what << " row " << t << " head " << g;
            bool reachesBound = false;
            for (size_t i = 0; i < d; ++i) {
              const int8_t q = cache.quantized(keys, 1, slots[t], g, positions[t], i);
              ASSERT_EQ(q, scale == 0.0f ? 0 : static_cast<int8_t>(std::nearbyint(x[i] / scale)))
                  << what << " row " << t << " head " << g << " element " << i;
              const double got = keys ? cache.key(1, slots[t], g, positions[t], i)
                                      : cache.value(1, slots[t], g, positions[t], i);
              ASSERT_LE(std::abs(got - x[i]), 0.5 * scale * (1 + 1e-5)) << what;
              reachesBound |= std::abs(q) == 127;
            }
            ASSERT_EQ(reachesBound, scale != 0.0f) << what << ": the largest element is not 127";
          }
          written += d;
        }
      // Nothing else was touched: K and V elements, and an int8 cache's scales (one per row).
      ASSERT_EQ(cache.writtenElements(), 2 * written) << what;
      ASSERT_EQ(cache.writtenScales(), int8 ? 2 * rows * hs.kvHeads : 0) << what;
    }
}

// A bf16 stream's block of 16 positions holds each (position, dim) once, K as pairs of dims of
// 16 positions per 64-byte line and V as pairs of positions; storeKvRow writes there and
// copyKvRowsOut/In move the rows in row order.
TEST(KernelsTest, Bf16KvBlocksHoldEveryElementOnceAndCopyRowsInOrder) {
  const size_t d = 6, block = kKvBlockPositions * d;
  for (bool keys : {true, false}) {
    std::vector<int> seen(3 * block, 0);
    for (size_t p = 0; p < 3 * kKvBlockPositions; ++p)
      for (size_t i = 0; i < d; ++i) {
        const size_t at = keys ? kvBlockKeyIndex(p, i, d) : kvBlockValueIndex(p, i, d);
        ASSERT_LT(at, 3 * block);
        EXPECT_EQ(at / block, p / kKvBlockPositions) << "position " << p << " left its block";
        ++seen[at];
      }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(seen.size()));
  }
  // Dims 2 and 3 of position 17 are the second pair of its block's K, lane 1; positions 16 and
  // 17 are the first pair of its block's V.
  EXPECT_EQ(kvBlockKeyIndex(17, 3, d), block + 1 * 32 + 1 * 2 + 1);
  EXPECT_EQ(kvBlockValueIndex(17, 3, d), block + 3 * 2 + 1);

  const size_t positions = 37;
  std::vector<uint16_t> keyStore(positions * d + block), valueStore(keyStore.size());
  KvCacheView view;
  view.element = KvElement::Bf16;
  view.keys = keyStore.data();
  view.values = valueStore.data();
  view.posStride = d;
  view.headStride = view.slotStride = view.layerStride = keyStore.size();
  std::vector<float> rows(positions * d);
  for (size_t e = 0; e < rows.size(); ++e)
    rows[e] = static_cast<float>(e) - 100.0f; // exact in bf16
  for (size_t p = 0; p < positions; ++p) {
    storeKvRow(view, true, 0, 0, 0, p, rows.data() + p * d, d);
    storeKvRow(view, false, 0, 0, 0, p, rows.data() + p * d, d);
  }
  for (bool keys : {true, false}) {
    std::vector<uint16_t> out(positions * d);
    copyKvRowsOut(view, keys, 0, 0, 0, 0, positions, d, out.data());
    for (size_t e = 0; e < rows.size(); ++e)
      ASSERT_EQ(bf16ToFloat(out[e]), rows[e]) << (keys ? "K" : "V") << " element " << e;
    std::vector<uint16_t> &store = keys ? keyStore : valueStore;
    const std::vector<uint16_t> before = store;
    std::fill(store.begin(), store.end(), 0);
    copyKvRowsIn(view, keys, 0, 0, 0, 0, positions, d, out.data());
    for (size_t p = 0; p < positions; ++p)
      for (size_t i = 0; i < d; ++i) {
        const size_t at = keys ? kvBlockKeyIndex(p, i, d) : kvBlockValueIndex(p, i, d);
        ASSERT_EQ(store[at], before[at]) << "position " << p << " dim " << i;
      }
  }
}

// Rounding to nearest even, the clamp to 127, zero and NaN rows, on rows built to hit them.
TEST(KernelsTest, QuantizeInt8RoundsHalvesToEvenAndKeepsNaN) {
  // max|x| = 127 makes the scale exactly 1: each element is its own quotient.
  const std::vector<float> halves = {127.0f, -127.0f, 2.5f,  3.5f,   -2.5f,   -3.5f,
                                     0.5f,   -0.5f,   1.49f, 126.5f, -126.5f, 0.0f};
  const std::vector<int8_t> want = {127, -127, 2, 4, -2, -4, 0, 0, 1, 126, -126, 0};
  std::vector<int8_t> q(halves.size(), 99);
  EXPECT_EQ(quantizeInt8(halves.data(), halves.size(), q.data()), 1.0f);
  EXPECT_EQ(q, want);

  // A scale that is not a power of two: every quotient stays in [-127, 127], the largest at it.
  const std::vector<float> thirds = {1.0f / 3, -0.1f, 0.2f, 1e-9f};
  std::vector<int8_t> q3(thirds.size());
  const float scale = quantizeInt8(thirds.data(), thirds.size(), q3.data());
  EXPECT_EQ(scale, (1.0f / 3) / 127.0f);
  EXPECT_EQ(q3[0], 127);
  EXPECT_EQ(q3[1], static_cast<int8_t>(std::nearbyint(-0.1f / scale)));
  EXPECT_EQ(q3[3], 0);

  const std::vector<float> zeros(5, 0.0f);
  std::vector<int8_t> qz(5, 99);
  EXPECT_EQ(quantizeInt8(zeros.data(), zeros.size(), qz.data()), 0.0f);
  EXPECT_EQ(qz, std::vector<int8_t>(5, 0));

  // A NaN anywhere makes the scale NaN, so the attention over the row shows it.
  const std::vector<float> withNaN = {1.0f, std::nanf(""), 0.5f};
  std::vector<int8_t> qn(3);
  EXPECT_TRUE(std::isnan(quantizeInt8(withNaN.data(), withNaN.size(), qn.data())));
}

TEST(KernelsTest, SwiGluAndAddMatchReference) {
  LongTailedRandom random(8);
  for (size_t cols : {1, 7, 16, 33, 100}) {
    const size_t rows = 5, stride = paddedStride(cols);
    std::vector<float> a = random.vector(rows * stride), b = random.vector(rows * stride);
    std::vector<double> swiGluWant, addWant, swiGluMagnitude, addMagnitude;
    for (size_t t = 0; t < rows; ++t)
      for (size_t i = 0; i < cols; ++i) {
        const double g = a[t * stride + i], u = b[t * stride + i];
        swiGluWant.push_back(g / (1.0 + std::exp(-g)) * u);
        swiGluMagnitude.push_back(std::abs(swiGluWant.back()));
        addWant.push_back(g + u);
        addMagnitude.push_back(std::abs(g) + std::abs(u));
      }
    auto packed = [&](const std::vector<float> &y) {
      std::vector<float> out;
      for (size_t t = 0; t < rows; ++t)
        out.insert(out.end(), y.begin() + t * stride, y.begin() + t * stride + cols);
      return out;
    };
    std::vector<float> y(rows * stride, kNaN);
    gated(ActivationFunction::Silu, a.data(), stride, b.data(), stride, cols, y.data(), stride, 0,
          2);
    gated(ActivationFunction::Silu, a.data(), stride, b.data(), stride, cols, y.data(), stride, 2,
          rows);
    expectClose(packed(y), swiGluWant, swiGluMagnitude, 1e-6, "swiGlu");
    std::fill(y.begin(), y.end(), kNaN);
    add(a.data(), stride, b.data(), stride, cols, y.data(), stride, 0, rows);
    expectClose(packed(y), addWant, addMagnitude, 1e-7, "add");
    // In place on the first input, as a residual add is planned.
    std::vector<float> inPlace = a;
    add(inPlace.data(), stride, b.data(), stride, cols, inPlace.data(), stride, 0, rows);
    expectClose(packed(inPlace), addWant, addMagnitude, 1e-7, "add in place");
  }
}

} // namespace
} // namespace hetc::kernels
