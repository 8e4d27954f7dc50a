// The BF16 linear kernels (codegen/cpu/Linear.h) against a double-precision reference over shapes
// with tails (K and N not multiples of the pair, block or call widths; 1..16 rows and more), the
// weight layout and bf16 conversions, and the AMX pieces that can be checked without AMX.
// Outputs are poisoned with NaN first: an element a kernel forgets stays NaN and fails, an element
// written outside the asked range shows up as a number; an all-zero output is refused. A kernel
// whose ISA the host lacks is skipped with the reason.
#include "FloatBits.h"
#include "LongTailedRandom.h"

#include "codegen/cpu/isa/Amx.h"
#include "codegen/cpu/isa/AmxTiles.h"
#include "codegen/cpu/isa/CpuFeatures.h"
#include "codegen/cpu/linear/ActivationRows.h"
#include "codegen/cpu/linear/Linear.h"
#include "codegen/cpu/linear/LinearAmxBf16.h"
#include "codegen/cpu/linear/LinearAvx512Bf16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace hetc::codegen {
namespace {

using test::LongTailedRandom;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

using test::bitsOf;
using test::floatOf;

// 64-byte aligned storage, as the plan's segments and the engine's scratch are.
template <typename T> struct Aligned {
  explicit Aligned(size_t count, T fill = T())
      : count(count), data(static_cast<T *>(std::aligned_alloc(64, roundUp(count)))) {
    for (size_t i = 0; i < count; ++i)
      data[i] = fill;
  }
  ~Aligned() { std::free(data); }
  static size_t roundUp(size_t count) { return (count * sizeof(T) + 63) / 64 * 64 + 64; }
  size_t count;
  T *data;
};

float roundedToBf16(float value) { return bf16ToFloat(floatToBf16(value)); }

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(-2.0f), 0xc000);
  // Ties go to the even neighbour; anything above a tie rounds up.
  EXPECT_EQ(floatToBf16(floatOf(0x3f808000)), 0x3f80);
  EXPECT_EQ(floatToBf16(floatOf(0x3f818000)), 0x3f82);
  EXPECT_EQ(floatToBf16(floatOf(0x3f808001)), 0x3f81);
  EXPECT_EQ(floatToBf16(floatOf(0x3f807fff)), 0x3f80);
  // Overflow to infinity, infinities and NaN kept (NaN made quiet), denormals flushed.
  EXPECT_EQ(floatToBf16(floatOf(0x7f7fffff)), 0x7f80);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(floatToBf16(floatOf(0x7f800001)), 0x7fc0);
  EXPECT_EQ(floatToBf16(floatOf(0x00000001)), 0x0000);
  EXPECT_EQ(floatToBf16(floatOf(0x807fffff)), 0x8000);
  EXPECT_EQ(bitsOf(bf16ToFloat(0x3f80)), bitsOf(1.0f));
}

TEST(Bf16Test, RowConversionMatchesPortableBitForBit) {
  LongTailedRandom random(11);
  for (size_t k : {1, 2, 15, 16, 17, 31, 32, 33, 63, 100, 257})
    for (size_t rows : {5, 16, 21}) {
      const size_t xStride = k + 3, pairs = (k + 1) / 2;
      std::vector<float> x = random.vector(rows * xStride);
      x[0] = floatOf(0x00000010); // a denormal
      std::vector<uint32_t> gather(rows);
      for (size_t r = 0; r < rows; ++r)
        gather[r] = static_cast<uint32_t>((r * 7 + 3) % rows);
      const size_t words = Bf16Rows::bytes(rows, k) / 4;
      ASSERT_EQ(Bf16Rows::bytes(rows, k) % 64, 0u);
      ASSERT_EQ(words, (rows + 15) / 16 * 16 * pairs);
      Aligned<uint32_t> fast(words, 0xdeadbeef), portable(words, 0xdeadbeef);
      convertRowsToBf16(x.data(), xStride, gather.data(), k, fast.data, 1, rows);
      convertRowsToBf16Portable(x.data(), xStride, gather.data(), k, portable.data, 1, rows);
      std::vector<bool> written(words, false);
      for (size_t r = 1; r < rows; ++r)
        for (size_t p = 0; p < pairs; ++p) {
          const size_t at = Bf16Rows::pairIndex(r, p, k);
          ASSERT_EQ(at, ((r / 16) * pairs + p) * 16 + r % 16);
          const uint32_t even = floatToBf16(x[gather[r] * xStride + 2 * p]);
          const uint32_t odd = 2 * p + 1 < k ? floatToBf16(x[gather[r] * xStride + 2 * p + 1]) : 0;
          ASSERT_EQ(fast.data[at], even | odd << 16) << "k=" << k << " row " << r << " pair " << p;
          written[at] = true;
        }
      for (size_t i = 0; i < words; ++i) {
        ASSERT_EQ(fast.data[i], portable.data[i]) << "k=" << k << " word " << i;
        if (!written[i])
          ASSERT_EQ(fast.data[i], 0xdeadbeefu) << "k=" << k << ": wrote outside the asked rows";
      }
    }
}

