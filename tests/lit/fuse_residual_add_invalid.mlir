// RUN: hetc-opt %s -split-input-file -verify-diagnostics -hetc-fuse-residual-add
// What hetc-fuse-residual-add refuses.

// It reads where the buffers lie.
// expected-error @+1 {{hetc-fuse-residual-add needs the module's hetc.buffers attribute; run hetc-plan-memory first}}
module {
  func.func @main() {
    return
  }
}

// -----

// And which buffers each op reads and writes.
module attributes {hetc.buffers = []} {
  func.func @main(%x: tensor<?x8xf32>, %h: tensor<?x8xf32>) {
    %w = hetc.weight "w" : tensor<8x8xf32>
    %0 = hetc.linear %x, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    // expected-error @+1 {{'hetc.add' op has no hetc.buffers_in and hetc.buffers_out of one linear input and two add inputs; run hetc-plan-memory first}}
    %1 = hetc.add %h, %0 : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    return
  }
}

// -----

// Buffer indices must name entries of hetc.buffers.
module attributes {hetc.buffers = []} {
  func.func @main(%x: tensor<?x8xf32>, %h: tensor<?x8xf32>) {
    %w = hetc.weight "w" : tensor<8x8xf32>
    %0 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 1>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    // expected-error @+1 {{'hetc.add' op names a buffer that hetc.buffers does not describe}}
    %1 = hetc.add %h, %0 {hetc.buffers_in = array<i64: 2, 1>, hetc.buffers_out = array<i64: 3>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    return
  }
}

// -----

// Each entry of hetc.buffers has a role the plan knows.
// expected-error @+1 {{the module's hetc.buffers[1] has role 'weights'; expected hidden, scratch or logits}}
module attributes {hetc.buffers = [
    {cols = 8 : i64, name = "a", offset = 0 : i64, role = "hidden", row_stride = 64 : i64, rows = 4 : i64},
    {cols = 8 : i64, name = "b", offset = 256 : i64, role = "weights", row_stride = 64 : i64, rows = 4 : i64}]} {
  func.func @main() {
    return
  }
}
