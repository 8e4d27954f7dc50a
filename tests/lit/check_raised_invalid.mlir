// RUN: hetc-opt %s --hetc-check-raised -verify-diagnostics -split-input-file

// Only the edge of what was not understood is reported: the Relu feeding a raised op, not the
// Abs behind it.
func.func @edge(%x: tensor<?x?x8xf32>) -> (tensor<?x?x32xf32> {hetc.name = "logits"}) {
  %w = hetc.weight "lm_head" : tensor<8x32xf32>
  %a = hetc.onnx.node "Abs"(%x) {node_name = "act/Abs"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{node 'act/Relu' (Relu) is not part of a computation hetc recognises: its result feeds hetc.lm_head but no raising pattern matched}}
  %r = hetc.onnx.node "Relu"(%a) {node_name = "act/Relu"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %l = hetc.lm_head %r, %w : (tensor<?x?x8xf32>, tensor<8x32xf32>) -> tensor<?x?x32xf32>
  return %l : tensor<?x?x32xf32>
}

// -----

// A present output computed by nodes no pattern understood; an unnamed second output.
func.func @outputs(%k: tensor<?x2x?x4xf32>, %kn: tensor<?x2x?x4xf32>) -> (tensor<?x2x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x2x?x4xf32>) {
  // expected-error @+1 {{node 'attn/Concat' (Concat) is not part of a computation hetc recognises: its result feeds the output 'present.0.key' but no raising pattern matched}}
  %p = hetc.onnx.node "Concat"(%k, %kn) {node_name = "attn/Concat", onnx_attrs = {axis = 2 : i64}} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  // expected-error @+1 {{node 'Neg#3' (Neg) is not part of a computation hetc recognises: its result feeds output #1 but no raising pattern matched}}
  %n = hetc.onnx.node "Neg"(%kn) {node_name = "Neg#3"} : (tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  return %p, %n : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>
}

// -----

// Behind the edge, the first node that reads an LLM op's values is named too: here a bias added
// after a projection, which no pattern takes (Shape reads only dimensions and is passed over).
func.func @recognition_stop(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32> {hetc.name = "present.0.key"}) {
  %w = hetc.weight "k_proj" : tensor<8x8xf32>
  %b = hetc.weight "k_bias" : tensor<8xf32>
  %k = hetc.linear %x, %w {hetc.source = "k/MatMul"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %s = hetc.onnx.node "Shape"(%k) {node_name = "k/Shape"} : (tensor<?x?x8xf32>) -> tensor<3xi64>
  %kb = hetc.onnx.node "Add"(%k, %b) {node_name = "k/Add"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %r = hetc.onnx.node "Reshape"(%kb, %s) {node_name = "k/Reshape"} : (tensor<?x?x8xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{node 'k/Neg' (Neg) is not part of a computation hetc recognises: its result feeds the output 'present.0.key' but no raising pattern matched; recognition stops at node 'k/Add' (Add), the first that reads a hetc.linear result}}
  %n = hetc.onnx.node "Neg"(%r) {node_name = "k/Neg"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %n : tensor<?x?x8xf32>
}

// -----

// One region, one error: the two outputs computed by connected unraised nodes are one blocker,
// reported at its first edge with what the region reads and what reads it.
func.func @one_region(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32> {hetc.name = "present.0.key"}, tensor<?x?x8xf32> {hetc.name = "present.0.value"}) {
  %w = hetc.weight "k_proj" : tensor<8x8xf32>
  %k = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %a = hetc.onnx.node "Abs"(%k) {node_name = "k/Abs"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{node 'k/Neg' (Neg) is not part of a computation hetc recognises: its result feeds the output 'present.0.key' but no raising pattern matched; recognition stops at node 'k/Abs' (Abs), the first that reads a hetc.linear result; the region hetc does not recognise has 3 nodes reading hetc.linear, read by the output 'present.0.key', the output 'present.0.value'}}
  %n = hetc.onnx.node "Neg"(%a) {node_name = "k/Neg"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %r = hetc.onnx.node "Relu"(%a) {node_name = "k/Relu"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %n, %r : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}
