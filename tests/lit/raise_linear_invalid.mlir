// RUN: hetc-opt %s --hetc-raise-linear --canonicalize --hetc-check-raised -verify-diagnostics -split-input-file

// A matmul of two activations outside attention is nothing hetc knows.
func.func @activation_product(%x: tensor<?x?x8xf32>, %z: tensor<8x8xf32>) -> (tensor<?x?x8xf32> {hetc.name = "hidden"}) {
  // expected-error @+1 {{node 'mix/MatMul' (MatMul) is not part of a computation hetc recognises: its result feeds the output 'hidden' but no raising pattern matched}}
  %y = hetc.onnx.node "MatMul"(%x, %z) {node_name = "mix/MatMul"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// -----

// Transposing a weight the other way round than nn.Linear does is not a linear's weight.
func.func @odd_transpose(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32> {hetc.name = "hidden"}) {
  %w = hetc.weight "proj.weight" : tensor<8x8xf32>
  %wt = hetc.onnx.node "Transpose"(%w) {node_name = "proj/Transpose", onnx_attrs = {perm = [0, 1]}} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  // expected-error @+1 {{node 'proj/MatMul' (MatMul) is not part of a computation hetc recognises}}
  %y = hetc.onnx.node "MatMul"(%x, %wt) {node_name = "proj/MatMul"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}