TEST(Bf16Test, RowMajorConversionMatchesPortableBitForBit) {
  LongTailedRandom random(13);
  for (size_t k : {1, 2, 15, 16, 17, 31, 32, 33, 63, 100, 257, 2048})
    for (size_t rows : {5, 16, 21}) {
      const size_t xStride = k + 3, pairs = (k + 1) / 2;
      const uint64_t rowBytes = Bf16RowMajor::rowBytes(k);
      // Whole lines, an odd number of them, holding the row's pairs.
      ASSERT_EQ(rowBytes % 64, 0u);
      ASSERT_EQ(rowBytes / 64 % 2, 1u) << "k=" << k;
      ASSERT_GE(rowBytes, pairs * 4);
      ASSERT_LT(rowBytes, pairs * 4 + 128);
      std::vector<float> x = random.vector(rows * xStride);
      x[0] = floatOf(0x00000010); // a denormal
      std::vector<uint32_t> gather(rows);
      for (size_t r = 0; r < rows; ++r)
        gather[r] = static_cast<uint32_t>((r * 7 + 3) % rows);
      const size_t words = Bf16RowMajor::bytes(rows, k) / 4;
      Aligned<uint32_t> fast(words, 0xdeadbeef), portable(words, 0xdeadbeef);
      convertRowsToBf16RowMajor(x.data(), xStride, gather.data(), k, fast.data, 1, rows);
      convertRowsToBf16RowMajorPortable(x.data(), xStride, gather.data(), k, portable.data, 1,
                                        rows);
      std::vector<bool> written(words, false);
      for (size_t r = 1; r < rows; ++r)
        for (size_t p = 0; p < pairs; ++p) {
          const size_t at = Bf16RowMajor::pairIndex(r, p, k);
          ASSERT_EQ(at, r * rowBytes / 4 + p);
          const uint32_t even = floatToBf16(x[gather[r] * xStride + 2 * p]);
          const uint32_t odd = 2 * p + 1 < k ? floatToBf16(x[gather[r] * xStride + 2 * p + 1]) : 0;
          ASSERT_EQ(fast.data[at], even | odd << 16) << "k=" << k << " row " << r << " pair " << p;
          written[at] = true;
        }
      for (size_t i = 0; i < words; ++i) {
        ASSERT_EQ(fast.data[i], portable.data[i]) << "k=" << k << " word " << i;
        if (!written[i])
          ASSERT_EQ(fast.data[i], 0xdeadbeefu) << "k=" << k << ": wrote outside the asked rows";
      }
    }
}

TEST(Bf16Test, ConversionForALinearFollowsItsRowCount) {
  const LinearKernelInfo amx =
      chooseLinearBf16Kernel(kCpuX86_64 | kCpuAvx2 | kCpuFma | kCpuAvx512F | kCpuAvx512BW |
                             kCpuAvx512Bf16 | kCpuAmxTile | kCpuAmxBf16);
  const LinearKernelInfo avx512 = {"LinearAvx512Bf16", "LinearAvx512Bf16 (jit)", true, true};
  EXPECT_FALSE(readsBf16RowMajor(amx, kAmxMinRows - 1));
  EXPECT_TRUE(readsBf16RowMajor(amx, kAmxMinRows));
  EXPECT_FALSE(readsBf16RowMajor(avx512, 4096));
  const size_t k = 100;
  EXPECT_EQ(convertedRowsBytes(avx512, 40, k), Bf16Rows::bytes(40, k));
  EXPECT_EQ(convertedRowsBytes(amx, 16, k), Bf16Rows::bytes(16, k));
  EXPECT_EQ(convertedRowsBytes(amx, 40, k),
            std::max(Bf16Rows::bytes(40, k), Bf16RowMajor::bytes(40, k)));
  // The same rows land in the layout the call reads.
  LongTailedRandom random(14);
  const std::vector<float> x = random.vector(40 * k);
  for (size_t rows : {kAmxMinRows - 1, kAmxMinRows}) {
    const size_t words = convertedRowsBytes(amx, rows, k) / 4;
    Aligned<uint32_t> got(words, 0), want(words, 0);
    convertRowsForLinear(amx, rows, x.data(), k, nullptr, k, got.data, 0, rows);
    if (rows >= kAmxMinRows)
      convertRowsToBf16RowMajorPortable(x.data(), k, nullptr, k, want.data, 0, rows);
    else
      convertRowsToBf16Portable(x.data(), k, nullptr, k, want.data, 0, rows);
    for (size_t i = 0; i < words; ++i)
      ASSERT_EQ(got.data[i], want.data[i]) << rows << " rows, word " << i;
  }
}

