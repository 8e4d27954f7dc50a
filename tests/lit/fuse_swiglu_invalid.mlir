// RUN: hetc-opt %s -split-input-file -verify-diagnostics -hetc-fuse-swiglu
// What hetc-fuse-swiglu refuses.

// It reads where the buffers lie.
// expected-error @+1 {{hetc-fuse-swiglu needs the module's hetc.buffers attribute; run hetc-plan-memory first}}
module {
  func.func @main() {
    return
  }
}

// -----

// And which buffers each op reads and writes.
module attributes {hetc.buffers = []} {
  func.func @main(%x: tensor<?x8xf32>, %g: tensor<?x8xf32>) {
    %w = hetc.weight "w" : tensor<8x8xf32>
    %0 = hetc.linear %x, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    // expected-error @+1 {{'hetc.swiglu' op has no hetc.buffers_in and hetc.buffers_out of one linear input and two swiglu inputs; run hetc-plan-memory first}}
    %1 = hetc.swiglu %g, %0 : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    return
  }
}

// -----

// Buffer indices must name entries of hetc.buffers.
module attributes {hetc.buffers = []} {
  func.func @main(%x: tensor<?x8xf32>, %g: tensor<?x8xf32>) {
    %w = hetc.weight "w" : tensor<8x8xf32>
    %0 = hetc.linear %x, %w {hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 1>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    // expected-error @+1 {{'hetc.swiglu' op names a buffer that hetc.buffers does not describe}}
    %1 = hetc.swiglu %g, %0 {hetc.buffers_in = array<i64: 2, 1>, hetc.buffers_out = array<i64: 3>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    return
  }
}
