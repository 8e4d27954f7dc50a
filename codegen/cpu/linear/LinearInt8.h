// Linear kernels over int8 weights with a scale per output column (LinearInt8N16K4,
// runtime/format/WeightLayout.h), for decode: activations quantized per row to int8 and the dot
// products taken in integers, as llama.cpp's Q8_0 and ONNX Runtime's MatMulNBits with int8
// activations do:
//
//   x[r][k] ~ rowScale[r] * (xq[r][k] - 128),  xq in [1, 255] (unsigned for vpdpbusd)
//   y[r][n] = float(sum_k (xq[r][k] - 128) * q[n][k]) * rowScale[r] * scale[n]
//
// The integer sum is exact (K up to 66051 cannot overflow int32), and the two products are
// rounded in that order, so every kernel gives the portable kernel's bits.
#pragma once

#include "codegen/cpu/isa/Implementations.h"

#include <cstddef>
#include <cstdint>

namespace hetc::codegen {

// Activation rows quantized for the int8 kernels: row r's K values at xq + r * stride (stride a
// multiple of 4 at least K rounded up to 4; the padding holds 128, zero after the offset).
struct QuantizedRows {
  const uint8_t *xq = nullptr;
  size_t stride = 0;
  const float *rowScale = nullptr;
  size_t rows = 0;
};

// Quantizes `rows` rows of `k` floats (row r at x + r * xStride) symmetrically per row:
// rowScale[r] = max |x[r][.]| / 127 (0 for a zero row), xq = round-half-even(x / rowScale) + 128.
// `xq` holds rows * stride bytes, stride >= k rounded up to 4.
void quantizeRowsInt8(const float *x, size_t xStride, size_t rows, size_t k, uint8_t *xq,
                      size_t stride, float *rowScale);
using QuantizeRowsInt8Fn = void (*)(const float *x, size_t xStride, size_t rows, size_t k,
                                    uint8_t *xq, size_t stride, float *rowScale);
// The same with AVX-512 (the same bits; the host must have kCpuAvx512F and kCpuAvx512BW), and
// the fastest the host runs (quantizeRowsInt8 is the portable one).
void quantizeRowsInt8Avx512(const float *x, size_t xStride, size_t rows, size_t k, uint8_t *xq,
                            size_t stride, float *rowScale);
// QuantizeRowsInt8Avx512, then QuantizeRowsInt8Portable: the first `cpuFeatures` allows.
const Implementation<QuantizeRowsInt8Fn> &pickQuantizeRowsInt8(uint64_t cpuFeatures);

struct LinearInt8Call {
  QuantizedRows x;
  const int8_t *w = nullptr;         // LinearInt8N16K4{n, k}
  const float *scale = nullptr;      // [paddedColumns]
  const int32_t *columnSum = nullptr; // [paddedColumns]
  size_t k = 0;
  float *y = nullptr; // column n of row r at y + r * yStride + n
  size_t yStride = 0;
  // When set, y = that product + residual[r * residualStride + n], added last (it may be y
  // itself: each element is read before it is written).
  const float *residual = nullptr;
  size_t residualStride = 0;
  size_t colBegin = 0; // a multiple of 16
  size_t colEnd = 0;   // at most n
};

using LinearInt8Fn = void (*)(const LinearInt8Call &call);

// The reference: plain C++, any x86-64.
void linearInt8Portable(const LinearInt8Call &call);
// AVX-512 VNNI (vpdpbusd), up to 4 rows at a time over each 16-column block; the host must have
// kCpuAvx512Vnni.
void linearInt8Avx512Vnni(const LinearInt8Call &call);
// LinearInt8Avx512Vnni, then LinearInt8Portable: the first `cpuFeatures` allows.
const Implementation<LinearInt8Fn> &pickLinearInt8(uint64_t cpuFeatures);

} // namespace hetc::codegen
