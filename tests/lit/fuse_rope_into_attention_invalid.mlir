// RUN: hetc-opt %s -split-input-file -verify-diagnostics -hetc-fuse-rope-into-attention
// What hetc-fuse-rope-into-attention refuses.

// It reads which buffers the ropes and the attention use.
module {
  func.func @main(%q: tensor<?x?x8xf32>, %k: tensor<?x?x4xf32>, %v: tensor<?x?x4xf32>,
                  %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>, %pos: tensor<?x?xi64>,
                  %f: tensor<2xf32>) {
    %qr = hetc.rope %q, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
    %kr = hetc.rope %k, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
    // expected-error @+1 {{'hetc.attention' op or the ropes before it have no hetc.buffers_in and hetc.buffers_out; run hetc-plan-memory first}}
    %o, %nk, %nv = hetc.attention %qr, %kr, %v, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
    return
  }
}
