// Queries over the ONNX-level graph shared by the raising passes: which node defines a value,
// what a constant holds, which operand of a commutative node is which.
#pragma once

#include "hetc/Dialect/HetcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <string>

namespace hetc {

// The node defining `v` if it is an ONNX node of `opType`, after looking through no-op nodes.
OnnxNodeOp producer(mlir::Value v, llvm::StringRef opType);
bool isOnnx(mlir::Operation *op, llvm::StringRef opType);
// Shape or Size: a node that reads its operand's dimensions, never its values.
bool readsDimensionsOnly(mlir::Operation *op);

// A score this low or lower is a hidden key: its softmax weight against a visible one, e^-500
// times e^(their spread), is far below float32's resolution for any spread under 400. The masks
// exporters write hide with -inf, finfo.min, -1e9, -65504 or GPT-2's -10000, and with -10000
// again after onnxconverter-common's float16 clamp, which a scale applied after the mask divides
// by sqrt(head_dim): -625 for heads of 256.
constexpr double kHiddenScore = -500.0;

// Identity, or a Cast to the element type its input already has.
bool isNoOpNode(OnnxNodeOp op);
// A Cast from a float type to another.
bool isFloatCast(OnnxNodeOp op);
// `v` with Identity and no-op Casts looked through.
mlir::Value skipNoOps(mlir::Value v);
// `v` with Identity and every Cast between float types looked through (an upcast to float32
// around a computation hetc does in float32 anyway).
mlir::Value skipFloatCasts(mlir::Value v);

// The value of a hetc.constant (after no-op nodes).
mlir::DenseElementsAttr constantValue(mlir::Value v);
// The single value of a constant whose elements are all equal.
std::optional<double> scalarValue(mlir::Value v);
// The elements of an integer constant.
std::optional<llvm::SmallVector<int64_t>> intValues(mlir::Value v);
// The elements of a float constant.
std::optional<llvm::SmallVector<double>> floatValues(mlir::DenseElementsAttr attr);

std::optional<int64_t> intAttr(OnnxNodeOp op, llvm::StringRef name);
std::optional<double> floatAttr(OnnxNodeOp op, llvm::StringRef name);
// A string attribute's value, or `fallback` where the node has none.
llvm::StringRef stringAttr(OnnxNodeOp op, llvm::StringRef name, llvm::StringRef fallback);
std::optional<llvm::SmallVector<int64_t>> intsAttr(OnnxNodeOp op, llvm::StringRef name);
// The axes of a reduction, Squeeze or Unsqueeze: an attribute before opset 13/18, an input after.
std::optional<llvm::SmallVector<int64_t>> axesOf(OnnxNodeOp op);

// Calls `match(a, b)` with the two operands of a binary node, then swapped; true if either did.
bool matchCommutative(OnnxNodeOp op, llvm::function_ref<bool(mlir::Value, mlir::Value)> match);

// One entry of a shape tensor: a constant, or dimension `dim` of `source` (read with
// Unsqueeze(Gather(Shape(source), dim))), or unknown.
struct ShapeEntry {
  std::optional<int64_t> value;
  mlir::Value source;
  int64_t dim = -1;
};
// What a one-dimensional shape tensor holds, element by element, as far as it is known:
// constants, dimensions of tensors, Concat of those, Cast/Reshape-to-1-D of those.
std::optional<llvm::SmallVector<ShapeEntry>> shapeEntrySources(mlir::Value v);
// The same, values only.
std::optional<llvm::SmallVector<std::optional<int64_t>>> shapeEntries(mlir::Value v);

// Where dimension `dim` of `v` comes from: followed back through ops that keep leading
// dimensions (linear, rms_norm, rope, swiglu, add, embedding, attention, a weight MatMul).
std::pair<mlir::Value, int64_t> dimensionOrigin(mlir::Value v, int64_t dim);
// Whether dimension `da` of `a` is dimension `db` of `b`: equal static sizes, or one origin.
bool sameDimension(mlir::Value a, int64_t da, mlir::Value b, int64_t db);
// The rank of a ranked tensor value, -1 otherwise.
int64_t rankOf(mlir::Value v);

// LlmOp and featureSize: HetcDialect.h.
// `type` with its last dimension set to `features` (a [?, ?, features] tensor if unranked).
mlir::Type withFeatureSize(mlir::Type type, int64_t features, int64_t rankIfUnranked = 3);

// Makes the function's result types those of its return operands after values were replaced.
void syncResultTypes(mlir::func::FuncOp func);

// The graph input `v` is, through casts and reshapes that keep the order of its elements (Cast,
// Reshape, Unsqueeze, Squeeze, Flatten: GPT-2's input_ids.view(-1, S)); null when `v` is computed.
mlir::BlockArgument graphInputThroughViews(mlir::Value v);

// `v` through Reshapes that keep its last dimension, when what they reshape is an LLM op's
// activation: x.view(-1, F) and x.view(b, s, F) move no element between rows, and hetc's
// activations are rows. Returns `v` itself otherwise.
mlir::Value throughRowReshapes(mlir::Value v);

// Replaces every such Reshape of an LLM activation by the activation (GPT-2's Conv1D and OPT's
// feed-forward flatten tokens around an addmm and view them back), and every Cast of one between
// float types (a float16 file that keeps some ops in float32, as ONNX Runtime's converter does):
// hetc's activations are float32 rows whatever the file's type. Returns whether one was.
bool foldActivationViews(mlir::func::FuncOp func);

// Whether `v` is computed from graph inputs and constants only: no activation or weight reaches
// it but through Shape or Size (an input-derived quantity; their values are not). With
// `weightsAreConstants`, a weight's values may reach it too, as a constant of the file (a mask
// buffer stored as an initializer, sliced; an evaluation reads it from the weight store,
// SampleEvaluator), but not through what makes activations before they are raised: a matrix
// product (a projection) or a Gather of a weight's rows (an embedding lookup).
bool computedFromInputs(mlir::Value v, bool weightsAreConstants = false);
// Whether `v` depends on the graph's inputs, their values or their dimensions (Shape, Size).
bool readsGraphInputs(mlir::Value v);

// "'<node_name>' (<OpType>)" for error messages; the op name for other ops.
std::string describe(mlir::Operation *op);

// The features of an activation: from its type, from the LLM op that computes it, or, where
// shape inference stopped at a contrib op, from the weight of the MatMul (and bias Add) that does.
std::optional<int64_t> knownFeatures(mlir::Value v);

// A number as messages print it: `significant` digits, %g style.
std::string printed(double v, int significant = 3);

// Marks a Softmax, LogSoftmax or Hardmax of an opset before 13 (which flatten their input to 2-D
// at `axis`) whose input's rank the importer did not know (its value: the model's opset);
// hetc-fold-shapes makes it opset 13's
// softmax over the last axis when `axis` is the last, and refuses it otherwise with
// softmaxBefore13Refusal.
inline constexpr llvm::StringLiteral kFlattensBefore13 = "hetc.flattens_before_13";
// On the imported module: what the importer decided that the graph does not say (an If's branch
// taken over a graph input), an array of strings `hetc compile --explain` prints.
inline constexpr llvm::StringLiteral kImportNotes = "hetc.import_notes";

// Marks an unraised node that a raising pass refused with an error saying why (the attention
// whose values it weights): hetc-check-raised fails on its region without a second error.
inline constexpr llvm::StringLiteral kRefused = "hetc.refused";
// Marks the end of a region a raising pass evaluated and could not fit (hetc-raise-norm: statistics
// over the last dimension that are no norm): why, which hetc-check-raised adds to the region's error.
inline constexpr llvm::StringLiteral kNotANorm = "hetc.not_a_norm";

std::string softmaxBefore13Refusal(llvm::StringRef node, llvm::StringRef opType, int64_t opset,
                                   int64_t axis, int64_t rank);

} // namespace hetc
