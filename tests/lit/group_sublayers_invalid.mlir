// RUN: hetc-opt %s -split-input-file -verify-diagnostics -hetc-group-sublayers
// Each structure hetc-group-sublayers refuses, with the error that names the op at fault.

// A function without LLM ops has not been raised.
// expected-error @+1 {{'func.func' op has no LLM ops; the raising passes produce them}}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A layer needs its feed-forward sublayer.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x16xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %qr_0 = hetc.rope %q_0, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr_0 = hetc.rope %k_0, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %qr_0, %kr_0, %v_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'hetc.add' op ends layer 0's attention sublayer, but the final norm follows without a feed-forward sublayer}}
  %r1 = hetc.add %h, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %r1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// Attention comes first in a layer.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x16xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'hetc.rms_norm' op starts a feed-forward sublayer where layer 0 needs an attention sublayer (layers are attention, then feed-forward)}}
  %n2_0 = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %gt_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %up_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %s_0 = hetc.swiglu %gt_0, %up_0 : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %d_0 = hetc.linear %s_0, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %h, %d_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.rms_norm %r1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %qr_0 = hetc.rope %q_0, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr_0 = hetc.rope %k_0, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %qr_0, %kr_0, %v_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r2 = hetc.add %r1, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %r2, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// Without a residual add there is no sublayer; the norm is then taken as the final one.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x16xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'hetc.rms_norm' op is the final norm (the residual stream ends here), so it must feed exactly one hetc.lm_head; it feeds 'hetc.linear'}}
  %n = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %x = hetc.linear %n, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %x, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// The residual stream feeds exactly a norm and a residual add.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x16xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  // expected-error @+1 {{'hetc.embedding' op produces the residual stream after the embedding, which must feed either one norm (hetc.rms_norm or hetc.layer_norm) and one residual hetc.add (the next sublayer) or only the final norm; it feeds 'hetc.rms_norm', 'hetc.add', 'hetc.add'}}
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %qr_0 = hetc.rope %q_0, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr_0 = hetc.rope %k_0, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %qr_0, %kr_0, %v_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %extra = hetc.add %h, %h : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %h, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2_0 = hetc.rms_norm %r1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %gt_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %up_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %s_0 = hetc.swiglu %gt_0, %up_0 : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %d_0 = hetc.linear %s_0, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  %r2 = hetc.add %r1, %d_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %r2, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// A sublayer's values stay inside it, except through its residual add.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x16xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %qr_0 = hetc.rope %q_0, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr_0 = hetc.rope %k_0, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %qr_0, %kr_0, %v_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %h, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2_0 = hetc.rms_norm %r1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %gt_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %up_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %s_0 = hetc.swiglu %gt_0, %up_0 : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %d_0 = hetc.linear %s_0, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'hetc.add' op reads a value internal to the sublayer that starts at the rms_norm at}}
  %r2 = hetc.add %r1, %q_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %r2, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// Every op of a sublayer feeds its residual add.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x16xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %qr_0 = hetc.rope %q_0, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr_0 = hetc.rope %k_0, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %qr_0, %kr_0, %v_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'hetc.linear' op does not contribute to its sublayer's residual add at}}
  %unused = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %h, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2_0 = hetc.rms_norm %r1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %gt_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %up_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %s_0 = hetc.swiglu %gt_0, %up_0 : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %d_0 = hetc.linear %s_0, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  %r2 = hetc.add %r1, %d_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %r2, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// A sublayer holds exactly one attention or one swiglu.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x16xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %qr_0 = hetc.rope %q_0, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr_0 = hetc.rope %k_0, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %qr_0, %kr_0, %v_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %h, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'hetc.rms_norm' op starts a sublayer with 0 hetc.attention and 2 hetc.swiglu ops; a decoder sublayer has exactly one of them}}
  %n2_0 = hetc.rms_norm %r1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %gt_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %up_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %s_0 = hetc.swiglu %gt_0, %up_0 : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %s2_0 = hetc.swiglu %s_0, %up_0 : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %d_0 = hetc.linear %s2_0, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  %r2 = hetc.add %r1, %d_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %r2, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// Feed-forward sublayers hold linears and one swiglu.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x16xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %qr_0 = hetc.rope %q_0, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr_0 = hetc.rope %k_0, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %qr_0, %kr_0, %v_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %h, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2_0 = hetc.rms_norm %r1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %gt_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %up_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %s_0 = hetc.swiglu %gt_0, %up_0 : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %d0_0 = hetc.linear %s_0, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'hetc.rope' op cannot appear inside a feed-forward sublayer (between its rms_norm and residual add)}}
  %d_0 = hetc.rope %d0_0, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %r2 = hetc.add %r1, %d_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %r2, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// Every LLM op belongs to the structure.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>, %x: tensor<?x?x8xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x8xf32>) {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x16xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %qr_0 = hetc.rope %q_0, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr_0 = hetc.rope %k_0, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %qr_0, %kr_0, %v_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %h, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2_0 = hetc.rms_norm %r1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %gt_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %up_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %s_0 = hetc.swiglu %gt_0, %up_0 : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %d_0 = hetc.linear %s_0, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  %r2 = hetc.add %r1, %d_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %r2, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  // expected-error @+1 {{'hetc.linear' op is not part of the decoder structure (embedding, then layers of an attention and a feed-forward sublayer, then the final norm and lm_head)}}
  %stray = hetc.linear %x, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %logits, %stray : tensor<?x?x16xf32>, tensor<?x?x8xf32>
}

