// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=128 max-step-tokens=512" -hetc-partition-tasks \
// RUN:   -hetc-fuse-residual-add | FileCheck %s
// RUN: hetc-opt %s -hetc-fuse-residual-add | FileCheck %s --check-prefix=CASES

// In each decoder layer o_proj and down_proj take over the residual add after them: the linear
// reads [x, residual] and writes the add's buffer; the add stays in the IR, marked fused.
// CHECK: hetc.attention {{.*}}hetc.buffers_out = array<i64: [[O:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.linear %{{.*}}hetc.buffers_in = array<i64: [[O]], [[H0:[0-9]+]]>, hetc.buffers_out = array<i64: [[H1:[0-9]+]]>{{.*}}hetc.layer = 0 : i64, hetc.residual,
// CHECK: hetc.add {{.*}}hetc.buffers_in = array<i64: [[H0]], {{[0-9]+}}>, hetc.buffers_out = array<i64: [[H1]]>{{.*}}hetc.fused, hetc.layer = 0
// CHECK: hetc.swiglu {{.*}}hetc.buffers_out = array<i64: [[S:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.linear %{{.*}}hetc.buffers_in = array<i64: [[S]], [[H1]]>, hetc.buffers_out = array<i64: [[H2:[0-9]+]]>{{.*}}hetc.residual,
// CHECK: hetc.add {{.*}}hetc.buffers_out = array<i64: [[H2]]>{{.*}}hetc.fused, hetc.layer = 0
// CHECK: hetc.linear {{.*}}hetc.layer = 1 : i64, hetc.residual,
// CHECK: hetc.linear {{.*}}hetc.layer = 1 : i64, hetc.residual,
// The other linears keep one input.
// CHECK-NOT: hetc.residual
// CHECK: hetc.lm_head

// Buffers: 0..3 apart; 4 overlaps 0.
module attributes {hetc.buffers = [
    {cols = 8 : i64, name = "a", offset = 0 : i64, role = "hidden", row_stride = 64 : i64, rows = 4 : i64},
    {cols = 8 : i64, name = "b", offset = 256 : i64, role = "hidden", row_stride = 64 : i64, rows = 4 : i64},
    {cols = 8 : i64, name = "c", offset = 512 : i64, role = "scratch", row_stride = 64 : i64, rows = 4 : i64},
    {cols = 8 : i64, name = "d", offset = 768 : i64, role = "scratch", row_stride = 64 : i64, rows = 4 : i64},
    {cols = 8 : i64, name = "e", offset = 128 : i64, role = "scratch", row_stride = 64 : i64, rows = 4 : i64}]} {
  func.func @main(%x: tensor<?x8xf32>, %h: tensor<?x8xf32>) {
    %w = hetc.weight "w" : tensor<8x8xf32>
    // The residual may be either operand of the add.
    // CASES: hetc.linear {{.*}}hetc.buffers_in = array<i64: 0, 1>, hetc.buffers_out = array<i64: 3>{{.*}}hetc.residual
    // CASES-NEXT: hetc.add {{.*}}hetc.fused
    %0 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %1 = hetc.add %0, %h {hetc.buffers_in = array<i64: 2, 1>, hetc.buffers_out = array<i64: 3>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    // Not when the linear has a bias: the kernels add the residual before a bias could be.
    // CASES-NOT: hetc.residual
    // CASES: hetc.linear {{.*}}, %{{.*}}, %{{.*}} {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>}
    // CASES-NOT: hetc.fused
    %bias = hetc.weight "b" : tensor<8xf32>
    %b0 = hetc.linear %x, %w, %bias {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>} : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
    %b1 = hetc.add %b0, %h {hetc.buffers_in = array<i64: 2, 1>, hetc.buffers_out = array<i64: 3>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    // Not when the linear's result has another user.
    // CASES-NOT: hetc.residual
    // CASES: hetc.linear {{.*}}hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>}
    // CASES-NOT: hetc.fused
    %2 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %3 = hetc.add %h, %2 {hetc.buffers_in = array<i64: 1, 2>, hetc.buffers_out = array<i64: 3>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    %4 = hetc.add %3, %2 {hetc.buffers_in = array<i64: 3, 2>, hetc.buffers_out = array<i64: 1>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    // Not when another op runs between them.
    %5 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %6 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 3>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %7 = hetc.add %h, %5 {hetc.buffers_in = array<i64: 1, 2>, hetc.buffers_out = array<i64: 3>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    // Not when the add's buffer overlaps the linear's input, which the kernel reads throughout.
    %8 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %9 = hetc.add %h, %8 {hetc.buffers_in = array<i64: 1, 2>, hetc.buffers_out = array<i64: 4>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    // Not across sublayers.
    %10 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 2>, hetc.sublayer = {index = 0 : i64, kind = "attention"}} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %11 = hetc.add %h, %10 {hetc.buffers_in = array<i64: 1, 2>, hetc.buffers_out = array<i64: 3>, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    return
  }
}
