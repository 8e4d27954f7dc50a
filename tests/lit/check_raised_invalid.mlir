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
