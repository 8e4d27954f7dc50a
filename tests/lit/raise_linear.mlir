// RUN: hetc-opt %s --hetc-raise-linear -split-input-file | FileCheck %s

// A weight already in MatMul orientation [K, N].
// CHECK-LABEL: func.func @matmul_weight
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK: %[[W:.*]] = hetc.weight "proj" : tensor<8x16xf32>
// CHECK: %[[Y:.*]] = hetc.linear %[[X]], %[[W]] : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
// CHECK: return %[[Y]]
func.func @matmul_weight(%x: tensor<?x?x8xf32>) -> tensor<?x?x16xf32> {
  %w = hetc.weight "proj" : tensor<8x16xf32>
  %y = hetc.onnx.node "MatMul"(%x, %w) {node_name = "proj/MatMul"} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// -----

// nn.Linear's [N, K] weight exported unfolded as Transpose then MatMul: a transposed view of the
// stored weight, never a copy. A shape-less result gets its feature size from the weight.
// CHECK-LABEL: func.func @transposed_weight
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK: %[[W:.*]] = hetc.weight "proj.weight" {transposed} : tensor<8x16xf32>
// CHECK: %[[Y:.*]] = hetc.linear %[[X]], %[[W]] : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
// CHECK: return %[[Y]]
func.func @transposed_weight(%x: tensor<?x?x8xf32>) -> tensor<*xf32> {
  %w = hetc.weight "proj.weight" : tensor<16x8xf32>
  %wt = hetc.onnx.node "Transpose"(%w) {node_name = "proj/Transpose", onnx_attrs = {perm = [1, 0]}} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %y = hetc.onnx.node "MatMul"(%x, %wt) {node_name = "proj/MatMul"} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// -----

// Not linear layers: a product of two activations, and a weight on the left.
// CHECK-LABEL: func.func @not_linear
// CHECK-NOT: hetc.linear
func.func @not_linear(%x: tensor<?x8x8xf32>, %z: tensor<?x8x8xf32>) -> (tensor<?x8x8xf32>, tensor<?x8x8xf32>) {
  %w = hetc.weight "proj" : tensor<8x8xf32>
  %a = hetc.onnx.node "MatMul"(%x, %z) {node_name = "scores"} : (tensor<?x8x8xf32>, tensor<?x8x8xf32>) -> tensor<?x8x8xf32>
  %b = hetc.onnx.node "MatMul"(%w, %x) {node_name = "left"} : (tensor<8x8xf32>, tensor<?x8x8xf32>) -> tensor<?x8x8xf32>
  return %a, %b : tensor<?x8x8xf32>, tensor<?x8x8xf32>
}

// -----

// nn.Linear(bias=True): MatMul then Add of a [N] vector, either side, becomes the linear's bias.
// CHECK-LABEL: func.func @bias
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK-DAG: %[[W:.*]] = hetc.weight "q_proj.weight" {transposed} : tensor<8x16xf32>
// CHECK-DAG: %[[B:.*]] = hetc.weight "q_proj.bias" : tensor<16xf32>
// CHECK: %[[Y:.*]] = hetc.linear %[[X]], %[[W]], %[[B]] : (tensor<?x?x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
// CHECK: %[[C:.*]] = hetc.constant dense<{{.*}}> : tensor<4xf32>
// CHECK: %[[Z:.*]] = hetc.linear %[[X]], %{{.*}}, %[[C]] : (tensor<?x?x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
// CHECK-NOT: "Add"
// CHECK: return %[[Y]], %[[Z]]
func.func @bias(%x: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<?x?x4xf32>) {
  %w = hetc.weight "q_proj.weight" : tensor<16x8xf32>
  %b = hetc.weight "q_proj.bias" : tensor<16xf32>
  %wt = hetc.onnx.node "Transpose"(%w) {node_name = "q_proj/Transpose", onnx_attrs = {perm = [1, 0]}} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %m = hetc.onnx.node "MatMul"(%x, %wt) {node_name = "q_proj/MatMul"} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<*xf32>
  %y = hetc.onnx.node "Add"(%b, %m) {node_name = "q_proj/Add"} : (tensor<16xf32>, tensor<*xf32>) -> tensor<*xf32>
  %w2 = hetc.weight "k_proj" : tensor<8x4xf32>
  %c = hetc.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %m2 = hetc.onnx.node "MatMul"(%x, %w2) {node_name = "k_proj/MatMul"} : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %z = hetc.onnx.node "Add"(%m2, %c) {node_name = "k_proj/Add"} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  return %y, %z : tensor<*xf32>, tensor<?x?x4xf32>
}

// -----

// Not a bias: the MatMul's result is also read elsewhere, or the vector is not [N].
// CHECK-LABEL: func.func @not_bias
// CHECK: %[[Y:.*]] = hetc.linear %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
// CHECK: hetc.onnx.node "Add"(%[[Y]], %{{.*}})
// CHECK: %[[Z:.*]] = hetc.linear %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
// CHECK: hetc.onnx.node "Add"(%[[Z]], %{{.*}})
func.func @not_bias(%x: tensor<?x?x8xf32>) -> (tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) {
  %w = hetc.weight "k_proj" : tensor<8x4xf32>
  %b = hetc.weight "k_proj.bias" : tensor<4xf32>
  %m = hetc.onnx.node "MatMul"(%x, %w) {node_name = "k_proj/MatMul"} : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %y = hetc.onnx.node "Add"(%m, %b) {node_name = "k_proj/Add"} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  %w2 = hetc.weight "v_proj" : tensor<8x4xf32>
  %s = hetc.constant dense<1.0> : tensor<1xf32>
  %m2 = hetc.onnx.node "MatMul"(%x, %w2) {node_name = "v_proj/MatMul"} : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %z = hetc.onnx.node "Add"(%m2, %s) {node_name = "v_proj/Add"} : (tensor<?x?x4xf32>, tensor<1xf32>) -> tensor<?x?x4xf32>
  return %m, %y, %z : tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>
}

// -----

// GPT-2's Conv1D / OPT's feed-forward: tokens flattened to rows, Gemm(rows, W, b, transB = 1),
// viewed back. The Reshapes keep the features, so the linear reads the activation itself and
// its readers read the linear; alpha 2 is no plain linear.
// CHECK-LABEL: func.func @gemm_rows
// CHECK: %[[N:.*]] = hetc.rms_norm
// CHECK: %[[W:.*]] = hetc.weight "fc.weight" {transposed} : tensor<8x4xf32>
// CHECK: %[[Y:.*]] = hetc.linear %[[N]], %[[W]], %{{.*}} : (tensor<?x?x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
// CHECK: hetc.onnx.node "Gemm"{{.*}}alpha = 2.0
// CHECK: return %[[Y]],
func.func @gemm_rows(%x: tensor<?x?x8xf32>) -> (tensor<?x?x4xf32>, tensor<?x4xf32>) {
  %g = hetc.weight "norm" : tensor<8xf32>
  %n = hetc.rms_norm %x, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %flat = hetc.constant dense<[-1, 8]> : tensor<2xi64>
  %rows = hetc.onnx.node "Reshape"(%n, %flat) {node_name = "fc/Reshape"} : (tensor<?x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %w = hetc.weight "fc.weight" : tensor<4x8xf32>
  %b = hetc.weight "fc.bias" : tensor<4xf32>
  %y = hetc.onnx.node "Gemm"(%rows, %w, %b) {node_name = "fc/Gemm", onnx_attrs = {transB = 1 : i64}} : (tensor<?x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  %view = hetc.constant dense<[0, 0, 4]> : tensor<3xi64>
  %back = hetc.onnx.node "Reshape"(%y, %view) {node_name = "fc/Reshape_1"} : (tensor<?x4xf32>, tensor<3xi64>) -> tensor<?x?x4xf32>
  %z = hetc.onnx.node "Gemm"(%rows, %w, %b) {node_name = "fc2/Gemm", onnx_attrs = {transB = 1 : i64, alpha = 2.0 : f32}} : (tensor<?x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  return %back, %z : tensor<?x?x4xf32>, tensor<?x4xf32>
}

// -----

// A packed projection (nn.Linear [N, K] with a bias) split in three along the last axis, as
// GPT-2's c_attn.split exports at opset 13 (sizes as an input): one linear per piece over its
// columns of the transposed view and of the bias; the packed linear is gone.
// CHECK-LABEL: func.func @split_packed
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK-DAG: %[[WQ:.*]] = hetc.weight "qkv.weight" {columns = array<i64: 0, 8>, transposed} : tensor<8x8xf32>
// CHECK-DAG: %[[BQ:.*]] = hetc.weight "qkv.bias" {columns = array<i64: 0, 8>} : tensor<8xf32>
// CHECK-DAG: %[[WV:.*]] = hetc.weight "qkv.weight" {columns = array<i64: 12, 16>, transposed} : tensor<8x4xf32>
// CHECK-DAG: %[[BV:.*]] = hetc.weight "qkv.bias" {columns = array<i64: 12, 16>} : tensor<4xf32>
// CHECK-DAG: %[[Q:.*]] = hetc.linear %[[X]], %[[WQ]], %[[BQ]] : (tensor<?x?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
// CHECK-DAG: %[[V:.*]] = hetc.linear %[[X]], %[[WV]], %[[BV]] : (tensor<?x?x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
// CHECK-NOT: "Split"
// CHECK-NOT: tensor<8x16xf32>
// CHECK: return %[[Q]], %{{.*}}, %[[V]]
func.func @split_packed(%x: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %w = hetc.weight "qkv.weight" : tensor<16x8xf32>
  %b = hetc.weight "qkv.bias" : tensor<16xf32>
  %sizes = hetc.constant dense<[8, 4, 4]> : tensor<3xi64>
  %wt = hetc.onnx.node "Transpose"(%w) {node_name = "qkv/Transpose", onnx_attrs = {perm = [1, 0]}} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %y = hetc.onnx.node "MatMul"(%x, %wt) {node_name = "qkv/MatMul"} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %yb = hetc.onnx.node "Add"(%y, %b) {node_name = "qkv/Add"} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  %s:3 = hetc.onnx.node "Split"(%yb, %sizes) {node_name = "qkv/Split", onnx_attrs = {axis = 2 : i64}} : (tensor<?x?x16xf32>, tensor<3xi64>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %s#0, %s#1, %s#2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// Phi-3's qkv[..., a:b]: Slices of the last axis, an open end (INT64_MAX) clamped; a weight in
// MatMul orientation is sliced along its columns. Equal parts from Split's attribute-less form.
// CHECK-LABEL: func.func @slice_packed
// CHECK-DAG: hetc.weight "qkv" {columns = array<i64: 0, 8>} : tensor<8x8xf32>
// CHECK-DAG: hetc.weight "qkv" {columns = array<i64: 8, 16>} : tensor<8x8xf32>
// CHECK-DAG: hetc.weight "halves" {columns = array<i64: 0, 4>} : tensor<8x4xf32>
// CHECK-DAG: hetc.weight "halves" {columns = array<i64: 4, 8>} : tensor<8x4xf32>
// CHECK-NOT: "Slice"
// CHECK-NOT: "Split"
func.func @slice_packed(%x: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %w = hetc.weight "qkv" : tensor<8x16xf32>
  %h = hetc.weight "halves" : tensor<8x8xf32>
  %zero = hetc.constant dense<0> : tensor<1xi64>
  %eight = hetc.constant dense<8> : tensor<1xi64>
  %end = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %last = hetc.constant dense<-1> : tensor<1xi64>
  %y = hetc.onnx.node "MatMul"(%x, %w) {node_name = "qkv/MatMul"} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %a = hetc.onnx.node "Slice"(%y, %zero, %eight, %last) {node_name = "q/Slice"} : (tensor<?x?x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %b = hetc.onnx.node "Slice"(%y, %eight, %end, %last) {node_name = "k/Slice"} : (tensor<?x?x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %z = hetc.onnx.node "MatMul"(%x, %h) {node_name = "halves/MatMul"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %c:2 = hetc.onnx.node "Split"(%z) {node_name = "halves/Split", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %a, %b, %c#0, %c#1 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// Not column pieces: a Split of the token axis and a Slice with step 2 stay ONNX nodes, reading
// the linear.
// CHECK-LABEL: func.func @not_column_pieces
// CHECK: %[[Y:.*]] = hetc.linear
// CHECK: hetc.onnx.node "Split"(%[[Y]]
// CHECK: hetc.onnx.node "Slice"(%[[Y]]
// CHECK-NOT: columns
func.func @not_column_pieces(%x: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %w = hetc.weight "w" : tensor<8x16xf32>
  %zero = hetc.constant dense<0> : tensor<1xi64>
  %eight = hetc.constant dense<8> : tensor<1xi64>
  %last = hetc.constant dense<-1> : tensor<1xi64>
  %two = hetc.constant dense<2> : tensor<1xi64>
  %y = hetc.onnx.node "MatMul"(%x, %w) {node_name = "MatMul"} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %s:2 = hetc.onnx.node "Split"(%y) {node_name = "tokens/Split", onnx_attrs = {axis = 1 : i64}} : (tensor<?x?x16xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  %e = hetc.onnx.node "Slice"(%y, %zero, %eight, %last, %two) {node_name = "even/Slice"} : (tensor<?x?x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  return %s#0, %s#1, %e : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// Pieces hetc cannot tell: Split sizes and Slice steps computed at run time (a graph input here)
// stay ONNX nodes; equal parts or a step of 1 would be a guess.
// CHECK-LABEL: func.func @computed_pieces
// CHECK: %[[Y:.*]] = hetc.linear
// CHECK: hetc.onnx.node "Split"(%[[Y]]
// CHECK: hetc.onnx.node "Slice"(%[[Y]]
// CHECK-NOT: columns
func.func @computed_pieces(%x: tensor<?x?x8xf32>, %sizes: tensor<2xi64>, %step: tensor<1xi64>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %w = hetc.weight "w" : tensor<8x16xf32>
  %zero = hetc.constant dense<0> : tensor<1xi64>
  %eight = hetc.constant dense<8> : tensor<1xi64>
  %last = hetc.constant dense<-1> : tensor<1xi64>
  %y = hetc.onnx.node "MatMul"(%x, %w) {node_name = "MatMul"} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %s:2 = hetc.onnx.node "Split"(%y, %sizes) {node_name = "Split", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x16xf32>, tensor<2xi64>) -> (tensor<*xf32>, tensor<*xf32>)
  %e = hetc.onnx.node "Slice"(%y, %zero, %eight, %last, %step) {node_name = "Slice"} : (tensor<?x?x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  return %s#0, %s#1, %e : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// GPT-NeoX's query_key_value, per head [heads, 3, head_dim]: the output reshaped to
// [.., 2 heads, 3 * 4] and sliced on that axis; each piece is the linear over its columns of
// every head (a strided view of the weight and of the bias), reshaped to [.., 2, 4].
// CHECK-LABEL: func.func @per_head_packed
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK-DAG: %[[WK:.*]] = hetc.weight "qkv.weight" {columns = array<i64: 4, 8, 12>, transposed} : tensor<8x8xf32>
// CHECK-DAG: %[[BK:.*]] = hetc.weight "qkv.bias" {columns = array<i64: 4, 8, 12>} : tensor<8xf32>
// CHECK-DAG: %[[K:.*]] = hetc.linear %[[X]], %[[WK]], %[[BK]] : (tensor<?x?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
// CHECK-DAG: hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
// CHECK-DAG: hetc.onnx.node "Reshape"(%[[K]], %{{.*}}) {node_name = "k/Slice"}
// CHECK-NOT: "Slice"
// CHECK-NOT: tensor<8x24xf32>
func.func @per_head_packed(%x: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %w = hetc.weight "qkv.weight" : tensor<24x8xf32>
  %b = hetc.weight "qkv.bias" : tensor<24xf32>
  %shape = hetc.constant dense<[0, 0, 2, 12]> : tensor<4xi64>
  %zero = hetc.constant dense<0> : tensor<1xi64>
  %four = hetc.constant dense<4> : tensor<1xi64>
  %eight = hetc.constant dense<8> : tensor<1xi64>
  %end = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %last = hetc.constant dense<-1> : tensor<1xi64>
  %wt = hetc.onnx.node "Transpose"(%w) {node_name = "qkv/Transpose", onnx_attrs = {perm = [1, 0]}} : (tensor<24x8xf32>) -> tensor<8x24xf32>
  %y = hetc.onnx.node "MatMul"(%x, %wt) {node_name = "qkv/MatMul"} : (tensor<?x?x8xf32>, tensor<8x24xf32>) -> tensor<?x?x24xf32>
  %yb = hetc.onnx.node "Add"(%y, %b) {node_name = "qkv/Add"} : (tensor<?x?x24xf32>, tensor<24xf32>) -> tensor<?x?x24xf32>
  %h = hetc.onnx.node "Reshape"(%yb, %shape) {node_name = "qkv/Reshape"} : (tensor<?x?x24xf32>, tensor<4xi64>) -> tensor<?x?x2x12xf32>
  %q = hetc.onnx.node "Slice"(%h, %zero, %four, %last) {node_name = "q/Slice"} : (tensor<?x?x2x12xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %k = hetc.onnx.node "Slice"(%h, %four, %eight, %last) {node_name = "k/Slice"} : (tensor<?x?x2x12xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %v = hetc.onnx.node "Slice"(%h, %eight, %end, %last) {node_name = "v/Slice"} : (tensor<?x?x2x12xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  return %q, %k, %v : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// Falcon's multi-query query_key_value split by heads: the output reshaped to [.., 2 + 2, 4] and
// read by a Slice of the first two heads and Gathers of heads -2 and -1 (1-D indices keep the
// axis): runs of columns, no stride, reshaped to [.., 2, 4] and [.., 1, 4].
// CHECK-LABEL: func.func @falcon_heads
// CHECK-DAG: hetc.weight "qkv" {columns = array<i64: 0, 8>} : tensor<8x8xf32>
// CHECK-DAG: hetc.weight "qkv" {columns = array<i64: 8, 12>} : tensor<8x4xf32>
// CHECK-DAG: hetc.weight "qkv" {columns = array<i64: 12, 16>} : tensor<8x4xf32>
// CHECK-DAG: hetc.constant dense<[0, 0, 1, 4]> : tensor<4xi64>
// CHECK-NOT: "Gather"
// CHECK-NOT: "Slice"
func.func @falcon_heads(%x: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %w = hetc.weight "qkv" : tensor<8x16xf32>
  %shape = hetc.constant dense<[0, 0, 4, 4]> : tensor<4xi64>
  %zero = hetc.constant dense<0> : tensor<1xi64>
  %minus2 = hetc.constant dense<-2> : tensor<1xi64>
  %axis = hetc.constant dense<2> : tensor<1xi64>
  %last = hetc.constant dense<-1> : tensor<1xi64>
  %y = hetc.onnx.node "MatMul"(%x, %w) {node_name = "qkv/MatMul"} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %h = hetc.onnx.node "Reshape"(%y, %shape) {node_name = "qkv/Reshape"} : (tensor<?x?x16xf32>, tensor<4xi64>) -> tensor<?x?x4x4xf32>
  %q = hetc.onnx.node "Slice"(%h, %zero, %minus2, %axis) {node_name = "q/Slice"} : (tensor<?x?x4x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %k = hetc.onnx.node "Gather"(%h, %minus2) {node_name = "k/Gather", onnx_attrs = {axis = 2 : i64}} : (tensor<?x?x4x4xf32>, tensor<1xi64>) -> tensor<*xf32>
  %v = hetc.onnx.node "Gather"(%h, %last) {node_name = "v/Gather", onnx_attrs = {axis = 2 : i64}} : (tensor<?x?x4x4xf32>, tensor<1xi64>) -> tensor<*xf32>
  return %q, %k, %v : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
