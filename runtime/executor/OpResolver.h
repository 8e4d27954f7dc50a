// Turns a verified plan's ops into ResolvedOps, once, at Engine::create. The loader has checked the
// format (indices, sizes, shapes, arity); an op's entry checks only what this executor supports
// beyond it (weight layouts it has kernels for, buffers that may share bytes), picks the
// implementation and fills its argument block. Nothing here runs per step.
//
// The op table (OpResolver.cpp) has one entry per plan op kind; the entries live in
// executor/ops/ by family. Adding an op kind is one entry and one line in the table.
#pragma once

#include "runtime/executor/Op.h"
#include "runtime/format/Plan.h"
#include "runtime/format/Status.h"

#include "codegen/cpu/linear/Linear.h"
#include "codegen/cpu/vector/VectorKernels.h"

#include <memory>
#include <string>
#include <vector>

namespace hetc {

struct AttentionScratch;
struct LmHeadArgs;

class OpResolver {
public:
  struct Setup {
    const Plan *plan = nullptr;
    float *arena = nullptr; // the activation arena
    size_t maxStepTokens = 0;
    size_t maxBatch = 0;
    unsigned threads = 1;
    const kernels::VectorKernels *vector = nullptr; // the row-wise and attention set
    // The CPU features the linear and row-quantizing kernels may use (each picks the best of its
    // implementation list that these allow): the host's.
    uint64_t cpuFeatures = 0;
    const kernels::KvCacheView *kvCache = nullptr;
    const uint32_t *rowSlots = nullptr;    // the step's slot per row (StepRows::slots), fixed
    AttentionScratch *attention = nullptr; // shared by every attention op, sized after resolve
  };
  explicit OpResolver(const Setup &setup) : setup_(setup), def_(setup.plan->def()) {}

  // Appends the ResolvedOps of plan op `index` to `ops`.
  Status resolve(uint32_t index, std::vector<ResolvedOp> &ops);

  // After every op: bytes of converted rows (bf16 or int8) the conversions write (0 when no kernel
  // reads them), and where the engine's allocation of them goes.
  size_t convertedRowsBytes() const { return convertedRowsBytes_; }
  void setConvertedRows(void *rows) const;
  const LmHeadArgs *lmHead() const { return lmHead_; }
  // The argument blocks and generated kernels, handed to the engine that runs them.
  std::vector<std::unique_ptr<OpArgs>> takeArgs() { return std::move(args_); }
  std::vector<std::unique_ptr<codegen::LinearKernel>> takeLinearKernels();

  // For the entries.
  const Setup &setup() const { return setup_; }
  const plan::PlanDef &def() const { return def_; }
  const plan::OpDef &op() const { return *op_; }
  uint32_t opIndex() const { return opIndex_; }
  Status fail(const std::string &message) const;
  // Input or output `position` of the op, with room for `minRows` rows.
  Status buffer(size_t position, bool isInput, size_t minRows, Rows &rows) const;
  // Weight `position`: an f32 tensor of `dims` dimensions in `layout` (a RowMajor table may serve
  // as LinearNK, as a tied lm_head reads it).
  Status weight(size_t position, plan::WeightLayoutDef layout, size_t dims, const float *&data,
                const flatbuffers::Vector<uint64_t> *&shape) const;
  // Whether plan buffers `a` and `b` share bytes.
  bool overlaps(uint32_t a, uint32_t b) const;
  template <typename Args> Args &make() {
    args_.push_back(std::make_unique<Args>());
    return static_cast<Args &>(*args_.back());
  }
  // A ResolvedOp of the current plan op, reading and writing its buffers.
  ResolvedOp resolved(OpKind kind, OpRunFn run, const OpArgs &args, const char *kernel) const;

  // The converted rows of the linear kernels, one allocation that every conversion writes: bf16
  // rows (ConvertRowsBf16) or int8 rows with their scales (QuantizeRowsInt8). The buffer whose
  // rows the last conversion holds, in which form, while no op has written over it since (-1:
  // none); the bytes the conversions need, and the argument fields that point at the rows once
  // allocated.
  enum class ConvertedForm : uint8_t {
    Bf16,       // ConvertRowsBf16's
    Int8Offset, // int8 rows offset by 128, for int8 weights
    Int8Signed, // signed int8 rows and their sums, for int4 weights
  };
  int64_t convertedBuffer = -1;
  ConvertedForm convertedForm = ConvertedForm::Bf16;
  void needConvertedRows(size_t bytes, uint32_t **user);
  void needConvertedRows(size_t bytes, uint8_t **user);
  std::vector<std::unique_ptr<codegen::LinearKernel>> linearKernels;
  void setLmHead(const LmHeadArgs *args) { lmHead_ = args; }

private:
  void forgetConvertedRowsWrittenBy(const plan::OpDef &op);

  Setup setup_;
  const plan::PlanDef &def_;
  std::vector<std::unique_ptr<OpArgs>> args_;
  size_t convertedRowsBytes_ = 0;
  std::vector<uint32_t **> bf16RowUsers_;
  std::vector<uint8_t **> int8RowUsers_;
  const plan::OpDef *op_ = nullptr;
  uint32_t opIndex_ = 0;
  const LmHeadArgs *lmHead_ = nullptr;
};

// The entries, by family (executor/ops/).
// A plan's rope parameters as the kernels' form; rotary_dim 0 rotates the whole head.
inline kernels::RopeForm ropeForm(uint32_t headDim, uint32_t rotaryDim, bool interleaved) {
  return kernels::RopeForm{headDim, rotaryDim == 0 ? headDim : rotaryDim, interleaved};
}

// A plan's activation function as the kernels' (the loader checked it is one of the enum's).
inline kernels::ActivationFunction activationFunction(plan::ActivationFunctionDef function) {
  switch (function) {
  case plan::ActivationFunctionDef::Relu:
    return kernels::ActivationFunction::Relu;
  case plan::ActivationFunctionDef::Gelu:
    return kernels::ActivationFunction::Gelu;
  case plan::ActivationFunctionDef::GeluTanh:
    return kernels::ActivationFunction::GeluTanh;
  case plan::ActivationFunctionDef::ReluSquared:
    return kernels::ActivationFunction::ReluSquared;
  case plan::ActivationFunctionDef::Silu:
    return kernels::ActivationFunction::Silu;
  }
  return kernels::ActivationFunction::Silu;
}

// Each plan kind's resolver (Ops.def), defined in executor/ops/: a kind without one does not link.
#define HETC_PLAN_OP(Kind, ...) Status resolve##Kind(OpResolver &resolver, std::vector<ResolvedOp> &ops);
#include "runtime/format/Ops.def"

} // namespace hetc
