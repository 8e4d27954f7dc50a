// RUN: hetc-opt %s --hetc-raise-lm-head -split-input-file | FileCheck %s

// The linear behind the result named "logits" (here not the first result).
// CHECK-LABEL: func.func @named_logits
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK: %[[W:.*]] = hetc.weight "lm_head"
// CHECK: %[[P:.*]] = hetc.linear %[[X]], %{{.*}}
// CHECK: %[[L:.*]] = hetc.lm_head %[[X]], %[[W]] : (tensor<?x?x8xf32>, tensor<8x32xf32>) -> tensor<?x?x32xf32>
// CHECK: return %[[P]], %[[L]]
func.func @named_logits(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32> {hetc.name = "hidden"}, tensor<?x?x32xf32> {hetc.name = "logits"}) {
  %w = hetc.weight "lm_head" : tensor<8x32xf32>
  %wp = hetc.weight "proj" : tensor<8x8xf32>
  %p = hetc.linear %x, %wp : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %l = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x32xf32>) -> tensor<?x?x32xf32>
  return %p, %l : tensor<?x?x8xf32>, tensor<?x?x32xf32>
}

// -----

// Unnamed results: the first one is the logits. A tied head reads the embedding table transposed,
// and a no-op Cast sits between the head and the output.
// CHECK-LABEL: func.func @first_result
// CHECK: %[[W:.*]] = hetc.weight "embed_tokens.weight" {transposed} : tensor<8x32xf32>
// CHECK: %[[L:.*]] = hetc.lm_head %{{.*}}, %[[W]]
// CHECK: hetc.onnx.node "Cast"(%[[L]])
func.func @first_result(%x: tensor<?x?x8xf32>) -> tensor<?x?x32xf32> {
  %w = hetc.weight "embed_tokens.weight" {transposed} : tensor<8x32xf32>
  %l = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x32xf32>) -> tensor<?x?x32xf32>
  %c = hetc.onnx.node "Cast"(%l) {node_name = "Cast", onnx_attrs = {to = 1 : i64}} : (tensor<?x?x32xf32>) -> tensor<?x?x32xf32>
  return %c : tensor<?x?x32xf32>
}

// -----

// A linear that does not produce the logits stays a linear.
// CHECK-LABEL: func.func @not_logits
// CHECK-NOT: hetc.lm_head
func.func @not_logits(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32> {hetc.name = "logits"}, tensor<?x?x8xf32> {hetc.name = "hidden"}) {
  %wp = hetc.weight "proj" : tensor<8x8xf32>
  %p = hetc.linear %x, %wp : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %n = hetc.onnx.node "Neg"(%p) {node_name = "neg"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %n, %p : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// -----

// Gemma 2's final_logit_softcapping, 30 * tanh(logits / 30), becomes the lm_head's soft-cap
// (read by its values: Div by 30 or Mul by 1/30 alike); the cap's nodes are gone.
// CHECK-LABEL: func.func @softcap
// CHECK: %[[H:.*]] = hetc.lm_head %{{.*}}, %{{.*}} {softcap = 3.000000e+01 : f32}
// CHECK-NOT: Tanh
// CHECK: return %[[H]]
func.func @softcap(%x: tensor<?x?x8xf32>) -> (tensor<?x?x32xf32> {hetc.name = "logits"}) {
  %w = hetc.weight "lm_head" : tensor<8x32xf32>
  %l = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x32xf32>) -> tensor<?x?x32xf32>
  %c = hetc.constant dense<30.0> : tensor<f32>
  %d = hetc.onnx.node "Div"(%l, %c) {node_name = "cap/Div"} : (tensor<?x?x32xf32>, tensor<f32>) -> tensor<?x?x32xf32>
  %t = hetc.onnx.node "Tanh"(%d) {node_name = "cap/Tanh"} : (tensor<?x?x32xf32>) -> tensor<?x?x32xf32>
  %m = hetc.onnx.node "Mul"(%c, %t) {node_name = "cap/Mul"} : (tensor<f32>, tensor<?x?x32xf32>) -> tensor<?x?x32xf32>
  return %m : tensor<?x?x32xf32>
}

// -----

// An lm_head with a bias (Phi-2's, GPT-J's): the bias comes along.
// CHECK-LABEL: func.func @bias
// CHECK: %[[B:.*]] = hetc.weight "lm_head.bias"
// CHECK: hetc.lm_head %{{.*}}, %{{.*}}, %[[B]]
func.func @bias(%x: tensor<?x?x8xf32>) -> (tensor<?x?x32xf32> {hetc.name = "logits"}) {
  %w = hetc.weight "lm_head" : tensor<8x32xf32>
  %b = hetc.weight "lm_head.bias" : tensor<32xf32>
  %l = hetc.linear %x, %w, %b : (tensor<?x?x8xf32>, tensor<8x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  return %l : tensor<?x?x32xf32>
}
