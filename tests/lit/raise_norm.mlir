// RUN: hetc-opt %s --hetc-raise-norm -split-input-file | FileCheck %s

// As Hugging Face exports it: Cast to float32, Pow 2, ReduceMean(-1), Add eps, Sqrt, Div(1, .),
// Mul, Cast back, Mul by the weight.
// CHECK-LABEL: func.func @hugging_face
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK: %[[G:.*]] = hetc.weight "norm.weight"
// CHECK: %[[Y:.*]] = hetc.rms_norm %[[X]], %[[G]] {epsilon = 9.99999974E-6 : f32, hetc.fit = "fitted by values: 9 nodes from 'norm/Cast' to 'norm/Mul_1' are RMSNorm (a shift of the input moves them by {{.*}}), eps 1e-05 (fitted 9.9999997e-06, the region's constant), gamma 'norm.weight'; within {{.*}} of the terms at 30 rows of 8"}
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
// CHECK: %[[Y:.*]] = hetc.rms_norm %[[X]], %[[G]] {epsilon = 9.99999997E-7 : f32, hetc.fit = {{.*}}}
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
// CHECK: %[[Y:.*]] = hetc.rms_norm %[[X]], %{{.*}} {epsilon = 9.99999974E-6 : f32, hetc.fit = {{.*}}} : (tensor<?x?x8xbf16>, tensor<8xbf16>) -> tensor<?x?x8xbf16>
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

// -----

