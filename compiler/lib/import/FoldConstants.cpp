// Evaluates ONNX nodes whose inputs are constants (shape arithmetic, scalar math an export left
// unfolded) and drops no-op nodes, so raising sees one graph whether the exporter folded or not.
// Also folds reads of static dimensions (Shape, Gather/Slice of a Shape) of partly dynamic
// tensors, after giving Reshape and Transpose results the static dimensions their shape operands
// imply: that is what turns rotate-half's `x.shape[-1] // 2` into a constant.
#include "OnnxGraph.h"
#include "OnnxInterpreter.h"
#include "hetc/compiler/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cmath>
#include <numeric>

namespace hetc {
#define GEN_PASS_DEF_FOLDCONSTANTS
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

int64_t normalizeAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// Folds one node: constant inputs, or reads of static dimensions.
class Evaluator {
public:
  Evaluator(OnnxNodeOp op) : op_(op) {}

  // The folded values of the node's results, if they can be computed.
  std::optional<SmallVector<Tensor>> run() {
    if (op_->getNumResults() == 0 || op_->getNumOperands() == 0)
      return std::nullopt;
    if (op_->getNumResults() == 1)
      if (std::optional<Tensor> folded = fromDimensions())
        return SmallVector<Tensor>{std::move(*folded)};
    SmallVector<Tensor> in;
    for (Value v : op_->getOperands()) {
      if (isa<NoneType>(v.getType())) {
        in.push_back(Tensor{});
        continue;
      }
      DenseElementsAttr attr = constantValue(v);
      if (!attr)
        return std::nullopt;
      std::optional<Tensor> t = tensorFromAttr(attr);
      if (!t)
        return std::nullopt;
      in.push_back(std::move(*t));
    }
    return evaluateNodeResults(op_, in);
  }

private:
  // Shape, Size, and Gather or Slice of a Shape: what the operand's static dimensions tell.
  std::optional<Tensor> fromDimensions() {
    StringRef type = op_.getOpType();
    if (type == "Shape")
      return shape();
    if (type == "Size")
      return sizeOf();
    if ((type == "Gather" || type == "Slice") && producer(op_->getOperand(0), "Shape"))
      return partialShape();
    return std::nullopt;
  }

  std::optional<Tensor> shapeFrom(ArrayRef<int64_t> dims) {
    for (int64_t d : dims)
      if (ShapedType::isDynamic(d))
        return std::nullopt;
    Tensor t;
    t.elem = IntegerType::get(op_->getContext(), 64);
    t.shape = {static_cast<int64_t>(dims.size())};
    t.ints.assign(dims.begin(), dims.end());
    return t;
  }

  // The dimensions Shape(x) selects (start/end attributes, opset 15).
  std::optional<SmallVector<int64_t>> shapeDims(OnnxNodeOp shapeOp) {
    auto type = dyn_cast<RankedTensorType>(shapeOp->getOperand(0).getType());
    if (!type)
      return std::nullopt;
    int64_t rank = type.getRank();
    int64_t start =
        std::clamp<int64_t>(normalizeAxis(intAttr(shapeOp, "start").value_or(0), rank), 0, rank);
    int64_t end =
        std::clamp<int64_t>(normalizeAxis(intAttr(shapeOp, "end").value_or(rank), rank), 0, rank);
    SmallVector<int64_t> dims;
    for (int64_t d = start; d < end; ++d)
      dims.push_back(type.getDimSize(d));
    return dims;
  }

  std::optional<Tensor> shape() {
    auto dims = shapeDims(op_);
    return dims ? shapeFrom(*dims) : std::nullopt;
  }

  std::optional<Tensor> sizeOf() {
    auto type = dyn_cast<RankedTensorType>(op_->getOperand(0).getType());
    if (!type || !type.hasStaticShape())
      return std::nullopt;
    Tensor t;
    t.elem = IntegerType::get(op_->getContext(), 64);
    t.ints = {type.getNumElements()};
    return t;
  }

