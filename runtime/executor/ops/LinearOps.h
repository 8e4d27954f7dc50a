// The lm_head's argument block, which Engine::step reads after the phases: the logits rows it
// wrote, or in an argmax step the best (value, index) of each of its column tasks; and the layout
// of activation rows quantized for integer weights, which it shares with the Linear ops.
#pragma once

#include "runtime/executor/Op.h"
#include "runtime/executor/ops/Split.h"

#include "codegen/cpu/linear/LinearInt4.h"
#include "codegen/cpu/linear/LinearInt8.h"
#include "codegen/cpu/vector/VectorKernels.h"

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

// How rows are quantized for an integer weight, into rows laid out as `layout`: offset by 128 for
// int8 weights, signed with their granule sums for int4 ones (`signedRows`).
struct RowQuantizer {
  Int8RowsLayout layout{0, 0, false};
  codegen::QuantizeRowsInt8Fn offset = nullptr;
  codegen::QuantizeRowsInt8SignedFn withSums = nullptr;
  const char *name = ""; // the picked implementation's
  RowQuantizer() = default;
  // The best quantizer `cpuFeatures` allows for up to maxRows rows of k.
  RowQuantizer(size_t maxRows, size_t k, bool signedRows, uint64_t cpuFeatures);
  const char *label() const { return name; }
  // `count` rows of k floats (row i at x + i * xStride) into rows [first, first + count).
  void run(const float *x, size_t xStride, size_t k, size_t first, size_t count,
           uint8_t *rows) const;
};

// An INT8 weight (LinearInt8N16K4, with its scales and column sums) or an INT4 one (the whole
// LinearInt4N16K8 segment, with its group) and the host's kernel for it: what a Linear and an
// integer LmHead run.
struct IntegerWeight {
  const int8_t *int8 = nullptr;
  const float *int8Scale = nullptr;
  const int32_t *int8ColumnSum = nullptr;
  const uint8_t *int4 = nullptr;
  size_t int4Group = 0;
  size_t n = 0, k = 0;
  codegen::LinearInt8Fn int8Kernel = nullptr;
  codegen::LinearInt4Fn int4Kernel = nullptr;
  bool present() const { return int8 || int4; }
  // Picks the best kernel `cpuFeatures` allows; returns its label.
  const char *chooseKernel(uint64_t cpuFeatures);
  // The first `count` rows of `rows` (laid out as `layout`) times the weight, on columns
  // [begin, end): row r at y + r * yStride, + residual[r * residualStride + n] added last.
  void run(const Int8RowsLayout &layout, uint8_t *rows, size_t count, float *y, size_t yStride,
           size_t begin, size_t end, const float *residual = nullptr,
           size_t residualStride = 0) const;
};

struct LmHeadArgs : OpArgs {
  ~LmHeadArgs() override;
  Rows in, out; // out: the plan's logits buffer [max_batch, vocab]
  size_t vocab = 0;
  float softcap = 0; // logits soft-capped, cap * tanh(logit / cap) (Gemma 2); 0: none
  const float *bias = nullptr; // f32 [vocab] added to the logits before the cap (Phi-2); or null
  kernels::AddKernel addKernel = nullptr;
  size_t taskCount = 1, taskGrain = 1;  // column tasks
  const float *weight = nullptr;        // f32 [vocab, K], or
  const uint16_t *weightBf16 = nullptr; // packed BF16, run by `linear`
  const codegen::LinearKernel *linear = nullptr;
  uint32_t *bf16Rows = nullptr;
  // Or an integer weight, run on the step's logits rows, which each thread quantizes into its own
  // integerRows[thread * quantizer.layout.bytes()] (a few rows: cheaper than a phase).
  IntegerWeight integer;
  RowQuantizer quantizer;
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
