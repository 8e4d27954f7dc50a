// ONNX loops and sequences, unrolled where the model's shapes fix them (UnrollLoops.cpp).
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace hetc {

enum class UnrollOutcome {
  Done,    // no loop or sequence is left
  Pending, // some wait for values not known yet (only when not refusing what is left)
  Failed,  // an error was emitted on the loop or sequence node, saying why
};

// Replaces every hetc.onnx.loop of `func` by its iterations and every ONNX sequence by its
// elements, as far as the evaluated shapes allow. With `refuseWhatIsLeft`, a loop or sequence
// nothing live reads is erased first and what still cannot be unrolled is refused; without it,
// that is left for a later call (hetc-fold-shapes decides Ifs in between).
UnrollOutcome unrollLoopsAndSequences(mlir::func::FuncOp func, bool refuseWhatIsLeft);

} // namespace hetc
