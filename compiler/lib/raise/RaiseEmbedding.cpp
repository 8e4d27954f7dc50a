// Gather(table, ids) on axis 0 of a [vocab, hidden] weight, ids an integer graph input (through
// casts), is the token embedding: hetc.embedding's rows are the step's tokens. Rows looked up by
// anything else are not token rows and stay for the patterns that read them (RoPE tables gathered
// by position_ids). When two graph inputs index tables (GPT-2's input_ids and position_ids), the
// one named input_ids holds the tokens: raising a lookup by the other as a token embedding would
// be a silent wrong answer.
//
// Learned positions (OPT, GPT-2): the token rows plus Gather(positions, index), the index
// computed from the graph inputs alone (position_ids, or OPT's cumsum of the attention_mask, less
// one, sliced past the cache, plus 2). Raised by meaning: evaluated on sample steps, the index
// must be each token's position in its sequence plus one constant offset, which hetc.embedding
// then adds at run time; an index that is anything else is refused at its Gather.
//
// Scaled rows (Gemma's embeddings times sqrt(hidden)): elementwise nodes of the embedding and
// scalar constants alone, read by their values (ScalarFunctions.h), that multiply it by a
// constant become its scale.
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"
#include "raise/SampleInputs.h"
#include "raise/ScalarFunctions.h"

#include "mlir/IR/Builders.h"

namespace hetc {
#define GEN_PASS_DEF_RAISEEMBEDDING
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

// The constant `index` adds to each token's position at every sample step, or an error that
// completes "looks up learned positions by an index that ...". `rows`: the positions table's.
std::optional<int64_t> positionOffset(SampleEvaluator &evaluator, Value index, int64_t rows,
                                      std::string &why) {
  std::optional<int64_t> offset;
  const bool two = !evaluator.fixedBatchOfOne();
  // Several new tokens after cached ones, one after more, a first prefill, two sequences; then
  // the last rows of the table, once the offset is known (an index clamped short of them is not
  // a position). Never a padded sequence: hetc does not pad, so a token's position is its index
  // in its sequence.
  SmallVector<Sample> samples = {Sample{3, 2, 1, 0}, Sample{1, 3, 1, 0}, Sample{2, 0, 1, 0},
                                 Sample{3, 2, two ? 2 : 1, 0}};
  for (size_t n = 0; n < samples.size(); ++n) {
    const Sample s = samples[n];
    std::string error;
    std::optional<Tensor> t = evaluator.evaluate(index, s, error);
    if (!t) {
      why = error;
      return std::nullopt;
    }
    // [batch, seq], or [1, seq] shared by the batch (GPT-2's arange(past, past + S) unsqueezed).
    const bool shape = t->shape.size() == 2 && t->shape[1] == s.seq &&
                       (t->shape[0] == s.batch || t->shape[0] == 1);
    if (t->isFloat() || !shape) {
      why = "does not hold one integer per token, [batch, sequence]" + s.described();
      return std::nullopt;
    }
    for (int64_t k = 0; k < t->size(); ++k) {
      const int64_t position = s.past + k % s.seq;
      if (!offset)
        offset = t->i(k) - position;
      if (t->i(k) - position != *offset || *offset < 0) {
        why = "is not each token's position plus one offset: token " + std::to_string(k % s.seq) +
              " of sequence " + std::to_string(k / s.seq) + " gets " + std::to_string(t->i(k)) +
              s.described();
        return std::nullopt;
      }
    }
    if (n == 3 && *offset + 2 < rows && rows - *offset - 2 > s.past)
      samples.push_back(Sample{2, rows - *offset - 2, 1, 0});
  }
  return offset;
}

// The learned-positions lookup `embedding`'s rows are added to, as (the Add, the Gather), or
// nothing.
std::pair<OnnxNodeOp, OnnxNodeOp> positionsAdd(EmbeddingOp embedding) {
  Value tokens = embedding.getResult();
  if (!tokens.hasOneUse())
    return {};
  auto add = dyn_cast<OnnxNodeOp>(*tokens.getUsers().begin());
  if (!add || add.getOpType() != "Add" || add->getNumOperands() != 2)
    return {};
  OnnxNodeOp gather = producer(add->getOperand(add->getOperand(0) == tokens ? 1 : 0), "Gather");
  if (!gather || gather->getNumOperands() != 2 || intAttr(gather, "axis").value_or(0) != 0)
    return {};
  auto table = skipNoOps(gather->getOperand(0)).getDefiningOp<WeightOp>();
  auto tokensType = cast<RankedTensorType>(embedding.getTable().getType());
  auto tableType = table ? dyn_cast<RankedTensorType>(table.getType()) : RankedTensorType();
  if (!tableType || tableType.getRank() != 2 || table.getTransposed() || table.getColumns() ||
      tableType.getDimSize(1) != tokensType.getDimSize(1) ||
      !computedFromInputs(gather->getOperand(1)))
    return {};
  return {add, gather};
}

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
                                                   /*positions=*/Value(), IntegerAttr(),
                                                   FloatAttr());
      gather->getResult(0).replaceAllUsesWith(embedding.getResult());
      gather->erase();
      FailureOr<EmbeddingOp> positioned = addLearnedPositions(embedding, builder);
      if (failed(positioned))
        return signalPassFailure();
      foldScale(*positioned);
    }
    syncResultTypes(getOperation());
  }

  // The embedding's rows times a constant, when that is all that reads them: the scale moves
  // into the op.
  void foldScale(EmbeddingOp embedding) {
    const ElementwiseChain chain = chainForwardFrom(embedding.getResult());
    if (chain.nodes.empty())
      return;
    std::optional<ScaledSoftCap> form = fitScaledSoftCap(chain);
    if (!form || form->cap != 0)
      return;
    embedding.setScaleAttr(FloatAttr::get(Float32Type::get(&getContext()), form->scale));
    Value result = chain.result;
    result.replaceAllUsesWith(embedding.getResult());
    for (OnnxNodeOp node : llvm::reverse(chain.nodes))
      if (node->use_empty())
        node->erase();
  }

  // The embedding with its learned positions added, when an Add adds them; else itself.
  FailureOr<EmbeddingOp> addLearnedPositions(EmbeddingOp embedding, OpBuilder &builder) {
    auto [add, gather] = positionsAdd(embedding);
    if (!add)
      return embedding;
    SampleEvaluator evaluator(getOperation());
    std::string why;
    const int64_t rows = cast<RankedTensorType>(skipNoOps(gather->getOperand(0)).getType()).getDimSize(0);
    std::optional<int64_t> offset = positionOffset(evaluator, gather->getOperand(1), rows, why);
    if (!offset) {
      gather.emitError() << "node " << describe(gather)
                         << " looks up learned positions by an index that " << why;
      return failure();
    }
    builder.setInsertionPoint(add);
    Value table = skipNoOps(gather->getOperand(0));
    auto positioned = builder.create<EmbeddingOp>(
        add->getLoc(), embedding.getType(), embedding.getTable(), embedding.getIds(), table,
        builder.getI64IntegerAttr(*offset), FloatAttr());
    add->getResult(0).replaceAllUsesWith(positioned.getResult());
    add->erase();
    embedding->erase();
    // The positions' Gather, now unread, is still on the pass's list: the clean-up after raising
    // removes it.
    return positioned;
  }
};

} // namespace
