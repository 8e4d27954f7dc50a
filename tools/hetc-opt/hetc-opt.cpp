// hetc-opt: runs hetc's passes (and MLIR's core transforms) on textual IR, for lit tests and
// for looking at what each pass decides.
#include "hetc/Dialect/HetcDialect.h"
#include "hetc/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<hetc::HetcDialect, mlir::func::FuncDialect>();
  hetc::registerHetcPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "hetc pass driver\n", registry));
}
