// A design the int8 linear kernels could have taken, kept here to be measured against the one
// they take (LinearInt8Avx512Vnni): the int8 weights widened to bf16 in registers for vdpbf16ps,
// against activations in bf16 instead of quantized rows. Not used by the runtime.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hetc::bench {

// y[r][n] = scale[n] * sum_k bf16(x[r][k]) * q[n][k] for rows r < rows and columns [colBegin,
// colEnd) (colBegin a multiple of 16), q in LinearInt8N16K4{colEnd.., k}; xb holds each row's k
// bf16 values padded with zeros to a multiple of 4, `xStride` apart. Needs AVX-512 BF16.
void linearInt8WidenBf16(const uint16_t *xb, size_t xStride, size_t rows, const int8_t *w,
                         const float *scale, size_t k, float *y, size_t yStride, size_t colBegin,
                         size_t colEnd);

} // namespace hetc::bench
