// RUN: hetc-opt %s --hetc-raise-swiglu --canonicalize --hetc-check-raised -verify-diagnostics

// A sigmoid gate on a different tensor than the one it multiplies is not SiLU.
func.func @glu(%gate: tensor<?x?x16xf32>, %other: tensor<?x?x16xf32>, %up: tensor<?x?x16xf32>) -> (tensor<?x?x16xf32> {hetc.name = "hidden"}) {
  %s = hetc.onnx.node "Sigmoid"(%other) {node_name = "act/Sigmoid"} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %glu = hetc.onnx.node "Mul"(%gate, %s) {node_name = "act/Mul"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  // expected-error @+1 {{node 'mlp/Mul' (Mul) is not part of a computation hetc recognises: its result feeds the output 'hidden' but no raising pattern matched}}
  %y = hetc.onnx.node "Mul"(%glu, %up) {node_name = "mlp/Mul"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}
