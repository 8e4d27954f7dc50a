// ONNX (libonnx + protobuf) into the hetc dialect's ONNX level.
#pragma once

#include "hetc/compiler/WeightStore.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace hetc::compiler {

// Reads `path` (and its external data files), returns a module with one func.func holding the
// graph, and fills `weights`. On failure returns null and sets `error` to one clear message
// naming the file, node, op or tensor at fault.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxModel(const std::string &path,
                                                  mlir::MLIRContext &context, WeightStore &weights,
                                                  std::string &error);

} // namespace hetc::compiler
