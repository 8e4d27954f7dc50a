// RUN: hetc-opt %s --hetc-raise-residual-add --canonicalize --hetc-check-raised -verify-diagnostics

// A linear layer with a bias is not something hetc has an op for yet.
func.func @bias(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32> {hetc.name = "hidden"}) {
  %w = hetc.weight "proj" : tensor<8x8xf32>
  %bias = hetc.weight "bias" : tensor<8xf32>
  %y = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{node 'bias/Add' (Add) is not part of a computation hetc recognises: its result feeds the output 'hidden' but no raising pattern matched}}
  %b = hetc.onnx.node "Add"(%y, %bias) {node_name = "bias/Add"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  return %b : tensor<?x?x8xf32>
}
