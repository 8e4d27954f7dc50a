// MatMul(x, w) with w a [K, N] weight is a linear layer. PyTorch's [N, K] layout exported as
// MatMul(x, Transpose(w, [1, 0])) becomes a `transposed` view of the stored weight: no copy.
// An Add of a [N] vector that is the MatMul's only reader is the linear's bias (nn.Linear with
// bias=True exports as MatMul then Add).
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"

#include "mlir/IR/Builders.h"

namespace hetc {
#define GEN_PASS_DEF_RAISELINEAR
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

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
  if (!stored || stored.getTransposed() || (perm && *perm != SmallVector<int64_t>{1, 0}))
    return {};
  auto type = cast<RankedTensorType>(stored.getType());
  if (type.getRank() != 2)
    return {};
  auto viewType =
      RankedTensorType::get({type.getDimSize(1), type.getDimSize(0)}, type.getElementType());
  auto view = builder.create<WeightOp>(stored.getLoc(), viewType, stored.getName());
  view.setTransposed(true);
  return view;
}

// The bias of `matmul`: its only reader is Add(y, b) or Add(b, y) with b a float [n] weight or
// constant. Returns the Add and b, or nothing.
std::pair<OnnxNodeOp, Value> matchBias(OnnxNodeOp matmul, int64_t n) {
  Value y = matmul->getResult(0);
  if (!y.hasOneUse())
    return {};
  auto add = dyn_cast<OnnxNodeOp>(*y.getUsers().begin());
  if (!add || add.getOpType() != "Add" || add->getNumOperands() != 2 || add->getNumResults() != 1)
    return {};
  Value b = skipNoOps(add->getOperand(add->getOperand(0) == y ? 1 : 0));
  auto type = dyn_cast<RankedTensorType>(b.getType());
  if (!type || type.getRank() != 1 || type.getDimSize(0) != n ||
      !isa<FloatType>(type.getElementType()) ||
      !(b.getDefiningOp<WeightOp>() || b.getDefiningOp<ConstantOp>()))
    return {};
  return {add, b};
}

struct RaiseLinearPass : public hetc::impl::RaiseLinearBase<RaiseLinearPass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> matmuls;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.getOpType() == "MatMul" && op->getNumOperands() == 2 && op->getNumResults() == 1)
        matmuls.push_back(op);
    });
    OpBuilder builder(&getContext());
    for (OnnxNodeOp matmul : matmuls) {
      Value x = matmul->getOperand(0);
      auto xType = dyn_cast<ShapedType>(x.getType());
      if (!xType || (xType.hasRank() && xType.getRank() < 2) ||
          skipNoOps(x).getDefiningOp<WeightOp>() || skipNoOps(x).getDefiningOp<ConstantOp>())
        continue;
      builder.setInsertionPoint(matmul);
      Value w = matchWeight(matmul->getOperand(1), builder);
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
      if (!outFeatures)
        resultType =
            withFeatureSize(isa<RankedTensorType>(resultType) ? resultType : x.getType(), n);
      auto [biasAdd, bias] = matchBias(matmul, n);
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
      matmul->erase();
    }
    syncResultTypes(getOperation());
  }
};

} // namespace
