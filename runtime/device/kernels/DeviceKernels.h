// The ops' device implementations as the device interface launches them: each a Kernel whose
// `sim` runs on the software device (the same arithmetic as its CUDA code, codegen/cuda/) and
// whose name the CUDA device finds in libhetc_cuda.so; and the accesses a launch declares.
#pragma once

#include "codegen/cuda/linear/GemvBf16Layout.h"
#include "codegen/cuda/linear/GemvInt8Layout.h"
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

} // namespace hetc::device
