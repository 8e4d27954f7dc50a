// RUN: hetc-opt %s --hetc-raise-residual-add -split-input-file | FileCheck %s

// The residual stream: the embedding plus the attention block's output projection.
// CHECK-LABEL: func.func @residual
// CHECK: %[[H:.*]] = hetc.embedding
// CHECK: %[[O:.*]] = hetc.linear
// CHECK: %[[R:.*]] = hetc.add %[[H]], %[[O]] : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
// CHECK: return %[[R]]
func.func @residual(%ids: tensor<?x?xi64>) -> tensor<?x?x8xf32> {
  %table = hetc.weight "embed" : tensor<32x8xf32>
  %w = hetc.weight "o_proj" : tensor<8x8xf32>
  %h = hetc.embedding %table, %ids : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %o = hetc.linear %h, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r = hetc.onnx.node "Add"(%h, %o) {node_name = "layers.0/Add"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %r : tensor<?x?x8xf32>
}

// -----

// Not residual adds: a bias (broadcast constant), and a sum of two ONNX nodes.
// CHECK-LABEL: func.func @not_residual
// CHECK-NOT: hetc.add
func.func @not_residual(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %w = hetc.weight "proj" : tensor<8x8xf32>
  %bias = hetc.weight "bias" : tensor<8xf32>
  %y = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %b = hetc.onnx.node "Add"(%y, %bias) {node_name = "bias/Add"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %n = hetc.onnx.node "Neg"(%x) {node_name = "neg"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %s = hetc.onnx.node "Add"(%n, %y) {node_name = "sum"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %b, %s : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// -----

// ONNX Runtime's first-step decoder keeps the last position alone after the last attention
// (starts -1, ends -2, steps -1 on the sequence axis): the Slice is the activation itself, and
// the add behind it is raised. A float Cast of an activation (a float16 file's float32 islands)
// is the activation too.
// CHECK-LABEL: func.func @last_position
// CHECK-NOT: "Slice"
// CHECK-NOT: "Cast"
// CHECK: %[[O:.*]] = hetc.linear
// CHECK: %[[R:.*]] = hetc.add %[[O]], %{{.*}} -> tensor<?x?x8xf32>
// CHECK: return %[[R]] : tensor<?x?x8xf32>
func.func @last_position(%ids: tensor<?x?xi64>) -> tensor<?x1x8xf32> {
  %table = hetc.weight "embed" : tensor<32x8xf32>
  %w = hetc.weight "o_proj" : tensor<8x8xf32>
  %starts = hetc.constant dense<-1> : tensor<1xi64>
  %ends = hetc.constant dense<-2> : tensor<1xi64>
  %axes = hetc.constant dense<1> : tensor<1xi64>
  %h = hetc.embedding %table, %ids : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %o = hetc.linear %h, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %half = hetc.onnx.node "Cast"(%o) {node_name = "to_half", onnx_attrs = {to = 10 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf16>
  %back = hetc.onnx.node "Cast"(%half) {node_name = "to_float", onnx_attrs = {to = 1 : i64}} : (tensor<?x?x8xf16>) -> tensor<?x?x8xf32>
  %last = hetc.onnx.node "Slice"(%back, %starts, %ends, %axes, %starts) {node_name = "GatherLastToken"} : (tensor<?x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x8xf32>
  %lastH = hetc.onnx.node "Slice"(%h, %starts, %ends, %axes, %starts) {node_name = "GatherLastToken_1"} : (tensor<?x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x8xf32>
  %r = hetc.onnx.node "Add"(%last, %lastH) {node_name = "Add"} : (tensor<?x1x8xf32>, tensor<?x1x8xf32>) -> tensor<?x1x8xf32>
  return %r : tensor<?x1x8xf32>
}

// -----

// A Slice of the first position, or of the last one before an attention reads it, is no row hetc
// computes as it is: kept (and left for the check to refuse).
// CHECK-LABEL: func.func @other_slices
// CHECK: "Slice"(%{{.*}}) {node_name = "first"}
// CHECK-NOT: hetc.add
func.func @other_slices(%ids: tensor<?x?xi64>) -> tensor<?x1x8xf32> {
  %table = hetc.weight "embed" : tensor<32x8xf32>
  %w = hetc.weight "o_proj" : tensor<8x8xf32>
  %zero = hetc.constant dense<0> : tensor<1xi64>
  %one = hetc.constant dense<1> : tensor<1xi64>
  %h = hetc.embedding %table, %ids : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %o = hetc.linear %h, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %first = hetc.onnx.node "Slice"(%o, %zero, %one, %one) {node_name = "first"} : (tensor<?x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x8xf32>
  %firstH = hetc.onnx.node "Slice"(%h, %zero, %one, %one) {node_name = "firstH"} : (tensor<?x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x8xf32>
  %r = hetc.onnx.node "Add"(%first, %firstH) {node_name = "Add"} : (tensor<?x1x8xf32>, tensor<?x1x8xf32>) -> tensor<?x1x8xf32>
  return %r : tensor<?x1x8xf32>
}
