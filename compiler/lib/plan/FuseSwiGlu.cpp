// Fuses a hetc.swiglu into the hetc.linear right before it that computes one of its operands:
// the linear's kernel applies silu(gate) * up to each task's columns as soon as it has written
// them. A planning decision, recorded as attributes (hetc.swiglu on the linear with its buffers
// rewritten, hetc.fused on the swiglu) and carried out by the plan emitter and the runtime; the
// IR's values are unchanged.
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanAttributes.h"

#include "mlir/IR/Builders.h"

namespace hetc {
#define GEN_PASS_DEF_FUSESWIGLU
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;
using namespace hetc::planning;

namespace {

struct FuseSwiGluPass : public hetc::impl::FuseSwiGluBase<FuseSwiGluPass> {
  void runOnOperation() override;
};

void FuseSwiGluPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<SmallVector<PlannedBuffer>> buffers = readPlannedBuffers(module, "hetc-fuse-swiglu");
  if (failed(buffers))
    return signalPassFailure();
  func::FuncOp func = findModelFunction(module);
  if (!func)
    return signalPassFailure();

  Builder b(module.getContext());
  SmallVector<Operation *> ops = collectLlmOps(func);
  for (size_t i = 0; i + 1 < ops.size(); ++i) {
    auto linear = dyn_cast<LinearOp>(ops[i]);
    auto swiglu = dyn_cast<SwiGluOp>(ops[i + 1]);
    if (!linear || !swiglu || linear->hasAttr(kResidual) || linear->hasAttr(kSwiGlu) ||
        swiglu->hasAttr(kFused))
      continue;
    // The swiglu is the linear's only user and runs right after it, in the same sublayer:
    // nothing in between can read or write what the fused op reads and writes.
    if (!linear.getResult().hasOneUse() || swiglu.getGate() == swiglu.getUp())
      continue;
    if (linear->getAttr(kSublayer) != swiglu->getAttr(kSublayer) ||
        linear->getAttr(kLayer) != swiglu->getAttr(kLayer))
      continue;
    auto linearIn = linear->getAttrOfType<DenseI64ArrayAttr>(kBuffersIn);
    auto swigluIn = swiglu->getAttrOfType<DenseI64ArrayAttr>(kBuffersIn);
    auto swigluOut = swiglu->getAttrOfType<DenseI64ArrayAttr>(kBuffersOut);
    if (!linearIn || !swigluIn || !swigluOut || linearIn.size() != 1 || swigluIn.size() != 2 ||
        swigluOut.size() != 1) {
      swiglu.emitOpError("has no hetc.buffers_in and hetc.buffers_out of one linear input and two "
                         "swiglu inputs; run hetc-plan-memory first");
      return signalPassFailure();
    }
    const bool linearIsGate = swiglu.getGate() == linear.getResult();
    const int64_t other = linearIsGate ? swigluIn[1] : swigluIn[0];
    auto input = bufferByteRange(*buffers, linearIn[0]);
    auto otherBytes = bufferByteRange(*buffers, other);
    auto output = bufferByteRange(*buffers, swigluOut[0]);
    if (!input || !otherBytes || !output) {
      swiglu.emitOpError("names a buffer that hetc.buffers does not describe");
      return signalPassFailure();
    }
    // The kernel reads all of x while it writes y, and each task writes its columns of y before
    // it reads the same columns of the other operand: y may share bytes with neither.
    if (byteRangesOverlap(*input, *output) || byteRangesOverlap(*otherBytes, *output))
      continue;
    linear->setAttr(kBuffersIn, b.getDenseI64ArrayAttr({linearIn[0], other}));
    linear->setAttr(kBuffersOut, b.getDenseI64ArrayAttr({swigluOut[0]}));
    linear->setAttr(kSwiGlu, b.getStringAttr(linearIsGate ? kSwiGluGate : kSwiGluUp));
    swiglu->setAttr(kFused, b.getUnitAttr());
  }
}

} // namespace
