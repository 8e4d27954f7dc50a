// The BF16 linear kernels (codegen/cpu/Linear.h) against a double-precision reference over shapes
// with tails (K and N not multiples of the pair, block or call widths; 1..16 rows and more), the
// weight layout and bf16 conversions, and the AMX pieces that can be checked without AMX.
// Outputs are poisoned with NaN first: an element a kernel forgets stays NaN and fails, an element
// written outside the asked range shows up as a number; an all-zero output is refused. A kernel
// whose ISA the host lacks is skipped with the reason.
#include "LongTailedRandom.h"

#include "codegen/cpu/Amx.h"
#include "codegen/cpu/CpuFeatures.h"
#include "codegen/cpu/Linear.h"
#include "codegen/cpu/LinearAvx512Bf16.h"
#include "codegen/cpu/WeightLayout.h"

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

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}
float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

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

std::vector<KernelUnderTest> kernelsUnderTest() {
  return {
      {"LinearAvx512Bf16", hostHas(kCpuAvx512Bf16),
       "host has no avx512-bf16 (has " + describeCpuFeatures(hostCpuFeatures()) + ")",
       &makeAvx512Bf16},
      {"LinearBf16Portable", true, "", &makePortable},
  };
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
  Aligned<uint32_t> xBf16(Bf16Rows::bytes(c.rows, c.k) / 4);
  convertRowsToBf16(x.data(), xStride, nullptr, c.k, xBf16.data, 0, c.rows);
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
    // Fewer rows per call: the first rows' results are the same bits.
    for (size_t fewer : {1, 4, 16}) {
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

INSTANTIATE_TEST_SUITE_P(Kernels, LinearKernelTest, ::testing::Values(0, 1),
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

} // namespace
} // namespace hetc::codegen
