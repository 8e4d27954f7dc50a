// RUN: hetc-opt %s --hetc-fold-shapes -split-input-file -verify-diagnostics

// A Softmax of opset 11 over axis 1 of [B, H, S, T] scores flattens heads, queries and keys into
// one distribution: not a softmax over the last axis, refused once the rank is known.
func.func @softmax_before_13_other_axis(%q: tensor<?x2x?x4xf32>, %k: tensor<?x2x4x?xf32>) -> tensor<*xf32> {
  %s = hetc.onnx.node "MatMul"(%q, %k) {node_name = "scores"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<*xf32>
  // expected-error @+1 {{node 'softmax' (Softmax, opset 11) flattens its input at axis 1 of a rank-4 input; hetc reads a softmax over the last axis only (export with opset 13 or later)}}
  %p = hetc.onnx.node "Softmax"(%s) {node_name = "softmax", onnx_attrs = {axis = 1 : i64, hetc.flattens_before_13 = 11 : i64}} : (tensor<*xf32>) -> tensor<*xf32>
  return %p : tensor<*xf32>
}
