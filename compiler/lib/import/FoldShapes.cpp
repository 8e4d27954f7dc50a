// Replaces every computed shape operand by the constant it is equal to for every value of the
// graph's symbolic dimensions (SymbolicShapes.h), so that a Reshape, Expand or Slice whose
// operands an export computes from `size()` is as plain as one with constants:
//
// - an integer tensor whose elements evaluate to constants becomes that constant;
// - a Reshape target becomes constants, 0 where an entry is the input's own dimension at that
//   index, and -1 for the one entry left symbolic (the element count fixes it);
// - an Expand shape becomes constants, 1 where an entry is the input's own dimension;
// - a Slice start or end that is the sliced dimension itself (or past it) becomes INT64_MAX, one
//   that is the dimension minus a constant c becomes -c;
// - a Split into pieces of known sizes becomes one Slice per piece;
// - an If (flattened by the importer) whose condition evaluates to a constant becomes the branch
//   it picks;
// - a Reshape whose result has the shape of its input (or of what an Unsqueeze before it read)
//   becomes that value;
// - torch.where(allowed, scores, fill) with a hiding fill becomes scores + where(allowed, 0,
//   fill), and masks added one after the other are added together first;
// - x + zeros of x's own shape is x (baddbmm's beta * zeros), and a product over batch x heads
//   flattened then unflattened back is the product over [B, H, ., .] (GPT-NeoX's baddbmm);
// - GatherElements of whole rows of a broadcast table is Gather of the rows (transformers 4.28's
//   torch.gather of cos/sin), and Squeeze(Unsqueeze(x, axes), axes) is x;
// - a Tile that repeats only dimensions of size 1, and a Concat of copies of one value along a
//   dimension of size 1, become the Expand they equal;
// - every result gets the static dimensions its evaluated shape has.
//
// What cannot be made constant is left as it is, for the patterns or the evaluator to meet.
#include "OnnxGraph.h"
#include "SymbolicShapes.h"
#include "UnrollLoops.h"
#include "hetc/compiler/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/Sequence.h"

#include <limits>

namespace hetc {
#define GEN_PASS_DEF_FOLDSHAPES
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

Value makeConstant(OpBuilder &builder, Location loc, ArrayRef<int64_t> values,
                   ArrayRef<int64_t> shape, Type elem) {
  auto type = RankedTensorType::get(shape, elem);
  SmallVector<APInt> ints;
  unsigned width = elem.getIntOrFloatBitWidth();
  for (int64_t v : values)
    ints.push_back(APInt(width, static_cast<uint64_t>(v), /*isSigned=*/width > 1));
  auto attr = DenseElementsAttr::get(type, ints);
  return builder.create<ConstantOp>(loc, type, attr).getResult();
}

Type elementOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

// Whether a and b are one value, or computed alike: equal constants, or nodes of one op type with
// the same attributes over operands computed alike (an exporter writes `[x.unsqueeze(2)] * n` as n
// Unsqueeze nodes, each with its own axes constant).
bool sameComputation(Value a, Value b, int depth = 0) {
  if (a == b)
    return true;
  if (depth > 4)
    return false;
  DenseElementsAttr ca = constantValue(a), cb = constantValue(b);
  if (ca || cb)
    return ca && cb && ca == cb;
  auto na = a.getDefiningOp<OnnxNodeOp>(), nb = b.getDefiningOp<OnnxNodeOp>();
  if (!na || !nb || na.getOpType() != nb.getOpType() || na.getOnnxAttrs() != nb.getOnnxAttrs() ||
      na->getNumOperands() != nb->getNumOperands() ||
      cast<OpResult>(a).getResultNumber() != cast<OpResult>(b).getResultNumber())
    return false;
  for (unsigned i = 0; i < na->getNumOperands(); ++i)
    if (!sameComputation(na->getOperand(i), nb->getOperand(i), depth + 1))
      return false;
  return true;
}

class ShapeFolder {
public:
  explicit ShapeFolder(func::FuncOp func) : func_(func), shapes_(func), builder_(func) {}

  // False after an error was emitted.
  bool run() {
    SmallVector<OnnxNodeOp> nodes;
    func_.walk([&](OnnxNodeOp node) { nodes.push_back(node); });
    for (OnnxNodeOp node : nodes) {
      refineTypes(node);
      if (node.getOnnxAttrs() && node.getOnnxAttrs()->get(kFlattensBefore13) &&
          !softmaxOverLastAxis(node))
        return false;
      StringRef type = node.getOpType();
      if (type == "Reshape" && node->getNumOperands() == 2) {
        if (!reshapeAsSource(node))
          foldReshapeTarget(node);
      }
      else if (type == "Expand" && node->getNumOperands() == 2)
        foldExpandShape(node);
      else if (type == "Slice" && node->getNumOperands() >= 3)
        foldSliceBounds(node);
      else if (type == "Split")
        splitIntoSlices(node);
      else if (type == "If")
        pickBranch(node);
      else if (type == "Tile" && node->getNumOperands() == 2)
        tileAsExpand(node);
      else if (type == "Concat")
        copiesAsExpand(node);
      else if (type == "Where" && node->getNumOperands() == 3)
        whereAsMaskAdd(node);
      else if (type == "Add" && node->getNumOperands() == 2)
        addOfZeros(node);
      else if (type == "GatherElements" && node->getNumOperands() == 2)
        gatherElementsAsGather(node);
      else if (type == "Squeeze")
        squeezeOfUnsqueeze(node);
    }
    // A scale applied after a mask is applied to each (after the Wheres above became Adds).
    for (StringRef type : {"Div", "Mul"})
      for (OnnxNodeOp node : binaryNodes(type))
        scaleEachTerm(node);
    // Masks added one after the other to the scores, added together first (after the Wheres
    // above became Adds).
    for (OnnxNodeOp add : binaryNodes("Add"))
      reassociateMasks(add);
    // Products over batch x heads flattened and unflattened back (after the Adds of zeros went).
    for (OnnxNodeOp reshape : binaryNodes("Reshape"))
      unflattenBatchedProduct(reshape);
    // Computed integer values that are constants, last: the rewrites above read the analysis.
    for (OnnxNodeOp node : nodes)
      foldConstantResult(node);
    syncResultTypes(func_);
    return true;
  }

private:
  // A Softmax of an opset before 13 whose input's rank the importer did not know: over the last
  // axis, opset 13's softmax over it (axis -1); over any other, refused.
  bool softmaxOverLastAxis(OnnxNodeOp node) {
    const int64_t axis = intAttr(node, "axis").value_or(1);
    const int64_t rank = rankOf(node->getOperand(0));
    const int64_t opset = intAttr(node, kFlattensBefore13).value_or(0);
    if (rank < 1 || (axis < 0 ? axis + rank : axis) != rank - 1) {
      node.emitError() << softmaxBefore13Refusal(node.getNodeName(), node.getOpType(), opset,
                                                 axis, rank);
      return false;
    }
    NamedAttrList attrs(*node.getOnnxAttrs());
    attrs.erase(kFlattensBefore13);
    attrs.set("axis", builder_.getI64IntegerAttr(-1));
    node.setOnnxAttrsAttr(attrs.getDictionary(node.getContext()));
    return true;
  }

