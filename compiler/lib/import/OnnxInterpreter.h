// Evaluation of ONNX nodes on small concrete tensors: constant folding, and probing what a
// subgraph computes (the attention mask) on sample inputs.
#pragma once

#include "hetc/Dialect/HetcDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <functional>
#include <numeric>
#include <optional>
#include <vector>

namespace hetc {

// Results larger than the budget are not evaluated: evaluation is for shapes, scalars and masks
// of a few tokens, never for weights. kMaxEvaluatedElements is the budget, unless a
// ScopedEvaluationBudget raises it for an evaluation known to need more (a sliding-window mask
// probed past a window of thousands of keys, whose KV concat it slices by).
constexpr int64_t kMaxEvaluatedElements = 1 << 16;
int64_t evaluationBudget();
class ScopedEvaluationBudget {
public:
  explicit ScopedEvaluationBudget(int64_t elements);
  ~ScopedEvaluationBudget();
  ScopedEvaluationBudget(const ScopedEvaluationBudget &) = delete;
  ScopedEvaluationBudget &operator=(const ScopedEvaluationBudget &) = delete;

private:
  int64_t saved_;
};

// A small tensor being evaluated; integers (and bools) exactly, floats as doubles. A null `elem`
// stands for an absent optional input.
struct Tensor {
  llvm::SmallVector<int64_t> shape;
  mlir::Type elem;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  bool isFloat() const { return mlir::isa<mlir::FloatType>(elem); }
  int64_t size() const {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
  }
  double f(int64_t k) const { return isFloat() ? floats[k] : static_cast<double>(ints[k]); }
  int64_t i(int64_t k) const { return isFloat() ? static_cast<int64_t>(floats[k]) : ints[k]; }
  void resize(int64_t n) { isFloat() ? floats.assign(n, 0.0) : ints.assign(n, 0); }
  void set(int64_t k, double v) {
    if (isFloat())
      floats[k] = v;
    else
      ints[k] = elem.isInteger(1) ? (v != 0.0) : static_cast<int64_t>(v);
  }
  void setInt(int64_t k, int64_t v) {
    if (isFloat())
      floats[k] = static_cast<double>(v);
    else
      ints[k] = elem.isInteger(1) ? (v != 0) : v;
  }
  // Copies element `from` of `src` (same kind of element) to `k`.
  void copy(int64_t k, const Tensor &src, int64_t from) {
    if (isFloat())
      floats[k] = src.f(from);
    else
      ints[k] = src.i(from);
  }
};

std::optional<Tensor> tensorFromAttr(mlir::DenseElementsAttr attr);
mlir::DenseElementsAttr tensorToAttr(const Tensor &t);

// The values of `op`'s results (one per result) for these operand values (one per operand), if
// `op` is an operator this interpreter knows and the inputs are valid for it. The operators are
// listed in docs/front-end.md.
std::optional<llvm::SmallVector<Tensor>> evaluateNodeResults(OnnxNodeOp op,
                                                             llvm::ArrayRef<Tensor> inputs);
// The same for an op with a single result.
std::optional<Tensor> evaluateNode(OnnxNodeOp op, llvm::ArrayRef<Tensor> inputs);

} // namespace hetc
