// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=128 max-step-tokens=512" -hetc-partition-tasks \
// RUN:   | FileCheck %s
// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=128 max-step-tokens=7" -hetc-partition-tasks \
// RUN:   | FileCheck %s --check-prefix=STEP7
// RUN: hetc-opt %s -hetc-partition-tasks | FileCheck %s --check-prefix=WIDTHS

// Row ops split rows (tokens) 4 at a time; linear and lm_head split output columns (64, or
// multiples of 16 for narrow outputs so they still give up to 8 tasks); attention gets none (the
// executor splits it by cached positions at run time).
// CHECK: hetc.embedding {{.*}}hetc.tasks = {count = 128 : i64, grain = 4 : i64}
// CHECK: hetc.rms_norm {{.*}}hetc.tasks = {count = 128 : i64, grain = 4 : i64}
// CHECK: hetc.linear {{.*}}hetc.tasks = {count = 4 : i64, grain = 16 : i64}
// CHECK: hetc.linear {{.*}}hetc.tasks = {count = 2 : i64, grain = 16 : i64}
// CHECK: hetc.linear {{.*}}hetc.tasks = {count = 2 : i64, grain = 16 : i64}
// CHECK: hetc.rope {{.*}}hetc.tasks = {count = 128 : i64, grain = 4 : i64}
// CHECK: hetc.rope {{.*}}hetc.tasks = {count = 128 : i64, grain = 4 : i64}
// CHECK: hetc.attention
// CHECK-NOT: hetc.tasks
// CHECK: hetc.linear {{.*}}hetc.tasks = {count = 4 : i64, grain = 16 : i64}
// CHECK: hetc.add {{.*}}hetc.tasks = {count = 128 : i64, grain = 4 : i64}
// CHECK: hetc.rms_norm {{.*}}hetc.tasks = {count = 128 : i64, grain = 4 : i64}
// CHECK: hetc.linear {{.*}}hetc.tasks = {count = 6 : i64, grain = 32 : i64}
// CHECK: hetc.linear {{.*}}hetc.tasks = {count = 6 : i64, grain = 32 : i64}
// CHECK: hetc.swiglu {{.*}}hetc.tasks = {count = 128 : i64, grain = 4 : i64}
// CHECK: hetc.linear {{.*}}hetc.tasks = {count = 4 : i64, grain = 16 : i64}
// CHECK: hetc.add {{.*}}hetc.tasks = {count = 128 : i64, grain = 4 : i64}
// CHECK: hetc.lm_head {{.*}}hetc.tasks = {count = 8 : i64, grain = 32 : i64}

// Counts are for the bounds: with 7 tokens per step, row ops need 2 tasks.
// STEP7: hetc.embedding {{.*}}hetc.tasks = {count = 2 : i64, grain = 4 : i64}
// STEP7: hetc.linear {{.*}}hetc.tasks = {count = 4 : i64, grain = 16 : i64}
// STEP7: hetc.lm_head {{.*}}hetc.tasks = {count = 8 : i64, grain = 32 : i64}

// Column grains across widths: never wider than the output, 64 from 512 columns up.
// WIDTHS: hetc.linear {{.*}}hetc.tasks = {count = 1 : i64, grain = 5 : i64}
// WIDTHS: hetc.linear {{.*}}hetc.tasks = {count = 1 : i64, grain = 16 : i64}
// WIDTHS: hetc.linear {{.*}}hetc.tasks = {count = 7 : i64, grain = 16 : i64}
// WIDTHS: hetc.linear {{.*}}hetc.tasks = {count = 8 : i64, grain = 64 : i64}
// WIDTHS: hetc.linear {{.*}}hetc.tasks = {count = 64 : i64, grain = 64 : i64}
// WIDTHS: hetc.lm_head {{.*}}hetc.tasks = {count = 2004 : i64, grain = 64 : i64}
// Llama-3-70B's attention (64 query heads over 8 KV heads) gets no tasks.
// WIDTHS: hetc.attention
// WIDTHS-NOT: hetc.tasks
module attributes {hetc.bounds = {max_batch = 1 : i64, max_seq = 4096 : i64, max_step_tokens = 16 : i64}} {
  func.func @main(%x: tensor<?x8xf32>, %q: tensor<?x8192xf32>, %kv: tensor<?x1024xf32>,
                  %cache: tensor<?x8x?x128xf32>) {
    %w5 = hetc.weight "w5" : tensor<8x5xf32>
    %w16 = hetc.weight "w16" : tensor<8x16xf32>
    %w100 = hetc.weight "w100" : tensor<8x100xf32>
    %w512 = hetc.weight "w512" : tensor<8x512xf32>
    %w4096 = hetc.weight "w4096" : tensor<8x4096xf32>
    %wlm = hetc.weight "wlm" : tensor<8x128256xf32>
    %0 = hetc.linear %x, %w5 : (tensor<?x8xf32>, tensor<8x5xf32>) -> tensor<?x5xf32>
    %1 = hetc.linear %x, %w16 : (tensor<?x8xf32>, tensor<8x16xf32>) -> tensor<?x16xf32>
    %2 = hetc.linear %x, %w100 : (tensor<?x8xf32>, tensor<8x100xf32>) -> tensor<?x100xf32>
    %3 = hetc.linear %x, %w512 : (tensor<?x8xf32>, tensor<8x512xf32>) -> tensor<?x512xf32>
    %4 = hetc.linear %x, %w4096 : (tensor<?x8xf32>, tensor<8x4096xf32>) -> tensor<?x4096xf32>
    %5 = hetc.lm_head %x, %wlm : (tensor<?x8xf32>, tensor<8x128256xf32>) -> tensor<?x128256xf32>
    %o, %pk, %pv = hetc.attention %q, %kv, %kv, %cache, %cache
        {head_dim = 128 : i64, heads = 64 : i64, kv_heads = 8 : i64, scale = 0.0883883461 : f32}
        : (tensor<?x8192xf32>, tensor<?x1024xf32>, tensor<?x1024xf32>, tensor<?x8x?x128xf32>,
           tensor<?x8x?x128xf32>) -> (tensor<?x8192xf32>, tensor<?x8x?x128xf32>, tensor<?x8x?x128xf32>)
    return
  }
}
