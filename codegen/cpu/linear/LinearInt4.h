// Linear kernels over 4-bit group-wise weights (LinearInt4N16K8, runtime/format/WeightLayout.h),
// for decode: activations quantized per row to signed int8, each group's dot product taken in
// integers against the unsigned nibbles, its zero point removed with the activations' sums, and
// the groups accumulated in float with their scales, as llama.cpp's Q4_1 x Q8_1 and ONNX
// Runtime's MatMulNBits with int8 activations do:
//
//   x[r][k] ~ rowScale[r] * x8[r][k],  x8 in [-127, 127]
//   dot[r][n][g] = sum_{k in g} x8[r][k] * u[n][k] - zp[n][g] * S[r][g]   (int32, exact)
//   acc = 0; for g in order: acc = fma(float(dot[r][n][g]), scale[n][g], acc)
//   y[r][n] = acc * rowScale[r]  (+ residual[r][n], added last)
//
// S[r][g] = sum_{k in g} x8[r][k], the sum of the row's granule sums (16 k each, kInt4GranuleK)
// that group g covers. Every kernel rounds in that order (one fused multiply-add per group), so
// they give the portable kernel's bits.
#pragma once

#include "codegen/cpu/isa/Implementations.h"

#include <cstddef>
#include <cstdint>

namespace hetc::codegen {

// k per granule sum of the signed activation rows. Every valid group (16, 32, 64 or 128) is a
// whole number of granules, so a group's S is a sum of whole granules; 16, the smallest group,
// makes that hold for all of them. A row of k holds ceil(k / kInt4GranuleK) sums.
constexpr size_t kInt4GranuleK = 16;

// Quantizes `rows` rows of `k` floats (row r at x + r * xStride) symmetrically per row, signed:
// rowScale[r] = max |x[r][.]| / 127 (0 for a zero row), xq = clamp(nearbyint(x * (127 / max)),
// -127, 127) (the arithmetic of quantizeRowsInt8, without its +128), the padding up to `stride`
// 0. granuleSums[r * sumsStride + j] = the sum of xq[r][16j .. 16j + 15] for j < ceil(k / 16)
// (kInt4GranuleK). `xq` holds rows * stride bytes, stride a multiple of 4 and >= k rounded up to
// 4; sumsStride >= ceil(k / 16).
void quantizeRowsInt8Signed(const float *x, size_t xStride, size_t rows, size_t k, int8_t *xq,
                            size_t stride, float *rowScale, int32_t *granuleSums,
                            size_t sumsStride);
using QuantizeRowsInt8SignedFn = void (*)(const float *x, size_t xStride, size_t rows, size_t k,
                                          int8_t *xq, size_t stride, float *rowScale,
                                          int32_t *granuleSums, size_t sumsStride);
// The same with AVX-512 (the same bits; the host must have kCpuAvx512F and kCpuAvx512BW), and
// the fastest the host runs (quantizeRowsInt8Signed is the portable one).
void quantizeRowsInt8SignedAvx512(const float *x, size_t xStride, size_t rows, size_t k, int8_t *xq,
                                  size_t stride, float *rowScale, int32_t *granuleSums,
                                  size_t sumsStride);
// QuantizeRowsInt8SignedAvx512, then QuantizeRowsInt8SignedPortable: the first `cpuFeatures`
// allows.
const Implementation<QuantizeRowsInt8SignedFn> &pickQuantizeRowsInt8Signed(uint64_t cpuFeatures);

struct LinearInt4Call {
  // Rows from quantizeRowsInt8Signed. A kernel reads row r's bytes [0, k rounded up to 4) and
  // granule sums [0, ceil(k / kInt4GranuleK)).
  const int8_t *xq = nullptr;
  size_t stride = 0;
  const float *rowScale = nullptr;
  const int32_t *granuleSums = nullptr;
  size_t sumsStride = 0;
  size_t rows = 0;
  const uint8_t *w = nullptr; // the whole segment of LinearInt4N16K8{n, k, group}
  size_t n = 0;
  size_t k = 0;
  size_t group = 0;
  float *y = nullptr; // column n of row r at y + r * yStride + n
  size_t yStride = 0;
  // When set, y = that product + residual[r * residualStride + n], added last (it may be y
  // itself: each element is read before it is written).
  const float *residual = nullptr;
  size_t residualStride = 0;
  size_t colBegin = 0; // a multiple of 16
  size_t colEnd = 0;   // at most n
};

using LinearInt4Fn = void (*)(const LinearInt4Call &call);

// The reference: plain C++, any x86-64.
void linearInt4Portable(const LinearInt4Call &call);
// AVX-512 VNNI (vpdpbusd, the nibbles as its unsigned operand): up to 2 rows over four 16-column
// blocks at a time, more rows 4 at a time over two blocks; the host must have kCpuAvx512Vnni.
void linearInt4Avx512Vnni(const LinearInt4Call &call);
// LinearInt4Avx512Vnni, then LinearInt4Portable: the first `cpuFeatures` allows.
const Implementation<LinearInt4Fn> &pickLinearInt4(uint64_t cpuFeatures);

} // namespace hetc::codegen
