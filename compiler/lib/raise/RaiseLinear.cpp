// MatMul(x, w) with w a [K, N] weight is a linear layer. PyTorch's [N, K] layout exported as
// MatMul(x, Transpose(w, [1, 0])) becomes a `transposed` view of the stored weight: no copy.
// An Add of a [N] vector that is the MatMul's only reader is the linear's bias (nn.Linear with
// bias=True exports as MatMul then Add). Gemm(A, B, C) with alpha = beta = 1 and no transA is a
// linear too (B transposed by transB, C its bias): an addmm, on tokens flattened to rows by a
// Reshape that keeps the features (GPT-2's Conv1D, OPT's feed-forward); such Reshapes of LLM
// activations are folded away (throughRowReshapes, foldActivationViews), before and after.
//
// A packed projection read in column pieces (q, k and v out of one MatMul: GPT-2's c_attn split
// in three, ONNX Runtime GenAI's qkv_proj) becomes one linear per piece over that piece's columns
// of the weight and bias (hetc.weight `columns`). The pieces are a Split of the last axis, or
// Slices of it with step 1; the linears read the same input, so nothing is computed twice.
// A packed projection reshaped to cut its features into trailing dimensions and read a range of
// one of them (GPT-NeoX's query_key_value, [heads, 3 * head_dim] per token, sliced on the last
// axis; Falcon's [heads + 2, head_dim], a Slice and two Gathers of heads; its new architecture's
// [groups, heads per group + 2, head_dim]): each piece is the linear over those columns (of every
// group: a strided `columns`), reshaped as the piece was.
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

