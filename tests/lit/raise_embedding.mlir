// RUN: hetc-opt %s --hetc-raise-embedding -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @token_embedding
// CHECK-SAME: (%[[IDS:.*]]: tensor<?x?xi64>)
// CHECK: %[[T:.*]] = hetc.weight "embed_tokens.weight"
// CHECK: %[[H:.*]] = hetc.embedding %[[T]], %[[IDS]] : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
// CHECK: return %[[H]]
func.func @token_embedding(%ids: tensor<?x?xi64>) -> tensor<?x?x8xf32> {
  %table = hetc.weight "embed_tokens.weight" : tensor<32x8xf32>
  %h = hetc.onnx.node "Gather"(%table, %ids) {node_name = "embed_tokens/Gather"} : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  return %h : tensor<?x?x8xf32>
}

// -----

// Not embeddings: a gather of columns (axis 1), and a gather from a shape constant.
// CHECK-LABEL: func.func @not_embedding
// CHECK-NOT: hetc.embedding
func.func @not_embedding(%ids: tensor<?xi64>, %x: tensor<?x?xf32>) -> (tensor<32x?xf32>, tensor<i64>) {
  %table = hetc.weight "table" : tensor<32x8xf32>
  %cols = hetc.onnx.node "Gather"(%table, %ids) {node_name = "cols", onnx_attrs = {axis = 1 : i64}} : (tensor<32x8xf32>, tensor<?xi64>) -> tensor<32x?xf32>
  %shape = hetc.onnx.node "Shape"(%x) {node_name = "shape"} : (tensor<?x?xf32>) -> tensor<2xi64>
  %zero = hetc.constant dense<0> : tensor<i64>
  %d = hetc.onnx.node "Gather"(%shape, %zero) {node_name = "dim", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  return %cols, %d : tensor<32x?xf32>, tensor<i64>
}