// -----

// Every layer shares one KV cache shape.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>, %pk2: tensor<?x2x?x4xf32>, %pv2: tensor<?x2x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x16xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %qr_0 = hetc.rope %q_0, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr_0 = hetc.rope %k_0, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %qr_0, %kr_0, %v_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %h, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2_0 = hetc.rms_norm %r1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %gt_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %up_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %s_0 = hetc.swiglu %gt_0, %up_0 : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %d_0 = hetc.linear %s_0, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  %r2 = hetc.add %r1, %d_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n1_1 = hetc.rms_norm %r2, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_1 = hetc.linear %n1_1, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k_1 = hetc.linear %n1_1, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %v_1 = hetc.linear %n1_1, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %qr_1 = hetc.rope %q_1, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr_1 = hetc.rope %k_1, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'hetc.attention' op has heads = 2, kv_heads = 2, head_dim = 4, but layer 0 has 2, 1, 4; every layer must share one KV cache shape}}
  %o_1, %pk_1, %pv_1 = hetc.attention %qr_1, %kr_1, %v_1, %pk2, %pv2 {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 2 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>)
  %p_1 = hetc.linear %o_1, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r3 = hetc.add %r2, %p_1 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2_1 = hetc.rms_norm %r3, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %gt_1 = hetc.linear %n2_1, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %up_1 = hetc.linear %n2_1, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %s_1 = hetc.swiglu %gt_1, %up_1 : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %d_1 = hetc.linear %s_1, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  %r4 = hetc.add %r3, %d_1 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %r4, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// lm_head and the embedding table agree on the vocabulary.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>) -> tensor<?x?x20xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x20xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %qr_0 = hetc.rope %q_0, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr_0 = hetc.rope %k_0, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %qr_0, %kr_0, %v_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %h, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2_0 = hetc.rms_norm %r1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %gt_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %up_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %s_0 = hetc.swiglu %gt_0, %up_0 : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %d_0 = hetc.linear %s_0, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  %r2 = hetc.add %r1, %d_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %r2, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'hetc.lm_head' op weight is 'tensor<8x20xf32>', expected [8, 16] to match the embedding table 'tensor<16x8xf32>'}}
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x20xf32>) -> tensor<?x?x20xf32>
  return %logits : tensor<?x?x20xf32>
}

// -----

// A model's feed-forwards are of one kind: a gated one in layer 0 and a non-gated one in layer 1
// are refused (the norms may be of either kind: an rms_norm before a non-gated feed-forward is
// fine).
func.func @main(%ids: tensor<?x?xi64>, %pk: tensor<?x2x?x4xf32>, %pv: tensor<?x2x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x16xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %q_0, %q_0, %q_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 2 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %h, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2_0 = hetc.rms_norm %r1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %gt_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %up_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %s_0 = hetc.swiglu %gt_0, %up_0 : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %d_0 = hetc.linear %s_0, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  %r2 = hetc.add %r1, %d_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n1_1 = hetc.rms_norm %r2, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_1 = hetc.linear %n1_1, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %o_1, %pk_1, %pv_1 = hetc.attention %q_1, %q_1, %q_1, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 2 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>)
  %p_1 = hetc.linear %o_1, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r3 = hetc.add %r2, %p_1 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2_1 = hetc.rms_norm %r3, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %fc1_1 = hetc.linear %n2_1, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  // expected-error @+1 {{'hetc.activation' op is a non-gated feed-forward, but layer 0's is gated; hetc plans decoders whose feed-forwards are all of one kind}}
  %a_1 = hetc.activation %fc1_1 {function = "gelu"} : (tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %fc2_1 = hetc.linear %a_1, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  %r4 = hetc.add %r3, %fc2_1 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %r4, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// An activation belongs to a feed-forward sublayer: one in an attention sublayer makes two
// sublayer kinds in one.
func.func @main(%ids: tensor<?x?xi64>, %pk: tensor<?x2x?x4xf32>, %pv: tensor<?x2x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "wlm" : tensor<8x16xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'hetc.layer_norm' op starts a sublayer with 1 hetc.attention and 0 hetc.swiglu and 1 hetc.activation ops; a decoder sublayer has exactly one of them}}
  %n1_0 = hetc.layer_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %v_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %q_0, %k_0, %v_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 2 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>)
  %a = hetc.activation %o_0 {function = "relu"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %p_0 = hetc.linear %a, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %h, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2_0 = hetc.layer_norm %r1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %fc1_0 = hetc.linear %n2_0, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %a_0 = hetc.activation %fc1_0 {function = "gelu"} : (tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %fc2_0 = hetc.linear %a_0, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  %r2 = hetc.add %r1, %fc2_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.layer_norm %r2, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}
