// Plan emission: a planned module (see PlanAttributes.h) and its weights into a .hplan file.
#pragma once

#include "hetc/compiler/Compile.h"
#include "hetc/compiler/WeightStore.h"
#include "hplan_generated.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <functional>
#include <string>

namespace hetc::compiler {

// Writes the plan the planning passes recorded in `module` to `path`, packing each weight in the
// layout its op's kernel reads: linear and lm_head weights as `linearWeights` says (BF16 packed
// as LinearBf16N16K2, float32 LinearNK, or for the layers' linears int8 LinearInt8N16K4 or int4
// LinearInt4N16K8; a weight imported in 4 bits stays LinearInt4N16K8 whatever it says, but for
// the lm_head), everything else row-major float32, except that a
// BF16 lm_head tied to the embedding is also the embedding's table (one copy). `target` is
// recorded in the plan. On failure sets `error` to one message naming the op, weight or
// attribute at fault; `path` is then left as it was.
// The memory a plan needs to run, in bytes.
struct PlanMemory {
  uint64_t weightBytes = 0;     // the weight segments the plan file holds
  uint64_t kvArenaBytes = 0;    // K and V (and their scales) for every layer, slot and position
  uint64_t activationBytes = 0; // the activation arena
  // One position of one slot: layers x kv_heads x 2 x kvRowBytes (head_dim elements, and for an
  // int8 cache the row's scale).
  uint64_t kvBytesPerPosition = 0;
  uint64_t maxBatch = 0;
  uint64_t maxSeq = 0;
  // max_seq takes KV memory in whole multiples of this many positions (16 for the blocks of a
  // bf16 or int8 cache, else 1).
  uint64_t kvPositionGranule = 1;
  uint64_t total() const { return weightBytes + kvArenaBytes + activationBytes; }
};

// Called with the plan's memory before anything is written; an error stops the emission.
using PlanMemoryCheck = std::function<Status(const PlanMemory &)>;

// `tokenizer`, when not null, is packed into the plan (schema 1.11).
mlir::LogicalResult emitPlan(mlir::ModuleOp module, const WeightStore &weights,
                             const std::string &target, const WeightScheme &linearWeights,
                             const std::string &path, std::string &error,
                             const PlanMemoryCheck &check = {},
                             const plan::TokenizerDefT *tokenizer = nullptr);

// Builds the plan as emitPlan does, writes nothing, and sets `memory` to what it needs.
mlir::LogicalResult measurePlan(mlir::ModuleOp module, const WeightStore &weights,
                                const std::string &target, const WeightScheme &linearWeights,
                                PlanMemory &memory, std::string &error);

} // namespace hetc::compiler
