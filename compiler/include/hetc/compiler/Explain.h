// `hetc compile --explain`: which nodes of the ONNX graph became which LLM op.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace hetc::compiler {

// Prints, for each LLM op of `planned` in program order (grouped by decoder layer, with its
// parameters and fusions), the nodes of `imported` it replaced. `imported` is the module as
// imported (before raising), `planned` the same module after raising and planning. A node counts
// for the LLM op nearest downstream of it whose location is a node of `imported` (an LLM op takes
// the location of the node whose result it replaces); nodes no LLM op reads from (shape
// arithmetic folded to constants, values the outputs never need) are counted apart.
void explainRaising(mlir::ModuleOp imported, mlir::ModuleOp planned, llvm::raw_ostream &os);

} // namespace hetc::compiler
