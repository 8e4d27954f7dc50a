// RUN: hetc-opt %s --hetc-raise-rms-norm -split-input-file | FileCheck %s

// As Hugging Face exports it: Cast to float32, Pow 2, ReduceMean(-1), Add eps, Sqrt, Div(1, .),
// Mul, Cast back, Mul by the weight.
// CHECK-LABEL: func.func @hugging_face
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK: %[[G:.*]] = hetc.weight "norm.weight"
// CHECK: %[[Y:.*]] = hetc.rms_norm %[[X]], %[[G]] {epsilon = 9.99999974E-6 : f32}
// CHECK: return %[[Y]]
func.func @hugging_face(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %g = hetc.weight "norm.weight" : tensor<8xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-05> : tensor<f32>
  %one = hetc.constant dense<1.0> : tensor<f32>
  %xf = hetc.onnx.node "Cast"(%x) {node_name = "norm/Cast", onnx_attrs = {to = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %sq = hetc.onnx.node "Pow"(%xf, %two) {node_name = "norm/Pow"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq) {node_name = "norm/ReduceMean", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %var = hetc.onnx.node "Add"(%mean, %eps) {node_name = "norm/Add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %rms = hetc.onnx.node "Sqrt"(%var) {node_name = "norm/Sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %inv = hetc.onnx.node "Div"(%one, %rms) {node_name = "norm/Div"} : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = hetc.onnx.node "Mul"(%xf, %inv) {node_name = "norm/Mul"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %nc = hetc.onnx.node "Cast"(%n) {node_name = "norm/Cast_1", onnx_attrs = {to = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %y = hetc.onnx.node "Mul"(%g, %nc) {node_name = "norm/Mul_1"} : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// -----

// Reciprocal instead of Div(1, .), Mul(x, x) instead of Pow, every operand order swapped, the
// reduced axis given as the last index, and the opset-18 form of ReduceMean (axes as an input).
// CHECK-LABEL: func.func @reciprocal_mul_swapped
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8xf32>)
// CHECK: %[[G:.*]] = hetc.weight "norm.weight"
// CHECK: %[[Y:.*]] = hetc.rms_norm %[[X]], %[[G]] {epsilon = 9.99999997E-7 : f32}
// CHECK: return %[[Y]]
func.func @reciprocal_mul_swapped(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %g = hetc.weight "norm.weight" : tensor<8xf32>
  %eps = hetc.constant dense<1.0e-06> : tensor<1xf32>
  %axes = hetc.constant dense<2> : tensor<1xi64>
  %sq = hetc.onnx.node "Mul"(%x, %x) {node_name = "sq"} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq, %axes) {node_name = "mean"} : (tensor<2x3x8xf32>, tensor<1xi64>) -> tensor<2x3x1xf32>
  %var = hetc.onnx.node "Add"(%eps, %mean) {node_name = "add"} : (tensor<1xf32>, tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %rms = hetc.onnx.node "Sqrt"(%var) {node_name = "sqrt"} : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %inv = hetc.onnx.node "Reciprocal"(%rms) {node_name = "recip"} : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %n = hetc.onnx.node "Mul"(%inv, %x) {node_name = "mul"} : (tensor<2x3x1xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %y = hetc.onnx.node "Mul"(%n, %g) {node_name = "scale"} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// x / sqrt(mean + eps), and a bfloat16 input upcast to float32 for the statistics.
// CHECK-LABEL: func.func @divide_upcast
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xbf16>)
// CHECK: %[[Y:.*]] = hetc.rms_norm %[[X]], %{{.*}} {epsilon = 9.99999974E-6 : f32} : (tensor<?x?x8xbf16>, tensor<8xbf16>) -> tensor<?x?x8xbf16>
// CHECK: return %[[Y]]
func.func @divide_upcast(%x: tensor<?x?x8xbf16>) -> tensor<?x?x8xbf16> {
  %g = hetc.weight "norm.weight" : tensor<8xbf16>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-05> : tensor<f32>
  %xf = hetc.onnx.node "Cast"(%x) {node_name = "up", onnx_attrs = {to = 1 : i64}} : (tensor<?x?x8xbf16>) -> tensor<?x?x8xf32>
  %sq = hetc.onnx.node "Pow"(%xf, %two) {node_name = "pow"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq) {node_name = "mean", onnx_attrs = {axes = [-1]}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %var = hetc.onnx.node "Add"(%mean, %eps) {node_name = "add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %rms = hetc.onnx.node "Sqrt"(%var) {node_name = "sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = hetc.onnx.node "Div"(%xf, %rms) {node_name = "div"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %nb = hetc.onnx.node "Cast"(%n) {node_name = "down", onnx_attrs = {to = 16 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x8xbf16>
  %y = hetc.onnx.node "Mul"(%g, %nb) {node_name = "scale"} : (tensor<8xbf16>, tensor<?x?x8xbf16>) -> tensor<?x?x8xbf16>
  return %y : tensor<?x?x8xbf16>
}

// -----

// Not RMSNorm: the mean runs over axis 1, not the features.
// CHECK-LABEL: func.func @wrong_axis
// CHECK-NOT: hetc.rms_norm
func.func @wrong_axis(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %g = hetc.weight "norm.weight" : tensor<8xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-05> : tensor<f32>
  %one = hetc.constant dense<1.0> : tensor<f32>
  %sq = hetc.onnx.node "Pow"(%x, %two) {node_name = "pow"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq) {node_name = "mean", onnx_attrs = {axes = [1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x1x8xf32>
  %var = hetc.onnx.node "Add"(%mean, %eps) {node_name = "add"} : (tensor<?x1x8xf32>, tensor<f32>) -> tensor<?x1x8xf32>
  %rms = hetc.onnx.node "Sqrt"(%var) {node_name = "sqrt"} : (tensor<?x1x8xf32>) -> tensor<?x1x8xf32>
  %inv = hetc.onnx.node "Div"(%one, %rms) {node_name = "div"} : (tensor<f32>, tensor<?x1x8xf32>) -> tensor<?x1x8xf32>
  %n = hetc.onnx.node "Mul"(%x, %inv) {node_name = "mul"} : (tensor<?x?x8xf32>, tensor<?x1x8xf32>) -> tensor<?x?x8xf32>
  %y = hetc.onnx.node "Mul"(%g, %n) {node_name = "scale"} : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// -----

// Not RMSNorm: the exponent is 3.
// CHECK-LABEL: func.func @cube
// CHECK-NOT: hetc.rms_norm
func.func @cube(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %g = hetc.weight "norm.weight" : tensor<8xf32>
  %three = hetc.constant dense<3.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-05> : tensor<f32>
  %one = hetc.constant dense<1.0> : tensor<f32>
  %sq = hetc.onnx.node "Pow"(%x, %three) {node_name = "pow"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq) {node_name = "mean", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %var = hetc.onnx.node "Add"(%mean, %eps) {node_name = "add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %rms = hetc.onnx.node "Sqrt"(%var) {node_name = "sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %inv = hetc.onnx.node "Div"(%one, %rms) {node_name = "div"} : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = hetc.onnx.node "Mul"(%x, %inv) {node_name = "mul"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %y = hetc.onnx.node "Mul"(%g, %n) {node_name = "scale"} : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// -----

// Not RMSNorm: the statistics come from another tensor than the one normalised.
// CHECK-LABEL: func.func @other_tensor
// CHECK-NOT: hetc.rms_norm
func.func @other_tensor(%x: tensor<?x?x8xf32>, %z: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %g = hetc.weight "norm.weight" : tensor<8xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-05> : tensor<f32>
  %sq = hetc.onnx.node "Pow"(%z, %two) {node_name = "pow"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq) {node_name = "mean", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %var = hetc.onnx.node "Add"(%mean, %eps) {node_name = "add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %rms = hetc.onnx.node "Sqrt"(%var) {node_name = "sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %inv = hetc.onnx.node "Reciprocal"(%rms) {node_name = "recip"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = hetc.onnx.node "Mul"(%x, %inv) {node_name = "mul"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %y = hetc.onnx.node "Mul"(%g, %n) {node_name = "scale"} : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// -----

// Gemma's RMSNorm, x * (1 + w) with w stored zero-centred: the gamma computed from a constant and
// a scalar is evaluated, and the norm reads the result (1 + w).
// CHECK-LABEL: func.func @gemma_offset
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x4xf32>)
// CHECK: %[[G:.*]] = hetc.constant dense<[1.000000e+00, 1.500000e+00, 7.500000e-01, 2.000000e+00]> : tensor<4xf32>
// CHECK: hetc.rms_norm %[[X]], %[[G]]
func.func @gemma_offset(%x: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
  %w = hetc.constant dense<[0.0, 0.5, -0.25, 1.0]> : tensor<4xf32>
  %one = hetc.constant dense<1.0> : tensor<f32>
  %g = hetc.onnx.node "Add"(%one, %w) {node_name = "norm/Add_1"} : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-06> : tensor<f32>
  %sq = hetc.onnx.node "Pow"(%x, %two) {node_name = "norm/Pow"} : (tensor<?x?x4xf32>, tensor<f32>) -> tensor<?x?x4xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq) {node_name = "norm/ReduceMean", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x4xf32>) -> tensor<?x?x1xf32>
  %var = hetc.onnx.node "Add"(%mean, %eps) {node_name = "norm/Add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %rms = hetc.onnx.node "Sqrt"(%var) {node_name = "norm/Sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = hetc.onnx.node "Div"(%x, %rms) {node_name = "norm/Div"} : (tensor<?x?x4xf32>, tensor<?x?x1xf32>) -> tensor<?x?x4xf32>
  %y = hetc.onnx.node "Mul"(%n, %g) {node_name = "norm/Mul"} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  return %y : tensor<?x?x4xf32>
}
