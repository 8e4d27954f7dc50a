// Fuses the two hetc.rope ops that rotate an attention's q and k into the attention: the plan's
// attention rotates q and k itself, per row, right before it writes K into the KV cache (its
// append phase), so the rotated K goes straight into the cache. A planning decision, recorded as
// attributes (hetc.rope on the attention, hetc.fused on the ropes) and carried out by the plan
// emitter and the runtime; the IR's values are unchanged.
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanAttributes.h"

#include "mlir/IR/Builders.h"

namespace hetc {
#define GEN_PASS_DEF_FUSEROPEINTOATTENTION
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;
using namespace hetc::planning;

namespace {

struct FuseRopeIntoAttentionPass
    : public hetc::impl::FuseRopeIntoAttentionBase<FuseRopeIntoAttentionPass> {
  void runOnOperation() override;
};

// The rope producing `value` when the attention is its only reader and it lies in the
// attention's layer and sublayer, rotating `heads` heads of the attention's head_dim.
RopeOp fusableRope(Value value, AttentionOp attention, int64_t heads) {
  auto rope = value.getDefiningOp<RopeOp>();
  if (!rope || !value.hasOneUse() || rope->hasAttr(kFused))
    return nullptr;
  if (rope->getAttr(kSublayer) != attention->getAttr(kSublayer) ||
      rope->getAttr(kLayer) != attention->getAttr(kLayer))
    return nullptr;
  if (rope.getHeads() != heads || rope.getHeadDim() != attention.getHeadDim())
    return nullptr;
  return rope;
}

void FuseRopeIntoAttentionPass::runOnOperation() {
  func::FuncOp func = findModelFunction(getOperation());
  if (!func)
    return signalPassFailure();
  Builder b(&getContext());
  func.walk([&](AttentionOp attention) {
    if (attention->hasAttr(kRope) || attention.getQ() == attention.getK())
      return;
    RopeOp q = fusableRope(attention.getQ(), attention, attention.getHeads());
    RopeOp k = fusableRope(attention.getK(), attention, attention.getKvHeads());
    // One rotation for both: the same positions and frequencies.
    if (!q || !k || q.getPositions() != k.getPositions() || q.getInvFreq() != k.getInvFreq() ||
        q.getRotatedColumns() != k.getRotatedColumns() || q.getInterleaved() != k.getInterleaved())
      return;
    // Each rope rotates its buffer in place; the attention then reads those same buffers.
    auto qIn = q->getAttrOfType<DenseI64ArrayAttr>(kBuffersIn);
    auto qOut = q->getAttrOfType<DenseI64ArrayAttr>(kBuffersOut);
    auto kIn = k->getAttrOfType<DenseI64ArrayAttr>(kBuffersIn);
    auto kOut = k->getAttrOfType<DenseI64ArrayAttr>(kBuffersOut);
    auto attentionIn = attention->getAttrOfType<DenseI64ArrayAttr>(kBuffersIn);
    if (!qIn || !qOut || !kIn || !kOut || !attentionIn || qIn.size() != 1 || qOut.size() != 1 ||
        kIn.size() != 1 || kOut.size() != 1 || attentionIn.size() != 3) {
      attention.emitOpError("or the ropes before it have no hetc.buffers_in and "
                            "hetc.buffers_out; run hetc-plan-memory first");
      return signalPassFailure();
    }
    if (qIn[0] != qOut[0] || kIn[0] != kOut[0] || attentionIn[0] != qOut[0] ||
        attentionIn[1] != kOut[0])
      return;
    attention->setAttr(kRope, b.getUnitAttr());
    q->setAttr(kFused, b.getUnitAttr());
    k->setAttr(kFused, b.getUnitAttr());
  });
}

} // namespace
