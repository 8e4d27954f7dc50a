// 4-bit group-wise linear weights and kernels: the quantizer against its definition in both
// modes, the signed row quantizers against theirs, the portable kernel against a scalar reference
// written from the formulas, the AVX-512 VNNI kernel bit for bit against the portable one, over
// tails (N not a multiple of 16, K not a multiple of the group or of 16 or 8, groups
// 16/32/64/128, 1 to 9 rows, column windows), with every output the call must not write poisoned,
// and the scheme's error against the float product.
#include "LongTailedRandom.h"

#include "codegen/cpu/isa/CpuFeatures.h"
#include "codegen/cpu/linear/LinearInt4.h"
#include "runtime/format/WeightLayout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace hetc {
namespace {

using codegen::LinearInt4Call;

std::vector<float> randomMatrix(size_t rows, size_t cols, uint32_t seed, float tail = 30.0f) {
  return test::LongTailedRandom(seed).vector(rows * cols, tail);
}

std::vector<uint8_t> quantize(const std::vector<float> &w, size_t n, size_t k, size_t group,
                              bool symmetric) {
  std::vector<uint8_t> segment(LinearInt4N16K8{n, k, group}.segmentBytes(), 0xa5);
  quantizeLinearInt4Segment(w.data(), false, n, k, group, symmetric, segment.data());
  return segment;
}

// One weight's (n, k) nibble, its group's scale and zero point, read from a segment through
// the offsets written out here rather than through the layout's helpers.
struct Reader {
  const std::vector<uint8_t> &segment;
  size_t n, k, group;
  size_t kPadded() const { return (k + group - 1) / group * group; }
  size_t groups() const { return kPadded() / group; }
  size_t paddedN() const { return (n + 15) / 16 * 16; }
  int u(size_t row, size_t col) const {
    const uint8_t byte =
        segment[((row / 16) * (kPadded() / 8) + col / 8) * 64 + (row % 16) * 4 + col % 4];
    return (col / 4) % 2 == 0 ? byte & 0x0F : byte >> 4;
  }
  size_t table(size_t row, size_t g) const { return ((row / 16) * groups() + g) * 16 + row % 16; }
  float scale(size_t row, size_t g) const {
    float s;
    std::memcpy(&s, segment.data() + (paddedN() / 16) * (kPadded() / 8) * 64 + 4 * table(row, g),
                4);
    return s;
  }
  int zp(size_t row, size_t g) const {
    return segment[(paddedN() / 16) * (kPadded() / 8) * 64 + paddedN() * groups() * 4 +
                   table(row, g)];
  }
};

// The quantization of one group (its valid weights), from the definition.
struct GroupQuant {
  float scale;
  int zp;
  std::vector<int> u;
};

GroupQuant quantizeGroup(const std::vector<float> &values, bool symmetric) {
  GroupQuant q{};
  if (symmetric) {
    float largest = 0.0f;
    for (float v : values)
      largest = std::max(largest, std::fabs(v));
    q.scale = largest / 7.0f;
    q.zp = 8;
  } else {
    float lo = 0.0f, hi = 0.0f;
    for (float v : values) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    q.scale = (hi - lo) / 15.0f;
    q.zp = q.scale == 0.0f
               ? 0
               : static_cast<int>(std::clamp(std::nearbyint(-lo / q.scale), 0.0f, 15.0f));
  }
  for (float v : values)
    q.u.push_back(q.scale == 0.0f
                      ? q.zp
                      : std::clamp(static_cast<int>(std::nearbyint(v / q.scale)) + q.zp, 0, 15));
  return q;
}

GroupQuant referenceGroup(const std::vector<float> &w, size_t k, size_t group, size_t row, size_t g,
                          bool symmetric) {
  std::vector<float> values;
  for (size_t col = g * group; col < std::min(k, (g + 1) * group); ++col)
    values.push_back(w[row * k + col]);
  return quantizeGroup(values, symmetric);
}

TEST(LinearInt4Test, QuantizerFollowsItsDefinition) {
  const size_t n = 37, k = 300;
  std::vector<float> w = randomMatrix(n, k, 3, 4.0f);
  std::fill(w.begin() + 5 * k, w.begin() + 6 * k, 0.0f); // a zero output column: zero groups
  for (size_t col = 0; col < k; ++col)                   // one column of positive values only
    w[6 * k + col] = std::fabs(w[6 * k + col]) + 0.5f;
  for (size_t group : {16, 32, 64, 128})
    for (bool symmetric : {false, true}) {
      SCOPED_TRACE("group " + std::to_string(group) + (symmetric ? " symmetric" : " asymmetric"));
      const std::vector<uint8_t> segment = quantize(w, n, k, group, symmetric);
      const LinearInt4N16K8 layout{n, k, group};
      ASSERT_EQ(layout.segmentBytes(), segment.size());
      uint64_t checked = 0;
      ASSERT_TRUE(LinearInt4N16K8::segmentSizeChecked(n, k, group, checked));
      EXPECT_EQ(checked, segment.size());
      const Reader read{segment, n, k, group};
      ASSERT_EQ(read.groups(), layout.groups());
      for (size_t row = 0; row < read.paddedN(); ++row)
        for (size_t g = 0; g < read.groups(); ++g) {
          SCOPED_TRACE("column " + std::to_string(row) + " group " + std::to_string(g));
          if (row >= n) {
            EXPECT_EQ(read.scale(row, g), 0.0f);
            EXPECT_EQ(read.zp(row, g), 0);
            for (size_t col = g * group; col < (g + 1) * group; ++col)
              EXPECT_EQ(read.u(row, col), 0);
            continue;
          }
          const GroupQuant q = referenceGroup(w, k, group, row, g, symmetric);
          EXPECT_EQ(read.scale(row, g), q.scale);
          EXPECT_EQ(read.zp(row, g), q.zp);
          if (row == 5) {
            EXPECT_EQ(q.scale, 0.0f);
            EXPECT_EQ(q.zp, symmetric ? 8 : 0);
          }
          for (size_t col = g * group; col < (g + 1) * group; ++col) {
            if (col >= k) {
              EXPECT_EQ(read.u(row, col), 0) << "padding k " << col;
              continue;
            }
            EXPECT_EQ(read.u(row, col), q.u[col - g * group]) << "k " << col;
            // One step at most (the zero point's rounding may shift the grid by half of one),
            // half a step when symmetric.
            const float decoded = q.scale * static_cast<float>(read.u(row, col) - q.zp);
            EXPECT_LE(std::fabs(decoded - w[row * k + col]),
                      q.scale * (symmetric ? 0.5f : 1.0f) * 1.0001f);
          }
        }
      // [K, N] input gives the same segment.
      std::vector<float> kn(k * n);
      for (size_t row = 0; row < n; ++row)
        for (size_t col = 0; col < k; ++col)
          kn[col * n + row] = w[row * k + col];
      std::vector<uint8_t> fromKN(segment.size(), 0x3c);
      quantizeLinearInt4Segment(kn.data(), true, n, k, group, symmetric, fromKN.data());
      EXPECT_EQ(fromKN, segment);
    }
}

TEST(LinearInt4Test, SegmentSizeIsChecked) {
  uint64_t bytes = 0;
  for (size_t group : {16, 32, 64, 128})
    for (uint64_t n : {1, 16, 17, 2048})
      for (uint64_t k : {1, 31, 32, 129, 2048}) {
        ASSERT_TRUE(LinearInt4N16K8::segmentSizeChecked(n, k, group, bytes));
        const LinearInt4N16K8 layout{n, k, group};
        EXPECT_EQ(bytes, layout.segmentBytes());
        EXPECT_EQ(layout.bytes() % 64, 0u);
        EXPECT_EQ(layout.zeroPointOffset(),
                  layout.bytes() + layout.paddedColumns() * layout.groups() * 4);
      }
  EXPECT_FALSE(LinearInt4N16K8::segmentSizeChecked(16, 64, 48, bytes));
  EXPECT_FALSE(LinearInt4N16K8::segmentSizeChecked(16, 64, 8, bytes));
  EXPECT_FALSE(LinearInt4N16K8::segmentSizeChecked(16, 64, 256, bytes));
  EXPECT_FALSE(LinearInt4N16K8::segmentSizeChecked(16, 64, 0, bytes));
  EXPECT_FALSE(
      LinearInt4N16K8::segmentSizeChecked(uint64_t{1} << 40, uint64_t{1} << 40, 32, bytes));
  EXPECT_FALSE(LinearInt4N16K8::segmentSizeChecked(~uint64_t{0}, 64, 32, bytes));
  EXPECT_FALSE(LinearInt4N16K8::segmentSizeChecked(16, ~uint64_t{0}, 128, bytes));
}

// Signed activation rows: the portable quantizer against its definition (a zero row, the padding
// 0, the granule sums of 16 k, nothing written past them), the AVX-512 one bit for bit against it.
TEST(LinearInt4Test, RowQuantizersFollowTheDefinition) {
  // The smallest group: every group is a whole number of granules.
  EXPECT_EQ(codegen::kInt4GranuleK, 16u);
  const bool avx512 = codegen::hostHas(codegen::kCpuAvx512F | codegen::kCpuAvx512BW);
  uint32_t seed = 500;
  for (size_t k : {1, 3, 8, 12, 15, 16, 17, 24, 31, 32, 33, 40, 64, 100, 2051}) {
    SCOPED_TRACE("k " + std::to_string(k));
    const size_t rows = 3, xStride = k + 7, stride = (k + 3) / 4 * 4 + 12;
    const size_t granules = (k + 15) / 16, sumsStride = granules + 2;
    std::vector<float> x = randomMatrix(rows, xStride, seed++);
    std::fill(x.begin() + static_cast<std::ptrdiff_t>(xStride),
              x.begin() + static_cast<std::ptrdiff_t>(xStride + k), 0.0f); // row 1 is zero
    std::vector<int8_t> portable(rows * stride, 0x11), fast(rows * stride, 0x22);
    std::vector<float> scalePortable(rows, NAN), scaleFast(rows, NAN);
    std::vector<int32_t> sumsPortable(rows * sumsStride, -7), sumsFast(rows * sumsStride, -7);
    codegen::quantizeRowsInt8Signed(x.data(), xStride, rows, k, portable.data(), stride,
                                    scalePortable.data(), sumsPortable.data(), sumsStride);
    for (size_t r = 0; r < rows; ++r) {
      float largest = 0.0f;
      for (size_t i = 0; i < k; ++i)
        largest = std::max(largest, std::fabs(x[r * xStride + i]));
      EXPECT_EQ(scalePortable[r], largest / 127.0f) << "row " << r;
      std::vector<int32_t> sums(granules, 0);
      for (size_t i = 0; i < stride; ++i) {
        const int expected =
            i >= k || largest == 0.0f
                ? 0
                : static_cast<int>(std::nearbyint(x[r * xStride + i] * (127.0f / largest)));
        EXPECT_EQ(portable[r * stride + i], expected) << "row " << r << " element " << i;
        if (i < k)
          sums[i / 16] += expected;
      }
      for (size_t j = 0; j < sumsStride; ++j)
        EXPECT_EQ(sumsPortable[r * sumsStride + j], j < granules ? sums[j] : -7)
            << "row " << r << " granule " << j;
    }
    if (!avx512)
      continue;
    codegen::quantizeRowsInt8SignedAvx512(x.data(), xStride, rows, k, fast.data(), stride,
                                          scaleFast.data(), sumsFast.data(), sumsStride);
    EXPECT_EQ(fast, portable);
    EXPECT_EQ(scaleFast, scalePortable);
    EXPECT_EQ(sumsFast, sumsPortable);
  }
  if (avx512) {
    EXPECT_EQ(codegen::pickQuantizeRowsInt8Signed(codegen::hostCpuFeatures()).kernel,
              codegen::quantizeRowsInt8SignedAvx512);
  }
}

struct Case {
  size_t n, k, group, rows, colBegin, colEnd;
  bool symmetric;
};

std::string describe(const Case &c) {
  return "n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " group " +
         std::to_string(c.group) + " rows " + std::to_string(c.rows) + " columns [" +
         std::to_string(c.colBegin) + ", " + std::to_string(c.colEnd) + ")" +
         (c.symmetric ? " symmetric" : "");
}

// y[r][n] from the formulas, with the weights' and the row's quantization computed here.
float reference(const std::vector<float> &w, const std::vector<float> &x, const Case &c, size_t r,
                size_t col) {
  float xMax = 0.0f;
  for (size_t i = 0; i < c.k; ++i)
    xMax = std::max(xMax, std::fabs(x[r * c.k + i]));
  std::vector<int> x8(c.k, 0);
  if (xMax != 0.0f)
    for (size_t i = 0; i < c.k; ++i)
      x8[i] = static_cast<int>(std::nearbyint(x[r * c.k + i] * (127.0f / xMax)));
  float acc = 0.0f;
  for (size_t g = 0; g * c.group < c.k; ++g) {
    const GroupQuant q = referenceGroup(w, c.k, c.group, col, g, c.symmetric);
    int32_t dot = 0;
    for (size_t i = g * c.group; i < std::min(c.k, (g + 1) * c.group); ++i)
      dot += x8[i] * (q.u[i - g * c.group] - q.zp);
    acc = std::fma(static_cast<float>(dot), q.scale, acc);
  }
  return acc * (xMax / 127.0f);
}

// The residual of the in-place cases: element (r, col).
float residualAt(size_t r, size_t col) { return 0.25f * static_cast<float>(r) - 0.125f * col; }

// Runs `kernel` on the case; y is [rows, yStride] with NaN wherever the call must not write.
// The bytes past each row's quads and the sums past its granules are poisoned: a kernel that read
// them would be wrong. With `inPlaceResidual`, y's window starts as residualAt and is the call's
// residual too.
std::vector<float> runKernel(codegen::LinearInt4Fn kernel, const std::vector<uint8_t> &segment,
                             const std::vector<float> &x, const Case &c, size_t yStride,
                             bool inPlaceResidual = false) {
  const size_t used = 4 * ((c.k + 3) / 4), stride = used + 8;
  const size_t granules = (c.k + 15) / 16, sumsStride = granules + 3;
  std::vector<int8_t> xq(c.rows * stride);
  std::vector<float> rowScale(c.rows);
  std::vector<int32_t> sums(c.rows * sumsStride, 1 << 20);
  codegen::quantizeRowsInt8Signed(x.data(), c.k, c.rows, c.k, xq.data(), stride, rowScale.data(),
                                  sums.data(), sumsStride);
  for (size_t r = 0; r < c.rows; ++r)
    std::memset(xq.data() + r * stride + used, 0x7f, stride - used);
  std::vector<float> y(c.rows * yStride, NAN);
  LinearInt4Call call;
  if (inPlaceResidual) {
    for (size_t r = 0; r < c.rows; ++r)
      for (size_t col = c.colBegin; col < c.colEnd; ++col)
        y[r * yStride + col] = residualAt(r, col);
    call.residual = y.data();
    call.residualStride = yStride;
  }
  call.xq = xq.data();
  call.stride = stride;
  call.rowScale = rowScale.data();
  call.granuleSums = sums.data();
  call.sumsStride = sumsStride;
  call.rows = c.rows;
  call.w = segment.data();
  call.n = c.n;
  call.k = c.k;
  call.group = c.group;
  call.y = y.data();
  call.yStride = yStride;
  call.colBegin = c.colBegin;
  call.colEnd = c.colEnd;
  kernel(call);
  return y;
}

// Tails of N, K and the column window over every group; the last 11 in groups of 16, with K a
// multiple of 16, of 8 but not 16, of 4 but not 8, or of none.
const std::vector<Case> kCases = {
    {1, 1, 32, 1, 0, 1, false},         {16, 4, 32, 1, 0, 16, true},
    {17, 5, 64, 3, 0, 17, false},       {45, 63, 32, 9, 16, 45, false},
    {64, 130, 128, 4, 0, 64, false},    {33, 7, 128, 2, 32, 33, true},
    {48, 256, 64, 5, 16, 32, false},    {15, 36, 32, 8, 0, 15, false},
    {100, 200, 64, 7, 16, 100, true},   {160, 97, 32, 1, 0, 150, false},
    {96, 384, 128, 6, 0, 96, false},    {80, 300, 128, 4, 32, 80, true},
    {130, 1000, 32, 2, 64, 130, false}, {70, 44, 64, 9, 0, 70, false},
    {1, 1, 16, 1, 0, 1, false},         {16, 12, 16, 2, 0, 16, true},
    {17, 16, 16, 3, 0, 17, false},      {45, 24, 16, 9, 16, 45, false},
    {64, 7, 16, 4, 0, 64, false},       {33, 40, 16, 5, 32, 33, true},
    {48, 256, 16, 8, 16, 32, false},    {100, 203, 16, 7, 16, 100, true},
    {160, 97, 16, 1, 0, 150, false},    {130, 1000, 16, 2, 64, 130, false},
    {70, 44, 16, 6, 0, 70, false},
};

TEST(LinearInt4Test, PortableKernelMatchesTheFormulas) {
  uint32_t seed = 10;
  for (const Case &c : kCases) {
    SCOPED_TRACE(describe(c));
    const std::vector<float> w = randomMatrix(c.n, c.k, seed++, 3.0f);
    std::vector<float> x = randomMatrix(c.rows, c.k, seed++);
    if (c.rows > 1) // a zero row
      std::fill(x.begin() + static_cast<std::ptrdiff_t>(c.k), x.begin() + 2 * c.k, 0.0f);
    const std::vector<uint8_t> segment = quantize(w, c.n, c.k, c.group, c.symmetric);
    const size_t yStride = c.n + 3;
    const std::vector<float> y = runKernel(codegen::linearInt4Portable, segment, x, c, yStride);
    for (size_t r = 0; r < c.rows; ++r)
      for (size_t col = 0; col < yStride; ++col) {
        const float got = y[r * yStride + col];
        if (col < c.colBegin || col >= c.colEnd)
          EXPECT_TRUE(std::isnan(got)) << "row " << r << " column " << col << " written";
        else
          EXPECT_EQ(got, reference(w, x, c, r, col)) << "row " << r << " column " << col;
      }
  }
}

// Bit for bit the same outputs, NaN (unwritten) in the same places.
void expectSameBits(const std::vector<float> &portable, const std::vector<float> &fast) {
  ASSERT_EQ(portable.size(), fast.size());
  for (size_t i = 0; i < portable.size(); ++i) {
    if (std::isnan(portable[i])) {
      EXPECT_TRUE(std::isnan(fast[i])) << "element " << i << " written";
      continue;
    }
    uint32_t a, b;
    std::memcpy(&a, &portable[i], 4);
    std::memcpy(&b, &fast[i], 4);
    EXPECT_EQ(a, b) << "element " << i;
  }
}

bool hostHasVnni() {
  return codegen::hostHas(codegen::kCpuAvx512F | codegen::kCpuAvx512BW | codegen::kCpuAvx512Vnni);
}

TEST(LinearInt4Test, Avx512VnniKernelGivesThePortableBits) {
  if (!hostHasVnni())
    GTEST_SKIP() << "the host has no AVX-512 VNNI";
  uint32_t seed = 100;
  std::vector<Case> cases = kCases;
  // Every row count from 1 to 9 over both column paths (two blocks at a time and the last one).
  for (size_t rows = 1; rows <= 9; ++rows)
    cases.push_back({75, 170, rows % 2 ? 64u : 32u, rows, 0, 75, rows % 3 == 0});
  // The same with groups of 16, the last group's k from 1 to 9 (1 to 3 quads, odd and even).
  for (size_t rows = 1; rows <= 9; ++rows)
    cases.push_back({75, 160 + rows, 16, rows, 0, 75, rows % 3 == 1});
  for (const Case &c : cases) {
    SCOPED_TRACE(describe(c));
    const std::vector<float> w = randomMatrix(c.n, c.k, seed++, 3.0f);
    const std::vector<float> x = randomMatrix(c.rows, c.k, seed++);
    const std::vector<uint8_t> segment = quantize(w, c.n, c.k, c.group, c.symmetric);
    const size_t yStride = c.n + 5;
    expectSameBits(runKernel(codegen::linearInt4Portable, segment, x, c, yStride),
                   runKernel(codegen::linearInt4Avx512Vnni, segment, x, c, yStride));
  }
  EXPECT_EQ(codegen::pickLinearInt4(codegen::hostCpuFeatures()).kernel,
            codegen::linearInt4Avx512Vnni);
}

// A fused residual (the output itself, as a decoder's residual stream is): the product plus the
// residual's old value, in both kernels, with the same bits.
TEST(LinearInt4Test, InPlaceResidualIsAddedLast) {
  uint32_t seed = 300;
  for (const Case &c : kCases) {
    SCOPED_TRACE(describe(c));
    const std::vector<float> w = randomMatrix(c.n, c.k, seed++, 3.0f);
    const std::vector<float> x = randomMatrix(c.rows, c.k, seed++);
    const std::vector<uint8_t> segment = quantize(w, c.n, c.k, c.group, c.symmetric);
    const size_t yStride = c.n + 2;
    const std::vector<float> portable =
        runKernel(codegen::linearInt4Portable, segment, x, c, yStride, true);
    for (size_t r = 0; r < c.rows; ++r)
      for (size_t col = 0; col < yStride; ++col) {
        const float got = portable[r * yStride + col];
        if (col < c.colBegin || col >= c.colEnd)
          EXPECT_TRUE(std::isnan(got)) << "row " << r << " column " << col << " written";
        else
          EXPECT_EQ(got, reference(w, x, c, r, col) + residualAt(r, col))
              << "row " << r << " column " << col;
      }
    if (hostHasVnni())
      expectSameBits(portable,
                     runKernel(codegen::linearInt4Avx512Vnni, segment, x, c, yStride, true));
  }
}

// Not a bound of the kernels but of the scheme: 4-bit weights per group of K, 8-bit activations,
// against the float product, for uniform weights and long-tailed activations.
TEST(LinearInt4Test, ErrorOfTheSchemeIsBounded) {
  uint32_t seed = 700;
  for (size_t group : {16, 32, 64, 128})
    for (bool symmetric : {false, true}) {
      const Case c{64, 512, group, 4, 0, 64, symmetric};
      SCOPED_TRACE(describe(c));
      const std::vector<float> w = randomMatrix(c.n, c.k, seed++, 1.0f);
      const std::vector<float> x = randomMatrix(c.rows, c.k, seed++);
      const std::vector<uint8_t> segment = quantize(w, c.n, c.k, group, symmetric);
      const std::vector<float> y = runKernel(codegen::pickLinearInt4(codegen::hostCpuFeatures()).kernel, segment, x, c, c.n);
      double error = 0.0, magnitude = 0.0;
      for (size_t r = 0; r < c.rows; ++r)
        for (size_t col = 0; col < c.n; ++col) {
          double exact = 0.0;
          for (size_t i = 0; i < c.k; ++i)
            exact += static_cast<double>(x[r * c.k + i]) * w[col * c.k + i];
          error += std::fabs(y[r * c.n + col] - exact);
          magnitude += std::fabs(exact);
        }
      EXPECT_LT(error, 0.15 * magnitude);
      RecordProperty("relative_error_g" + std::to_string(group) + (symmetric ? "s" : "a"),
                     std::to_string(error / magnitude));
    }
}

} // namespace
} // namespace hetc
