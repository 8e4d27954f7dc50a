// Int8 linear weights and kernels: the quantizer against its definition, the portable kernel
// against a scalar reference written from the formulas, the AVX-512 VNNI kernel bit for bit
// against the portable one, over tails (N and K not multiples of 16 and 4, 1 to 9 rows, column
// windows), with every output the call must not write poisoned.
#include "LongTailedRandom.h"

#include "codegen/cpu/isa/CpuFeatures.h"
#include "codegen/cpu/linear/LinearInt4.h"
#include "codegen/cpu/linear/LinearInt8.h"
#include "codegen/cpu/vector/VectorKernels.h"
#include "runtime/format/WeightLayout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace hetc {
namespace {

using codegen::LinearInt8Call;
using codegen::QuantizedRows;

struct Quantized {
  std::vector<int8_t> packed;
  std::vector<float> scale;
  std::vector<int32_t> columnSum;
};

Quantized quantize(const std::vector<float> &w, size_t n, size_t k) {
  const LinearInt8N16K4 layout{n, k};
  Quantized q;
  q.packed.resize(layout.bytes());
  q.scale.resize(layout.paddedColumns());
  q.columnSum.resize(layout.paddedColumns());
  quantizeLinearInt8(w.data(), false, n, k, q.packed.data(), q.scale.data(), q.columnSum.data());
  return q;
}

std::vector<float> randomMatrix(size_t rows, size_t cols, uint32_t seed) {
  return test::LongTailedRandom(seed).vector(rows * cols);
}

TEST(LinearInt8Test, QuantizerFollowsItsDefinition) {
  const size_t n = 37, k = 11;
  std::vector<float> w = randomMatrix(n, k, 3);
  for (size_t i = 0; i < k; ++i)
    w[5 * k + i] = 0.0f; // a zero column of the output
  const LinearInt8N16K4 layout{n, k};
  std::vector<int8_t> packed(layout.bytes(), 0x55);
  std::vector<float> scale(layout.paddedColumns(), NAN);
  std::vector<int32_t> sums(layout.paddedColumns(), -1);
  quantizeLinearInt8(w.data(), false, n, k, packed.data(), scale.data(), sums.data());
  for (size_t row = 0; row < layout.paddedColumns(); ++row) {
    float largest = 0.0f;
    for (size_t col = 0; row < n && col < k; ++col)
      largest = std::max(largest, std::fabs(w[row * k + col]));
    EXPECT_EQ(scale[row], largest / 127.0f) << "column " << row;
    int32_t sum = 0;
    for (size_t col = 0; col < 4 * layout.kQuads(); ++col) {
      const int8_t q = packed[layout.index(row, col)];
      sum += q;
      if (row >= n || col >= k || largest == 0.0f) {
        EXPECT_EQ(q, 0) << "padding (" << row << ", " << col << ")";
        continue;
      }
      EXPECT_EQ(q, static_cast<int8_t>(std::nearbyint(w[row * k + col] * (127.0f / largest))));
      EXPECT_LE(std::fabs(q * scale[row] - w[row * k + col]), scale[row] / 2 * 1.0001f);
    }
    EXPECT_EQ(sums[row], sum) << "column " << row;
  }
  // [K, N] input gives the same packing.
  std::vector<float> kn(k * n);
  for (size_t row = 0; row < n; ++row)
    for (size_t col = 0; col < k; ++col)
      kn[col * n + row] = w[row * k + col];
  std::vector<int8_t> packedKN(layout.bytes());
  std::vector<float> scaleKN(layout.paddedColumns());
  std::vector<int32_t> sumsKN(layout.paddedColumns());
  quantizeLinearInt8(kn.data(), true, n, k, packedKN.data(), scaleKN.data(), sumsKN.data());
  EXPECT_EQ(packedKN, packed);
  EXPECT_EQ(scaleKN, scale);
}

// Activation rows: the portable quantizer against its definition (a zero row, the padding 128),
// and the AVX-512 one bit for bit against it over K tails.
TEST(LinearInt8Test, RowQuantizersFollowTheDefinition) {
  const bool avx512 = codegen::hostHas(codegen::kCpuAvx512F | codegen::kCpuAvx512BW);
  uint32_t seed = 500;
  for (size_t k : {1, 3, 15, 16, 17, 31, 64, 100, 2051}) {
    SCOPED_TRACE("k " + std::to_string(k));
    const size_t rows = 3, xStride = k + 7, stride = (k + 3) / 4 * 4 + 12;
    std::vector<float> x = randomMatrix(rows, xStride, seed++);
    std::fill(x.begin() + static_cast<std::ptrdiff_t>(xStride),
              x.begin() + static_cast<std::ptrdiff_t>(xStride + k), 0.0f); // row 1 is zero
    std::vector<uint8_t> portable(rows * stride, 0x11), fast(rows * stride, 0x22);
    std::vector<float> scalePortable(rows, NAN), scaleFast(rows, NAN);
    codegen::quantizeRowsInt8(x.data(), xStride, rows, k, portable.data(), stride,
                              scalePortable.data());
    for (size_t r = 0; r < rows; ++r) {
      float largest = 0.0f;
      for (size_t i = 0; i < k; ++i)
        largest = std::max(largest, std::fabs(x[r * xStride + i]));
      EXPECT_EQ(scalePortable[r], largest / 127.0f) << "row " << r;
      for (size_t i = 0; i < stride; ++i) {
        const int expected =
            i >= k || largest == 0.0f
                ? 128
                : 128 + static_cast<int>(std::nearbyint(x[r * xStride + i] * (127.0f / largest)));
        EXPECT_EQ(portable[r * stride + i], expected) << "row " << r << " element " << i;
      }
    }
    if (!avx512)
      continue;
    codegen::quantizeRowsInt8Avx512(x.data(), xStride, rows, k, fast.data(), stride,
                                    scaleFast.data());
    EXPECT_EQ(fast, portable);
    EXPECT_EQ(scaleFast, scalePortable);
  }
  if (avx512)
    EXPECT_EQ(codegen::pickQuantizeRowsInt8(codegen::hostCpuFeatures()).kernel,
              codegen::quantizeRowsInt8Avx512);
}

// y[r][n] from the formulas, with q and xq computed here from W and x.
float reference(const std::vector<float> &w, const std::vector<float> &x, size_t k, size_t r,
                size_t n) {
  float wMax = 0.0f, xMax = 0.0f;
  for (size_t i = 0; i < k; ++i) {
    wMax = std::max(wMax, std::fabs(w[n * k + i]));
    xMax = std::max(xMax, std::fabs(x[r * k + i]));
  }
  if (wMax == 0.0f || xMax == 0.0f)
    return 0.0f;
  int32_t dot = 0;
  for (size_t i = 0; i < k; ++i)
    dot += static_cast<int32_t>(std::nearbyint(x[r * k + i] * (127.0f / xMax))) *
           static_cast<int32_t>(std::nearbyint(w[n * k + i] * (127.0f / wMax)));
  return static_cast<float>(dot) * (xMax / 127.0f) * (wMax / 127.0f);
}

struct Case {
  size_t n, k, rows, colBegin, colEnd;
};

// The residual of the in-place cases: element (r, col).
float residualAt(size_t r, size_t col) { return 0.25f * static_cast<float>(r) - 0.125f * col; }

// Runs `kernel` on the case; y is [rows, yStride] with NaN wherever the call must not write.
// With `inPlaceResidual`, y's window starts as residualAt and is the call's residual too.
std::vector<float> runKernel(codegen::LinearInt8Fn kernel, const Quantized &q,
                             const std::vector<float> &x, const Case &c, size_t yStride,
                             bool inPlaceResidual = false) {
  const size_t stride = 4 * ((c.k + 3) / 4) + 8; // room past the quads: must not be read
  std::vector<uint8_t> xq(c.rows * stride);
  std::vector<float> rowScale(c.rows);
  codegen::quantizeRowsInt8(x.data(), c.k, c.rows, c.k, xq.data(), stride, rowScale.data());
  for (size_t r = 0; r < c.rows; ++r) // poison the bytes past the quads
    std::memset(xq.data() + r * stride + 4 * ((c.k + 3) / 4), 0xff, 8);
  std::vector<float> y(c.rows * yStride, NAN);
  LinearInt8Call call;
  if (inPlaceResidual) {
    for (size_t r = 0; r < c.rows; ++r)
      for (size_t col = c.colBegin; col < c.colEnd; ++col)
        y[r * yStride + col] = residualAt(r, col);
    call.residual = y.data();
    call.residualStride = yStride;
  }
  call.x = QuantizedRows{xq.data(), stride, rowScale.data(), c.rows};
  call.w = q.packed.data();
  call.scale = q.scale.data();
  call.columnSum = q.columnSum.data();
  call.k = c.k;
  call.y = y.data();
  call.yStride = yStride;
  call.colBegin = c.colBegin;
  call.colEnd = c.colEnd;
  kernel(call);
  return y;
}

const std::vector<Case> kCases = {
    {1, 1, 1, 0, 1},    {16, 4, 1, 0, 16},  {17, 5, 3, 0, 17},   {45, 63, 9, 16, 45},
    {64, 130, 4, 0, 64}, {33, 7, 2, 32, 33}, {48, 256, 5, 16, 32}, {15, 3, 8, 0, 15},
    {100, 37, 7, 16, 100}, {160, 9, 1, 0, 150},
};

TEST(LinearInt8Test, PortableKernelMatchesTheFormulas) {
  uint32_t seed = 10;
  for (const Case &c : kCases) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " rows " +
                 std::to_string(c.rows) + " columns [" + std::to_string(c.colBegin) + ", " +
                 std::to_string(c.colEnd) + ")");
    const std::vector<float> w = randomMatrix(c.n, c.k, seed++);
    std::vector<float> x = randomMatrix(c.rows, c.k, seed++);
    if (c.rows > 1)
      std::fill(x.begin() + static_cast<std::ptrdiff_t>(c.k), x.begin() + 2 * c.k, 0.0f);
    const Quantized q = quantize(w, c.n, c.k);
    const size_t yStride = c.n + 3;
    const std::vector<float> y = runKernel(codegen::linearInt8Portable, q, x, c, yStride);
    double error = 0.0, magnitude = 0.0;
    for (size_t r = 0; r < c.rows; ++r)
      for (size_t col = 0; col < yStride; ++col) {
        const float got = y[r * yStride + col];
        if (col < c.colBegin || col >= c.colEnd) {
          EXPECT_TRUE(std::isnan(got)) << "row " << r << " column " << col << " written";
          continue;
        }
        EXPECT_EQ(got, reference(w, x, c.k, r, col)) << "row " << r << " column " << col;
        float exact = 0.0f;
        for (size_t i = 0; i < c.k; ++i)
          exact += x[r * c.k + i] * w[col * c.k + i];
        error += std::fabs(got - exact);
        magnitude += std::fabs(exact);
      }
    // Not a bound of the kernel but of the scheme: 8-bit symmetric quantization of both sides.
    if (c.k >= 16)
      EXPECT_LT(error, 0.05 * magnitude);
  }
}

