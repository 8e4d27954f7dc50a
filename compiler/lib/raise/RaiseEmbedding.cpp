// Gather(table, ids) on axis 0 of a [vocab, hidden] weight with integer ids is a token embedding.
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"

#include "mlir/IR/Builders.h"

namespace hetc {
#define GEN_PASS_DEF_RAISEEMBEDDING
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

struct RaiseEmbeddingPass : public hetc::impl::RaiseEmbeddingBase<RaiseEmbeddingPass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> gathers;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.getOpType() == "Gather" && op->getNumOperands() == 2 && op->getNumResults() == 1)
        gathers.push_back(op);
    });
    OpBuilder builder(&getContext());
    for (OnnxNodeOp gather : gathers) {
      auto table = skipNoOps(gather->getOperand(0)).getDefiningOp<WeightOp>();
      Value ids = gather->getOperand(1);
      auto tableType = table ? dyn_cast<RankedTensorType>(table.getType()) : RankedTensorType();
      auto idsType = dyn_cast<ShapedType>(ids.getType());
      if (!tableType || tableType.getRank() != 2 || !idsType ||
          !isa<IntegerType>(idsType.getElementType()) || intAttr(gather, "axis").value_or(0) != 0)
        continue;
      int64_t hidden = tableType.getDimSize(1);
      Type resultType = gather->getResult(0).getType();
      std::optional<int64_t> features = featureSize(resultType);
      if (features && *features != hidden)
        continue;
      if (!features) {
        auto idsRanked = dyn_cast<RankedTensorType>(ids.getType());
        resultType = withFeatureSize(resultType, hidden, idsRanked ? idsRanked.getRank() + 1 : 3);
      }
      builder.setInsertionPoint(gather);
      auto embedding = builder.create<EmbeddingOp>(gather->getLoc(), resultType, table, ids);
      gather->getResult(0).replaceAllUsesWith(embedding.getResult());
      gather->erase();
    }
    syncResultTypes(getOperation());
  }
};

} // namespace
