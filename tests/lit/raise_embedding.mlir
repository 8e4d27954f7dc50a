// RUN: hetc-opt %s --hetc-raise-embedding -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @token_embedding
// CHECK-SAME: (%[[IDS:.*]]: tensor<?x?xi64>)
// CHECK: %[[T:.*]] = hetc.weight "embed_tokens.weight"
// CHECK: %[[H:.*]] = hetc.embedding %[[T]], %[[IDS]] : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
// CHECK: return %[[H]]
func.func @token_embedding(%ids: tensor<?x?xi64>) -> tensor<?x?x8xf32> {
  %table = hetc.weight "embed_tokens.weight" : tensor<32x8xf32>
  %h = hetc.onnx.node "Gather"(%table, %ids) {node_name = "embed_tokens/Gather"} : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  return %h : tensor<?x?x8xf32>
}

// -----

// Not embeddings: a gather of columns (axis 1), and a gather from a shape constant.
// CHECK-LABEL: func.func @not_embedding
// CHECK-NOT: hetc.embedding
func.func @not_embedding(%ids: tensor<?xi64>, %x: tensor<?x?xf32>) -> (tensor<32x?xf32>, tensor<i64>) {
  %table = hetc.weight "table" : tensor<32x8xf32>
  %cols = hetc.onnx.node "Gather"(%table, %ids) {node_name = "cols", onnx_attrs = {axis = 1 : i64}} : (tensor<32x8xf32>, tensor<?xi64>) -> tensor<32x?xf32>
  %shape = hetc.onnx.node "Shape"(%x) {node_name = "shape"} : (tensor<?x?xf32>) -> tensor<2xi64>
  %zero = hetc.constant dense<0> : tensor<i64>
  %d = hetc.onnx.node "Gather"(%shape, %zero) {node_name = "dim", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  return %cols, %d : tensor<32x?xf32>, tensor<i64>
}

// -----

// GPT-2's learned positions: wpe gathered by position_ids beside wte gathered by input_ids. Only
// the lookup by the token ids (the input named input_ids, whichever comes first) is hetc.embedding:
// the runtime's embedding reads the step's tokens, and rows gathered by positions or by a
// computation are not token rows.
// CHECK-LABEL: func.func @learned_positions
// CHECK-SAME: (%[[POS:.*]]: tensor<?x?xi64> {hetc.name = "position_ids"}, %[[IDS:.*]]: tensor<?x?xi64> {hetc.name = "input_ids"})
// CHECK: hetc.onnx.node "Gather"(%{{.*}}, %[[POS]])
// CHECK: hetc.embedding %{{.*}}, %[[IDS]]
// CHECK: hetc.onnx.node "Gather"(%{{.*}}, %{{.*}}) {node_name = "computed/Gather"}
func.func @learned_positions(%pos: tensor<?x?xi64> {hetc.name = "position_ids"}, %ids: tensor<?x?xi64> {hetc.name = "input_ids"}) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %wpe = hetc.weight "wpe.weight" : tensor<64x8xf32>
  %wte = hetc.weight "wte.weight" : tensor<32x8xf32>
  %p = hetc.onnx.node "Gather"(%wpe, %pos) {node_name = "wpe/Gather"} : (tensor<64x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %t = hetc.onnx.node "Gather"(%wte, %ids) {node_name = "wte/Gather"} : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %two = hetc.constant dense<2> : tensor<i64>
  %shifted = hetc.onnx.node "Add"(%pos, %two) {node_name = "computed/Add"} : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi64>
  %c = hetc.onnx.node "Gather"(%wpe, %shifted) {node_name = "computed/Gather"} : (tensor<64x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  return %p, %t, %c : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// -----

// GPT-2's input_ids.view(-1, S): the lookup is still by the token ids.
// CHECK-LABEL: func.func @ids_viewed
// CHECK: %[[V:.*]] = hetc.onnx.node "Reshape"
// CHECK: hetc.embedding %{{.*}}, %[[V]]
func.func @ids_viewed(%ids: tensor<?x?xi64> {hetc.name = "input_ids"}, %shape: tensor<2xi64>) -> tensor<?x?x8xf32> {
  %wte = hetc.weight "wte.weight" : tensor<32x8xf32>
  %v = hetc.onnx.node "Reshape"(%ids, %shape) {node_name = "view"} : (tensor<?x?xi64>, tensor<2xi64>) -> tensor<?x?xi64>
  %t = hetc.onnx.node "Gather"(%wte, %v) {node_name = "wte/Gather"} : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  return %t : tensor<?x?x8xf32>
}

// -----

// GPT-2's wte(input_ids) + wpe(position_ids): the positions' rows join the embedding, at offset 0.
// CHECK-LABEL: func.func @added_positions
// CHECK-SAME: (%[[IDS:.*]]: tensor<?x?xi64> {hetc.name = "input_ids"}, %[[POS:.*]]: tensor<?x?xi64> {hetc.name = "position_ids"})
// CHECK: %[[WPE:.*]] = hetc.weight "wpe.weight"
// CHECK: %[[WTE:.*]] = hetc.weight "wte.weight"
// CHECK: %[[H:.*]] = hetc.embedding %[[WTE]], %[[IDS]], %[[WPE]] {position_offset = 0 : i64} : (tensor<32x8xf32>, tensor<?x?xi64>, tensor<64x8xf32>) -> tensor<?x?x8xf32>
// CHECK-NOT: "Gather"
// CHECK: return %[[H]]
func.func @added_positions(%ids: tensor<?x?xi64> {hetc.name = "input_ids"}, %pos: tensor<?x?xi64> {hetc.name = "position_ids"}) -> tensor<*xf32> {
  %wpe = hetc.weight "wpe.weight" : tensor<64x8xf32>
  %wte = hetc.weight "wte.weight" : tensor<32x8xf32>
  %t = hetc.onnx.node "Gather"(%wte, %ids) {node_name = "wte/Gather"} : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %p = hetc.onnx.node "Gather"(%wpe, %pos) {node_name = "wpe/Gather"} : (tensor<64x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %h = hetc.onnx.node "Add"(%t, %p) {node_name = "Add"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<*xf32>
  return %h : tensor<*xf32>
}

// -----

// OPT's positions: (cumsum(mask) * mask - 1)[:, past:] + 2, no position_ids input. Evaluated on
// sample steps, the index is each token's position plus 2.
// CHECK-LABEL: func.func @opt_positions
// CHECK: hetc.embedding %{{.*}}, %{{.*}}, %{{.*}} {position_offset = 2 : i64}
// CHECK-NOT: "CumSum"
func.func @opt_positions(%ids: tensor<?x?xi64> {hetc.name = "input_ids"}, %mask: tensor<?x?xi64> {hetc.name = "attention_mask"}, %past: tensor<?x4x?x8xf32> {hetc.name = "past_key_values.0.key"}) -> tensor<*xf32> {
  %wpe = hetc.weight "embed_positions.weight" : tensor<66x8xf32>
  %wte = hetc.weight "embed_tokens.weight" : tensor<32x8xf32>
  %t = hetc.onnx.node "Gather"(%wte, %ids) {node_name = "embed_tokens/Gather"} : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %one_axis = hetc.constant dense<1> : tensor<i64>
  %cum = hetc.onnx.node "CumSum"(%mask, %one_axis) {node_name = "CumSum"} : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi64>
  %masked = hetc.onnx.node "Mul"(%cum, %mask) {node_name = "Mul"} : (tensor<?x?xi64>, tensor<?x?xi64>) -> tensor<?x?xi64>
  %one = hetc.constant dense<1> : tensor<i64>
  %pos = hetc.onnx.node "Sub"(%masked, %one) {node_name = "Sub"} : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi64>
  %shape = hetc.onnx.node "Shape"(%past) {node_name = "Shape"} : (tensor<?x4x?x8xf32>) -> tensor<4xi64>
  %two_index = hetc.constant dense<2> : tensor<i64>
  %past_len = hetc.onnx.node "Gather"(%shape, %two_index) {node_name = "past_len", onnx_attrs = {axis = 0 : i64}} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %zero_axis = hetc.constant dense<0> : tensor<1xi64>
  %start = hetc.onnx.node "Unsqueeze"(%past_len, %zero_axis) {node_name = "start"} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %end = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %axes = hetc.constant dense<1> : tensor<1xi64>
  %step = hetc.constant dense<1> : tensor<1xi64>
  %sliced = hetc.onnx.node "Slice"(%pos, %start, %end, %axes, %step) {node_name = "Slice"} : (tensor<?x?xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?xi64>
  %offset = hetc.constant dense<2> : tensor<i64>
  %index = hetc.onnx.node "Add"(%sliced, %offset) {node_name = "offset"} : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi64>
  %p = hetc.onnx.node "Gather"(%wpe, %index) {node_name = "embed_positions/Gather"} : (tensor<66x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %h = hetc.onnx.node "Add"(%t, %p) {node_name = "Add"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<*xf32>
  return %h : tensor<*xf32>
}

// -----

// GPT-2 without position_ids: arange(past, past + S) unsqueezed to [1, S], shared by the batch.
// CHECK-LABEL: func.func @arange_positions
// CHECK: hetc.embedding %{{.*}}, %{{.*}}, %{{.*}} {position_offset = 0 : i64}
func.func @arange_positions(%ids: tensor<?x?xi64> {hetc.name = "input_ids"}, %past: tensor<?x4x?x8xf32> {hetc.name = "past_key_values.0.key"}) -> tensor<*xf32> {
  %wpe = hetc.weight "wpe.weight" : tensor<64x8xf32>
  %wte = hetc.weight "wte.weight" : tensor<32x8xf32>
  %t = hetc.onnx.node "Gather"(%wte, %ids) {node_name = "wte/Gather"} : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %pshape = hetc.onnx.node "Shape"(%past) {node_name = "Shape"} : (tensor<?x4x?x8xf32>) -> tensor<4xi64>
  %two = hetc.constant dense<2> : tensor<i64>
  %start = hetc.onnx.node "Gather"(%pshape, %two) {node_name = "past_len", onnx_attrs = {axis = 0 : i64}} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %ishape = hetc.onnx.node "Shape"(%ids) {node_name = "Shape_1"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %one = hetc.constant dense<1> : tensor<i64>
  %seq = hetc.onnx.node "Gather"(%ishape, %one) {node_name = "seq_len", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %end = hetc.onnx.node "Add"(%start, %seq) {node_name = "end"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %range = hetc.onnx.node "Range"(%start, %end, %one) {node_name = "Range"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %zero = hetc.constant dense<0> : tensor<1xi64>
  %pos = hetc.onnx.node "Unsqueeze"(%range, %zero) {node_name = "Unsqueeze"} : (tensor<?xi64>, tensor<1xi64>) -> tensor<1x?xi64>
  %p = hetc.onnx.node "Gather"(%wpe, %pos) {node_name = "wpe/Gather"} : (tensor<64x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %h = hetc.onnx.node "Add"(%t, %p) {node_name = "Add"} : (tensor<?x?x8xf32>, tensor<1x?x8xf32>) -> tensor<*xf32>
  return %h : tensor<*xf32>
}

// -----

// Gemma's embeddings times sqrt(hidden) (a constant however the export writes it: Mul here, Div
// by its inverse alike) become the embedding's scale, when nothing else reads the rows.
// CHECK-LABEL: func.func @scaled
// CHECK: %[[H:.*]] = hetc.embedding %{{.*}}, %{{.*}} {scale = 2.82842708 : f32}
// CHECK-NOT: "Mul"
// CHECK: return %[[H]]
func.func @scaled(%ids: tensor<?x?xi64>) -> tensor<?x?x8xf32> {
  %table = hetc.weight "embed_tokens.weight" : tensor<32x8xf32>
  %h = hetc.onnx.node "Gather"(%table, %ids) {node_name = "embed_tokens/Gather"} : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %s = hetc.constant dense<2.82842708> : tensor<f32>
  %y = hetc.onnx.node "Mul"(%h, %s) {node_name = "Mul"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}
