// The software device's linear for any row count and its row quantization (LinearArgs.h): the
// integer layouts with the CPU's portable kernels (their bits are every CPU kernel's), bf16 with
// the decode GEMV's per-column arithmetic (GemvBf16Layout.h) 8 rows at a time, f32 with
// kernels::dot. Bias, then residual, added after, each rounded alone.
#include "runtime/device/kernels/DeviceKernels.h"

#include "codegen/cpu/linear/LinearInt4.h"
#include "codegen/cpu/linear/LinearInt8.h"
#include "codegen/cpu/vector/Kernels.h"
#include "runtime/format/WeightLayout.h"

#include <algorithm>

namespace hetc::device {
namespace {

using namespace codegen::cuda;

void quantizeRowsSim(KernelContext &context, const void *raw) {
  const auto &a = *static_cast<const QuantizeRowsArgs *>(raw);
  const uint32_t rows = countAt(context, a.rows);
  if (rows == 0)
    return;
  const float *x = viewOf(context, a.x, rowFloats(rows, a.xStride, a.k));
  uint8_t *xq = viewOf(context, a.out.xq, rows * a.out.xqStride);
  float *scales = viewOf(context, a.out.rowScale, rows);
  if (!x || !xq || !scales)
    return;
  if (!a.signedRows) {
    codegen::quantizeRowsInt8(x, a.xStride, rows, a.k, xq, a.out.xqStride, scales);
    return;
  }
  int32_t *sums = viewOf(context, a.out.sums, rows * a.out.sumsStride);
  if (sums)
    codegen::quantizeRowsInt8Signed(x, a.xStride, rows, a.k, reinterpret_cast<int8_t *>(xq),
                                    a.out.xqStride, scales, sums, a.out.sumsStride);
}

// Column n of row r from its product: + bias, then + residual, each rounded alone. Each element of
// a residual that is y itself is read before it is written.
inline float finish(float product, const float *bias, const float *residual, uint64_t r,
                    uint64_t residualStride, uint64_t n) {
  if (bias)
    product = product + bias[n];
  if (residual)
    product = product + residual[r * residualStride + n];
  return product;
}

// The float layouts, epilogue included.
void floatLinear(const LinearArgs &a, const void *w, const float *x, uint32_t rows,
                 const float *bias, const float *residual, float *y) {
  if (a.layout == LinearLayout::F32NK) {
    const auto *weight = static_cast<const float *>(w);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint64_t n = 0; n < a.n; ++n)
        y[r * a.yStride + n] = finish(kernels::dot(x + r * a.xStride, weight + n * a.k, a.k), bias,
                                      residual, r, a.residualStride, n);
    return;
  }
  GemvBf16Args gemv;
  gemv.w = static_cast<const uint32_t *>(w);
  gemv.xStride = a.xStride;
  gemv.n = a.n;
  gemv.k = a.k;
  for (uint32_t first = 0; first < rows; first += kGemvMaxRows) {
    const uint32_t count = std::min(rows - first, kGemvMaxRows);
    gemv.x = x + first * a.xStride;
    for (uint64_t block = 0; block * 16 < a.n; ++block)
      for (uint32_t lane = 0; lane < 16 && block * 16 + lane < a.n; ++lane) {
        float low[kGemvMaxRows] = {}, high[kGemvMaxRows] = {};
        gemvLane(gemv, count, block, lane, low);
        gemvLane(gemv, count, block, lane + 16, high);
        const uint64_t n = block * 16 + lane;
        for (uint32_t r = 0; r < count; ++r)
          y[(first + r) * a.yStride + n] =
              finish(low[r] + high[r], bias, residual, first + r, a.residualStride, n);
      }
  }
}

void linearSim(KernelContext &context, const void *raw) {
  const auto &a = *static_cast<const LinearArgs *>(raw);
  const uint32_t rows = countAt(context, a.rows);
  if (rows == 0)
    return;
  const void *w = viewOf(context, static_cast<const uint8_t *>(a.w), a.wBytes);
  float *y = viewOf(context, a.y, rowFloats(rows, a.yStride, a.n));
  const float *bias = a.bias ? viewOf(context, a.bias, a.n) : nullptr;
  const float *residual =
      a.residual ? viewOf(context, a.residual, rowFloats(rows, a.residualStride, a.n)) : nullptr;
  if (!w || !y || (a.bias && !bias) || (a.residual && !residual))
    return;
  const bool integer = a.layout == LinearLayout::Int8N16K4 || a.layout == LinearLayout::Int4N16K8;
  if (!integer) {
    const float *x = viewOf(context, a.x, rowFloats(rows, a.xStride, a.k));
    if (!x)
      return;
    floatLinear(a, w, x, rows, bias, residual, y);
    return;
  } else {
    const uint64_t bytes = rows * a.xq.xqStride;
    uint8_t *xq = viewOf(context, a.xq.xq, bytes);
    const float *scales = viewOf(context, a.xq.rowScale, rows);
    if (!xq || !scales)
      return;
    if (a.layout == LinearLayout::Int8N16K4) {
      const auto *segment = static_cast<const uint8_t *>(w);
      const LinearInt8N16K4 layout{a.n, a.k};
      codegen::LinearInt8Call call;
      call.x = {xq, a.xq.xqStride, scales, rows};
      call.w = reinterpret_cast<const int8_t *>(segment);
      call.scale = reinterpret_cast<const float *>(segment + layout.scaleOffset());
      call.columnSum = reinterpret_cast<const int32_t *>(segment + layout.columnSumOffset());
      call.k = a.k;
      call.y = y;
      call.yStride = a.yStride;
      call.residual = residual;
      call.residualStride = a.residualStride;
      call.colBegin = 0;
      call.colEnd = a.n;
      codegen::linearInt8Portable(call);
    } else {
      const int32_t *sums = viewOf(context, a.xq.sums, rows * a.xq.sumsStride);
      if (!sums)
        return;
      codegen::LinearInt4Call call;
      call.xq = reinterpret_cast<const int8_t *>(xq);
      call.stride = a.xq.xqStride;
      call.rowScale = scales;
      call.granuleSums = sums;
      call.sumsStride = a.xq.sumsStride;
      call.rows = rows;
      call.w = static_cast<const uint8_t *>(w);
      call.n = a.n;
      call.k = a.k;
      call.group = a.group;
      call.y = y;
      call.yStride = a.yStride;
      call.residual = residual;
      call.residualStride = a.residualStride;
      call.colBegin = 0;
      call.colEnd = a.n;
      codegen::linearInt4Portable(call);
    }
  }
  // The integer kernels added the residual; the plan never gives a linear both.
  if (bias)
    for (uint32_t r = 0; r < rows; ++r)
      kernels::add(y + r * a.yStride, 0, bias, 0, a.n, y + r * a.yStride, 0, 0, 1);
}

} // namespace

const Kernel kLinear{"Linear", linearSim};
const Kernel kQuantizeRows{"QuantizeRows", quantizeRowsSim};

} // namespace hetc::device
