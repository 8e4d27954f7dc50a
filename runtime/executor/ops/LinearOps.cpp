// Linear, LmHead and ConvertRowsBf16. A linear splits its N output columns into tasks of the
// plan's grain. Its weight is f32 LinearNK (the portable float32 kernel) or BF16 LinearBf16N16K2,
// run by the best kernel of codegen/cpu/linear the host has (AMX, AVX-512 BF16 JIT, portable),
// generated once per (K, epilogue) and shared by every op with that shape; its label is that
// kernel's. Kernels that read bf16 rows get a ConvertRowsBf16 op before them unless the rows
// they read are already converted (q, k and v share their input).
#include "runtime/executor/ops/LinearOps.h"

#include "runtime/executor/OpResolver.h"
#include "runtime/executor/ops/Split.h"

#include "runtime/format/WeightLayout.h"

#include "codegen/cpu/linear/ActivationRows.h"
#include "codegen/cpu/linear/Linear.h"
#include "codegen/cpu/vector/Kernels.h"

#include <cstdlib>

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
  bool residual = false;
  // A fused SwiGlu: this linear's output is the gate (or up) and `other` the up (or gate).
  enum class SwiGluRole : uint8_t { None, Gate, Up } swiGlu = SwiGluRole::None;
  kernels::SwiGluKernel swiGluKernel = nullptr;
  kernels::AddKernel addKernel = nullptr;
};

struct ConvertArgs : OpArgs {
  Rows in;
  const codegen::LinearKernel *linear = nullptr; // whose layout it writes
  uint32_t *bf16Rows = nullptr;
  bool lastRowsOnly = false; // for an LmHead: the step's logits rows, gathered
};

void columnShare(size_t taskCount, size_t taskGrain, size_t n, unsigned thread, unsigned threads,
                 size_t &begin, size_t &end) {
  size_t firstTask, lastTask;
  ops::shareOf(taskCount, thread, threads, firstTask, lastTask);
  begin = firstTask * taskGrain;
  end = std::min(n, lastTask * taskGrain);
}

