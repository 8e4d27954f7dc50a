// RUN: hetc-opt %s -split-input-file -verify-diagnostics
// One case per verifier error of dialects/hetc/lib/HetcOps.cpp.

func.func @onnx_node_empty_op_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'hetc.onnx.node' op has an empty op_type}}
  %0 = hetc.onnx.node ""(%x) {node_name = "n"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @weight_transposed_not_2d() -> tensor<64xf32> {
  // expected-error @+1 {{'hetc.weight' op only a 2-D weight can be transposed, got 'tensor<64xf32>'}}
  %w = hetc.weight "g" {transposed} : tensor<64xf32>
  return %w : tensor<64xf32>
}

// -----

func.func @weight_columns_empty() -> tensor<8x0xf32> {
  // expected-error @+1 {{'hetc.weight' op columns must be [begin, end] or [begin, end, period] with 0 <= begin < end <= period}}
  %w = hetc.weight "w" {columns = array<i64: 4, 4>} : tensor<8x0xf32>
  return %w : tensor<8x0xf32>
}

// -----

func.func @weight_columns_wrong_width() -> tensor<8x4xf32> {
  // expected-error @+1 {{'hetc.weight' op columns [0, 8) do not match the last dimension of 'tensor<8x4xf32>'}}
  %w = hetc.weight "w" {columns = array<i64: 0, 8>} : tensor<8x4xf32>
  return %w : tensor<8x4xf32>
}

// -----

func.func @embedding_table_not_2d(%t: tensor<256xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.embedding' op table must be a static [vocab, hidden] tensor, got 'tensor<256xf32>'}}
  %0 = hetc.embedding %t, %ids : (tensor<256xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @embedding_table_dynamic(%t: tensor<?x64xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.embedding' op table must be a static [vocab, hidden] tensor, got 'tensor<?x64xf32>'}}
  %0 = hetc.embedding %t, %ids : (tensor<?x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @embedding_result_width(%t: tensor<256x64xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x32xf32> {
  // expected-error @+1 {{'hetc.embedding' op result has 32 features, expected 64}}
  %0 = hetc.embedding %t, %ids : (tensor<256x64xf32>, tensor<?x?xi64>) -> tensor<?x?x32xf32>
  return %0 : tensor<?x?x32xf32>
}

// -----

func.func @rms_norm_gamma_not_1d(%x: tensor<?x?x64xf32>, %g: tensor<1x64xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.rms_norm' op gamma must be a static 1-D tensor, got 'tensor<1x64xf32>'}}
  %0 = hetc.rms_norm %x, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x64xf32>, tensor<1x64xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @rms_norm_epsilon_zero(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.rms_norm' op epsilon must be positive}}
  %0 = hetc.rms_norm %x, %g {epsilon = 0.0 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @rms_norm_input_width(%x: tensor<?x?x96xf32>, %g: tensor<64xf32>) -> tensor<?x?x96xf32> {
  // expected-error @+1 {{'hetc.rms_norm' op input has 96 features, which groups of gamma's 64 do not divide}}
  %0 = hetc.rms_norm %x, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x96xf32>, tensor<64xf32>) -> tensor<?x?x96xf32>
  return %0 : tensor<?x?x96xf32>
}

// -----

// A gamma of a head normalizes each head of the flat value: the result keeps all the features.
func.func @rms_norm_grouped_result_width(%x: tensor<?x?x128xf32>, %g: tensor<32xf32>) -> tensor<?x?x32xf32> {
  // expected-error @+1 {{'hetc.rms_norm' op result has 32 features, expected 128}}
  %0 = hetc.rms_norm %x, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x128xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  return %0 : tensor<?x?x32xf32>
}

// -----

func.func @rms_norm_result_width(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>) -> tensor<?x?x32xf32> {
  // expected-error @+1 {{'hetc.rms_norm' op result has 32 features, expected 64}}
  %0 = hetc.rms_norm %x, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x32xf32>
  return %0 : tensor<?x?x32xf32>
}

// -----

func.func @linear_weight_not_2d(%x: tensor<?x?x64xf32>, %w: tensor<64xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.linear' op weight must be a static 2-D tensor, got 'tensor<64xf32>'}}
  %0 = hetc.linear %x, %w : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @linear_bias_width(%x: tensor<?x?x64xf32>, %w: tensor<64x32xf32>, %b: tensor<64xf32>) -> tensor<?x?x32xf32> {
  // expected-error @+1 {{'hetc.linear' op bias must be a float [32] tensor, got 'tensor<64xf32>'}}
  %0 = hetc.linear %x, %w, %b : (tensor<?x?x64xf32>, tensor<64x32xf32>, tensor<64xf32>) -> tensor<?x?x32xf32>
  return %0 : tensor<?x?x32xf32>
}

// -----

func.func @linear_input_width(%x: tensor<?x?x48xf32>, %w: tensor<64x32xf32>) -> tensor<?x?x32xf32> {
  // expected-error @+1 {{'hetc.linear' op input has 48 features, expected 64}}
  %0 = hetc.linear %x, %w : (tensor<?x?x48xf32>, tensor<64x32xf32>) -> tensor<?x?x32xf32>
  return %0 : tensor<?x?x32xf32>
}

// -----

func.func @linear_result_width(%x: tensor<?x?x64xf32>, %w: tensor<64x32xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.linear' op result has 64 features, expected 32}}
  %0 = hetc.linear %x, %w : (tensor<?x?x64xf32>, tensor<64x32xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @lm_head_weight_dynamic(%x: tensor<?x?x64xf32>, %w: tensor<64x?xf32>) -> tensor<?x?x256xf32> {
  // expected-error @+1 {{'hetc.lm_head' op weight must be a static 2-D tensor, got 'tensor<64x?xf32>'}}
  %0 = hetc.lm_head %x, %w : (tensor<?x?x64xf32>, tensor<64x?xf32>) -> tensor<?x?x256xf32>
  return %0 : tensor<?x?x256xf32>
}

// -----

func.func @lm_head_input_width(%x: tensor<?x?x32xf32>, %w: tensor<64x256xf32>) -> tensor<?x?x256xf32> {
  // expected-error @+1 {{'hetc.lm_head' op input has 32 features, expected 64}}
  %0 = hetc.lm_head %x, %w : (tensor<?x?x32xf32>, tensor<64x256xf32>) -> tensor<?x?x256xf32>
  return %0 : tensor<?x?x256xf32>
}

// -----

func.func @lm_head_result_width(%x: tensor<?x?x64xf32>, %w: tensor<64x256xf32>) -> tensor<?x?x255xf32> {
  // expected-error @+1 {{'hetc.lm_head' op result has 255 features, expected 256}}
  %0 = hetc.lm_head %x, %w : (tensor<?x?x64xf32>, tensor<64x256xf32>) -> tensor<?x?x255xf32>
  return %0 : tensor<?x?x255xf32>
}

// -----

func.func @rope_odd_head_dim(%x: tensor<?x?x60xf32>, %p: tensor<?x?xi64>, %f: tensor<7xf32>) -> tensor<?x?x60xf32> {
  // expected-error @+1 {{'hetc.rope' op needs positive heads and an even head_dim, got heads = 4, head_dim = 15}}
  %0 = hetc.rope %x, %p, %f {heads = 4 : i64, head_dim = 15 : i64} : (tensor<?x?x60xf32>, tensor<?x?xi64>, tensor<7xf32>) -> tensor<?x?x60xf32>
  return %0 : tensor<?x?x60xf32>
}

// -----

func.func @rope_zero_heads(%x: tensor<?x?x64xf32>, %p: tensor<?x?xi64>, %f: tensor<8xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.rope' op needs positive heads and an even head_dim, got heads = 0, head_dim = 16}}
  %0 = hetc.rope %x, %p, %f {heads = 0 : i64, head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<?x?xi64>, tensor<8xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @rope_inv_freq_length(%x: tensor<?x?x64xf32>, %p: tensor<?x?xi64>, %f: tensor<16xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.rope' op inv_freq must be [8], got 'tensor<16xf32>'}}
  %0 = hetc.rope %x, %p, %f {heads = 4 : i64, head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<?x?xi64>, tensor<16xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @rope_rotary_dim_odd(%x: tensor<?x?x64xf32>, %p: tensor<?x?xi64>, %f: tensor<3xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.rope' op rotary_dim must be even, positive and at most head_dim 16, got 7}}
  %0 = hetc.rope %x, %p, %f {heads = 4 : i64, head_dim = 16 : i64, rotary_dim = 7 : i64} : (tensor<?x?x64xf32>, tensor<?x?xi64>, tensor<3xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @rope_partial_inv_freq_length(%x: tensor<?x?x64xf32>, %p: tensor<?x?xi64>, %f: tensor<8xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.rope' op inv_freq must be [4], got 'tensor<8xf32>'}}
  %0 = hetc.rope %x, %p, %f {heads = 4 : i64, head_dim = 16 : i64, rotary_dim = 8 : i64} : (tensor<?x?x64xf32>, tensor<?x?xi64>, tensor<8xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @rope_input_width(%x: tensor<?x?x32xf32>, %p: tensor<?x?xi64>, %f: tensor<8xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.rope' op input has 32 features, expected 64}}
  %0 = hetc.rope %x, %p, %f {heads = 4 : i64, head_dim = 16 : i64} : (tensor<?x?x32xf32>, tensor<?x?xi64>, tensor<8xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @rope_result_width(%x: tensor<?x?x64xf32>, %p: tensor<?x?xi64>, %f: tensor<8xf32>) -> tensor<?x?x32xf32> {
  // expected-error @+1 {{'hetc.rope' op result has 32 features, expected 64}}
  %0 = hetc.rope %x, %p, %f {heads = 4 : i64, head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<?x?xi64>, tensor<8xf32>) -> tensor<?x?x32xf32>
  return %0 : tensor<?x?x32xf32>
}

// -----

func.func @attention_zero_kv_heads(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %c: tensor<?x2x?x16xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.attention' op needs positive heads, kv_heads and head_dim}}
  %o, %pk, %pv = hetc.attention %q, %k, %k, %c, %c {heads = 4 : i64, kv_heads = 0 : i64, head_dim = 16 : i64, scale = 0.25 : f32}
      : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  return %o : tensor<?x?x64xf32>
}

// -----

func.func @attention_ungroupable_heads(%q: tensor<?x?x80xf32>, %k: tensor<?x?x32xf32>, %c: tensor<?x2x?x16xf32>) -> tensor<?x?x80xf32> {
  // expected-error @+1 {{'hetc.attention' op 5 query heads cannot be grouped over 2 KV heads}}
  %o, %pk, %pv = hetc.attention %q, %k, %k, %c, %c {heads = 5 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f32}
      : (tensor<?x?x80xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      -> (tensor<?x?x80xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  return %o : tensor<?x?x80xf32>
}

// -----

// A cache broadcast to every query head has the query heads, not the KV heads.
func.func @attention_broadcast_cache_heads(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %c: tensor<?x2x?x16xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.attention' op KV cache has 2 heads, expected 4}}
  %o, %pk, %pv = hetc.attention %q, %k, %k, %c, %c {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f32, broadcast_cache}
      : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  return %o : tensor<?x?x64xf32>
}

// -----

func.func @attention_zero_window(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %c: tensor<?x2x?x16xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.attention' op sliding_window must be positive, got 0}}
  %o, %pk, %pv = hetc.attention %q, %k, %k, %c, %c {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f32, sliding_window = 0 : i64}
      : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  return %o : tensor<?x?x64xf32>
}

// -----

func.func @attention_negative_scale(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %c: tensor<?x2x?x16xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.attention' op scale must be positive}}
  %o, %pk, %pv = hetc.attention %q, %k, %k, %c, %c {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = -0.25 : f32}
      : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  return %o : tensor<?x?x64xf32>
}

// -----

func.func @attention_q_width(%q: tensor<?x?x32xf32>, %k: tensor<?x?x32xf32>, %c: tensor<?x2x?x16xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.attention' op q has 32 features, expected 64}}
  %o, %pk, %pv = hetc.attention %q, %k, %k, %c, %c {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f32}
      : (tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  return %o : tensor<?x?x64xf32>
}

// -----

func.func @attention_k_width(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x32xf32>, %c: tensor<?x2x?x16xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.attention' op k has 64 features, expected 32}}
  %o, %pk, %pv = hetc.attention %q, %k, %v, %c, %c {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f32}
      : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  return %o : tensor<?x?x64xf32>
}

// -----

func.func @attention_v_width(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %v: tensor<?x?x16xf32>, %c: tensor<?x2x?x16xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.attention' op v has 16 features, expected 32}}
  %o, %pk, %pv = hetc.attention %q, %k, %v, %c, %c {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f32}
      : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  return %o : tensor<?x?x64xf32>
}

// -----

func.func @attention_result_width(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %c: tensor<?x2x?x16xf32>) -> tensor<?x?x32xf32> {
  // expected-error @+1 {{'hetc.attention' op result has 32 features, expected 64}}
  %o, %pk, %pv = hetc.attention %q, %k, %k, %c, %c {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f32}
      : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      -> (tensor<?x?x32xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  return %o : tensor<?x?x32xf32>
}

// -----

func.func @attention_cache_rank(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %c: tensor<?x?x16xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.attention' op KV cache tensors are [batch, kv_heads, positions, head_dim], got 'tensor<?x?x16xf32>'}}
  %o, %pk, %pv = hetc.attention %q, %k, %k, %c, %c {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f32}
      : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>)
      -> (tensor<?x?x64xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>)
  return %o : tensor<?x?x64xf32>
}

// -----

func.func @attention_cache_heads(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %c: tensor<?x4x?x16xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.attention' op KV cache has 4 heads, expected 2}}
  %o, %pk, %pv = hetc.attention %q, %k, %k, %c, %c {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f32}
      : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>)
      -> (tensor<?x?x64xf32>, tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>)
  return %o : tensor<?x?x64xf32>
}

// -----

func.func @attention_cache_head_dim(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %c: tensor<?x2x?x8xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.attention' op KV cache has 8 features, expected 16}}
  %o, %pk, %pv = hetc.attention %q, %k, %k, %c, %c {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f32}
      : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>)
      -> (tensor<?x?x64xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>)
  return %o : tensor<?x?x64xf32>
}

// -----

func.func @swiglu_operand_widths(%g: tensor<?x?x176xf32>, %u: tensor<?x?x64xf32>) -> tensor<?x?x176xf32> {
  // expected-error @+1 {{'hetc.swiglu' op operands have 176 and 64 features}}
  %0 = hetc.swiglu %g, %u : (tensor<?x?x176xf32>, tensor<?x?x64xf32>) -> tensor<?x?x176xf32>
  return %0 : tensor<?x?x176xf32>
}

// -----

func.func @swiglu_result_width(%g: tensor<?x?x176xf32>, %u: tensor<?x?x?xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.swiglu' op result has 64 features, expected 176}}
  %0 = hetc.swiglu %g, %u : (tensor<?x?x176xf32>, tensor<?x?x?xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @add_operand_widths(%a: tensor<?x?x64xf32>, %b: tensor<?x?x32xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{'hetc.add' op operands have 64 and 32 features}}
  %0 = hetc.add %a, %b : (tensor<?x?x64xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @add_result_width(%a: tensor<?x?x64xf32>, %b: tensor<?x?x64xf32>) -> tensor<?x?x32xf32> {
  // expected-error @+1 {{'hetc.add' op result has 32 features, expected 64}}
  %0 = hetc.add %a, %b : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x32xf32>
  return %0 : tensor<?x?x32xf32>
}

// -----

func.func @weight_columns_period_too_short() -> tensor<8x8xf32> {
  // expected-error @+1 {{'hetc.weight' op columns must be [begin, end] or [begin, end, period] with 0 <= begin < end <= period}}
  %w = hetc.weight "w" {columns = array<i64: 4, 8, 6>} : tensor<8x8xf32>
  return %w : tensor<8x8xf32>
}

// -----

func.func @weight_columns_period_width() -> tensor<8x6xf32> {
  // expected-error @+1 {{'hetc.weight' op columns [4, 8) do not match the last dimension of 'tensor<8x6xf32>'}}
  %w = hetc.weight "w" {columns = array<i64: 4, 8, 12>} : tensor<8x6xf32>
  return %w : tensor<8x6xf32>
}
