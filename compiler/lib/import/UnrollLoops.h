// ONNX loops and sequences, unrolled where the model's shapes fix them (UnrollLoops.cpp).
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace hetc {

// Replaces every hetc.onnx.loop of `func` by its iterations and every ONNX sequence by its
// elements, so that nothing after it sees a loop or a sequence. False after an error was emitted
// on the loop or sequence node that could not be unrolled, saying why.
bool unrollLoopsAndSequences(mlir::func::FuncOp func);

} // namespace hetc