namespace hetc {
#define GEN_PASS_DEF_RAISELINEAR
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

// The transposed view of a stored 2-D weight [N, K]: [K, N] read from the same bytes; null for a
// weight that is not 2-D or is a view already.
Value transposedView(WeightOp stored, OpBuilder &builder) {
  auto type = cast<RankedTensorType>(stored.getType());
  if (stored.getTransposed() || type.getRank() != 2)
    return {};
  auto viewType =
      RankedTensorType::get({type.getDimSize(1), type.getDimSize(0)}, type.getElementType());
  auto view = builder.create<WeightOp>(stored.getLoc(), viewType, stored.getName());
  view.setTransposed(true);
  return view;
}

// The [K, N] weight operand of a MatMul, creating a transposed view when needed.
Value matchWeight(Value w, OpBuilder &builder) {
  w = skipNoOps(w);
  if (auto weight = w.getDefiningOp<WeightOp>())
    return cast<RankedTensorType>(weight.getType()).getRank() == 2 ? w : Value();
  OnnxNodeOp transpose = producer(w, "Transpose");
  if (!transpose)
    return {};
  auto stored = skipNoOps(transpose->getOperand(0)).getDefiningOp<WeightOp>();
  auto perm = intsAttr(transpose, "perm");
  if (!stored || (perm && *perm != SmallVector<int64_t>{1, 0}))
    return {};
  return transposedView(stored, builder);
}

// The bias of `matmul`: its only reader is Add(y, b) or Add(b, y) with b a float [n] weight or
// constant, y the product or its one float Cast (a float16 file whose adds ONNX Runtime's
// converter keeps in float32, b cast too). The Add, b and that Cast (or null), or nothing.
struct BiasAdd {
  OnnxNodeOp add;
  Value bias;
  OnnxNodeOp cast;
};
BiasAdd matchBias(OnnxNodeOp matmul, int64_t n) {
  Value y = matmul->getResult(0);
  if (!y.hasOneUse())
    return {};
  auto add = dyn_cast<OnnxNodeOp>(*y.getUsers().begin());
  OnnxNodeOp cast;
  if (add && add.getOpType() == "Cast" && add->getNumResults() == 1 &&
      isFloatCast(add) && add->getResult(0).hasOneUse()) {
    cast = add;
    y = cast->getResult(0);
    add = dyn_cast<OnnxNodeOp>(*y.getUsers().begin());
  }
  if (!add || add.getOpType() != "Add" || add->getNumOperands() != 2 || add->getNumResults() != 1)
    return {};
  Value b = skipFloatCasts(add->getOperand(add->getOperand(0) == y ? 1 : 0));
  auto type = dyn_cast<RankedTensorType>(b.getType());
  if (!type || type.getRank() != 1 || type.getDimSize(0) != n ||
      !isa<FloatType>(type.getElementType()) ||
      !(b.getDefiningOp<WeightOp>() || b.getDefiningOp<ConstantOp>()))
    return {};
  return {add, b, cast};
}

// Gemm's weight as [K, N]: B, or with transB a transposed view of a stored [N, K] weight (of
// B's own, when B transposes a stored weight back).
Value matchGemmWeight(OnnxNodeOp gemm, OpBuilder &builder) {
  if (intAttr(gemm, "transB").value_or(0) == 0)
    return matchWeight(gemm->getOperand(1), builder);
  Value b = skipNoOps(gemm->getOperand(1));
  if (OnnxNodeOp transpose = producer(b, "Transpose")) {
    auto stored = skipNoOps(transpose->getOperand(0)).getDefiningOp<WeightOp>();
    auto perm = intsAttr(transpose, "perm");
    if (stored && !stored.getTransposed() && (!perm || *perm == SmallVector<int64_t>{1, 0}))
      return stored; // Transpose then transB: the stored [K, N] itself
    return {};
  }
  auto stored = b.getDefiningOp<WeightOp>();
  return stored ? transposedView(stored, builder) : Value();
}

// Whether the Gemm is a plain x @ B (+ C): alpha and beta 1, A not transposed.
bool isPlainGemm(OnnxNodeOp gemm) {
  return gemm->getNumOperands() >= 2 && gemm->getNumResults() == 1 &&
         intAttr(gemm, "transA").value_or(0) == 0 && floatAttr(gemm, "alpha").value_or(1.0) == 1.0 &&
         floatAttr(gemm, "beta").value_or(1.0) == 1.0;
}

// Columns [begin, end) of a weight or bias (the last dimension of the IR's view), or of each
// group of `period` columns (0: of the whole dimension): a view of the same stored weight, or a
// slice of a constant; null for a strided slice of a view already sliced.
Value sliceColumns(Value weight, int64_t begin, int64_t end, int64_t period, OpBuilder &builder) {
  auto type = cast<RankedTensorType>(weight.getType());
  const int64_t width = type.getDimSize(type.getRank() - 1);
  const int64_t span = period ? period : width;
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = width / span * (end - begin);
  auto sliceType = RankedTensorType::get(shape, type.getElementType());
  if (auto stored = weight.getDefiningOp<WeightOp>()) {
    if (period && stored.getColumns())
      return {};
    const int64_t base = stored.getColumnRange() ? stored.getColumnRange()->first : 0;
    auto view = builder.create<WeightOp>(stored.getLoc(), sliceType, stored.getName());
    view.setTransposed(stored.getTransposed());
    if (period)
      view.setColumns(ArrayRef<int64_t>{begin, end, period});
    else
      view.setColumns(ArrayRef<int64_t>{base + begin, base + end});
    return view;
  }
  DenseElementsAttr dense = constantValue(weight);
  if (!dense)
    return {};
  SmallVector<Attribute> all(dense.getValues<Attribute>());
  SmallVector<Attribute> columns;
  for (size_t at = 0; at < all.size(); at += static_cast<size_t>(span))
    columns.append(all.begin() + at + begin, all.begin() + at + end);
  return builder.create<ConstantOp>(weight.getLoc(), sliceType,
                                    DenseElementsAttr::get(sliceType, columns));
}

// A Reshape of a linear's result that keeps its leading dimensions (a 0 or their size each, or
// one -1) and cuts the last, n features, into trailing dimensions (their product n; one may be
// -1): GPT-NeoX's [.., heads, 3 * head_dim], Falcon's [.., heads + 2, head_dim] and its new
// architecture's [.., groups, heads per group + 2, head_dim].
struct ColumnGroups {
  SmallVector<int64_t> target; // the Reshape's target, the trailing -1 resolved
  int64_t lead = 0;            // leading dimensions kept
};
std::optional<ColumnGroups> groupedColumns(OnnxNodeOp reshape, int64_t n) {
  if (reshape.getOpType() != "Reshape" || reshape->getNumOperands() != 2)
    return std::nullopt;
  std::optional<SmallVector<int64_t>> target = intValues(reshape->getOperand(1));
  const int64_t rank = rankOf(reshape->getOperand(0));
  if (!target || rank < 2 || static_cast<int64_t>(target->size()) < rank + 1)
    return std::nullopt;
  ColumnGroups groups{*target, rank - 1};
  int64_t known = 1, unknown = -1;
  for (int64_t d = groups.lead; d < static_cast<int64_t>(target->size()); ++d) {
    const int64_t size = (*target)[d];
    if (size == -1 && unknown < 0)
      unknown = d;
    else if (size > 0)
      known *= size;
    else
      return std::nullopt;
  }
  if (unknown >= 0) {
    if (known == 0 || n % known != 0)
      return std::nullopt;
    groups.target[unknown] = n / known;
  } else if (known != n) {
    return std::nullopt;
  }
  for (int64_t d = 0; d < groups.lead; ++d)
    if ((*target)[d] == 0 ? intAttr(reshape, "allowzero").value_or(0) != 0
                          : !(((*target)[d] == -1 && unknown < 0) || (*target)[d] > 0))
      return std::nullopt;
  return groups;
}

// What one reader takes of a trailing axis of the grouped columns: indices [begin, end) of axis
// `axis` (of the reshaped value), and whether the axis stays (a Slice, a Gather of a 1-D index)
// or goes (a Gather of a scalar).
struct AxisPiece {
  int64_t axis = 0, begin = 0, end = 0;
  bool keepsAxis = true;
};
std::optional<AxisPiece> axisPiece(OnnxNodeOp node, const ColumnGroups &groups) {
  const int64_t rank = static_cast<int64_t>(groups.target.size());
  auto normalized = [&](int64_t axis) { return axis < 0 ? axis + rank : axis; };
  auto inTrailing = [&](int64_t axis) { return axis >= groups.lead && axis < rank; };
  if (node.getOpType() == "Gather" && node->getNumOperands() == 2) {
    const int64_t axis = normalized(intAttr(node, "axis").value_or(0));
    std::optional<SmallVector<int64_t>> index = intValues(node->getOperand(1));
    auto type = dyn_cast<RankedTensorType>(node->getOperand(1).getType());
    if (!inTrailing(axis) || !index || index->size() != 1 || !type || type.getRank() > 1)
      return std::nullopt;
    const int64_t size = groups.target[axis];
    const int64_t at = (*index)[0] < 0 ? (*index)[0] + size : (*index)[0];
    if (at < 0 || at >= size)
      return std::nullopt;
    return AxisPiece{axis, at, at + 1, type.getRank() == 1};
  }
  if (node.getOpType() != "Slice" || node->getNumOperands() < 4)
    return std::nullopt;
  std::optional<SmallVector<int64_t>> starts = intValues(node->getOperand(1)),
                                      ends = intValues(node->getOperand(2)),
                                      axes = intValues(node->getOperand(3));
  std::optional<SmallVector<int64_t>> steps;
  if (node->getNumOperands() > 4 && !isa<NoneType>(node->getOperand(4).getType()) &&
      !(steps = intValues(node->getOperand(4))))
    return std::nullopt;
  if (!starts || !ends || !axes || starts->size() != 1 || ends->size() != 1 ||
      axes->size() != 1 || (steps && (steps->size() != 1 || (*steps)[0] != 1)))
    return std::nullopt;
  const int64_t axis = normalized((*axes)[0]);
  if (!inTrailing(axis))
    return std::nullopt;
  // ONNX clamps: negative bounds count from the end, then both are clamped to [0, size].
  const int64_t size = groups.target[axis];
  auto clamp = [&](int64_t bound) { return std::clamp<int64_t>(bound < 0 ? bound + size : bound, 0, size); };
  const int64_t begin = clamp((*starts)[0]), end = clamp((*ends)[0]);
  if (begin >= end)
    return std::nullopt;
  return AxisPiece{axis, begin, end, true};
}

// The column ranges `node` reads of its first operand, one per result, when it is a Split of the
// last axis or a Slice of it with step 1; `features` is that operand's last dimension.
std::optional<SmallVector<std::pair<int64_t, int64_t>>> columnPieces(OnnxNodeOp node,
                                                                     int64_t features) {
  const int64_t rank = rankOf(node->getOperand(0));
  auto lastAxis = [&](int64_t axis) { return axis == -1 || (rank > 0 && axis == rank - 1); };
  SmallVector<std::pair<int64_t, int64_t>> pieces;
  if (node.getOpType() == "Split") {
    if (!lastAxis(intAttr(node, "axis").value_or(0)))
      return std::nullopt;
    // The sizes: an input from opset 13 (a constant, or no pieces hetc can tell), an attribute
    // before; equal parts without either.
    std::optional<SmallVector<int64_t>> sizes = intsAttr(node, "split");
    const bool sizesInput =
        node->getNumOperands() > 1 && !isa<NoneType>(node->getOperand(1).getType());
    if (sizesInput && !(sizes = intValues(node->getOperand(1))))
      return std::nullopt;
    const auto parts = static_cast<int64_t>(node->getNumResults());
    if (!sizes && features % parts == 0)
      sizes = SmallVector<int64_t>(parts, features / parts);
    if (!sizes || static_cast<int64_t>(sizes->size()) != parts)
      return std::nullopt;
    int64_t begin = 0;
    for (int64_t size : *sizes) {
      if (size <= 0)
        return std::nullopt;
      pieces.push_back({begin, begin + size});
      begin += size;
    }
    return begin == features ? std::optional(pieces) : std::nullopt;
  }
  if (node.getOpType() != "Slice" || node->getNumOperands() < 3)
    return std::nullopt;
  // An input absent (nullopt, true) or a constant (its values, true); computed: false.
  auto operand = [&](unsigned i, std::optional<SmallVector<int64_t>> &values) {
    if (i >= node->getNumOperands() || isa<NoneType>(node->getOperand(i).getType()))
      return true;
    values = intValues(node->getOperand(i));
    return values.has_value();
  };
  std::optional<SmallVector<int64_t>> starts, ends, axes, steps;
  if (!operand(1, starts) || !operand(2, ends) || !operand(3, axes) || !operand(4, steps))
    return std::nullopt;
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1 ||
      (axes && (axes->size() != 1 || !lastAxis((*axes)[0]))) || (!axes && rank != 1) ||
      (steps && (steps->size() != 1 || (*steps)[0] != 1)))
    return std::nullopt;
  // ONNX clamps: negative bounds count from the end, then both are clamped to [0, features].
  auto clamp = [&](int64_t bound) {
    if (bound < 0)
      bound += features;
    return std::clamp<int64_t>(bound, 0, features);
  };
  const int64_t begin = clamp((*starts)[0]), end = clamp((*ends)[0]);
  if (begin >= end)
    return std::nullopt;
  pieces.push_back({begin, end});
  return pieces;
}

