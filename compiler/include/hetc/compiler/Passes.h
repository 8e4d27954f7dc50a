// Declarations and registration of the compiler's passes (see Passes.td).
#pragma once

#include "hetc/Dialect/HetcDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace hetc {

#define GEN_PASS_DECL
#include "hetc/compiler/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "hetc/compiler/Passes.h.inc"

} // namespace hetc

namespace hetc {
namespace compiler {
class WeightStore;
} // namespace compiler
// hetc-raise-attention reading RoPE cos/sin tables from `weights` (without a store, as in
// hetc-opt, a table must be a hetc.constant).
std::unique_ptr<mlir::Pass> createRaiseAttention(const compiler::WeightStore *weights);
// hetc-raise-norm reading from `weights` a gamma or beta computed from a weight (Gemma's 1 + w;
// without a store such a norm stays unraised).
std::unique_ptr<mlir::Pass> createRaiseNorm(const compiler::WeightStore *weights);
// hetc-raise-contrib-ops reading RotaryEmbedding's cos/sin caches from `weights`.
std::unique_ptr<mlir::Pass> createRaiseContribOps(const compiler::WeightStore *weights);
// Fold, raise every recognised computation, clean up, and check nothing is left unraised.
void addRaisingPasses(mlir::OpPassManager &pm, const compiler::WeightStore *weights = nullptr);
struct PlanBounds {
  uint32_t maxBatch;
  uint64_t maxSeq;
  uint32_t maxStepTokens;
};
// Group sublayers, plan memory for the bounds with a KV cache of `kvDtype` ("f32", "bf16" or
// "int8") elements, assign devices and tiers for `devices.target`, partition into tasks, fuse
// residual adds and swiglus into the linears before them.
void addPlanningPasses(mlir::OpPassManager &pm, const PlanBounds &bounds,
                       llvm::StringRef kvDtype = "f32", const AssignDevicesOptions &devices = {});
} // namespace hetc
