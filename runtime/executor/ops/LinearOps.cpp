// Linear, LmHead, ConvertRowsBf16 and QuantizeRowsInt8. A linear splits its N output columns into
// tasks of the plan's grain. Its weight is f32 LinearNK (the portable float32 kernel), BF16
// LinearBf16N16K2, run by the best kernel of codegen/cpu/linear the host has (AMX, AVX-512 BF16
// JIT, portable), generated once per (K, epilogue) and shared by every op with that shape, or INT8
// LinearInt8N16K4 or INT4 LinearInt4N16K8 (AVX-512 VNNI or portable); its label is that kernel's.
// Kernels that read bf16 rows get a ConvertRowsBf16 op before them, and a Linear's integer weights
// a QuantizeRowsInt8 op, unless the rows they read are already converted so (q, k and v share their
// input); an integer LmHead quantizes its few logits rows itself.
#include "runtime/executor/ops/LinearOps.h"

#include "runtime/executor/OpResolver.h"
#include "runtime/executor/ops/Split.h"

#include "runtime/format/WeightLayout.h"

#include "codegen/cpu/linear/ActivationRows.h"
#include "codegen/cpu/linear/Linear.h"
#include "codegen/cpu/linear/LinearInt4.h"
#include "codegen/cpu/linear/LinearInt8.h"
#include "codegen/cpu/vector/Kernels.h"

#include <cstdlib>
#include <cstring>