  // The function's nodes of `type` with two operands, as they are now (after earlier rewrites).
  SmallVector<OnnxNodeOp> binaryNodes(StringRef type) {
    SmallVector<OnnxNodeOp> found;
    func_.walk([&](OnnxNodeOp node) {
      if (node.getOpType() == type && node->getNumOperands() == 2)
        found.push_back(node);
    });
    return found;
  }

  // Whether two shapes are provably the same, dimension by dimension.
  static bool sameShape(const std::optional<SymDims> &a, const std::optional<SymDims> &b) {
    return a && b && a->size() == b->size() &&
           llvm::all_of(llvm::seq<size_t>(0, a->size()),
                        [&](size_t d) { return same((*a)[d], (*b)[d]); });
  }

  bool isComputed(Value v) { return !constantValue(v) && !isa<NoneType>(v.getType()); }

  // A node result whose elements are all known constants becomes a hetc.constant.
  void foldConstantResult(OnnxNodeOp node) {
    if (node->getNumResults() != 1)
      return;
    Value result = node->getResult(0);
    auto type = dyn_cast<ShapedType>(result.getType());
    if (!type || !type.getElementType().isIntOrIndex() || result.use_empty())
      return;
    std::optional<SmallVector<int64_t>> values = allConstant(shapes_.elements(result));
    std::optional<SmallVector<int64_t>> shape = allConstant(shapes_.shape(result));
    if (!values || !shape)
      return;
    builder_.setInsertionPoint(node);
    Value constant = makeConstant(builder_, node->getLoc(), *values, *shape, type.getElementType());
    result.replaceAllUsesWith(constant);
  }

  // Static dimensions the evaluated shape has and the type lacks.
  void refineTypes(OnnxNodeOp node) {
    for (Value result : node->getResults()) {
      auto type = dyn_cast<TensorType>(result.getType());
      std::optional<SymDims> dims = shapes_.shape(result);
      if (!type || !dims)
        continue;
      auto ranked = dyn_cast<RankedTensorType>(type);
      if (ranked && ranked.getRank() != static_cast<int64_t>(dims->size()))
        continue;
      SmallVector<int64_t> shape;
      for (auto [d, dim] : llvm::enumerate(*dims)) {
        std::optional<int64_t> c = dim ? dim->asConstant() : std::nullopt;
        int64_t old = ranked ? ranked.getDimSize(d) : ShapedType::kDynamic;
        shape.push_back(!ShapedType::isDynamic(old) ? old : c && *c >= 0 ? *c : old);
      }
      auto refined = RankedTensorType::get(shape, type.getElementType());
      if (refined != type)
        result.setType(refined);
    }
  }

  void foldReshapeTarget(OnnxNodeOp node) {
    Value target = node->getOperand(1);
    if (!isComputed(target))
      return;
    std::optional<SymDims> entries = shapes_.elements(target);
    std::optional<SymDims> input = shapes_.shape(node->getOperand(0));
    if (!entries)
      return;
    const bool allowZero = intAttr(node, "allowzero").value_or(0) != 0;
    // A literal -1 beside symbolic entries: what it stands for, from the element count
    // (flatten(1, 2) of [B, G, n, T, D] is [B, -1, T, D], whose -1 is G * n), so that the
    // symbolic entry can take the -1 instead.
    if (auto minusOne = llvm::find_if(*entries, [](const SymDim &e) {
          return e && e->asConstant() == std::optional<int64_t>(-1);
        });
        minusOne != entries->end() && input && !allowZero) {
      SymDim known = DimExpr::constant(1);
      bool all = true;
      const size_t skip = minusOne - entries->begin();
      for (size_t i = 0; i < entries->size(); ++i) {
        if (i == skip)
          continue;
        const SymDim &entry = (*entries)[i];
        SymDim e = entry && entry->asConstant() == std::optional<int64_t>(0) && i < input->size()
                       ? (*input)[i]
                       : entry;
        std::optional<DimExpr> product = e && known ? DimExpr::mul(*known, *e) : std::nullopt;
        all = all && product.has_value();
        known = product;
      }
      SymDim total = DimExpr::constant(1);
      for (const SymDim &d : *input)
        total = total && d ? DimExpr::mul(*total, *d) : std::nullopt;
      if (all && total && known)
        if (std::optional<DimExpr> inferred = DimExpr::div(*total, *known))
          *minusOne = *inferred;
    }
    SmallVector<int64_t> folded;
    int symbolic = 0;
    for (auto [i, entry] : llvm::enumerate(*entries)) {
      if (!entry)
        return;
      if (std::optional<int64_t> c = entry->asConstant()) {
        if (*c == 0 && allowZero)
          return; // a literal 0 would change meaning if it were ours; leave it
        folded.push_back(*c);
        continue;
      }
      if (!allowZero && input && i < input->size() &&
          provablyEqual((*input)[i], entry) == std::optional<bool>(true)) {
        folded.push_back(0);
        continue;
      }
      folded.push_back(-1);
      ++symbolic;
    }
    // One entry ONNX infers; two could not both be -1.
    if (symbolic > 1 || (symbolic == 1 && llvm::count(folded, -1) > 1))
      return;
    replaceOperand(node, 1, folded);
  }