TEST(WeightLayoutTest, PacksBothOrientationsAndRoundTrips) {
  LongTailedRandom random(12);
  for (size_t n : {1, 5, 16, 17, 40})
    for (size_t k : {1, 2, 3, 16, 33}) {
      const LinearBf16N16K2 layout{n, k};
      ASSERT_EQ(layout.bytes(), (n + 15) / 16 * 16 * ((k + 1) / 2 * 2) * 2);
      uint64_t checked = 0;
      ASSERT_TRUE(LinearBf16N16K2::sizeChecked(n, k, checked));
      ASSERT_EQ(checked, layout.bytes());
      std::vector<float> nk = random.vector(n * k), kn(k * n);
      for (size_t row = 0; row < n; ++row)
        for (size_t col = 0; col < k; ++col)
          kn[col * n + row] = nk[row * k + col];
      std::vector<uint16_t> fromNK(layout.bytes() / 2, 0xdead), fromKN(layout.bytes() / 2, 0xbeef);
      packLinearBf16(nk.data(), false, n, k, fromNK.data());
      packLinearBf16(kn.data(), true, n, k, fromKN.data());
      ASSERT_EQ(fromNK, fromKN) << "n=" << n << " k=" << k;

      // Every element where the formula says; everything else is zero padding.
      std::vector<bool> used(fromNK.size(), false);
      for (size_t row = 0; row < n; ++row)
        for (size_t col = 0; col < k; ++col) {
          const uint64_t at =
              ((row / 16) * ((k + 1) / 2) + col / 2) * 32 + (row % 16) * 2 + col % 2;
          ASSERT_EQ(layout.index(row, col), at);
          ASSERT_EQ(fromNK[at], floatToBf16(nk[row * k + col]));
          used[at] = true;
        }
      for (size_t i = 0; i < fromNK.size(); ++i)
        if (!used[i])
          ASSERT_EQ(fromNK[i], 0) << "padding at " << i;

      for (size_t row = 0; row < n; ++row) {
        std::vector<float> back(k + 1, kNaN);
        unpackLinearBf16Row(fromNK.data(), n, k, row, back.data());
        for (size_t col = 0; col < k; ++col)
          ASSERT_EQ(bitsOf(back[col]), bitsOf(roundedToBf16(nk[row * k + col])));
        ASSERT_TRUE(std::isnan(back[k])) << "wrote past the row";
      }
    }
  uint64_t bytes = 0;
  EXPECT_FALSE(LinearBf16N16K2::sizeChecked(UINT64_MAX, 2, bytes));
  EXPECT_FALSE(LinearBf16N16K2::sizeChecked(1ull << 40, 1ull << 40, bytes));
}

// A kernel under test: how to make it, and whether it reads x converted to bf16.
struct KernelUnderTest {
  const char *name;
  bool available;
  std::string unavailableReason;
  std::unique_ptr<LinearKernel> (*make)(size_t k, bool residual);
};

std::unique_ptr<LinearKernel> makeAvx512Bf16(size_t k, bool residual) {
  Result<std::unique_ptr<LinearKernel>> kernel = createLinearAvx512Bf16(k, residual);
  EXPECT_TRUE(kernel.ok()) << kernel.message();
  return kernel.ok() ? std::move(kernel.value()) : nullptr;
}
std::unique_ptr<LinearKernel> makePortable(size_t k, bool residual) {
  return createLinearBf16Portable(k, residual);
}
std::unique_ptr<LinearKernel> makeAmxEmulated(size_t k, bool residual) {
  return std::make_unique<LinearAmxBf16Emulated>(k, residual);
}
std::unique_ptr<LinearKernel> makeAmxTiles(size_t k, bool residual) {
  Result<std::unique_ptr<LinearKernel>> kernel = createLinearAmxBf16(k, residual, true);
  EXPECT_TRUE(kernel.ok()) << kernel.message();
  return kernel.ok() ? std::move(kernel.value()) : nullptr;
}
std::unique_ptr<LinearKernel> makeAmxWithAvx512(size_t k, bool residual) {
  Result<std::unique_ptr<LinearKernel>> kernel = createLinearAmxBf16(k, residual);
  EXPECT_TRUE(kernel.ok()) << kernel.message();
  return kernel.ok() ? std::move(kernel.value()) : nullptr;
}

// Whether the host runs AMX tiles here (the CPU has them and Linux grants them), and why not.
bool hostRunsAmx() {
  return hostHas(kCpuAmxTile | kCpuAmxBf16 | kCpuAvx512Bf16) && requestAmxPermission().ok();
}
std::string whyNoAmx() {
  if (!hostHas(kCpuAmxTile | kCpuAmxBf16))
    return "host has no AMX (has " + describeCpuFeatures(hostCpuFeatures()) + ")";
  if (!hostHas(kCpuAvx512Bf16))
    return "host has no avx512-bf16";
  return requestAmxPermission().message();
}

