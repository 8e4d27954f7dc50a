// The argument blocks of the linear's device kernels for any row count (see rows/RowArgs.h for the
// conventions): y = x W^T (+ bias) (+ residual) over the plan's weight layouts, and the row
// quantization the integer layouts read. The decode GEMVs (GemvBf16Layout.h, GemvInt8Layout.h)
// serve steps of up to 8 rows; these serve the rest (prefill), and every step of a layout or
// epilogue the GEMVs lack.
#pragma once

#include <cstdint>

namespace hetc::codegen::cuda {

// plan::WeightLayoutDef's values the kernels take.
enum class LinearLayout : uint8_t { F32NK = 1, Bf16N16K2 = 2, Int8N16K4 = 3, Int4N16K8 = 4 };

// Rows quantized for an integer weight: row r's bytes at xq + r * xqStride, its scale at
// rowScale[r], and for int4 weights (signed rows) its granule sums at sums + r * sumsStride
// (codegen/cpu/linear/LinearInt4.h); int8 weights read rows offset by 128 (LinearInt8.h).
struct QuantizedRowsArgs {
  uint8_t *xq = nullptr;
  uint64_t xqStride = 0;
  float *rowScale = nullptr;
  int32_t *sums = nullptr;
  uint64_t sumsStride = 0;
};

struct QuantizeRowsArgs {
  const float *x = nullptr;
  uint64_t xStride = 0;
  uint64_t k = 0;
  bool signedRows = false; // int4 weights': signed, with granule sums
  QuantizedRowsArgs out;
  const uint32_t *rows = nullptr;
};

struct LinearArgs {
  LinearLayout layout = LinearLayout::F32NK;
  const void *w = nullptr; // the weight's whole segment (scales, sums and zero points included)
  uint64_t wBytes = 0;
  uint64_t n = 0, k = 0, group = 0;
  const float *x = nullptr; // float rows (F32NK, Bf16N16K2)
  uint64_t xStride = 0;
  QuantizedRowsArgs xq; // quantized rows (Int8N16K4, Int4N16K8)
  const float *bias = nullptr;     // [n], or null
  const float *residual = nullptr; // added last; may be y itself
  uint64_t residualStride = 0;
  float *y = nullptr;
  uint64_t yStride = 0;
  const uint32_t *rows = nullptr;
};

} // namespace hetc::codegen::cuda
