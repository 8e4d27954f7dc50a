// RUN: hetc-opt %s --hetc-fold-constants -split-input-file | FileCheck %s

// rotate_half's split point `x.shape[-1] // 2` from a partly dynamic tensor: Shape, Gather of a
// static dimension, Div, the Casts and the Unsqueeze all fold; a dynamic dimension does not.
// CHECK-LABEL: func.func @half_of_static_dim
// CHECK-DAG: %[[HALF:.*]] = hetc.constant dense<8> : tensor<1xi64>
// CHECK-DAG: %[[SEQ:.*]] = hetc.onnx.node "Gather"
// CHECK: return %[[HALF]], %[[SEQ]]
func.func @half_of_static_dim(%x: tensor<?x4x?x16xf32>) -> (tensor<1xi64>, tensor<i64>) {
  %shape = hetc.onnx.node "Shape"(%x) {node_name = "Shape"} : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %three = hetc.constant dense<3> : tensor<i64>
  %d = hetc.onnx.node "Gather"(%shape, %three) {node_name = "Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %two = hetc.constant dense<2> : tensor<i64>
  %h = hetc.onnx.node "Div"(%d, %two) {node_name = "Div"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %c = hetc.onnx.node "Cast"(%h) {node_name = "Cast", onnx_attrs = {to = 7 : i64}} : (tensor<i64>) -> tensor<i64>
  %zero = hetc.constant dense<0> : tensor<1xi64>
  %u = hetc.onnx.node "Unsqueeze"(%c, %zero) {node_name = "Unsqueeze"} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %two1 = hetc.constant dense<2> : tensor<i64>
  %s = hetc.onnx.node "Gather"(%shape, %two1) {node_name = "Gather_seq", onnx_attrs = {axis = 0 : i64}} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  return %u, %s : tensor<1xi64>, tensor<i64>
}

// -----

// An unfolded export's scalar math: sqrt(head_dim) as Sqrt of a constant, then a division.
// CHECK-LABEL: func.func @scale
// CHECK: %[[S:.*]] = hetc.constant dense<2.500000e-01> : tensor<f32>
// CHECK: return %[[S]]
func.func @scale() -> tensor<f32> {
  %d = hetc.constant dense<16.0> : tensor<f32>
  %one = hetc.constant dense<1.0> : tensor<f32>
  %r = hetc.onnx.node "Sqrt"(%d) {node_name = "Sqrt"} : (tensor<f32>) -> tensor<f32>
  %s = hetc.onnx.node "Div"(%one, %r) {node_name = "Div"} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Shape vectors: Concat of constants, Slice to the end, Reshape with an inferred dimension.
// CHECK-LABEL: func.func @shape_vector
// CHECK: %[[V:.*]] = hetc.constant dense<{{\[\[}}4, 16]]> : tensor<1x2xi64>
// CHECK-NEXT: return %[[V]]
func.func @shape_vector() -> tensor<1x2xi64> {
  %a = hetc.constant dense<[1, 4]> : tensor<2xi64>
  %b = hetc.constant dense<[16]> : tensor<1xi64>
  %cat = hetc.onnx.node "Concat"(%a, %b) {node_name = "Concat", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %starts = hetc.constant dense<1> : tensor<1xi64>
  %ends = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %sl = hetc.onnx.node "Slice"(%cat, %starts, %ends) {node_name = "Slice"} : (tensor<3xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %row = hetc.constant dense<[1, -1]> : tensor<2xi64>
  %r = hetc.onnx.node "Reshape"(%sl, %row) {node_name = "Reshape"} : (tensor<2xi64>, tensor<2xi64>) -> tensor<1x2xi64>
  return %r : tensor<1x2xi64>
}

// -----

// No-op nodes disappear (Identity, a Cast to the type the value has); a real Cast stays.
// CHECK-LABEL: func.func @no_ops
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK: %[[H:.*]] = hetc.onnx.node "Cast"(%[[X]])
// CHECK-NEXT: return %[[X]], %[[H]]
func.func @no_ops(%x: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf16>) {
  %i = hetc.onnx.node "Identity"(%x) {node_name = "Identity"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %c = hetc.onnx.node "Cast"(%i) {node_name = "Cast", onnx_attrs = {to = 1 : i64}} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %h = hetc.onnx.node "Cast"(%c) {node_name = "Cast_1", onnx_attrs = {to = 10 : i64}} : (tensor<?x8xf32>) -> tensor<?x8xf16>
  return %c, %h : tensor<?x8xf32>, tensor<?x8xf16>
}

// -----

// Weights are never folded, not even through a Transpose.
// CHECK-LABEL: func.func @weights_stay
// CHECK: hetc.onnx.node "Transpose"
func.func @weights_stay() -> tensor<8x16xf32> {
  %w = hetc.weight "proj.weight" : tensor<16x8xf32>
  %t = hetc.onnx.node "Transpose"(%w) {node_name = "Transpose", onnx_attrs = {perm = [1, 0]}} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// -----

// A Reshape by a computed shape [b, s, 4, 16] and the Transpose after it get the static
// dimensions the shape implies, so rotate-half's `x.shape[-1]` folds.
// CHECK-LABEL: func.func @refine_then_fold
// CHECK: hetc.onnx.node "Reshape"{{.*}} -> tensor<?x?x4x16xf32>
// CHECK: hetc.onnx.node "Transpose"{{.*}} -> tensor<?x4x?x16xf32>
// CHECK: %[[D:.*]] = hetc.constant dense<16> : tensor<i64>
// CHECK: return %[[D]]
func.func @refine_then_fold(%q: tensor<?x?x64xf32>) -> tensor<i64> {
  %shape = hetc.onnx.node "Shape"(%q) {node_name = "Shape"} : (tensor<?x?x64xf32>) -> tensor<3xi64>
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %b = hetc.onnx.node "Gather"(%shape, %i0) {node_name = "Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %s = hetc.onnx.node "Gather"(%shape, %i1) {node_name = "Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %ax = hetc.constant dense<0> : tensor<1xi64>
  %bu = hetc.onnx.node "Unsqueeze"(%b, %ax) {node_name = "Unsqueeze"} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %su = hetc.onnx.node "Unsqueeze"(%s, %ax) {node_name = "Unsqueeze_1"} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %heads = hetc.constant dense<[4, 16]> : tensor<2xi64>
  %target = hetc.onnx.node "Concat"(%bu, %su, %heads) {node_name = "Concat", onnx_attrs = {axis = 0 : i64}} : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = hetc.onnx.node "Reshape"(%q, %target) {node_name = "Reshape"} : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<*xf32>
  %t = hetc.onnx.node "Transpose"(%r) {node_name = "Transpose", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<*xf32>) -> tensor<*xf32>
  %ts = hetc.onnx.node "Shape"(%t) {node_name = "Shape_1"} : (tensor<*xf32>) -> tensor<4xi64>
  %i3 = hetc.constant dense<3> : tensor<i64>
  %d = hetc.onnx.node "Gather"(%ts, %i3) {node_name = "Gather_2", onnx_attrs = {axis = 0 : i64}} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  return %d : tensor<i64>
}

// -----

// The ops masks and rotary tables are built with: Trilu (triu from diagonal 1, as
// transformers' _update_causal_mask; tril from -1), CumSum (positions from an attention mask;
// exclusive and reverse), MatMul (inv_freq times positions; batch dimensions broadcast, and a
// 1-D operand).
// CHECK-LABEL: func.func @mask_and_rotary_ops
// CHECK-DAG: %[[TRIU:.*]] = hetc.constant dense<{{\[}}[0.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00], [0.000000e+00, 0.000000e+00, 7.000000e+00, 8.000000e+00], [0.000000e+00, 0.000000e+00, 0.000000e+00, 1.200000e+01]]> : tensor<3x4xf32>
// CHECK-DAG: %[[TRIL:.*]] = hetc.constant dense<{{\[}}[0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [5.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [9.000000e+00, 1.000000e+01, 0.000000e+00, 0.000000e+00]]> : tensor<3x4xf32>
// CHECK-DAG: %[[SUM:.*]] = hetc.constant dense<{{\[}}[1, 3, 6], [4, 9, 15]]> : tensor<2x3xi64>
// CHECK-DAG: %[[EXCL:.*]] = hetc.constant dense<{{\[}}[4, 5, 6], [0, 0, 0]]> : tensor<2x3xi64>
// CHECK-DAG: %[[MM:.*]] = hetc.constant dense<{{\[}}{{\[}}[1.000000e+01, 1.300000e+01], [2.800000e+01, 4.000000e+01]], {{\[}}[2.800000e+01, 3.100000e+01], [1.000000e+02, 1.120000e+02]]]> : tensor<2x2x2xf32>
// CHECK-DAG: %[[VEC:.*]] = hetc.constant dense<[1.600000e+01, 2.200000e+01]> : tensor<2xf32>
// CHECK: return %[[TRIU]], %[[TRIL]], %[[SUM]], %[[EXCL]], %[[MM]], %[[VEC]]
func.func @mask_and_rotary_ops() -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<2x2x2xf32>, tensor<2xf32>) {
  %x = hetc.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]> : tensor<3x4xf32>
  %one = hetc.constant dense<1> : tensor<i64>
  %minus1 = hetc.constant dense<-1> : tensor<i64>
  %triu = hetc.onnx.node "Trilu"(%x, %one) {node_name = "Trilu"} : (tensor<3x4xf32>, tensor<i64>) -> tensor<3x4xf32>
  %tril = hetc.onnx.node "Trilu"(%x, %minus1) {node_name = "Trilu_1", onnx_attrs = {upper = 0 : i64}} : (tensor<3x4xf32>, tensor<i64>) -> tensor<3x4xf32>
  %c = hetc.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %zero = hetc.constant dense<0> : tensor<i64>
  %sum = hetc.onnx.node "CumSum"(%c, %one) {node_name = "CumSum"} : (tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi64>
  %excl = hetc.onnx.node "CumSum"(%c, %zero) {node_name = "CumSum_1", onnx_attrs = {exclusive = 1 : i64, reverse = 1 : i64}} : (tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi64>
  %a = hetc.constant dense<[[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]]> : tensor<1x2x3xf32>
  %b = hetc.constant dense<[[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], [[6.0, 7.0], [8.0, 9.0], [10.0, 11.0]]]> : tensor<2x3x2xf32>
  %mm = hetc.onnx.node "MatMul"(%a, %b) {node_name = "MatMul"} : (tensor<1x2x3xf32>, tensor<2x3x2xf32>) -> tensor<2x2x2xf32>
  %v = hetc.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %m = hetc.constant dense<[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]> : tensor<3x2xf32>
  %vec = hetc.onnx.node "MatMul"(%v, %m) {node_name = "MatMul_1"} : (tensor<3xf32>, tensor<3x2xf32>) -> tensor<2xf32>
  return %triu, %tril, %sum, %excl, %mm, %vec : tensor<3x4xf32>, tensor<3x4xf32>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<2x2x2xf32>, tensor<2xf32>
}

// -----

// Slice assignment (transformers 4.38-4.47 write the padding into the causal mask so) exports as
// ScatterND; Tile repeats a block. Both evaluate.
// CHECK-LABEL: func.func @scatter_nd_and_tile
// CHECK-DAG: %[[S:.*]] = hetc.constant dense<{{\[\[}}1, 2], [9, 9], [5, 6]]> : tensor<3x2xi64>
// CHECK-DAG: %[[T:.*]] = hetc.constant dense<{{\[\[}}1, 2, 1, 2], [3, 4, 3, 4]]> : tensor<2x4xi64>
// CHECK: return %[[S]], %[[T]]
func.func @scatter_nd_and_tile() -> (tensor<3x2xi64>, tensor<2x4xi64>) {
  %data = hetc.constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
  %idx = hetc.constant dense<[[1]]> : tensor<1x1xi64>
  %upd = hetc.constant dense<[[9, 9]]> : tensor<1x2xi64>
  %s = hetc.onnx.node "ScatterND"(%data, %idx, %upd) {node_name = "ScatterND"} : (tensor<3x2xi64>, tensor<1x1xi64>, tensor<1x2xi64>) -> tensor<3x2xi64>
  %block = hetc.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %rep = hetc.constant dense<[1, 2]> : tensor<2xi64>
  %t = hetc.onnx.node "Tile"(%block, %rep) {node_name = "Tile"} : (tensor<2x2xi64>, tensor<2xi64>) -> tensor<2x4xi64>
  return %s, %t : tensor<3x2xi64>, tensor<2x4xi64>
}

// -----

// Einsum: the outer product RoPE tables are built from (`einsum("i,j->ij", t, inv_freq)`), and a
// contraction with the output implicit.
// CHECK-LABEL: func.func @einsum
// CHECK-DAG: %[[O:.*]] = hetc.constant dense<{{\[\[}}0.000000e+00, 0.000000e+00], [1.000000e+00, 5.000000e-01], [2.000000e+00, 1.000000e+00]]> : tensor<3x2xf32>
// CHECK-DAG: %[[C:.*]] = hetc.constant dense<{{\[\[}}1.900000e+01, 2.200000e+01], [4.300000e+01, 5.000000e+01]]> : tensor<2x2xf32>
// CHECK: return %[[O]], %[[C]]
func.func @einsum() -> (tensor<3x2xf32>, tensor<2x2xf32>) {
  %t = hetc.constant dense<[0.0, 1.0, 2.0]> : tensor<3xf32>
  %f = hetc.constant dense<[1.0, 0.5]> : tensor<2xf32>
  %o = hetc.onnx.node "Einsum"(%t, %f) {node_name = "Einsum", onnx_attrs = {equation = "i,j->ij"}} : (tensor<3xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %a = hetc.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %b = hetc.constant dense<[[5.0, 6.0], [7.0, 8.0]]> : tensor<2x2xf32>
  %c = hetc.onnx.node "Einsum"(%a, %b) {node_name = "Einsum_mm", onnx_attrs = {equation = "ij,jk"}} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %o, %c : tensor<3x2xf32>, tensor<2x2xf32>
}

// -----

// A broadcast past the evaluation budget is not folded (nor allocated): [300, 1] + [1, 300] of
// two small constants would be 90,000 elements; a GatherND or Gemm whose result would be is not
// either.
// CHECK-LABEL: func.func @over_budget
// CHECK: hetc.onnx.node "Add"
// CHECK: hetc.onnx.node "GatherND"
// CHECK: hetc.onnx.node "Gemm"
func.func @over_budget() -> (tensor<*xi64>, tensor<*xi64>, tensor<*xf32>) {
  %a = hetc.constant dense<1> : tensor<300x1xi64>
  %b = hetc.constant dense<2> : tensor<1x300xi64>
  %sum = hetc.onnx.node "Add"(%a, %b) {node_name = "Add"} : (tensor<300x1xi64>, tensor<1x300xi64>) -> tensor<*xi64>
  %data = hetc.constant dense<3> : tensor<1x300xi64>
  %idx = hetc.constant dense<0> : tensor<300x1xi64>
  %g = hetc.onnx.node "GatherND"(%data, %idx) {node_name = "GatherND"} : (tensor<1x300xi64>, tensor<300x1xi64>) -> tensor<*xi64>
  %x = hetc.constant dense<1.0> : tensor<300x0xf32>
  %y = hetc.constant dense<1.0> : tensor<0x300xf32>
  %m = hetc.onnx.node "Gemm"(%x, %y) {node_name = "Gemm"} : (tensor<300x0xf32>, tensor<0x300xf32>) -> tensor<*xf32>
  return %sum, %g, %m : tensor<*xi64>, tensor<*xi64>, tensor<*xf32>
}