std::vector<KernelUnderTest> kernelsUnderTest() {
  return {
      {"LinearAvx512Bf16", hostHas(kCpuAvx512Bf16),
       "host has no avx512-bf16 (has " + describeCpuFeatures(hostCpuFeatures()) + ")",
       &makeAvx512Bf16},
      {"LinearBf16Portable", true, "", &makePortable},
      // The AMX kernel's code on the tile model, for every row count: runs everywhere.
      {"LinearAmxBf16Emulated", true, "", &makeAmxEmulated},
      // The same code on the real tiles, for every row count; and as the engine runs it.
      {"LinearAmxBf16Tiles", hostRunsAmx(), whyNoAmx(), &makeAmxTiles},
      {"LinearAmxBf16", hostRunsAmx(), whyNoAmx(), &makeAmxWithAvx512},
  };
}

// An emulated AMX kernel's first fault (a configuration or shape its instructions would #UD or
// #GP on, or memory outside the call's rows, weight blocks and scratch); empty otherwise.
std::string emulationFault(const LinearKernel &kernel) {
  const auto *emulated = dynamic_cast<const LinearAmxBf16Emulated *>(&kernel);
  return emulated ? emulated->fault() : std::string();
}

// One shape of one kernel against the reference; returns the output for further comparisons.
struct Case {
  size_t rows, n, k;
  bool residual;
  bool gatherOutput;    // rows written through yRows, as lm_head does
  bool inPlace = false; // the residual is the output itself (y += x W^T)
};

std::vector<float> runCase(const LinearKernel &kernel, const Case &c, uint32_t seed,
                           const std::vector<std::pair<size_t, size_t>> &columnRanges,
                           std::vector<float> *xOut = nullptr) {
  LongTailedRandom random(seed);
  const size_t xStride = c.k + 5, yStride = c.n + 7, outRows = c.rows + 3;
  // W first, then x: calls with fewer rows see the same weights and the same first rows.
  std::vector<float> w = random.vector(c.n * c.k);
  std::vector<float> x = random.vector(c.rows * xStride);
  std::vector<float> residual = random.vector(c.rows * yStride);
  const LinearBf16N16K2 layout{c.n, c.k};
  Aligned<uint16_t> packed(layout.bytes() / 2);
  packLinearBf16(w.data(), false, c.n, c.k, packed.data);
  // The layout this kernel reads for this many rows; padding and rows past them poisoned with
  // bf16 NaN pairs, which would reach the outputs if a kernel read them.
  Aligned<uint32_t> xBf16(convertedRowsBytes(kernel.info(), c.rows, c.k) / 4, 0x7fc07fc0u);
  convertRowsForLinear(kernel.info(), c.rows, x.data(), xStride, nullptr, c.k, xBf16.data, 0,
                       c.rows);
  std::vector<uint32_t> yRows;
  for (size_t r = 0; r < c.rows; ++r)
    yRows.push_back(static_cast<uint32_t>(c.gatherOutput ? outRows - 1 - r : r));
  std::vector<float> y(outRows * yStride, kNaN);
  if (c.inPlace)
    for (size_t r = 0; r < c.rows; ++r)
      std::copy(residual.begin() + r * yStride, residual.begin() + r * yStride + c.n,
                y.begin() + r * yStride);

  LinearCall call;
  call.x = x.data();
  call.xStride = xStride;
  call.xBf16 = xBf16.data;
  call.rows = c.rows;
  call.w = packed.data;
  call.y = y.data();
  call.yStride = yStride;
  call.yRows = c.gatherOutput ? yRows.data() : nullptr;
  call.residual = c.residual ? (c.inPlace ? y.data() : residual.data()) : nullptr;
  call.residualStride = yStride;
  for (auto [begin, end] : columnRanges) {
    call.colBegin = begin;
    call.colEnd = end;
    kernel.run(call);
  }
  EXPECT_EQ(emulationFault(kernel), "");

  const std::string what = std::string(kernel.info().name) + " rows=" + std::to_string(c.rows) +
                           " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                           (c.residual ? " +residual" : "") + (c.gatherOutput ? " gathered" : "") +
                           (c.inPlace ? " in place" : "");
  const bool xRounded = kernel.info().readsBf16Rows;
  bool anyNonZero = false;
  std::vector<float> out(c.rows * c.n);
  for (size_t r = 0; r < c.rows; ++r) {
    const float *row = y.data() + yRows[r] * yStride;
    for (size_t col = 0; col < c.n; ++col) {
      double sum = 0, magnitude = 0;
      for (size_t i = 0; i < c.k; ++i) {
        const float xv = x[r * xStride + i];
        const double term =
            double(xRounded ? roundedToBf16(xv) : xv) * roundedToBf16(w[col * c.k + i]);
        sum += term;
        magnitude += std::abs(term);
      }
      if (c.residual) {
        sum += residual[r * yStride + col];
        magnitude += std::abs(residual[r * yStride + col]);
      }
      const float got = row[col];
      EXPECT_FALSE(std::isnan(got)) << what << ": row " << r << " column " << col << " not written";
      // Sequential f32 accumulation: at most about (K + 2) roundings of the running magnitude.
      const double tolerance = 1.2e-7 * (c.k + 4) * magnitude + 1e-30;
      EXPECT_LE(std::abs(got - sum), tolerance)
          << what << ": row " << r << " column " << col << " is " << got << ", reference " << sum;
      if (::testing::Test::HasFailure())
        return {};
      anyNonZero = anyNonZero || got != 0.0f;
      out[r * c.n + col] = got;
    }
    for (size_t col = c.n; col < yStride; ++col)
      EXPECT_TRUE(std::isnan(row[col])) << what << ": wrote past column " << c.n;
  }
  for (size_t r = 0; r < outRows; ++r) {
    bool target = false;
    for (uint32_t used : yRows)
      target = target || used == r;
    if (!target)
      for (size_t col = 0; col < yStride; ++col)
        EXPECT_TRUE(std::isnan(y[r * yStride + col])) << what << ": wrote row " << r;
  }
  EXPECT_TRUE(anyNonZero) << what << ": the output is all zeros";
  if (xOut)
    *xOut = x;
  return out;
}

