// The hetc dialect: imported ONNX nodes and the LLM ops they are raised to.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "hetc/Dialect/HetcDialect.h.inc"

#define GET_OP_CLASSES
#include "hetc/Dialect/HetcOps.h.inc"
