// The heads an attention reads, read by their values: the region from a projection's output to
// the [batch, heads, sequence, head_dim] queries, keys or values, whatever its spelling and
// wherever the layout puts the rotation (before the heads' transpose, as GPT-J does, or after),
// is evaluated on basis inputs at each position and fitted to hetc.rope or to the heads split
// alone. See docs/front-end.md, "Rotations by their values".
#pragma once

#include "hetc/compiler/WeightStore.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace hetc {

struct RotationFit {
  // The [batch, sequence, heads * head_dim] LLM value the region reads; null when it reads
  // `pieces` of it, linears over column views of one weight (projectionValue makes it).
  mlir::Value flat;
  llvm::SmallVector<mlir::Value> pieces;
  mlir::Value positions; // the position_ids input it reads, or null: positions from the cache
  int64_t heads = 0;     // of `flat`
  int64_t headDim = 0;
  int64_t broadcast = 1;      // each head of `flat` repeated this many times in a row
  int64_t rotaryDim = 0;      // the first columns of each head rotated; 0: none
  bool interleaved = false;   // pairs (2i, 2i + 1); else (i, i + rotaryDim / 2)
  double scale = 1.0;         // a factor the region multiplies every element by (q * scaling)
  llvm::SmallVector<double> invFreq; // rotaryDim / 2 frequencies
  std::string described;      // for --explain (the hetc.fit attribute)
};

// The fit of the region ending at `heads4`, or nothing with `why` completing "the N nodes from
// 'a' to 'b' ..." (empty when there is no region to fit: it reads no single LLM value, or other
// graph inputs than the positions and the shapes of the rest).
std::optional<RotationFit> fitRotation(mlir::Value heads4, const compiler::WeightStore *weights,
                                       std::string &why);

// `fit.flat`, made first when the region read pieces of it: one linear over the whole weight,
// before the first piece (the pieces, read by nothing once the heads are raised, go).
mlir::Value projectionValue(RotationFit &fit, mlir::OpBuilder &builder);

} // namespace hetc
