// RUN: hetc-opt %s --hetc-raise-lm-head --canonicalize --hetc-check-raised -split-input-file -verify-diagnostics

// Logits through a function that is not a soft-cap, c * tanh(x / c), are refused at its first
// node, with what it was fitted to.
func.func @sigmoid(%x: tensor<?x?x8xf32>) -> (tensor<?x?x32xf32> {hetc.name = "logits"}) {
  %w = hetc.weight "lm_head" : tensor<8x32xf32>
  %l = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x32xf32>) -> tensor<?x?x32xf32>
  // expected-error @+1 {{node 'final/Sigmoid' (Sigmoid) starts a computation of the logits from the lm_head that is not a soft-cap c * tanh(x / c)}}
  %t = hetc.onnx.node "Sigmoid"(%l) {node_name = "final/Sigmoid"} : (tensor<?x?x32xf32>) -> tensor<?x?x32xf32>
  return %t : tensor<?x?x32xf32>
}

// -----

// A soft-cap of scaled logits (2 tanh(x)) is not the lm_head's soft-cap, c * tanh(x / c): the
// scale is named.
func.func @scaled_cap(%x: tensor<?x?x8xf32>) -> (tensor<?x?x32xf32> {hetc.name = "logits"}) {
  %w = hetc.weight "lm_head" : tensor<8x32xf32>
  %l = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x32xf32>) -> tensor<?x?x32xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  // expected-error @+1 {{node 'final/Tanh' (Tanh) starts a computation of the logits from the lm_head that is not a soft-cap c * tanh(x / c) (scale 2, cap 2)}}
  %t = hetc.onnx.node "Tanh"(%l) {node_name = "final/Tanh"} : (tensor<?x?x32xf32>) -> tensor<?x?x32xf32>
  %m = hetc.onnx.node "Mul"(%t, %two) {node_name = "final/Mul"} : (tensor<?x?x32xf32>, tensor<f32>) -> tensor<?x?x32xf32>
  return %m : tensor<?x?x32xf32>
}
