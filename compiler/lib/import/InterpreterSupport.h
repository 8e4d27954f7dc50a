// What the interpreter's parts share (OnnxInterpreter.cpp: shapes, element movement and
// arithmetic; OnnxInterpreterNn.cpp: reductions, normalizations, softmax, activations,
// selections and ONNX Runtime's contrib operators; OnnxInterpreterAttention.cpp: ONNX Runtime's
// attention operators).
#pragma once

#include "OnnxInterpreter.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace hetc::interpreter {

// Row-major strides of `shape`, in elements.
llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape);
// The flat index into `from` (broadcast to `to`) of the element at flat index `k` of `to`.
int64_t broadcastIndex(int64_t k, llvm::ArrayRef<int64_t> to, llvm::ArrayRef<int64_t> from);
// numpy's broadcast of two shapes, if they broadcast.
std::optional<llvm::SmallVector<int64_t>> broadcastShape(llvm::ArrayRef<int64_t> a,
                                                         llvm::ArrayRef<int64_t> b);
inline int64_t normalizeAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }
// The element type ONNX's `to` (Cast's attribute, TensorProto's data type) names, or null.
mlir::Type castTarget(mlir::MLIRContext *ctx, int64_t to);
// `x` converted to element type `target` as ONNX's Cast does.
Tensor castTo(const Tensor &x, mlir::Type target);

// ScatterND's and ScatterElements' write of update element `from` into `out` at `at`: replaced
// (reduction "none") or combined with what is there (add, mul, max, min).
void scatterInto(Tensor &out, int64_t at, const Tensor &updates, int64_t from,
                 llvm::StringRef reduction);

// Whether OnnxInterpreterNn.cpp evaluates `type`.
bool isNnOp(llvm::StringRef type);
// Its results, one per result of `op` (a trailing optional output the node does not have is not
// computed), if the inputs are valid for it. Absent optional inputs have a null `elem`.
std::optional<llvm::SmallVector<Tensor>> evaluateNn(OnnxNodeOp op, llvm::ArrayRef<Tensor> inputs);

// Whether OnnxInterpreterAttention.cpp evaluates `type` (MultiHeadAttention,
// GroupQueryAttention, Attention), and its results as evaluateNn's.
bool isAttentionOp(llvm::StringRef type);
std::optional<llvm::SmallVector<Tensor>> evaluateAttention(OnnxNodeOp op,
                                                           llvm::ArrayRef<Tensor> inputs);

} // namespace hetc::interpreter
