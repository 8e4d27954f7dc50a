// Splits each LLM op into independent tasks of a fixed grain (eLLM's chunked operators). The
// count is for the bounds; a step runs ceil(active units / grain) of them, so the split never
// depends on the thread count and every result is computed in the same order.
//
// Units of work, as the runtime reads hetc.tasks:
//   linear, lm_head                          output columns
//   embedding, rms_norm, layer_norm, rope,   rows (tokens of the step)
//   swiglu, activation, add
// Attention gets no tasks: its work grows with the positions cached, which only a step knows, so
// the executor cuts it at run time into chunks of positions (docs/kernels.md).
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanAttributes.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

namespace hetc {
#define GEN_PASS_DEF_PARTITIONTASKS
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;
using namespace hetc::planning;

namespace {

// Why 64: four AVX-512 f32 vectors, so each activation element loaded feeds four accumulators.
constexpr int64_t kColumnGrain = 64;
// Narrow outputs shrink the grain in whole vectors (16) so they still split into 8 tasks.
constexpr int64_t kColumnStep = 16;
constexpr int64_t kMinColumnTasks = 8;
// Why 4: a row op costs O(cols) per row, so 4 rows amortise a task's dispatch cost.
constexpr int64_t kRowGrain = 4;

int64_t columnGrain(int64_t columns) {
  int64_t perTask =
      static_cast<int64_t>(llvm::alignTo(llvm::divideCeil(columns, kMinColumnTasks), kColumnStep));
  return std::clamp<int64_t>(perTask, 1, std::min(kColumnGrain, std::max<int64_t>(columns, 1)));
}

struct PartitionTasksPass : public hetc::impl::PartitionTasksBase<PartitionTasksPass> {
  void runOnOperation() override;
};

void PartitionTasksPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<BoundsAttrs> bounds = BoundsAttrs::read(module, "hetc-partition-tasks");
  if (failed(bounds))
    return signalPassFailure();
  func::FuncOp func = findModelFunction(module);
  if (!func)
    return signalPassFailure();

  Builder b(module.getContext());
  for (Operation *op : collectLlmOps(func)) {
    int64_t units = 0, grain = 0;
    if (isa<LinearOp, LmHeadOp>(op)) {
      auto weight = cast<RankedTensorType>(op->getOperand(1).getType());
      units = weight.getDimSize(1);
      grain = columnGrain(units);
    } else if (isa<AttentionOp>(op)) {
      continue;
    } else {
      units = bounds->maxStepTokens;
      grain = kRowGrain;
    }
    int64_t count = std::max<int64_t>(1, llvm::divideCeil(units, grain));
    if (count > UINT32_MAX) {
      op->emitOpError() << "splits into " << count << " tasks, more than a plan can index";
      return signalPassFailure();
    }
    op->setAttr(kTasks, TaskAttrs{count, grain}.toAttr(b));
  }
}

} // namespace
