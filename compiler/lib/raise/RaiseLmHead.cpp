// The linear producing the logits output (the result named "logits", else the first result)
// is the lm_head: at run time only the rows whose logits are asked for are computed.
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"

#include "mlir/IR/Builders.h"

namespace hetc {
#define GEN_PASS_DEF_RAISELMHEAD
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

struct RaiseLmHeadPass : public hetc::impl::RaiseLmHeadBase<RaiseLmHeadPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.getNumResults() == 0)
      return;
    unsigned index = 0;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto name = func.getResultAttrOfType<StringAttr>(i, "hetc.name"))
        if (name.getValue() == "logits")
          index = i;
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    auto linear = skipNoOps(ret.getOperand(index)).getDefiningOp<LinearOp>();
    if (!linear)
      return;
    if (linear.getBias()) {
      linear.emitError() << "the linear that produces the logits adds a bias, which hetc.lm_head "
                            "does not have";
      return signalPassFailure();
    }
    OpBuilder builder(linear);
    auto head =
        builder.create<LmHeadOp>(linear.getLoc(), linear.getType(), linear.getX(), linear.getW());
    linear.getResult().replaceAllUsesWith(head.getResult());
    linear.erase();
  }
};

} // namespace
