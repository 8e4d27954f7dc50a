// A raised one-layer model with Gemma 2's sandwich norms: each sublayer's output goes through a
// norm of its own before the residual add (post_attention_layernorm, post_feedforward_layernorm),
// beside the norm that starts it. Sizes as small_tied.mlir's.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "lm_head" : tensor<8x16xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q = hetc.linear %n, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %n, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v = hetc.linear %n, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %qr = hetc.rope %q, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr = hetc.rope %k, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
  %o, %pk_0, %pv_0 = hetc.attention %qr, %kr, %v, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32, softcap = 5.0e+01 : f32, sliding_window = 4 : i64} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
  %p = hetc.linear %o, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %pn = hetc.rms_norm %p, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %h1 = hetc.add %h, %pn : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2 = hetc.rms_norm %h1, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %gt = hetc.linear %n2, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %up = hetc.linear %n2, %w812 : (tensor<?x?x8xf32>, tensor<8x12xf32>) -> tensor<?x?x12xf32>
  %s = hetc.swiglu %gt, %up {function = "gelu_tanh"} : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %d = hetc.linear %s, %w128 : (tensor<?x?x12xf32>, tensor<12x8xf32>) -> tensor<?x?x8xf32>
  %dn = hetc.rms_norm %d, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %h2 = hetc.add %h1, %dn : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.rms_norm %h2, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm {softcap = 3.0e+01 : f32} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}
