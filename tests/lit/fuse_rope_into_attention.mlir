// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=128 max-step-tokens=512" -hetc-partition-tasks \
// RUN:   -hetc-fuse-rope-into-attention | FileCheck %s
// RUN: hetc-opt %s -hetc-fuse-rope-into-attention | FileCheck %s --check-prefix=CASES

// In each decoder layer the attention takes over the q and k ropes before it; they stay in the
// IR, marked fused.
// CHECK: hetc.rope {{.*}}hetc.fused, hetc.layer = 0
// CHECK-NEXT: hetc.rope {{.*}}hetc.fused, hetc.layer = 0
// CHECK-NEXT: hetc.attention {{.*}}hetc.layer = 0 : i64, hetc.rope,
// CHECK: hetc.rope {{.*}}hetc.fused, hetc.layer = 1
// CHECK-NEXT: hetc.rope {{.*}}hetc.fused, hetc.layer = 1
// CHECK-NEXT: hetc.attention {{.*}}hetc.layer = 1 : i64, hetc.rope,

module {
  func.func @main(%q: tensor<?x?x8xf32>, %k: tensor<?x?x4xf32>, %v: tensor<?x?x4xf32>,
                  %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>, %pos: tensor<?x?xi64>,
                  %pos2: tensor<?x?xi64>, %f: tensor<2xf32>, %g: tensor<2xf32>) {
    // Fused: both ropes rotate in place, the attention reads their buffers.
    // CASES: hetc.rope {{.*}}hetc.fused
    // CASES-NEXT: hetc.rope {{.*}}hetc.fused
    // CASES-NEXT: hetc.attention {{.*}}hetc.rope
    %qr = hetc.rope %q, %pos, %f {head_dim = 4 : i64, heads = 2 : i64, hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 0>} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
    %kr = hetc.rope %k, %pos, %f {head_dim = 4 : i64, heads = 1 : i64, hetc.buffers_in = array<i64: 1>, hetc.buffers_out = array<i64: 1>} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
    %o, %nk, %nv = hetc.attention %qr, %kr, %v, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32, hetc.buffers_in = array<i64: 0, 1, 2>, hetc.buffers_out = array<i64: 3>} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
    // Not when the two ropes use different frequencies.
    // CASES-NOT: hetc.fused
    // CASES-NOT: hetc.rope,
    %qr2 = hetc.rope %q, %pos, %f {head_dim = 4 : i64, heads = 2 : i64, hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 0>} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
    %kr2 = hetc.rope %k, %pos, %g {head_dim = 4 : i64, heads = 1 : i64, hetc.buffers_in = array<i64: 1>, hetc.buffers_out = array<i64: 1>} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
    %o2, %nk2, %nv2 = hetc.attention %qr2, %kr2, %v, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32, hetc.buffers_in = array<i64: 0, 1, 2>, hetc.buffers_out = array<i64: 3>} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
    // Nor different positions.
    %qr3 = hetc.rope %q, %pos, %f {head_dim = 4 : i64, heads = 2 : i64, hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 0>} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
    %kr3 = hetc.rope %k, %pos2, %f {head_dim = 4 : i64, heads = 1 : i64, hetc.buffers_in = array<i64: 1>, hetc.buffers_out = array<i64: 1>} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
    %o3, %nk3, %nv3 = hetc.attention %qr3, %kr3, %v, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32, hetc.buffers_in = array<i64: 0, 1, 2>, hetc.buffers_out = array<i64: 3>} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
    // Nor when a rotated value has another reader.
    %qr4 = hetc.rope %q, %pos, %f {head_dim = 4 : i64, heads = 2 : i64, hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 0>} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
    %kr4 = hetc.rope %k, %pos, %f {head_dim = 4 : i64, heads = 1 : i64, hetc.buffers_in = array<i64: 1>, hetc.buffers_out = array<i64: 1>} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
    %o4, %nk4, %nv4 = hetc.attention %qr4, %kr4, %v, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32, hetc.buffers_in = array<i64: 0, 1, 2>, hetc.buffers_out = array<i64: 3>} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
    %extra = hetc.add %qr4, %qr4 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    // Nor when a rope does not rotate the buffer the attention reads.
    %qr5 = hetc.rope %q, %pos, %f {head_dim = 4 : i64, heads = 2 : i64, hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 0>} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
    %kr5 = hetc.rope %k, %pos, %f {head_dim = 4 : i64, heads = 1 : i64, hetc.buffers_in = array<i64: 1>, hetc.buffers_out = array<i64: 1>} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
    %o5, %nk5, %nv5 = hetc.attention %qr5, %kr5, %v, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32, hetc.buffers_in = array<i64: 4, 1, 2>, hetc.buffers_out = array<i64: 3>} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
    return
  }
}
