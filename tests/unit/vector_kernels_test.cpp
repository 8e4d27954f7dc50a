// The AVX-512 row-wise kernels against the portable ones and a double reference, over widths
// with tails (not multiples of 8 or 16), outputs poisoned with NaN. embedding, add, rmsNorm,
// layerNorm, rope and activation must give the portable kernels' bits exactly; swiGlu (a vector
// exp) must match the reference. Skipped, with the reason, on a host without AVX-512 F and BW.
#include "codegen/cpu/vector/VectorKernels.h"
#include "runtime/platform/CpuFeatures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace hetc::kernels {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class VectorKernelsTest : public ::testing::Test {
protected:
  void SetUp() override {
    const VectorKernels &best = vectorKernelsFor(hostCpuFeatures());
    if (&best == &portableVectorKernels())
      GTEST_SKIP() << "the host has no AVX-512 F and BW (" << describeCpuFeatures(hostCpuFeatures())
                   << "): only the portable kernels run here";
    fast_ = &best;
  }

  // Mostly uniform in [-scale, scale), one value in 40 thirty times larger.
  std::vector<float> random(size_t n, float scale = 1.0f) {
    std::vector<float> out(n);
    for (float &v : out) {
      v = scale * std::uniform_real_distribution<float>(-1.0f, 1.0f)(engine_);
      if (std::uniform_int_distribution<int>(0, 39)(engine_) == 0)
        v *= 30.0f;
    }
    return out;
  }

  const VectorKernels &portable() const { return portableVectorKernels(); }
  const VectorKernels *fast_ = nullptr;
  std::mt19937 engine_{5};
};

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const std::vector<size_t> kWidths = {1, 7, 8, 9, 15, 16, 17, 33, 100, 2048, 4099};

TEST_F(VectorKernelsTest, EmbeddingAndAddGivePortableBits) {
  for (size_t cols : kWidths) {
    const size_t rows = 5, stride = cols + 5, vocab = 11;
    const std::vector<float> table = random(vocab * cols);
    const std::vector<int32_t> tokens = {3, 0, 10, 3, 7};
    std::vector<float> want(rows * stride, kNaN), got(rows * stride, kNaN);
    portable().embedding(tokens.data(), table.data(), cols, want.data(), stride, 0, rows);
    fast_->embedding(tokens.data(), table.data(), cols, got.data(), stride, 0, 2);
    fast_->embedding(tokens.data(), table.data(), cols, got.data(), stride, 2, rows);
    EXPECT_TRUE(sameBits(got, want)) << "embedding cols=" << cols;

    const std::vector<float> a = random(rows * stride), b = random(rows * stride);
    std::fill(want.begin(), want.end(), kNaN);
    std::fill(got.begin(), got.end(), kNaN);
    portable().add(a.data(), stride, b.data(), stride, cols, want.data(), stride, 0, rows);
    fast_->add(a.data(), stride, b.data(), stride, cols, got.data(), stride, 0, rows);
    EXPECT_TRUE(sameBits(got, want)) << "add cols=" << cols;
    std::vector<float> inPlace = a;
    fast_->add(inPlace.data(), stride, b.data(), stride, cols, inPlace.data(), stride, 0, rows);
    for (size_t t = 0; t < rows; ++t)
      ASSERT_EQ(
          std::memcmp(inPlace.data() + t * stride, want.data() + t * stride, cols * sizeof(float)),
          0)
          << "add in place cols=" << cols;
  }
}

TEST_F(VectorKernelsTest, RmsNormGivesPortableBits) {
  for (size_t cols : kWidths) {
    const size_t rows = 4, stride = cols + 5;
    const std::vector<float> x = random(rows * stride);
    std::vector<float> gamma = random(cols, 0.2f);
    for (float &g : gamma)
      g += 1.0f;
    std::vector<float> want(rows * stride, kNaN), got(rows * stride, kNaN);
    portable().rmsNorm(x.data(), stride, gamma.data(), cols, 1e-5f, want.data(), stride, 0, rows);
    fast_->rmsNorm(x.data(), stride, gamma.data(), cols, 1e-5f, got.data(), stride, 0, 1);
    fast_->rmsNorm(x.data(), stride, gamma.data(), cols, 1e-5f, got.data(), stride, 1, rows);
    EXPECT_TRUE(sameBits(got, want)) << "rmsNorm cols=" << cols;
    bool anyNonZero = false;
    for (size_t t = 0; t < rows; ++t)
      for (size_t i = 0; i < cols; ++i)
        anyNonZero = anyNonZero || got[t * stride + i] != 0.0f;
    EXPECT_TRUE(anyNonZero) << "rmsNorm cols=" << cols << ": all zeros";
    std::vector<float> inPlace = x;
    fast_->rmsNorm(inPlace.data(), stride, gamma.data(), cols, 1e-5f, inPlace.data(), stride, 0,
                   rows);
    for (size_t t = 0; t < rows; ++t)
      ASSERT_EQ(
          std::memcmp(inPlace.data() + t * stride, want.data() + t * stride, cols * sizeof(float)),
          0)
          << "rmsNorm in place cols=" << cols;
  }
}

