#include "hetc/runtime/Engine.h"

#include "hetc/runtime/Generate.h"
#include "hetc/runtime/Plan.h"

#include "codegen/cpu/CpuFeatures.h"
#include "codegen/cpu/Linear.h"
#include "codegen/cpu/WeightLayout.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace hetc {
namespace {

constexpr size_t kActivationAlignment = 64;

using plan::DTypeDef;
using plan::OpKindDef;
using plan::WeightLayoutDef;

std::string str(uint64_t value) { return std::to_string(value); }

size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

// Contiguous share [begin, end) of `total` units for `thread` of `threadCount`: deterministic,
// and neighbouring threads get neighbouring units (a Linear thread streams one block of W).
void shareOf(size_t total, unsigned thread, unsigned threadCount, size_t &begin, size_t &end) {
  begin = total * thread / threadCount;
  end = total * (thread + 1) / threadCount;
}

// Turns the plan's ops into ResolvedOps, checking what the kernels rely on. The loader has
// verified indices and sizes; these checks are about what this executor supports and cost
// nothing at run time.
class OpResolver {
public:
  OpResolver(const Plan &plan, float *arena, size_t maxStepTokens, size_t maxBatch,
             std::vector<std::unique_ptr<codegen::LinearKernel>> &linearKernels)
      : plan_(plan), def_(plan.def()), arena_(arena), maxStepTokens_(maxStepTokens),
        maxBatch_(maxBatch), linearKernels_(linearKernels) {}

  Status resolve(uint32_t index, std::vector<ResolvedOp> &ops);
  // Bytes of bf16 rows the resolved ops convert per step: 0 when no kernel reads them.
  size_t bf16RowsBytes() const { return bf16RowsBytes_; }

private:
  Status fail(const std::string &message) const {
    return Status::error("op " + str(opIndex_) + " '" + opName_ + "' (" + kindName_ +
                         "): " + message);
  }
  Status buffer(size_t position, bool isInput, size_t minRows, ResolvedOp::Rows &rows);
  Status weight(size_t position, WeightLayoutDef layout, size_t dims, const float *&data,
                const flatbuffers::Vector<uint64_t> *&shape);
  bool overlaps(uint32_t a, uint32_t b) const;
  void setTasks(ResolvedOp &op, size_t axisLength) const;
  Status linearWeight(ResolvedOp &op, const flatbuffers::Vector<uint64_t> *&shape);
  Status chooseLinearKernel(ResolvedOp &op, bool residual, std::vector<ResolvedOp> &ops);
  void forgetConvertedRowsWrittenBy(const plan::OpDef &op);

