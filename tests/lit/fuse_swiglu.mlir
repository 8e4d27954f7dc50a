// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=128 max-step-tokens=512" -hetc-partition-tasks \
// RUN:   -hetc-fuse-residual-add -hetc-fuse-swiglu | FileCheck %s
// RUN: hetc-opt %s -hetc-fuse-swiglu | FileCheck %s --check-prefix=CASES

// In each decoder layer up_proj, which runs right before the swiglu, takes it over: it reads
// [x, gate] and writes the swiglu's buffer; the swiglu stays in the IR, marked fused.
// CHECK: hetc.linear %[[N:[0-9]+]], %{{[0-9]+}} {hetc.buffers_in = array<i64: [[NB:[0-9]+]]>, hetc.buffers_out = array<i64: [[G:[0-9]+]]>{{.*}}tensor<64x176xf32>
// CHECK-NEXT: hetc.linear %[[N]], %{{[0-9]+}} {hetc.buffers_in = array<i64: [[NB]], [[G]]>, hetc.buffers_out = array<i64: [[S:[0-9]+]]>{{.*}}hetc.layer = 0 : i64, {{.*}}hetc.swiglu = "up"
// CHECK-NEXT: hetc.swiglu {{.*}}hetc.buffers_out = array<i64: [[S]]>{{.*}}hetc.fused, hetc.layer = 0
// CHECK-NEXT: hetc.linear %{{.*}}hetc.buffers_in = array<i64: [[S]], {{[0-9]+}}>{{.*}}hetc.residual
// CHECK: hetc.swiglu = "up"
// CHECK-NEXT: hetc.swiglu {{.*}}hetc.fused, hetc.layer = 1
// CHECK-NOT: hetc.swiglu =
// CHECK: hetc.lm_head

// Buffers: 0..3 apart; 4 overlaps 0, 5 overlaps 1.
module attributes {hetc.buffers = [
    {cols = 8 : i64, name = "a", offset = 0 : i64, role = "hidden", row_stride = 64 : i64, rows = 4 : i64},
    {cols = 8 : i64, name = "b", offset = 256 : i64, role = "scratch", row_stride = 64 : i64, rows = 4 : i64},
    {cols = 8 : i64, name = "c", offset = 512 : i64, role = "scratch", row_stride = 64 : i64, rows = 4 : i64},
    {cols = 8 : i64, name = "d", offset = 768 : i64, role = "scratch", row_stride = 64 : i64, rows = 4 : i64},
    {cols = 8 : i64, name = "e", offset = 128 : i64, role = "scratch", row_stride = 64 : i64, rows = 4 : i64},
    {cols = 8 : i64, name = "f", offset = 384 : i64, role = "scratch", row_stride = 64 : i64, rows = 4 : i64}]} {
  func.func @main(%x: tensor<?x8xf32>) {
    %w = hetc.weight "w" : tensor<8x8xf32>
    // The linear may compute either operand: here the gate, read after the up.
    // CASES: hetc.linear {{.*}}hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 1>}
    // CASES-NEXT: hetc.linear {{.*}}hetc.buffers_in = array<i64: 0, 1>, hetc.buffers_out = array<i64: 3>, hetc.swiglu = "gate"
    // CASES-NEXT: hetc.swiglu {{.*}}hetc.fused
    %u = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 1>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %g = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %s = hetc.swiglu %g, %u {hetc.buffers_in = array<i64: 2, 1>, hetc.buffers_out = array<i64: 3>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    // Not when the linear's result has another user.
    // CASES-NOT: hetc.swiglu =
    // CASES-NOT: hetc.fused
    %g1 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 1>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %u1 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %s1 = hetc.swiglu %g1, %u1 {hetc.buffers_in = array<i64: 1, 2>, hetc.buffers_out = array<i64: 3>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    %a1 = hetc.add %s1, %u1 {hetc.buffers_in = array<i64: 3, 2>, hetc.buffers_out = array<i64: 1>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    // Not when another op runs between them.
    %g2 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 1>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %u2 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %n2 = hetc.add %x, %x {hetc.buffers_in = array<i64: 0, 0>, hetc.buffers_out = array<i64: 3>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    %s2 = hetc.swiglu %g2, %u2 {hetc.buffers_in = array<i64: 1, 2>, hetc.buffers_out = array<i64: 3>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    // Not when the swiglu's buffer overlaps the linear's input, which the kernel reads throughout.
    %g3 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 1>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %u3 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %s3 = hetc.swiglu %g3, %u3 {hetc.buffers_in = array<i64: 1, 2>, hetc.buffers_out = array<i64: 4>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    // Nor the other operand, whose columns a task reads after writing its own.
    %g4 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 1>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %u4 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %s4 = hetc.swiglu %g4, %u4 {hetc.buffers_in = array<i64: 1, 2>, hetc.buffers_out = array<i64: 5>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    // Not across sublayers.
    %g5 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 1>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %u5 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>, hetc.sublayer = {index = 0 : i64, kind = "feed_forward"}} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %s5 = hetc.swiglu %g5, %u5 {hetc.buffers_in = array<i64: 1, 2>, hetc.buffers_out = array<i64: 3>, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    return
  }
}
