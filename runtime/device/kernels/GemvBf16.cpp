#include "runtime/device/kernels/DeviceKernels.h"

#include <algorithm>

namespace hetc::device {
namespace {

using codegen::cuda::GemvBf16Args;

DevicePtr address(const void *pointer) { return DevicePtr{reinterpret_cast<uint64_t>(pointer)}; }

uint64_t weightBytes(const GemvBf16Args &a) {
  return (a.n + 15) / 16 * codegen::cuda::gemvKPairs(a.k) * 64;
}

// The CUDA kernel's lanes, one after another: lane l and l + 16 of each 16-column block, added
// as the shuffle adds them.
void gemvBf16Sim(KernelContext &context, const void *raw) {
  const GemvBf16Args &given = *static_cast<const GemvBf16Args *>(raw);
  const auto *rowCount =
      static_cast<const uint32_t *>(context.view(address(given.rows), sizeof(uint32_t)));
  if (!rowCount)
    return;
  const uint32_t rows = std::min(*rowCount, codegen::cuda::kGemvMaxRows);
  if (rows == 0)
    return;
  GemvBf16Args a = given; // the same block with host views for device addresses
  a.w = static_cast<const uint32_t *>(context.view(address(given.w), weightBytes(given)));
  a.x = static_cast<const float *>(
      context.view(address(given.x), ((rows - 1) * given.xStride + given.k) * sizeof(float)));
  a.y = static_cast<float *>(
      context.view(address(given.y), ((rows - 1) * given.yStride + given.n) * sizeof(float)));
  if (!a.w || !a.x || !a.y)
    return;
  for (uint64_t block = 0; block * 16 < a.n; ++block)
    for (uint32_t lane = 0; lane < 16; ++lane) {
      float low[codegen::cuda::kGemvMaxRows] = {}, high[codegen::cuda::kGemvMaxRows] = {};
      codegen::cuda::gemvLane(a, rows, block, lane, low);
      codegen::cuda::gemvLane(a, rows, block, lane + 16, high);
      const uint64_t column = block * 16 + lane;
      if (column < a.n)
        for (uint32_t r = 0; r < rows; ++r)
          a.y[r * a.yStride + column] = low[r] + high[r];
    }
}

} // namespace

const Kernel kGemvBf16{"GemvBf16", gemvBf16Sim};

std::vector<Access> gemvBf16Accesses(const GemvBf16Args &a, uint32_t maxRows) {
  return {{address(a.w), weightBytes(a), false},
          {address(a.x), ((maxRows - 1) * a.xStride + a.k) * sizeof(float), false},
          {address(a.rows), sizeof(uint32_t), false},
          {address(a.y), ((maxRows - 1) * a.yStride + a.n) * sizeof(float), true}};
}

} // namespace hetc::device