TEST_F(VectorKernelsTest, LayerNormGivesPortableBits) {
  for (const float offset : {0.0f, 1000.0f})
    for (const bool withBeta : {true, false})
      for (size_t cols : kWidths) {
        const size_t rows = 4, stride = cols + 5;
        std::vector<float> x = random(rows * stride);
        for (float &v : x)
          v += offset;
        std::vector<float> gamma = random(cols, 0.2f);
        for (float &g : gamma)
          g += 1.0f;
        const std::vector<float> beta = random(cols);
        const float *b = withBeta ? beta.data() : nullptr;
        const std::string what = "layerNorm cols=" + std::to_string(cols) +
                                 " offset=" + std::to_string(offset) + (withBeta ? " beta" : "");
        std::vector<float> want(rows * stride, kNaN), got(rows * stride, kNaN);
        portable().layerNorm(x.data(), stride, gamma.data(), b, cols, 1e-5f, want.data(), stride, 0,
                             rows);
        fast_->layerNorm(x.data(), stride, gamma.data(), b, cols, 1e-5f, got.data(), stride, 0, 1);
        fast_->layerNorm(x.data(), stride, gamma.data(), b, cols, 1e-5f, got.data(), stride, 1,
                         rows);
        EXPECT_TRUE(sameBits(got, want)) << what;
        bool anyNonZero = false;
        for (size_t t = 0; t < rows; ++t)
          for (size_t i = 0; i < cols; ++i)
            anyNonZero = anyNonZero || got[t * stride + i] != 0.0f;
        EXPECT_TRUE(anyNonZero || cols == 1) << what << ": all zeros";
        std::vector<float> inPlace = x;
        fast_->layerNorm(inPlace.data(), stride, gamma.data(), b, cols, 1e-5f, inPlace.data(),
                         stride, 0, rows);
        for (size_t t = 0; t < rows; ++t)
          ASSERT_EQ(std::memcmp(inPlace.data() + t * stride, want.data() + t * stride,
                                cols * sizeof(float)),
                    0)
              << what << " in place";
      }
}

TEST_F(VectorKernelsTest, ActivationGivesPortableBits) {
  for (const ActivationFunction function :
       {ActivationFunction::Relu, ActivationFunction::Gelu, ActivationFunction::GeluTanh,
        ActivationFunction::ReluSquared})
    for (size_t cols : kWidths) {
      const size_t rows = 4, stride = cols + 5;
      std::vector<float> x = random(rows * stride, 10.0f);
      x[1] = kNaN; // ReLU gives 0 for NaN on every set
      const std::string what = "activation " + std::to_string(static_cast<int>(function)) +
                               " cols=" + std::to_string(cols);
      std::vector<float> want(rows * stride, kNaN), got(rows * stride, kNaN);
      portable().activation(function, x.data(), stride, cols, want.data(), stride, 0, rows);
      fast_->activation(function, x.data(), stride, cols, got.data(), stride, 0, 3);
      fast_->activation(function, x.data(), stride, cols, got.data(), stride, 3, rows);
      if (function == ActivationFunction::Relu || function == ActivationFunction::ReluSquared) {
        EXPECT_TRUE(sameBits(got, want)) << what;
      } else {
        // The vector GELU forms: within 1e-6 |x| of std::erf / std::tanh; the padding stays NaN.
        for (size_t t = 0; t < rows; ++t)
          for (size_t i = 0; i < stride; ++i) {
            const size_t k = t * stride + i;
            if (i >= cols || std::isnan(x[k])) {
              EXPECT_EQ(std::isnan(got[k]), std::isnan(want[k])) << what << " at " << k;
              continue;
            }
            EXPECT_NEAR(got[k], want[k], 1e-6 * std::max(1.0f, std::fabs(x[k])))
                << what << " x=" << x[k];
          }
      }
      bool anyNonZero = false;
      for (size_t t = 0; t < rows; ++t)
        for (size_t i = 0; i < cols; ++i)
          anyNonZero =
              anyNonZero || (got[t * stride + i] != 0.0f && !std::isnan(got[t * stride + i]));
      EXPECT_TRUE(anyNonZero || cols == 1) << what << ": all zeros";
    }
}