  const Plan &plan_;
  const plan::PlanDef &def_;
  float *arena_;
  size_t maxStepTokens_;
  size_t maxBatch_;
  std::vector<std::unique_ptr<codegen::LinearKernel>> &linearKernels_;
  // The buffer whose rows the last ConvertRowsBf16 holds while no op has written over it since.
  int64_t convertedBuffer_ = -1;
  size_t bf16RowsBytes_ = 0;
  const plan::OpDef *op_ = nullptr;
  uint32_t opIndex_ = 0;
  std::string opName_;
  std::string kindName_;
};

Status OpResolver::buffer(size_t position, bool isInput, size_t minRows, ResolvedOp::Rows &rows) {
  const auto *list = isInput ? op_->inputs() : op_->outputs();
  const char *side = isInput ? "input" : "output";
  if (!list || position >= list->size())
    return fail("missing " + std::string(side) + " " + str(position));
  const plan::BufferDef *buffer = def_.buffers()->Get(list->Get(position));
  const std::string name = buffer->name() ? buffer->name()->str() : "";
  if (buffer->dtype() != DTypeDef::F32)
    return fail(std::string(side) + " buffer '" + name + "' is " +
                plan::EnumNameDTypeDef(buffer->dtype()) +
                "; this runtime's portable kernels read f32 only");
  if (buffer->offset() % sizeof(float) != 0 || buffer->row_stride() % sizeof(float) != 0 ||
      buffer->row_stride() < buffer->cols() * sizeof(float))
    return fail(std::string(side) + " buffer '" + name + "' has a misaligned offset or stride");
  if (buffer->rows() < minRows)
    return fail(std::string(side) + " buffer '" + name + "' has " + str(buffer->rows()) +
                " rows but a step may fill " + str(minRows));
  rows.data = arena_ + buffer->offset() / sizeof(float);
  rows.stride = buffer->row_stride() / sizeof(float);
  rows.cols = buffer->cols();
  return Status();
}

Status OpResolver::weight(size_t position, WeightLayoutDef layout, size_t dims, const float *&data,
                          const flatbuffers::Vector<uint64_t> *&shape) {
  if (!op_->weights() || position >= op_->weights()->size())
    return fail("missing weight " + str(position));
  const uint32_t index = op_->weights()->Get(position);
  const plan::TensorDef *tensor = def_.tensors()->Get(index);
  const std::string name = tensor->name() ? tensor->name()->str() : "";
  if (tensor->dtype() != DTypeDef::F32)
    return fail("weight '" + name + "' is " + plan::EnumNameDTypeDef(tensor->dtype()) +
                "; this runtime's portable kernels read f32 only");
  // An LmHead tied to the embedding reads the [vocab, hidden] table, which is already [N, K].
  const bool rowMajorAsNK =
      layout == WeightLayoutDef::LinearNK && tensor->layout() == WeightLayoutDef::RowMajor;
  if (tensor->layout() != layout && !rowMajorAsNK)
    return fail("weight '" + name + "' has layout " +
                plan::EnumNameWeightLayoutDef(tensor->layout()) + ", expected " +
                plan::EnumNameWeightLayoutDef(layout));
  shape = tensor->shape();
  if (!shape || shape->size() != dims)
    return fail("weight '" + name + "' should have " + str(dims) + " dimensions");
  data = static_cast<const float *>(plan_.tensorData(index));
  if (reinterpret_cast<uintptr_t>(data) % alignof(float) != 0)
    return fail("weight '" + name + "' is not aligned for f32");
  return Status();
}

bool OpResolver::overlaps(uint32_t a, uint32_t b) const {
  const plan::BufferDef *x = def_.buffers()->Get(a);
  const plan::BufferDef *y = def_.buffers()->Get(b);
  const uint64_t xEnd = x->offset() + x->rows() * x->row_stride();
  const uint64_t yEnd = y->offset() + y->rows() * y->row_stride();
  return x->offset() < yEnd && y->offset() < xEnd;
}

// Linear and LmHead split their N columns into tasks of task_grain columns.
void OpResolver::setTasks(ResolvedOp &op, size_t axisLength) const {
  size_t grain = op_->task_grain();
  if (grain == 0)
    grain = ceilDiv(axisLength, std::max<size_t>(op_->task_count(), 1));
  // A grain beyond the axis is one task over all of it; clamping keeps ceilDiv from wrapping.
  op.taskGrain = std::clamp<size_t>(grain, 1, std::max<size_t>(axisLength, 1));
  op.taskCount = std::max<size_t>(ceilDiv(axisLength, op.taskGrain), 1);
}

// The weight of a Linear or LmHead: f32 LinearNK (or a RowMajor table read as [N, K] by a tied
// LmHead), or BF16 LinearBf16N16K2, which a linear kernel from codegen runs.
Status OpResolver::linearWeight(ResolvedOp &op, const flatbuffers::Vector<uint64_t> *&shape) {
  if (!op_->weights() || op_->weights()->size() == 0)
    return fail("missing weight 0");
  const uint32_t index = op_->weights()->Get(0);
  const plan::TensorDef *tensor = def_.tensors()->Get(index);
  if (tensor->layout() != WeightLayoutDef::LinearBf16N16K2)
    return weight(0, WeightLayoutDef::LinearNK, 2, op.weight, shape);
  shape = tensor->shape();
  if (tensor->dtype() != DTypeDef::BF16 || !shape || shape->size() != 2)
    return fail("weight '" + (tensor->name() ? tensor->name()->str() : std::string()) +
                "' in layout LinearBf16N16K2 must be a 2-D BF16 tensor");
  op.weightBf16 = static_cast<const uint16_t *>(plan_.tensorData(index));
  // Each 16-column block is whole 64-byte lines; segments start on 4096-byte boundaries.
  if (reinterpret_cast<uintptr_t>(op.weightBf16) % 64 != 0)
    return fail("weight is not 64-byte aligned");
  return Status();
}

// A BF16 weight's kernel: the best the host has, one per (K, epilogue) shared by every op with
// that shape, generated now. Kernels that read bf16 rows get a ConvertRowsBf16 op before them
// unless the rows they read are already converted (q, k and v share their input); the op
// converts into the layout the kernel reads for the step's row count (LinearAmxBf16 reads
// row-major rows from kAmxMinRows rows).
Status OpResolver::chooseLinearKernel(ResolvedOp &op, bool residual, std::vector<ResolvedOp> &ops) {
  const uint64_t features = codegen::linearKernelFeatures();
  const codegen::LinearKernelInfo info = codegen::chooseLinearBf16Kernel(features);
  const size_t k = op.in[0].cols;
  for (const auto &kernel : linearKernels_)
    if (std::string(kernel->info().name) == info.name && kernel->k() == k &&
        kernel->residual() == residual)
      op.linear = kernel.get();
  if (!op.linear) {
    Result<std::unique_ptr<codegen::LinearKernel>> made =
        codegen::createLinearBf16Kernel(k, residual, features);
    if (!made)
      return fail(made.message());
    linearKernels_.push_back(std::move(made.value()));
    op.linear = linearKernels_.back().get();
  }
  op.kernel = info.label;
  // Column tasks start on a 16-column block of the layout: a grain the plan gives otherwise is
  // rounded up (results never depend on the split).
  constexpr size_t kBlock = codegen::LinearBf16N16K2::kBlockColumns;
  if (op.taskGrain % kBlock != 0) {
    op.taskGrain = ceilDiv(op.taskGrain, kBlock) * kBlock;
    op.taskCount = std::max<size_t>(ceilDiv(op.weightRows, op.taskGrain), 1);
  }
  if (!info.readsBf16Rows)
    return Status();
  const bool lmHead = op.kind == ResolvedOp::Kind::LmHead;
  const size_t rows = lmHead ? maxBatch_ : maxStepTokens_;
  bf16RowsBytes_ = std::max<size_t>(bf16RowsBytes_, codegen::convertedRowsBytes(info, rows, k));
  const int64_t input = op_->inputs()->Get(0);
  if (lmHead || convertedBuffer_ != input) {
    ResolvedOp convert;
    convert.kind = ResolvedOp::Kind::ConvertRowsBf16;
    convert.planOp = opIndex_;
    convert.in[0] = op.in[0];
    convert.lastRowsOnly = lmHead;
    convert.taskGrain = 1;
    convert.linear = op.linear;
    const bool avx512 = codegen::hostHas(codegen::kCpuAvx512Bf16);
    convert.kernel = info.tileRowsFrom ? (avx512 ? "Bf16RowsAvx512Bf16 + Bf16RowMajor (prefill)"
                                                 : "Bf16RowsPortable + Bf16RowMajor (prefill)")
                                       : (avx512 ? "Bf16RowsAvx512Bf16" : "Bf16RowsPortable");
    ops.push_back(convert);
    convertedBuffer_ = lmHead ? -1 : input;
  }
  return Status();
}

// Columns [begin, end) of a Linear or LmHead with BF16 weights, by the kernel chosen at create():
// `rows` rows of its input (the LmHead's gathered through `sourceRows`, which its ConvertRowsBf16
// op gathered the same way), output column n of row r at y + (yRows ? yRows[r] : r) * yStride +
// n - yFirstColumn (so a caller may write into a window of the columns).
void runLinearBf16(const ResolvedOp &op, size_t rows, const uint32_t *sourceRows, float *y,
                   size_t yStride, const uint32_t *yRows, size_t yFirstColumn, size_t begin,
                   size_t end) {
  codegen::LinearCall call;
  call.x = op.in[0].data;
  call.xStride = op.in[0].stride;
  call.xRows = sourceRows;
  call.xBf16 = op.bf16Rows;
  call.rows = rows;
  call.w = op.weightBf16;
  call.y = y;
  call.yStride = yStride;
  call.yRows = yRows;
  call.yFirstColumn = yFirstColumn;
  if (op.linear->residual()) {
    call.residual = op.in[1].data;
    call.residualStride = op.in[1].stride;
  }
  call.colBegin = begin;
  call.colEnd = end;
  op.linear->run(call);
}

// An op that writes over the converted buffer's bytes makes its bf16 rows stale.
void OpResolver::forgetConvertedRowsWrittenBy(const plan::OpDef &op) {
  if (convertedBuffer_ < 0 || !op.outputs())
    return;
  for (uint32_t output : *op.outputs())
    if (overlaps(output, static_cast<uint32_t>(convertedBuffer_)))
      convertedBuffer_ = -1;
}

Status OpResolver::resolve(uint32_t index, std::vector<ResolvedOp> &ops) {
  op_ = def_.ops()->Get(index);
  opIndex_ = index;
  opName_ = op_->name() ? op_->name()->str() : "";
  kindName_ = plan::EnumNameOpKindDef(op_->kind());
  // The op's device is the one the plan's target would use; this runtime has no GPU executor and
  // runs every op on the CPU, with the kernels a host plan gets (Devices.h says so to the user).

  ResolvedOp op;
  op.planOp = index;
  // Row-wise ops split the step's rows into tasks of task_grain rows.
  op.taskGrain = op_->task_grain() != 0
                     ? std::min<size_t>(op_->task_grain(), maxStepTokens_)
                     : ceilDiv(maxStepTokens_, std::max<size_t>(op_->task_count(), 1));
  op.taskCount = ceilDiv(maxStepTokens_, op.taskGrain);
  const flatbuffers::Vector<uint64_t> *shape = nullptr;
  const size_t T = maxStepTokens_;

  switch (op_->kind()) {
  case OpKindDef::Embedding: {
    op.kind = ResolvedOp::Kind::Embedding;
    if (Status s = buffer(0, false, T, op.out); !s)
      return s;
    const plan::TensorDef *table = op_->weights() && op_->weights()->size() > 0
                                       ? def_.tensors()->Get(op_->weights()->Get(0))
                                       : nullptr;
    if (table && table->layout() == WeightLayoutDef::LinearBf16N16K2) {
      // Tied to a BF16 lm_head: rows are gathered from its packed weight.
      if (Status s = linearWeight(op, shape); !s)
        return s;
      op.kernel = "EmbeddingBf16Packed";
    } else if (Status s = weight(0, WeightLayoutDef::RowMajor, 2, op.weight, shape); !s) {
      return s;
    }
    op.weightRows = shape->Get(0);
    if (shape->Get(0) != def_.model()->vocab() || shape->Get(1) != op.out.cols)
      return fail("table shape [" + str(shape->Get(0)) + ", " + str(shape->Get(1)) +
                  "] does not match vocab " + str(def_.model()->vocab()) + " and output width " +
                  str(op.out.cols));
    break;
  }
  case OpKindDef::RmsNorm: {
    op.kind = ResolvedOp::Kind::RmsNorm;
    if (Status s = buffer(0, true, T, op.in[0]); !s)
      return s;
    if (Status s = buffer(0, false, T, op.out); !s)
      return s;
    if (Status s = weight(0, WeightLayoutDef::RowMajor, 1, op.weight, shape); !s)
      return s;
    if (op.in[0].cols != op.out.cols || shape->Get(0) != op.out.cols)
      return fail("input, output and gamma widths differ");
    const auto *params = op_->params_as_RmsNormParamsDef();
    op.eps = params ? params->eps() : def_.model()->rms_eps();
    break;
  }
  case OpKindDef::Linear:
  case OpKindDef::LmHead: {
    const bool lmHead = op_->kind() == OpKindDef::LmHead;
    op.kind = lmHead ? ResolvedOp::Kind::LmHead : ResolvedOp::Kind::Linear;
    if (Status s = buffer(0, true, T, op.in[0]); !s)
      return s;
    if (Status s = buffer(0, false, lmHead ? maxBatch_ : T, op.out); !s)
      return s;
    if (Status s = linearWeight(op, shape); !s)
      return s;
    op.weightRows = shape->Get(0);
    if (shape->Get(1) != op.in[0].cols || shape->Get(0) != op.out.cols)
      return fail("weight [" + str(shape->Get(0)) + ", " + str(shape->Get(1)) +
                  "] does not map input width " + str(op.in[0].cols) + " to output width " +
                  str(op.out.cols));
    if (lmHead && shape->Get(0) != def_.model()->vocab())
      return fail("produces " + str(shape->Get(0)) + " logits but the vocabulary has " +
                  str(def_.model()->vocab()) + " ids");
    if (overlaps(op_->inputs()->Get(0), op_->outputs()->Get(0)))
      return fail("output overlaps the input");
    const auto *linearParams = op_->params_as_LinearParamsDef();
    const bool residual = !lmHead && linearParams && linearParams->residual();
    const plan::SwiGluRoleDef swiGlu =
        lmHead || !linearParams ? plan::SwiGluRoleDef::None : linearParams->swiglu();
    op.swiGlu = swiGlu == plan::SwiGluRoleDef::Gate ? ResolvedOp::SwiGluRole::Gate
                : swiGlu == plan::SwiGluRoleDef::Up ? ResolvedOp::SwiGluRole::Up
                                                    : ResolvedOp::SwiGluRole::None;
    if (op.swiGlu != ResolvedOp::SwiGluRole::None) {
      if (Status s = buffer(1, true, T, op.in[1]); !s)
        return s;
      // Each task writes its columns of the output before it reads the same columns here.
      if (overlaps(op_->inputs()->Get(1), op_->outputs()->Get(0)))
        return fail("output overlaps the operand of its fused swiglu");
    }
    if (residual) {
      if (Status s = buffer(1, true, T, op.in[1]); !s)
        return s;
      if (op.in[1].cols != op.out.cols)
        return fail("the residual and the output widths differ");
      // The float32 kernel writes x W^T first and adds the residual after, so the two must not
      // share bytes; the BF16 kernels add in the epilogue and may work in place.
      if (!op.weightBf16 && overlaps(op_->inputs()->Get(1), op_->outputs()->Get(0)))
        return fail("a residual that is also the output needs BF16 weights in this runtime");
    }
    setTasks(op, op.weightRows);
    if (op.weightBf16) {
      if (Status s = chooseLinearKernel(op, residual, ops); !s)
        return s;
    } else {
      op.kernel = "LinearF32Portable";
    }
    break;
  }
  case OpKindDef::Rope: {
    op.kind = ResolvedOp::Kind::Rope;
    if (Status s = buffer(0, true, T, op.in[0]); !s)
      return s;
    if (Status s = buffer(0, false, T, op.out); !s)
      return s;
    if (op_->inputs()->Get(0) != op_->outputs()->Get(0))
      return fail("rope works in place: its output must be its input");
    const auto *params = op_->params_as_RopeParamsDef();
    if (!params)
      return fail("missing rope parameters");
    op.heads = params->heads();
    op.headDim = params->head_dim();
    if (op.headDim == 0 || op.headDim % 2 != 0 || op.heads * op.headDim != op.in[0].cols)
      return fail("heads " + str(op.heads) + " x head_dim " + str(op.headDim) +
                  " does not match width " + str(op.in[0].cols) + " (head_dim must be even)");
    if (Status s = weight(0, WeightLayoutDef::RowMajor, 1, op.weight, shape); !s)
      return s;
    if (shape->Get(0) != op.headDim / 2)
      return fail("inv_freq has " + str(shape->Get(0)) +
                  " entries, expected head_dim/2 = " + str(op.headDim / 2));
    break;
  }
  case OpKindDef::Attention: {
    const auto *params = op_->params_as_AttentionParamsDef();
    if (!params)
      return fail("missing attention parameters");
    const plan::KvCacheDef *kv = def_.kv_cache();
    kernels::AttentionShape shape{params->layer(), params->heads(), params->kv_heads(),
                                  params->head_dim(), params->scale()};
    if (shape.kvHeads == 0 || shape.heads % shape.kvHeads != 0 || shape.headDim == 0)
      return fail(str(shape.heads) + " query heads cannot share " + str(shape.kvHeads) +
                  " KV heads");
    if (shape.layer >= kv->layers() || shape.kvHeads != kv->kv_heads() ||
        shape.headDim != kv->head_dim())
      return fail("layer, KV heads or head_dim do not match the KV cache");
    ResolvedOp append;
    append.kind = ResolvedOp::Kind::KvAppend;
    append.planOp = index;
    append.taskGrain = op.taskGrain;
    append.taskCount = op.taskCount;
    append.attention = shape;
    op.kind = ResolvedOp::Kind::Attention;
    op.attention = shape;
    for (size_t i = 0; i < 3; ++i)
      if (Status s = buffer(i, true, T, op.in[i]); !s)
        return s;
    if (Status s = buffer(0, false, T, op.out); !s)
      return s;
    if (op.in[0].cols != shape.heads * shape.headDim || op.out.cols != op.in[0].cols ||
        op.in[1].cols != shape.kvHeads * shape.headDim || op.in[2].cols != op.in[1].cols)
      return fail("q, k, v or output width does not match the heads");
    if (overlaps(op_->inputs()->Get(0), op_->outputs()->Get(0)))
      return fail("output overlaps q");
    append.in[0] = op.in[1];
    append.in[1] = op.in[2];
    if (params->rope()) {
      // The append rotates q and k in place first (the fused ropes), so K enters the cache
      // rotated and the attention units read rotated q.
      if (shape.headDim % 2 != 0)
        return fail("rotates heads of odd head_dim " + str(shape.headDim));
      const flatbuffers::Vector<uint64_t> *freqShape = nullptr;
      if (Status s = weight(0, WeightLayoutDef::RowMajor, 1, append.weight, freqShape); !s)
        return s;
      if (freqShape->Get(0) != shape.headDim / 2)
        return fail("inv_freq has " + str(freqShape->Get(0)) +
                    " entries, expected head_dim/2 = " + str(shape.headDim / 2));
      append.in[2] = op.in[0];
      append.headDim = shape.headDim;
    }
    ops.push_back(append);
    ops.push_back(op);
    // The merge phase of rows split across threads: same operands, after the barrier.
    op.kind = ResolvedOp::Kind::AttentionMerge;
    break;
  }
  case OpKindDef::SwiGlu:
  case OpKindDef::Add: {
    op.kind = op_->kind() == OpKindDef::Add ? ResolvedOp::Kind::Add : ResolvedOp::Kind::SwiGlu;
    for (size_t i = 0; i < 2; ++i)
      if (Status s = buffer(i, true, T, op.in[i]); !s)
        return s;
    if (Status s = buffer(0, false, T, op.out); !s)
      return s;
    if (op.in[0].cols != op.out.cols || op.in[1].cols != op.out.cols)
      return fail("input and output widths differ");
    break;
  }
  default:
    return fail("unknown op kind " + str(static_cast<unsigned>(op_->kind())));
  }
  ops.push_back(op);
  forgetConvertedRowsWrittenBy(*op_);
  return Status();
}

} // namespace

