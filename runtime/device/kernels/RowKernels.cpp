// The software device's row-wise kernels: the portable CPU kernels (codegen/cpu/vector/Kernels.h)
// over host views of the device's memory, so their bits are the CPU engine's with
// EngineOptions::portableKernels. Each reads its row count from device memory first.
#include "runtime/device/kernels/DeviceKernels.h"

#include "codegen/cpu/vector/Kernels.h"
#include "runtime/format/WeightLayout.h"

namespace hetc::device {
namespace {

using namespace codegen::cuda;

void embeddingSim(KernelContext &context, const void *raw) {
  const auto &a = *static_cast<const EmbeddingArgs *>(raw);
  const uint32_t rows = countAt(context, a.rows);
  if (rows == 0)
    return;
  const int32_t *tokens = viewOf(context, a.tokens, rows);
  const auto *table = viewOf(context, static_cast<const uint8_t *>(a.table), a.tableBytes);
  float *out = viewOf(context, a.out, rowFloats(rows, a.outStride, a.hidden));
  const uint32_t *positions = a.positionTable ? viewOf(context, a.positions, rows) : nullptr;
  const float *positionTable =
      a.positionTable ? viewOf(context, a.positionTable, a.positionRows * a.hidden) : nullptr;
  if (!tokens || !table || !out || (a.positionTable && (!positions || !positionTable)))
    return;
  for (uint32_t t = 0; t < rows; ++t) {
    // The executor checked every id against the vocabulary before the step.
    float *row = out + t * a.outStride;
    switch (static_cast<plan::WeightLayoutDef>(a.packedLayout)) {
    case plan::WeightLayoutDef::LinearBf16N16K2:
      unpackLinearBf16Row(reinterpret_cast<const uint16_t *>(table), a.vocab, a.hidden, tokens[t],
                          row);
      break;
    case plan::WeightLayoutDef::LinearInt8N16K4:
      unpackLinearInt8Row(table, a.vocab, a.hidden, tokens[t], row);
      break;
    case plan::WeightLayoutDef::LinearInt4N16K8:
      unpackLinearInt4Row(table, a.vocab, a.hidden, a.group, tokens[t], row);
      break;
    default:
      kernels::embedding(tokens, reinterpret_cast<const float *>(table), a.hidden, out,
                         a.outStride, t, t + 1);
      break;
    }
    if (positionTable)
      kernels::add(row, 0, positionTable + (positions[t] + a.positionOffset) * a.hidden, 0,
                   a.hidden, row, 0, 0, 1);
  }
  if (a.scale != 1.0f)
    kernels::scaleRows(a.scale, out, a.outStride, a.hidden, 0, rows);
}

void normSim(KernelContext &context, const void *raw) {
  const auto &a = *static_cast<const NormArgs *>(raw);
  const uint32_t rows = countAt(context, a.rows);
  if (rows == 0)
    return;
  const float *x = viewOf(context, a.x, rowFloats(rows, a.xStride, a.cols));
  float *y = viewOf(context, a.y, rowFloats(rows, a.yStride, a.cols));
  const float *gamma = viewOf(context, a.gamma, a.group);
  const float *beta = a.beta ? viewOf(context, a.beta, a.group) : nullptr;
  if (!x || !y || !gamma || (a.beta && !beta))
    return;
  if (!a.rms) {
    kernels::layerNorm(x, a.xStride, gamma, beta, a.cols, a.eps, y, a.yStride, 0, rows);
    return;
  }
  for (uint64_t g = 0; g < a.cols; g += a.group)
    kernels::rmsNorm(x + g, a.xStride, gamma, a.group, a.eps, y + g, a.yStride, 0, rows);
}

void ropeSim(KernelContext &context, const void *raw) {
  const auto &a = *static_cast<const RopeArgs *>(raw);
  const uint32_t rows = countAt(context, a.rows);
  if (rows == 0)
    return;
  float *x = viewOf(context, a.x, rowFloats(rows, a.xStride, a.heads * a.headDim));
  const float *invFreq = viewOf(context, a.invFreq, a.rotaryDim / 2);
  const uint32_t *positions = viewOf(context, a.positions, rows);
  if (!x || !invFreq || !positions)
    return;
  kernels::rope(x, a.xStride, a.heads, kernels::RopeForm{a.headDim, a.rotaryDim, a.interleaved},
                invFreq, positions, 0, rows);
}

void elementwiseSim(KernelContext &context, const void *raw) {
  const auto &a = *static_cast<const ElementwiseArgs *>(raw);
  const uint32_t rows = countAt(context, a.rows);
  if (rows == 0)
    return;
  const float *x = viewOf(context, a.a, rowFloats(rows, a.aStride, a.cols));
  const float *b = a.b ? viewOf(context, a.b, rowFloats(rows, a.bStride, a.cols)) : nullptr;
  float *y = viewOf(context, a.y, rowFloats(rows, a.yStride, a.cols));
  if (!x || !y || (a.b && !b))
    return;
  const auto function = static_cast<kernels::ActivationFunction>(a.function);
  switch (a.kind) {
  case ElementwiseKind::Add:
    kernels::add(x, a.aStride, b, a.bStride, a.cols, y, a.yStride, 0, rows);
    return;
  case ElementwiseKind::Gated:
    kernels::gated(function, x, a.aStride, b, a.bStride, a.cols, y, a.yStride, 0, rows);
    return;
  case ElementwiseKind::Activation:
    kernels::activation(function, x, a.aStride, a.cols, y, a.yStride, 0, rows);
    return;
  }
}

void gatherRowsSim(KernelContext &context, const void *raw) {
  const auto &a = *static_cast<const GatherRowsArgs *>(raw);
  const uint32_t count = countAt(context, a.count);
  if (count == 0)
    return;
  const uint32_t *sources = viewOf(context, a.sourceRows, count);
  float *y = viewOf(context, a.y, rowFloats(count, a.yStride, a.cols));
  if (!sources || !y)
    return;
  for (uint32_t i = 0; i < count; ++i) {
    const float *x = viewOf(context, a.x + sources[i] * a.xStride, a.cols);
    if (!x)
      return;
    for (uint64_t c = 0; c < a.cols; ++c)
      y[i * a.yStride + c] = x[c];
  }
}

void logitsSim(KernelContext &context, const void *raw) {
  const auto &a = *static_cast<const LogitsArgs *>(raw);
  const uint32_t count = countAt(context, a.count);
  if (count == 0)
    return;
  // Bias and cap in place on the lm_head's rows, as the CPU's lm_head finishes its own.
  float *logits = viewOf(context, a.logits,
                         rowFloats(count, a.logitsStride, a.vocab));
  const uint32_t *outputRows = viewOf(context, a.outputRows, count);
  const float *bias = a.bias ? viewOf(context, a.bias, a.vocab) : nullptr;
  if (!logits || !outputRows || (a.bias && !bias))
    return;
  int32_t *argmax = countAt(context, a.argmaxStep) ? viewOf(context, a.argmax, a.maxBatch) : nullptr;
  if (countAt(context, a.argmaxStep) && !argmax)
    return;
  for (uint32_t i = 0; i < count; ++i) {
    float *row = logits + i * a.logitsStride;
    if (bias)
      kernels::add(row, 0, bias, 0, a.vocab, row, 0, 0, 1);
    if (a.softcap > 0)
      kernels::softCap(a.softcap, row, a.vocab);
    if (argmax) {
      argmax[outputRows[i]] = static_cast<int32_t>(kernels::argmaxFirst(row, a.vocab));
      continue;
    }
    float *out = viewOf(context, a.out + outputRows[i] * a.outStride, a.vocab);
    if (!out)
      return;
    for (uint64_t c = 0; c < a.vocab; ++c)
      out[c] = row[c];
  }
}

} // namespace

const Kernel kEmbedding{"Embedding", embeddingSim};
const Kernel kNorm{"Norm", normSim};
const Kernel kRope{"Rope", ropeSim};
const Kernel kElementwise{"Elementwise", elementwiseSim};
const Kernel kGatherRows{"GatherRows", gatherRowsSim};
const Kernel kLogits{"Logits", logitsSim};

} // namespace hetc::device
