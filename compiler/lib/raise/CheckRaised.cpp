// After raising and clean-up, every op the function's results depend on must be an LLM op, a
// weight or a constant. Each unraised node that feeds raised code or an output directly (the
// edge of what was not understood) gets one error naming it; nodes behind it are not repeated.
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
      op.emitError() << subject << " is not part of a computation hetc recognises: its result "
                     << "feeds " << feeds << " but no raising pattern matched";
      failed = true;
    }
    if (failed)
      signalPassFailure();
  }
};

} // namespace
