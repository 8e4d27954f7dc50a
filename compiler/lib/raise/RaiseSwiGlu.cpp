// `silu(gate) * up` with silu(g) = g * Sigmoid(g), every Mul in either operand order; and
// `f(gate) * up` with f a hetc.activation read by nothing else (a GELU: Gemma's GeGLU, raised by
// its values), so the pass runs again after RaiseActivation.
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"

#include "mlir/IR/Builders.h"

namespace hetc {
#define GEN_PASS_DEF_RAISESWIGLU
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

// The gate g of `g * sigmoid(g)`, or null.
Value matchSilu(Value v) {
  OnnxNodeOp mul = producer(v, "Mul");
  if (!mul)
    return {};
  Value gate;
  matchCommutative(mul, [&](Value g, Value s) {
    OnnxNodeOp sigmoid = producer(s, "Sigmoid");
    if (!sigmoid || skipNoOps(sigmoid->getOperand(0)) != skipNoOps(g))
      return false;
    gate = skipNoOps(g);
    return true;
  });
  return gate;
}

struct RaiseSwiGluPass : public hetc::impl::RaiseSwiGluBase<RaiseSwiGluPass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> muls;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.getOpType() == "Mul" && op->getNumOperands() == 2 && op->getNumResults() == 1)
        muls.push_back(op);
    });
    OpBuilder builder(&getContext());
    for (OnnxNodeOp mul : muls) {
      Value gate, up;
      ActivationOp gateActivation;
      matchCommutative(mul, [&](Value s, Value u) {
        Value g = matchSilu(s);
        auto activation = skipNoOps(s).getDefiningOp<ActivationOp>();
        if (!g && activation && activation.getFunction() != "relu" &&
            activation->hasOneUse() && skipNoOps(s).hasOneUse())
          g = activation.getX();
        else
          activation = {};
        if (!g)
          return false;
        // Both must be activations of one shape: no broadcasting of a constant or a weight.
        auto gt = dyn_cast<RankedTensorType>(g.getType());
        auto ut = dyn_cast<RankedTensorType>(skipNoOps(u).getType());
        if (!gt || !ut || gt.getRank() != ut.getRank() || gt.getRank() < 2)
          return false;
        std::optional<int64_t> fg = featureSize(gt), fu = featureSize(ut);
        if (fg && fu && *fg != *fu)
          return false;
        if (skipNoOps(u).getDefiningOp<WeightOp>() || skipNoOps(u).getDefiningOp<ConstantOp>())
          return false;
        gate = g;
        up = skipNoOps(u);
        gateActivation = activation;
        return true;
      });
      if (!gate)
        continue;
      Type resultType = mul->getResult(0).getType();
      std::optional<int64_t> features = featureSize(gate.getType());
      if (!features)
        features = featureSize(up.getType());
      if (!isa<RankedTensorType>(resultType) || !featureSize(resultType))
        resultType = features ? withFeatureSize(gate.getType(), *features) : gate.getType();
      builder.setInsertionPoint(mul);
      StringAttr function;
      if (gateActivation && gateActivation.getFunction() != "silu")
        function = gateActivation.getFunctionAttr();
      auto swiglu = builder.create<SwiGluOp>(mul->getLoc(), resultType, gate, up, function);
      mul->getResult(0).replaceAllUsesWith(swiglu.getResult());
      mul->erase();
      // The gate's activation (and any no-op after it) now unread.
      if (gateActivation && gateActivation->use_empty())
        gateActivation->erase();
    }
    syncResultTypes(getOperation());
  }
};

} // namespace
