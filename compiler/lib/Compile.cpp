// The compile driver: import, raise, plan, emit. Every failure becomes one Status message; the
// first error diagnostic of a pass, with the node or op it points at, is that message.
#include "hetc/compiler/Compile.h"

#include "hetc/Dialect/HetcDialect.h"
#include "hetc/compiler/Explain.h"
#include "hetc/compiler/OnnxImport.h"
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanAttributes.h"
#include "hetc/compiler/PlanEmitter.h"
#include "hetc/compiler/Target.h"
#include "hetc/compiler/TokenizerFiles.h"
#include "hetc/compiler/WeightStore.h"
#include "runtime/format/WeightLayout.h"
#include "runtime/platform/HostMemory.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <string>

using namespace mlir;

namespace hetc::compiler {
namespace {

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

// Collects the errors, each with its location: the first is the message; a model with several
// blockers gets up to kShown of them listed after it. Errors that differ only in their numbers
// (the same node of another layer, '/layers.3/Concat_12' for '/layers.0/Concat_12') are one
// blocker, counted. Other diagnostics are dropped (or shown when verbose).
class ErrorCollector {
public:
  ErrorCollector(MLIRContext &context, bool verbose)
      : handler_(&context, [this, verbose](Diagnostic &diag) {
          if (verbose)
            llvm::errs() << diag.getLocation() << ": " << diag.str() << "\n";
          if (diag.getSeverity() == DiagnosticSeverity::Error) {
            std::string where = describeLocation(diag.getLocation());
            std::string text = diag.str();
            // A message that starts by naming its node ("node 'x' (Op) ...") needs no prefix.
            if (!where.empty() && llvm::StringRef(text).starts_with(where + " "))
              where.clear();
            add((where.empty() ? "" : where + ": ") + text);
          }
          return success();
        }) {}

  // The first error; then, one per line, the other blockers (up to kShown in all).
  std::string message() const {
    std::string text;
    for (size_t i = 0; i < errors_.size() && i < kShown; ++i) {
      if (i == 1)
        text += "\n  " + std::to_string(errors_.size() - 1) + " more:";
      text += i == 0 ? errors_[i].text : "\n  - " + errors_[i].text;
      if (errors_[i].count > 1)
        text += " (and " + std::to_string(errors_[i].count - 1) + " more like it, e.g. in other " +
                "layers)";
    }
    if (errors_.size() > kShown)
      text += "\n  - (" + std::to_string(errors_.size() - kShown) + " more not shown)";
    return text;
  }

private:
  static constexpr size_t kShown = 10;
  struct Blocker {
    std::string key, text;
    int count;
  };

  void add(std::string text) {
    std::string key;
    for (size_t i = 0; i < text.size(); ++i)
      if (!std::isdigit(static_cast<unsigned char>(text[i])))
        key += text[i];
      else if (key.empty() || key.back() != '#')
        key += '#';
    for (Blocker &b : errors_)
      if (b.key == key) {
        ++b.count;
        return;
      }
    errors_.push_back({std::move(key), std::move(text), 1});
  }