TEST(LinearInt8Test, Avx512VnniKernelGivesThePortableBits) {
  if (!codegen::hostHas(codegen::kCpuAvx512F | codegen::kCpuAvx512BW | codegen::kCpuAvx512Vnni))
    GTEST_SKIP() << "the host has no AVX-512 VNNI";
  uint32_t seed = 100;
  for (const Case &c : kCases) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " rows " +
                 std::to_string(c.rows));
    const std::vector<float> w = randomMatrix(c.n, c.k, seed++);
    const std::vector<float> x = randomMatrix(c.rows, c.k, seed++);
    const Quantized q = quantize(w, c.n, c.k);
    const size_t yStride = c.n + 5;
    const std::vector<float> portable = runKernel(codegen::linearInt8Portable, q, x, c, yStride);
    const std::vector<float> vnni = runKernel(codegen::linearInt8Avx512Vnni, q, x, c, yStride);
    ASSERT_EQ(portable.size(), vnni.size());
    for (size_t i = 0; i < portable.size(); ++i) {
      if (std::isnan(portable[i])) {
        EXPECT_TRUE(std::isnan(vnni[i])) << "element " << i << " written";
        continue;
      }
      uint32_t a, b;
      std::memcpy(&a, &portable[i], 4);
      std::memcpy(&b, &vnni[i], 4);
      EXPECT_EQ(a, b) << "element " << i;
    }
  }
  EXPECT_EQ(codegen::pickLinearInt8(codegen::hostCpuFeatures()).kernel,
            codegen::linearInt8Avx512Vnni);
}