// The linear over columns [begin, end) of `linear`'s, or of each group of `period` of them.
LinearOp pieceLinear(LinearOp linear, int64_t begin, int64_t end, int64_t period,
                     OpBuilder &builder) {
  Value w = sliceColumns(linear.getW(), begin, end, period, builder);
  Value bias =
      linear.getBias() ? sliceColumns(linear.getBias(), begin, end, period, builder) : Value();
  if (!w || (linear.getBias() && !bias))
    return {};
  const int64_t features = cast<RankedTensorType>(w.getType()).getShape().back();
  // The packed projection's location: --explain attributes its MatMul to the pieces.
  return builder.create<LinearOp>(linear->getLoc(),
                                  withFeatureSize(linear.getResult().getType(), features),
                                  linear.getX(), w, bias);
}

// `reshape` cuts the linear's result into trailing dimensions (groupedColumns); each reader that
// takes a range of one trailing axis (a Slice, a Gather of one index) becomes the linear over
// those columns, strided when the axis is not the first trailing one, reshaped as the reader's
// result is. Nothing changes unless every reader of the reshape is such a piece.
void splitHeadPieces(LinearOp linear, OnnxNodeOp reshape, const ColumnGroups &groups,
                     OpBuilder &builder) {
  const int64_t n = cast<RankedTensorType>(linear.getW().getType()).getDimSize(1);
  SmallVector<std::pair<OnnxNodeOp, AxisPiece>> pieces;
  for (Operation *user : reshape->getResult(0).getUsers()) {
    auto node = dyn_cast<OnnxNodeOp>(user);
    std::optional<AxisPiece> piece = node && node->getOperand(0) == reshape->getResult(0)
                                         ? axisPiece(node, groups)
                                         : std::nullopt;
    if (!piece)
      return;
    pieces.push_back({node, *piece});
  }
  for (auto [node, piece] : pieces) {
    // Within each group of `period` columns (the axis and those after it), the piece's columns.
    int64_t inner = 1;
    for (size_t d = piece.axis + 1; d < groups.target.size(); ++d)
      inner *= groups.target[d];
    const int64_t period = groups.target[piece.axis] * inner;
    builder.setInsertionPoint(node);
    LinearOp linearPiece = pieceLinear(linear, piece.begin * inner, piece.end * inner,
                                       period == n ? 0 : period, builder);
    if (!linearPiece)
      return;
    SmallVector<int64_t> target(groups.target);
    target[piece.axis] = piece.end - piece.begin;
    if (!piece.keepsAxis)
      target.erase(target.begin() + piece.axis);
    auto shapeType = RankedTensorType::get({static_cast<int64_t>(target.size())},
                                           builder.getI64Type());
    auto shape = builder.create<ConstantOp>(
        node->getLoc(), shapeType, DenseElementsAttr::get(shapeType, ArrayRef<int64_t>(target)));
    // Named as the piece it stands for, so that messages name a node of the source.
    auto split = builder.create<OnnxNodeOp>(
        node->getLoc(), TypeRange{node->getResult(0).getType()}, "Reshape",
        node.getNodeName(), reshape.getOnnxAttrsAttr(),
        ValueRange{linearPiece.getResult(), shape});
    node->getResult(0).replaceAllUsesWith(split->getResult(0));
    node->erase();
  }
  reshape->erase();
}

