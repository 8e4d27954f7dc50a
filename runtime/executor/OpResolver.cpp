#include "runtime/executor/OpResolver.h"

#include "codegen/cpu/linear/Linear.h"

#include <string>

namespace hetc {
namespace {

using plan::DTypeDef;
using plan::OpKindDef;
using plan::WeightLayoutDef;

std::string str(uint64_t value) { return std::to_string(value); }

// The op table: one entry per plan op kind (Ops.def), each resolved by its resolveKind.
struct OpEntry {
  OpKindDef kind;
  Status (*resolve)(OpResolver &resolver, std::vector<ResolvedOp> &ops);
};

constexpr OpEntry kOpEntries[] = {
#define HETC_PLAN_OP(Kind, ...) {OpKindDef::Kind, resolve##Kind},
#include "runtime/format/Ops.def"
};

} // namespace

const char *opKindName(OpKind kind) {
  switch (kind) {
#define HETC_PLAN_OP(Kind, ...)                                                                    \
  case OpKind::Kind:                                                                               \
    return #Kind;
#define HETC_STEP_OP(Kind)                                                                         \
  case OpKind::Kind:                                                                               \
    return #Kind;
#include "runtime/format/Ops.def"
  }
  return "?";
}

Status OpResolver::fail(const std::string &message) const {
  return Status::error("op " + str(opIndex_) + " '" + (op_->name() ? op_->name()->str() : "") +
                       "' (" + plan::EnumNameOpKindDef(op_->kind()) + "): " + message);
}

Status OpResolver::buffer(size_t position, bool isInput, size_t minRows, Rows &rows) const {
  const auto *list = isInput ? op_->inputs() : op_->outputs();
  const char *side = isInput ? "input" : "output";
  if (!list || position >= list->size())
    return fail("missing " + std::string(side) + " " + str(position));
  const plan::BufferDef *buffer = def_.buffers()->Get(list->Get(position));
  if (buffer->rows() < minRows)
    return fail(std::string(side) + " buffer '" + (buffer->name() ? buffer->name()->str() : "") +
                "' has " + str(buffer->rows()) + " rows but a step may fill " + str(minRows));
  // The loader verified that offsets and strides are 64-byte aligned and F32 rows fit.
  rows.data = setup_.arena + buffer->offset() / sizeof(float);
  rows.stride = buffer->row_stride() / sizeof(float);
  rows.cols = buffer->cols();
  return Status();
}

Status OpResolver::weight(size_t position, WeightLayoutDef layout, size_t dims, const float *&data,
                          const flatbuffers::Vector<uint64_t> *&shape) const {
  if (!op_->weights() || position >= op_->weights()->size())
    return fail("missing weight " + str(position));
  const uint32_t index = op_->weights()->Get(position);
  const plan::TensorDef *tensor = def_.tensors()->Get(index);
  const std::string name = tensor->name() ? tensor->name()->str() : "";
  if (tensor->dtype() != DTypeDef::F32)
    return fail("weight '" + name + "' is " + plan::EnumNameDTypeDef(tensor->dtype()) +
                "; this runtime's kernels read it as f32 only");
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
  data = static_cast<const float *>(setup_.plan->tensorData(index));
  return Status();
}

bool OpResolver::overlaps(uint32_t a, uint32_t b) const {
  return buffersOverlap(*def_.buffers()->Get(a), *def_.buffers()->Get(b));
}

ResolvedOp OpResolver::resolved(OpKind kind, OpRunFn run, const OpArgs &args,
                                const char *kernel) const {
  ResolvedOp op;
  op.kind = kind;
  op.planOp = opIndex_;
  op.run = run;
  op.args = &args;
  op.kernel = kernel;
  for (uint32_t i = 0; op_->inputs() && i < op_->inputs()->size() && i < 3; ++i)
    op.reads[i] = op_->inputs()->Get(i);
  if (op_->outputs() && op_->outputs()->size() > 0)
    op.writes = op_->outputs()->Get(0);
  return op;
}

void OpResolver::needConvertedRows(size_t bytes, uint32_t **user) {
  convertedRowsBytes_ = std::max(convertedRowsBytes_, bytes);
  bf16RowUsers_.push_back(user);
}

void OpResolver::needConvertedRows(size_t bytes, uint8_t **user) {
  convertedRowsBytes_ = std::max(convertedRowsBytes_, bytes);
  int8RowUsers_.push_back(user);
}

void OpResolver::setConvertedRows(void *rows) const {
  for (uint32_t **user : bf16RowUsers_)
    *user = static_cast<uint32_t *>(rows);
  for (uint8_t **user : int8RowUsers_)
    *user = static_cast<uint8_t *>(rows);
}

std::vector<std::unique_ptr<codegen::LinearKernel>> OpResolver::takeLinearKernels() {
  return std::move(linearKernels);
}

// An op that writes over the converted buffer's bytes makes its converted rows stale.
void OpResolver::forgetConvertedRowsWrittenBy(const plan::OpDef &op) {
  if (convertedBuffer < 0 || !op.outputs())
    return;
  for (uint32_t output : *op.outputs())
    if (overlaps(output, static_cast<uint32_t>(convertedBuffer)))
      convertedBuffer = -1;
}

Status OpResolver::resolve(uint32_t index, std::vector<ResolvedOp> &ops) {
  op_ = def_.ops()->Get(index);
  opIndex_ = index;
  // The op's device is the one the plan's target would use; the CPU engine runs every op on the
  // CPU, with the kernels a host plan gets (Devices.h says so to the user); DeviceSteps runs them
  // all on a device.
  for (const OpEntry &entry : kOpEntries)
    if (entry.kind == op_->kind()) {
      if (Status s = entry.resolve(*this, ops); !s)
        return s;
      forgetConvertedRowsWrittenBy(*op_);
      return Status();
    }
  return fail("this executor has no kernel for op kind " +
              std::string(plan::EnumNameOpKindDef(op_->kind())));
}

} // namespace hetc
