// RUN: hetc-opt %s | hetc-opt | FileCheck %s
// Every op of the dialect prints and parses back to itself.

// CHECK-LABEL: func.func @onnx_level
func.func @onnx_level(%x: tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  // CHECK: %[[NONE:.*]] = hetc.onnx.none
  %none = hetc.onnx.none
  // CHECK: %[[C:.*]] = hetc.constant dense<9.99999974E-6> : tensor<f32>
  %eps = hetc.constant dense<1.0e-05> : tensor<f32>
  // CHECK: hetc.onnx.node "Mul"(%{{.*}}, %{{.*}}) {node_name = "/layers.0/Mul"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %0 = hetc.onnx.node "Mul"(%x, %x) {node_name = "/layers.0/Mul"}
         : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  // CHECK: hetc.onnx.node "Clip"(%{{.*}}, %[[NONE]], %[[C]]) {node_name = "clip", onnx_attrs = {axis = -1 : i64, mode = "x", perm = [1, 0], value = 1.000000e+00 : f32}}
  %1 = hetc.onnx.node "Clip"(%0, %none, %eps)
         {node_name = "clip", onnx_attrs = {axis = -1 : i64, mode = "x", perm = [1, 0], value = 1.0 : f32}}
         : (tensor<?x?x64xf32>, none, tensor<f32>) -> tensor<?x?x64xf32>
  return %0, %1 : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// CHECK-LABEL: func.func @llm_level
func.func @llm_level(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>,
                     %past_k: tensor<?x2x?x16xf32>, %past_v: tensor<?x2x?x16xf32>)
    -> (tensor<?x?x256xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) {
  // CHECK: hetc.weight "model.embed_tokens.weight" : tensor<256x64xf32>
  %table = hetc.weight "model.embed_tokens.weight" : tensor<256x64xf32>
  // CHECK: hetc.weight "model.embed_tokens.weight" {transposed} : tensor<64x256xf32>
  %tied = hetc.weight "model.embed_tokens.weight" {transposed} : tensor<64x256xf32>
  %gamma = hetc.weight "norm.weight" : tensor<64xf32>
  %wq = hetc.weight "wq" : tensor<64x64xf32>
  %wk = hetc.weight "wk" : tensor<64x32xf32>
  // CHECK: hetc.weight "wqkv" {columns = array<i64: 64, 96>, transposed} : tensor<64x32xf32>
  %wkp = hetc.weight "wqkv" {columns = array<i64: 64, 96>, transposed} : tensor<64x32xf32>
  %bk = hetc.weight "bk" : tensor<32xf32>
  %wg = hetc.weight "wg" : tensor<64x176xf32>
  %wd = hetc.weight "wd" : tensor<176x64xf32>
  %inv_freq = hetc.constant dense<1.0> : tensor<8xf32>
  %inv_quarter = hetc.constant dense<1.0> : tensor<4xf32>

  // CHECK: %[[H:.*]] = hetc.embedding %{{.*}}, %{{.*}} : (tensor<256x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %h = hetc.embedding %table, %ids : (tensor<256x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  // CHECK: %[[N:.*]] = hetc.rms_norm %[[H]], %{{.*}} {epsilon = 9.99999974E-6 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %n = hetc.rms_norm %h, %gamma {epsilon = 1.0e-05 : f32}
         : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  // CHECK: %[[Q:.*]] = hetc.linear %[[N]], %{{.*}} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %q = hetc.linear %n, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  // CHECK: %[[K:.*]] = hetc.linear %[[N]], %{{.*}}, %{{.*}} : (tensor<?x?x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  %k = hetc.linear %n, %wk, %bk
         : (tensor<?x?x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  // CHECK: %[[QR:.*]] = hetc.rope %[[Q]], %{{.*}}, %{{.*}} {head_dim = 16 : i64, heads = 4 : i64} : (tensor<?x?x64xf32>, tensor<?x?xi64>, tensor<8xf32>) -> tensor<?x?x64xf32>
  %qr = hetc.rope %q, %pos, %inv_freq {heads = 4 : i64, head_dim = 16 : i64}
          : (tensor<?x?x64xf32>, tensor<?x?xi64>, tensor<8xf32>) -> tensor<?x?x64xf32>
  // CHECK: hetc.rope %[[K]], %{{.*}}, %{{.*}} {head_dim = 16 : i64, heads = 2 : i64, interleaved, rotary_dim = 8 : i64} : (tensor<?x?x32xf32>, tensor<?x?xi64>, tensor<4xf32>) -> tensor<?x?x32xf32>
  %kp = hetc.rope %k, %pos, %inv_quarter {heads = 2 : i64, head_dim = 16 : i64, rotary_dim = 8 : i64, interleaved}
          : (tensor<?x?x32xf32>, tensor<?x?xi64>, tensor<4xf32>) -> tensor<?x?x32xf32>
  %kr = hetc.rope %k, %pos, %inv_freq {heads = 2 : i64, head_dim = 16 : i64}
          : (tensor<?x?x32xf32>, tensor<?x?xi64>, tensor<8xf32>) -> tensor<?x?x32xf32>
  // Without positions: taken from the cache (GroupQueryAttention's do_rotary).
  // CHECK: hetc.rope %[[K]], %{{.*}} {head_dim = 16 : i64, heads = 2 : i64} : (tensor<?x?x32xf32>, tensor<8xf32>) -> tensor<?x?x32xf32>
  %kc = hetc.rope %k, %inv_freq {heads = 2 : i64, head_dim = 16 : i64}
          : (tensor<?x?x32xf32>, tensor<8xf32>) -> tensor<?x?x32xf32>
  // CHECK: %[[O:.*]], %[[PK:.*]], %[[PV:.*]] = hetc.attention %[[QR]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 16 : i64, heads = 4 : i64, kv_heads = 2 : i64, scale = 2.500000e-01 : f32}
  // CHECK-SAME: -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  %o, %pk, %pv = hetc.attention %qr, %kr, %k, %past_k, %past_v
      {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f32}
      : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>,
         tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  // CHECK: %[[R:.*]] = hetc.add %[[H]], %[[O]] : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %r = hetc.add %h, %o : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %g = hetc.linear %r, %wg : (tensor<?x?x64xf32>, tensor<64x176xf32>) -> tensor<?x?x176xf32>
  // CHECK: %[[S:.*]] = hetc.swiglu %{{.*}}, %{{.*}} : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
  %s = hetc.swiglu %g, %g : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
  %d = hetc.linear %s, %wd : (tensor<?x?x176xf32>, tensor<176x64xf32>) -> tensor<?x?x64xf32>
  // CHECK: %[[L:.*]] = hetc.lm_head %{{.*}}, %{{.*}} : (tensor<?x?x64xf32>, tensor<64x256xf32>) -> tensor<?x?x256xf32>
  %logits = hetc.lm_head %d, %tied : (tensor<?x?x64xf32>, tensor<64x256xf32>) -> tensor<?x?x256xf32>
  // CHECK: return %[[L]], %[[PK]], %[[PV]]
  return %logits, %pk, %pv : tensor<?x?x256xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>
}
