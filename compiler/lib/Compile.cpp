// The compile driver: import, raise, plan, emit. Every failure becomes one Status message; the
// first error diagnostic of a pass, with the node or op it points at, is that message.
#include "hetc/compiler/Compile.h"

#include "hetc/Dialect/HetcDialect.h"
#include "hetc/compiler/OnnxImport.h"
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanEmitter.h"
#include "hetc/compiler/WeightStore.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

using namespace mlir;

namespace hetc::compiler {
namespace {

// Targets are data; until target descriptions arrive, the host is the only one.
constexpr const char *kKnownTargets[] = {"host"};

// "node '/model/layers.0/MatMul'" for an imported node, "file:line:col" for parsed IR.
std::string describeLocation(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location part : fused.getLocations()) {
      std::string text = describeLocation(part);
      if (!text.empty())
        return text;
    }
    return "";
  }
  if (auto name = dyn_cast<NameLoc>(loc))
    return "node '" + name.getName().str() + "'";
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    if (file.getLine() == 0) // the whole file, e.g. the module of an imported model
      return file.getFilename().str();
    return file.getFilename().str() + ":" + std::to_string(file.getLine()) + ":" +
           std::to_string(file.getColumn());
  }
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return describeLocation(callSite.getCallee());
  return "";
}

// Keeps the first error with its location; everything else is dropped (or shown when verbose).
class FirstErrorHandler {
public:
  FirstErrorHandler(MLIRContext &context, bool verbose)
      : handler_(&context, [this, verbose](Diagnostic &diag) {
          if (diag.getSeverity() == DiagnosticSeverity::Error && message_.empty()) {
            std::string where = describeLocation(diag.getLocation());
            message_ = (where.empty() ? "" : where + ": ") + diag.str();
          } else if (verbose) {
            llvm::errs() << diag.getLocation() << ": " << diag.str() << "\n";
          }
          return success();
        }) {}
  const std::string &message() const { return message_; }

private:
  ScopedDiagnosticHandler handler_;
  std::string message_;
};

void printStage(ModuleOp module, const char *stage) {
  llvm::errs() << "// ----- IR after " << stage << " -----\n";
  module->print(llvm::errs(), OpPrintingFlags().elideLargeElementsAttrs(16));
  llvm::errs() << "\n";
}

Status validate(const CompileOptions &options) {
  if (!llvm::is_contained(kKnownTargets, options.target)) {
    std::string known;
    for (const char *name : kKnownTargets)
      known += (known.empty() ? "" : ", ") + std::string(name);
    return Status::error("unknown target '" + options.target + "' (known targets: " + known + ")");
  }
  if (options.onnxPath.empty())
    return Status::error("no ONNX model given");
  if (options.outputPath.empty())
    return Status::error("no output plan path given");
  if (options.maxBatch < 1)
    return Status::error("--max-batch must be at least 1, got 0");
  if (options.maxSeq < 1)
    return Status::error("--max-seq must be at least 1, got 0");
  if (options.maxStepTokens < 1)
    return Status::error("--max-step-tokens must be at least 1, got 0");
  if (options.maxStepTokens < options.maxBatch)
    return Status::error("--max-step-tokens (" + std::to_string(options.maxStepTokens) +
                         ") must be at least --max-batch (" + std::to_string(options.maxBatch) +
                         "): a decode step of every sequence needs one token each");
  return Status();
}

} // namespace

Status compileOnnxToPlan(const CompileOptions &options) {
  if (Status status = validate(options); !status)
    return status;

  DialectRegistry registry;
  registry.insert<hetc::HetcDialect, func::FuncDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // One thread: the machines this runs on are shared, and the first error is then deterministic.
  context.disableMultithreading();
  FirstErrorHandler diagnostics(context, options.verbose);

  WeightStore weights;
  std::string error;
  OwningOpRef<ModuleOp> module = importOnnxModel(options.onnxPath, context, weights, error);
  if (!module)
    return Status::error(!error.empty()                   ? error
                         : !diagnostics.message().empty() ? diagnostics.message()
                                                          : "cannot import " + options.onnxPath);
  if (options.verbose)
    printStage(*module, "import");

  auto runStage = [&](const char *stage, auto addPasses) -> Status {
    PassManager pm(&context, ModuleOp::getOperationName());
    addPasses(pm);
    if (succeeded(pm.run(*module))) {
      if (options.verbose)
        printStage(*module, stage);
      return Status();
    }
    std::string message = diagnostics.message();
    return Status::error(message.empty() ? std::string(stage) + " failed" : message);
  };
  if (Status status = runStage("raising", [](OpPassManager &pm) { addRaisingPasses(pm); }); !status)
    return status;
  PlanBounds bounds{options.maxBatch, options.maxSeq, options.maxStepTokens};
  if (Status status =
          runStage("planning", [&](OpPassManager &pm) { addPlanningPasses(pm, bounds); });
      !status)
    return status;

  if (failed(emitPlan(*module, weights, options.target, options.weights, options.outputPath,
                      error)))
    return Status::error(error);
  return Status();
}

} // namespace hetc::compiler