// Replaces each column piece read of `linear` by a linear over those columns; erases `linear`
// when nothing else reads it. A piece of each head (GPT-NeoX's query_key_value reshaped to
// [.., heads, 3 * head_dim] and sliced) becomes a linear over those columns of every head,
// reshaped as the slice was.
void splitColumnPieces(LinearOp linear, OpBuilder &builder) {
  const int64_t n = cast<RankedTensorType>(linear.getW().getType()).getDimSize(1);
  SmallVector<OnnxNodeOp> readers;
  for (Operation *user : linear.getResult().getUsers())
    if (auto node = dyn_cast<OnnxNodeOp>(user); node && node->getOperand(0) == linear.getResult())
      readers.push_back(node);
  for (OnnxNodeOp node : readers) {
    if (std::optional<ColumnGroups> groups = groupedColumns(node, n)) {
      splitHeadPieces(linear, node, *groups, builder);
      continue;
    }
    std::optional<SmallVector<std::pair<int64_t, int64_t>>> pieces = columnPieces(node, n);
    if (!pieces)
      continue;
    builder.setInsertionPoint(node);
    SmallVector<Value> pieceLinears;
    for (auto [begin, end] : *pieces) {
      LinearOp piece = pieceLinear(linear, begin, end, 0, builder);
      if (!piece)
        return;
      pieceLinears.push_back(piece);
    }
    for (auto [result, piece] : llvm::zip(node->getResults(), pieceLinears))
      result.replaceAllUsesWith(piece);
    node->erase();
  }
  if (linear->use_empty())
    linear->erase();
}

