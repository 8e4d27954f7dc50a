// Plan emission: a planned module (see PlanAttributes.h) and its weights into a .hplan file.
#pragma once

#include "hetc/compiler/Compile.h"
#include "hetc/compiler/WeightStore.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace hetc::compiler {

// Writes the plan the planning passes recorded in `module` to `path`, packing each weight in the
// layout its op's kernel reads: linear and lm_head weights as `linearWeights` says (BF16 packed
// as LinearBf16N16K2, or float32 LinearNK), everything else row-major float32, except that a
// BF16 lm_head tied to the embedding is also the embedding's table (one copy). `target` is
// recorded in the plan. On failure sets `error` to one message naming the op, weight or
// attribute at fault; `path` is then left as it was.
mlir::LogicalResult emitPlan(mlir::ModuleOp module, const WeightStore &weights,
                             const std::string &target, WeightFormat linearWeights,
                             const std::string &path, std::string &error);

} // namespace hetc::compiler
