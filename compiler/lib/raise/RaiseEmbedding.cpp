// Gather(table, ids) on axis 0 of a [vocab, hidden] weight, ids an integer graph input (through
// casts), is the token embedding: hetc.embedding's rows are the step's tokens. Rows looked up by
// anything else are not token rows and stay for the patterns that read them (RoPE tables gathered
// by position_ids) or for CheckRaised to name (OPT's learned positions). When two graph inputs
// index tables (GPT-2's input_ids and position_ids), the one named input_ids holds the tokens:
// raising a lookup by the other as a token embedding would be a silent wrong answer.
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
    func::FuncOp func = getOperation();
    // The graph input of a Gather's ids, through casts and views; null when they are computed.
    auto inputOf = [](Value ids) { return graphInputThroughViews(ids); };
    auto nameOf = [&](BlockArgument arg) -> std::string {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "hetc.name");
      return name ? name.getValue().str() : "#" + std::to_string(arg.getArgNumber());
    };
    BlockArgument tokens;
    for (OnnxNodeOp gather : gathers)
      if (BlockArgument arg = inputOf(gather->getOperand(1));
          arg && skipNoOps(gather->getOperand(0)).getDefiningOp<WeightOp>() &&
          (!tokens || nameOf(arg) == "input_ids"))
        tokens = arg;
    for (OnnxNodeOp gather : gathers) {
      auto table = skipNoOps(gather->getOperand(0)).getDefiningOp<WeightOp>();
      Value ids = gather->getOperand(1);
      BlockArgument input = inputOf(ids);
      if (!input)
        continue;
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
      if (input != tokens)
        continue;
      if (!features) {
        auto idsRanked = dyn_cast<RankedTensorType>(ids.getType());
        resultType = withFeatureSize(resultType, hidden, idsRanked ? idsRanked.getRank() + 1 : 3);
      }
      builder.setInsertionPoint(gather);
      auto embedding = builder.create<EmbeddingOp>(gather->getLoc(), resultType, table, ids,
                                                   /*positions=*/Value(), IntegerAttr());
      gather->getResult(0).replaceAllUsesWith(embedding.getResult());
      gather->erase();
    }
    syncResultTypes(getOperation());
  }
};

} // namespace
