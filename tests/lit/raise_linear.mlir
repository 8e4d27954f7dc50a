// RUN: hetc-opt %s --hetc-raise-linear -split-input-file | FileCheck %s

// A weight already in MatMul orientation [K, N].
// CHECK-LABEL: func.func @matmul_weight
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK: %[[W:.*]] = hetc.weight "proj" : tensor<8x16xf32>
// CHECK: %[[Y:.*]] = hetc.linear %[[X]], %[[W]] : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
// CHECK: return %[[Y]]
func.func @matmul_weight(%x: tensor<?x?x8xf32>) -> tensor<?x?x16xf32> {
  %w = hetc.weight "proj" : tensor<8x16xf32>
  %y = hetc.onnx.node "MatMul"(%x, %w) {node_name = "proj/MatMul"} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// -----

// nn.Linear's [N, K] weight exported unfolded as Transpose then MatMul: a transposed view of the
// stored weight, never a copy. A shape-less result gets its feature size from the weight.
// CHECK-LABEL: func.func @transposed_weight
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK: %[[W:.*]] = hetc.weight "proj.weight" {transposed} : tensor<8x16xf32>
// CHECK: %[[Y:.*]] = hetc.linear %[[X]], %[[W]] : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
// CHECK: return %[[Y]]
func.func @transposed_weight(%x: tensor<?x?x8xf32>) -> tensor<*xf32> {
  %w = hetc.weight "proj.weight" : tensor<16x8xf32>
  %wt = hetc.onnx.node "Transpose"(%w) {node_name = "proj/Transpose", onnx_attrs = {perm = [1, 0]}} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %y = hetc.onnx.node "MatMul"(%x, %wt) {node_name = "proj/MatMul"} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// -----

// Not linear layers: a product of two activations, and a weight on the left.
// CHECK-LABEL: func.func @not_linear
// CHECK-NOT: hetc.linear
func.func @not_linear(%x: tensor<?x8x8xf32>, %z: tensor<?x8x8xf32>) -> (tensor<?x8x8xf32>, tensor<?x8x8xf32>) {
  %w = hetc.weight "proj" : tensor<8x8xf32>
  %a = hetc.onnx.node "MatMul"(%x, %z) {node_name = "scores"} : (tensor<?x8x8xf32>, tensor<?x8x8xf32>) -> tensor<?x8x8xf32>
  %b = hetc.onnx.node "MatMul"(%w, %x) {node_name = "left"} : (tensor<8x8xf32>, tensor<?x8x8xf32>) -> tensor<?x8x8xf32>
  return %a, %b : tensor<?x8x8xf32>, tensor<?x8x8xf32>
}
