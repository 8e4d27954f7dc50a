// Shapes evaluated, never matched: every dimension of every ONNX-level value, and the elements of
// every small integer tensor computed from shapes, as an integer polynomial over the symbolic
// dimensions of the graph's inputs (batch, new tokens, past, ...) and the static ones.
//
// An export spells `q.view(b, s, heads, head_dim)` as Shape -> Gather -> Unsqueeze -> Concat,
// transformers 4.48+ as Concat(Slice(Shape(x), 0, -1), [-1, head_dim]), GPT-2 as `x.size()[:-1] +
// (heads, head_dim)`, torch.expand as Where(Equal(shape, -1), ones, shape): all of them evaluate to
// the same expressions here, so the fold-shapes pass can replace each by the constant operand it
// is equal to, and the raising patterns see one spelling.
#pragma once

#include "hetc/Dialect/HetcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hetc {

// An integer polynomial over symbol ids: a sum of coefficient x product of symbols. Symbols stand
// for dimensions, so they are never negative. Arithmetic that would overflow gives nullopt.
class DimExpr {
public:
  DimExpr() = default; // 0
  static DimExpr constant(int64_t c);
  static DimExpr symbol(int id);

  std::optional<int64_t> asConstant() const;
  bool operator==(const DimExpr &other) const { return terms_ == other.terms_; }
  bool operator!=(const DimExpr &other) const { return !(*this == other); }

  static std::optional<DimExpr> add(const DimExpr &a, const DimExpr &b);
  static std::optional<DimExpr> sub(const DimExpr &a, const DimExpr &b);
  static std::optional<DimExpr> mul(const DimExpr &a, const DimExpr &b);
  // a / b when it is exact for every value of the symbols: b a non-zero constant dividing every
  // coefficient, b one term dividing every term of a, or b equal to a (1), or both constants
  // (truncated, as ONNX's integer Div).
  static std::optional<DimExpr> div(const DimExpr &a, const DimExpr &b);

  // Whether the value is >= 0, or > 0, for every value of the symbols (all >= 0).
  bool provablyNonNegative() const;
  bool provablyPositive() const;

  // "past + seq", "4*batch", "batch*seq", with `names` indexed by symbol id.
  std::string str(llvm::ArrayRef<std::string> names) const;

private:
  // monomial (sorted symbol ids; empty for the constant term) -> non-zero coefficient
  std::map<std::vector<int>, int64_t> terms_;
};

using SymDim = std::optional<DimExpr>;
using SymDims = llvm::SmallVector<SymDim, 4>;

// Three-valued comparison of two expressions: true or false when it holds for every value of the
// symbols, nullopt when it depends on them.
std::optional<bool> provablyEqual(const SymDim &a, const SymDim &b);
std::optional<bool> provablyLess(const SymDim &a, const SymDim &b);

// The values when every one is a known constant.
std::optional<llvm::SmallVector<int64_t>> allConstant(const std::optional<SymDims> &dims);

class SymbolicShapes {
public:
  // Evaluates the function's values in order. Graph input dimensions are symbols named by their
  // ONNX dim_param (the `hetc.dims` argument attribute the importer writes): two inputs with the
  // same dim_param share the symbol. A dynamic dimension without one is a symbol of its own.
  explicit SymbolicShapes(mlir::func::FuncOp func);

  // The dimensions of `v` when its rank is known (each dimension known or not).
  std::optional<SymDims> shape(mlir::Value v) const;
  // The elements of a small integer tensor in row-major order, when its element count is known.
  std::optional<SymDims> elements(mlir::Value v) const;
  // Gives `replacement` what is known of `original` (a rewrite replaced one by the other).
  void copyFacts(mlir::Value original, mlir::Value replacement) {
    if (auto it = facts_.find(original); it != facts_.end()) {
      Facts copy = it->second;
      facts_[replacement] = copy;
    }
  }
  std::string str(const DimExpr &e) const { return e.str(names_); }
  std::string str(const SymDims &dims) const;

  // At most this many elements are tracked for one integer tensor: shapes and index vectors.
  static constexpr int64_t kMaxElements = 64;

private:
  struct Facts {
    std::optional<SymDims> shape;
    std::optional<SymDims> elements;
  };
  void visit(mlir::Operation *op);
  void visitNode(OnnxNodeOp node);
  void contribShapes(OnnxNodeOp node);
  std::optional<SymDims> operandShape(OnnxNodeOp node, unsigned i) const;
  Facts &facts(mlir::Value v) { return facts_[v]; }
  std::optional<SymDims> shapeOrType(mlir::Value v) const;
  int symbolFor(const std::string &name);

  llvm::DenseMap<mlir::Value, Facts> facts_;
  std::vector<std::string> names_;
  std::map<std::string, int> symbols_;
};

} // namespace hetc