namespace hetc {
namespace {

using plan::DTypeDef;
using plan::WeightLayoutDef;

struct LinearArgs : OpArgs {
  Rows in, out;
  Rows other; // the residual, or the other operand of a fused swiglu
  size_t n = 0;
  size_t taskCount = 1, taskGrain = 1;
  const float *weight = nullptr;
  const uint16_t *weightBf16 = nullptr;
  const float *bias = nullptr; // [n], or none
  const codegen::LinearKernel *linear = nullptr;
  uint32_t *bf16Rows = nullptr;
  // Or an integer weight, run on the rows the QuantizeRowsInt8 op before it quantized (int8Rows:
  // the converted rows, laid out as int8Layout).
  IntegerWeight integer;
  Int8RowsLayout int8Layout{0, 0, false};
  uint8_t *int8Rows = nullptr;
  bool residual = false;
  // A fused SwiGlu: this linear's output is the gate (or up) and `other` the up (or gate).
  enum class SwiGluRole : uint8_t { None, Gate, Up } swiGlu = SwiGluRole::None;
  kernels::GatedKernel gatedKernel = nullptr;
  kernels::ActivationFunction gateFunction = kernels::ActivationFunction::Silu;
  kernels::AddKernel addKernel = nullptr;
};

struct ConvertArgs : OpArgs {
  Rows in;
  const codegen::LinearKernel *linear = nullptr; // whose layout it writes
  uint32_t *bf16Rows = nullptr;
  bool lastRowsOnly = false; // for an LmHead: the step's logits rows, gathered
};

// Rows offset by 128 for int8 weights (`quantize`), or signed with their sums for int4 weights
// (`quantizeSigned`).
struct QuantizeArgs : OpArgs {
  Rows in;
  RowQuantizer quantizer;
  uint8_t *int8Rows = nullptr;
};

} // namespace

RowQuantizer::RowQuantizer(size_t maxRows, size_t k, bool signedRows, uint64_t cpuFeatures)
    : layout(maxRows, k, signedRows) {
  if (signedRows) {
    const auto &picked = codegen::pickQuantizeRowsInt8Signed(cpuFeatures);
    withSums = picked.kernel;
    name = picked.name;
  } else {
    const auto &picked = codegen::pickQuantizeRowsInt8(cpuFeatures);
    offset = picked.kernel;
    name = picked.name;
  }
}

void RowQuantizer::run(const float *x, size_t xStride, size_t k, size_t first, size_t count,
                       uint8_t *rows) const {
  uint8_t *xq = layout.quantized(rows) + first * layout.stride;
  float *scales = layout.scales(rows) + first;
  if (withSums)
    withSums(x, xStride, count, k, reinterpret_cast<int8_t *>(xq), layout.stride, scales,
             layout.sums(rows) + first * layout.sumsStride, layout.sumsStride);
  else
    offset(x, xStride, count, k, xq, layout.stride, scales);
}

const char *IntegerWeight::chooseKernel(uint64_t cpuFeatures) {
  if (int4) {
    const auto &picked = codegen::pickLinearInt4(cpuFeatures);
    int4Kernel = picked.kernel;
    return picked.name;
  }
  const auto &picked = codegen::pickLinearInt8(cpuFeatures);
  int8Kernel = picked.kernel;
  return picked.name;
}

void IntegerWeight::run(const Int8RowsLayout &layout, uint8_t *rows, size_t count, float *y,
                        size_t yStride, size_t begin, size_t end, const float *residual,
                        size_t residualStride) const {
  if (int4) {
    codegen::LinearInt4Call call;
    call.xq = reinterpret_cast<const int8_t *>(layout.quantized(rows));
    call.stride = layout.stride;
    call.rowScale = layout.scales(rows);
    call.granuleSums = layout.sums(rows);
    call.sumsStride = layout.sumsStride;
    call.rows = count;
    call.w = int4;
    call.n = n;
    call.k = k;
    call.group = int4Group;
    call.y = y;
    call.yStride = yStride;
    call.residual = residual;
    call.residualStride = residualStride;
    call.colBegin = begin;
    call.colEnd = end;
    int4Kernel(call);
    return;
  }
  codegen::LinearInt8Call call;
  call.x = {layout.quantized(rows), layout.stride, layout.scales(rows), count};
  call.w = int8;
  call.scale = int8Scale;
  call.columnSum = int8ColumnSum;
  call.k = k;
  call.y = y;
  call.yStride = yStride;
  call.residual = residual;
  call.residualStride = residualStride;
  call.colBegin = begin;
  call.colEnd = end;
  int8Kernel(call);
}

namespace {

void columnShare(size_t taskCount, size_t taskGrain, size_t n, unsigned thread, unsigned threads,
                 size_t &begin, size_t &end) {
  size_t firstTask, lastTask;
  ops::shareOf(taskCount, thread, threads, firstTask, lastTask);
  begin = firstTask * taskGrain;
  end = std::min(n, lastTask * taskGrain);
}

// A fused SwiGlu on columns [begin, end) of a linear's output, right after the task wrote them:
// the gated kernel the SwiGlu op would run, on the same values, so the bits are the same.
void applySwiGlu(const LinearArgs &a, size_t rows, size_t begin, size_t end) {
  if (a.swiGlu == LinearArgs::SwiGluRole::None)
    return;
  float *y = a.out.data + begin;
  const float *other = a.other.data + begin;
  if (a.swiGlu == LinearArgs::SwiGluRole::Gate)
    a.gatedKernel(a.gateFunction, y, a.out.stride, other, a.other.stride, end - begin, y,
                  a.out.stride, 0, rows);
  else
    a.gatedKernel(a.gateFunction, other, a.other.stride, y, a.out.stride, end - begin, y,
                  a.out.stride, 0, rows);
}

// The bias on columns [begin, end) of every row: the add kernel with a zero stride broadcasts it.
void applyBias(const LinearArgs &a, size_t rows, size_t begin, size_t end) {
  if (a.bias)
    a.addKernel(a.out.data + begin, a.out.stride, a.bias + begin, 0, end - begin,
                a.out.data + begin, a.out.stride, 0, rows);
}

// A call of a BF16 kernel on `rows` rows of `in` (row r from source row xRows[r], or r) against
// the packed weight `w`, columns [begin, end) of output row r at y + (yRows ? yRows[r] : r) *
// yStride.
codegen::LinearCall linearCall(const Rows &in, const uint32_t *bf16Rows, const uint16_t *w,
                               size_t rows, const uint32_t *xRows, float *y, size_t yStride,
                               const uint32_t *yRows, size_t begin, size_t end) {
  codegen::LinearCall call;
  call.x = in.data;
  call.xStride = in.stride;
  call.xRows = xRows;
  call.xBf16 = bf16Rows;
  call.rows = rows;
  call.w = w;
  call.y = y;
  call.yStride = yStride;
  call.yRows = yRows;
  call.colBegin = begin;
  call.colEnd = end;
  return call;
}

void runLinearBf16(const OpArgs &base, const StepRows &step, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const LinearArgs &>(base);
  size_t begin, end;
  columnShare(a.taskCount, a.taskGrain, a.n, thread, threads, begin, end);
  if (begin >= end)
    return;
  codegen::LinearCall call = linearCall(a.in, a.bf16Rows, a.weightBf16, step.count, nullptr,
                                        a.out.data, a.out.stride, nullptr, begin, end);
  if (a.residual) {
    call.residual = a.other.data;
    call.residualStride = a.other.stride;
  }
  a.linear->run(call);
  applyBias(a, step.count, begin, end); // never with a residual (the loader checks)
  applySwiGlu(a, step.count, begin, end);
}

// An integer weight on columns [begin, end) of the output, with the fused residual in the kernel
// and the bias and swiglu after.
void runLinearInteger(const OpArgs &base, const StepRows &step, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const LinearArgs &>(base);
  size_t begin, end;
  columnShare(a.taskCount, a.taskGrain, a.n, thread, threads, begin, end);
  if (begin >= end)
    return;
  a.integer.run(a.int8Layout, a.int8Rows, step.count, a.out.data, a.out.stride, begin, end,
                a.residual ? a.other.data : nullptr, a.other.stride);
  applyBias(a, step.count, begin, end); // never with a residual (the loader checks)
  applySwiGlu(a, step.count, begin, end);
}

void runQuantizeRowsInt8(const OpArgs &base, const StepRows &step, unsigned thread,
                         unsigned threads) {
  const auto &a = static_cast<const QuantizeArgs &>(base);
  size_t begin, end;
  ops::shareOf(step.count, thread, threads, begin, end);
  if (begin < end)
    a.quantizer.run(a.in.data + begin * a.in.stride, a.in.stride, a.in.cols, begin, end - begin,
                    a.int8Rows);
}

void runLinearF32(const OpArgs &base, const StepRows &step, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const LinearArgs &>(base);
  size_t begin, end;
  columnShare(a.taskCount, a.taskGrain, a.n, thread, threads, begin, end);
  if (begin >= end)
    return;
  const size_t T = step.count;
  kernels::linear(a.in.data, a.in.stride, T, a.weight, a.in.cols, a.out.data, a.out.stride, begin,
                  end);
  applyBias(a, T, begin, end);
  // A fused residual: the same float32 sum the Add op would compute, on this task's columns.
  if (a.residual)
    a.addKernel(a.out.data + begin, a.out.stride, a.other.data + begin, a.other.stride, end - begin,
                a.out.data + begin, a.out.stride, 0, T);
  applySwiGlu(a, T, begin, end);
}

// An integer lm_head: the step's logits rows quantized into this thread's rows, as its weight
// reads them (every thread quantizes the same few rows: no phase, no wait for one).
uint8_t *quantizeLogitsRows(const LmHeadArgs &a, const StepRows &step, unsigned thread) {
  uint8_t *rows = a.integerRows + thread * a.quantizer.layout.bytes();
  for (size_t i = 0; i < step.logitsCount; ++i)
    a.quantizer.run(a.in.data + step.logitsSourceRows[i] * a.in.stride, a.in.stride, a.in.cols, i,
                    1, rows);
  return rows;
}

// The kernels write column n of output row r at y + r * yStride + n: y shifted back by a task's
// first column puts the task's columns at the start of each row of the thread's window.
float *windowColumns(float *window, size_t begin) {
  return reinterpret_cast<float *>(reinterpret_cast<uintptr_t>(window) - begin * sizeof(float));
}

// The LmHead tasks [firstTask, lastTask) of this thread in an argmax step: each task's logits go
// to the thread's window, which stays in cache, and leave their first maximum per row.
void runLmHeadArgmax(const LmHeadArgs &a, const StepRows &step, unsigned thread, size_t firstTask,
                     size_t lastTask) {
  float *window = a.windows + thread * a.windowFloats;
  const size_t grain = a.taskGrain;
  if (firstTask >= lastTask)
    return;
  uint8_t *rows = a.integer.present() ? quantizeLogitsRows(a, step, thread) : nullptr;
  for (size_t task = firstTask; task < lastTask; ++task) {
    const size_t begin = task * grain;
    const size_t end = std::min(a.vocab, begin + grain);
    if (begin >= end)
      break;
    float *y = windowColumns(window, begin);
    if (rows) {
      a.integer.run(a.quantizer.layout, rows, step.logitsCount, y, grain, begin, end);
    } else if (a.linear) {
      const codegen::LinearCall call =
          linearCall(a.in, a.bf16Rows, a.weightBf16, step.logitsCount, step.logitsSourceRows, y,
                     grain, a.identityRows.get(), begin, end);
      a.linear->run(call);
    } else {
      kernels::lmHead(a.in.data, a.in.stride, step.logitsSourceRows, a.identityRows.get(),
                      step.logitsCount, a.weight, a.in.cols, y, grain, begin, end);
    }
    for (size_t i = 0; i < step.logitsCount; ++i) {
      float *values = window + i * grain;
      if (a.bias)
        a.addKernel(values, 0, a.bias + begin, 0, end - begin, values, 0, 0, 1);
      // Capped before the argmax: capping is monotonic, but may round neighbours to one value,
      // and the first of those is the answer.
      if (a.softcap > 0)
        kernels::softCap(a.softcap, values, end - begin);
      const size_t best = kernels::argmaxFirst(values, end - begin);
      a.taskBestValues[task * a.maxBatch + i] = values[best];
      a.taskBestIndices[task * a.maxBatch + i] = static_cast<uint32_t>(begin + best);
    }
  }
}

// Columns [begin, end) of every logits row of the step, once written: the bias added, then the
// soft-cap.
void finishLogits(const LmHeadArgs &a, const StepRows &step, size_t begin, size_t end) {
  if (!a.bias && !(a.softcap > 0))
    return;
  for (size_t i = 0; i < step.logitsCount; ++i) {
    float *row = a.out.data + step.logitsOutputRows[i] * a.out.stride + begin;
    if (a.bias)
      a.addKernel(row, 0, a.bias + begin, 0, end - begin, row, 0, 0, 1);
    if (a.softcap > 0)
      kernels::softCap(a.softcap, row, end - begin);
  }
}

// The logits columns [begin, end) of tasks [firstTask, lastTask), written to their rows.
void writeLogits(const LmHeadArgs &a, const StepRows &step, unsigned thread, size_t firstTask,
                 size_t lastTask, size_t begin, size_t end) {
  if (a.integer.present()) {
    // The integer kernels write consecutive rows; the logits rows go to their sequences' rows of
    // the output, which need not be consecutive: each task's rows pass through the thread's
    // window (in cache), then to their places.
    uint8_t *rows = quantizeLogitsRows(a, step, thread);
    float *window = a.windows + thread * a.windowFloats;
    for (size_t task = firstTask; task < lastTask; ++task) {
      const size_t taskBegin = task * a.taskGrain;
      const size_t taskEnd = std::min(a.vocab, taskBegin + a.taskGrain);
      if (taskBegin >= taskEnd)
        break;
      a.integer.run(a.quantizer.layout, rows, step.logitsCount, windowColumns(window, taskBegin),
                    a.taskGrain, taskBegin, taskEnd);
      for (size_t i = 0; i < step.logitsCount; ++i)
        std::memcpy(a.out.data + step.logitsOutputRows[i] * a.out.stride + taskBegin,
                    window + i * a.taskGrain, (taskEnd - taskBegin) * sizeof(float));
    }
    return;
  }
  if (!a.linear) {
    kernels::lmHead(a.in.data, a.in.stride, step.logitsSourceRows, step.logitsOutputRows,
                    step.logitsCount, a.weight, a.in.cols, a.out.data, a.out.stride, begin, end);
    return;
  }
  const codegen::LinearCall call =
      linearCall(a.in, a.bf16Rows, a.weightBf16, step.logitsCount, step.logitsSourceRows,
                 a.out.data, a.out.stride, step.logitsOutputRows, begin, end);
  a.linear->run(call);
}

void runLmHead(const OpArgs &base, const StepRows &step, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const LmHeadArgs &>(base);
  if (step.logitsCount == 0)
    return;
  size_t firstTask, lastTask;
  ops::shareOf(a.taskCount, thread, threads, firstTask, lastTask);
  if (step.argmax) {
    runLmHeadArgmax(a, step, thread, firstTask, lastTask);
    return;
  }
  const size_t begin = firstTask * a.taskGrain;
  const size_t end = std::min(a.vocab, lastTask * a.taskGrain);
  if (begin >= end)
    return;
  writeLogits(a, step, thread, firstTask, lastTask, begin, end);
  finishLogits(a, step, begin, end);
}

void runConvertRowsBf16(const OpArgs &base, const StepRows &step, unsigned thread,
                        unsigned threads) {
  const auto &a = static_cast<const ConvertArgs &>(base);
  const size_t rows = a.lastRowsOnly ? step.logitsCount : step.count;
  size_t begin, end;
  ops::shareOf(rows, thread, threads, begin, end);
  if (begin < end)
    codegen::convertRowsForLinear(a.linear->info(), rows, a.in.data, a.in.stride,
                                  a.lastRowsOnly ? step.logitsSourceRows : nullptr, a.in.cols,
                                  a.bf16Rows, begin, end);
}

// The column tasks of a linear: the plan's grain (0: from its count), at most the whole axis,
// rounded up to a 16-column block of the packed layouts for the BF16 and integer kernels
// (results never depend on the split).
void columnTasks(const plan::OpDef &op, size_t n, bool packed, size_t &count, size_t &grain) {
  grain = op.task_grain();
  if (grain == 0)
    grain = ops::ceilDiv(n, std::max<size_t>(op.task_count(), 1));
  // A grain beyond the axis is one task over all of it; clamping keeps ceilDiv from wrapping.
  grain = std::clamp<size_t>(grain, 1, std::max<size_t>(n, 1));
  constexpr size_t kBlock = LinearBf16N16K2::kBlockColumns;
  static_assert(LinearInt8N16K4::kBlockColumns == kBlock &&
                LinearInt4N16K8::kBlockColumns == kBlock);
  if (packed && grain % kBlock != 0)
    grain = ops::ceilDiv(grain, kBlock) * kBlock;
  count = std::max<size_t>(ops::ceilDiv(n, grain), 1);
}

// The weight of a Linear or LmHead: f32 LinearNK (or a RowMajor table read as [N, K] by a tied
// LmHead), BF16 LinearBf16N16K2, INT8 LinearInt8N16K4 with its scales and column sums, or INT4
// LinearInt4N16K8 with its scales and zero points (the loader checked the segment holds them).
struct LinearWeight {
  const float *f32 = nullptr;
  const uint16_t *bf16 = nullptr;
  IntegerWeight integer; // its kernel not chosen yet
  size_t n = 0;
};

Status linearWeight(OpResolver &resolver, LinearWeight &weight) {
  const plan::OpDef &op = resolver.op();
  const uint32_t index = op.weights()->Get(0);
  const plan::TensorDef *tensor = resolver.def().tensors()->Get(index);
  const void *data = resolver.setup().plan->tensorData(index);
  if (tensor->layout() == WeightLayoutDef::LinearBf16N16K2) {
    if (tensor->dtype() != DTypeDef::BF16)
      return resolver.fail("weight in layout LinearBf16N16K2 must be BF16");
    weight.bf16 = static_cast<const uint16_t *>(data);
    weight.n = tensor->shape()->Get(0);
    return Status();
  }
  if (tensor->layout() == WeightLayoutDef::LinearInt8N16K4) {
    if (tensor->dtype() != DTypeDef::INT8)
      return resolver.fail("weight in layout LinearInt8N16K4 must be INT8");
    const LinearInt8N16K4 layout{tensor->shape()->Get(0), tensor->shape()->Get(1)};
    const auto *bytes = static_cast<const uint8_t *>(data);
    weight.integer.int8 = reinterpret_cast<const int8_t *>(bytes);
    weight.integer.int8Scale = reinterpret_cast<const float *>(bytes + layout.scaleOffset());
    weight.integer.int8ColumnSum =
        reinterpret_cast<const int32_t *>(bytes + layout.columnSumOffset());
    weight.integer.n = weight.n = layout.n;
    weight.integer.k = layout.k;
    return Status();
  }
  if (tensor->layout() == WeightLayoutDef::LinearInt4N16K8) {
    if (tensor->dtype() != DTypeDef::INT4)
      return resolver.fail("weight in layout LinearInt4N16K8 must be INT4");
    weight.integer.int4 = static_cast<const uint8_t *>(data);
    weight.integer.int4Group = tensor->group_size();
    weight.integer.n = weight.n = tensor->shape()->Get(0);
    weight.integer.k = tensor->shape()->Get(1);
    return Status();
  }
  const flatbuffers::Vector<uint64_t> *shape = nullptr;
  if (Status s = resolver.weight(0, WeightLayoutDef::LinearNK, 2, weight.f32, shape); !s)
    return s;
  weight.n = shape->Get(0);
  return Status();
}

// An INT8 or INT4 weight's kernel (its label returned), and, unless its input's rows are already
// quantized in the form it reads, the QuantizeRowsInt8 op before it: rows offset by 128 for int8
// weights, signed rows with their sums for int4 ones.
const char *chooseLinearIntegerKernel(OpResolver &resolver, LinearArgs &a,
                                      std::vector<ResolvedOp> &ops) {
  const bool int4 = a.integer.int4 != nullptr;
  const uint64_t features = resolver.setup().cpuFeatures;
  const char *kernel = a.integer.chooseKernel(features);
  const RowQuantizer quantizer(resolver.setup().maxStepTokens, a.in.cols, int4, features);
  a.int8Layout = quantizer.layout;
  const size_t bytes = a.int8Layout.bytes();
  resolver.needConvertedRows(bytes, &a.int8Rows);
  const int64_t input = resolver.op().inputs()->Get(0);
  const auto form =
      int4 ? OpResolver::ConvertedForm::Int8Signed : OpResolver::ConvertedForm::Int8Offset;
  if (resolver.convertedBuffer == input && resolver.convertedForm == form)
    return kernel;
  QuantizeArgs &quantize = resolver.make<QuantizeArgs>();
  quantize.in = a.in;
  quantize.quantizer = quantizer;
  resolver.needConvertedRows(bytes, &quantize.int8Rows);
  ResolvedOp op =
      resolver.resolved(OpKind::QuantizeRowsInt8, runQuantizeRowsInt8, quantize, quantizer.label());
  op.reads[1] = op.reads[2] = -1;
  op.writes = -1; // writes the converted rows, not a plan buffer
  ops.push_back(op);
  resolver.convertedBuffer = input;
  resolver.convertedForm = form;
  return kernel;
}

// A BF16 weight's kernel: the best the host has, one per (K, epilogue) shared by every op with
// that shape, generated now; and, when it reads bf16 rows that are not converted yet, the
// ConvertRowsBf16 op that converts them into the layout the kernel reads for the step's row count.
Status chooseLinearKernel(OpResolver &resolver, size_t k, bool residual, bool lmHead,
                          const Rows &in, const codegen::LinearKernel *&linear, uint32_t **bf16Rows,
                          std::vector<ResolvedOp> &ops) {
  // AMX only where the OS lets this process use it (asked the first time a bf16 weight needs it).
  const uint64_t features = codegen::linearKernelFeatures() & resolver.setup().cpuFeatures;
  const codegen::LinearKernelInfo info = codegen::chooseLinearBf16Kernel(features);
  linear = nullptr;
  for (const auto &kernel : resolver.linearKernels)
    if (std::string(kernel->info().name) == info.name && kernel->k() == k &&
        kernel->residual() == residual)
      linear = kernel.get();
  if (!linear) {
    Result<std::unique_ptr<codegen::LinearKernel>> made =
        codegen::createLinearBf16Kernel(k, residual, features);
    if (!made)
      return resolver.fail(made.message());
    resolver.linearKernels.push_back(std::move(made.value()));
    linear = resolver.linearKernels.back().get();
  }
  if (!info.readsBf16Rows)
    return Status();
  const OpResolver::Setup &setup = resolver.setup();
  const size_t bytes =
      codegen::convertedRowsBytes(info, lmHead ? setup.maxBatch : setup.maxStepTokens, k);
  resolver.needConvertedRows(bytes, bf16Rows);
  const int64_t input = resolver.op().inputs()->Get(0);
  if (!lmHead && resolver.convertedBuffer == input &&
      resolver.convertedForm == OpResolver::ConvertedForm::Bf16)
    return Status();
  ConvertArgs &convert = resolver.make<ConvertArgs>();
  convert.in = in;
  convert.linear = linear;
  convert.lastRowsOnly = lmHead;
  resolver.needConvertedRows(bytes, &convert.bf16Rows);
  ResolvedOp op = resolver.resolved(OpKind::ConvertRowsBf16, runConvertRowsBf16, convert,
                                    codegen::convertRowsName(info.tileRowsFrom != 0));
  op.reads[1] = op.reads[2] = -1;
  op.writes = -1; // writes the bf16 rows, not a plan buffer
  ops.push_back(op);
  resolver.convertedBuffer = lmHead ? -1 : input;
  resolver.convertedForm = OpResolver::ConvertedForm::Bf16;
  return Status();
}

} // namespace

LmHeadArgs::~LmHeadArgs() {
  std::free(windows);
  std::free(integerRows);
}

Status resolveLinear(OpResolver &resolver, std::vector<ResolvedOp> &ops) {
  const OpResolver::Setup &setup = resolver.setup();
  const plan::OpDef &op = resolver.op();
  const size_t T = setup.maxStepTokens;
  LinearArgs &a = resolver.make<LinearArgs>();
  if (Status s = resolver.buffer(0, true, T, a.in); !s)
    return s;
  if (Status s = resolver.buffer(0, false, T, a.out); !s)
    return s;
  LinearWeight weight;
  if (Status s = linearWeight(resolver, weight); !s)
    return s;
  a.weight = weight.f32;
  a.weightBf16 = weight.bf16;
  a.integer = weight.integer;
  a.n = weight.n;
  if (resolver.overlaps(op.inputs()->Get(0), op.outputs()->Get(0)))
    return resolver.fail("output overlaps the input");
  const auto *params = op.params_as_LinearParamsDef();
  a.residual = params && params->residual();
  const plan::SwiGluRoleDef swiGlu = params ? params->swiglu() : plan::SwiGluRoleDef::None;
  a.swiGlu = swiGlu == plan::SwiGluRoleDef::Gate ? LinearArgs::SwiGluRole::Gate
             : swiGlu == plan::SwiGluRoleDef::Up ? LinearArgs::SwiGluRole::Up
                                                 : LinearArgs::SwiGluRole::None;
  a.gatedKernel = setup.vector->gated;
  a.gateFunction = activationFunction(params ? params->swiglu_function()
                                             : plan::ActivationFunctionDef::Silu);
  a.addKernel = setup.vector->add;
  if (params && params->bias()) {
    const flatbuffers::Vector<uint64_t> *shape = nullptr;
    if (Status s = resolver.weight(1, WeightLayoutDef::RowMajor, 1, a.bias, shape); !s)
      return s;
    if (shape->Get(0) != a.n)
      return resolver.fail("bias has " + std::to_string(shape->Get(0)) + " elements for " +
                           std::to_string(a.n) + " output columns");
  }
  if (a.swiGlu != LinearArgs::SwiGluRole::None || a.residual) {
    if (Status s = resolver.buffer(1, true, T, a.other); !s)
      return s;
    // A swiglu task writes its columns of the output before it reads the same columns of the
    // other operand, so the two must not share bytes.
    if (a.swiGlu != LinearArgs::SwiGluRole::None &&
        resolver.overlaps(op.inputs()->Get(1), op.outputs()->Get(0)))
      return resolver.fail("output overlaps the operand of its fused swiglu");
    // The float32 kernel writes x W^T first and adds the residual after, so the two must not
    // share bytes; the BF16 and INT8 kernels add in the epilogue and may work in place.
    if (a.residual && a.weight && resolver.overlaps(op.inputs()->Get(1), op.outputs()->Get(0)))
      return resolver.fail(
          "a residual that is also the output needs BF16 or INT8 weights in this runtime");
  }
  columnTasks(op, a.n, a.weight == nullptr, a.taskCount, a.taskGrain);
  const char *label = "LinearF32Portable";
  OpRunFn run = runLinearF32;
  if (a.integer.present()) {
    label = chooseLinearIntegerKernel(resolver, a, ops);
    run = runLinearInteger;
  } else if (a.weightBf16) {
    if (Status s = chooseLinearKernel(resolver, a.in.cols, a.residual, false, a.in, a.linear,
                                      &a.bf16Rows, ops);
        !s)
      return s;
    label = a.linear->info().label;
    run = runLinearBf16;
  }
  ResolvedOp resolved = resolver.resolved(OpKind::Linear, run, a, label);
  resolved.columnTasks = a.taskCount;
  resolved.columnGrain = a.taskGrain;
  resolved.fusedSwiGlu = a.swiGlu != LinearArgs::SwiGluRole::None;
  ops.push_back(resolved);
  return Status();
}

Status resolveLmHead(OpResolver &resolver, std::vector<ResolvedOp> &ops) {
  const OpResolver::Setup &setup = resolver.setup();
  const plan::OpDef &op = resolver.op();
  LmHeadArgs &a = resolver.make<LmHeadArgs>();
  if (Status s = resolver.buffer(0, true, setup.maxStepTokens, a.in); !s)
    return s;
  if (Status s = resolver.buffer(0, false, setup.maxBatch, a.out); !s)
    return s;
  LinearWeight weight;
  if (Status s = linearWeight(resolver, weight); !s)
    return s;
  a.weight = weight.f32;
  a.weightBf16 = weight.bf16;
  a.integer = weight.integer;
  a.vocab = weight.n;
  // Finite and >= 0: the loader checked. Before 1.16 an LmHead's params were empty.
  const plan::LmHeadParamsDef *params = op.params_as_LmHeadParamsDef();
  a.softcap = params ? params->softcap() : 0.0f;
  a.addKernel = setup.vector->add;
  if (params && params->bias()) {
    const flatbuffers::Vector<uint64_t> *shape = nullptr;
    if (Status s = resolver.weight(1, WeightLayoutDef::RowMajor, 1, a.bias, shape); !s)
      return s;
    if (shape->Get(0) != a.vocab)
      return resolver.fail("bias has " + std::to_string(shape->Get(0)) + " elements for " +
                           std::to_string(a.vocab) + " logits");
  }
  if (resolver.overlaps(op.inputs()->Get(0), op.outputs()->Get(0)))
    return resolver.fail("output overlaps the input");
  columnTasks(op, a.vocab, a.weightBf16 || a.integer.present(), a.taskCount, a.taskGrain);
  const char *label = "LinearF32Portable";
  if (a.integer.present()) {
    // Each thread's quantized logits rows (at most max_batch: one per sequence).
    label = a.integer.chooseKernel(setup.cpuFeatures);
    a.quantizer =
        RowQuantizer(setup.maxBatch, a.in.cols, a.integer.int4 != nullptr, setup.cpuFeatures);
    const size_t bytes = setup.threads * a.quantizer.layout.bytes();
    a.integerRows = static_cast<uint8_t *>(std::aligned_alloc(
        kBufferAlignment, ops::ceilDiv(bytes, kBufferAlignment) * kBufferAlignment));
    if (!a.integerRows)
      return resolver.fail("cannot allocate " + std::to_string(bytes) +
                           " bytes of quantized lm_head rows");
  } else if (a.weightBf16) {
    if (Status s =
            chooseLinearKernel(resolver, a.in.cols, false, true, a.in, a.linear, &a.bf16Rows, ops);
        !s)
      return s;
    label = a.linear->info().label;
  }
  // The argmax windows and the tasks' best values, sized by the bounds and the threads.
  a.maxBatch = setup.maxBatch;
  a.identityRows.reset(new uint32_t[a.maxBatch]);
  for (uint32_t i = 0; i < a.maxBatch; ++i)
    a.identityRows[i] = i;
  a.taskBestValues.reset(new float[a.taskCount * a.maxBatch]());
  a.taskBestIndices.reset(new uint32_t[a.taskCount * a.maxBatch]());
  a.windowFloats = ops::ceilDiv(a.maxBatch * a.taskGrain, 16) * 16;
  const size_t bytes = setup.threads * a.windowFloats * sizeof(float);
  a.windows = static_cast<float *>(std::aligned_alloc(
      kBufferAlignment, ops::ceilDiv(bytes, kBufferAlignment) * kBufferAlignment));
  if (!a.windows)
    return resolver.fail("cannot allocate " + std::to_string(bytes) +
                         " bytes of lm_head argmax windows");
  resolver.setLmHead(&a);
  ops.push_back(resolver.resolved(OpKind::LmHead, runLmHead, a, label));
  return Status();
}

void mergeLmHeadArgmax(const LmHeadArgs &a, const StepRows &step, int32_t *argmax) {
  for (size_t i = 0; i < step.logitsCount; ++i) {
    float best = a.taskBestValues[i];
    uint32_t index = a.taskBestIndices[i];
    for (size_t task = 1; task < a.taskCount; ++task)
      if (a.taskBestValues[task * a.maxBatch + i] > best) {
        best = a.taskBestValues[task * a.maxBatch + i];
        index = a.taskBestIndices[task * a.maxBatch + i];
      }
    argmax[step.logitsOutputRows[i]] = static_cast<int32_t>(index);
  }
}

} // namespace hetc
