// Add of two LLM-level activations of one shape (the residual stream) is hetc.add.
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"

#include "mlir/IR/Builders.h"

namespace hetc {
#define GEN_PASS_DEF_RAISERESIDUALADD
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

bool isActivation(Value v) {
  Operation *def = v.getDefiningOp();
  return def && isa<LlmOp>(def) && !isa<LmHeadOp>(def) && def->getResult(0) == v;
}

struct RaiseResidualAddPass : public hetc::impl::RaiseResidualAddBase<RaiseResidualAddPass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> adds;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.getOpType() == "Add" && op->getNumOperands() == 2 && op->getNumResults() == 1)
        adds.push_back(op);
    });
    OpBuilder builder(&getContext());
    for (OnnxNodeOp add : adds) {
      // Tokens flattened to rows around an addmm (OPT) are the activations' rows as they are.
      Value lhs = throughRowReshapes(skipNoOps(add->getOperand(0)));
      Value rhs = throughRowReshapes(skipNoOps(add->getOperand(1)));
      if (!isActivation(lhs) || !isActivation(rhs))
        continue;
      auto lt = dyn_cast<RankedTensorType>(lhs.getType());
      auto rt = dyn_cast<RankedTensorType>(rhs.getType());
      // Element types may differ where shape inference lost a float16 graph's types (they read
      // as f32): every LLM op computes in float32 whatever the source's element type.
      if (!lt || !rt || lt.getRank() < 2 || rt.getRank() < 2 ||
          !isa<FloatType>(lt.getElementType()) || !isa<FloatType>(rt.getElementType()))
        continue;
      std::optional<int64_t> fl = featureSize(lt), fr = featureSize(rt);
      if (!fl || !fr || *fl != *fr)
        continue;
      // Same shape or broadcasting is not a residual: every known dimension must agree. Ranks
      // may differ where one side's tokens are flattened to rows ([B * S, F] and [B, S, F], the
      // same rows: OPT's feed-forward, GPT-2's Conv1D).
      bool same = true;
      for (int64_t d = 0; d < lt.getRank() && lt.getRank() == rt.getRank(); ++d)
        if (!lt.isDynamicDim(d) && !rt.isDynamicDim(d) && lt.getDimSize(d) != rt.getDimSize(d))
          same = false;
      if (!same)
        continue;
      // The result keeps the tokens' dimensions: those of the side with more of them.
      RankedTensorType tokens = lt.getRank() >= rt.getRank() ? lt : rt;
      Type resultType = add->getResult(0).getType();
      if (!isa<RankedTensorType>(resultType) || featureSize(resultType) != fl ||
          cast<RankedTensorType>(resultType).getRank() != tokens.getRank())
        resultType = tokens;
      builder.setInsertionPoint(add);
      auto residual = builder.create<AddOp>(add->getLoc(), resultType, lhs, rhs);
      add->getResult(0).replaceAllUsesWith(residual.getResult());
      add->erase();
      foldRowReshapes(getOperation());
    }
    syncResultTypes(getOperation());
  }
};

} // namespace
