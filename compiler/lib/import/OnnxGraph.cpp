#include "OnnxGraph.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSwitch.h"

#include <cstdio>

using namespace mlir;

namespace hetc {

bool isOnnx(Operation *op, StringRef opType) {
  auto node = dyn_cast_or_null<OnnxNodeOp>(op);
  return node && node.getOpType() == opType;
}

bool readsDimensionsOnly(Operation *op) { return isOnnx(op, "Shape") || isOnnx(op, "Size"); }

static Type elementTypeOf(Type t) {
  auto shaped = dyn_cast<ShapedType>(t);
  return shaped ? shaped.getElementType() : Type();
}

bool isNoOpNode(OnnxNodeOp op) {
  if (op->getNumOperands() < 1 || op->getNumResults() != 1)
    return false;
  // Identity, and a Concat of one value (torch.stack or cat of a one-element list).
  if (op.getOpType() == "Identity" || (op.getOpType() == "Concat" && op->getNumOperands() == 1))
    return true;
  if (op.getOpType() == "Cast" || op.getOpType() == "CastLike") {
    Type in = elementTypeOf(op->getOperand(0).getType());
    Type out = elementTypeOf(op->getResult(0).getType());
    return in && in == out;
  }
  // x * 1 and x / 1 (transformers 4.45+ scale cos and sin by an attention_scaling of 1.0), where
  // the one broadcasts to nothing larger than x: a constant of ones of x's rank or less, all of
  // its dimensions 1.
  if ((op.getOpType() == "Mul" || op.getOpType() == "Div") && op->getNumOperands() == 2) {
    DenseElementsAttr one = constantValue(op->getOperand(1));
    auto x = dyn_cast<TensorType>(op->getOperand(0).getType());
    // A scalar one broadcasts to x's shape whatever its rank; a ones tensor needs x's rank.
    const int64_t xRank = x && x.hasRank() ? x.getRank() : (one && one.getType().getRank() == 0 ? 0 : -1);
    if (!one || !x || !isa<FloatType>(one.getElementType()) ||
        elementTypeOf(op->getResult(0).getType()) != x.getElementType() ||
        one.getType().getRank() > xRank ||
        llvm::any_of(one.getType().getShape(), [](int64_t d) { return d != 1; }))
      return false;
    return scalarValue(op->getOperand(1)) == 1.0;
  }
  return false;
}

// A Cast from a float type to another.
bool isFloatCast(OnnxNodeOp op) {
  if (op.getOpType() != "Cast" || op->getNumOperands() != 1 || op->getNumResults() != 1)
    return false;
  Type in = elementTypeOf(op->getOperand(0).getType());
  Type out = elementTypeOf(op->getResult(0).getType());
  return in && out && isa<FloatType>(in) && isa<FloatType>(out);
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

std::optional<double> floatAttr(OnnxNodeOp op, StringRef name) {
  if (!op.getOnnxAttrs())
    return std::nullopt;
  if (auto attr = op.getOnnxAttrs()->getAs<FloatAttr>(name))
    return attr.getValueAsDouble();
  return std::nullopt;
}

StringRef stringAttr(OnnxNodeOp op, StringRef name, StringRef fallback) {
  if (op.getOnnxAttrs())
    if (auto attr = op.getOnnxAttrs()->getAs<StringAttr>(name))
      return attr.getValue();
  return fallback;
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

std::optional<SmallVector<ShapeEntry>> shapeEntrySources(Value v) {
  v = skipNoOps(v);
  auto ranked = dyn_cast<RankedTensorType>(v.getType());
  if (std::optional<SmallVector<int64_t>> values = intValues(v)) {
    SmallVector<ShapeEntry> out;
    for (int64_t value : *values)
      out.push_back(ShapeEntry{value, {}, -1});
    return out;
  }
  auto node = v.getDefiningOp<OnnxNodeOp>();
  if (!node)
    return std::nullopt;
  StringRef type = node.getOpType();
  if (type == "Concat") {
    SmallVector<ShapeEntry> out;
    for (Value part : node->getOperands()) {
      if (auto entries = shapeEntrySources(part)) {
        out.append(entries->begin(), entries->end());
        continue;
      }
      // An unknown piece: as many unknown entries as its static length.
      auto partType = dyn_cast<RankedTensorType>(part.getType());
      if (!partType || partType.getRank() != 1 || partType.isDynamicDim(0))
        return std::nullopt;
      out.append(partType.getDimSize(0), ShapeEntry{});
    }
    return out;
  }
  if ((type == "Cast" || type == "Reshape") && node->getNumOperands() >= 1) {
    auto inner = shapeEntrySources(node->getOperand(0));
    if (inner && (type == "Cast" || (ranked && ranked.getRank() == 1)))
      return inner;
    return std::nullopt;
  }
  if (type == "Where" && node->getNumOperands() == 3) {
    // torch's expand(-1 ...) idiom: Where(shape == -1, ones, shape); a known entry is kept.
    return shapeEntrySources(node->getOperand(2));
  }
  if (type == "Unsqueeze" && ranked && ranked.getRank() == 1 && ranked.getDimSize(0) == 1) {
    // One dimension of a tensor: Unsqueeze(Gather(Shape(x), d)).
    ShapeEntry entry;
    Value scalar = node->getOperand(0);
    while (OnnxNodeOp cast = producer(scalar, "Cast"))
      scalar = cast->getOperand(0);
    if (OnnxNodeOp gather = producer(scalar, "Gather")) {
      OnnxNodeOp shape = producer(gather->getOperand(0), "Shape");
      auto index = intValues(gather->getOperand(1));
      auto source =
          shape ? dyn_cast<RankedTensorType>(shape->getOperand(0).getType()) : RankedTensorType();
      if (shape && index && index->size() == 1 && intAttr(gather, "axis").value_or(0) == 0) {
        int64_t start = intAttr(shape, "start").value_or(0);
        int64_t d = index->front();
        if (source) {
          int64_t rank = source.getRank();
          start = start < 0 ? start + rank : start;
          int64_t end = intAttr(shape, "end").value_or(rank);
          end = end < 0 ? end + rank : end;
          d = d < 0 ? d + (end - start) : d;
          d += start;
          if (d >= 0 && d < rank) {
            entry.source = shape->getOperand(0);
            entry.dim = d;
          }
        } else if (start == 0 && d >= 0 && !intAttr(shape, "end")) {
          entry.source = shape->getOperand(0);
          entry.dim = d;
        }
      }
    }
    return SmallVector<ShapeEntry>{entry};
  }
  return std::nullopt;
}

std::optional<SmallVector<std::optional<int64_t>>> shapeEntries(Value v) {
  auto sources = shapeEntrySources(v);
  if (!sources)
    return std::nullopt;
  SmallVector<std::optional<int64_t>> out;
  for (const ShapeEntry &entry : *sources)
    out.push_back(entry.value);
  return out;
}

std::pair<Value, int64_t> dimensionOrigin(Value v, int64_t dim) {
  while (true) {
    v = skipNoOps(v);
    Operation *def = v.getDefiningOp();
    auto ranked = dyn_cast<RankedTensorType>(v.getType());
    if (!def)
      break;
    // Scaling by a scalar constant keeps every dimension (OPT's q * scaling).
    if (auto node = dyn_cast<OnnxNodeOp>(def);
        node && (node.getOpType() == "Mul" || node.getOpType() == "Div") &&
        node->getNumOperands() == 2 && scalarValue(node->getOperand(1))) {
      // A constant of higher rank would prepend dimensions: the scaled value's rank must be known.
      auto c = dyn_cast<RankedTensorType>(node->getOperand(1).getType());
      const int64_t rank = ranked ? ranked.getRank() : rankOf(node->getOperand(0));
      if (!c || !c.hasStaticShape() || c.getNumElements() != 1 || rank < 0 || c.getRank() > rank)
        break;
      v = node->getOperand(0);
      continue;
    }
    bool leading = ranked && dim < ranked.getRank() - 1;
    if (!leading)
      break;
    if (auto llm = dyn_cast<LlmOp>(def); llm && v == def->getResult(0)) {
      v = llm.getTokenSource();
      continue;
    }
    // A matmul by a 2-D weight keeps the leading dimensions (a linear not yet raised).
    OnnxNodeOp matmul = producer(v, "MatMul");
    if (matmul && rankOf(matmul->getOperand(1)) == 2 &&
        (matmul->getOperand(1).getDefiningOp<WeightOp>() ||
         producer(matmul->getOperand(1), "Transpose"))) {
      v = matmul->getOperand(0);
      continue;
    }
    break;
  }
  return {v, dim};
}

bool sameDimension(Value a, int64_t da, Value b, int64_t db) {
  auto ta = dyn_cast<RankedTensorType>(a.getType()), tb = dyn_cast<RankedTensorType>(b.getType());
  if (ta && tb && da < ta.getRank() && db < tb.getRank() && !ta.isDynamicDim(da) &&
      !tb.isDynamicDim(db))
    return ta.getDimSize(da) == tb.getDimSize(db);
  return dimensionOrigin(a, da) == dimensionOrigin(b, db);
}

int64_t rankOf(Value v) {
  auto ranked = dyn_cast<RankedTensorType>(v.getType());
  return ranked ? ranked.getRank() : -1;
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

namespace {

// The LLM activation a row-keeping Reshape reads, or null.
Value rowReshapeSource(OnnxNodeOp reshape) {
  if (reshape.getOpType() != "Reshape" || reshape->getNumOperands() != 2)
    return {};
  Value x = skipNoOps(reshape->getOperand(0));
  Operation *def = x.getDefiningOp();
  if (!def || !isa<LlmOp>(def) || def->getResult(0) != x)
    return {};
  std::optional<int64_t> features = featureSize(x.getType());
  if (!features)
    return {};
  // Tokens as rows [N, F] or [B, S, F]; a view to 4 dimensions splits heads (even one head of
  // all the features) and is a pattern of its own.
  int64_t outRank = rankOf(reshape->getResult(0));
  if (outRank < 0)
    if (auto type = dyn_cast<RankedTensorType>(reshape->getOperand(1).getType());
        type && type.getRank() == 1 && !type.isDynamicDim(0))
      outRank = type.getDimSize(0);
  if (outRank != 2 && outRank != 3)
    return {};
  if (featureSize(reshape->getResult(0).getType()) == features)
    return x;
  // The target's last entry: the features as a constant, or x's own last dimension read back
  // (x.reshape(-1, x.shape[-1])). Only the last part of a Concat matters (rows.view(*x.shape[:-1],
  // out) concatenates a slice of a shape and the constant).
  Value target = reshape->getOperand(1);
  while (OnnxNodeOp concat = producer(target, "Concat")) {
    if (concat->getNumOperands() == 0)
      return {};
    target = concat->getOperand(concat->getNumOperands() - 1);
  }
  const int64_t rank = rankOf(x);
  // Unsqueeze(Gather(Shape(s), -1)) whose types shape inference left unknown, or
  // Unsqueeze(Squeeze(Slice(Shape(s), -1, end))) (OPT's hidden_states.size(-1)).
  if (OnnxNodeOp unsqueeze = producer(target, "Unsqueeze")) {
    OnnxNodeOp gather = producer(unsqueeze->getOperand(0), "Gather");
    OnnxNodeOp squeeze = producer(unsqueeze->getOperand(0), "Squeeze");
    OnnxNodeOp slice = squeeze ? producer(squeeze->getOperand(0), "Slice") : OnnxNodeOp();
    OnnxNodeOp shape = gather ? producer(gather->getOperand(0), "Shape")
                       : slice && slice->getNumOperands() >= 3
                           ? producer(slice->getOperand(0), "Shape")
                           : OnnxNodeOp();
    std::optional<double> index;
    if (gather && shape)
      index = scalarValue(gather->getOperand(1));
    if (slice && shape) {
      std::optional<SmallVector<int64_t>> starts = intValues(slice->getOperand(1));
      std::optional<SmallVector<int64_t>> ends = intValues(slice->getOperand(2));
      const int64_t sourceRank = rankOf(shape->getOperand(0));
      // The one entry from the start to the end of the shape: the last.
      if (starts && ends && starts->size() == 1 && ends->size() == 1 && sourceRank > 0 &&
          ((*starts)[0] == -1 || (*starts)[0] == sourceRank - 1) && (*ends)[0] >= sourceRank)
        index = -1;
    }
    const int64_t sourceRank = shape ? rankOf(shape->getOperand(0)) : -1;
    if (index && sourceRank > 0 && !shape.getOnnxAttrs() && rank > 0) {
      const int64_t d = *index < 0 ? static_cast<int64_t>(*index) + sourceRank
                                   : static_cast<int64_t>(*index);
      return d == sourceRank - 1 && sameDimension(shape->getOperand(0), d, x, rank - 1) ? x
                                                                                          : Value();
    }
  }
  auto entries = shapeEntrySources(target);
  if (!entries || entries->empty())
    return {};
  const ShapeEntry &last = entries->back();
  if (last.value)
    return *last.value == *features ? x : Value();
  return last.source && rank > 0 && sameDimension(last.source, last.dim, x, rank - 1) ? x
                                                                                        : Value();
}

} // namespace

BlockArgument graphInputThroughViews(Value v) {
  v = skipNoOps(v);
  while (auto node = v.getDefiningOp<OnnxNodeOp>()) {
    StringRef type = node.getOpType();
    if ((type != "Cast" && type != "Reshape" && type != "Unsqueeze" && type != "Squeeze" &&
         type != "Flatten") ||
        node->getNumOperands() == 0)
      break;
    v = skipNoOps(node->getOperand(0));
  }
  return dyn_cast<BlockArgument>(v);
}

Value throughRowReshapes(Value v) {
  while (OnnxNodeOp reshape = producer(v, "Reshape")) {
    Value source = rowReshapeSource(reshape);
    if (!source)
      break;
    v = source;
  }
  return v;
}

// The LLM activation a Cast between float types reads, or null.
Value activationCastSource(OnnxNodeOp cast) {
  if (cast.getOpType() != "Cast" || cast->getNumOperands() != 1)
    return {};
  Value source = cast->getOperand(0);
  Type in = elementTypeOf(source.getType()), out = elementTypeOf(cast->getResult(0).getType());
  Operation *def = source.getDefiningOp();
  if (!in || !out || !isa<FloatType>(in) || !isa<FloatType>(out) || !def || !isa<LlmOp>(def) ||
      isa<LmHeadOp>(def) || def->getResult(0) != source)
    return {};
  return source;
}

bool foldActivationViews(func::FuncOp func) {
  SmallVector<OnnxNodeOp> views;
  func.walk([&](OnnxNodeOp node) {
    Value source = rowReshapeSource(node);
    if (!source)
      source = activationCastSource(node);
    if (source) {
      node->getResult(0).replaceAllUsesWith(source);
      views.push_back(node);
    }
  });
  // Erased, not left unread: a reader counts the activation's uses (a bias moves into the
  // linear only where the activation reads it alone).
  for (OnnxNodeOp view : views)
    view->erase();
  if (!views.empty())
    syncResultTypes(func);
  return !views.empty();
}

std::optional<int64_t> knownFeatures(Value v) {
  if (std::optional<int64_t> f = featureSize(v.getType()))
    return f;
  v = skipNoOps(v);
  if (Operation *def = v.getDefiningOp(); def && isa<LlmOp>(def))
    return featureSize(def->getResult(0).getType());
  if (OnnxNodeOp add = producer(v, "Add")) {
    for (Value operand : add->getOperands())
      if (OnnxNodeOp matmul = producer(operand, "MatMul"))
        return knownFeatures(matmul->getResult(0));
    return std::nullopt;
  }
  if (OnnxNodeOp matmul = producer(v, "MatMul")) {
    Value w = skipNoOps(matmul->getOperand(1));
    if (OnnxNodeOp transpose = producer(w, "Transpose")) {
      auto type = dyn_cast<RankedTensorType>(transpose->getOperand(0).getType());
      return type && type.getRank() == 2 ? std::optional<int64_t>(type.getDimSize(0)) : std::nullopt;
    }
    auto type = dyn_cast<RankedTensorType>(w.getType());
    if (type && type.getRank() == 2 && !type.isDynamicDim(1))
      return type.getDimSize(1);
  }
  return std::nullopt;
}

std::string printed(double v, int significant) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*g", significant, v);
  return text;
}

std::string softmaxBefore13Refusal(StringRef node, StringRef opType, int64_t opset, int64_t axis,
                                   int64_t rank) {
  return "node '" + node.str() + "' (" + opType.str() + ", opset " + std::to_string(opset) +
         ") flattens its input at axis " + std::to_string(axis) +
         (rank < 1 ? " of an input of unknown rank"
                   : " of a rank-" + std::to_string(rank) + " input") +
         "; hetc reads a softmax over the last axis only (export with opset 13 or later)";
}

std::string describe(Operation *op) {
  if (auto node = dyn_cast<OnnxNodeOp>(op))
    return "'" + node.getNodeName().str() + "' (" + node.getOpType().str() + ")";
  return op->getName().getStringRef().str();
}

namespace {
// What a walk back through operands does at a definition (null for a block argument).
enum class Walk { Found, End, Continue };
// Whether the walk back from `v` through every operand meets a definition `visit` finds.
bool foundBehind(Value v, function_ref<Walk(Operation *)> visit) {
  SmallVector<Value> worklist{v};
  DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value at = worklist.pop_back_val();
    if (!seen.insert(at).second)
      continue;
    Operation *def = at.getDefiningOp();
    Walk step = visit(def);
    if (step == Walk::Found)
      return true;
    if (step == Walk::Continue)
      llvm::append_range(worklist, def->getOperands());
  }
  return false;
}
} // namespace

bool computedFromInputs(Value v, bool weightsAreConstants) {
  return !foundBehind(v, [&](Operation *def) {
    if (!def || readsDimensionsOnly(def))
      return Walk::End;
    if (isa<LlmOp>(def) || (isa<WeightOp>(def) && !weightsAreConstants))
      return Walk::Found;
    if (auto node = dyn_cast<OnnxNodeOp>(def); node && weightsAreConstants) {
      StringRef type = node.getOpType();
      if (type == "MatMul" || type == "Gemm" || type == "MatMulInteger" ||
          type == "MatMulNBits" || type == "Einsum" || type == "Conv" ||
          ((type == "Gather" || type == "GatherElements" || type == "GatherND") &&
           node->getOperand(0).getDefiningOp<WeightOp>()))
        return Walk::Found;
    }
    return Walk::Continue;
  });
}

// The walk of computedFromInputs, asking the opposite: does any path reach an input (or read
// one's dimensions)?
bool readsGraphInputs(Value v) {
  return foundBehind(v, [](Operation *def) {
    return !def || readsDimensionsOnly(def) ? Walk::Found : Walk::Continue;
  });
}

} // namespace hetc

