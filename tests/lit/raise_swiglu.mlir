// RUN: hetc-opt %s --hetc-raise-swiglu -split-input-file | FileCheck %s

// act_fn(gate) * up with SiLU exported as Sigmoid then Mul.
// CHECK-LABEL: func.func @silu_times_up
// CHECK-SAME: (%[[G:.*]]: tensor<?x?x16xf32>, %[[U:.*]]: tensor<?x?x16xf32>)
// CHECK: %[[Y:.*]] = hetc.swiglu %[[G]], %[[U]] : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
// CHECK: return %[[Y]]
func.func @silu_times_up(%gate: tensor<?x?x16xf32>, %up: tensor<?x?x16xf32>) -> tensor<?x?x16xf32> {
  %s = hetc.onnx.node "Sigmoid"(%gate) {node_name = "act/Sigmoid"} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %silu = hetc.onnx.node "Mul"(%gate, %s) {node_name = "act/Mul"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %y = hetc.onnx.node "Mul"(%silu, %up) {node_name = "mlp/Mul"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// -----

// sigmoid(g) * g and up * silu(g): both products in the other order.
// CHECK-LABEL: func.func @swapped
// CHECK-SAME: (%[[G:.*]]: tensor<?x?x16xf32>, %[[U:.*]]: tensor<?x?x16xf32>)
// CHECK: %[[Y:.*]] = hetc.swiglu %[[G]], %[[U]]
// CHECK: return %[[Y]]
func.func @swapped(%gate: tensor<?x?x16xf32>, %up: tensor<?x?x16xf32>) -> tensor<?x?x16xf32> {
  %s = hetc.onnx.node "Sigmoid"(%gate) {node_name = "act/Sigmoid"} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %silu = hetc.onnx.node "Mul"(%s, %gate) {node_name = "act/Mul"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %y = hetc.onnx.node "Mul"(%up, %silu) {node_name = "mlp/Mul"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

// -----

// Not SwiGLU: the sigmoid of one tensor gates another (GLU-like, not SiLU), and a SiLU scaled by
// a constant instead of an up projection.
// CHECK-LABEL: func.func @not_silu
// CHECK-NOT: hetc.swiglu
func.func @not_silu(%gate: tensor<?x?x16xf32>, %other: tensor<?x?x16xf32>, %up: tensor<?x?x16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x16xf32>) {
  %s = hetc.onnx.node "Sigmoid"(%other) {node_name = "act/Sigmoid"} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %glu = hetc.onnx.node "Mul"(%gate, %s) {node_name = "act/Mul"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %y = hetc.onnx.node "Mul"(%glu, %up) {node_name = "mlp/Mul"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %half = hetc.constant dense<0.5> : tensor<f32>
  %sg = hetc.onnx.node "Sigmoid"(%gate) {node_name = "act/Sigmoid_1"} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %silu = hetc.onnx.node "Mul"(%gate, %sg) {node_name = "act/Mul_1"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %z = hetc.onnx.node "Mul"(%silu, %half) {node_name = "scale"} : (tensor<?x?x16xf32>, tensor<f32>) -> tensor<?x?x16xf32>
  return %y, %z : tensor<?x?x16xf32>, tensor<?x?x16xf32>
}

// -----

// Gemma's GeGLU: a gate whose activation was raised by its values (a GELU) times up, the
// activation read by nothing else; a relu gate is not a swiglu.
// CHECK-LABEL: func.func @gelu_gate
// CHECK-SAME: (%[[G:.*]]: tensor<?x?x16xf32>, %[[U:.*]]: tensor<?x?x16xf32>)
// CHECK: %[[Y:.*]] = hetc.swiglu %[[G]], %[[U]] {function = "gelu_tanh"}
// CHECK-NOT: hetc.activation %[[G]] {function = "gelu_tanh"}
// CHECK: %[[R:.*]] = hetc.activation %[[G]] {function = "relu"}
// CHECK: hetc.onnx.node "Mul"(%[[R]], %[[U]])
func.func @gelu_gate(%gate: tensor<?x?x16xf32>, %up: tensor<?x?x16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x16xf32>) {
  %a = hetc.activation %gate {function = "gelu_tanh"} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %y = hetc.onnx.node "Mul"(%a, %up) {node_name = "mlp/Mul"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %r = hetc.activation %gate {function = "relu"} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %z = hetc.onnx.node "Mul"(%r, %up) {node_name = "mlp/Mul_2"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  return %y, %z : tensor<?x?x16xf32>, tensor<?x?x16xf32>
}
