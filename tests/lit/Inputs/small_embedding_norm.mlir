// The small OPT-style model (small_opt.mlir) as BLOOM writes it: the embeddings normalized before
// the first layer (word_embeddings_layernorm), and an attention with ALiBi's slopes.
func.func @main(%ids: tensor<?x?xi64>, %pk: tensor<?x2x?x4xf32>, %pv: tensor<?x2x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "embed_tokens" : tensor<16x8xf32>
  %positions = hetc.weight "embed_positions" : tensor<18x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %b = hetc.weight "beta" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %b8 = hetc.weight "b8" : tensor<8xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %b12 = hetc.weight "b12" : tensor<12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "embed_tokens" {transposed} : tensor<8x16xf32>
  %e = hetc.embedding %table, %ids, %positions {position_offset = 2 : i64} : (tensor<16x8xf32>, tensor<?x?xi64>, tensor<18x8xf32>) -> tensor<?x?x8xf32>
  %h = hetc.layer_norm %e, %g, %b {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.layer_norm %h, %g, %b {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q_0 = hetc.linear %n1_0, %w88, %b8 : (tensor<?x?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %k_0 = hetc.linear %n1_0, %w88, %b8 : (tensor<?x?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %v_0 = hetc.linear %n1_0, %w88, %b8 : (tensor<?x?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %q_0, %k_0, %v_0, %pk, %pv {alibi_slopes = array<f32: 2.500000e-01, 6.250000e-02>, head_dim = 4 : i64, heads = 2 : i64, kv_heads = 2 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88, %b8 : (tensor<?x?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %h, %p_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n2_0 = hetc.layer_norm %r1, %g, %b {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %fc1_0 = hetc.linear %n2_0, %w812, %b12 : (tensor<?x?x8xf32>, tensor<8x12xf32>, tensor<12xf32>) -> tensor<?x?x12xf32>
  %a_0 = hetc.activation %fc1_0 {function = "relu"} : (tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %fc2_0 = hetc.linear %a_0, %w128, %b8 : (tensor<?x?x12xf32>, tensor<12x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %r2 = hetc.add %r1, %fc2_0 : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %nf = hetc.layer_norm %r2, %g, %b {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}
