// The model's dimensions as hetc-group-sublayers records them on the module.
#include "hetc/compiler/OnnxModelShape.h"

#include "hetc/Dialect/HetcDialect.h"
#include "hetc/compiler/OnnxImport.h"
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanAttributes.h"
#include "hetc/compiler/WeightStore.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <cstring>

using namespace mlir;

namespace hetc::compiler {
namespace {

std::string fileStem(const std::string &path) {
  const size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

// Element (row, col) of a weight seen as `view` ([rows, cols]); a transposed view reads the stored
// matrix [cols, rows].
const char *element(const StoredWeight &stored, bool transposed, int64_t rows, int64_t cols,
                    int64_t row, int64_t col, uint64_t elementBytes) {
  const int64_t index = transposed ? col * rows + row : row * cols + col;
  return static_cast<const char *>(stored.data) + static_cast<uint64_t>(index) * elementBytes;
}

// Tied embeddings: the LM head reads the embedding table itself, or a copy of it (exports of tied
// models often write the transposed table as its own initializer).
bool isTied(const WeightStore &weights, Value table, Value head) {
  auto tableOp = table.getDefiningOp<WeightOp>();
  auto headOp = head.getDefiningOp<WeightOp>();
  if (!tableOp || !headOp || tableOp.getColumns() || headOp.getColumns())
    return false;
  const StoredWeight *t = weights.find(tableOp.getName().str());
  const StoredWeight *h = weights.find(headOp.getName().str());
  auto tableType = dyn_cast<RankedTensorType>(table.getType());
  if (!t || !h || !tableType || tableType.getRank() != 2 || t->elementType != h->elementType ||
      t->bytes != h->bytes || !t->data || !h->data)
    return false;
  const int64_t vocab = tableType.getDimSize(0), hidden = tableType.getDimSize(1);
  if (vocab <= 0 || hidden <= 0)
    return false;
  const uint64_t elementBytes = t->bytes / static_cast<uint64_t>(vocab * hidden);
  // The table's view is [vocab, hidden], the head's [hidden, vocab].
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t d = 0; d < hidden; ++d)
      if (std::memcmp(element(*t, tableOp.getTransposed(), vocab, hidden, v, d, elementBytes),
                      element(*h, headOp.getTransposed(), hidden, vocab, d, v, elementBytes),
                      elementBytes) != 0)
        return false;
  return true;
}

} // namespace

Result<ModelShape> readOnnxModelShape(const std::string &onnxPath, uint32_t assumedContext) {
  DialectRegistry registry;
  registry.insert<hetc::HetcDialect, func::FuncDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.disableMultithreading();
  std::string firstError;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && firstError.empty())
      firstError = diag.str();
    return success();
  });

  WeightStore weights;
  std::string error;
  OwningOpRef<ModuleOp> module = importOnnxModel(onnxPath, context, weights, error);
  if (!module)
    return Status::error(!error.empty()        ? error
                         : !firstError.empty() ? onnxPath + ": " + firstError
                                               : "cannot import " + onnxPath);
  PassManager pm(&context, ModuleOp::getOperationName());
  addRaisingPasses(pm, &weights);
  pm.addPass(createGroupSublayers());
  if (failed(pm.run(*module)))
    return Status::error(onnxPath + ": " +
                         (firstError.empty() ? std::string("cannot raise the model") : firstError));

  FailureOr<planning::ModelAttrs> model = planning::ModelAttrs::read(*module, "the cost model");
  if (failed(model))
    return Status::error(onnxPath + ": " + firstError);
  ModelShape shape = model->shape();
  shape.name = fileStem(onnxPath);
  EmbeddingOp embedding;
  LmHeadOp lmHead;
  module->walk([&](Operation *op) {
    if (auto e = dyn_cast<EmbeddingOp>(op); e && !embedding)
      embedding = e;
    if (auto h = dyn_cast<LmHeadOp>(op); h && !lmHead)
      lmHead = h;
  });
  shape.tiedEmbeddings =
      embedding && lmHead && isTied(weights, embedding.getTable(), lmHead.getW());
  shape.maxContext = assumedContext;
  return shape;
}

} // namespace hetc::compiler
