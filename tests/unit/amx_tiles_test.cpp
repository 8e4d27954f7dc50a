// EmulatedAmxTiles, the scalar model of the AMX tile registers the AMX linear kernel is tested
// on: its LDTILECFG rules, its loads and stores, and TDPBF16PS as the Intel SDM defines it (even
// and odd K accumulators per instruction, DAZ, FTZ, round to nearest even), on cases where a
// simpler model would give other bits. On a host with AMX every case also runs on the real tiles
// and must give the model's bits; elsewhere that part skips with "host has no AMX".
#include "FloatBits.h"
#include "codegen/cpu/isa/Amx.h"
#include "codegen/cpu/isa/AmxTiles.h"
#include "codegen/cpu/isa/CpuFeatures.h"
#include "codegen/cpu/linear/ActivationRows.h"
#include "codegen/cpu/linear/LinearAmxBf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace hetc::codegen {
namespace {

using test::bitsOf;
using test::floatOf;

// C[m x n] += A[m x k pairs] * B[k pairs x n], tiles 0 (C), 4 (A) and 6 (B) as the kernel's
// C(0, 0), A(0) and B(0); rows of A and B are their pairs, back to back.
struct DotCase {
  std::string name;
  unsigned m, n, k;
  std::vector<uint16_t> a; // m rows of k pairs
  std::vector<uint16_t> b; // k rows of n pairs
  std::vector<float> c;    // m rows of n

