#include "hetc/compiler/PlanAttributes.h"

#include "hetc/Dialect/HetcDialect.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace hetc::planning {

func::FuncOp findModelFunction(ModuleOp module) {
  if (auto main = module.lookupSymbol<func::FuncOp>("main"))
    return main;
  auto funcs = module.getOps<func::FuncOp>();
  if (!funcs.empty() && std::next(funcs.begin()) == funcs.end())
    return *funcs.begin();
  module.emitError("expected a function @main holding the model");
  return nullptr;
}

SmallVector<Operation *> collectLlmOps(func::FuncOp func) {
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (isLlmOp(op))
      ops.push_back(op);
  });
  return ops;
}

bool isActivation(Value value) {
  auto result = dyn_cast<OpResult>(value);
  if (!result || !isLlmOp(result.getOwner()))
    return false;
  // present_key and present_value are the KV cache, which lives in its own arena.
  return !isa<AttentionOp>(result.getOwner()) || result.getResultNumber() == 0;
}

SmallVector<unsigned> activationOperandPositions(Operation *op) {
  return llvm::TypeSwitch<Operation *, SmallVector<unsigned>>(op)
      .Case<EmbeddingOp>([](auto) { return SmallVector<unsigned>{}; })
      .Case<RmsNormOp, LinearOp, RopeOp, LmHeadOp>([](auto) { return SmallVector<unsigned>{0}; })
      .Case<AttentionOp>([](auto) {
        return SmallVector<unsigned>{0, 1, 2};
      })
      .Case<SwiGluOp, AddOp>([](auto) {
        return SmallVector<unsigned>{0, 1};
      })
      .Default([](auto) { return SmallVector<unsigned>{}; });
}

std::optional<int64_t> getIntField(DictionaryAttr dict, StringRef name) {
  if (!dict)
    return std::nullopt;
  if (auto value = dict.getAs<IntegerAttr>(name))
    return value.getInt();
  return std::nullopt;
}

ArrayAttr requirePlannedBuffers(ModuleOp module, StringRef pass) {
  auto buffers = module->getAttrOfType<ArrayAttr>(kBuffers);
  if (!buffers)
    module.emitError() << pass
                       << " needs the module's hetc.buffers attribute; run hetc-plan-memory first";
  return buffers;
}

std::optional<std::pair<int64_t, int64_t>> bufferByteRange(ArrayAttr buffers, int64_t index) {
  if (index < 0 || static_cast<size_t>(index) >= buffers.size())
    return std::nullopt;
  auto dict = dyn_cast<DictionaryAttr>(buffers[index]);
  std::optional<int64_t> offset = getIntField(dict, "offset");
  std::optional<int64_t> rows = getIntField(dict, "rows");
  std::optional<int64_t> stride = getIntField(dict, "row_stride");
  if (!offset || !rows || !stride)
    return std::nullopt;
  return std::make_pair(*offset, *offset + *rows * *stride);
}

std::optional<unsigned> costSublayerBits(StringRef name) {
  return llvm::StringSwitch<std::optional<unsigned>>(name)
      .Case("qkv", 1u << 0)
      .Case(kAttentionCostSublayers, 1u << 1 | 1u << 2)
      .Case("out", 1u << 3)
      .Case("fc1", 1u << 4)
      .Case("fc2", 1u << 5)
      .Default(std::nullopt);
}

std::optional<unsigned> parsePolicyText(StringRef text) {
  constexpr unsigned kSublayers = 6;
  if (!text.consume_front("(") || !text.consume_back(")"))
    return std::nullopt;
  SmallVector<StringRef, kSublayers> values;
  text.split(values, ',');
  if (values.size() != kSublayers)
    return std::nullopt;
  unsigned bits = 0;
  for (auto [i, value] : llvm::enumerate(values)) {
    if (value == "1")
      bits |= 1u << i;
    else if (value != "0")
      return std::nullopt;
  }
  return bits;
}

} // namespace hetc::planning
