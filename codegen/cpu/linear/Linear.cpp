// Kernel choice for BF16 linear weights, and the portable kernel that runs on any x86-64.
#include "codegen/cpu/linear/Linear.h"

#include "codegen/cpu/isa/Amx.h"
#include "codegen/cpu/isa/CpuFeatures.h"
#include "codegen/cpu/linear/ActivationRows.h"
#include "codegen/cpu/linear/LinearAmxBf16.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace hetc::codegen {
namespace {

constexpr size_t kBlock = LinearBf16N16K2::kBlockColumns;

// One 64-byte line of the layout as two f32 vectors: the even and the odd k of 16 columns.
inline void expandLine(const uint16_t *line, float *even, float *odd) {
  for (size_t c = 0; c < kBlock; ++c) {
    even[c] = bf16ToFloat(line[2 * c]);
    odd[c] = bf16ToFloat(line[2 * c + 1]);
  }
}

// R rows against one 16-column block, every K pair: acc[r][c] += x0 * w0[c] + x1 * w1[c] in K
// order. The same expression for every row count, so blocking never changes a value.
template <size_t R>
void blockRows(const float *const *x, const uint16_t *panel, size_t k, float (*acc)[kBlock]) {
  for (size_t r = 0; r < R; ++r)
    for (size_t c = 0; c < kBlock; ++c)
      acc[r][c] = 0.0f;
  float even[kBlock], odd[kBlock];
  const size_t pairs = (k + 1) / 2;
  for (size_t p = 0; p < pairs; ++p) {
    expandLine(panel + p * 2 * kBlock, even, odd);
    for (size_t r = 0; r < R; ++r) {
      const float x0 = x[r][2 * p];
      const float x1 = 2 * p + 1 < k ? x[r][2 * p + 1] : 0.0f;
      for (size_t c = 0; c < kBlock; ++c)
        acc[r][c] += x0 * even[c] + x1 * odd[c];
    }
  }
}

class LinearBf16PortableKernel : public LinearKernel {
public:
  LinearBf16PortableKernel(size_t k, bool residual)
      : LinearKernel({"LinearBf16Portable", "LinearBf16Portable", false, false}, k, residual) {}

  void run(const LinearCall &call) const override {
    constexpr size_t kRows = 4;
    const size_t panelElements = (k() + 1) / 2 * 2 * kBlock;
    for (size_t r0 = 0; r0 < call.rows; r0 += kRows) {
      const size_t rows = std::min(kRows, call.rows - r0);
      const float *x[kRows];
      for (size_t r = 0; r < rows; ++r) {
        const size_t row = r0 + r;
        x[r] = call.x + (call.xRows ? call.xRows[row] : row) * call.xStride;
      }
      for (size_t n = call.colBegin; n < call.colEnd; n += kBlock) {
        const uint16_t *panel = call.w + n / kBlock * panelElements;
        float acc[kRows][kBlock];
        switch (rows) {
        case 4:
          blockRows<4>(x, panel, k(), acc);
          break;
        case 3:
          blockRows<3>(x, panel, k(), acc);
          break;
        case 2:
          blockRows<2>(x, panel, k(), acc);
          break;
        default:
          blockRows<1>(x, panel, k(), acc);
          break;
        }
        const size_t columns = std::min(kBlock, call.colEnd - n);
        for (size_t r = 0; r < rows; ++r) {
          const size_t row = r0 + r;
          float *y = call.y + (call.yRows ? call.yRows[row] : row) * call.yStride +
                     (n - call.yFirstColumn);
          if (residual()) {
            const float *in = call.residual + row * call.residualStride + n;
            for (size_t c = 0; c < columns; ++c)
              y[c] = acc[r][c] + in[c];
          } else {
            std::memcpy(y, acc[r], columns * sizeof(float));
          }
        }
      }
    }
  }
};

} // namespace

LinearKernelInfo chooseLinearBf16Kernel(uint64_t cpuFeatures) {
  const uint64_t amx = kCpuAmxTile | kCpuAmxBf16 | kCpuAvx512Bf16;
  if ((cpuFeatures & amx) == amx)
    return kLinearAmxBf16Info;
  if ((cpuFeatures & kCpuAvx512Bf16) == kCpuAvx512Bf16)
    return {"LinearAvx512Bf16", "LinearAvx512Bf16 (jit)", true, true};
  return {"LinearBf16Portable", "LinearBf16Portable", false, false};
}

uint64_t linearKernelFeatures() {
  const uint64_t features = hostCpuFeatures();
  if (!(features & kCpuAmxTile) || requestAmxPermission().ok())
    return features;
  return features & ~(kCpuAmxTile | kCpuAmxBf16);
}

void convertRowsForLinear(const LinearKernelInfo &info, size_t callRows, const float *x,
                          size_t xStride, const uint32_t *rowIndex, size_t k, uint32_t *dst,
                          size_t rowBegin, size_t rowEnd) {
  if (readsBf16RowMajor(info, callRows))
    convertRowsToBf16RowMajor(x, xStride, rowIndex, k, dst, rowBegin, rowEnd);
  else
    convertRowsToBf16(x, xStride, rowIndex, k, dst, rowBegin, rowEnd);
}

uint64_t convertedRowsBytes(const LinearKernelInfo &info, size_t maxRows, size_t k) {
  uint64_t bytes = info.tileRowsFrom == 1 ? 0 : Bf16Rows::bytes(maxRows, k);
  if (readsBf16RowMajor(info, maxRows))
    bytes = std::max<uint64_t>(bytes, Bf16RowMajor::bytes(maxRows, k));
  return bytes;
}

std::unique_ptr<LinearKernel> createLinearBf16Portable(size_t k, bool residual) {
  return std::make_unique<LinearBf16PortableKernel>(k, residual);
}

Result<std::unique_ptr<LinearKernel>> createLinearBf16Kernel(size_t k, bool residual,
                                                             uint64_t cpuFeatures) {
  const std::string name = chooseLinearBf16Kernel(cpuFeatures).name;
  if (name == kLinearAmxBf16Info.name)
    return createLinearAmxBf16(k, residual);
  if (name == "LinearAvx512Bf16")
    return createLinearAvx512Bf16(k, residual);
  return Result<std::unique_ptr<LinearKernel>>(createLinearBf16Portable(k, residual));
}

} // namespace hetc::codegen
