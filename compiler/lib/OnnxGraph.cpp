#include "OnnxGraph.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace hetc {

bool isOnnx(Operation *op, StringRef opType) {
  auto node = dyn_cast_or_null<OnnxNodeOp>(op);
  return node && node.getOpType() == opType;
}

static Type elementTypeOf(Type t) {
  auto shaped = dyn_cast<ShapedType>(t);
  return shaped ? shaped.getElementType() : Type();
}

bool isNoOpNode(OnnxNodeOp op) {
  if (op->getNumOperands() < 1 || op->getNumResults() != 1)
    return false;
  if (op.getOpType() == "Identity")
    return true;
  if (op.getOpType() == "Cast" || op.getOpType() == "CastLike") {
    Type in = elementTypeOf(op->getOperand(0).getType());
    Type out = elementTypeOf(op->getResult(0).getType());
    return in && in == out;
  }
  return false;
}

Value skipNoOps(Value v) {
  while (auto node = v.getDefiningOp<OnnxNodeOp>()) {
    if (!isNoOpNode(node))
      break;
    v = node->getOperand(0);
  }
  return v;
}

Value skipFloatCasts(Value v) {
  while (auto node = v.getDefiningOp<OnnxNodeOp>()) {
    if (isNoOpNode(node)) {
      v = node->getOperand(0);
      continue;
    }
    if (node.getOpType() != "Cast")
      break;
    Type in = elementTypeOf(node->getOperand(0).getType());
    Type out = elementTypeOf(node->getResult(0).getType());
    if (!in || !out || !isa<FloatType>(in) || !isa<FloatType>(out))
      break;
    v = node->getOperand(0);
  }
  return v;
}

// The fewest operands a node of each type the raising patterns inspect must have, so that a
// malformed node is never indexed past its operands.
static unsigned minOperands(StringRef opType) {
  return llvm::StringSwitch<unsigned>(opType)
      .Cases("Add", "Sub", "Mul", "Div", "Pow", "MatMul", 2)
      .Cases("Reshape", "Expand", "Gather", 2)
      .Case("Slice", 3)
      .Case("Where", 3)
      .Default(1);
}

OnnxNodeOp producer(Value v, StringRef opType) {
  auto node = skipNoOps(v).getDefiningOp<OnnxNodeOp>();
  if (!node || node.getOpType() != opType || node->getNumResults() < 1 ||
      node->getNumOperands() < minOperands(opType))
    return {};
  return node;
}

DenseElementsAttr constantValue(Value v) {
  auto constant = skipNoOps(v).getDefiningOp<ConstantOp>();
  return constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : DenseElementsAttr();
}

std::optional<SmallVector<double>> floatValues(DenseElementsAttr attr) {
  if (!attr)
    return std::nullopt;
  SmallVector<double> out;
  if (isa<FloatType>(attr.getElementType())) {
    for (APFloat f : attr.getValues<APFloat>()) {
      bool lost = false;
      f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      out.push_back(f.convertToDouble());
    }
    return out;
  }
  if (auto intType = dyn_cast<IntegerType>(attr.getElementType())) {
    for (const APInt &i : attr.getValues<APInt>())
      out.push_back(intType.isUnsigned() || intType.getWidth() == 1
                        ? static_cast<double>(i.getZExtValue())
                        : static_cast<double>(i.getSExtValue()));
    return out;
  }
  return std::nullopt;
}

std::optional<double> scalarValue(Value v) {
  DenseElementsAttr attr = constantValue(v);
  if (!attr || attr.getNumElements() < 1)
    return std::nullopt;
  std::optional<SmallVector<double>> values = floatValues(attr);
  if (!values)
    return std::nullopt;
  for (double x : *values)
    if (x != values->front())
      return std::nullopt;
  return values->front();
}

std::optional<SmallVector<int64_t>> intValues(Value v) {
  DenseElementsAttr attr = constantValue(v);
  if (!attr || !isa<IntegerType>(attr.getElementType()))
    return std::nullopt;
  SmallVector<int64_t> out;
  for (const APInt &i : attr.getValues<APInt>())
    out.push_back(i.getBitWidth() == 1 ? static_cast<int64_t>(i.getZExtValue()) : i.getSExtValue());
  return out;
}

std::optional<int64_t> intAttr(OnnxNodeOp op, StringRef name) {
  if (!op.getOnnxAttrs())
    return std::nullopt;
  if (auto attr = op.getOnnxAttrs()->getAs<IntegerAttr>(name))
    return attr.getInt();
  return std::nullopt;
}