  void foldExpandShape(OnnxNodeOp node) {
    Value target = node->getOperand(1);
    if (!isComputed(target))
      return;
    std::optional<SymDims> entries = shapes_.elements(target);
    std::optional<SymDims> input = shapes_.shape(node->getOperand(0));
    if (!entries || !input)
      return;
    const size_t offset = entries->size() >= input->size() ? entries->size() - input->size() : 0;
    SmallVector<int64_t> folded;
    for (auto [i, entry] : llvm::enumerate(*entries)) {
      if (!entry)
        return;
      if (std::optional<int64_t> c = entry->asConstant()) {
        folded.push_back(*c);
        continue;
      }
      // Broadcasting by 1 keeps the input's dimension: right-aligned, as numpy.
      if (i >= offset && provablyEqual((*input)[i - offset], entry) == std::optional<bool>(true)) {
        folded.push_back(1);
        continue;
      }
      return;
    }
    replaceOperand(node, 1, folded);
  }

  void foldSliceBounds(OnnxNodeOp node) {
    std::optional<SymDims> data = shapes_.shape(node->getOperand(0));
    if (!data)
      return;
    const unsigned n = node->getNumOperands();
    SmallVector<int64_t> axes;
    std::optional<SymDims> starts = shapes_.elements(node->getOperand(1));
    if (!starts)
      return;
    if (n >= 4 && !isa<NoneType>(node->getOperand(3).getType())) {
      std::optional<SmallVector<int64_t>> a = allConstant(shapes_.elements(node->getOperand(3)));
      if (!a)
        return;
      axes = *a;
    } else {
      for (size_t i = 0; i < starts->size(); ++i)
        axes.push_back(i);
    }
    if (n >= 5 && !isa<NoneType>(node->getOperand(4).getType())) {
      std::optional<SmallVector<int64_t>> steps =
          allConstant(shapes_.elements(node->getOperand(4)));
      if (!steps || llvm::any_of(*steps, [](int64_t s) { return s != 1; }))
        return;
    }
    for (unsigned operand : {1u, 2u}) {
      Value bound = node->getOperand(operand);
      if (!isComputed(bound))
        continue;
      std::optional<SymDims> values = shapes_.elements(bound);
      if (!values || values->size() != axes.size())
        continue;
      SmallVector<int64_t> folded;
      for (auto [i, value] : llvm::enumerate(*values)) {
        if (!value)
          break;
        if (std::optional<int64_t> c = value->asConstant()) {
          folded.push_back(*c);
          continue;
        }
        int64_t axis = axes[i] < 0 ? axes[i] + static_cast<int64_t>(data->size()) : axes[i];
        if (axis < 0 || axis >= static_cast<int64_t>(data->size()))
          break;
        const SymDim &dim = (*data)[axis];
        // An end at or past the dimension is "to the end"; the dimension minus c counts back.
        if (operand == 2 && (provablyEqual(dim, value) == std::optional<bool>(true) ||
                             provablyLess(dim, value) == std::optional<bool>(true))) {
          folded.push_back(std::numeric_limits<int64_t>::max());
          continue;
        }
        std::optional<DimExpr> back = dim ? DimExpr::sub(*dim, *value) : std::nullopt;
        std::optional<int64_t> fromEnd = back ? back->asConstant() : std::nullopt;
        if (!fromEnd || *fromEnd <= 0)
          break;
        folded.push_back(-*fromEnd);
      }
      if (folded.size() == values->size())
        replaceOperand(node, operand, folded);
    }
  }

  // A Split into pieces of known sizes is one Slice per piece: x[..., a:b] and torch.split,
  // chunk or unbind spell the same cut, and the patterns read Slices.
  void splitIntoSlices(OnnxNodeOp node) {
    std::optional<SymDims> data = shapes_.shape(node->getOperand(0));
    if (!data || data->empty())
      return;
    int64_t axis = intAttr(node, "axis").value_or(0);
    axis = axis < 0 ? axis + static_cast<int64_t>(data->size()) : axis;
    if (axis < 0 || axis >= static_cast<int64_t>(data->size()))
      return;
    const unsigned pieces = node->getNumResults();
    std::optional<SmallVector<int64_t>> sizes = intsAttr(node, "split");
    if (!sizes && node->getNumOperands() >= 2 && !isa<NoneType>(node->getOperand(1).getType()))
      sizes = allConstant(shapes_.elements(node->getOperand(1)));
    if (!sizes) {
      // Equal pieces (the last one smaller, opset 18's num_outputs) of a static dimension.
      std::optional<int64_t> dim = (*data)[axis] ? (*data)[axis]->asConstant() : std::nullopt;
      if (!dim || pieces == 0)
        return;
      const int64_t each = (*dim + pieces - 1) / pieces;
      sizes = SmallVector<int64_t>();
      for (unsigned r = 0; r < pieces; ++r)
        sizes->push_back(std::max<int64_t>(0, std::min(each, *dim - r * each)));
    }
    if (sizes->size() != pieces || llvm::any_of(*sizes, [](int64_t v) { return v < 0; }))
      return;
    builder_.setInsertionPoint(node);
    Type i64 = builder_.getI64Type();
    Value axes = makeConstant(builder_, node->getLoc(), {axis}, {1}, i64);
    int64_t start = 0;
    for (unsigned r = 0; r < pieces; ++r) {
      Value starts = makeConstant(builder_, node->getLoc(), {start}, {1}, i64);
      Value ends = makeConstant(builder_, node->getLoc(), {start + (*sizes)[r]}, {1}, i64);
      auto slice = builder_.create<OnnxNodeOp>(
          node->getLoc(), TypeRange{node->getResult(r).getType()}, "Slice",
          (node.getNodeName() + "/piece" + std::to_string(r)).str(), DictionaryAttr(),
          ValueRange{node->getOperand(0), starts, ends, axes});
      shapes_.copyFacts(node->getResult(r), slice->getResult(0));
      node->getResult(r).replaceAllUsesWith(slice->getResult(0));
      start += (*sizes)[r];
    }
  }

