// Add of two LLM-level activations of one shape (the residual stream) is hetc.add.
//
// Before: a Slice that keeps an LLM activation's last position only, after every attention
// (ONNX Runtime's first-step decoder runs the last layer's feed-forward and the head on the last
// token alone), is the activation itself. hetc computes each row of a step as the row it is, and
// reads the last row's logits; no attention reads past the Slice, so no other row's value
// depends on it.
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

// Slice(x, starts [-1], ends, axes [1], steps) over a [batch, sequence, features] x that keeps
// position -1 alone: ends past the end with step 1, or ends -2 with step -1.
bool keepsLastPosition(OnnxNodeOp slice) {
  if (slice.getOpType() != "Slice" || slice->getNumOperands() < 4 || rankOf(slice->getOperand(0)) != 3)
    return false;
  std::optional<SmallVector<int64_t>> starts = intValues(slice->getOperand(1)),
                                      ends = intValues(slice->getOperand(2)),
                                      axes = intValues(slice->getOperand(3));
  std::optional<SmallVector<int64_t>> steps =
      slice->getNumOperands() > 4 ? intValues(slice->getOperand(4)) : SmallVector<int64_t>{1};
  if (!starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1 ||
      axes->size() != 1 || steps->size() != 1 || (*starts)[0] != -1 ||
      ((*axes)[0] != 1 && (*axes)[0] != -2))
    return false;
  return ((*steps)[0] == 1 && (*ends)[0] >= (int64_t{1} << 31) - 1) ||
         ((*steps)[0] == -1 && (*ends)[0] == -2);
}

// Whether an attention reads `v`, through any number of nodes.
bool attentionDownstream(Value v) {
  SmallVector<Value> worklist{v};
  DenseSet<Operation *> seen;
  while (!worklist.empty()) {
    for (Operation *user : worklist.pop_back_val().getUsers()) {
      if (isa<AttentionOp>(user))
        return true;
      if (seen.insert(user).second)
        llvm::append_range(worklist, user->getResults());
    }
  }
  return false;
}

bool dropLastPositionSlices(func::FuncOp func) {
  SmallVector<OnnxNodeOp> slices;
  func.walk([&](OnnxNodeOp op) {
    if (keepsLastPosition(op) && isActivation(skipNoOps(op->getOperand(0))) &&
        !attentionDownstream(op->getResult(0)))
      slices.push_back(op);
  });
  for (OnnxNodeOp slice : slices) {
    Value rows = skipNoOps(slice->getOperand(0));
    SmallVector<Operation *> readers(slice->getResult(0).getUsers());
    slice->getResult(0).replaceAllUsesWith(rows);
    slice->erase();
    // What read the one position read every row now: a sequence of 1 in their types is stale.
    DenseSet<Operation *> seen;
    while (!readers.empty()) {
      Operation *reader = readers.pop_back_val();
      if (!seen.insert(reader).second || isa<func::ReturnOp>(reader))
        continue;
      for (Value result : reader->getResults()) {
        auto type = dyn_cast<RankedTensorType>(result.getType());
        if (!type || type.getRank() != 3 || type.getDimSize(1) != 1)
          continue;
        SmallVector<int64_t> shape(type.getShape());
        shape[1] = ShapedType::kDynamic;
        result.setType(RankedTensorType::get(shape, type.getElementType()));
        llvm::append_range(readers, result.getUsers());
      }
    }
  }
  if (!slices.empty())
    syncResultTypes(func);
  return !slices.empty();
}

struct RaiseResidualAddPass : public hetc::impl::RaiseResidualAddBase<RaiseResidualAddPass> {
  void runOnOperation() override {
    // A Slice or a view may read a residual add, and an add either: until none is left.
    while (dropLastPositionSlices(getOperation()) | foldActivationViews(getOperation()) |
           raiseAdds())
      ;
    syncResultTypes(getOperation());
  }

  // Whether an add was raised.
  bool raiseAdds() {
    bool raised = false;
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
      raised = true;
    }
    return raised;
  }
};

} // namespace
