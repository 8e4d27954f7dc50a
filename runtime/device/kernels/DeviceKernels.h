// The ops' device implementations as the device interface launches them: each a Kernel whose
// `sim` runs on the software device (the same arithmetic as its CUDA code, codegen/cuda/, or for
// a kernel with no CUDA code yet the portable CPU kernel's) and whose name the CUDA device finds
// in libhetc_cuda.so; and the accesses a launch declares.
#pragma once

#include "codegen/cuda/attention/AttentionArgs.h"
#include "codegen/cuda/linear/GemvBf16Layout.h"
#include "codegen/cuda/linear/GemvInt8Layout.h"
#include "codegen/cuda/linear/LinearArgs.h"
#include "codegen/cuda/rows/RowArgs.h"
#include "runtime/device/Device.h"

#include <vector>

namespace hetc::device {

// codegen/cuda/linear: y = x W^T over a LinearBf16N16K2 weight, up to 8 rows (decode).
extern const Kernel kGemvBf16;
// Its accesses: the weight, `maxRows` rows of x and y, the row count.
std::vector<Access> gemvBf16Accesses(const codegen::cuda::GemvBf16Args &args, uint32_t maxRows);

// codegen/cuda/linear: y = dequantized (xq W^T) (+ residual) over a LinearInt8N16K4 weight and
// rows quantized as the CPU quantizes them, up to 8 rows, with the CPU kernels' bits.
extern const Kernel kGemvInt8;
std::vector<Access> gemvInt8Accesses(const codegen::cuda::GemvInt8Args &args, uint32_t maxRows);

// Any row count (LinearArgs.h): y = x W^T (+ bias) (+ residual) over each weight layout; the
// integer layouts with the CPU's bits (linearInt8Portable, linearInt4Portable), bf16 with
// GemvBf16's arithmetic, f32 with kernels::dot's. And the row quantization they read.
extern const Kernel kLinear;
extern const Kernel kQuantizeRows;

// The row-wise kernels (RowArgs.h), the portable CPU kernels' arithmetic.
extern const Kernel kEmbedding;
extern const Kernel kNorm;
extern const Kernel kRope;
extern const Kernel kElementwise;
extern const Kernel kGatherRows;
extern const Kernel kLogits;

// The attention (AttentionArgs.h): the append, and the chunked attention with the portable chunk
// kernel (the CPU's bits with EngineOptions::portableKernels).
extern const Kernel kKvAppend;
extern const Kernel kAttention;

// A device address's host view inside a kernel (null when refused).
template <typename T> T *viewOf(KernelContext &context, T *pointer, uint64_t count) {
  return static_cast<T *>(
      context.view(DevicePtr{reinterpret_cast<uint64_t>(pointer)}, count * sizeof(T)));
}
// The count at `count` (a step block field), or 0 when its view is refused.
inline uint32_t countAt(KernelContext &context, const uint32_t *count) {
  const uint32_t *value = viewOf(context, count, 1);
  return value ? *value : 0;
}
// `rows` rows of `cols` floats `stride` apart.
inline uint64_t rowFloats(uint64_t rows, uint64_t stride, uint64_t cols) {
  return rows == 0 ? 0 : (rows - 1) * stride + cols;
}

} // namespace hetc::device