// nn.LayerNorm as torch writes it before opset 17: nine nodes, the mean subtracted, the biased
// variance, gamma and beta. Read as LayerNorm by a shift of the input, which it ignores.
// CHECK-LABEL: func.func @layer_norm_decomposed
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK-DAG: %[[G:.*]] = hetc.weight "ln.weight"
// CHECK-DAG: %[[B:.*]] = hetc.weight "ln.bias"
// CHECK: %[[Y:.*]] = hetc.layer_norm %[[X]], %[[G]], %[[B]] {epsilon = 9.99999974E-6 : f32, hetc.fit = "fitted by values: 9 nodes from 'ln/ReduceMean' to 'ln/Add_1' are LayerNorm (a shift of the input leaves them within {{.*}}), eps 1e-05 ({{.*}}), gamma 'ln.weight', beta 'ln.bias'; {{.*}}"}
// CHECK-NOT: hetc.onnx.node
// CHECK: return %[[Y]]
func.func @layer_norm_decomposed(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %g = hetc.weight "ln.weight" : tensor<8xf32>
  %b = hetc.weight "ln.bias" : tensor<8xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-05> : tensor<f32>
  %mean = hetc.onnx.node "ReduceMean"(%x) {node_name = "ln/ReduceMean", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %d = hetc.onnx.node "Sub"(%x, %mean) {node_name = "ln/Sub"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %sq = hetc.onnx.node "Pow"(%d, %two) {node_name = "ln/Pow"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %var = hetc.onnx.node "ReduceMean"(%sq) {node_name = "ln/ReduceMean_1", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %ve = hetc.onnx.node "Add"(%var, %eps) {node_name = "ln/Add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = hetc.onnx.node "Sqrt"(%ve) {node_name = "ln/Sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = hetc.onnx.node "Div"(%d, %sd) {node_name = "ln/Div"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %ng = hetc.onnx.node "Mul"(%n, %g) {node_name = "ln/Mul"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %y = hetc.onnx.node "Add"(%ng, %b) {node_name = "ln/Add_1"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// -----

// LayerNorm without gamma or beta (elementwise_affine=False): gamma is fitted as ones.
// CHECK-LABEL: func.func @layer_norm_no_affine
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x6xf32>)
// CHECK: %[[ONES:.*]] = hetc.constant dense<1.000000e+00> : tensor<6xf32>
// CHECK: %[[Y:.*]] = hetc.layer_norm %[[X]], %[[ONES]] {epsilon = 9.99999996E-13 : f32
// CHECK: return %[[Y]]
func.func @layer_norm_no_affine(%x: tensor<?x?x6xf32>) -> tensor<?x?x6xf32> {
  %eps = hetc.constant dense<1.0e-12> : tensor<f32>
  %half = hetc.constant dense<-0.5> : tensor<f32>
  %mean = hetc.onnx.node "ReduceMean"(%x) {node_name = "ln/ReduceMean", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x6xf32>) -> tensor<?x?x1xf32>
  %d = hetc.onnx.node "Sub"(%x, %mean) {node_name = "ln/Sub"} : (tensor<?x?x6xf32>, tensor<?x?x1xf32>) -> tensor<?x?x6xf32>
  %sq = hetc.onnx.node "Mul"(%d, %d) {node_name = "ln/Mul"} : (tensor<?x?x6xf32>, tensor<?x?x6xf32>) -> tensor<?x?x6xf32>
  %var = hetc.onnx.node "ReduceMean"(%sq) {node_name = "ln/ReduceMean_1", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x6xf32>) -> tensor<?x?x1xf32>
  %ve = hetc.onnx.node "Add"(%eps, %var) {node_name = "ln/Add"} : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %inv = hetc.onnx.node "Pow"(%ve, %half) {node_name = "ln/Pow"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %y = hetc.onnx.node "Mul"(%d, %inv) {node_name = "ln/Mul_1"} : (tensor<?x?x6xf32>, tensor<?x?x1xf32>) -> tensor<?x?x6xf32>
  return %y : tensor<?x?x6xf32>
}

// -----

// RMSNorm as a sum of squares over the features divided by their number, to the power -0.5,
// over an odd number of features.
// CHECK-LABEL: func.func @sum_of_squares
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x7xf32>)
// CHECK: %[[Y:.*]] = hetc.rms_norm %[[X]], %{{.*}} {epsilon = 9.99999997E-7 : f32
// CHECK: return %[[Y]]
func.func @sum_of_squares(%x: tensor<?x?x7xf32>) -> tensor<?x?x7xf32> {
  %g = hetc.weight "norm.weight" : tensor<7xf32>
  %h = hetc.constant dense<7.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-06> : tensor<1xf32>
  %power = hetc.constant dense<-0.5> : tensor<f32>
  %sum = hetc.onnx.node "ReduceSumSquare"(%x) {node_name = "rms/ReduceSumSquare", onnx_attrs = {axes = [2], keepdims = 1 : i64}} : (tensor<?x?x7xf32>) -> tensor<?x?x1xf32>
  %ms = hetc.onnx.node "Div"(%sum, %h) {node_name = "rms/Div"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %v = hetc.onnx.node "Add"(%ms, %eps) {node_name = "rms/Add"} : (tensor<?x?x1xf32>, tensor<1xf32>) -> tensor<?x?x1xf32>
  %inv = hetc.onnx.node "Pow"(%v, %power) {node_name = "rms/Pow"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %gx = hetc.onnx.node "Mul"(%g, %x) {node_name = "rms/Mul"} : (tensor<7xf32>, tensor<?x?x7xf32>) -> tensor<?x?x7xf32>
  %y = hetc.onnx.node "Mul"(%gx, %inv) {node_name = "rms/Mul_1"} : (tensor<?x?x7xf32>, tensor<?x?x1xf32>) -> tensor<?x?x7xf32>
  return %y : tensor<?x?x7xf32>
}

// -----

// The input scaled before the norm, the scaled value also read elsewhere (Gemma's embedding
// times sqrt(hidden), which the residual reads too): the norm's x is the scaled value, not the
// value before the scale.
// CHECK-LABEL: func.func @scaled_input
// CHECK-SAME: (%[[E:.*]]: tensor<?x?x8xf32>)
// CHECK: %[[S:.*]] = hetc.onnx.node "Mul"(%[[E]]
// CHECK: %[[Y:.*]] = hetc.rms_norm %[[S]]
// CHECK: return %[[Y]], %[[S]]
func.func @scaled_input(%e: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %c = hetc.constant dense<4.0> : tensor<f32>
  %g = hetc.weight "norm.weight" : tensor<8xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-06> : tensor<f32>
  %x = hetc.onnx.node "Mul"(%e, %c) {node_name = "scale"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %sq = hetc.onnx.node "Pow"(%x, %two) {node_name = "norm/Pow"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq) {node_name = "norm/ReduceMean", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %var = hetc.onnx.node "Add"(%mean, %eps) {node_name = "norm/Add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %rms = hetc.onnx.node "Sqrt"(%var) {node_name = "norm/Sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = hetc.onnx.node "Div"(%x, %rms) {node_name = "norm/Div"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %y = hetc.onnx.node "Mul"(%n, %g) {node_name = "norm/Mul"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  return %y, %x : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// -----

// One input, two norms (a parallel residual's attention and feed-forward norms): both raised,
// each with its own gamma.
// CHECK-LABEL: func.func @two_norms_of_one_input
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK-DAG: %[[G1:.*]] = hetc.weight "attn_norm.weight"
// CHECK-DAG: %[[G2:.*]] = hetc.weight "ffn_norm.weight"
// CHECK-DAG: %[[Y1:.*]] = hetc.rms_norm %[[X]], %[[G1]]
// CHECK-DAG: %[[Y2:.*]] = hetc.rms_norm %[[X]], %[[G2]]
// CHECK: return %[[Y1]], %[[Y2]]
func.func @two_norms_of_one_input(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %g1 = hetc.weight "attn_norm.weight" : tensor<8xf32>
  %g2 = hetc.weight "ffn_norm.weight" : tensor<8xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %eps = hetc.constant dense<1.0e-06> : tensor<f32>
  %sq = hetc.onnx.node "Pow"(%x, %two) {node_name = "a/Pow"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq) {node_name = "a/ReduceMean", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %var = hetc.onnx.node "Add"(%mean, %eps) {node_name = "a/Add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %rms = hetc.onnx.node "Sqrt"(%var) {node_name = "a/Sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = hetc.onnx.node "Div"(%x, %rms) {node_name = "a/Div"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %y1 = hetc.onnx.node "Mul"(%n, %g1) {node_name = "a/Mul"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %sq2 = hetc.onnx.node "Mul"(%x, %x) {node_name = "f/Mul"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %mean2 = hetc.onnx.node "ReduceMean"(%sq2) {node_name = "f/ReduceMean", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %var2 = hetc.onnx.node "Add"(%mean2, %eps) {node_name = "f/Add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %rms2 = hetc.onnx.node "Sqrt"(%var2) {node_name = "f/Sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %inv2 = hetc.onnx.node "Reciprocal"(%rms2) {node_name = "f/Reciprocal"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n2 = hetc.onnx.node "Mul"(%x, %inv2) {node_name = "f/Mul_1"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %y2 = hetc.onnx.node "Mul"(%g2, %n2) {node_name = "f/Mul_2"} : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %y1, %y2 : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// -----

// A scale after the norm (0.5 * gamma * n): its gamma is computed from a weight, which hetc-opt
// has no values for, so the norm before the scale is raised and the scale is left as it is.
// CHECK-LABEL: func.func @scale_after_norm
// CHECK: %[[Y:.*]] = hetc.rms_norm
// CHECK: %[[H:.*]] = hetc.onnx.node "Mul"(%[[Y]], %{{.*}}) {node_name = "half"}
// CHECK: return %[[H]]
func.func @scale_after_norm(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %g = hetc.weight "norm.weight" : tensor<8xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %half = hetc.constant dense<0.5> : tensor<f32>
  %eps = hetc.constant dense<1.0e-06> : tensor<f32>
  %sq = hetc.onnx.node "Pow"(%x, %two) {node_name = "norm/Pow"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %mean = hetc.onnx.node "ReduceMean"(%sq) {node_name = "norm/ReduceMean", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %var = hetc.onnx.node "Add"(%mean, %eps) {node_name = "norm/Add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %rms = hetc.onnx.node "Sqrt"(%var) {node_name = "norm/Sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = hetc.onnx.node "Div"(%x, %rms) {node_name = "norm/Div"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %y = hetc.onnx.node "Mul"(%n, %g) {node_name = "norm/Mul"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %h = hetc.onnx.node "Mul"(%y, %half) {node_name = "half"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  return %h : tensor<?x?x8xf32>
}

// -----

// RMSNorm from the L2 norm (x.norm(2, dim=-1) squared over the width) and LayerNorm's statistics
// as ReduceSum with its axes as an input (opset 13) divided by the width: the same two norms.
// CHECK-LABEL: func.func @l2_and_sum_forms
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK-DAG: hetc.rms_norm %[[X]], %{{.*}} {epsilon = 9.99999997E-7 : f32
// CHECK-DAG: hetc.layer_norm %[[X]], %{{.*}} {epsilon = 9.99999974E-6 : f32
func.func @l2_and_sum_forms(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %g = hetc.weight "rms.weight" : tensor<8xf32>
  %g2 = hetc.weight "ln.weight" : tensor<8xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %h = hetc.constant dense<8.0> : tensor<f32>
  %eps6 = hetc.constant dense<1.0e-06> : tensor<f32>
  %eps5 = hetc.constant dense<1.0e-05> : tensor<f32>
  %axes = hetc.constant dense<-1> : tensor<1xi64>
  %l2 = hetc.onnx.node "ReduceL2"(%x) {node_name = "rms/ReduceL2", onnx_attrs = {axes = [-1], keepdims = 1 : i64}} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %l2sq = hetc.onnx.node "Pow"(%l2, %two) {node_name = "rms/Pow"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %ms = hetc.onnx.node "Div"(%l2sq, %h) {node_name = "rms/Div"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %v = hetc.onnx.node "Add"(%ms, %eps6) {node_name = "rms/Add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %r = hetc.onnx.node "Sqrt"(%v) {node_name = "rms/Sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = hetc.onnx.node "Div"(%x, %r) {node_name = "rms/Div_1"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %y = hetc.onnx.node "Mul"(%n, %g) {node_name = "rms/Mul"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %s = hetc.onnx.node "ReduceSum"(%x, %axes) {node_name = "ln/ReduceSum"} : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %m = hetc.onnx.node "Div"(%s, %h) {node_name = "ln/Div"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %d = hetc.onnx.node "Sub"(%x, %m) {node_name = "ln/Sub"} : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %dd = hetc.onnx.node "Mul"(%d, %d) {node_name = "ln/Mul"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %ss = hetc.onnx.node "ReduceSum"(%dd, %axes) {node_name = "ln/ReduceSum_1"} : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %var = hetc.onnx.node "Div"(%ss, %h) {node_name = "ln/Div_1"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %ve = hetc.onnx.node "Add"(%var, %eps5) {node_name = "ln/Add"} : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = hetc.onnx.node "Sqrt"(%ve) {node_name = "ln/Sqrt"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %inv = hetc.onnx.node "Reciprocal"(%sd) {node_name = "ln/Reciprocal"} : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %gi = hetc.onnx.node "Mul"(%inv, %g2) {node_name = "ln/Mul_1"} : (tensor<?x?x1xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %y2 = hetc.onnx.node "Mul"(%d, %gi) {node_name = "ln/Mul_2"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %y, %y2 : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}