Engine::Engine(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {}

Engine::~Engine() {
  pool_.reset(); // joins the workers before the memory they touch goes away
  if (activations_)
    munmap(activations_, activationMapBytes_);
  std::free(bf16Rows_);
  std::free(attentionStates_);
  std::free(attentionWork_);
  std::free(argmaxWindows_);
  if (kvArena_)
    munmap(kvArena_, kvBytes_);
}

Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<const Plan> plan,
                                               const EngineOptions &options) {
  if (!plan)
    return Status::error("no plan given to the engine");
  std::unique_ptr<Engine> engine(new Engine(std::move(plan)));
  engine->vector_ = options.portableKernels
                        ? &kernels::portableVectorKernels()
                        : &kernels::vectorKernelsFor(codegen::hostCpuFeatures());
  if (Status s = engine->resolve(); !s)
    return s;
  engine->policyTables_ = PolicyTables::fromPlan(*engine->plan_);
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::create(options.threads, options.pin);
  if (!pool)
    return pool.status();
  engine->pool_ = std::move(pool.value());
  if (Status s = engine->allocateAttentionStates(); !s)
    return s;
  if (Status s = engine->allocateArgmax(); !s)
    return s;
  if (options.profile) {
    engine->profile_ =
        std::make_unique<PhaseProfile>(engine->ops_.size(), engine->pool_->threadCount());
    engine->pool_->setProfile(engine->profile_.get());
  }
  return Result<std::unique_ptr<Engine>>(std::move(engine));
}

