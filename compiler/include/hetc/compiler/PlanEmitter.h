// Plan emission: a planned module (see PlanAttributes.h) and its weights into a .hplan file.
#pragma once

#include "hetc/compiler/WeightStore.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace hetc::compiler {

// Writes the plan the planning passes recorded in `module` to `path`, packing each weight in the
// layout its op's kernel reads (linear weights as LinearNK, everything else row-major, all
// float32). `target` is recorded in the plan. On failure sets `error` to one message naming the
// op, weight or attribute at fault; `path` is then left as it was.
mlir::LogicalResult emitPlan(mlir::ModuleOp module, const WeightStore &weights,
                             const std::string &target, const std::string &path,
                             std::string &error);

} // namespace hetc::compiler
