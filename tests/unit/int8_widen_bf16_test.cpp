// The alternative int8 kernel hetc-kernel-bench measures beside LinearInt8Avx512Vnni (int8
// weights widened to bf16 against bf16 activations, tools/kernel-bench/Int8WidenBf16.h): its
// figures compare two kernels only if it computes the product, checked here against a scalar
// reference of the same operands over tails, with the outputs it must not write poisoned.
#include "LongTailedRandom.h"

#include "codegen/cpu/isa/CpuFeatures.h"
#include "runtime/format/Bf16.h"
#include "runtime/format/WeightLayout.h"
#include "tools/kernel-bench/Int8WidenBf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace hetc {
namespace {

TEST(Int8WidenBf16Test, ComputesTheProductOfItsOperands) {
  if (!codegen::hostHas(codegen::kCpuAvx512F | codegen::kCpuAvx512BW | codegen::kCpuAvx512Bf16))
    GTEST_SKIP() << "the host has no AVX-512 BF16";
  struct Case {
    size_t n, k, rows, colBegin;
  };
  uint32_t seed = 700;
  for (const Case &c :
       {Case{16, 4, 1, 0}, Case{37, 13, 5, 16}, Case{64, 130, 4, 0}, Case{100, 257, 9, 32}}) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " rows " +
                 std::to_string(c.rows));
    const std::vector<float> w = test::LongTailedRandom(seed++).vector(c.n * c.k);
    const std::vector<float> x = test::LongTailedRandom(seed++).vector(c.rows * c.k);
    const LinearInt8N16K4 layout{c.n, c.k};
    std::vector<int8_t> q(layout.bytes());
    std::vector<float> scale(layout.paddedColumns());
    std::vector<int32_t> sums(layout.paddedColumns());
    quantizeLinearInt8(w.data(), false, c.n, c.k, q.data(), scale.data(), sums.data());
    const size_t stride = (c.k + 3) / 4 * 4;
    std::vector<uint16_t> xb(c.rows * stride, 0);
    for (size_t r = 0; r < c.rows; ++r)
      for (size_t i = 0; i < c.k; ++i)
        xb[r * stride + i] = floatToBf16(x[r * c.k + i]);
    const size_t yStride = c.n + 3;
    std::vector<float> y(c.rows * yStride, NAN);
    bench::linearInt8WidenBf16(xb.data(), stride, c.rows, q.data(), scale.data(), c.k, y.data(),
                               yStride, c.colBegin, c.n);
    for (size_t r = 0; r < c.rows; ++r)
      for (size_t n = 0; n < yStride; ++n) {
        const float got = y[r * yStride + n];
        if (n < c.colBegin || n >= c.n) {
          EXPECT_TRUE(std::isnan(got)) << "row " << r << " column " << n << " written";
          continue;
        }
        double want = 0, magnitude = 0;
        for (size_t i = 0; i < c.k; ++i) {
          const double term = double(bf16ToFloat(xb[r * stride + i])) * q[layout.index(n, i)];
          want += term;
          magnitude += std::fabs(term);
        }
        want *= scale[n];
        EXPECT_NEAR(got, want, 1e-5 * magnitude * scale[n] + 1e-30)
            << "row " << r << " column " << n;
      }
  }
}

} // namespace
} // namespace hetc
