// The decode GEMV over LinearInt8N16K4 weights on CUDA, with the CPU's arithmetic (so its bits):
// a warp per 16-column block, lanes over the block's k quads, halves' int32 sums joined by a
// shuffle, then the CPU's float epilogue (GemvInt8Layout.h).
#include "codegen/cuda/Registry.h"
#include "codegen/cuda/linear/GemvInt8Layout.h"

namespace hetc::codegen::cuda {
namespace {

constexpr int kWarpsPerCta = 4;

__global__ void gemvInt8Kernel(GemvInt8Args a) {
  const uint32_t lane = threadIdx.x % 32;
  const uint64_t block = uint64_t(blockIdx.x) * kWarpsPerCta + threadIdx.x / 32;
  if (block * 16 >= a.n)
    return;
  const uint32_t rows = min(*a.rows, kGemvInt8MaxRows);
  int32_t dot[kGemvInt8MaxRows] = {};
  gemvInt8Lane(a, rows, block, lane, dot);
  const uint64_t column = block * 16 + lane % 16;
  for (uint32_t r = 0; r < kGemvInt8MaxRows; ++r) {
    const int32_t other = __shfl_down_sync(0xffffffffu, dot[r], 16);
    if (r < rows && lane < 16 && column < a.n)
      a.y[r * a.yStride + column] = gemvInt8Finish(a, r, column, dot[r] + other);
  }
}

cudaError_t launchGemvInt8(cudaStream_t stream, const void *args) {
  const auto &a = *static_cast<const GemvInt8Args *>(args);
  const uint64_t blocks = (a.n + 15) / 16;
  const unsigned ctas = static_cast<unsigned>((blocks + kWarpsPerCta - 1) / kWarpsPerCta);
  gemvInt8Kernel<<<ctas, 32 * kWarpsPerCta, 0, stream>>>(a);
  return cudaGetLastError();
}

} // namespace

extern const CudaKernelEntry kGemvInt8Entry{"GemvInt8", launchGemvInt8};

} // namespace hetc::codegen::cuda