  // Gather or Slice of Shape(x) reading only static dimensions of a partly dynamic x.
  std::optional<Tensor> partialShape() {
    auto dims = shapeDims(producer(op_->getOperand(0), "Shape"));
    if (!dims)
      return std::nullopt;
    Tensor all;
    all.elem = IntegerType::get(op_->getContext(), 64);
    all.shape = {static_cast<int64_t>(dims->size())};
    all.ints.assign(dims->begin(), dims->end());
    SmallVector<Tensor> inputs{all};
    for (Value v : op_->getOperands().drop_front()) {
      if (isa<NoneType>(v.getType())) {
        inputs.push_back(Tensor{});
        continue;
      }
      DenseElementsAttr attr = constantValue(v);
      std::optional<Tensor> t = attr ? tensorFromAttr(attr) : std::nullopt;
      if (!t)
        return std::nullopt;
      inputs.push_back(*t);
    }
    std::optional<Tensor> out = evaluateNode(op_, inputs);
    if (!out)
      return std::nullopt;
    for (int64_t v : out->ints)
      if (ShapedType::isDynamic(v))
        return std::nullopt;
    return out;
  }

  OnnxNodeOp op_;
};

// The type a Reshape or Transpose result has by the values its shape operands are known to
// hold, merged into the type it has: ONNX's own shape inference leaves a Reshape by a computed
// shape unranked, and rotate-half's split point needs the static head size behind it.
Type refinedType(OnnxNodeOp op) {
  if (op->getNumResults() != 1 || op->getNumOperands() == 0)
    return {};
  auto oldType = dyn_cast<TensorType>(op->getResult(0).getType());
  auto input = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  if (!oldType)
    return {};
  SmallVector<int64_t> dims;
  if (op.getOpType() == "Reshape" && op->getNumOperands() == 2) {
    auto entries = shapeEntries(op->getOperand(1));
    if (!entries)
      return {};
    bool allowZero = intAttr(op, "allowzero").value_or(0) != 0;
    for (auto [d, entry] : llvm::enumerate(*entries)) {
      int64_t dim = ShapedType::kDynamic;
      if (entry && *entry > 0)
        dim = *entry;
      else if (entry && *entry == 0 && !allowZero && input && d < input.getShape().size())
        dim = input.getDimSize(d);
      else if (entry && *entry == 0 && allowZero)
        dim = 0;
      dims.push_back(dim);
    }
  } else if (op.getOpType() == "Transpose" && input) {
    SmallVector<int64_t> perm;
    if (auto attr = intsAttr(op, "perm"))
      perm = *attr;
    else
      for (int64_t d = input.getRank() - 1; d >= 0; --d)
        perm.push_back(d);
    if (static_cast<int64_t>(perm.size()) != input.getRank())
      return {};
    for (int64_t p : perm) {
      if (p < 0 || p >= input.getRank())
        return {};
      dims.push_back(input.getDimSize(p));
    }
  } else {
    return {};
  }
  if (auto old = dyn_cast<RankedTensorType>(oldType)) {
    if (old.getRank() != static_cast<int64_t>(dims.size()))
      return {};
    for (auto [d, dim] : llvm::enumerate(dims)) {
      if (!old.isDynamicDim(d)) {
        if (!ShapedType::isDynamic(dim) && dim != old.getDimSize(d))
          return {}; // the two disagree: trust neither
        dim = old.getDimSize(d);
      }
    }
  }
  auto refined = RankedTensorType::get(dims, oldType.getElementType());
  return refined == oldType ? Type() : refined;
}

struct FoldConstantsPass : public hetc::impl::FoldConstantsBase<FoldConstantsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<OnnxNodeOp> nodes;
    func.walk([&](OnnxNodeOp op) { nodes.push_back(op); });
    OpBuilder builder(func.getContext());
    for (OnnxNodeOp op : nodes) {
      if (isNoOpNode(op)) {
        op->getResult(0).replaceAllUsesWith(op->getOperand(0));
        op->erase();
        continue;
      }
      if (Type refined = refinedType(op))
        op->getResult(0).setType(refined);
      std::optional<SmallVector<Tensor>> folded = Evaluator(op).run();
      if (!folded)
        continue;
      builder.setInsertionPoint(op);
      for (auto [result, tensor] : llvm::zip_equal(op->getResults(), *folded)) {
        DenseElementsAttr value = tensorToAttr(tensor);
        auto constant = builder.create<ConstantOp>(op->getLoc(), value.getType(), value);
        result.replaceAllUsesWith(constant.getResult());
      }
      op->erase();
    }
    syncResultTypes(func);
  }
};

} // namespace