// A fused residual (the output itself, as a decoder's residual stream is): the product plus the
// residual's old value, in both kernels, with the same bits.
TEST(LinearInt8Test, InPlaceResidualIsAddedLast) {
  const bool vnni =
      codegen::hostHas(codegen::kCpuAvx512F | codegen::kCpuAvx512BW | codegen::kCpuAvx512Vnni);
  uint32_t seed = 300;
  for (const Case &c : kCases) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " rows " +
                 std::to_string(c.rows));
    const std::vector<float> w = randomMatrix(c.n, c.k, seed++);
    const std::vector<float> x = randomMatrix(c.rows, c.k, seed++);
    const Quantized q = quantize(w, c.n, c.k);
    const size_t yStride = c.n + 2;
    const std::vector<float> portable =
        runKernel(codegen::linearInt8Portable, q, x, c, yStride, true);
    for (size_t r = 0; r < c.rows; ++r)
      for (size_t col = 0; col < yStride; ++col) {
        const float got = portable[r * yStride + col];
        if (col < c.colBegin || col >= c.colEnd)
          EXPECT_TRUE(std::isnan(got)) << "row " << r << " column " << col << " written";
        else
          EXPECT_EQ(got, reference(w, x, c.k, r, col) + residualAt(r, col))
              << "row " << r << " column " << col;
      }
    if (!vnni)
      continue;
    const std::vector<float> fast =
        runKernel(codegen::linearInt8Avx512Vnni, q, x, c, yStride, true);
    for (size_t i = 0; i < portable.size(); ++i)
      if (std::isnan(portable[i]))
        EXPECT_TRUE(std::isnan(fast[i])) << "element " << i << " written";
      else
        EXPECT_EQ(portable[i], fast[i]) << "element " << i;
  }
}

} // namespace
} // namespace hetc

