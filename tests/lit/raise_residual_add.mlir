// RUN: hetc-opt %s --hetc-raise-residual-add -split-input-file | FileCheck %s

// The residual stream: the embedding plus the attention block's output projection.
// CHECK-LABEL: func.func @residual
// CHECK: %[[H:.*]] = hetc.embedding
// CHECK: %[[O:.*]] = hetc.linear
// CHECK: %[[R:.*]] = hetc.add %[[H]], %[[O]] : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
// CHECK: return %[[R]]
func.func @residual(%ids: tensor<?x?xi64>) -> tensor<?x?x8xf32> {
  %table = hetc.weight "embed" : tensor<32x8xf32>
  %w = hetc.weight "o_proj" : tensor<8x8xf32>
  %h = hetc.embedding %table, %ids : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %o = hetc.linear %h, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r = hetc.onnx.node "Add"(%h, %o) {node_name = "layers.0/Add"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %r : tensor<?x?x8xf32>
}

// -----

// Not residual adds: a bias (broadcast constant), and a sum of two ONNX nodes.
// CHECK-LABEL: func.func @not_residual
// CHECK-NOT: hetc.add
func.func @not_residual(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %w = hetc.weight "proj" : tensor<8x8xf32>
  %bias = hetc.weight "bias" : tensor<8xf32>
  %y = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %b = hetc.onnx.node "Add"(%y, %bias) {node_name = "bias/Add"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %n = hetc.onnx.node "Neg"(%x) {node_name = "neg"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %s = hetc.onnx.node "Add"(%n, %y) {node_name = "sum"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %b, %s : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}
