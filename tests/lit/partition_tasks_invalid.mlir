// RUN: hetc-opt %s -split-input-file -verify-diagnostics -hetc-partition-tasks
// What hetc-partition-tasks refuses.

// Task counts are for the bounds hetc-plan-memory records.
// expected-error @+1 {{hetc-partition-tasks needs the module's hetc.bounds attribute; run hetc-plan-memory first}}
module {
  func.func @main() {
    return
  }
}

// -----

// A plan indexes tasks with 32 bits.
module attributes {hetc.bounds = {max_batch = 1 : i64, max_seq = 16 : i64, max_step_tokens = 1 : i64}} {
  func.func @main(%x: tensor<?x8xf32>) {
    %w = hetc.weight "w" : tensor<8x300000000000xf32>
    // expected-error @+1 {{'hetc.linear' op splits into 4687500000 tasks, more than a plan can index}}
    %0 = hetc.linear %x, %w : (tensor<?x8xf32>, tensor<8x300000000000xf32>) -> tensor<?x300000000000xf32>
    return
  }
}

// -----

// Bounds are positive.
// expected-error @+1 {{the module's hetc.bounds has no positive 32-bit 'max_step_tokens'}}
module attributes {hetc.bounds = {max_batch = 1 : i64, max_seq = 16 : i64, max_step_tokens = 0 : i64}} {
  func.func @main() {
    return
  }
}