  // A Reshape whose result has the shape of its input, or of the value an Unsqueeze/Squeeze
  // chain before it started from, is that value: stack([x]).flatten(1, 2) with one copy.
  bool reshapeAsSource(OnnxNodeOp node) {
    std::optional<SymDims> out = shapes_.shape(node->getResult(0));
    if (!out || llvm::any_of(*out, [](const SymDim &d) { return !d; }))
      return false;
    Value source = node->getOperand(0);
    for (int hops = 0; hops < 4; ++hops) {
      if (sameShape(shapes_.shape(source), out)) {
        node->getResult(0).replaceAllUsesWith(source);
        return true;
      }
      auto def = source.getDefiningOp<OnnxNodeOp>();
      if (!def || (def.getOpType() != "Unsqueeze" && def.getOpType() != "Squeeze" &&
                   !isNoOpNode(def)))
        return false;
      source = def->getOperand(0);
    }
    return false;
  }

  // Tile(x, r) repeating only dimensions of size 1 is Expand(x, r): repeat_interleave and
  // .repeat() spell repeat_kv so.
  void tileAsExpand(OnnxNodeOp node) {
    if (!isa<FloatType>(elementOf(node->getOperand(0))))
      return; // activations; a shape vector's own Tile stays for the evaluator
    std::optional<SymDims> x = shapes_.shape(node->getOperand(0));
    std::optional<SmallVector<int64_t>> repeats = allConstant(shapes_.elements(node->getOperand(1)));
    if (!x || !repeats || repeats->size() != x->size())
      return;
    for (auto [d, r] : llvm::enumerate(*repeats))
      if (r != 1 && !((*x)[d] && (*x)[d]->asConstant() == 1))
        return;
    builder_.setInsertionPoint(node);
    Value shape = makeConstant(builder_, node->getLoc(), *repeats,
                               {static_cast<int64_t>(repeats->size())}, builder_.getI64Type());
    replaceWithExpand(node, node->getOperand(0), shape);
  }

  // Concat of n copies of one value along a dimension of size 1 is Expand to n there:
  // torch.stack([x] * n, dim) and cat([x] * n) spell repeat_kv so.
  void copiesAsExpand(OnnxNodeOp node) {
    const unsigned n = node->getNumOperands();
    if (n < 2 || node->getNumResults() != 1)
      return;
    Value x = node->getOperand(0);
    if (!isa<FloatType>(elementOf(x)))
      return; // activations; a shape vector's own Concat stays for the evaluator
    if (llvm::any_of(node->getOperands(), [&](Value v) { return !sameComputation(v, x); }))
      return;
    std::optional<SymDims> shape = shapes_.shape(x);
    if (!shape || shape->empty())
      return;
    int64_t axis = intAttr(node, "axis").value_or(0);
    axis = axis < 0 ? axis + static_cast<int64_t>(shape->size()) : axis;
    if (axis < 0 || axis >= static_cast<int64_t>(shape->size()) || !(*shape)[axis] ||
        (*shape)[axis]->asConstant() != 1)
      return;
    SmallVector<int64_t> target(shape->size(), 1);
    target[axis] = n;
    builder_.setInsertionPoint(node);
    Value shapeValue = makeConstant(builder_, node->getLoc(), target,
                                    {static_cast<int64_t>(target.size())}, builder_.getI64Type());
    replaceWithExpand(node, x, shapeValue);
  }

  void replaceWithExpand(OnnxNodeOp node, Value x, Value shape) {
    auto expand = builder_.create<OnnxNodeOp>(node->getLoc(),
                                              TypeRange{node->getResult(0).getType()}, "Expand",
                                              (node.getNodeName() + "/as_expand").str(),
                                              DictionaryAttr(), ValueRange{x, shape});
    shapes_.copyFacts(node->getResult(0), expand->getResult(0));
    node->getResult(0).replaceAllUsesWith(expand->getResult(0));
  }