// A fused SwiGlu on columns [begin, end) of a linear's output, right after the task wrote them:
// the swiglu kernel the SwiGlu op would run, on the same values, so the bits are the same.
void applySwiGlu(const LinearArgs &a, size_t rows, size_t begin, size_t end) {
  if (a.swiGlu == LinearArgs::SwiGluRole::None)
    return;
  float *y = a.out.data + begin;
  const float *other = a.other.data + begin;
  if (a.swiGlu == LinearArgs::SwiGluRole::Gate)
    a.swiGluKernel(y, a.out.stride, other, a.other.stride, end - begin, y, a.out.stride, 0, rows);
  else
    a.swiGluKernel(other, a.other.stride, y, a.out.stride, end - begin, y, a.out.stride, 0, rows);
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

// The LmHead tasks [firstTask, lastTask) of this thread in an argmax step: each task's logits go
// to the thread's window, which stays in cache, and leave their first maximum per row.
void runLmHeadArgmax(const LmHeadArgs &a, const StepRows &step, unsigned thread, size_t firstTask,
                     size_t lastTask) {
  float *window = a.windows + thread * a.windowFloats;
  const size_t grain = a.taskGrain;
  for (size_t task = firstTask; task < lastTask; ++task) {
    const size_t begin = task * grain;
    const size_t end = std::min(a.vocab, begin + grain);
    if (begin >= end)
      break;
    // The kernels write column n of output row r at y + r * yStride + n: y shifted back by the
    // task's first column puts the task's columns at the start of each window row.
    float *y =
        reinterpret_cast<float *>(reinterpret_cast<uintptr_t>(window) - begin * sizeof(float));
    if (a.linear) {
      const codegen::LinearCall call =
          linearCall(a.in, a.bf16Rows, a.weightBf16, step.logitsCount, step.logitsSourceRows, y,
                     grain, a.identityRows.get(), begin, end);
      a.linear->run(call);
    } else {
      kernels::lmHead(a.in.data, a.in.stride, step.logitsSourceRows, a.identityRows.get(),
                      step.logitsCount, a.weight, a.in.cols, y, grain, begin, end);
    }
    for (size_t i = 0; i < step.logitsCount; ++i) {
      const float *values = window + i * grain;
      const size_t best = kernels::argmaxFirst(values, end - begin);
      a.taskBestValues[task * a.maxBatch + i] = values[best];
      a.taskBestIndices[task * a.maxBatch + i] = static_cast<uint32_t>(begin + best);
    }
  }
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
// rounded up to a 16-column block of the packed layout for the BF16 kernels (results never
// depend on the split).
void columnTasks(const plan::OpDef &op, size_t n, bool packed, size_t &count, size_t &grain) {
  grain = op.task_grain();
  if (grain == 0)
    grain = ops::ceilDiv(n, std::max<size_t>(op.task_count(), 1));
  // A grain beyond the axis is one task over all of it; clamping keeps ceilDiv from wrapping.
  grain = std::clamp<size_t>(grain, 1, std::max<size_t>(n, 1));
  constexpr size_t kBlock = LinearBf16N16K2::kBlockColumns;
  if (packed && grain % kBlock != 0)
    grain = ops::ceilDiv(grain, kBlock) * kBlock;
  count = std::max<size_t>(ops::ceilDiv(n, grain), 1);
}

// The weight of a Linear or LmHead: f32 LinearNK (or a RowMajor table read as [N, K] by a tied
// LmHead), or BF16 LinearBf16N16K2.
Status linearWeight(OpResolver &resolver, const float *&weight, const uint16_t *&weightBf16,
                    size_t &n) {
  const plan::OpDef &op = resolver.op();
  const uint32_t index = op.weights()->Get(0);
  const plan::TensorDef *tensor = resolver.def().tensors()->Get(index);
  if (tensor->layout() == WeightLayoutDef::LinearBf16N16K2) {
    if (tensor->dtype() != DTypeDef::BF16)
      return resolver.fail("weight in layout LinearBf16N16K2 must be BF16");
    weightBf16 = static_cast<const uint16_t *>(resolver.setup().plan->tensorData(index));
    n = tensor->shape()->Get(0);
    return Status();
  }
  const flatbuffers::Vector<uint64_t> *shape = nullptr;
  if (Status s = resolver.weight(0, WeightLayoutDef::LinearNK, 2, weight, shape); !s)
    return s;
  n = shape->Get(0);
  return Status();
}

// A BF16 weight's kernel: the best the host has, one per (K, epilogue) shared by every op with
// that shape, generated now; and, when it reads bf16 rows that are not converted yet, the
// ConvertRowsBf16 op that converts them into the layout the kernel reads for the step's row count.
Status chooseLinearKernel(OpResolver &resolver, size_t k, bool residual, bool lmHead,
                          const Rows &in, const codegen::LinearKernel *&linear, uint32_t **bf16Rows,
                          std::vector<ResolvedOp> &ops) {
  const uint64_t features = codegen::linearKernelFeatures();
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
  resolver.needBf16Rows(bytes, bf16Rows);
  const int64_t input = resolver.op().inputs()->Get(0);
  if (!lmHead && resolver.convertedBuffer == input)
    return Status();
  ConvertArgs &convert = resolver.make<ConvertArgs>();
  convert.in = in;
  convert.linear = linear;
  convert.lastRowsOnly = lmHead;
  resolver.needBf16Rows(bytes, &convert.bf16Rows);
  ResolvedOp op = resolver.resolved(OpKind::ConvertRowsBf16, runConvertRowsBf16, convert,
                                    codegen::convertRowsName(info.tileRowsFrom != 0));
  op.reads[1] = op.reads[2] = -1;
  op.writes = -1; // writes the bf16 rows, not a plan buffer
  ops.push_back(op);
  resolver.convertedBuffer = lmHead ? -1 : input;
  return Status();
}

} // namespace

LmHeadArgs::~LmHeadArgs() { std::free(windows); }

Status resolveLinear(OpResolver &resolver, std::vector<ResolvedOp> &ops) {
  const OpResolver::Setup &setup = resolver.setup();
  const plan::OpDef &op = resolver.op();
  const size_t T = setup.maxStepTokens;
  LinearArgs &a = resolver.make<LinearArgs>();
  if (Status s = resolver.buffer(0, true, T, a.in); !s)
    return s;
  if (Status s = resolver.buffer(0, false, T, a.out); !s)
    return s;
  if (Status s = linearWeight(resolver, a.weight, a.weightBf16, a.n); !s)
    return s;
  if (resolver.overlaps(op.inputs()->Get(0), op.outputs()->Get(0)))
    return resolver.fail("output overlaps the input");
  const auto *params = op.params_as_LinearParamsDef();
  a.residual = params && params->residual();
  const plan::SwiGluRoleDef swiGlu = params ? params->swiglu() : plan::SwiGluRoleDef::None;
  a.swiGlu = swiGlu == plan::SwiGluRoleDef::Gate ? LinearArgs::SwiGluRole::Gate
             : swiGlu == plan::SwiGluRoleDef::Up ? LinearArgs::SwiGluRole::Up
                                                 : LinearArgs::SwiGluRole::None;
  a.swiGluKernel = setup.vector->swiGlu;
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
    // share bytes; the BF16 kernels add in the epilogue and may work in place.
    if (a.residual && !a.weightBf16 && resolver.overlaps(op.inputs()->Get(1), op.outputs()->Get(0)))
      return resolver.fail("a residual that is also the output needs BF16 weights in this runtime");
  }
  columnTasks(op, a.n, a.weightBf16 != nullptr, a.taskCount, a.taskGrain);
  const char *label = "LinearF32Portable";
  OpRunFn run = runLinearF32;
  if (a.weightBf16) {
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
  if (Status s = linearWeight(resolver, a.weight, a.weightBf16, a.vocab); !s)
    return s;
  if (resolver.overlaps(op.inputs()->Get(0), op.outputs()->Get(0)))
    return resolver.fail("output overlaps the input");
  columnTasks(op, a.vocab, a.weightBf16 != nullptr, a.taskCount, a.taskGrain);
  const char *label = "LinearF32Portable";
  if (a.weightBf16) {
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
