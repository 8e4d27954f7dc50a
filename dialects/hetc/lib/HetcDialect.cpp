#include "hetc/Dialect/HetcDialect.h"

using namespace mlir;
using namespace hetc;

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include "hetc/Dialect/HetcDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "hetc/Dialect/HetcTypes.cpp.inc"

void HetcDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "hetc/Dialect/HetcTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "hetc/Dialect/HetcOps.cpp.inc"
      >();
}
