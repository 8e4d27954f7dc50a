// RUN: hetc-opt %s --hetc-raise-embedding --canonicalize --hetc-check-raised -verify-diagnostics

// Gathering columns of the table is not a token lookup.
func.func @columns(%ids: tensor<?xi64>) -> (tensor<32x?xf32> {hetc.name = "hidden"}) {
  %table = hetc.weight "table" : tensor<32x8xf32>
  // expected-error @+1 {{node 'cols' (Gather) is not part of a computation hetc recognises}}
  %cols = hetc.onnx.node "Gather"(%table, %ids) {node_name = "cols", onnx_attrs = {axis = 1 : i64}} : (tensor<32x8xf32>, tensor<?xi64>) -> tensor<32x?xf32>
  return %cols : tensor<32x?xf32>
}
