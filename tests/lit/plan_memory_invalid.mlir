// Bounds hetc-plan-memory refuses, each error naming the bound:
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers -hetc-plan-memory="max-batch=0" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BATCH
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers -hetc-plan-memory="max-seq=0" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SEQ
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers -hetc-plan-memory="max-step-tokens=0" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STEP
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=8 max-step-tokens=4" 2>&1 | FileCheck %s --check-prefix=STEP-BATCH
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=KV
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-seq=18446744073709551615" 2>&1 | FileCheck %s --check-prefix=SEQ-BITS
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="kv-dtype=f16" 2>&1 | FileCheck %s --check-prefix=KV-DTYPE
// RUN: not hetc-opt %S/Inputs/small_opt.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-seq=17" 2>&1 | FileCheck %s --check-prefix=POSITIONS
// BATCH: error: max-batch must be at least 1 (sequence slots of the plan)
// SEQ: error: max-seq must be at least 1 (positions per sequence)
// STEP: error: max-step-tokens must be at least 1 (tokens per step)
// STEP-BATCH: error: max-step-tokens = 4 is smaller than max-batch = 8; a decode step of every slot needs one token per sequence
// KV: error: the KV cache for max-seq = 4611686018427387904 and max-batch = 4 (2 layers x 2 KV heads x head_dim 16 x 4 bytes, K and V) overflows 64 bits
// SEQ-BITS: error: max-seq = 18446744073709551615 does not fit in 63 bits
// KV-DTYPE: error: hetc-plan-memory: kv-dtype "f16" is not f32, bf16 or int8
// POSITIONS: error: model has learned positions for 16 tokens (offset 2); --max-seq 17 exceeds them

// Then IR it cannot plan:
// RUN: hetc-opt %s -split-input-file -verify-diagnostics -hetc-plan-memory

// The KV cache's shape comes from hetc-group-sublayers.
// expected-error @+1 {{hetc-plan-memory needs the module's hetc.model attribute; run hetc-group-sublayers first}}
module {
  func.func @main() {
    return
  }
}

// -----

// The plan's Rope works in place, so its input must have no other reader.
module attributes {hetc.model = {architecture = "llama", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, intermediate = 12 : i64, kv_heads = 1 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = false, vocab = 16 : i64}} {
  func.func @main(%table: tensor<16x8xf32>, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %f: tensor<2xf32>)
      -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
    %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    // expected-error @+1 {{'hetc.rope' op rotates its input in place, so the input must have no other use}}
    %r = hetc.rope %h, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
    return %h, %r : tensor<?x?x8xf32>, tensor<?x?x8xf32>
  }
}

// -----

// An activation operand must be computed in the graph: a step's only inputs are tokens,
// positions and the KV cache.
module attributes {hetc.model = {architecture = "llama", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, intermediate = 12 : i64, kv_heads = 1 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = false, vocab = 16 : i64}} {
  func.func @main(%table: tensor<16x8xf32>, %ids: tensor<?x?xi64>, %x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
    %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    // expected-error @+1 {{'hetc.add' op operand #1 must be an activation computed by an LLM op}}
    %r = hetc.add %h, %x : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %r : tensor<?x?x8xf32>
  }
}

// -----

// A weight operand must not be an activation.
module attributes {hetc.model = {architecture = "llama", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, intermediate = 12 : i64, kv_heads = 1 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = false, vocab = 16 : i64}} {
  func.func @main(%table: tensor<16x8xf32>, %ids: tensor<8xi64>) -> tensor<8x8xf32> {
    %e = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<8xi64>) -> tensor<8x8xf32>
    // expected-error @+1 {{'hetc.linear' op operand #1 must be a weight, a constant or a step input, not an activation}}
    %l = hetc.linear %e, %e : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    return %l : tensor<8x8xf32>
  }
}

// -----

// Activations are float32 with a known width.
module attributes {hetc.model = {architecture = "llama", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, intermediate = 12 : i64, kv_heads = 1 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = false, vocab = 16 : i64}} {
  func.func @main(%table: tensor<16x8xbf16>, %ids: tensor<?x?xi64>) -> tensor<?x?x8xbf16> {
    // expected-error @+1 {{'hetc.embedding' op result #0 must be a float32 tensor with a static feature size to get a buffer, got 'tensor<?x?x8xbf16>'}}
    %h = hetc.embedding %table, %ids : (tensor<16x8xbf16>, tensor<?x?xi64>) -> tensor<?x?x8xbf16>
    return %h : tensor<?x?x8xbf16>
  }
}

// -----

module attributes {hetc.model = {architecture = "llama", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, intermediate = 12 : i64, kv_heads = 1 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = false, vocab = 16 : i64}} {
  func.func @main(%table: tensor<16x8xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x?xf32> {
    // expected-error @+1 {{'hetc.embedding' op result #0 must be a float32 tensor with a static feature size to get a buffer, got 'tensor<?x?x?xf32>'}}
    %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x?xf32>
    return %h : tensor<?x?x?xf32>
  }
}
