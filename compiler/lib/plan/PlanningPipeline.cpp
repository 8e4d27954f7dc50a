#include "hetc/compiler/Passes.h"

#include "mlir/Pass/PassManager.h"

void hetc::addPlanningPasses(mlir::OpPassManager &pm, const PlanBounds &bounds,
                             llvm::StringRef kvDtype, const AssignDevicesOptions &devices) {
  pm.addPass(createGroupSublayers());
  PlanMemoryOptions memory;
  memory.maxBatch = bounds.maxBatch;
  memory.maxSeq = bounds.maxSeq;
  memory.maxStepTokens = bounds.maxStepTokens;
  memory.kvDtype = kvDtype.str();
  pm.addPass(createPlanMemory(memory));
  pm.addPass(createAssignDevices(devices));
  pm.addPass(createPartitionTasks());
  pm.addPass(createFuseResidualAdd());
  pm.addPass(createFuseSwiGlu());
  pm.addPass(createFuseRopeIntoAttention());
}