  // torch.where(allowed, scores, fill) with a fill that hides (a constant of kHiddenScore or
  // below: finfo.min, -inf) is scores + where(allowed, 0, fill): the fill is an additive mask like any
  // other, and the attention pattern reads masks as an Add. (GPT-2 applies its stored causal
  // buffer so.) The two differ only where a score is hidden, by less than exp underflows.
  void whereAsMaskAdd(OnnxNodeOp node) {
    for (unsigned kept : {1u, 2u}) {
      const unsigned fillAt = kept == 1 ? 2 : 1;
      Value x = node->getOperand(kept), fillValue = node->getOperand(fillAt);
      std::optional<double> fill = scalarValue(fillValue);
      auto xType = dyn_cast<TensorType>(x.getType());
      if (!fill || !(*fill <= kHiddenScore) || !xType || !isa<FloatType>(xType.getElementType()) ||
          constantValue(x) || computedFromInputs(x))
        continue;
      builder_.setInsertionPoint(node);
      auto scalar = RankedTensorType::get({}, xType.getElementType());
      Value zero = builder_.create<ConstantOp>(
          node->getLoc(), scalar, DenseElementsAttr::get(scalar, builder_.getZeroAttr(xType.getElementType())));
      SmallVector<Value> operands{node->getOperand(0), zero, zero};
      operands[fillAt] = fillValue;
      auto maskType = UnrankedTensorType::get(xType.getElementType());
      auto mask = builder_.create<OnnxNodeOp>(node->getLoc(), TypeRange{maskType}, "Where",
                                              (node.getNodeName() + "/mask").str(),
                                              DictionaryAttr(), ValueRange(operands));
      auto add = builder_.create<OnnxNodeOp>(
          node->getLoc(), TypeRange{node->getResult(0).getType()}, "Add",
          (node.getNodeName() + "/masked").str(), DictionaryAttr(),
          ValueRange{x, mask->getResult(0)});
      shapes_.copyFacts(node->getResult(0), add->getResult(0));
      node->getResult(0).replaceAllUsesWith(add->getResult(0));
      return;
    }
  }

  // x + zeros of x's own shape is x: baddbmm(zeros, q, k^T) (GPT-NeoX) adds beta * zeros.
  void addOfZeros(OnnxNodeOp node) {
    for (unsigned z : {0u, 1u}) {
      Value x = node->getOperand(1 - z), zeros = skipNoOps(node->getOperand(z));
      OnnxNodeOp fill = producer(zeros, "ConstantOfShape");
      if (!fill)
        continue;
      // Its value attribute is a float zero, or absent (0.0).
      DenseElementsAttr value = fill.getOnnxAttrs()
                                    ? fill.getOnnxAttrs()->getAs<DenseElementsAttr>("value")
                                    : DenseElementsAttr();
      if (value && !(value.isSplat() && isa<FloatType>(value.getElementType()) &&
                     value.getSplatValue<APFloat>().isZero()))
        continue;
      if (!sameShape(shapes_.shape(x), shapes_.shape(zeros)))
        continue;
      node->getResult(0).replaceAllUsesWith(x);
      return;
    }
  }

  // The value x is a broadcast of (Expand, or Tile of dimensions of 1, through no-op nodes).
  Value broadcastSource(Value x) {
    for (int hops = 0; hops < 6; ++hops) {
      x = skipNoOps(x);
      auto def = x.getDefiningOp<OnnxNodeOp>();
      if (!def || def->getNumOperands() != 2)
        return x;
      StringRef type = def.getOpType();
      if (type == "Expand") {
        x = def->getOperand(0);
        continue;
      }
      if (type == "Tile") {
        // Repeats of any size (computed: the batch) of dimensions of 1, and 1 elsewhere.
        std::optional<SymDims> in = shapes_.shape(def->getOperand(0));
        std::optional<SymDims> r = shapes_.elements(def->getOperand(1));
        if (!in || !r || r->size() != in->size())
          return x;
        for (size_t d = 0; d < r->size(); ++d)
          if (!((*in)[d] && (*in)[d]->asConstant() == 1) &&
              !((*r)[d] && (*r)[d]->asConstant() == 1))
            return x;
        x = def->getOperand(0);
        continue;
      }
      return x;
    }
    return x;
  }