namespace hetc {
namespace {

void emptyKernel() {}

// An implementation list picks its first entry whose features are allowed and that this build
// has; the portable entry, last, needs none.
TEST(Implementations, PickTheFirstAllowedAndBuilt) {
  using codegen::Implementation;
  const uint64_t vnni = codegen::kCpuAvx512F | codegen::kCpuAvx512BW | codegen::kCpuAvx512Vnni;
  EXPECT_STREQ(codegen::pickLinearInt8(0).name, "LinearInt8Portable");
  EXPECT_STREQ(codegen::pickLinearInt8(vnni).name, "LinearInt8Avx512Vnni");
  EXPECT_STREQ(codegen::pickLinearInt8(vnni & ~codegen::kCpuAvx512Vnni).name,
               "LinearInt8Portable");
  EXPECT_STREQ(codegen::pickLinearInt4(vnni).name, "LinearInt4Avx512Vnni");
  EXPECT_STREQ(codegen::pickQuantizeRowsInt8(codegen::kCpuAvx512F).name,
               "QuantizeRowsInt8Portable");
  EXPECT_STREQ(kernels::vectorKernelsFor(0).name, "portable-f32");
  const Implementation<void (*)()> list[] = {
      {"missing", 0, nullptr}, {"wide", vnni, emptyKernel}, {"portable", 0, emptyKernel}};
  EXPECT_STREQ(codegen::pickImplementation(list, vnni).name, "wide");
  EXPECT_STREQ(codegen::pickImplementation(list, 0).name, "portable");
}

} // namespace
} // namespace hetc
