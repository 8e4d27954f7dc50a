// RUN: hetc-opt %s --hetc-raise-embedding -split-input-file -verify-diagnostics

// Position rows looked up at twice each token's position: not a position hetc.embedding adds.
func.func @doubled_positions(%ids: tensor<?x?xi64> {hetc.name = "input_ids"}, %pos: tensor<?x?xi64> {hetc.name = "position_ids"}) -> tensor<*xf32> {
  %wpe = hetc.weight "wpe.weight" : tensor<64x8xf32>
  %wte = hetc.weight "wte.weight" : tensor<32x8xf32>
  %two = hetc.constant dense<2> : tensor<i64>
  %doubled = hetc.onnx.node "Mul"(%pos, %two) {node_name = "Mul"} : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi64>
  %t = hetc.onnx.node "Gather"(%wte, %ids) {node_name = "wte/Gather"} : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{node 'wpe/Gather' (Gather) looks up learned positions by an index that is not each token's position plus one offset: token 1 of sequence 0 gets 6 (for 3 new tokens after 2 cached ones)}}
  %p = hetc.onnx.node "Gather"(%wpe, %doubled) {node_name = "wpe/Gather"} : (tensor<64x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %h = hetc.onnx.node "Add"(%t, %p) {node_name = "Add"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<*xf32>
  return %h : tensor<*xf32>
}

// -----

// Positions counted from the end of the mask (a right-to-left index): refused at the sample.
func.func @reversed_positions(%ids: tensor<?x?xi64> {hetc.name = "input_ids"}, %mask: tensor<?x?xi64> {hetc.name = "attention_mask"}) -> tensor<*xf32> {
  %wpe = hetc.weight "wpe.weight" : tensor<64x8xf32>
  %wte = hetc.weight "wte.weight" : tensor<32x8xf32>
  %one_axis = hetc.constant dense<1> : tensor<i64>
  %rev = hetc.onnx.node "CumSum"(%mask, %one_axis) {node_name = "CumSum", onnx_attrs = {reverse = 1 : i64}} : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi64>
  %t = hetc.onnx.node "Gather"(%wte, %ids) {node_name = "wte/Gather"} : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{node 'wpe/Gather' (Gather) looks up learned positions by an index that}}
  %p = hetc.onnx.node "Gather"(%wpe, %rev) {node_name = "wpe/Gather"} : (tensor<64x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %h = hetc.onnx.node "Add"(%t, %p) {node_name = "Add"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<*xf32>
  return %h : tensor<*xf32>
}

// -----

// An index clamped at 7: right for the short samples, not for the last rows of the table.
func.func @clamped_positions(%ids: tensor<?x?xi64> {hetc.name = "input_ids"}, %pos: tensor<?x?xi64> {hetc.name = "position_ids"}) -> tensor<*xf32> {
  %wpe = hetc.weight "wpe.weight" : tensor<64x8xf32>
  %wte = hetc.weight "wte.weight" : tensor<32x8xf32>
  %seven = hetc.constant dense<7> : tensor<i64>
  %clamped = hetc.onnx.node "Min"(%pos, %seven) {node_name = "Min"} : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi64>
  %t = hetc.onnx.node "Gather"(%wte, %ids) {node_name = "wte/Gather"} : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{node 'wpe/Gather' (Gather) looks up learned positions by an index that is not each token's position plus one offset: token 0 of sequence 0 gets 7 (for 2 new tokens after 62 cached ones)}}
  %p = hetc.onnx.node "Gather"(%wpe, %clamped) {node_name = "wpe/Gather"} : (tensor<64x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %h = hetc.onnx.node "Add"(%t, %p) {node_name = "Add"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<*xf32>
  return %h : tensor<*xf32>
}