Status Engine::resolve() {
  const plan::PlanDef &def = plan_->def();
  if (!def.bounds() || !def.model() || !def.kv_cache() || !def.buffers() || !def.tensors())
    return Status::error("the plan lacks its bounds, model, KV cache, buffers or tensors");
  const plan::BoundsDef *bounds = def.bounds();
  maxBatch_ = bounds->max_batch();
  maxSeq_ = bounds->max_seq();
  maxStepTokens_ = bounds->max_step_tokens();
  vocab_ = def.model()->vocab();
  if (maxBatch_ == 0 || maxSeq_ == 0 || maxStepTokens_ == 0)
    return Status::error("the plan's bounds must all be positive (max_batch " + str(maxBatch_) +
                         ", max_seq " + str(maxSeq_) + ", max_step_tokens " + str(maxStepTokens_) +
                         ")");
  // Positions are kept as 32-bit integers in the step arrays.
  if (maxSeq_ > UINT32_MAX)
    return Status::error("the plan's --max-seq " + str(maxSeq_) + " exceeds " + str(UINT32_MAX));

  // The plan's tiers on this host's nodes: the threads run on the CPUs this process may use.
  memoryBinding_.topology = readNumaTopology(allowedCpus());
  memoryBinding_.planTarget = def.target() ? def.target()->str() : "";
  auto placeArena = [this](const char *what, plan::TierDef tier) -> ArenaBinding & {
    ArenaBinding arena;
    arena.what = what;
    arena.tier = tier;
    arena.target = nodesForTier(memoryBinding_.topology, tier);
    memoryBinding_.arenas.push_back(std::move(arena));
    return memoryBinding_.arenas.back();
  };

  // Activation arena: an anonymous mapping (page aligned, so kActivationAlignment holds), bound
  // and then zeroed, which places its pages and leaves nothing indeterminate to read.
  activationBytes_ = def.activation_arena_size();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  activationMapBytes_ = std::max(page, ceilDiv(activationBytes_, page) * page);
  void *activationMapping = mmap(nullptr, activationMapBytes_, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (activationMapping == MAP_FAILED)
    return Status::error("cannot allocate the activation arena of " + str(activationBytes_) +
                         " bytes: " + std::strerror(errno));
  activations_ = static_cast<float *>(activationMapping);
  bindArena(activations_, activationMapBytes_, memoryBinding_.topology,
            placeArena("activations", def.activation_tier()));
  std::memset(activations_, 0, activationMapBytes_);

  // KV arena: address space only; a page costs memory once a position on it is written.
  const plan::KvCacheDef *kv = def.kv_cache();
  if (kv->dtype() != DTypeDef::F32 && kv->dtype() != DTypeDef::BF16 &&
      kv->dtype() != DTypeDef::INT8)
    return Status::error(std::string("the KV cache is ") + plan::EnumNameDTypeDef(kv->dtype()) +
                         "; this runtime's kernels read F32, BF16 or INT8 KV elements");
  if (kv->slots() < maxBatch_ || kv->max_seq() < maxSeq_)
    return Status::error("the KV cache holds " + str(kv->slots()) + " slots of " +
                         str(kv->max_seq()) + " positions, fewer than the plan's bounds");
  // Plan::load verified that the layout fits the arena, with aligned offsets.
  kvBytes_ = kv->arena_size();
  if (kvBytes_ > 0) {
    void *mapping = mmap(nullptr, kvBytes_, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mapping == MAP_FAILED)
      return Status::error("cannot reserve " + str(kvBytes_) +
                           " bytes of address space for the "
                           "KV cache: " +
                           std::strerror(errno));
    kvArena_ = mapping;
    // Before any position is written: the pages land where the binding says.
    bindArena(kvArena_, kvBytes_, memoryBinding_.topology, placeArena("KV cache", kv->tier()));
    auto *base = static_cast<uint8_t *>(kvArena_);
    kvCache_.keys = base + kv->k_offset();
    kvCache_.values = base + kv->v_offset();
    kvCache_.element = kv->dtype() == plan::DTypeDef::BF16   ? kernels::KvElement::Bf16
                       : kv->dtype() == plan::DTypeDef::INT8 ? kernels::KvElement::Int8
                                                             : kernels::KvElement::F32;
    kvCache_.layerStride = kv->layer_stride();
    kvCache_.slotStride = kv->slot_stride();
    kvCache_.headStride = kv->head_stride();
    kvCache_.posStride = kv->pos_stride();
    if (kvHasRowScales(kv->dtype())) {
      kvCache_.keyScales = reinterpret_cast<float *>(base + kv->k_scale_offset());
      kvCache_.valueScales = reinterpret_cast<float *>(base + kv->v_scale_offset());
      kvCache_.scaleLayerStride = kv->scale_layer_stride();
      kvCache_.scaleSlotStride = kv->scale_slot_stride();
      kvCache_.scaleHeadStride = kv->scale_head_stride();
    }
  }

  // The weights are the plan file's shared mapping: mbind does not place page-cache pages, so
  // their tiers are mapped and said, not bound.
  for (plan::TierDef tier : weightTiers(*plan_))
    placeArena("weights", tier).outcome = "not bound: pages of the plan file";

  // Step metadata, sized by the bounds once.
  rowTokens_.reset(new int32_t[maxStepTokens_]());
  rowPositions_.reset(new uint32_t[maxStepTokens_]());
  rowSlots_.reset(new uint32_t[maxStepTokens_]());
  logitsSourceRows_.reset(new uint32_t[maxBatch_]());
  logitsOutputRows_.reset(new uint32_t[maxBatch_]());
  slotCachedPositions_.reset(new uint64_t[maxBatch_]());
  slotSeenInStep_.reset(new uint64_t[maxBatch_]());

  // Ops.
  const auto *planOps = def.ops();
  if (!planOps || planOps->size() == 0)
    return Status::error("the plan has no ops");
  OpResolver resolver(*plan_, activations_, maxStepTokens_, maxBatch_, linearKernels_);
  ops_.reserve(planOps->size() * 3);
  size_t lmHeads = 0;
  for (uint32_t i = 0; i < planOps->size(); ++i) {
    if (Status s = resolver.resolve(i, ops_); !s)
      return s;
    if (ops_.back().kind == ResolvedOp::Kind::LmHead) {
      ++lmHeads;
      if (planOps->Get(i)->outputs()->Get(0) != def.logits_buffer())
        return Status::error("the LmHead op does not write the plan's logits buffer");
      logitsData_ = ops_.back().out.data;
      logitsStride_ = ops_.back().out.stride;
    }
  }
  if (lmHeads != 1)
    return Status::error("the plan has " + str(lmHeads) + " LmHead ops; the engine needs one");

  // The bf16 rows the linear kernels read: allocated once, shared by every conversion.
  if (resolver.bf16RowsBytes() > 0) {
    const size_t bytes =
        ceilDiv(resolver.bf16RowsBytes(), kActivationAlignment) * kActivationAlignment;
    bf16Rows_ = static_cast<uint32_t *>(std::aligned_alloc(kActivationAlignment, bytes));
    if (!bf16Rows_)
      return Status::error("cannot allocate " + str(bytes) + " bytes of bf16 activation rows");
    std::memset(bf16Rows_, 0, bytes);
    for (ResolvedOp &op : ops_)
      if (op.kind == ResolvedOp::Kind::ConvertRowsBf16 ||
          (op.linear && op.linear->info().readsBf16Rows))
        op.bf16Rows = bf16Rows_;
  }

  // The row-wise and attention ops run the set picked at create().
  for (ResolvedOp &op : ops_) {
    using Kind = ResolvedOp::Kind;
    if (op.kind == Kind::RmsNorm || op.kind == Kind::Rope || op.kind == Kind::Attention ||
        op.kind == Kind::AttentionMerge || op.kind == Kind::SwiGlu || op.kind == Kind::Add ||
        (op.kind == Kind::Embedding && !op.weightBf16))
      op.kernel = vector_->name;
    if (op.kind == Kind::Attention && kvCache_.element == kernels::KvElement::Bf16)
      op.kernel = vector_->bf16KvName;
    if (op.kind == Kind::Attention && kvCache_.element == kernels::KvElement::Int8)
      op.kernel = vector_->int8KvName;
    if (op.kind == Kind::KvAppend && kvCache_.element == kernels::KvElement::Bf16)
      op.kernel = "portable, to bf16";
    if (op.kind == Kind::KvAppend && kvCache_.element == kernels::KvElement::Int8)
      op.kernel = "portable, to int8 blocks with row scales";
  }
  return Status();
}

// The scratch of the attention's two phases, sized from the bounds. Only rows split across
// threads keep chunk states (one thread runs every row whole), and at most one row per sequence
// is split in a step of max_batch sequences' decode tokens; rows beyond the capacity run whole,
// with the same result.
Status Engine::allocateAttentionStates() {
  const plan::KvCacheDef *kv = plan_->def().kv_cache();
  attentionStateFloats_ = 0;
  for (const ResolvedOp &op : ops_)
    if (op.kind == ResolvedOp::Kind::Attention)
      attentionStateFloats_ =
          std::max(attentionStateFloats_,
                   kernels::attentionStateFloats(op.attention.heads / op.attention.kvHeads,
                                                 op.attention.headDim));
  const size_t kvHeads = std::max<size_t>(kv->kv_heads(), 1);
  const size_t splitRows =
      pool_->threadCount() > 1 ? std::min<size_t>(maxStepTokens_, maxBatch_) : 0;
  const unsigned __int128 capacity = static_cast<unsigned __int128>(splitRows) * kvHeads *
                                     ceilDiv(maxSeq_, kernels::kAttentionChunkPositions);
  const unsigned __int128 stateBytes = capacity * attentionStateFloats_ * sizeof(float);
  if (stateBytes > (static_cast<unsigned __int128>(1) << 40))
    return Status::error("the attention chunk states for --max-batch " + str(maxBatch_) +
                         " and --max-seq " + str(maxSeq_) + " would take more than 1 TiB");
  attentionSplit_.reserve(maxStepTokens_, kvHeads, kernels::kAttentionChunkPositions,
                          attentionStateFloats_ > 0 ? static_cast<size_t>(capacity) : 0);
  if (attentionStateFloats_ == 0)
    return Status();
  auto allocate = [](size_t bytes) {
    return static_cast<float *>(std::aligned_alloc(
        kActivationAlignment,
        std::max<size_t>(ceilDiv(bytes, kActivationAlignment), 1) * kActivationAlignment));
  };
  // Never zeroed: every state is written by its chunk before the merge reads it.
  if (capacity > 0 && !(attentionStates_ = allocate(static_cast<size_t>(stateBytes))))
    return Status::error("cannot allocate " + str(static_cast<uint64_t>(stateBytes)) +
                         " bytes of attention chunk states");
  const size_t workBytes = pool_->threadCount() * 2 * attentionStateFloats_ * sizeof(float);
  if (!(attentionWork_ = allocate(workBytes)))
    return Status::error("cannot allocate " + str(workBytes) + " bytes of attention states");
  return Status();
}

Status Engine::allocateArgmax() {
  const ResolvedOp *lmHead = nullptr;
  for (const ResolvedOp &op : ops_)
    if (op.kind == ResolvedOp::Kind::LmHead)
      lmHead = &op;
  identityRows_.reset(new uint32_t[maxBatch_]);
  for (uint32_t i = 0; i < maxBatch_; ++i)
    identityRows_[i] = i;
  stepArgmax_.reset(new int32_t[maxBatch_]);
  std::fill(stepArgmax_.get(), stepArgmax_.get() + maxBatch_, -1);
  lmHeadTasks_ = lmHead->taskCount;
  taskBestValues_.reset(new float[lmHead->taskCount * maxBatch_]());
  taskBestIndices_.reset(new uint32_t[lmHead->taskCount * maxBatch_]());
  argmaxWindowFloats_ = ceilDiv(maxBatch_ * lmHead->taskGrain, 16) * 16;
  const size_t bytes = pool_->threadCount() * argmaxWindowFloats_ * sizeof(float);
  argmaxWindows_ = static_cast<float *>(std::aligned_alloc(
      kActivationAlignment, ceilDiv(bytes, kActivationAlignment) * kActivationAlignment));
  if (!argmaxWindows_)
    return Status::error("cannot allocate " + str(bytes) + " bytes of lm_head argmax windows");
  return Status();
}

Status Engine::step(const StepSequence *sequences, size_t count, StepOutput output) {
  // Validation first: a failing step changes nothing the next step reads.
  if (count == 0 || !sequences)
    return Status::error("a step needs at least one sequence");
  if (count > maxBatch_)
    return Status::error("the step has " + str(count) +
                         " sequences but the plan's --max-batch is " + str(maxBatch_));
  ++stepNumber_;
  size_t totalTokens = 0;
  for (size_t i = 0; i < count; ++i) {
    const StepSequence &seq = sequences[i];
    if (seq.slot >= maxBatch_)
      return Status::error("sequence " + str(i) + " uses slot " + str(seq.slot) +
                           " but the plan's --max-batch is " + str(maxBatch_) + " (slots 0.." +
                           str(maxBatch_ - 1) + ")");
    if (slotSeenInStep_[seq.slot] == stepNumber_)
      return Status::error("slot " + str(seq.slot) + " appears more than once in the step");
    slotSeenInStep_[seq.slot] = stepNumber_;
    if (seq.count == 0 || !seq.tokens)
      return Status::error("sequence " + str(i) + " has no tokens");
    if (seq.start > maxSeq_ || seq.count > maxSeq_ - seq.start)
      return Status::error("sequence " + str(i) + " needs positions up to " +
                           str(seq.start + seq.count) + " but the plan's --max-seq is " +
                           str(maxSeq_));
    if (seq.start > slotCachedPositions_[seq.slot])
      return Status::error("sequence " + str(i) + " starts at position " + str(seq.start) +
                           " but slot " + str(seq.slot) + " holds only " +
                           str(slotCachedPositions_[seq.slot]) + " cached positions");
    for (uint32_t j = 0; j < seq.count; ++j)
      if (seq.tokens[j] < 0 || static_cast<uint32_t>(seq.tokens[j]) >= vocab_)
        return Status::error("sequence " + str(i) + " token " + str(j) + " is id " +
                             std::to_string(seq.tokens[j]) + " but the vocabulary has " +
                             str(vocab_) + " ids (0.." + str(vocab_ - 1) + ")");
    totalTokens += seq.count;
  }
  if (totalTokens > maxStepTokens_)
    return Status::error("the step has " + str(totalTokens) +
                         " tokens but the plan's --max-step-tokens is " + str(maxStepTokens_));

  // Pack the sequences into rows 0..T-1.
  size_t row = 0;
  logitsCount_ = 0;
  for (size_t i = 0; i < count; ++i) {
    const StepSequence &seq = sequences[i];
    for (uint32_t j = 0; j < seq.count; ++j, ++row) {
      const uint32_t position = static_cast<uint32_t>(seq.start + j);
      rowTokens_[row] = seq.tokens[j];
      rowPositions_[row] = position;
      rowSlots_[row] = seq.slot;
    }
    if (seq.wantLogits) {
      logitsSourceRows_[logitsCount_] = static_cast<uint32_t>(row - 1);
      logitsOutputRows_[logitsCount_] = static_cast<uint32_t>(i);
      ++logitsCount_;
    }
  }
  stepTokens_ = totalTokens;
  attentionSplit_.cut(rowPositions_.get(), stepTokens_, pool_->threadCount() > 1);
  stepOutput_ = output;
  std::fill(stepArgmax_.get(), stepArgmax_.get() + maxBatch_, -1);

  pool_->run(ops_.size(), &Engine::runPhase, this);
  if (output == StepOutput::Argmax)
    mergeArgmax();

  for (size_t i = 0; i < count; ++i)
    slotCachedPositions_[sequences[i].slot] = sequences[i].start + sequences[i].count;
  return Status();
}

const float *Engine::logits(size_t sequenceIndexInStep) const {
  if (sequenceIndexInStep >= maxBatch_)
    return nullptr;
  return logitsData_ + sequenceIndexInStep * logitsStride_;
}

void Engine::runPhase(void *engine, size_t phase, unsigned thread, unsigned threadCount) {
  const Engine &self = *static_cast<const Engine *>(engine);
  self.runOp(self.ops_[phase], thread, threadCount);
}

int32_t Engine::argmax(size_t sequenceIndexInStep) const {
  return sequenceIndexInStep < maxBatch_ ? stepArgmax_[sequenceIndexInStep] : -1;
}

// The LmHead tasks [firstTask, lastTask) of this thread in an argmax step: each task's logits
// go to the thread's window, which stays in cache, and leave their first maximum per row.
void Engine::runLmHeadArgmax(const ResolvedOp &op, unsigned thread, size_t firstTask,
                             size_t lastTask) const {
  float *window = argmaxWindows_ + thread * argmaxWindowFloats_;
  const size_t grain = op.taskGrain;
  for (size_t task = firstTask; task < lastTask; ++task) {
    const size_t begin = task * grain;
    const size_t end = std::min(op.weightRows, begin + grain);
    if (begin >= end)
      break;
    // The kernels write column n of output row r at y + r * yStride + n: y shifted back by the
    // task's first column puts the task's columns at the start of each window row.
    float *y =
        reinterpret_cast<float *>(reinterpret_cast<uintptr_t>(window) - begin * sizeof(float));
    if (op.linear) {
      codegen::LinearCall call;
      call.x = op.in[0].data;
      call.xStride = op.in[0].stride;
      call.xRows = logitsSourceRows_.get();
      call.xBf16 = op.bf16Rows;
      call.rows = logitsCount_;
      call.w = op.weightBf16;
      call.y = y;
      call.yStride = grain;
      call.yRows = identityRows_.get();
      call.colBegin = begin;
      call.colEnd = end;
      op.linear->run(call);
    } else {
      kernels::lmHead(op.in[0].data, op.in[0].stride, logitsSourceRows_.get(), identityRows_.get(),
                      logitsCount_, op.weight, op.in[0].cols, y, grain, begin, end);
    }
    for (size_t i = 0; i < logitsCount_; ++i) {
      const float *values = window + i * grain;
      const size_t best = argmaxFirst(values, end - begin);
      taskBestValues_[task * maxBatch_ + i] = values[best];
      taskBestIndices_[task * maxBatch_ + i] = static_cast<uint32_t>(begin + best);
    }
  }
}

// Tasks in column order, a later task winning only when strictly greater: the first maximum of
// the whole row, as argmaxFirst over the logits would find it.
void Engine::mergeArgmax() {
  for (size_t i = 0; i < logitsCount_; ++i) {
    float best = taskBestValues_[i];
    uint32_t index = taskBestIndices_[i];
    for (size_t task = 1; task < lmHeadTasks_; ++task)
      if (taskBestValues_[task * maxBatch_ + i] > best) {
        best = taskBestValues_[task * maxBatch_ + i];
        index = taskBestIndices_[task * maxBatch_ + i];
      }
    stepArgmax_[logitsOutputRows_[i]] = static_cast<int32_t>(index);
  }
}

// A fused SwiGlu on columns [begin, end) of a Linear's output, right after the task wrote them:
// the swiglu kernel the SwiGlu op would run, on the same values, so the bits are the same.
void Engine::applySwiGlu(const ResolvedOp &op, size_t rows, size_t begin, size_t end) const {
  if (op.swiGlu == ResolvedOp::SwiGluRole::None)
    return;
  float *y = op.out.data + begin;
  const float *other = op.in[1].data + begin;
  if (op.swiGlu == ResolvedOp::SwiGluRole::Gate)
    vector_->swiGlu(y, op.out.stride, other, op.in[1].stride, end - begin, y, op.out.stride, 0,
                    rows);
  else
    vector_->swiGlu(other, op.in[1].stride, y, op.out.stride, end - begin, y, op.out.stride, 0,
                    rows);
}

void Engine::runOp(const ResolvedOp &op, unsigned thread, unsigned threadCount) const {
  using Kind = ResolvedOp::Kind;
  const size_t T = stepTokens_;
  size_t begin = 0, end = 0;

  if (op.kind == Kind::Linear || op.kind == Kind::LmHead) {
    if (op.kind == Kind::LmHead && logitsCount_ == 0)
      return;
    size_t firstTask, lastTask;
    shareOf(op.taskCount, thread, threadCount, firstTask, lastTask);
    if (op.kind == Kind::LmHead && stepOutput_ == StepOutput::Argmax) {
      runLmHeadArgmax(op, thread, firstTask, lastTask);
      return;
    }
    begin = firstTask * op.taskGrain;
    end = std::min(op.weightRows, lastTask * op.taskGrain);
    if (begin >= end)
      return;
    if (op.linear) {
      if (op.kind == Kind::Linear) {
        runLinearBf16(op, T, nullptr, op.out.data, op.out.stride, nullptr, 0, begin, end);
        applySwiGlu(op, T, begin, end);
      } else {
        runLinearBf16(op, logitsCount_, logitsSourceRows_.get(), op.out.data, op.out.stride,
                      logitsOutputRows_.get(), 0, begin, end);
      }
      return;
    }
    if (op.kind == Kind::Linear) {
      kernels::linear(op.in[0].data, op.in[0].stride, T, op.weight, op.in[0].cols, op.out.data,
                      op.out.stride, begin, end);
      // A fused residual: the same float32 sum the Add op would compute, on this task's columns.
      if (op.in[1].data && op.swiGlu == ResolvedOp::SwiGluRole::None)
        vector_->add(op.out.data + begin, op.out.stride, op.in[1].data + begin, op.in[1].stride,
                     end - begin, op.out.data + begin, op.out.stride, 0, T);
      applySwiGlu(op, T, begin, end);
    } else
      kernels::lmHead(op.in[0].data, op.in[0].stride, logitsSourceRows_.get(),
                      logitsOutputRows_.get(), logitsCount_, op.weight, op.in[0].cols, op.out.data,
                      op.out.stride, begin, end);
    return;
  }
  if (op.kind == Kind::Attention || op.kind == Kind::AttentionMerge) {
    kernels::AttentionOperands operands;
    operands.q = op.in[0].data;
    operands.qStride = op.in[0].stride;
    operands.out = op.out.data;
    operands.outStride = op.out.stride;
    operands.cache = kvCache_;
    operands.shape = op.attention;
    operands.rowSlots = rowSlots_.get();
    if (op.kind == Kind::Attention) {
      kernels::attentionClaimedUnits(vector_->attentionChunk, attentionSplit_, operands,
                                     attentionUnitsClaimed_, threadCount, attentionStates_,
                                     attentionWork_ + thread * 2 * attentionStateFloats_);
    } else {
      shareOf(attentionSplit_.mergeItemCount(), thread, threadCount, begin, end);
      if (begin < end)
        kernels::attentionMergeItems(vector_->attentionChunk, attentionSplit_, operands, begin, end,
                                     attentionStates_);
    }
    return;
  }

  if (op.kind == Kind::ConvertRowsBf16) {
    const size_t rows = op.lastRowsOnly ? logitsCount_ : T;
    shareOf(rows, thread, threadCount, begin, end);
    if (begin < end)
      codegen::convertRowsForLinear(op.linear->info(), rows, op.in[0].data, op.in[0].stride,
                                    op.lastRowsOnly ? logitsSourceRows_.get() : nullptr,
                                    op.in[0].cols, op.bf16Rows, begin, end);
    return;
  }

  if (op.kind == Kind::KvAppend) {
    // The attention phase after this append claims its units from the first (the barrier
    // between the phases publishes the reset).
    if (thread == 0)
      attentionUnitsClaimed_.store(0, std::memory_order_relaxed);
    // Shares of the rows; a step of fewer rows than threads (decode of a few sequences) gives
    // each thread a share of every row's heads instead.
    size_t rowBegin = 0, rowEnd = T, headBegin = 0, headEnd = op.attention.kvHeads;
    size_t queryBegin = 0, queryEnd = op.attention.heads;
    if (T >= threadCount) {
      shareOf(T, thread, threadCount, rowBegin, rowEnd);
    } else {
      shareOf(op.attention.kvHeads, thread, threadCount, headBegin, headEnd);
      shareOf(op.attention.heads, thread, threadCount, queryBegin, queryEnd);
    }
    if (rowBegin >= rowEnd)
      return;
    // The fused ropes: the same kernel on the same rows and heads as the Rope ops would run.
    if (op.weight) {
      vector_->rope(op.in[2].data + queryBegin * op.headDim, op.in[2].stride, queryEnd - queryBegin,
                    op.headDim, op.weight, rowPositions_.get(), rowBegin, rowEnd);
      vector_->rope(op.in[0].data + headBegin * op.headDim, op.in[0].stride, headEnd - headBegin,
                    op.headDim, op.weight, rowPositions_.get(), rowBegin, rowEnd);
    }
    kernels::kvAppend(op.in[0].data, op.in[0].stride, op.in[1].data, op.in[1].stride, kvCache_,
                      op.attention, rowSlots_.get(), rowPositions_.get(), rowBegin, rowEnd,
                      headBegin, headEnd);
    return;
  }

  // Row-wise ops: the step's rows in tasks of taskGrain rows.
  size_t firstTask, lastTask;
  shareOf(ceilDiv(T, op.taskGrain), thread, threadCount, firstTask, lastTask);
  begin = firstTask * op.taskGrain;
  end = std::min(T, lastTask * op.taskGrain);
  if (begin >= end)
    return;
  switch (op.kind) {
  case Kind::Embedding:
    if (op.weightBf16) {
      for (size_t t = begin; t < end; ++t)
        codegen::unpackLinearBf16Row(op.weightBf16, op.weightRows, op.out.cols, rowTokens_[t],
                                     op.out.data + t * op.out.stride);
      break;
    }
    vector_->embedding(rowTokens_.get(), op.weight, op.out.cols, op.out.data, op.out.stride, begin,
                       end);
    break;
  case Kind::RmsNorm:
    vector_->rmsNorm(op.in[0].data, op.in[0].stride, op.weight, op.out.cols, op.eps, op.out.data,
                     op.out.stride, begin, end);
    break;
  case Kind::Rope:
    vector_->rope(op.in[0].data, op.in[0].stride, op.heads, op.headDim, op.weight,
                  rowPositions_.get(), begin, end);
    break;
  case Kind::SwiGlu:
    vector_->swiGlu(op.in[0].data, op.in[0].stride, op.in[1].data, op.in[1].stride, op.out.cols,
                    op.out.data, op.out.stride, begin, end);
    break;
  case Kind::Add:
    vector_->add(op.in[0].data, op.in[0].stride, op.in[1].data, op.in[1].stride, op.out.cols,
                 op.out.data, op.out.stride, begin, end);
    break;
  default:
    break;
  }
}

} // namespace hetc