  ScopedDiagnosticHandler handler_;
  std::vector<Blocker> errors_;
};

void printStage(ModuleOp module, const char *stage) {
  llvm::errs() << "// ----- IR after " << stage << " -----\n";
  module->print(llvm::errs(), OpPrintingFlags().elideLargeElementsAttrs(16));
  llvm::errs() << "\n";
}

WeightScheme weightScheme(const CompileOptions &options) {
  return WeightScheme(options.weights, options.groupSize, options.int4Symmetric, options.lmHead);
}

Status validate(const CompileOptions &options) {
  if ((options.weights == WeightFormat::INT4 || options.lmHead == WeightFormat::INT4) &&
      !LinearInt4N16K8::validGroup(options.groupSize))
    return Status::error("--group-size " + std::to_string(options.groupSize) +
                         ": int4 weights take groups of 16, 32, 64 or 128");
  // "host" is this machine's CPU; any other target is a file the cost model reads.
  if (options.target != "host") {
    Result<Target> target = findTarget(options.target);
    if (!target && llvm::StringRef(target.message()).starts_with("unknown target")) {
      std::string known = "host";
      if (Result<std::vector<Target>> targets = listTargets())
        for (const Target &t : *targets)
          if (t.name != kHostTarget) // the calibrated host's file plays no part in compile
            known += ", " + t.name;
      return Status::error("unknown target '" + options.target + "' (known targets: " + known +
                           "; or a path to a .json target file)");
    }
    if (!target)
      return target.status();
  }
  if (options.maxSeqAuto && options.target != "host")
    return Status::error("--max-seq auto sizes the plan for this host's memory; give --max-seq "
                         "for target '" +
                         options.target + "'");
  if (options.onnxPath.empty())
    return Status::error("no ONNX model given");
  if (options.outputPath.empty())
    return Status::error("no output plan path given");
  if (options.maxBatch < 1)
    return Status::error("--max-batch must be at least 1, got 0");
  if (!options.maxSeqAuto && options.maxSeq < 1)
    return Status::error("--max-seq must be at least 1, got 0");
  if (options.maxStepTokens < 1)
    return Status::error("--max-step-tokens must be at least 1, got 0");
  if (options.maxStepTokens < options.maxBatch)
    return Status::error("--max-step-tokens (" + std::to_string(options.maxStepTokens) +
                         ") must be at least --max-batch (" + std::to_string(options.maxBatch) +
                         "): a decode step of every sequence needs one token each");
  return Status();
}

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return text;
}

// The largest max-seq whose plan needs at most `budget` bytes: KV grows linearly with max-seq,
// weights and activations do not depend on it.
uint64_t largestFittingSeq(const PlanMemory &memory, uint64_t budget) {
  uint64_t fixed = memory.weightBytes + memory.activationBytes;
  uint64_t perSeq = memory.kvBytesPerPosition * memory.maxBatch;
  if (budget <= fixed || perSeq == 0)
    return 0;
  return (budget - fixed) / perSeq / memory.kvPositionGranule * memory.kvPositionGranule;
}

// What the engine needs beyond these (the step's token, position and slot arrays, its thread
// pool, the per-op structs) is small and not counted.
Status checkFits(const PlanMemory &memory, uint64_t available) {
  if (memory.total() <= available)
    return Status();
  return Status::error(
      "the plan needs " + gib(memory.total()) + " GiB (weights " + gib(memory.weightBytes) +
      ", KV cache " + gib(memory.kvArenaBytes) + ", activations " + gib(memory.activationBytes) +
      ") but this host has " + gib(available) +
      " GiB available; the largest --max-seq that fits with --max-batch " +
      std::to_string(memory.maxBatch) + " is " +
      std::to_string(largestFittingSeq(memory, available)) +
      " (the KV cache is reserved and only touched as positions are written, but a full context "
      "must fit)");
}

} // namespace

