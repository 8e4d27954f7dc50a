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
  StringRef role;
  int64_t cols;
  size_t first; // index of the op that writes it first
  size_t last;  // index of the op that reads it last
  int64_t buffer = -1;
};

struct Buffer {
  std::string name;
  StringRef role;
  int64_t rows;
  int64_t cols;
  int64_t rowStride = 0;
  int64_t offset = 0;
};

StringRef roleOf(Operation *producer) {
  if (isa<LmHeadOp>(producer))
    return kLogitsRole;
  if (isa<EmbeddingOp, AddOp>(producer))
    return kHiddenRole;
  return kScratchRole;
}

struct PlanMemoryPass : public hetc::impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;
  void runOnOperation() override;
  LogicalResult checkBounds(ModuleOp module);
  LogicalResult planActivations(ModuleOp module, func::FuncOp func);
  LogicalResult planKvCache(ModuleOp module);
};

LogicalResult PlanMemoryPass::checkBounds(ModuleOp module) {
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
  if (maxStepTokens < maxBatch)
    return module.emitError() << "max-step-tokens = " << maxStepTokens
                              << " is smaller than max-batch = " << maxBatch
                              << "; a decode step of every slot needs one token per sequence";
  Builder b(module.getContext());
  module->setAttr(kBounds,
                  b.getDictionaryAttr({
                      b.getNamedAttr("max_batch", b.getI64IntegerAttr(maxBatch)),
                      b.getNamedAttr("max_seq", b.getI64IntegerAttr(maxSeq)),
                      b.getNamedAttr("max_step_tokens", b.getI64IntegerAttr(maxStepTokens)),
                  }));
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
    SmallVector<unsigned> reads = activationOperandPositions(op);
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
  std::vector<Buffer> buffers;
  std::map<std::pair<StringRef, int64_t>, std::set<int64_t>> freeBuffers;
  std::map<StringRef, unsigned> roleCounts;
  std::vector<std::vector<size_t>> dyingAt(ops.size() + 1);
  for (auto [index, storage] : llvm::enumerate(storages))
    dyingAt[storage.last].push_back(index);
  size_t next = 0; // storages were created in the order of their first op
  for (size_t at = 0; at < ops.size(); ++at) {
    for (; next < storages.size() && storages[next].first == at; ++next) {
      Storage &storage = storages[next];
      std::set<int64_t> &pool = freeBuffers[{storage.role, storage.cols}];
      if (!pool.empty() && storage.role != kLogitsRole) {
        storage.buffer = *pool.begin();
        pool.erase(pool.begin());
        continue;
      }
      int64_t rows = storage.role == kLogitsRole ? maxBatch : maxStepTokens;
      storage.buffer = static_cast<int64_t>(buffers.size());
      std::string name = storage.role.str();
      if (storage.role != kLogitsRole)
        name += "." + std::to_string(roleCounts[storage.role]++);
      buffers.push_back(Buffer{name, storage.role, rows, storage.cols});
    }
    for (size_t index : dyingAt[at]) {
      const Storage &storage = storages[index];
      freeBuffers[{storage.role, storage.cols}].insert(storage.buffer);
    }
  }

  // Lay the buffers out in index order.
  int64_t arenaSize = 0;
  for (Buffer &buffer : buffers) {
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
                                << (buffer.role == kLogitsRole ? "max-batch = "
                                                               : "max-step-tokens = ")
                                << buffer.rows;
    buffer.offset = arenaSize;
    arenaSize = *end;
  }

  Builder b(module.getContext());
  for (Operation *op : ops) {
    SmallVector<int64_t> in, out;
    for (unsigned operand : activationOperandPositions(op))
      in.push_back(storages[storageOf.lookup(op->getOperand(operand))].buffer);
    for (OpResult result : op->getResults())
      if (isActivation(result))
        out.push_back(storages[storageOf.lookup(result)].buffer);
    op->setAttr(kBuffersIn, b.getDenseI64ArrayAttr(in));
    op->setAttr(kBuffersOut, b.getDenseI64ArrayAttr(out));
  }
  SmallVector<Attribute> bufferAttrs;
  for (const Buffer &buffer : buffers)
    bufferAttrs.push_back(b.getDictionaryAttr({
        b.getNamedAttr("name", b.getStringAttr(buffer.name)),
        b.getNamedAttr("role", b.getStringAttr(buffer.role)),
        b.getNamedAttr("offset", b.getI64IntegerAttr(buffer.offset)),
        b.getNamedAttr("rows", b.getI64IntegerAttr(buffer.rows)),
        b.getNamedAttr("cols", b.getI64IntegerAttr(buffer.cols)),
        b.getNamedAttr("row_stride", b.getI64IntegerAttr(buffer.rowStride)),
    }));
  module->setAttr(kBuffers, b.getArrayAttr(bufferAttrs));
  module->setAttr(kActivationArenaSize, b.getI64IntegerAttr(arenaSize));
  return success();
}

