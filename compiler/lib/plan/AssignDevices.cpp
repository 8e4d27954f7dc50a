// The cost model's device plan recorded in the IR: each op's device per stage, each weight's
// tier, and the module's hetc.device_plan (see PlanAttributes.h and DeviceAssignment.h).
#include "hetc/compiler/DeviceAssignment.h"
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanAttributes.h"

#include "mlir/IR/Builders.h"

#include <string>

namespace hetc {
#define GEN_PASS_DEF_ASSIGNDEVICES
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;
using namespace hetc::planning;
using compiler::DeviceAssignment;
using compiler::LayerSpan;
using compiler::Policy;
using compiler::Stage;
using compiler::StageAssignment;
using compiler::Tier;

namespace {

// Which of the cost model's sublayers an op of a decoder layer computes, from its place in its
// sublayer's dataflow: the norm, projections and RoPE before attention are QKV; the projection
// reading attention's output and the residual add after it are OUT; in the feed-forward
// sublayer, the down projection (fc2) reading the swiglu (activation) and the add after it are
// FC2, the rest FC1. A norm of the output projection's result (Gemma 2's norms after the
// sublayers) goes with that projection.
FailureOr<StringRef> costSublayerOf(Operation *op, plan::SublayerKindDef kind) {
  const bool attention = kind == plan::SublayerKindDef::Attention;
  auto wrongSublayer = [&]() -> FailureOr<StringRef> {
    return op->emitOpError() << "cannot be placed: the cost model has no sublayer for it in "
                             << (attention ? "an attention" : "a feed-forward") << " sublayer";
  };
  auto named = [](StringRef name) { return FailureOr<StringRef>(name); };
  if (isa<RmsNormOp, LayerNormOp>(op)) {
    auto linear = op->getOperand(0).getDefiningOp<LinearOp>();
    Operation *input = linear ? linear.getX().getDefiningOp() : nullptr;
    if (input && isa<AttentionOp, SwiGluOp, ActivationOp>(input))
      return named(attention ? "out" : "fc2");
    return named(attention ? "qkv" : "fc1");
  }
  if (isa<RopeOp>(op))
    return attention ? named("qkv") : wrongSublayer();
  if (isa<AttentionOp>(op))
    return attention ? named(kAttentionCostSublayers) : wrongSublayer();
  if (auto linear = dyn_cast<LinearOp>(op)) {
    Operation *producer = linear.getX().getDefiningOp();
    if (attention)
      return named(producer && isa<AttentionOp>(producer) ? "out" : "qkv");
    return named(producer && isa<SwiGluOp, ActivationOp>(producer) ? "fc2" : "fc1");
  }
  if (isa<SwiGluOp, ActivationOp>(op))
    return attention ? wrongSublayer() : named("fc1");
  if (isa<AddOp>(op))
    return named(attention ? "out" : "fc2");
  return wrongSublayer();
}

// The weight and constant operands an op reads.
SmallVector<Operation *> weightProducers(Operation *op) {
  SmallVector<Operation *> producers;
  for (Value operand : op->getOperands())
    if (Operation *producer = operand.getDefiningOp())
      if (isa<WeightOp, ConstantOp>(producer))
        producers.push_back(producer);
  return producers;
}

struct AssignDevicesPass : public hetc::impl::AssignDevicesBase<AssignDevicesPass> {
  using AssignDevicesBase::AssignDevicesBase;
  void runOnOperation() override;
  FailureOr<DeviceAssignment> plan(ModuleOp module, const ModelAttrs &model,
                                   const BoundsAttrs &bounds);
  LogicalResult place(func::FuncOp func, const DeviceAssignment &assignment, uint32_t layers);
};

FailureOr<DeviceAssignment> AssignDevicesPass::plan(ModuleOp module, const ModelAttrs &model,
                                                    const BoundsAttrs &bounds) {
  compiler::ModelShape shape = model.shape();
  shape.name = "model";
  shape.maxContext = static_cast<uint32_t>(std::min<int64_t>(bounds.maxSeq, UINT32_MAX));

  if (timing != "serial" && timing != "overlapped")
    return module.emitError() << "hetc-assign-devices: timing '" << timing
                              << "' is neither serial nor overlapped";
  compiler::Placement placementChoice;
  if (!compiler::parsePlacement(placement, placementChoice))
    return module.emitError() << "hetc-assign-devices: placement '" << placement
                              << "' is not one of auto, ddr, cxl, helm, all-cpu";

  if (target == "host")
    return compiler::cpuOnlyAssignment("host", shape.layers, bounds.maxBatch, bounds.maxSeq,
                                       bounds.maxStepTokens);

  Result<compiler::Target> found = compiler::findTarget(target);
  if (!found)
    return module.emitError() << "hetc-assign-devices: " << found.message();
  compiler::DeviceAssignmentRequest request;
  request.model = &shape;
  request.target = &*found;
  request.maxBatch = bounds.maxBatch;
  request.maxSeq = bounds.maxSeq;
  request.maxStepTokens = bounds.maxStepTokens;
  request.timing = timing == "overlapped" ? compiler::Timing::Overlapped : compiler::Timing::Serial;
  request.placement = placementChoice;
  request.residentLayers = residentLayers;
  Result<DeviceAssignment> assignment = compiler::assignDevices(request);
  if (!assignment)
    return module.emitError() << "hetc-assign-devices: " << assignment.message();
  return std::move(*assignment);
}

LogicalResult AssignDevicesPass::place(func::FuncOp func, const DeviceAssignment &assignment,
                                       uint32_t layers) {
  Builder b(func.getContext());
  StringAttr cpu = b.getStringAttr(kCpuDevice), gpu = b.getStringAttr(kGpuDevice);
  auto devices = [&](StringAttr prefill, StringAttr decode) {
    return b.getDictionaryAttr(
        {b.getNamedAttr(kDecodeStage, decode), b.getNamedAttr(kPrefillStage, prefill)});
  };
  // A weight read from the GPU by any op is kept there; the others stay in their host tier.
  llvm::DenseMap<Operation *, Tier> tiers;
  auto readFrom = [&](Operation *weight, Tier tier) {
    auto [it, inserted] = tiers.try_emplace(weight, tier);
    if (!inserted && tier == Tier::Gpu)
      it->second = Tier::Gpu;
  };

  for (Operation *op : collectLlmOps(func)) {
    auto layer = op->getAttrOfType<IntegerAttr>(kLayer);
    if (!layer) {
      // The embedding, the final norm and lm_head: counted in memory, not timed; on the CPU.
      op->setAttr(kDevice, devices(cpu, cpu));
      op->removeAttr(kCostSublayer);
      for (Operation *weight : weightProducers(op))
        readFrom(weight, assignment.weightHostTier);
      continue;
    }
    if (layer.getInt() < 0 || layer.getInt() >= layers)
      return op->emitOpError() << "is in layer " << layer.getInt() << " but hetc.model has "
                               << layers << " layers";
    if (!op->hasAttr(kSublayer))
      return op->emitOpError("has a hetc.layer but no hetc.sublayer kind; run "
                             "hetc-group-sublayers first");
    FailureOr<SublayerAttrs> sublayer = SublayerAttrs::read(op);
    if (failed(sublayer))
      return failure();
    FailureOr<StringRef> name = costSublayerOf(op, sublayer->kind);
    if (failed(name))
      return failure();
    const unsigned bits = *costSublayerBits(*name);
    const unsigned first = static_cast<unsigned>(__builtin_ctz(bits));
    const uint32_t index = static_cast<uint32_t>(layer.getInt());
    auto deviceIn = [&](const StageAssignment &stage) {
      return stage.spanOf(index).policy.onCpu(first) ? cpu : gpu;
    };
    op->setAttr(kDevice, devices(deviceIn(assignment.prefill), deviceIn(assignment.decode)));
    op->setAttr(kCostSublayer, b.getStringAttr(*name));
    for (Operation *weight : weightProducers(op))
      readFrom(weight, assignment.weightTier(index, first));
  }
  for (auto [weight, tier] : tiers)
    weight->setAttr(kTier, b.getStringAttr(tierAttrName(tier)));
  return success();
}

void AssignDevicesPass::runOnOperation() {
  ModuleOp module = getOperation();
  func::FuncOp func = findModelFunction(module);
  if (!func)
    return signalPassFailure();
  FailureOr<ModelAttrs> model = ModelAttrs::read(module, "hetc-assign-devices");
  if (failed(model))
    return signalPassFailure();
  FailureOr<BoundsAttrs> bounds = BoundsAttrs::read(module, "hetc-assign-devices");
  if (failed(bounds))
    return signalPassFailure();
  FailureOr<DeviceAssignment> assignment = plan(module, *model, *bounds);
  if (failed(assignment))
    return signalPassFailure();
  if (failed(place(func, *assignment, static_cast<uint32_t>(model->layers))))
    return signalPassFailure();

  Builder b(module.getContext());
  module->setAttr(kDevicePlan, devicePlanAttr(b, *assignment));
}

} // namespace
