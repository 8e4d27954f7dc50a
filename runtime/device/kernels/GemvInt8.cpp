#include "runtime/device/kernels/DeviceKernels.h"

#include <algorithm>

namespace hetc::device {
namespace {

using codegen::cuda::GemvInt8Args;

DevicePtr address(const void *pointer) { return DevicePtr{reinterpret_cast<uint64_t>(pointer)}; }

uint64_t paddedColumns(const GemvInt8Args &a) { return (a.n + 15) / 16 * 16; }
uint64_t weightBytes(const GemvInt8Args &a) {
  return paddedColumns(a) * codegen::cuda::gemvKQuads(a.k) * 4;
}

// The CUDA kernel's lanes one after another, each block's halves joined as the shuffle joins them.
void gemvInt8Sim(KernelContext &context, const void *raw) {
  const GemvInt8Args &given = *static_cast<const GemvInt8Args *>(raw);
  const auto *rowCount =
      static_cast<const uint32_t *>(context.view(address(given.rows), sizeof(uint32_t)));
  if (!rowCount)
    return;
  const uint32_t rows = std::min(*rowCount, codegen::cuda::kGemvInt8MaxRows);
  if (rows == 0)
    return;
  GemvInt8Args a = given; // the same block with host views for device addresses
  a.w = static_cast<const uint32_t *>(context.view(address(given.w), weightBytes(given)));
  a.scale = static_cast<const float *>(
      context.view(address(given.scale), paddedColumns(given) * sizeof(float)));
  a.columnSum = static_cast<const int32_t *>(
      context.view(address(given.columnSum), paddedColumns(given) * sizeof(int32_t)));
  a.xq = static_cast<const uint8_t *>(
      context.view(address(given.xq), (rows - 1) * given.xStride + given.k));
  a.rowScale =
      static_cast<const float *>(context.view(address(given.rowScale), rows * sizeof(float)));
  if (given.residual)
    a.residual = static_cast<const float *>(context.view(
        address(given.residual), ((rows - 1) * given.residualStride + given.n) * sizeof(float)));
  a.y = static_cast<float *>(
      context.view(address(given.y), ((rows - 1) * given.yStride + given.n) * sizeof(float)));
  if (!a.w || !a.scale || !a.columnSum || !a.xq || !a.rowScale || !a.y ||
      (given.residual && !a.residual))
    return;
  for (uint64_t block = 0; block * 16 < a.n; ++block)
    for (uint32_t lane = 0; lane < 16; ++lane) {
      int32_t low[codegen::cuda::kGemvInt8MaxRows] = {}, high[codegen::cuda::kGemvInt8MaxRows] = {};
      codegen::cuda::gemvInt8Lane(a, rows, block, lane, low);
      codegen::cuda::gemvInt8Lane(a, rows, block, lane + 16, high);
      const uint64_t column = block * 16 + lane;
      if (column < a.n)
        for (uint32_t r = 0; r < rows; ++r)
          a.y[r * a.yStride + column] = codegen::cuda::gemvInt8Finish(a, r, column, low[r] + high[r]);
    }
}

} // namespace

const Kernel kGemvInt8{"GemvInt8", gemvInt8Sim};

std::vector<Access> gemvInt8Accesses(const GemvInt8Args &a, uint32_t maxRows) {
  std::vector<Access> accesses = {
      {address(a.w), weightBytes(a), false},
      {address(a.scale), paddedColumns(a) * sizeof(float), false},
      {address(a.columnSum), paddedColumns(a) * sizeof(int32_t), false},
      {address(a.xq), (maxRows - 1) * a.xStride + a.k, false},
      {address(a.rowScale), maxRows * sizeof(float), false},
      {address(a.rows), sizeof(uint32_t), false},
      {address(a.y), ((maxRows - 1) * a.yStride + a.n) * sizeof(float), true}};
  if (a.residual)
    accesses.push_back(
        {address(a.residual), ((maxRows - 1) * a.residualStride + a.n) * sizeof(float), false});
  return accesses;
}

} // namespace hetc::device
