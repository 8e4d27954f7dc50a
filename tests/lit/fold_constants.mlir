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