class LinearKernelTest : public ::testing::TestWithParam<size_t> {};

TEST_P(LinearKernelTest, MatchesReferenceOverTails) {
  const KernelUnderTest kernel = kernelsUnderTest()[GetParam()];
  if (!kernel.available)
    GTEST_SKIP() << kernel.name << ": " << kernel.unavailableReason;
  uint32_t seed = 100;
  for (size_t k : {1, 2, 3, 17, 31, 32, 33, 64, 100, 257})
    for (bool residual : {false, true}) {
      std::unique_ptr<LinearKernel> made = kernel.make(k, residual);
      ASSERT_TRUE(made);
      for (size_t n : {1, 5, 16, 17, 33, 64, 65, 100, 130})
        for (size_t rows : {1, 2, 3, 5, 7, 8, 9, 11, 14, 15, 16, 17, 33}) {
          runCase(*made, {rows, n, k, residual, rows % 2 == 1}, ++seed, {{0, n}});
          if (residual && rows % 2 == 0)
            runCase(*made, {rows, n, k, true, false, true}, ++seed, {{0, n}});
          if (::testing::Test::HasFailure())
            return;
        }
    }
}

TEST_P(LinearKernelTest, ColumnSplitsAndRowCountsDoNotChangeBits) {
  const KernelUnderTest kernel = kernelsUnderTest()[GetParam()];
  if (!kernel.available)
    GTEST_SKIP() << kernel.name << ": " << kernel.unavailableReason;
  for (size_t k : {33, 300}) {
    std::unique_ptr<LinearKernel> made = kernel.make(k, false);
    ASSERT_TRUE(made);
    const size_t n = 150, rows = 21;
    const std::vector<float> whole = runCase(*made, {rows, n, k, false, false}, 7, {{0, n}});
    // Tasks of 16 and 48 columns in any order, as threads take them.
    const std::vector<float> split =
        runCase(*made, {rows, n, k, false, false}, 7, {{96, n}, {0, 16}, {48, 96}, {16, 48}});
    ASSERT_EQ(whole.size(), split.size());
    for (size_t i = 0; i < whole.size(); ++i)
      ASSERT_EQ(bitsOf(whole[i]), bitsOf(split[i])) << "element " << i;
    // Fewer rows per call: the first rows' results are the same bits, within one kernel (the AMX
    // kernel runs LinearAvx512Bf16 below kAmxMinRows rows: other bits, compared elsewhere).
    for (size_t fewer : {1, 4, 16, 17}) {
      if (readsBf16RowMajor(made->info(), fewer) != readsBf16RowMajor(made->info(), rows))
        continue;
      const std::vector<float> part = runCase(*made, {fewer, n, k, false, false}, 7, {{0, n}});
      for (size_t i = 0; i < part.size(); ++i)
        ASSERT_EQ(bitsOf(part[i]), bitsOf(whole[i])) << fewer << " rows, element " << i;
    }
  }
}