struct RaiseLinearPass : public hetc::impl::RaiseLinearBase<RaiseLinearPass> {
  void runOnOperation() override {
    foldActivationViews(getOperation());
    SmallVector<OnnxNodeOp> matmuls;
    getOperation().walk([&](OnnxNodeOp op) {
      if ((op.getOpType() == "MatMul" && op->getNumOperands() == 2 && op->getNumResults() == 1) ||
          (op.getOpType() == "Gemm" && isPlainGemm(op)))
        matmuls.push_back(op);
    });
    OpBuilder builder(&getContext());
    for (OnnxNodeOp matmul : matmuls) {
      const bool gemm = matmul.getOpType() == "Gemm";
      Value x = gemm ? throughRowReshapes(matmul->getOperand(0)) : matmul->getOperand(0);
      auto xType = dyn_cast<ShapedType>(x.getType());
      if (!xType || (xType.hasRank() && xType.getRank() < 2) ||
          skipNoOps(x).getDefiningOp<WeightOp>() || skipNoOps(x).getDefiningOp<ConstantOp>())
        continue;
      builder.setInsertionPoint(matmul);
      Value w = gemm ? matchGemmWeight(matmul, builder) : matchWeight(matmul->getOperand(1), builder);
      if (!w)
        continue;
      auto wType = cast<RankedTensorType>(w.getType());
      int64_t k = wType.getDimSize(0), n = wType.getDimSize(1);
      std::optional<int64_t> features = featureSize(x.getType());
      Type resultType = matmul->getResult(0).getType();
      std::optional<int64_t> outFeatures = featureSize(resultType);
      if ((features && *features != k) || (outFeatures && *outFeatures != n)) {
        if (w.getDefiningOp<WeightOp>().getTransposed() && w.use_empty())
          w.getDefiningOp()->erase();
        continue;
      }
      // A Gemm's result has the flattened rows' rank; the linear keeps x's.
      if (!outFeatures || gemm)
        resultType = withFeatureSize(
            isa<RankedTensorType>(resultType) && !gemm ? resultType : x.getType(), n);
      auto [biasAdd, bias, biasCast] = gemm ? BiasAdd() : matchBias(matmul, n);
      if (gemm && matmul->getNumOperands() > 2 && !isa<NoneType>(matmul->getOperand(2).getType())) {
        Value c = skipNoOps(matmul->getOperand(2));
        auto type = dyn_cast<RankedTensorType>(c.getType());
        if (!type || type.getRank() != 1 || type.getDimSize(0) != n ||
            !(c.getDefiningOp<WeightOp>() || c.getDefiningOp<ConstantOp>()))
          continue; // a C that is not a [N] bias: not a linear layer hetc has
        bias = c;
      }
      Operation *replaced = matmul;
      if (biasAdd) {
        // The linear takes the Add's place: the bias may be defined between the two.
        builder.setInsertionPoint(biasAdd);
        replaced = biasAdd;
        if (std::optional<int64_t> f = featureSize(biasAdd->getResult(0).getType()); !f || *f != n)
          resultType = withFeatureSize(resultType, n);
        else
          resultType = biasAdd->getResult(0).getType();
      }
      // The location of the node whose result the linear replaces (the Add with a bias).
      auto linear = builder.create<LinearOp>(replaced->getLoc(), resultType, x, w, bias);
      replaced->getResult(0).replaceAllUsesWith(linear.getResult());
      if (biasAdd)
        biasAdd->erase();
      if (biasCast)
        biasCast->erase();
      matmul->erase();
    }
    foldActivationViews(getOperation());
    SmallVector<LinearOp> linears;
    getOperation().walk([&](LinearOp linear) { linears.push_back(linear); });
    for (LinearOp linear : linears)
      splitColumnPieces(linear, builder);
    syncResultTypes(getOperation());
  }
};

} // namespace