  // GatherElements(D, I, axis a) with D a broadcast of a table D0 that is 1 in every dimension
  // but a and the last, and I a broadcast of indices I0 that are 1 in the last dimension, picks
  // whole rows of the table: Gather(Squeeze(D0), Squeeze(I0, last), axis 0), as wide as I.
  // (transformers 4.28 picks cos/sin by torch.gather of a table repeated over the batch.)
  void gatherElementsAsGather(OnnxNodeOp node) {
    const int64_t rank = rankOf(node->getOperand(0));
    int64_t axis = intAttr(node, "axis").value_or(0);
    axis = axis < 0 ? axis + rank : axis;
    if (rank < 2 || axis < 0 || axis >= rank - 1)
      return;
    Value table = broadcastSource(node->getOperand(0));
    Value indices = broadcastSource(node->getOperand(1));
    std::optional<SymDims> d0 = shapes_.shape(table), i0 = shapes_.shape(indices);
    std::optional<SymDims> out = shapes_.shape(node->getResult(0));
    if (!d0 || !i0 || !out || static_cast<int64_t>(d0->size()) != rank ||
        static_cast<int64_t>(i0->size()) != rank || out->size() != i0->size())
      return;
    auto isOne = [](const SymDim &d) { return d && d->asConstant() == 1; };
    SmallVector<int64_t> unitAxes;
    for (int64_t d = 0; d < rank - 1; ++d) {
      if (d == axis)
        continue;
      if (!isOne((*d0)[d]))
        return;
      unitAxes.push_back(d);
    }
    // The gathered rows are as wide as the result: the table's columns are not broadcast.
    if (!isOne(i0->back()) || !same(d0->back(), out->back()))
      return;
    // Every other dimension of the result is the indices' own (nothing else broadcasts them).
    for (int64_t d = 0; d < rank - 1; ++d)
      if (!same((*i0)[d], (*out)[d]))
        return;
    // The indices' dimensions of 1 (but the gathered axis) are squeezed with the last and
    // restored around the rows: Gather(table, pos) for pos[:, None, :, None].
    SmallVector<int64_t> unitIndexAxes;
    for (int64_t d = 0; d < rank - 1; ++d)
      if (d != axis && isOne((*i0)[d]))
        unitIndexAxes.push_back(d);
    SmallVector<int64_t> squeezed = unitIndexAxes;
    squeezed.push_back(rank - 1);
    builder_.setInsertionPoint(node);
    Type i64 = builder_.getI64Type();
    Location loc = node->getLoc();
    const std::string name = node.getNodeName().str();
    Value picks = undoUnsqueezes(indices, squeezed);
    if (!picks)
      picks = builder_
                  .create<OnnxNodeOp>(loc, TypeRange{UnrankedTensorType::get(elementOf(indices))},
                                      "Squeeze", name + "/indices", DictionaryAttr(),
                                      ValueRange{indices, makeConstant(builder_, loc, squeezed,
                                                                       {static_cast<int64_t>(squeezed.size())}, i64)})
                  ->getResult(0);
    // The table's rows: [T, R], with the static dimensions it has.
    SmallVector<int64_t> rowShape;
    for (int64_t d : {axis, rank - 1}) {
      std::optional<int64_t> c = (*d0)[d] ? (*d0)[d]->asConstant() : std::nullopt;
      rowShape.push_back(c ? *c : ShapedType::kDynamic);
    }
    Value rows = builder_
                     .create<OnnxNodeOp>(loc, TypeRange{RankedTensorType::get(rowShape, elementOf(table))},
                                         "Squeeze", name + "/table", DictionaryAttr(),
                                         ValueRange{table, makeConstant(builder_, loc, unitAxes,
                                                                        {static_cast<int64_t>(unitAxes.size())}, i64)})
                     ->getResult(0);
    auto axisAttr = builder_.getNamedAttr("axis", builder_.getI64IntegerAttr(0));
    Type outType = node->getResult(0).getType();
    // The rows' result: the indices' dimensions but the unit ones, then the columns.
    SmallVector<int64_t> gathered;
    for (int64_t d = 0; d < rank; ++d) {
      if (d != rank - 1 && llvm::is_contained(unitIndexAxes, d))
        continue;
      const SymDim &dim = d == rank - 1 ? d0->back() : (*i0)[d];
      std::optional<int64_t> c = dim ? dim->asConstant() : std::nullopt;
      gathered.push_back(c ? *c : ShapedType::kDynamic);
    }
    Value result = builder_
                       .create<OnnxNodeOp>(loc,
                                           TypeRange{RankedTensorType::get(gathered, elementOf(table))},
                                           "Gather", name + "/rows",
                                           builder_.getDictionaryAttr({axisAttr}),
                                           ValueRange{rows, picks})
                       ->getResult(0);
    if (!unitIndexAxes.empty())
      result = builder_
                   .create<OnnxNodeOp>(loc, TypeRange{outType}, "Unsqueeze", name + "/unit_axes",
                                       DictionaryAttr(),
                                       ValueRange{result, makeConstant(builder_, loc, unitIndexAxes,
                                                                       {static_cast<int64_t>(unitIndexAxes.size())}, i64)})
                   ->getResult(0);
    shapes_.copyFacts(node->getResult(0), result);
    node->getResult(0).replaceAllUsesWith(result);
  }

  // The value Squeeze(x, axes) equals without computing anything: x's Unsqueezes undone
  // (Squeeze(Unsqueeze(Unsqueeze(p, 1), 3), [1, 3]) is p); null when some axis was not inserted
  // by an Unsqueeze.
  Value undoUnsqueezes(Value x, SmallVector<int64_t> axes) {
    for (int hops = 0; hops < 8; ++hops) {
      if (axes.empty())
        return x;
      auto unsqueeze = x.getDefiningOp<OnnxNodeOp>();
      const int64_t rank = rankOf(x);
      std::optional<SmallVector<int64_t>> inserted =
          unsqueeze && unsqueeze.getOpType() == "Unsqueeze" ? axesOf(unsqueeze) : std::nullopt;
      if (!inserted || rank < 0)
        return {};
      for (int64_t &a : *inserted)
        a = a < 0 ? a + rank : a;
      for (int64_t &a : axes)
        a = a < 0 ? a + rank : a;
      // The axes this Unsqueeze inserted are undone; the rest move down past them.
      SmallVector<int64_t> rest;
      for (int64_t a : axes)
        if (!llvm::is_contained(*inserted, a))
          rest.push_back(a - llvm::count_if(*inserted, [&](int64_t i) { return i < a; }));
      // An Unsqueeze of an axis the Squeeze keeps cannot be undone here.
      if (llvm::any_of(*inserted, [&](int64_t i) { return !llvm::is_contained(axes, i); }))
        return {};
      x = unsqueeze->getOperand(0);
      axes = rest;
    }
    return {};
  }

  // Squeeze(Unsqueeze(x, axes), axes) is x.
  void squeezeOfUnsqueeze(OnnxNodeOp node) {
    std::optional<SmallVector<int64_t>> axes = axesOf(node);
    if (!axes)
      return;
    if (Value source = undoUnsqueezes(node->getOperand(0), *axes))
      node->getResult(0).replaceAllUsesWith(source);
  }

  // Whether dims a and b are provably equal, each known.
  static bool same(const SymDim &a, const SymDim &b) {
    return provablyEqual(a, b) == std::optional<bool>(true);
  }

  // The rank-4 [B, H, N, D] value a [B * H, N, D] value is the flattening of, by a Reshape.
  Value flattenedFrom(Value v3) {
    OnnxNodeOp reshape = producer(v3, "Reshape");
    if (!reshape)
      return {};
    Value v4 = reshape->getOperand(0);
    std::optional<SymDims> s3 = shapes_.shape(v3), s4 = shapes_.shape(v4);
    if (!s3 || !s4 || s3->size() != 3 || s4->size() != 4)
      return {};
    SymDim bh = (*s4)[0] && (*s4)[1] ? DimExpr::mul(*(*s4)[0], *(*s4)[1]) : std::nullopt;
    if (!same((*s3)[0], bh) || !same((*s3)[1], (*s4)[2]) || !same((*s3)[2], (*s4)[3]))
      return {};
    return v4;
  }