TEST_P(LinearKernelTest, ManyRowsCrossColumnChunks) {
  const KernelUnderTest kernel = kernelsUnderTest()[GetParam()];
  if (!kernel.available)
    GTEST_SKIP() << kernel.name << ": " << kernel.unavailableReason;
  // K large enough that the 512 KiB column chunk of a many-row call holds only a few blocks.
  for (size_t k : {1000, 9001}) {
    std::unique_ptr<LinearKernel> made = kernel.make(k, true);
    ASSERT_TRUE(made);
    runCase(*made, {40, 200, k, true, false}, 9, {{0, 200}});
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, LinearKernelTest,
                         ::testing::Range<size_t>(0, kernelsUnderTest().size()),
                         [](const ::testing::TestParamInfo<size_t> &info) {
                           return std::string(kernelsUnderTest()[info.param].name);
                         });

TEST(LinearKernelChoiceTest, BestKernelTheFeaturesAllow) {
  EXPECT_STREQ(chooseLinearBf16Kernel(kCpuX86_64).name, "LinearBf16Portable");
  EXPECT_FALSE(chooseLinearBf16Kernel(kCpuX86_64).jit);
  const uint64_t avx512 = kCpuX86_64 | kCpuAvx2 | kCpuFma | kCpuAvx512F | kCpuAvx512BW;
  EXPECT_STREQ(chooseLinearBf16Kernel(avx512).name, "LinearBf16Portable");
  const LinearKernelInfo best = chooseLinearBf16Kernel(avx512 | kCpuAvx512Bf16);
  EXPECT_STREQ(best.name, "LinearAvx512Bf16");
  EXPECT_TRUE(best.jit);
  EXPECT_TRUE(best.readsBf16Rows);
  if (!hostHas(kCpuAvx512Bf16)) {
    Result<std::unique_ptr<LinearKernel>> refused = createLinearAvx512Bf16(64, false);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("avx512-bf16"), std::string::npos) << refused.message();
  }

  // AMX BF16 with AVX-512 BF16: tiles for prefill-sized calls, LinearAvx512Bf16 below.
  const uint64_t amx = avx512 | kCpuAvx512Bf16 | kCpuAmxTile | kCpuAmxBf16;
  const LinearKernelInfo tiles = chooseLinearBf16Kernel(amx);
  EXPECT_STREQ(tiles.name, "LinearAmxBf16");
  EXPECT_STREQ(tiles.label, "LinearAmxBf16 (prefill) + LinearAvx512Bf16 (decode)");
  EXPECT_TRUE(tiles.readsBf16Rows);
  EXPECT_EQ(tiles.tileRowsFrom, kAmxMinRows);
  EXPECT_EQ(best.tileRowsFrom, 0u);
  // Without either AMX feature (as HETC_DISABLE_CPU_FEATURES=amx-tile or amx-bf16 leaves it),
  // or without AVX-512 BF16 for the decode calls, no tiles.
  EXPECT_STREQ(chooseLinearBf16Kernel(amx & ~kCpuAmxBf16).name, "LinearAvx512Bf16");
  EXPECT_STREQ(chooseLinearBf16Kernel(amx & ~kCpuAmxTile).name, "LinearAvx512Bf16");
  EXPECT_STREQ(chooseLinearBf16Kernel(amx & ~kCpuAvx512Bf16).name, "LinearBf16Portable");
  // The engine's features: the host's, less AMX only where Linux refuses the permission.
  const uint64_t amxBits = kCpuAmxTile | kCpuAmxBf16;
  EXPECT_EQ(linearKernelFeatures() & ~amxBits, hostCpuFeatures() & ~amxBits);
  EXPECT_EQ(linearKernelFeatures() == hostCpuFeatures(),
            !hostHas(kCpuAmxTile) || requestAmxPermission().ok());
  if (!hostRunsAmx()) {
    Result<std::unique_ptr<LinearKernel>> refused = createLinearAmxBf16(64, false);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("LinearAmxBf16"), std::string::npos) << refused.message();
    if (!hostHas(kCpuAmxTile))
      EXPECT_NE(refused.message().find("host has no AMX"), std::string::npos) << refused.message();
  }
}

TEST(JitGeneratorTest, ImpossibleShapesFailWithAMessage) {
  // Generation only; nothing runs, so this holds on any host.
  LinearAvx512Bf16::Shape shape;
  shape.rows = 16;
  shape.blocks = 2; // 32 accumulators: more than the registers hold
  LinearAvx512Bf16 tooWide(shape);
  const Status status = tooWide.create();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("LinearAvx512Bf16"), std::string::npos) << status.message();

  shape.blocks = 1;
  LinearAvx512Bf16 fine(shape);
  ASSERT_TRUE(fine.create().ok());
  EXPECT_GT(fine.codeBytes(), 0u);
  EXPECT_FALSE(fine.create().ok()) << "a second create() must be refused";
  for (uint32_t rows = 1; rows <= LinearAvx512Bf16::kMaxRows; ++rows) {
    const uint32_t blocks = LinearAvx512Bf16::blocksFor(rows);
    EXPECT_GE(blocks, 1u);
    EXPECT_LE(blocks, LinearAvx512Bf16::kMaxBlocks);
    EXPECT_LE(rows * blocks, LinearAvx512Bf16::kMaxAccumulators);
  }
}

