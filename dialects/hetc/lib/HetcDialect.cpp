#include "hetc/Dialect/HetcDialect.h"

using namespace mlir;
using namespace hetc;

#include "hetc/Dialect/HetcDialect.cpp.inc"

void HetcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "hetc/Dialect/HetcOps.cpp.inc"
      >();
}
