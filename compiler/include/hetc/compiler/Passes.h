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
