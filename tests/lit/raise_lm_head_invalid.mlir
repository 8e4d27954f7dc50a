// RUN: hetc-opt %s --hetc-raise-lm-head --canonicalize --hetc-check-raised -split-input-file -verify-diagnostics

// Logits through a softcap (tanh) are not a plain lm_head.
func.func @softcap(%x: tensor<?x?x8xf32>) -> (tensor<?x?x32xf32> {hetc.name = "logits"}) {
  %w = hetc.weight "lm_head" : tensor<8x32xf32>
  %l = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x32xf32>) -> tensor<?x?x32xf32>
  // expected-error @+1 {{node 'final/Tanh' (Tanh) is not part of a computation hetc recognises: its result feeds the output 'logits' but no raising pattern matched}}
  %t = hetc.onnx.node "Tanh"(%l) {node_name = "final/Tanh"} : (tensor<?x?x32xf32>) -> tensor<?x?x32xf32>
  return %t : tensor<?x?x32xf32>
}

// -----

// An lm_head with a bias (GPT-J, Phi-2): named, not raised without it.
func.func @bias(%x: tensor<?x?x8xf32>) -> (tensor<?x?x32xf32> {hetc.name = "logits"}) {
  %w = hetc.weight "lm_head" : tensor<8x32xf32>
  %b = hetc.weight "lm_head.bias" : tensor<32xf32>
  // expected-error @+1 {{the linear that produces the logits adds a bias, which hetc.lm_head does not have}}
  %l = hetc.linear %x, %w, %b : (tensor<?x?x8xf32>, tensor<8x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  return %l : tensor<?x?x32xf32>
}