  // Whether the unflattened scores are flattened again after their mask (OPT adds the mask over
  // [B, H, S, T], then takes the softmax and the product with v over [B * H, S, T]): that form
  // stays as it is, read whole by the attention pattern. (Eight nodes deep: a float16 file
  // computes the clamp in float32 between two Casts.)
  bool reflattened(Value scores) {
    SmallVector<Value> worklist{scores};
    for (int depth = 0; depth < 8 && !worklist.empty(); ++depth) {
      SmallVector<Value> next;
      for (Value v : worklist)
        for (Operation *user : v.getUsers()) {
          auto node = dyn_cast<OnnxNodeOp>(user);
          if (!node || node->getNumResults() != 1)
            continue;
          StringRef type = node.getOpType();
          if (type == "Reshape")
            return true;
          if (type == "Add" || type == "Sub" || type == "Mul" || type == "Div" || type == "Max" ||
              type == "Where" || type == "Cast")
            next.push_back(node->getResult(0));
        }
      worklist = std::move(next);
    }
    return false;
  }

  // Reshape(MatMul(a3, Transpose(b3, [0, 2, 1])) [* c], [B, H, S, T]) with a3 and b3 the
  // [B * H, ., D] flattenings of a [B, H, S, D] and b [B, H, T, D] is MatMul(a, Transpose(b,
  // [0, 1, 3, 2])) [* c]: baddbmm and bmm over flattened heads (GPT-NeoX) compute the scores the
  // unflattened product does.
  void unflattenBatchedProduct(OnnxNodeOp reshape) {
    Value product = reshape->getOperand(0);
    OnnxNodeOp scale = producer(product, "Mul");
    std::optional<double> factor;
    if (scale && scale->getNumOperands() == 2 && (factor = scalarValue(scale->getOperand(1))) &&
        rankOf(scale->getOperand(1)) <= 0)
      product = scale->getOperand(0);
    else
      scale = OnnxNodeOp();
    OnnxNodeOp matmul = producer(product, "MatMul");
    if (!matmul || reflattened(reshape->getResult(0)))
      return;
    OnnxNodeOp transpose = producer(matmul->getOperand(1), "Transpose");
    auto perm = transpose ? intsAttr(transpose, "perm") : std::nullopt;
    if (!perm || *perm != SmallVector<int64_t>{0, 2, 1})
      return;
    Value a = flattenedFrom(matmul->getOperand(0)), b = flattenedFrom(transpose->getOperand(0));
    std::optional<SymDims> out = shapes_.shape(reshape->getResult(0));
    std::optional<SymDims> as = a ? shapes_.shape(a) : std::nullopt;
    std::optional<SymDims> bs = b ? shapes_.shape(b) : std::nullopt;
    if (!as || !bs || !out || out->size() != 4 || !same((*as)[0], (*bs)[0]) ||
        !same((*as)[1], (*bs)[1]) || !same((*out)[0], (*as)[0]) || !same((*out)[1], (*as)[1]) ||
        !same((*out)[2], (*as)[2]) || !same((*out)[3], (*bs)[2]))
      return;
    builder_.setInsertionPoint(reshape);
    Type type = reshape->getResult(0).getType();
    auto permAttr = builder_.getNamedAttr(
        "perm", builder_.getArrayAttr({builder_.getI64IntegerAttr(0), builder_.getI64IntegerAttr(1),
                                       builder_.getI64IntegerAttr(3), builder_.getI64IntegerAttr(2)}));
    auto bT = builder_.create<OnnxNodeOp>(
        reshape->getLoc(), TypeRange{UnrankedTensorType::get(elementOf(b))}, "Transpose",
        (transpose.getNodeName() + "/heads").str(), builder_.getDictionaryAttr({permAttr}),
        ValueRange{b});
    Value result = builder_
                       .create<OnnxNodeOp>(reshape->getLoc(), TypeRange{type}, "MatMul",
                                           (matmul.getNodeName() + "/heads").str(),
                                           DictionaryAttr(), ValueRange{a, bT->getResult(0)})
                       ->getResult(0);
    if (scale)
      result = builder_
                   .create<OnnxNodeOp>(reshape->getLoc(), TypeRange{type}, "Mul",
                                       (scale.getNodeName() + "/heads").str(), DictionaryAttr(),
                                       ValueRange{result, scale->getOperand(1)})
                   ->getResult(0);
    reshape->getResult(0).replaceAllUsesWith(result);
  }

  // (scores + m) / c (or * c), m a mask (computed from the inputs and constants alone, and
  // reading the inputs: a linear's bias, a weight alone, is no mask) and c a scalar constant, is
  // scores / c + m / c: GPT-J divides by sqrt(head_dim) after torch.where applied its causal
  // buffer. A hidden score stays hidden (finfo.min / c is still far below any score), and
  // an unmasked one is divided as before.
  void scaleEachTerm(OnnxNodeOp node) {
    Value c = node->getOperand(1);
    auto add = node->getOperand(0).getDefiningOp<OnnxNodeOp>();
    if (!scalarValue(c) || !add || add.getOpType() != "Add" || add->getNumOperands() != 2 ||
        !add->getResult(0).hasOneUse())
      return;
    for (unsigned s : {0u, 1u}) {
      Value scores = add->getOperand(s), m = add->getOperand(1 - s);
      if (computedFromInputs(scores) || !computedFromInputs(m, /*weightsAreConstants=*/true) ||
          !readsGraphInputs(m))
        continue;
      builder_.setInsertionPoint(node);
      auto scaled = [&](Value x, StringRef suffix) {
        return builder_
            .create<OnnxNodeOp>(node->getLoc(), TypeRange{UnrankedTensorType::get(elementOf(x))},
                                node.getOpType(), (node.getNodeName() + suffix).str(),
                                node.getOnnxAttrsAttr(), ValueRange{x, c})
            ->getResult(0);
      };
      Value scaledScores = scaled(scores, "/scores"), scaledMask = scaled(m, "/mask");
      auto sum = builder_.create<OnnxNodeOp>(node->getLoc(), TypeRange{node->getResult(0).getType()},
                                             "Add", (node.getNodeName() + "/masked").str(),
                                             DictionaryAttr(), ValueRange{scaledScores, scaledMask});
      shapes_.copyFacts(node->getResult(0), sum->getResult(0));
      node->getResult(0).replaceAllUsesWith(sum->getResult(0));
      return;
    }
  }

