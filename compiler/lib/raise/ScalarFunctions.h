// Scalar functions an export computes elementwise (from one value and scalar constants), read by
// their values rather than by their spelling: the interpreter evaluates the nodes on sample
// points, and the values are fitted to the forms hetc's ops take: an activation (RaiseActivation),
// a scale (Gemma's embedding times sqrt(hidden), the attention's scale) and a soft-cap
// (Gemma 2's cap * tanh(x / cap) on the scores and the logits).
//
// Tolerance: values within 8 float32 ulps of the form's, relative (9.5e-7 |y|), plus 1e-30: a
// constant or an intermediate rounded to float32 moves the value by an ulp or two, and no two
// forms told apart here are that close at the sample points.
#pragma once

#include "hetc/Dialect/HetcDialect.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>
#include <vector>

namespace hetc {

// Elementwise nodes that compute `result` from `input` and scalar constants alone, in program
// order.
struct ElementwiseChain {
  llvm::SmallVector<OnnxNodeOp> nodes;
  mlir::Value input, result;
};

// Every such computation of `x` that ends in a value read elsewhere (by a node outside it, or
// returned), one per such value.
llvm::SmallVector<ElementwiseChain> elementwiseComputations(mlir::Value x);

// Back from `result` through elementwise nodes each with one operand that is not a scalar
// constant (Mul, Div, Tanh, Cast, ...), to the first value `stop` accepts; nullopt when the walk
// leaves the elementwise nodes before. A chain of no nodes when `stop(result)`.
std::optional<ElementwiseChain> chainBackTo(mlir::Value result,
                                            llvm::function_ref<bool(mlir::Value)> stop);

// Forward from `x` while the value has exactly one reader, an elementwise node whose other
// operands are scalar constants: the longest such chain (no nodes when there is none).
ElementwiseChain chainForwardFrom(mlir::Value x);

// The chain's result at each of `points` (the input a [1, 1, points] float32 tensor); nullopt when
// a node cannot be evaluated.
std::optional<std::vector<double>> evaluateChain(const ElementwiseChain &chain,
                                                 llvm::ArrayRef<double> points);

// y = scale * x with cap = 0, or y = cap * tanh(scale * x / cap): what the chain computes, fitted
// from its values; nullopt when it is neither (or the scale is not positive).
struct ScaledSoftCap {
  double scale = 1.0;
  double cap = 0.0; // 0: not capped
};
std::optional<ScaledSoftCap> fitScaledSoftCap(const ElementwiseChain &chain);

// Whether `got` equals `want` within the tolerance above.
bool withinRounding(double got, double want);

// The relative rounding of the chain's narrowest float type, among its nodes' results and the
// constants they read: 2^-23 for float32, 2^-10 for float16, 2^-7 for bfloat16. A float16 file's
// constants (GELU's sqrt(2), 0.044715) are rounded to it, so a function fitted to its values is
// held to that type's ulps rather than float32's.
double chainRounding(const ElementwiseChain &chain);

// How --explain opens a fit (the hetc.fit attribute) of `count` nodes from `first` to `last`:
// "fitted by values: 9 nodes from 'a' to 'b' are", or "... 1 node, 'a', is".
std::string fittedNodes(size_t count, llvm::StringRef first, llvm::StringRef last);

// The ONNX name of a node (or its location's name) for messages.
std::string nodeName(mlir::Operation *op);

// "the 6 nodes from 'a' to 'b'" of a region in program order, for its refusal.
std::string regionNamed(llvm::ArrayRef<mlir::Operation *> nodes);

} // namespace hetc
