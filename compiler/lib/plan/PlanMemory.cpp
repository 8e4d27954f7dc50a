// Plans memory for the bounds, dimension-first (eLLM 5.1): every activation is a [rows, cols]
// matrix whose row stride depends only on the bounds, so any batch and mix of positions up to the
// bounds runs in place. Activations live in one arena and are reused by liveness over the whole
// function, so every decoder layer runs in the same few buffers; the KV cache gets its own arena
// with one contiguous stream of positions per (layer, slot, KV head).
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanAttributes.h"
#include "runtime/format/Plan.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <map>
#include <set>
#include <string>

namespace hetc {
#define GEN_PASS_DEF_PLANMEMORY
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;
using namespace hetc::planning;

namespace {

// Values that must share one buffer (an in-place op's input and result), with their lifetime in
// op indices.
struct Storage {
  plan::BufferRoleDef role;
  int64_t cols;
  size_t first; // index of the op that writes it first
  size_t last;  // index of the op that reads it last
  int64_t buffer = -1;
};

plan::BufferRoleDef roleOf(Operation *producer) {
  if (isa<LmHeadOp>(producer))
    return plan::BufferRoleDef::Logits;
  if (isa<EmbeddingOp, AddOp>(producer))
    return plan::BufferRoleDef::Hidden;
  return plan::BufferRoleDef::Scratch;
}

struct PlanMemoryPass : public hetc::impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;
  void runOnOperation() override;
  LogicalResult checkBounds(ModuleOp module, func::FuncOp func);
  LogicalResult planActivations(ModuleOp module, func::FuncOp func);
  LogicalResult planKvCache(ModuleOp module);
};

LogicalResult PlanMemoryPass::checkBounds(ModuleOp module, func::FuncOp func) {
  // Plain copies: pass options do not stream into diagnostics as numbers.
  uint64_t maxBatch = this->maxBatch, maxSeq = this->maxSeq, maxStepTokens = this->maxStepTokens;
  if (maxBatch == 0)
    return module.emitError("max-batch must be at least 1 (sequence slots of the plan)");
  if (maxSeq == 0)
    return module.emitError("max-seq must be at least 1 (positions per sequence)");
  if (maxStepTokens == 0)
    return module.emitError("max-step-tokens must be at least 1 (tokens per step)");
  if (maxSeq > static_cast<uint64_t>(INT64_MAX))
    return module.emitError() << "max-seq = " << maxSeq << " does not fit in 63 bits";
  // The runtime adds position row p + offset for every position p < max-seq.
  if (std::optional<LearnedPositions> positions = learnedPositions(func);
      positions && maxSeq > static_cast<uint64_t>(positions->tokens))
    return module.emitError() << "model has learned positions for " << positions->tokens
                              << " tokens (offset " << positions->offset << "); --max-seq "
                              << maxSeq << " exceeds them";
  if (maxStepTokens < maxBatch)
    return module.emitError() << "max-step-tokens = " << maxStepTokens
                              << " is smaller than max-batch = " << maxBatch
                              << "; a decode step of every slot needs one token per sequence";
  Builder b(module.getContext());
  BoundsAttrs bounds{static_cast<int64_t>(maxBatch), static_cast<int64_t>(maxSeq),
                     static_cast<int64_t>(maxStepTokens)};
  module->setAttr(kBounds, bounds.toAttr(b));
  return success();
}

LogicalResult PlanMemoryPass::planActivations(ModuleOp module, func::FuncOp func) {
  SmallVector<Operation *> ops = collectLlmOps(func);
  llvm::DenseMap<Operation *, size_t> position;
  for (auto [index, op] : llvm::enumerate(ops))
    position[op] = index;

  // Group values into storages and check each op reads activations exactly where the plan's op
  // expects them.
  std::vector<Storage> storages;
  llvm::DenseMap<Value, size_t> storageOf;
  for (auto [index, op] : llvm::enumerate(ops)) {
    SmallVector<unsigned> reads = cast<LlmOp>(op).getActivationOperandPositions();
    for (OpOperand &operand : op->getOpOperands()) {
      bool expected = llvm::is_contained(reads, operand.getOperandNumber());
      bool activation = isActivation(operand.get());
      if (expected && !activation)
        return op->emitOpError() << "operand #" << operand.getOperandNumber()
                                 << " must be an activation computed by an LLM op";
      if (!expected && activation)
        return op->emitOpError() << "operand #" << operand.getOperandNumber()
                                 << " must be a weight, a constant or a step input, not an "
                                    "activation";
    }
    for (OpResult result : op->getResults()) {
      if (!isActivation(result))
        continue;
      auto type = dyn_cast<RankedTensorType>(result.getType());
      std::optional<int64_t> cols = featureSize(result.getType());
      if (!type || !cols || !type.getElementType().isF32())
        return op->emitOpError() << "result #" << result.getResultNumber()
                                 << " must be a float32 tensor with a static feature size to get "
                                    "a buffer, got "
                                 << result.getType();
      if (auto rope = dyn_cast<RopeOp>(op)) {
        // The plan's Rope rotates its input in place, so nothing else may read the input.
        if (!rope.getX().hasOneUse())
          return rope.emitOpError("rotates its input in place, so the input must have no other "
                                  "use");
        size_t shared = storageOf.lookup(rope.getX());
        storageOf[result] = shared;
        continue;
      }
      storageOf[result] = storages.size();
      storages.push_back(Storage{roleOf(op), *cols, index, index});
    }
  }
  // A storage lives until its last reader; a returned value until the end.
  for (auto [value, index] : storageOf) {
    for (Operation *user : value.getUsers()) {
      auto it = position.find(user);
      size_t at = it != position.end() ? it->second : ops.size();
      storages[index].last = std::max(storages[index].last, at);
    }
  }

  // Linear scan: an op's outputs are taken before its dying inputs are freed, so an op never
  // writes a buffer it reads (Rope excepted, by design). Free buffers are reused lowest index
  // first, only by values of the same role and width.
  std::vector<PlannedBuffer> buffers;
  std::map<std::pair<plan::BufferRoleDef, int64_t>, std::set<int64_t>> freeBuffers;
  std::map<plan::BufferRoleDef, unsigned> roleCounts;
  std::vector<std::vector<size_t>> dyingAt(ops.size() + 1);
  for (auto [index, storage] : llvm::enumerate(storages))
    dyingAt[storage.last].push_back(index);
  size_t next = 0; // storages were created in the order of their first op
  for (size_t at = 0; at < ops.size(); ++at) {
    for (; next < storages.size() && storages[next].first == at; ++next) {
      Storage &storage = storages[next];
      std::set<int64_t> &pool = freeBuffers[{storage.role, storage.cols}];
      const bool logits = storage.role == plan::BufferRoleDef::Logits;
      if (!pool.empty() && !logits) {
        storage.buffer = *pool.begin();
        pool.erase(pool.begin());
        continue;
      }
      int64_t rows = logits ? maxBatch : maxStepTokens;
      storage.buffer = static_cast<int64_t>(buffers.size());
      std::string name = bufferRoleName(storage.role).str();
      if (!logits)
        name += "." + std::to_string(roleCounts[storage.role]++);
      buffers.push_back(PlannedBuffer{name, storage.role, 0, rows, storage.cols, 0});
    }
    for (size_t index : dyingAt[at]) {
      const Storage &storage = storages[index];
      freeBuffers[{storage.role, storage.cols}].insert(storage.buffer);
    }
  }

  // Lay the buffers out in index order.
  int64_t arenaSize = 0;
  for (PlannedBuffer &buffer : buffers) {
    std::optional<int64_t> rowBytes =
        llvm::checkedMulAdd<int64_t>(buffer.cols, kElementBytes, kBufferAlignment - 1);
    std::optional<int64_t> size;
    if (rowBytes) {
      buffer.rowStride = *rowBytes / kBufferAlignment * kBufferAlignment;
      size = llvm::checkedMul<int64_t>(buffer.rowStride, buffer.rows);
    }
    std::optional<int64_t> end = size ? llvm::checkedAdd<int64_t>(arenaSize, *size) : std::nullopt;
    if (!end)
      return module.emitError() << "activation buffer '" << buffer.name << "' of " << buffer.cols
                                << " columns overflows 64 bits for "
                                << (buffer.role == plan::BufferRoleDef::Logits
                                        ? "max-batch = "
                                        : "max-step-tokens = ")
                                << buffer.rows;
    buffer.offset = arenaSize;
    arenaSize = *end;
  }

  Builder b(module.getContext());
  for (Operation *op : ops) {
    SmallVector<int64_t> in, out;
    for (unsigned operand : cast<LlmOp>(op).getActivationOperandPositions())
      in.push_back(storages[storageOf.lookup(op->getOperand(operand))].buffer);
    for (OpResult result : op->getResults())
      if (isActivation(result))
        out.push_back(storages[storageOf.lookup(result)].buffer);
    op->setAttr(kBuffersIn, b.getDenseI64ArrayAttr(in));
    op->setAttr(kBuffersOut, b.getDenseI64ArrayAttr(out));
  }
  SmallVector<Attribute> bufferAttrs;
  for (const PlannedBuffer &buffer : buffers)
    bufferAttrs.push_back(buffer.toAttr(b));
  module->setAttr(kBuffers, b.getArrayAttr(bufferAttrs));
  module->setAttr(kActivationArenaSize, b.getI64IntegerAttr(arenaSize));
  return success();
}

LogicalResult PlanMemoryPass::planKvCache(ModuleOp module) {
  FailureOr<ModelAttrs> model = ModelAttrs::read(module, "hetc-plan-memory");
  if (failed(model))
    return failure();
  std::optional<plan::DTypeDef> dtype = kvDtypeFromName(kvDtype);
  if (!dtype)
    return module.emitError() << "hetc-plan-memory: kv-dtype \"" << kvDtype
                              << "\" is not f32, bf16 or int8";
  if (kvInBlocks(*dtype) && model->headDim % 2 != 0)
    return module.emitError() << "a " << kvDtype << " KV cache pairs head dims; head_dim "
                              << model->headDim << " is odd (use --kv f32)";
  // The plan format's layout (runtime/format/Format.h: kvLayout), which the loader verifies and
  // the tests build with too.
  KvCacheAttrs kv;
  kv.dtype = *dtype;
  kv.layers = model->layers;
  kv.slots = maxBatch;
  kv.kvHeads = model->kvHeads;
  kv.maxSeq = static_cast<int64_t>(maxSeq);
  kv.headDim = model->headDim;
  const std::optional<KvLayout> layout =
      kvLayout(*dtype, static_cast<uint64_t>(kv.layers), static_cast<uint64_t>(kv.slots),
               static_cast<uint64_t>(kv.kvHeads), static_cast<uint64_t>(kv.headDim), maxSeq);
  if (!layout || layout->arenaSize > static_cast<uint64_t>(INT64_MAX))
    return module.emitError() << "the KV cache for max-seq = " << kv.maxSeq
                              << " and max-batch = " << kv.slots << " (" << kv.layers
                              << " layers x " << kv.kvHeads << " KV heads x head_dim " << kv.headDim
                              << " x " << dtypeBytes(*dtype) << " bytes"
                              << (kvHasRowScales(*dtype) ? " and a 4-byte scale per row" : "")
                              << ", K and V) overflows 64 bits";
  kv.layout = *layout;
  Builder b(module.getContext());
  module->setAttr(kKvCache, kv.toAttr(b));
  return success();
}

void PlanMemoryPass::runOnOperation() {
  ModuleOp module = getOperation();
  func::FuncOp func = findModelFunction(module);
  if (!func || failed(checkBounds(module, func)) || failed(planKvCache(module)) ||
      failed(planActivations(module, func)))
    signalPassFailure();
}

} // namespace
