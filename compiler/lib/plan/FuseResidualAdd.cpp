// Fuses a residual hetc.add into the hetc.linear before it, as an epilogue of the linear's
// kernel: y = x W + residual. A planning decision, recorded as attributes (hetc.residual on the
// linear with its buffers rewritten, hetc.fused on the add) and carried out by the plan emitter
// and the runtime; the IR's values are unchanged.
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanAttributes.h"

#include "mlir/IR/Builders.h"

namespace hetc {
#define GEN_PASS_DEF_FUSERESIDUALADD
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;
using namespace hetc::planning;

namespace {

struct FuseResidualAddPass : public hetc::impl::FuseResidualAddBase<FuseResidualAddPass> {
  void runOnOperation() override;
};

void FuseResidualAddPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<SmallVector<PlannedBuffer>> buffers =
      readPlannedBuffers(module, "hetc-fuse-residual-add");
  if (failed(buffers))
    return signalPassFailure();
  func::FuncOp func = findModelFunction(module);
  if (!func)
    return signalPassFailure();

  Builder b(module.getContext());
  SmallVector<Operation *> ops = collectLlmOps(func);
  for (size_t i = 0; i + 1 < ops.size(); ++i) {
    auto linear = dyn_cast<LinearOp>(ops[i]);
    auto add = dyn_cast<AddOp>(ops[i + 1]);
    if (!linear || !add || linear->hasAttr(kResidual) || add->hasAttr(kFused))
      continue;
    // The kernels add a residual in their epilogue, before a bias could be: fusing would change
    // how (x W^T + b) + r rounds.
    if (linear.getBias())
      continue;
    // The add is the linear's only user and runs right after it, in the same sublayer: nothing
    // in between can read or write what the fused op reads and writes.
    if (!linear.getResult().hasOneUse() || *linear.getResult().user_begin() != add.getOperation())
      continue;
    if (linear->getAttr(kSublayer) != add->getAttr(kSublayer) ||
        linear->getAttr(kLayer) != add->getAttr(kLayer))
      continue;
    auto linearIn = linear->getAttrOfType<DenseI64ArrayAttr>(kBuffersIn);
    auto addIn = add->getAttrOfType<DenseI64ArrayAttr>(kBuffersIn);
    auto addOut = add->getAttrOfType<DenseI64ArrayAttr>(kBuffersOut);
    if (!linearIn || !addIn || !addOut || linearIn.size() != 1 || addIn.size() != 2 ||
        addOut.size() != 1) {
      add.emitOpError("has no hetc.buffers_in and hetc.buffers_out of one linear input and two "
                      "add inputs; run hetc-plan-memory first");
      return signalPassFailure();
    }
    const int64_t residual = add.getLhs() == linear.getResult() ? addIn[1] : addIn[0];
    auto input = bufferByteRange(*buffers, linearIn[0]);
    auto output = bufferByteRange(*buffers, addOut[0]);
    if (!input || !output) {
      add.emitOpError("names a buffer that hetc.buffers does not describe");
      return signalPassFailure();
    }
    // The kernel reads all of x while it writes y: they must not share bytes.
    if (byteRangesOverlap(*input, *output))
      continue;
    linear->setAttr(kBuffersIn, b.getDenseI64ArrayAttr({linearIn[0], residual}));
    linear->setAttr(kBuffersOut, b.getDenseI64ArrayAttr({addOut[0]}));
    linear->setAttr(kResidual, b.getUnitAttr());
    add->setAttr(kFused, b.getUnitAttr());
  }
}

} // namespace