std::optional<SmallVector<int64_t>> intsAttr(OnnxNodeOp op, StringRef name) {
  if (!op.getOnnxAttrs())
    return std::nullopt;
  auto array = op.getOnnxAttrs()->getAs<ArrayAttr>(name);
  if (!array)
    return std::nullopt;
  SmallVector<int64_t> out;
  for (Attribute a : array) {
    auto i = dyn_cast<IntegerAttr>(a);
    if (!i)
      return std::nullopt;
    out.push_back(i.getInt());
  }
  return out;
}

std::optional<SmallVector<int64_t>> axesOf(OnnxNodeOp op) {
  if (auto attr = intsAttr(op, "axes"))
    return attr;
  if (op->getNumOperands() >= 2 && !isa<NoneType>(op->getOperand(1).getType()))
    return intValues(op->getOperand(1));
  return std::nullopt;
}

bool matchCommutative(OnnxNodeOp op, function_ref<bool(Value, Value)> match) {
  if (op->getNumOperands() != 2)
    return false;
  return match(op->getOperand(0), op->getOperand(1)) || match(op->getOperand(1), op->getOperand(0));
}

std::optional<SmallVector<std::optional<int64_t>>> shapeEntries(Value v) {
  v = skipNoOps(v);
  auto ranked = dyn_cast<RankedTensorType>(v.getType());
  if (std::optional<SmallVector<int64_t>> values = intValues(v)) {
    SmallVector<std::optional<int64_t>> out(values->begin(), values->end());
    return out;
  }
  auto node = v.getDefiningOp<OnnxNodeOp>();
  if (!node)
    return std::nullopt;
  StringRef type = node.getOpType();
  if (type == "Concat") {
    SmallVector<std::optional<int64_t>> out;
    for (Value part : node->getOperands()) {
      if (auto entries = shapeEntries(part)) {
        out.append(entries->begin(), entries->end());
        continue;
      }
      // An unknown piece: as many unknown entries as its static length.
      auto partType = dyn_cast<RankedTensorType>(part.getType());
      if (!partType || partType.getRank() != 1 || partType.isDynamicDim(0))
        return std::nullopt;
      out.append(partType.getDimSize(0), std::nullopt);
    }
    return out;
  }
  if ((type == "Cast" || type == "Reshape") && node->getNumOperands() >= 1) {
    auto inner = shapeEntries(node->getOperand(0));
    if (inner && (type == "Cast" || (ranked && ranked.getRank() == 1)))
      return inner;
    return std::nullopt;
  }
  if (type == "Where" && node->getNumOperands() == 3) {
    // torch's expand(-1 ...) idiom: Where(shape == -1, ones, shape); a known entry is kept.
    return shapeEntries(node->getOperand(2));
  }
  if (type == "Unsqueeze" && ranked && ranked.getRank() == 1 && ranked.getDimSize(0) == 1) {
    SmallVector<std::optional<int64_t>> out(1, std::nullopt);
    return out;
  }
  return std::nullopt;
}

bool isLlmOp(Operation *op) {
  return isa<EmbeddingOp, RmsNormOp, LinearOp, RopeOp, AttentionOp, SwiGluOp, AddOp, LmHeadOp>(op);
}

std::optional<int64_t> featureSize(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked || ranked.getRank() == 0 || ranked.isDynamicDim(ranked.getRank() - 1))
    return std::nullopt;
  return ranked.getDimSize(ranked.getRank() - 1);
}

Type withFeatureSize(Type type, int64_t features, int64_t rankIfUnranked) {
  auto shaped = cast<ShapedType>(type);
  if (auto ranked = dyn_cast<RankedTensorType>(type)) {
    if (ranked.getRank() == 0)
      return type;
    SmallVector<int64_t> shape(ranked.getShape());
    shape.back() = features;
    return RankedTensorType::get(shape, ranked.getElementType());
  }
  SmallVector<int64_t> shape(rankIfUnranked, ShapedType::kDynamic);
  shape.back() = features;
  return RankedTensorType::get(shape, shaped.getElementType());
}

void syncResultTypes(func::FuncOp func) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  SmallVector<Type> results(ret.getOperandTypes());
  if (TypeRange(results) != func.getFunctionType().getResults())
    func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(), results));
}

std::string describe(Operation *op) {
  if (auto node = dyn_cast<OnnxNodeOp>(op))
    return "'" + node.getNodeName().str() + "' (" + node.getOpType().str() + ")";
  return op->getName().getStringRef().str();
}

} // namespace hetc
