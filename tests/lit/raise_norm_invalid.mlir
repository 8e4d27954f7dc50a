// RUN: hetc-opt %s --hetc-raise-norm --canonicalize --hetc-check-raised -verify-diagnostics -split-input-file

// A mean of cubes is not a root mean square: nothing is raised, and the check names the node
// that feeds the output and why its region is no norm, with the numbers of the fit.
func.func @cube(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32> {hetc.name = "hidden"}) {
  %g = hetc.weight "norm.weight" : tensor<8xf32>
  %three = hetc.constant dense<3.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-05> : tensor<f32>
  %one = hetc.constant dense<1.0> : tensor<f32>
  %sq = hetc.onnx.node "Pow"(%x, %three) {node_name = "norm/Pow"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq) {node_name = "norm/ReduceMean", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %var = hetc.onnx.node "Add"(%mean, %eps) {node_name = "norm/Add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %rms = hetc.onnx.node "Sqrt"(%var) {node_name = "norm/Sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %inv = hetc.onnx.node "Div"(%one, %rms) {node_name = "norm/Div"} : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = hetc.onnx.node "Mul"(%x, %inv) {node_name = "norm/Mul"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{node 'norm/Mul_1' (Mul) is not part of a computation hetc recognises: its result feeds the output 'hidden' but no raising pattern matched; the region hetc does not recognise has 7 nodes reading input #0, read by the output 'hidden'; the 7 nodes from 'norm/Pow' to 'norm/Mul_1' compute statistics over the last dimension but are not a norm: they give NaN or infinity on a random row}}
  %y = hetc.onnx.node "Mul"(%g, %n) {node_name = "norm/Mul_1"} : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// -----

// Variance over axis 1: not a normalisation over the features.
func.func @wrong_axis(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32> {hetc.name = "hidden"}) {
  %g = hetc.weight "norm.weight" : tensor<8xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-05> : tensor<f32>
  %sq = hetc.onnx.node "Pow"(%x, %two) {node_name = "norm/Pow"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq) {node_name = "norm/ReduceMean", onnx_attrs = {axes = [1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x1x8xf32>
  %var = hetc.onnx.node "Add"(%mean, %eps) {node_name = "norm/Add"} : (tensor<?x1x8xf32>, tensor<f32>) -> tensor<?x1x8xf32>
  %rms = hetc.onnx.node "Sqrt"(%var) {node_name = "norm/Sqrt"} : (tensor<?x1x8xf32>) -> tensor<?x1x8xf32>
  %n = hetc.onnx.node "Div"(%x, %rms) {node_name = "norm/Div"} : (tensor<?x?x8xf32>, tensor<?x1x8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{node 'norm/Mul' (Mul) is not part of a computation hetc recognises}}
  %y = hetc.onnx.node "Mul"(%n, %g) {node_name = "norm/Mul"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// -----

// eps added to the root mean square rather than under the root (x / (rms(x) + eps)): the nearest
// form is named, with how far it is and where.
func.func @eps_outside_the_root(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32> {hetc.name = "hidden"}) {
  %g = hetc.weight "norm.weight" : tensor<8xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-05> : tensor<f32>
  %sq = hetc.onnx.node "Pow"(%x, %two) {node_name = "norm/Pow"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq) {node_name = "norm/ReduceMean", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %rms = hetc.onnx.node "Sqrt"(%mean) {node_name = "norm/Sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %re = hetc.onnx.node "Add"(%rms, %eps) {node_name = "norm/Add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n = hetc.onnx.node "Div"(%x, %re) {node_name = "norm/Div"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{the 6 nodes from 'norm/Pow' to 'norm/Mul' compute statistics over the last dimension but are not a norm: RMSNorm with eps 2.1e-09, the nearest form, differs from them by 3.6 of its terms on a row of mean 0 and root mean square 1e-15}}
  %y = hetc.onnx.node "Mul"(%n, %g) {node_name = "norm/Mul"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}