TEST(AmxTest, TileConfigIsTheLdtilecfgOperand) {
  TileConfig config;
  config.tile(0, 16, 64).tile(3, 8, 32);
  const auto *bytes = reinterpret_cast<const uint8_t *>(&config);
  EXPECT_EQ(bytes[0], 1); // palette 1
  EXPECT_EQ(bytes[1], 0); // start row
  EXPECT_EQ(bytes[16], 64);
  EXPECT_EQ(bytes[17], 0);
  EXPECT_EQ(bytes[16 + 3 * 2], 32);
  EXPECT_EQ(bytes[48], 16);
  EXPECT_EQ(bytes[48 + 3], 8);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(&config) % 64, 0u);
  TileConfig other = config;
  EXPECT_TRUE(other == config);
  other.tile(1, 1, 4);
  EXPECT_FALSE(other == config);
}

TEST(AmxTest, PermissionIsAskedOnlyWithAmx) {
  const Status status = requestAmxPermission();
  if (!hostHas(kCpuAmxTile)) {
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find("host has no AMX"), std::string::npos) << status.message();
    GTEST_SKIP() << "host has no AMX: the permission request and tile loads are not exercised";
  }
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(requestAmxPermission().ok()) << "the first outcome is kept";
  TileConfig config;
  config.tile(0, 16, 64);
  loadTileConfig(config);
  loadTileConfig(config); // no reload: same configuration
  releaseTiles();
}

// ---------------------------------------------------------------------------------------------
// LinearAmxBf16: its tile configurations, its kernel on the tile model (every host), and on the
// real tiles against the model (AMX hosts only).

TEST(LinearAmxBf16Test, TileConfigurationOfEveryTailShape) {
  for (unsigned rows = 1; rows <= 32; ++rows)
    for (unsigned pairs = 1; pairs <= 16; ++pairs) {
      const TileConfig config = linearAmxBf16TileConfig(rows, pairs);
      // The ldtilecfg operand byte by byte: palette 1, colsb of tile t at 16 + 2t, rows at 48 + t.
      uint8_t expected[64] = {};
      expected[0] = 1;
      auto tile = [&](unsigned t, unsigned tileRows, unsigned colsb) {
        expected[16 + 2 * t] = static_cast<uint8_t>(colsb);
        expected[48 + t] = static_cast<uint8_t>(tileRows);
      };
      const unsigned top = std::min(rows, 16u), bottom = rows - top;
      tile(0, top, 64);        // C(0, 0)
      tile(1, top, 64);        // C(0, 1)
      tile(4, top, 4 * pairs); // A(0)
      if (bottom) {
        tile(2, bottom, 64);        // C(1, 0)
        tile(3, bottom, 64);        // C(1, 1)
        tile(5, bottom, 4 * pairs); // A(1)
      }
      tile(6, pairs, 64); // B(0)
      tile(7, pairs, 64); // B(1)
      ASSERT_EQ(std::memcmp(&config, expected, 64), 0) << rows << " rows, " << pairs << " pairs";
      // The model accepts it, and every product of the 2 x 2 blocking chains under it.
      EmulatedAmxTiles model;
      model.ldtilecfg(config);
      model.tdpbf16ps(0, 4, 6);
      model.tdpbf16ps(1, 4, 7);
      if (bottom) {
        model.tdpbf16ps(2, 5, 6);
        model.tdpbf16ps(3, 5, 7);
      }
      ASSERT_EQ(model.fault(), "") << rows << " rows, " << pairs << " pairs";
    }
  for (size_t k : {1, 2, 31, 32, 33, 64, 100, 2048, 8192, 9001}) {
    const LinearAmxBf16Shape shape = makeLinearAmxBf16Shape(k, k % 2 == 0);
    const size_t pairs = (k + 1) / 2;
    EXPECT_EQ(shape.kPairs, pairs);
    EXPECT_EQ(shape.fullSteps, pairs / 16) << "k=" << k;
    EXPECT_EQ(shape.tailPairs, pairs % 16) << "k=" << k;
    EXPECT_EQ(shape.aStride, Bf16RowMajor::rowBytes(k));
    EXPECT_EQ(shape.blockBytes, (LinearBf16N16K2{16, k}.blockBytes()));
    EXPECT_EQ(shape.residual, k % 2 == 0);
    EXPECT_GE(shape.chunkBlocks, 1u);
    EXPECT_LE(shape.chunkBlocks, LinearAmxBf16Shape::kMaxChunkBlocks);
    EXPECT_TRUE(shape.chunkBlocks == 1 || shape.chunkBlocks * shape.blockBytes <= 512 * 1024);
    for (unsigned rows = 1; rows <= 32; ++rows) {
      if (shape.fullSteps)
        EXPECT_TRUE(shape.configs[rows - 1][0] == linearAmxBf16TileConfig(rows, 16));
      if (shape.tailPairs)
        EXPECT_TRUE(shape.configs[rows - 1][1] ==
                    linearAmxBf16TileConfig(rows, static_cast<unsigned>(shape.tailPairs)));
    }
  }
}