  // (scores + m1) + m2, m1 and m2 computed from the inputs and constants alone (a stored mask
  // buffer is a weight), is scores + (m1 + m2) where the sum is a Softmax's scores. Elsewhere
  // such an m2 may be no mask at all: the token embeddings a residual adds to a linear's output
  // plus its bias (ONNX Runtime's fused GPT-2).
  void reassociateMasks(OnnxNodeOp add) {
    if (!reachesSoftmax(add))
      return;
    for (unsigned inner : {0u, 1u}) {
      Value m2 = add->getOperand(1 - inner);
      auto first = add->getOperand(inner).getDefiningOp<OnnxNodeOp>();
      if (!first || first.getOpType() != "Add" || first->getNumOperands() != 2 ||
          !first->getResult(0).hasOneUse() || !computedFromInputs(m2, /*weightsAreConstants=*/true) ||
          constantValue(m2))
        continue;
      for (unsigned s : {0u, 1u}) {
        Value scores = first->getOperand(s), m1 = first->getOperand(1 - s);
        if (computedFromInputs(scores) ||
            !computedFromInputs(m1, /*weightsAreConstants=*/true) || constantValue(m1))
          continue;
        builder_.setInsertionPoint(add);
        auto masks = builder_.create<OnnxNodeOp>(
            add->getLoc(), TypeRange{UnrankedTensorType::get(elementOf(m1))}, "Add",
            (add.getNodeName() + "/masks").str(), DictionaryAttr(), ValueRange{m1, m2});
        add->setOperand(inner, scores);
        add->setOperand(1 - inner, masks->getResult(0));
        return;
      }
    }
  }

  // Whether `op`'s result is a Softmax's input, directly or through elementwise nodes (a scale, a
  // soft-cap, a clamp, casts, more masks).
  static bool reachesSoftmax(Operation *op) {
    SmallVector<std::pair<Operation *, int>> worklist{{op, 0}};
    while (!worklist.empty()) {
      auto [at, depth] = worklist.pop_back_val();
      for (Operation *user : at->getUsers()) {
        auto node = dyn_cast<OnnxNodeOp>(user);
        if (!node)
          continue;
        StringRef type = node.getOpType();
        if (type == "Softmax")
          return true;
        if (depth < 6 && (type == "Add" || type == "Sub" || type == "Mul" || type == "Div" ||
                          type == "Cast" || type == "Max" || type == "Min" || type == "Where" ||
                          type == "Tanh" || type == "Clip" || type == "Reshape"))
          worklist.push_back({user, depth + 1});
      }
    }
    return false;
  }

  // A flattened If whose condition evaluates to a constant is the branch it picks (torch's
  // squeeze of a dimension the trace could not see: If(Shape(x)[d] == 1, Squeeze, Identity)).
  void pickBranch(OnnxNodeOp node) {
    const unsigned results = node->getNumResults();
    if (node->getNumOperands() != 1 + 2 * results)
      return;
    std::optional<SmallVector<int64_t>> cond = allConstant(shapes_.elements(node->getOperand(0)));
    if (!cond || cond->size() != 1)
      return;
    for (unsigned r = 0; r < results; ++r)
      node->getResult(r).replaceAllUsesWith(
          node->getOperand(1 + r + ((*cond)[0] ? 0 : results)));
  }

  void replaceOperand(OnnxNodeOp node, unsigned index, ArrayRef<int64_t> values) {
    Value old = node->getOperand(index);
    builder_.setInsertionPoint(node);
    SmallVector<int64_t> shape;
    if (auto ranked = dyn_cast<RankedTensorType>(old.getType()); ranked && ranked.getRank() == 0)
      shape = {};
    else
      shape = {static_cast<int64_t>(values.size())};
    if (shape.empty() && values.size() != 1)
      return;
    node->setOperand(index,
                     makeConstant(builder_, node->getLoc(), values, shape, elementOf(old)));
  }

  func::FuncOp func_;
  SymbolicShapes shapes_;
  OpBuilder builder_;
};

struct FoldShapesPass : public hetc::impl::FoldShapesBase<FoldShapesPass> {
  void runOnOperation() override {
    // Loops first: an unrolled body's shapes fold like the rest of the graph's. A loop that
    // waits for an If's branch to be decided (or sits in the branch not taken) is met again once
    // the shapes are folded, and then unrolled, erased as unread, or refused.
    func::FuncOp func = getOperation();
    UnrollOutcome loops = unrollLoopsAndSequences(func, /*refuseWhatIsLeft=*/false);
    if (loops == UnrollOutcome::Failed || !ShapeFolder(func).run())
      return signalPassFailure();
    if (loops == UnrollOutcome::Pending &&
        (unrollLoopsAndSequences(func, /*refuseWhatIsLeft=*/true) == UnrollOutcome::Failed ||
         !ShapeFolder(func).run()))
      signalPassFailure();
  }
};

} // namespace