LogicalResult PlanMemoryPass::planKvCache(ModuleOp module) {
  auto model = module->getAttrOfType<DictionaryAttr>(kModel);
  std::optional<int64_t> layers = getIntField(model, "layers");
  std::optional<int64_t> kvHeads = getIntField(model, "kv_heads");
  std::optional<int64_t> headDim = getIntField(model, "head_dim");
  if (!layers || !kvHeads || !headDim)
    return module.emitError("hetc-plan-memory needs the module's hetc.model attribute "
                            "(layers, kv_heads, head_dim); run hetc-group-sublayers first");
  std::optional<plan::DTypeDef> dtype = kvDtypeFromName(kvDtype);
  if (!dtype)
    return module.emitError() << "hetc-plan-memory: kv-dtype \"" << kvDtype
                              << "\" is not f32, bf16 or int8";
  if (kvInBlocks(*dtype) && *headDim % 2 != 0)
    return module.emitError() << "a " << kvDtype << " KV cache pairs head dims; head_dim "
                              << *headDim << " is odd (use --kv f32)";
  // The plan format's layout (runtime/format/Format.h: kvLayout), which the loader verifies and
  // the tests build with too.
  const int64_t slots = maxBatch, seq = static_cast<int64_t>(maxSeq);
  const bool scaled = kvHasRowScales(*dtype);
  const std::optional<KvLayout> layout =
      kvLayout(*dtype, static_cast<uint64_t>(*layers), static_cast<uint64_t>(slots),
               static_cast<uint64_t>(*kvHeads), static_cast<uint64_t>(*headDim), maxSeq);
  if (!layout || layout->arenaSize > static_cast<uint64_t>(INT64_MAX))
    return module.emitError() << "the KV cache for max-seq = " << seq
                              << " and max-batch = " << slots << " (" << *layers << " layers x "
                              << *kvHeads << " KV heads x head_dim " << *headDim << " x "
                              << dtypeBytes(*dtype) << " bytes"
                              << (scaled ? " and a 4-byte scale per row" : "")
                              << ", K and V) overflows 64 bits";
  auto i64 = [](uint64_t value) { return static_cast<int64_t>(value); };

  Builder b(module.getContext());
  SmallVector<NamedAttribute> fields = {
      b.getNamedAttr("dtype", b.getStringAttr(kvDtype)),
      b.getNamedAttr("layers", b.getI64IntegerAttr(*layers)),
      b.getNamedAttr("slots", b.getI64IntegerAttr(slots)),
      b.getNamedAttr("kv_heads", b.getI64IntegerAttr(*kvHeads)),
      b.getNamedAttr("max_seq", b.getI64IntegerAttr(seq)),
      b.getNamedAttr("head_dim", b.getI64IntegerAttr(*headDim)),
      b.getNamedAttr("pos_stride", b.getI64IntegerAttr(i64(layout->posStride))),
      b.getNamedAttr("head_stride", b.getI64IntegerAttr(i64(layout->headStride))),
      b.getNamedAttr("slot_stride", b.getI64IntegerAttr(i64(layout->slotStride))),
      b.getNamedAttr("layer_stride", b.getI64IntegerAttr(i64(layout->layerStride))),
      b.getNamedAttr("k_offset", b.getI64IntegerAttr(i64(layout->kOffset))),
      b.getNamedAttr("v_offset", b.getI64IntegerAttr(i64(layout->vOffset))),
      b.getNamedAttr("arena_size", b.getI64IntegerAttr(i64(layout->arenaSize))),
  };
  if (scaled)
    fields.append({
        b.getNamedAttr("k_scale_offset", b.getI64IntegerAttr(i64(layout->kScaleOffset))),
        b.getNamedAttr("v_scale_offset", b.getI64IntegerAttr(i64(layout->vScaleOffset))),
        b.getNamedAttr("scale_head_stride", b.getI64IntegerAttr(i64(layout->scaleHeadStride))),
        b.getNamedAttr("scale_slot_stride", b.getI64IntegerAttr(i64(layout->scaleSlotStride))),
        b.getNamedAttr("scale_layer_stride", b.getI64IntegerAttr(i64(layout->scaleLayerStride))),
    });
  module->setAttr(kKvCache, b.getDictionaryAttr(fields));
  return success();
}

void PlanMemoryPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkBounds(module)) || failed(planKvCache(module))) {
    signalPassFailure();
    return;
  }
  func::FuncOp func = findModelFunction(module);
  if (!func || failed(planActivations(module, func)))
    signalPassFailure();
}

} // namespace
