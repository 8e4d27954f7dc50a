// The argument blocks of the row-wise device kernels, which the executor's device steps
// (runtime/executor/DeviceSteps) launch and each implementation reads: the software device's
// (runtime/device/kernels/RowKernels.cpp, the portable CPU kernels over its memory) and CUDA's
// (none yet: the CUDA device refuses a plan that needs one, naming it).
//
// Pointers are device addresses. Rows are the step's: row t at data + t * stride (floats), for
// t < *rows, the count the step block holds (so one captured graph serves every step); maxRows,
// the most a step has, sizes a CUDA launch's grid when it is captured.
#pragma once

#include <cstdint>

namespace hetc::codegen::cuda {

// out[t] = table[tokens[t]] (f32 [vocab, hidden]), or row tokens[t] of the lm_head's packed
// weight it is tied to (`packedLayout`: plan::WeightLayoutDef's LinearBf16N16K2, LinearInt8N16K4 or
// LinearInt4N16K8 with `group`); then + positionTable[positions[t] + positionOffset] (learned
// positions, optional), then times `scale`.
struct EmbeddingArgs {
  const int32_t *tokens = nullptr;
  const uint32_t *positions = nullptr;
  const uint32_t *rows = nullptr;
  uint64_t maxRows = 0;
  const void *table = nullptr;
  uint64_t tableBytes = 0;
  uint8_t packedLayout = 0; // 0: f32 row-major
  uint64_t group = 0;
  uint64_t vocab = 0, hidden = 0;
  const float *positionTable = nullptr;
  uint64_t positionRows = 0, positionOffset = 0;
  float scale = 1.0f;
  float *out = nullptr;
  uint64_t outStride = 0;
};

// RmsNorm (beta null, `rms`) or LayerNorm of each row, in groups of `group` columns (RmsNorm's
// per-head norms; `cols` for one norm over the row). y may be x.
struct NormArgs {
  const float *x = nullptr;
  uint64_t xStride = 0;
  const float *gamma = nullptr;
  const float *beta = nullptr;
  uint64_t cols = 0, group = 0;
  float eps = 0;
  bool rms = true;
  float *y = nullptr;
  uint64_t yStride = 0;
  const uint32_t *rows = nullptr;
  uint64_t maxRows = 0;
};

// RoPE in place on `heads` heads of each row at the row's position (kernels::rope's arithmetic).
struct RopeArgs {
  float *x = nullptr;
  uint64_t xStride = 0;
  uint64_t heads = 0, headDim = 0, rotaryDim = 0;
  bool interleaved = false;
  const float *invFreq = nullptr; // [rotaryDim / 2]
  const uint32_t *positions = nullptr;
  const uint32_t *rows = nullptr;
  uint64_t maxRows = 0;
};

// Elementwise over `cols` columns of each row: y = a + b (Add), y = f(a) * b (Gated: a the gate),
// y = f(a) (Activation, b null). `function` is kernels::ActivationFunction's value. A stride of 0
// repeats one row (a bias).
enum class ElementwiseKind : uint8_t { Add, Gated, Activation };
struct ElementwiseArgs {
  ElementwiseKind kind = ElementwiseKind::Add;
  uint8_t function = 0;
  const float *a = nullptr;
  uint64_t aStride = 0;
  const float *b = nullptr;
  uint64_t bStride = 0;
  float *y = nullptr;
  uint64_t yStride = 0;
  uint64_t cols = 0;
  const uint32_t *rows = nullptr;
  uint64_t maxRows = 0;
};

// The lm_head's rows: y[i] = x[sourceRows[i]] for i < *count (the sequences asking for logits).
struct GatherRowsArgs {
  const float *x = nullptr;
  uint64_t xStride = 0;
  const uint32_t *sourceRows = nullptr;
  const uint32_t *count = nullptr;
  uint64_t maxCount = 0;
  float *y = nullptr;
  uint64_t yStride = 0;
  uint64_t cols = 0;
};

// Logits row i (i < *count, the lm_head's output in asking order) + bias, soft-capped
// (cap * tanh(x / cap), cap > 0), then written to row outputRows[i] of `out`, or, in a step
// whose *argmaxStep is set, its first largest column's index to argmax[outputRows[i]].
struct LogitsArgs {
  float *logits = nullptr; // finished in place
  uint64_t logitsStride = 0;
  const float *bias = nullptr;
  float softcap = 0;
  uint64_t vocab = 0;
  const uint32_t *outputRows = nullptr;
  const uint32_t *count = nullptr;
  float *out = nullptr;
  uint64_t outStride = 0;
  const uint32_t *argmaxStep = nullptr;
  int32_t *argmax = nullptr;
  uint64_t maxBatch = 0; // argmax's length and the most rows *count gives
};

} // namespace hetc::codegen::cuda
