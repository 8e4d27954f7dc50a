// RUN: hetc-opt %s --hetc-check-raised | FileCheck %s

// Fully raised: LLM ops, weights and constants only. An unused input (the attention mask) and a
// dead ONNX node nothing reads are fine.
// CHECK-LABEL: func.func @raised
// CHECK: hetc.lm_head
func.func @raised(%ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>) -> (tensor<?x?x32xf32> {hetc.name = "logits"}) {
  %table = hetc.weight "embed" : tensor<32x8xf32>
  %g = hetc.weight "norm" : tensor<8xf32>
  %w = hetc.weight "lm_head" : tensor<8x32xf32>
  %h = hetc.embedding %table, %ids : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %dead = hetc.onnx.node "Shape"(%mask) {node_name = "unused/Shape"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %l = hetc.lm_head %n, %w : (tensor<?x?x8xf32>, tensor<8x32xf32>) -> tensor<?x?x32xf32>
  return %l : tensor<?x?x32xf32>
}
