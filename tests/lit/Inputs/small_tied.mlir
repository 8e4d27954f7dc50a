// A raised one-layer model with narrow features (vocab 16, hidden 8, 2 heads of 4, 1 KV head,
// intermediate 12) written the way an unusual export might look: meaningless weight names, v
// projected before q, the residual add's operands swapped, and lm_head reading the embedding
// table transposed (tied embeddings). Shared by the planning passes' tests.
func.func @main(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x1x?x4xf32>, %pv: tensor<?x1x?x4xf32>) -> tensor<?x?x16xf32> {
  %table = hetc.weight "table" : tensor<16x8xf32>
  %g = hetc.weight "gamma" : tensor<8xf32>
  %w88 = hetc.weight "w88" : tensor<8x8xf32>
  %w84 = hetc.weight "w84" : tensor<8x4xf32>
  %w812 = hetc.weight "w812" : tensor<8x12xf32>
  %w128 = hetc.weight "w128" : tensor<12x8xf32>
  %wlm = hetc.weight "table" {transposed} : tensor<8x16xf32>
  %f = hetc.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n1_0 = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %v_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %k_0 = hetc.linear %n1_0, %w84 : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %q_0 = hetc.linear %n1_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %qr_0 = hetc.rope %q_0, %pos, %f {head_dim = 4 : i64, heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x8xf32>
  %kr_0 = hetc.rope %k_0, %pos, %f {head_dim = 4 : i64, heads = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<2xf32>) -> tensor<?x?x4xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %qr_0, %kr_0, %v_0, %pk, %pv {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
  %p_0 = hetc.linear %o_0, %w88 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r1 = hetc.add %p_0, %h : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
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