TEST_F(VectorKernelsTest, RopeGivesPortableBits) {
  for (const bool interleaved : {false, true})
    for (size_t headDim : {2, 8, 24, 34, 64, 128, 160})
      for (size_t rotaryDim : {headDim, headDim / 2 + headDim / 2 % 2})
        for (size_t heads : {1, 3, 4}) {
          const size_t rows = 6, cols = heads * headDim, stride = cols + 5, half = rotaryDim / 2;
          std::vector<float> invFreq(half);
          for (size_t i = 0; i < half; ++i)
            invFreq[i] = static_cast<float>(1.0 / std::pow(500000.0, 2.0 * i / rotaryDim));
          const std::vector<uint32_t> positions = {0, 1, 2, 17, 4095, 131071};
          const std::vector<float> x = random(rows * stride);
          std::vector<float> want = x, got = x;
          const kernels::RopeForm form{headDim, rotaryDim, interleaved};
          portable().rope(want.data(), stride, heads, form, invFreq.data(), positions.data(), 0,
                          rows);
          fast_->rope(got.data(), stride, heads, form, invFreq.data(), positions.data(), 0, 4);
          fast_->rope(got.data(), stride, heads, form, invFreq.data(), positions.data(), 4, rows);
          EXPECT_TRUE(sameBits(got, want)) << "rope heads=" << heads << " head_dim=" << headDim
                                           << " rotary_dim=" << rotaryDim
                                           << (interleaved ? " interleaved" : "");
        }
}

// f(gate) * up for each gate function (SwiGLU's silu, GeGLU's GELUs), against double.
TEST_F(VectorKernelsTest, GatedMatchesReference) {
  auto reference = [](ActivationFunction f, double g) {
    switch (f) {
    case ActivationFunction::Silu:
      return g / (1.0 + std::exp(-g));
    case ActivationFunction::Gelu:
      return 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0)));
    case ActivationFunction::GeluTanh:
      return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
    default:
      return std::max(g, 0.0);
    }
  };
  for (ActivationFunction function : {ActivationFunction::Silu, ActivationFunction::Gelu,
                                      ActivationFunction::GeluTanh, ActivationFunction::Relu})
  for (size_t cols : kWidths) {
    const size_t rows = 3, stride = cols + 5;
    // Gates up to +-90 reach exp's overflow and underflow ends.
    std::vector<float> gate = random(rows * stride, 3.0f);
    const std::vector<float> up = random(rows * stride);
    gate[0] = 90.0f;
    gate[stride - 1] = -90.0f;
    std::vector<float> got(rows * stride, kNaN);
    fast_->gated(function, gate.data(), stride, up.data(), stride, cols, got.data(), stride, 0,
                 rows);
    bool anyNonZero = false;
    for (size_t t = 0; t < rows; ++t) {
      for (size_t i = 0; i < cols; ++i) {
        const size_t e = t * stride + i;
        const double g = gate[e];
        const double want = reference(function, g) * up[e];
        const int f = static_cast<int>(function);
        ASSERT_FALSE(std::isnan(got[e])) << "gated " << f << " cols=" << cols << " element " << e;
        anyNonZero = anyNonZero || got[e] != 0.0f;
        // Relative 1e-6 of the product, or (the GELUs' vector erf and tanh, Kernels.h) 1e-6 of
        // |gate * up|, where the GELU's value is far smaller than the gate.
        ASSERT_LE(std::abs(got[e] - want), 1e-6 * std::max(std::abs(want), std::abs(g * up[e])) +
                                               1e-30)
            << "gated " << f << " cols=" << cols << " gate " << g << ": " << got[e]
            << ", reference " << want;
      }
      for (size_t i = cols; i < stride; ++i)
        ASSERT_TRUE(std::isnan(got[t * stride + i])) << "gated wrote past the row";
    }
    EXPECT_TRUE(anyNonZero);
  }
}

} // namespace
} // namespace hetc::kernels
