// The linear producing the logits output (the result named "logits", else the first result)
// is the lm_head: at run time only the rows whose logits are asked for are computed. Elementwise
// nodes between it and the output that soft-cap the logits, c * tanh(x / c) (Gemma 2's
// final_logit_softcapping), are read by their values (ScalarFunctions.h) and become its softcap.
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"
#include "raise/ScalarFunctions.h"

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
    Value logits = skipNoOps(ret.getOperand(index));
    std::optional<ElementwiseChain> chain =
        chainBackTo(logits, [](Value v) { return bool(skipNoOps(v).getDefiningOp<LinearOp>()); });
    if (!chain)
      return;
    auto linear = skipNoOps(chain->input).getDefiningOp<LinearOp>();
    FloatAttr softcap;
    if (!chain->nodes.empty()) {
      // A linear read elsewhere too is not the lm_head.
      if (!chain->input.hasOneUse())
        return;
      std::optional<ScaledSoftCap> form = fitScaledSoftCap(*chain);
      if (!form || form->cap == 0 || !withinRounding(form->scale, 1.0)) {
        chain->nodes.front().emitError()
            << "node " << describe(chain->nodes.front())
            << " starts a computation of the logits from the lm_head that is not a soft-cap "
               "c * tanh(x / c)"
            << (form ? " (scale " + printed(form->scale, 7) + ", cap " + printed(form->cap) + ")"
                     : std::string());
        return signalPassFailure();
      }
      softcap = FloatAttr::get(Float32Type::get(&getContext()), form->cap);
    }
    OpBuilder builder(linear);
    auto head = builder.create<LmHeadOp>(linear.getLoc(), linear.getType(), linear.getX(),
                                         linear.getW(), linear.getBias(), softcap);
    linear.getResult().replaceAllUsesWith(head.getResult());
    linear.erase();
    // The soft-cap's nodes now compute what the lm_head returns: the output reads it directly.
    if (!chain->nodes.empty()) {
      Value capped = chain->result;
      capped.replaceAllUsesWith(head.getResult());
      for (OnnxNodeOp node : llvm::reverse(chain->nodes))
        if (node->use_empty())
          node->erase();
    }
  }
};

} // namespace
