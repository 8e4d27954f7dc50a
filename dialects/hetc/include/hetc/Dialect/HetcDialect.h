// The hetc dialect: imported ONNX nodes and the LLM ops they are raised to.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "hetc/Dialect/HetcDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "hetc/Dialect/HetcTypes.h.inc"

// LlmOp (HetcOps.td): what every LLM op answers for planning and the emitter.
#include "hetc/Dialect/HetcInterfaces.h.inc"

#define GET_OP_CLASSES
#include "hetc/Dialect/HetcOps.h.inc"

#include <optional>

namespace hetc {

// The static size of the last (feature) dimension of a ranked tensor type, if the type says it.
std::optional<int64_t> featureSize(mlir::Type type);

} // namespace hetc