// Row counts, K and N at the kernel's boundaries: one or two A tiles (16, 17, 32, 33 rows and
// past), K steps of 16 pairs with and without a shorter last step, one or two B tiles and
// several column chunks (up to 8 blocks each).
TEST(LinearAmxBf16Test, EmulatedMatchesReferenceAtTileBoundaries) {
  uint32_t seed = 500;
  for (size_t k : {2, 31, 32, 33, 62, 64, 66})
    for (bool residual : {false, true}) {
      LinearAmxBf16Emulated kernel(k, residual);
      for (size_t n : {16, 17, 48, 130, 257})
        for (size_t rows : {1, 15, 16, 17, 31, 32, 33, 47, 64, 65}) {
          runCase(kernel, {rows, n, k, residual, rows % 2 == 1}, ++seed, {{0, n}});
          if (residual && rows % 2 == 0)
            runCase(kernel, {rows, n, k, true, false, true}, ++seed, {{0, n}});
          if (HasFailure())
            return;
        }
    }
  for (size_t k : {1000, 2048}) {
    LinearAmxBf16Emulated kernel(k, true);
    for (size_t rows : {17, 33})
      runCase(kernel, {rows, 130, k, true, false}, ++seed, {{0, 130}});
    runCase(kernel, {40, 200, k, true, true}, ++seed, {{160, 200}, {0, 32}, {32, 160}});
  }
}

// The configuration is loaded only when it changes: one load for a call whose row blocks and K
// steps share one; two per row block when K has a shorter last step. The 2 x 2 blocking does
// one tdpbf16ps per C tile per K step.
TEST(LinearAmxBf16Test, LoadsAConfigurationOnlyWhenItChanges) {
  struct Expectation {
    size_t k, rows, n;
    uint64_t configLoads, dotProducts;
  };
  const Expectation cases[] = {
      {64, 64, 64, 1, 2 * 2 * 2 * 4},         // 2 row blocks x 2 column pairs x 2 steps x 4 tiles
      {64, 40, 64, 2, 2 * 2 * 4 + 2 * 2 * 2}, // a block of 32 rows, then one of 8 (one A tile)
      {66, 64, 64, 4, 2 * 2 * 3 * 4},         // per row block: the 2 full steps, then the tail step
      {30, 40, 48, 2, 4 + 2 + 2 + 1},         // a tail step only; 3 blocks: a pair, then one
  };
  for (const Expectation &e : cases) {
    LinearAmxBf16Emulated kernel(e.k, false);
    runCase(kernel, {e.rows, e.n, e.k, false, false}, 77, {{0, e.n}});
    EXPECT_EQ(kernel.configLoads(), e.configLoads) << "k=" << e.k << " rows=" << e.rows;
    EXPECT_EQ(kernel.dotProducts(), e.dotProducts) << "k=" << e.k << " rows=" << e.rows;
  }
}

TEST(LinearAmxBf16Test, RealTilesGiveTheEmulatedBits) {
  if (!hostRunsAmx())
    GTEST_SKIP() << whyNoAmx();
  uint32_t seed = 900;
  for (size_t k : {2, 33, 64, 66, 1000})
    for (bool residual : {false, true}) {
      std::unique_ptr<LinearKernel> real = makeAmxTiles(k, residual);
      ASSERT_TRUE(real);
      LinearAmxBf16Emulated emulated(k, residual);
      for (size_t n : {17, 130})
        for (size_t rows : {1, 16, 17, 33, 65}) {
          ++seed;
          const Case c{rows, n, k, residual, rows % 2 == 1};
          const std::vector<float> got = runCase(*real, c, seed, {{0, n}});
          const std::vector<float> want = runCase(emulated, c, seed, {{0, n}});
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(bitsOf(got[i]), bitsOf(want[i]))
                << "k=" << k << " n=" << n << " rows=" << rows << " element " << i << ": real "
                << got[i] << ", emulated " << want[i];
        }
    }
}

TEST(LinearAmxBf16Test, EngineKernelSwitchesToTilesAtKAmxMinRows) {
  if (!hostRunsAmx())
    GTEST_SKIP() << whyNoAmx();
  const size_t k = 200, n = 70;
  std::unique_ptr<LinearKernel> engineKernel = makeAmxWithAvx512(k, false);
  std::unique_ptr<LinearKernel> tiles = makeAmxTiles(k, false);
  std::unique_ptr<LinearKernel> avx512 = makeAvx512Bf16(k, false);
  ASSERT_TRUE(engineKernel && tiles && avx512);
  for (size_t rows : {size_t{1}, kAmxMinRows - 1, kAmxMinRows, size_t{40}}) {
    const Case c{rows, n, k, false, false};
    const std::vector<float> got = runCase(*engineKernel, c, 31, {{0, n}});
    const std::vector<float> want = runCase(rows < kAmxMinRows ? *avx512 : *tiles, c, 31, {{0, n}});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(bitsOf(got[i]), bitsOf(want[i])) << rows << " rows, element " << i;
  }
}

} // namespace
} // namespace hetc::codegen