Status compileOnnxToPlan(const CompileOptions &options) {
  if (Status status = validate(options); !status)
    return status;
  // Read and checked first: a bad tokenizer fails before the model is compiled.
  Result<TokenizerFiles> tokenizer = readTokenizerFiles(options.tokenizer, options.onnxPath);
  if (!tokenizer)
    return tokenizer.status();

  DialectRegistry registry;
  registry.insert<hetc::HetcDialect, func::FuncDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // One thread: the machines this runs on are shared, and the errors' order is then deterministic.
  context.disableMultithreading();
  ErrorCollector diagnostics(context, options.verbose);

  WeightStore weights;
  std::string error;
  OwningOpRef<ModuleOp> module = importOnnxModel(options.onnxPath, context, weights, error);
  if (!module)
    return Status::error(!error.empty()                   ? error
                         : !diagnostics.message().empty() ? diagnostics.message()
                                                          : "cannot import " + options.onnxPath);
  if (options.verbose)
    printStage(*module, "import");
  // --explain holds the imported graph to the planned ops once planning is done.
  OwningOpRef<ModuleOp> imported = options.explain ? module->clone() : nullptr;

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
  if (Status status = runStage("raising", [&](OpPassManager &pm) { addRaisingPasses(pm, &weights); }); !status)
    return status;
  const bool host = options.target == "host";
  const KvFormat kv =
      options.kv.value_or(options.weights == WeightFormat::F32 ? KvFormat::F32 : KvFormat::BF16);
  const llvm::StringRef kvDtype = kv == KvFormat::F32    ? "f32"
                                  : kv == KvFormat::INT8 ? "int8"
                                                         : "bf16";
  std::optional<uint64_t> available = host ? availableMemoryBytes() : std::nullopt;

  uint64_t maxSeq = options.maxSeq;
  if (options.maxSeqAuto) {
    if (!available)
      return Status::error("--max-seq auto needs MemAvailable from /proc/meminfo");
    // Plan a copy with one position to learn the fixed part and the KV bytes per position.
    OwningOpRef<ModuleOp> probe = module->clone();
    PassManager pm(&context, ModuleOp::getOperationName());
    addPlanningPasses(pm, PlanBounds{options.maxBatch, 1, options.maxStepTokens}, kvDtype);
    if (failed(pm.run(*probe)))
      return Status::error(diagnostics.message().empty() ? "planning failed"
                                                         : diagnostics.message());
    PlanMemory memory;
    if (failed(measurePlan(*probe, weights, options.target, weightScheme(options), memory, error)))
      return Status::error(error);
    // 10% of the available memory is left as headroom.
    maxSeq = std::min(largestFittingSeq(memory, *available / 10 * 9), kMaxAutoSeq);
    // Nor past the positions a model with learned position rows has rows for.
    if (std::optional<planning::LearnedPositions> positions =
            planning::learnedPositions(planning::findModelFunction(*probe)))
      maxSeq = std::min(maxSeq, static_cast<uint64_t>(positions->tokens));
    if (maxSeq < 1)
      return Status::error("--max-seq auto: not one position fits in 90% of the " +
                           gib(*available) + " GiB available (weights " + gib(memory.weightBytes) +
                           " GiB, activations " + gib(memory.activationBytes) + " GiB)");
    llvm::errs() << "hetc: --max-seq auto: " << maxSeq << "\n";
  } else if (options.maxSeqDefault) {
    if (std::optional<planning::LearnedPositions> positions =
            planning::learnedPositions(planning::findModelFunction(*module));
        positions && static_cast<uint64_t>(positions->tokens) < maxSeq) {
      maxSeq = static_cast<uint64_t>(positions->tokens);
      llvm::errs() << "hetc: --max-seq " << maxSeq << ": the model's learned positions (the "
                   << "default, " << options.maxSeq << ", is more)\n";
    }
  }

  PlanBounds bounds{options.maxBatch, maxSeq, options.maxStepTokens};
  AssignDevicesOptions devices;
  devices.target = options.target;
  devices.residentLayers = options.residentLayers;
  if (Status status = runStage(
          "planning", [&](OpPassManager &pm) { addPlanningPasses(pm, bounds, kvDtype, devices); });
      !status)
    return status;
  if (imported)
    explainRaising(*imported, *module, llvm::outs());

  // A tokenizer that produces ids past the model's vocabulary belongs to another model: every run
  // of text would fail on its first such id, so the plan is not written.
  if (tokenizer->def) {
    FailureOr<planning::ModelAttrs> model = planning::ModelAttrs::read(*module, "the tokenizer check");
    if (succeeded(model) && tokenizer->idCount > static_cast<uint64_t>(model->vocab))
      return Status::error(tokenizer->def->source + " produces ids 0.." +
                           std::to_string(tokenizer->idCount - 1) + " but the model's vocabulary " +
                           "has " + std::to_string(model->vocab) + " ids: give the model's own " +
                           "tokenizer with --tokenizer");
    llvm::errs() << "hetc: packing the tokenizer " << tokenizer->def->source << tokenizer->note
                 << "\n";
  }

  PlanMemoryCheck check;
  if (available)
    check = [&](const PlanMemory &memory) { return checkFits(memory, *available); };
  if (failed(emitPlan(*module, weights, options.target, weightScheme(options), options.outputPath,
                      error, check, tokenizer->def.get())))
    return Status::error(error);
  return Status();
}

} // namespace hetc::compiler
