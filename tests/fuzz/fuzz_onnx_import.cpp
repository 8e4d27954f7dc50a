// libFuzzer target: hetc compile's front end, from the bytes of an ONNX file to raised IR. The
// input is written as model.onnx in a directory of its own and read by importOnnxModel (protobuf,
// libonnx, the importer's graph queries and folding), then the raising passes run on what it
// imported (folding, shapes evaluated over the symbolic dimensions, the interpreter on sample
// inputs, pattern recognition, CheckRaised), as compileOnnxToPlan runs them.
//
// What holds, besides no crash and no sanitizer report:
// - a model that does not import is refused with a message;
// - an imported module verifies (the importer builds valid IR);
// - raising either succeeds with IR that verifies or fails with an error diagnostic, the message
//   hetc compile prints.
#include "hetc/Dialect/HetcDialect.h"
#include "hetc/compiler/OnnxImport.h"
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/WeightStore.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

std::string &modelPath() {
  static std::string path;
  return path;
}

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "fuzz_onnx_import: %s\n", what.c_str());
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  char dir[] = "/tmp/hetc-fuzz-onnx-XXXXXX";
  if (!::mkdtemp(dir))
    fail("cannot make a temporary directory");
  modelPath() = std::string(dir) + "/model.onnx";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  {
    std::ofstream out(modelPath(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(size));
    if (!out)
      fail("cannot write " + modelPath());
  }

  mlir::DialectRegistry registry;
  registry.insert<hetc::HetcDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.disableMultithreading();
  std::string firstError;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diagnostic) {
    if (diagnostic.getSeverity() == mlir::DiagnosticSeverity::Error && firstError.empty())
      firstError = diagnostic.str();
    return mlir::success();
  });

  hetc::compiler::WeightStore weights;
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      hetc::compiler::importOnnxModel(modelPath(), context, weights, error);
  if (!module) {
    if (error.empty() && firstError.empty())
      fail("a model refused without a message");
    return 0;
  }
  if (mlir::failed(mlir::verify(*module)))
    fail("the imported module does not verify: " + firstError);

  mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName());
  hetc::addRaisingPasses(pm, &weights);
  if (mlir::failed(pm.run(*module))) {
    if (firstError.empty())
      fail("raising failed without an error");
    return 0;
  }
  if (mlir::failed(mlir::verify(*module)))
    fail("the raised module does not verify: " + firstError);
  return 0;
}