  DotCase(std::string name, unsigned m, unsigned n, unsigned k)
      : name(std::move(name)), m(m), n(n), k(k), a(2 * m * k), b(2 * k * n), c(m * n) {}
  uint16_t &A(unsigned row, unsigned element) { return a[row * 2 * k + element]; }
  uint16_t &B(unsigned pair, unsigned element) { return b[pair * 2 * n + element]; }
  TileConfig config() const {
    TileConfig config;
    config.tile(amx::tileC(0, 0), static_cast<uint8_t>(m), static_cast<uint16_t>(4 * n))
        .tile(amx::tileA(0), static_cast<uint8_t>(m), static_cast<uint16_t>(4 * k))
        .tile(amx::tileB(0), static_cast<uint8_t>(k), static_cast<uint16_t>(4 * n));
    return config;
  }
};

std::vector<float> emulated(DotCase d, std::string *fault = nullptr) {
  EmulatedAmxTiles tiles;
  tiles.allowRead(d.a.data(), d.a.size() * 2);
  tiles.allowRead(d.b.data(), d.b.size() * 2);
  tiles.allowWrite(d.c.data(), d.c.size() * 4);
  amxDotProduct(tiles, d.config(), d.a.data(), 4 * d.k, d.b.data(), 4 * d.n, d.c.data(), 4 * d.n);
  if (fault)
    *fault = tiles.fault();
  else
    EXPECT_EQ(tiles.fault(), "") << d.name;
  return d.c;
}

constexpr uint16_t kOne = 0x3f80;          // 1.0
constexpr uint16_t kTwoToMinus24 = 0x3380; // 2^-24: half an f32 ulp of 1
constexpr uint16_t kDenormal = 0x0001;     // 2^-133
constexpr uint16_t kTwoTo100 = 0x7180;
constexpr uint16_t kTwoToMinus70 = 0x1c80;

std::vector<DotCase> dotCases() {
  std::vector<DotCase> cases;
  {
    // Even products 1, 0; odd products 2^-24, 2^-24. The SDM's two accumulators give
    // 1 + (2^-24 + 2^-24) = 1 + 2^-23; one running sum (1 + 2^-24 rounds to 1, twice) gives 1.
    DotCase d("even and odd accumulators", 1, 1, 2);
    d.A(0, 0) = kOne, d.A(0, 1) = kTwoToMinus24, d.A(0, 2) = 0, d.A(0, 3) = kTwoToMinus24;
    d.B(0, 0) = kOne, d.B(0, 1) = kOne, d.B(1, 0) = kOne, d.B(1, 1) = kOne;
    cases.push_back(d);
  }
  {
    // A denormal bf16 input is a zero: 2^-133 * 2^100 would be 2^-33.
    DotCase d("denormal inputs are zero", 1, 1, 1);
    d.A(0, 0) = kDenormal, d.B(0, 0) = kTwoTo100;
    cases.push_back(d);
  }
  {
    // A denormal result is a zero: 2^-70 * 2^-70 = 2^-140.
    DotCase d("denormal results are zero", 1, 1, 1);
    d.A(0, 1) = kTwoToMinus70, d.B(0, 1) = kTwoToMinus70;
    cases.push_back(d);
  }
  {
    // A denormal C is read as a zero.
    DotCase d("denormal accumulator is zero", 1, 1, 1);
    d.c[0] = floatOf(0x00000001);
    cases.push_back(d);
  }
  {
    // Rounding to nearest even at each step: even = (1 + 2^-7)^2 - 1 = 2^-6 + 2^-14 exactly,
    // odd = 2^24; even + odd rounds to 2^24, and C = 3 + 2^24 ties and rounds to 2^24 + 4.
    DotCase d("rounding of the sum into C", 1, 1, 2);
    d.A(0, 0) = 0x3f81, d.B(0, 0) = 0x3f81; // 1 + 2^-7, twice
    d.A(0, 2) = 0xbf80, d.B(1, 0) = kOne;   // -1
    d.A(0, 1) = kOne, d.B(0, 1) = 0x4b80;   // 2^24 in the odd accumulator
    d.c[0] = 3.0f;
    cases.push_back(d);
  }
  {
    // Full tiles of long-tailed values, C not zero.
    DotCase d("full tiles", 16, 16, 16);
    std::mt19937 random(5);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::uniform_int_distribution<int> exponent(-20, 20);
    for (uint16_t &x : d.a)
      x = floatToBf16(std::ldexp(value(random), exponent(random)));
    for (uint16_t &x : d.b)
      x = floatToBf16(std::ldexp(value(random), exponent(random)));
    for (float &x : d.c)
      x = std::ldexp(value(random), exponent(random));
    cases.push_back(d);
  }
  {
    // The kernel's tail shapes: 5 rows, 3 pairs.
    DotCase d("5 rows x 3 pairs", 5, 16, 3);
    std::mt19937 random(6);
    std::uniform_real_distribution<float> value(-2.0f, 2.0f);
    for (uint16_t &x : d.a)
      x = floatToBf16(value(random));
    for (uint16_t &x : d.b)
      x = floatToBf16(value(random));
    cases.push_back(d);
  }
  return cases;
}

TEST(EmulatedAmxTilesTest, DotProductFollowsTheSdm) {
  std::vector<DotCase> cases = dotCases();
  EXPECT_EQ(bitsOf(emulated(cases[0])[0]), bitsOf(1.0f + 0x1p-23f)) << cases[0].name;
  EXPECT_EQ(bitsOf(emulated(cases[1])[0]), 0u) << cases[1].name;
  EXPECT_EQ(bitsOf(emulated(cases[2])[0]), 0u) << cases[2].name;
  EXPECT_EQ(bitsOf(emulated(cases[3])[0]), 0u) << cases[3].name;
  const float rounded = emulated(cases[4])[0];
  EXPECT_EQ(bitsOf(rounded), bitsOf(16777220.0f)) << cases[4].name << ": " << rounded;

  // Whole tiles against a double-precision sum of the same products: the element order (A rows
  // of pairs, B rows of 16 column pairs in VNNI order) is right.
  for (size_t i = 5; i < cases.size(); ++i) {
    DotCase &d = cases[i];
    const std::vector<float> got = emulated(d);
    bool anyNonZero = false;
    for (unsigned row = 0; row < d.m; ++row)
      for (unsigned col = 0; col < d.n; ++col) {
        double sum = d.c[row * d.n + col], magnitude = std::abs(sum);
        for (unsigned p = 0; p < d.k; ++p)
          for (unsigned half = 0; half < 2; ++half) {
            const double term =
                double(bf16ToFloat(d.A(row, 2 * p + half))) * bf16ToFloat(d.B(p, 2 * col + half));
            sum += term;
            magnitude += std::abs(term);
          }
        const float value = got[row * d.n + col];
        EXPECT_LE(std::abs(value - sum), 4e-7 * (d.k + 2) * magnitude)
            << d.name << " row " << row << " column " << col;
        anyNonZero = anyNonZero || value != 0.0f;
      }
    EXPECT_TRUE(anyNonZero) << d.name;
  }
}

TEST(EmulatedAmxTilesTest, RealTilesGiveTheModelsBits) {
  if (!hostHas(kCpuAmxTile | kCpuAmxBf16))
    GTEST_SKIP() << "host has no AMX (has " << describeCpuFeatures(hostCpuFeatures()) << ")";
  ASSERT_TRUE(requestAmxPermission().ok()) << requestAmxPermission().message();
  for (DotCase d : dotCases()) {
    const std::vector<float> want = emulated(d);
    amxDotProductOnTiles(d.config(), d.a.data(), 4 * d.k, d.b.data(), 4 * d.n, d.c.data(), 4 * d.n);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(bitsOf(d.c[i]), bitsOf(want[i]))
          << d.name << ", element " << i << ": hardware " << d.c[i] << ", model " << want[i];
  }
}

TEST(EmulatedAmxTilesTest, ConfigurationRules) {
  auto faultOf = [](TileConfig config) {
    EmulatedAmxTiles tiles;
    tiles.ldtilecfg(config);
    return tiles.fault();
  };
  TileConfig good;
  good.tile(0, 16, 64).tile(4, 16, 64).tile(6, 16, 64);
  EXPECT_EQ(faultOf(good), "");
  TileConfig palette = good;
  palette.palette = 2;
  EXPECT_NE(faultOf(palette).find("palette 2"), std::string::npos) << faultOf(palette);
  TileConfig reserved = good;
  reserved.reserved[3] = 1;
  EXPECT_NE(faultOf(reserved).find("reserved byte 5"), std::string::npos) << faultOf(reserved);
  TileConfig tooManyRows = good;
  tooManyRows.tile(1, 17, 64);
  EXPECT_NE(faultOf(tooManyRows).find("exceeds 16 x 64"), std::string::npos);
  TileConfig tooWide = good;
  tooWide.tile(1, 1, 68);
  EXPECT_NE(faultOf(tooWide).find("exceeds 16 x 64"), std::string::npos);
  TileConfig rowsWithoutBytes = good;
  rowsWithoutBytes.tile(2, 4, 0);
  EXPECT_NE(faultOf(rowsWithoutBytes).find("both or neither"), std::string::npos);
  TileConfig ninthTile = good;
  ninthTile.tile(8, 1, 4);
  EXPECT_NE(faultOf(ninthTile).find("has 8 tiles"), std::string::npos);

  // A load zeroes every tile; the policy reloads only a different configuration.
  float c[16 * 16];
  for (float &x : c)
    x = 1.5f;
  EmulatedAmxTiles tiles;
  tiles.allowWrite(c, sizeof(c));
  tiles.configure(good);
  tiles.loadC<0, 0>(c, 64);
  tiles.configure(good); // the same: kept
  EXPECT_EQ(tiles.configLoads(), 1u);
  float out[16 * 16] = {};
  tiles.allowWrite(out, sizeof(out));
  tiles.storeC<0, 0>(out, 64);
  EXPECT_EQ(out[255], 1.5f);
  TileConfig other = good;
  other.tile(1, 2, 8);
  tiles.configure(other);
  EXPECT_EQ(tiles.configLoads(), 2u);
  tiles.storeC<0, 0>(out, 64);
  EXPECT_EQ(out[0], 0.0f) << "ldtilecfg zeroes the tiles";
  EXPECT_EQ(out[255], 0.0f);
  EXPECT_EQ(tiles.fault(), "");
  // After tilerelease every tile instruction faults.
  tiles.release();
  EXPECT_FALSE(tiles.configured());
  tiles.zeroC<0, 0>();
  EXPECT_NE(tiles.fault().find("not configured"), std::string::npos) << tiles.fault();
}

TEST(EmulatedAmxTilesTest, ShapeAndMemoryFaults) {
  auto run = [](TileConfig config, unsigned dst, unsigned a, unsigned b) {
    EmulatedAmxTiles tiles;
    tiles.ldtilecfg(config);
    tiles.tdpbf16ps(dst, a, b);
    return tiles.fault();
  };
  TileConfig config;
  config.tile(0, 16, 64).tile(4, 16, 64).tile(6, 16, 64).tile(7, 8, 64).tile(5, 8, 64);
  EXPECT_EQ(run(config, 0, 4, 6), "");
  // K of A (16 pairs) against 8 B rows; C rows against A rows.
  EXPECT_NE(run(config, 0, 4, 7).find("do not chain"), std::string::npos);
  EXPECT_NE(run(config, 0, 5, 6).find("do not chain"), std::string::npos);
  EXPECT_NE(run(config, 0, 0, 6).find("not distinct"), std::string::npos);
  EXPECT_NE(run(config, 1, 4, 6).find("tile 1 is not configured"), std::string::npos);

  // Loads and stores only where allowed: one row past the readable rows faults.
  std::vector<uint8_t> memory(17 * 64);
  EmulatedAmxTiles tiles;
  tiles.allowRead(memory.data(), 16 * 64);
  tiles.ldtilecfg(config);
  tiles.tileloadd(4, memory.data(), 64);
  EXPECT_EQ(tiles.fault(), "");
  tiles.tileloadd(4, memory.data() + 64, 64);
  EXPECT_NE(tiles.fault().find("row 15 reads 64 bytes"), std::string::npos) << tiles.fault();
  EmulatedAmxTiles readOnly;
  readOnly.allowRead(memory.data(), memory.size());
  readOnly.ldtilecfg(config);
  readOnly.tilestored(0, memory.data(), 64);
  EXPECT_NE(readOnly.fault().find("writes"), std::string::npos) << readOnly.fault();
}

} // namespace
} // namespace hetc::codegen
