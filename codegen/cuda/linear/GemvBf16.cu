// The decode GEMV over LinearBf16N16K2 weights on CUDA: one warp per 16-column block, lanes
// split over the block's k pairs (GemvBf16Layout.h), the halves' sums combined by a shuffle.
#include "codegen/cuda/Registry.h"
#include "codegen/cuda/linear/GemvBf16Layout.h"

namespace hetc::codegen::cuda {
namespace {

constexpr int kWarpsPerCta = 4;

__global__ void gemvBf16Kernel(GemvBf16Args a) {
  const uint32_t lane = threadIdx.x % 32;
  const uint64_t block = uint64_t(blockIdx.x) * kWarpsPerCta + threadIdx.x / 32;
  if (block * 16 >= a.n)
    return;
  const uint32_t rows = min(*a.rows, kGemvMaxRows);
  float acc[kGemvMaxRows] = {};
  gemvLane(a, rows, block, lane, acc);
  const uint64_t column = block * 16 + lane % 16;
  for (uint32_t r = 0; r < kGemvMaxRows; ++r) {
    const float other = __shfl_down_sync(0xffffffffu, acc[r], 16);
    if (r < rows && lane < 16 && column < a.n)
      a.y[r * a.yStride + column] = acc[r] + other;
  }
}

cudaError_t launchGemvBf16(cudaStream_t stream, const void *args) {
  const auto &a = *static_cast<const GemvBf16Args *>(args);
  const uint64_t blocks = (a.n + 15) / 16;
  const unsigned ctas = static_cast<unsigned>((blocks + kWarpsPerCta - 1) / kWarpsPerCta);
  gemvBf16Kernel<<<ctas, 32 * kWarpsPerCta, 0, stream>>>(a);
  return cudaGetLastError();
}

} // namespace

extern const CudaKernelEntry kGemvBf16Entry{"GemvBf16", launchGemvBf16};

} // namespace hetc::codegen::cuda
