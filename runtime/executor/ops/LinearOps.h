// The lm_head's argument block, which Engine::step reads after the phases: the logits rows it
// wrote, or in an argmax step the best (value, index) of each of its column tasks; and the layout
// of activation rows quantized for integer weights, which it shares with the Linear ops.
#pragma once

#include "runtime/executor/Op.h"
#include "runtime/executor/ops/Split.h"

#include "codegen/cpu/linear/LinearInt4.h"
#include "codegen/cpu/linear/LinearInt8.h"

#include <cstdint>
#include <memory>

namespace hetc {

namespace codegen {
class LinearKernel;
} // namespace codegen

// Activation rows quantized for integer weights, in the converted rows: the row scales [max rows]
// first, then the rows of `stride` bytes (K rounded up to 64, so each row starts on a line), and
// for int4 weights (signed rows) each row's granule sums (codegen::kInt4GranuleK k each),
// [max rows][sumsStride], sumsStride a multiple of 16 sums so that each row's sums start on a line.
struct Int8RowsLayout {
  size_t maxRows = 0;
  size_t stride = 0;
  size_t scaleBytes = 0;
  size_t sumsStride = 0; // int32 per row; 0 without sums
  Int8RowsLayout(size_t rows, size_t k, bool granuleSums)
      : maxRows(rows), stride(ops::ceilDiv(k, 64) * 64),
        scaleBytes(ops::ceilDiv(rows * sizeof(float), 64) * 64),
        sumsStride(granuleSums ? ops::ceilDiv(k, codegen::kInt4GranuleK * 16) * 16 : 0) {}
  size_t bytes() const { return scaleBytes + maxRows * (stride + sumsStride * sizeof(int32_t)); }
  float *scales(uint8_t *rows) const { return reinterpret_cast<float *>(rows); }
  uint8_t *quantized(uint8_t *rows) const { return rows + scaleBytes; }
  int32_t *sums(uint8_t *rows) const {
    return reinterpret_cast<int32_t *>(rows + scaleBytes + maxRows * stride);
  }
};

struct LmHeadArgs : OpArgs {
  ~LmHeadArgs() override;
  bool integer() const { return weightInt8 || weightInt4; }
  Rows in, out; // out: the plan's logits buffer [max_batch, vocab]
  size_t vocab = 0;
  size_t taskCount = 1, taskGrain = 1;  // column tasks
  const float *weight = nullptr;        // f32 [vocab, K], or
  const uint16_t *weightBf16 = nullptr; // packed BF16, run by `linear`
  const codegen::LinearKernel *linear = nullptr;
  uint32_t *bf16Rows = nullptr;
  // Or an INT8 LinearInt8N16K4 weight (its scales, column sums) or an INT4 LinearInt4N16K8 one
  // (its whole segment, its group), run on the step's logits rows, which each thread quantizes
  // into its own integerRows[thread * integerLayout.bytes()] (a few rows: cheaper than a phase).
  const int8_t *weightInt8 = nullptr;
  const float *int8Scale = nullptr;
  const int32_t *int8ColumnSum = nullptr;
  const uint8_t *weightInt4 = nullptr;
  size_t int4Group = 0;
  codegen::LinearInt8Fn int8Kernel = nullptr;
  codegen::LinearInt4Fn int4Kernel = nullptr;
  codegen::QuantizeRowsInt8Fn quantize = nullptr;
  codegen::QuantizeRowsInt8SignedFn quantizeSigned = nullptr;
  Int8RowsLayout integerLayout{0, 0, false};
  uint8_t *integerRows = nullptr;
  // Argmax steps: each thread's tasks write their logits into the thread's window
  // ([max_batch, task grain] floats, in cache) and leave (max, index) per row in
  // taskBest*[task * maxBatch + row].
  size_t maxBatch = 0;
  float *windows = nullptr;
  size_t windowFloats = 0;
  std::unique_ptr<uint32_t[]> identityRows; // [max_batch] 0, 1, 2, ...
  std::unique_ptr<float[]> taskBestValues;
  std::unique_ptr<uint32_t[]> taskBestIndices;
};

// Tasks in column order, a later task winning only when strictly greater: the first maximum of
// each asking sequence's row (as torch.argmax), written to argmax[its index within the step].
void mergeLmHeadArgmax(const LmHeadArgs &args, const StepRows &step, int32_t *argmax);

} // namespace hetc
