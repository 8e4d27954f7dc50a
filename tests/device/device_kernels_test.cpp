// The ops' device implementations: the index arithmetic the CUDA kernels and the software device
// share, checked against the weight layouts the CPU kernels read; each kernel on the software
// device against a scalar reference on random data with tails, its unwritten outputs poisoned;
// and, where a GPU and libhetc_cuda.so are present, the CUDA kernel against the software device
// (skipped otherwise, with the reason; HETC_REQUIRE_GPU=1 makes that a failure).
#include "LongTailedRandom.h"

#include "codegen/cpu/linear/LinearInt8.h"
#include "codegen/cpu/vector/Kernels.h"
#include "codegen/cuda/rows/RowMath.h"
#include "runtime/device/DeviceLoader.h"
#include "runtime/device/SimDevice.h"
#include "runtime/device/kernels/DeviceKernels.h"
#include "runtime/format/Bf16.h"
#include "runtime/format/WeightLayout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdlib>
#include <random>
#include <vector>

namespace hetc::device {
namespace {

using codegen::cuda::GemvBf16Args;

TEST(DeviceKernels, GemvWordIndexIsTheLayoutsPair) {
  for (uint64_t n : {1, 16, 17, 45})
    for (uint64_t k : {1, 2, 7, 64}) {
      const LinearBf16N16K2 layout{n, k};
      const uint64_t pairs = codegen::cuda::gemvKPairs(k);
      EXPECT_EQ(pairs, layout.kPairs());
      for (uint64_t column = 0; column < n; ++column)
        for (uint64_t p = 0; p < pairs; ++p)
          ASSERT_EQ(2 * codegen::cuda::gemvWordIndex(column, p, pairs), layout.index(column, 2 * p))
              << n << " " << k << " " << column << " " << p;
    }
}

// What a decode GEMV over a packed weight gives, for `device`: rows x K of x, y poisoned past
// what it writes.
struct GemvCase {
  uint64_t n, k;
  uint32_t rows;
  std::vector<float> w, x;  // W [n, k] (bf16-exact values), x [rows, k]
  std::vector<uint16_t> packed;
};

GemvCase makeCase(uint64_t n, uint64_t k, uint32_t rows, uint64_t seed) {
  GemvCase c{n, k, rows, std::vector<float>(n * k), std::vector<float>(rows * k), {}};
  test::LongTailedRandom random(static_cast<uint32_t>(seed));
  for (float &v : c.w)
    v = bf16ToFloat(floatToBf16(random.next()));
  for (float &v : c.x)
    v = random.next();
  c.packed.resize(LinearBf16N16K2{n, k}.bytes() / sizeof(uint16_t));
  packLinearBf16(c.w.data(), false, n, k, c.packed.data());
  return c;
}

// y from `device`: the weight, x and the row count copied in, the kernel, y copied out. y's
// buffer has room for kGemvMaxRows rows and a tail, all poisoned.
Result<std::vector<float>> runGemv(Device &device, const GemvCase &c) {
  const uint32_t maxRows = codegen::cuda::kGemvMaxRows;
  const size_t yFloats = maxRows * c.n + 5;
  Result<StreamId> stream = device.createStream();
  Result<DevicePtr> w = device.allocate(c.packed.size() * sizeof(uint16_t));
  Result<DevicePtr> x = device.allocate(maxRows * c.k * sizeof(float));
  Result<DevicePtr> y = device.allocate(yFloats * sizeof(float));
  Result<DevicePtr> rows = device.allocate(sizeof(uint32_t));
  for (const Status &s : {stream.status(), w.status(), x.status(), y.status(), rows.status()})
    if (!s)
      return s;
  std::vector<float> out(yFloats);
  const std::vector<float> poison(yFloats, std::nanf(""));
  GemvBf16Args args;
  args.w = reinterpret_cast<const uint32_t *>(w->address);
  args.x = reinterpret_cast<const float *>(x->address);
  args.y = reinterpret_cast<float *>(y->address);
  args.rows = reinterpret_cast<const uint32_t *>(rows->address);
  args.xStride = c.k;
  args.yStride = c.n;
  args.n = c.n;
  args.k = c.k;
  std::vector<float> xFull(maxRows * c.k, 0.0f);
  std::copy(c.x.begin(), c.x.end(), xFull.begin());
  for (const Status &s :
       {device.copyToDevice(*stream, *w, c.packed.data(), c.packed.size() * sizeof(uint16_t)),
        device.copyToDevice(*stream, *x, xFull.data(), xFull.size() * sizeof(float)),
        device.copyToDevice(*stream, *y, poison.data(), yFloats * sizeof(float)),
        device.copyToDevice(*stream, *rows, &c.rows, sizeof c.rows),
        device.launch(*stream, kGemvBf16, &args, sizeof args, gemvBf16Accesses(args, maxRows)),
        device.copyToHost(*stream, out.data(), *y, yFloats * sizeof(float)),
        device.synchronize(*stream)})
    if (!s)
      return s;
  return out;
}

void expectGemv(const GemvCase &c, const std::vector<float> &y) {
  for (uint32_t r = 0; r < c.rows; ++r)
    for (uint64_t col = 0; col < c.n; ++col) {
      double exact = 0, magnitude = 0;
      for (uint64_t i = 0; i < c.k; ++i) {
        exact += double(c.x[r * c.k + i]) * c.w[col * c.k + i];
        magnitude += std::fabs(double(c.x[r * c.k + i]) * c.w[col * c.k + i]);
      }
      // float accumulation over k terms in any order: within k ulps of the magnitude.
      ASSERT_NEAR(y[r * c.n + col], exact, 1e-6 * magnitude * double(c.k) + 1e-30)
          << "row " << r << " column " << col;
    }
  for (size_t i = c.rows * c.n; i < y.size(); ++i)
    ASSERT_TRUE(std::isnan(y[i])) << "the kernel wrote past its rows, at " << i;
}

TEST(DeviceKernels, GemvBf16OnTheSoftwareDevice) {
  uint64_t seed = 1;
  for (uint64_t n : {1, 16, 33, 100})
    for (uint64_t k : {1, 2, 15, 64, 129})
      for (uint32_t rows : {1u, 3u, 8u}) {
        const GemvCase c = makeCase(n, k, rows, seed++);
        SimDevice device;
        Result<std::vector<float>> y = runGemv(device, c);
        ASSERT_TRUE(y) << y.message();
        expectGemv(c, *y);
      }
}

TEST(DeviceKernels, GemvBf16OnCudaEqualsTheSoftwareDevice) {
  Result<std::unique_ptr<Device>> cuda = openCudaDevice();
  if (!cuda) {
    if (const char *require = std::getenv("HETC_REQUIRE_GPU"); require && *require == '1')
      FAIL() << "HETC_REQUIRE_GPU=1: " << cuda.message();
    GTEST_SKIP() << cuda.message();
  }
  for (uint64_t n : {16, 100, 2048})
    for (uint64_t k : {15, 64, 2048}) {
      const GemvCase c = makeCase(n, k, 8, n * 7 + k);
      SimDevice sim;
      Result<std::vector<float>> expected = runGemv(sim, c);
      Result<std::vector<float>> got = runGemv(**cuda, c);
      ASSERT_TRUE(expected && got) << (got ? expected.message() : got.message());
      expectGemv(c, *got);
    }
}

TEST(DeviceKernels, GemvInt8WordIndexIsTheLayoutsQuad) {
  for (uint64_t n : {1, 16, 17, 45})
    for (uint64_t k : {1, 4, 7, 64}) {
      const LinearInt8N16K4 layout{n, k};
      const uint64_t quads = codegen::cuda::gemvKQuads(k);
      EXPECT_EQ(quads, layout.kQuads());
      for (uint64_t column = 0; column < n; ++column)
        for (uint64_t q = 0; q < quads; ++q)
          ASSERT_EQ(4 * codegen::cuda::gemvInt8WordIndex(column, q, quads), layout.index(column, 4 * q));
    }
}

// The int8 GEMV on the software device gives the CPU kernels' bits: the same quantized rows and
// weights through linearInt8Portable and through the device, with and without a residual.
TEST(DeviceKernels, GemvInt8GivesTheCpuKernelsBits) {
  uint32_t seed = 11;
  for (uint64_t n : {1, 16, 45, 100})
    for (uint64_t k : {1, 5, 64, 130})
      for (uint32_t rows : {1u, 3u, 8u})
        for (bool residual : {false, true}) {
          test::LongTailedRandom random(seed++);
          const std::vector<float> w = random.vector(n * k), x = random.vector(rows * k);
          const LinearInt8N16K4 layout{n, k};
          std::vector<int8_t> packed(layout.bytes());
          std::vector<float> scale(layout.paddedColumns());
          std::vector<int32_t> columnSum(layout.paddedColumns());
          quantizeLinearInt8(w.data(), false, n, k, packed.data(), scale.data(), columnSum.data());
          const size_t stride = 4 * layout.kQuads();
          std::vector<uint8_t> xq(codegen::cuda::kGemvInt8MaxRows * stride, 0);
          std::vector<float> rowScale(codegen::cuda::kGemvInt8MaxRows, 0.0f);
          codegen::quantizeRowsInt8(x.data(), k, rows, k, xq.data(), stride, rowScale.data());
          std::vector<float> residualRows = random.vector(codegen::cuda::kGemvInt8MaxRows * n);

          std::vector<float> cpu(rows * n, std::nanf(""));
          codegen::LinearInt8Call call;
          call.x = codegen::QuantizedRows{xq.data(), stride, rowScale.data(), rows};
          call.w = packed.data();
          call.scale = scale.data();
          call.columnSum = columnSum.data();
          call.k = k;
          call.y = cpu.data();
          call.yStride = n;
          call.residual = residual ? residualRows.data() : nullptr;
          call.residualStride = n;
          call.colBegin = 0;
          call.colEnd = n;
          codegen::linearInt8Portable(call);

          SimDevice device;
          const StreamId s = *device.createStream();
          auto upload = [&](const void *data, size_t bytes) {
            const DevicePtr ptr = *device.allocate(bytes);
            EXPECT_TRUE(device.copyToDevice(s, ptr, data, bytes));
            return ptr;
          };
          codegen::cuda::GemvInt8Args a;
          a.w = reinterpret_cast<const uint32_t *>(upload(packed.data(), packed.size()).address);
          a.scale = reinterpret_cast<const float *>(upload(scale.data(), scale.size() * 4).address);
          a.columnSum = reinterpret_cast<const int32_t *>(
              upload(columnSum.data(), columnSum.size() * 4).address);
          a.xq = reinterpret_cast<const uint8_t *>(upload(xq.data(), xq.size()).address);
          a.rowScale =
              reinterpret_cast<const float *>(upload(rowScale.data(), rowScale.size() * 4).address);
          if (residual)
            a.residual = reinterpret_cast<const float *>(
                upload(residualRows.data(), residualRows.size() * 4).address);
          a.rows = reinterpret_cast<const uint32_t *>(upload(&rows, sizeof rows).address);
          const DevicePtr y = *device.allocate(codegen::cuda::kGemvInt8MaxRows * n * sizeof(float));
          a.y = reinterpret_cast<float *>(y.address);
          a.xStride = stride;
          a.residualStride = a.yStride = n;
          a.n = n;
          a.k = k;
          ASSERT_TRUE(device.launch(s, kGemvInt8, &a, sizeof a,
                                    gemvInt8Accesses(a, codegen::cuda::kGemvInt8MaxRows)));
          std::vector<float> got(codegen::cuda::kGemvInt8MaxRows * n);
          ASSERT_TRUE(device.copyToHost(s, got.data(), y, got.size() * sizeof(float)));
          ASSERT_TRUE(device.synchronize(s));
          for (size_t i = 0; i < cpu.size(); ++i)
            ASSERT_EQ(std::memcmp(&got[i], &cpu[i], sizeof(float)), 0)
                << "n " << n << " k " << k << " rows " << rows << " residual " << residual
                << " at " << i << ": " << got[i] << " vs the CPU's " << cpu[i];
          for (size_t i = cpu.size(); i < got.size(); ++i)
            ASSERT_TRUE(std::isnan(got[i])) << "written past its rows at " << i;
        }
}

TEST(DeviceLoader, SaysWhyThereIsNoCudaDevice) {
  Result<std::unique_ptr<Device>> cuda = openCudaDevice();
  if (cuda)
    GTEST_SKIP() << "this host has a GPU: " << (*cuda)->name();
  EXPECT_EQ(cuda.message().rfind("no CUDA device: ", 0), 0u) << cuda.message();
  EXPECT_EQ(cuda.message().find('\n'), std::string::npos) << cuda.message();
}

// The CUDA row kernels' per-element arithmetic (RowMath.h), compiled for the host, gives the
// portable CPU kernels' bits: each activation, RoPE's rotation, the soft-cap and the first
// maximum (ties included) on long-tailed random data.
TEST(DeviceKernels, RowMathGivesThePortableKernelsBits) {
  test::LongTailedRandom random(5);
  const std::vector<float> x = random.vector(4096), up = random.vector(4096);
  for (uint8_t f = 0; f < 4; ++f) {
    const auto function = static_cast<kernels::ActivationFunction>(f);
    std::vector<float> cpu(x.size()), gated(x.size());
    kernels::activation(function, x.data(), 0, x.size(), cpu.data(), 0, 0, 1);
    kernels::gated(function, x.data(), 0, up.data(), 0, x.size(), gated.data(), 0, 0, 1);
    for (size_t i = 0; i < x.size(); ++i) {
      const float y = codegen::cuda::rowActivation(f, x[i]);
      ASSERT_EQ(std::memcmp(&y, &cpu[i], 4), 0) << "function " << int(f) << " at " << x[i];
      const float g = y * up[i];
      ASSERT_EQ(std::memcmp(&g, &gated[i], 4), 0) << "gated " << int(f) << " at " << x[i];
    }
  }
  // RoPE: two heads of 8, rotate-half and interleaved, at a few positions.
  for (bool interleaved : {false, true})
    for (uint32_t position : {0u, 1u, 37u, 4095u}) {
      const size_t headDim = 8, heads = 2, half = headDim / 2;
      const std::vector<float> invFreq = {1.0f, 0.1f, 0.01f, 0.001f};
      std::vector<float> cpu(x.begin(), x.begin() + heads * headDim), shared = cpu;
      kernels::rope(cpu.data(), 0, heads, kernels::RopeForm{headDim, headDim, interleaved},
                    invFreq.data(), &position, 0, 1);
      for (size_t h = 0; h < heads; ++h)
        for (size_t i = 0; i < half; ++i) {
          const float angle = static_cast<float>(position) * invFreq[i];
          float *xh = shared.data() + h * headDim;
          codegen::cuda::ropeRotate(xh[interleaved ? 2 * i : i],
                                    xh[interleaved ? 2 * i + 1 : i + half], std::cos(angle),
                                    std::sin(angle));
        }
      ASSERT_EQ(std::memcmp(cpu.data(), shared.data(), cpu.size() * 4), 0);
    }
  std::vector<float> capped(x);
  kernels::softCap(1.5f, capped.data(), capped.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float y = codegen::cuda::softCapOf(1.5f, x[i]);
    ASSERT_EQ(std::memcmp(&y, &capped[i], 4), 0);
  }
  // The first maximum, whatever order the candidates are folded in.
  std::vector<float> ties = {1, 3, 2, 3, -1, 3};
  for (size_t rotation = 0; rotation < ties.size(); ++rotation) {
    float best = -INFINITY;
    uint32_t bestIndex = UINT32_MAX;
    for (size_t j = 0; j < ties.size(); ++j) {
      const uint32_t i = static_cast<uint32_t>((j + rotation) % ties.size());
      if (codegen::cuda::beforeInArgmax(ties[i], i, best, bestIndex))
        best = ties[i], bestIndex = i;
    }
    EXPECT_EQ(bestIndex, kernels::argmaxFirst(ties.data(), ties.size()));
  }
}

} // namespace
} // namespace hetc::device
