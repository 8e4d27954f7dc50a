// After raising and clean-up, every op the function's results depend on must be an LLM op, a
// weight or a constant. Each unraised node that feeds raised code or an output directly (the
// edge of what was not understood) gets one error naming it; nodes behind it are not repeated.
// Where that computation starts from the result of an LLM op, the error also names the first
// node that reads one: where recognition stopped, usually the cause (a bias after a projection,
// a rotation of another form), rather than the output it finally reaches.
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"

#include "llvm/ADT/SetVector.h"

namespace hetc {
#define GEN_PASS_DEF_CHECKRAISED
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

bool isRaised(Operation *op) { return isa<LlmOp, WeightOp, ConstantOp, func::ReturnOp>(op); }

// The first op, in program order, of the unraised computation behind `edge` that reads the values
// of an LLM op's result; null when it reads none.
Operation *recognitionStop(Operation *edge) {
  llvm::SetVector<Operation *> cone;
  SmallVector<Operation *> worklist{edge};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!cone.insert(op))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp(); def && !isRaised(def))
        worklist.push_back(def);
  }
  // A node that reads only dimensions of an activation is never the cause.
  Operation *first = nullptr;
  for (Operation *op : cone)
    if (!readsDimensionsOnly(op) &&
        llvm::any_of(op->getOperands(),
                     [](Value v) { return v.getDefiningOp() && isa<LlmOp>(v.getDefiningOp()); }) &&
        (!first || op->isBeforeInBlock(first)))
      first = op;
  return first;
}

struct CheckRaisedPass : public hetc::impl::CheckRaisedBase<CheckRaisedPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto ret = dyn_cast<func::ReturnOp>(func.getBody().front().getTerminator());
    if (!ret)
      return;

    // Everything the results depend on.
    llvm::SetVector<Operation *> needed;
    SmallVector<Value> worklist(ret.getOperands());
    while (!worklist.empty()) {
      Operation *def = worklist.pop_back_val().getDefiningOp();
      if (!def || !needed.insert(def))
        continue;
      for (Value operand : def->getOperands())
        worklist.push_back(operand);
    }

    bool failed = false;
    for (Operation &op : func.getBody().front()) {
      if (isRaised(&op) || !needed.contains(&op))
        continue;
      // Only the edge: an unraised op read by raised code or by the return.
      Operation *reader = nullptr;
      unsigned output = 0;
      for (Value result : op.getResults())
        for (OpOperand &use : result.getUses())
          if (isRaised(use.getOwner()) && !reader) {
            reader = use.getOwner();
            output = use.getOperandNumber();
          }
      if (!reader)
        continue;
      std::string feeds;
      if (isa<func::ReturnOp>(reader)) {
        auto name = func.getResultAttrOfType<StringAttr>(output, "hetc.name");
        feeds = name ? "the output '" + name.getValue().str() + "'"
                     : "output #" + std::to_string(output);
      } else {
        feeds = reader->getName().getStringRef().str();
      }
      std::string subject = isa<OnnxNodeOp>(op) ? "node " + describe(&op) : describe(&op);
      InFlightDiagnostic error = op.emitError()
                                 << subject << " is not part of a computation hetc recognises: its "
                                 << "result feeds " << feeds << " but no raising pattern matched";
      // A norm over the last dimension of a [batch, sequence, heads, head_dim] value normalizes
      // each head on its own (Qwen3's q_norm and k_norm).
      if (isa<RmsNormOp, LayerNormOp>(reader) && rankOf(reader->getOperand(0)) == 4)
        error << " (" << reader->getName().getStringRef()
              << " over each head of a [batch, sequence, heads, head_dim] value: a per-head norm "
                 "of q or k; hetc runs an rms_norm of each head of a projection split into heads "
                 "(Qwen3's q_norm and k_norm), not this one)";
      if (Operation *stop = recognitionStop(&op); stop && stop != &op) {
        Operation *read = nullptr;
        for (Value v : stop->getOperands())
          if (v.getDefiningOp() && isa<LlmOp>(v.getDefiningOp()) && !read)
            read = v.getDefiningOp();
        error << "; recognition stops at node " << describe(stop) << ", the first that reads a "
              << read->getName().getStringRef() << " result";
        if (auto name = dyn_cast<NameLoc>(read->getLoc()))
          error << " (raised from node '" << name.getName().getValue() << "')";
      }
      failed = true;
    }
    if (failed)
      signalPassFailure();
  }
};

} // namespace
