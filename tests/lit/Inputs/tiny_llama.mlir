// A raised two-layer Llama (the `tiny` preset's shapes: vocab 256, hidden 64, 4 heads of 16,
// 2 KV heads, intermediate 176) as the raising passes leave it: LLM ops, weights, constants.
// Shared by the planning passes' tests.
func.func @main(%input_ids: tensor<?x?xi64> {hetc.name = "input_ids"},
                %attention_mask: tensor<?x?xi64> {hetc.name = "attention_mask"},
                %position_ids: tensor<?x?xi64> {hetc.name = "position_ids"},
                %past_key_0: tensor<?x2x?x16xf32> {hetc.name = "past_key_values.0.key"},
                %past_value_0: tensor<?x2x?x16xf32> {hetc.name = "past_key_values.0.value"},
                %past_key_1: tensor<?x2x?x16xf32> {hetc.name = "past_key_values.1.key"},
                %past_value_1: tensor<?x2x?x16xf32> {hetc.name = "past_key_values.1.value"})
    -> (tensor<?x?x256xf32> {hetc.name = "logits"},
        tensor<?x2x?x16xf32> {hetc.name = "present.0.key"},
        tensor<?x2x?x16xf32> {hetc.name = "present.0.value"},
        tensor<?x2x?x16xf32> {hetc.name = "present.1.key"},
        tensor<?x2x?x16xf32> {hetc.name = "present.1.value"}) {
  %table = hetc.weight "model.embed_tokens.weight" : tensor<256x64xf32>
  %inv_freq = hetc.constant dense<[1.0, 0.316227764, 0.1, 0.0316227764, 0.01, 0.00316227764, 0.001, 0.000316227764]> : tensor<8xf32>
  %h0 = hetc.embedding %table, %input_ids : (tensor<256x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %ln1_0 = hetc.weight "model.layers.0.input_layernorm.weight" : tensor<64xf32>
  %wq_0 = hetc.weight "model.layers.0.self_attn.q_proj.weight" {transposed} : tensor<64x64xf32>
  %wk_0 = hetc.weight "model.layers.0.self_attn.k_proj.weight" {transposed} : tensor<64x32xf32>
  %wv_0 = hetc.weight "model.layers.0.self_attn.v_proj.weight" {transposed} : tensor<64x32xf32>
  %wo_0 = hetc.weight "model.layers.0.self_attn.o_proj.weight" {transposed} : tensor<64x64xf32>
  %ln2_0 = hetc.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
  %wg_0 = hetc.weight "model.layers.0.mlp.gate_proj.weight" {transposed} : tensor<64x176xf32>
  %wu_0 = hetc.weight "model.layers.0.mlp.up_proj.weight" {transposed} : tensor<64x176xf32>
  %wd_0 = hetc.weight "model.layers.0.mlp.down_proj.weight" {transposed} : tensor<176x64xf32>
  %n1_0 = hetc.rms_norm %h0, %ln1_0 {epsilon = 1.0e-05 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %q_0 = hetc.linear %n1_0, %wq_0 : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k_0 = hetc.linear %n1_0, %wk_0 : (tensor<?x?x64xf32>, tensor<64x32xf32>) -> tensor<?x?x32xf32>
  %v_0 = hetc.linear %n1_0, %wv_0 : (tensor<?x?x64xf32>, tensor<64x32xf32>) -> tensor<?x?x32xf32>
  %qr_0 = hetc.rope %q_0, %position_ids, %inv_freq {head_dim = 16 : i64, heads = 4 : i64} : (tensor<?x?x64xf32>, tensor<?x?xi64>, tensor<8xf32>) -> tensor<?x?x64xf32>
  %kr_0 = hetc.rope %k_0, %position_ids, %inv_freq {head_dim = 16 : i64, heads = 2 : i64} : (tensor<?x?x32xf32>, tensor<?x?xi64>, tensor<8xf32>) -> tensor<?x?x32xf32>
  %o_0, %pk_0, %pv_0 = hetc.attention %qr_0, %kr_0, %v_0, %past_key_0, %past_value_0 {head_dim = 16 : i64, heads = 4 : i64, kv_heads = 2 : i64, scale = 2.500000e-01 : f32} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  %op_0 = hetc.linear %o_0, %wo_0 : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %r1_0 = hetc.add %h0, %op_0 : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %n2_0 = hetc.rms_norm %r1_0, %ln2_0 {epsilon = 1.0e-05 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %g_0 = hetc.linear %n2_0, %wg_0 : (tensor<?x?x64xf32>, tensor<64x176xf32>) -> tensor<?x?x176xf32>
  %u_0 = hetc.linear %n2_0, %wu_0 : (tensor<?x?x64xf32>, tensor<64x176xf32>) -> tensor<?x?x176xf32>
  %s_0 = hetc.swiglu %g_0, %u_0 : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
  %d_0 = hetc.linear %s_0, %wd_0 : (tensor<?x?x176xf32>, tensor<176x64xf32>) -> tensor<?x?x64xf32>
  %r2_0 = hetc.add %r1_0, %d_0 : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %ln1_1 = hetc.weight "model.layers.1.input_layernorm.weight" : tensor<64xf32>
  %wq_1 = hetc.weight "model.layers.1.self_attn.q_proj.weight" {transposed} : tensor<64x64xf32>
  %wk_1 = hetc.weight "model.layers.1.self_attn.k_proj.weight" {transposed} : tensor<64x32xf32>
  %wv_1 = hetc.weight "model.layers.1.self_attn.v_proj.weight" {transposed} : tensor<64x32xf32>
  %wo_1 = hetc.weight "model.layers.1.self_attn.o_proj.weight" {transposed} : tensor<64x64xf32>
  %ln2_1 = hetc.weight "model.layers.1.post_attention_layernorm.weight" : tensor<64xf32>
  %wg_1 = hetc.weight "model.layers.1.mlp.gate_proj.weight" {transposed} : tensor<64x176xf32>
  %wu_1 = hetc.weight "model.layers.1.mlp.up_proj.weight" {transposed} : tensor<64x176xf32>
  %wd_1 = hetc.weight "model.layers.1.mlp.down_proj.weight" {transposed} : tensor<176x64xf32>
  %n1_1 = hetc.rms_norm %r2_0, %ln1_1 {epsilon = 1.0e-05 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %q_1 = hetc.linear %n1_1, %wq_1 : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k_1 = hetc.linear %n1_1, %wk_1 : (tensor<?x?x64xf32>, tensor<64x32xf32>) -> tensor<?x?x32xf32>
  %v_1 = hetc.linear %n1_1, %wv_1 : (tensor<?x?x64xf32>, tensor<64x32xf32>) -> tensor<?x?x32xf32>
  %qr_1 = hetc.rope %q_1, %position_ids, %inv_freq {head_dim = 16 : i64, heads = 4 : i64} : (tensor<?x?x64xf32>, tensor<?x?xi64>, tensor<8xf32>) -> tensor<?x?x64xf32>
  %kr_1 = hetc.rope %k_1, %position_ids, %inv_freq {head_dim = 16 : i64, heads = 2 : i64} : (tensor<?x?x32xf32>, tensor<?x?xi64>, tensor<8xf32>) -> tensor<?x?x32xf32>
  %o_1, %pk_1, %pv_1 = hetc.attention %qr_1, %kr_1, %v_1, %past_key_1, %past_value_1 {head_dim = 16 : i64, heads = 4 : i64, kv_heads = 2 : i64, scale = 2.500000e-01 : f32} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
  %op_1 = hetc.linear %o_1, %wo_1 : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %r1_1 = hetc.add %r2_0, %op_1 : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %n2_1 = hetc.rms_norm %r1_1, %ln2_1 {epsilon = 1.0e-05 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %g_1 = hetc.linear %n2_1, %wg_1 : (tensor<?x?x64xf32>, tensor<64x176xf32>) -> tensor<?x?x176xf32>
  %u_1 = hetc.linear %n2_1, %wu_1 : (tensor<?x?x64xf32>, tensor<64x176xf32>) -> tensor<?x?x176xf32>
  %s_1 = hetc.swiglu %g_1, %u_1 : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
  %d_1 = hetc.linear %s_1, %wd_1 : (tensor<?x?x176xf32>, tensor<176x64xf32>) -> tensor<?x?x64xf32>
  %r2_1 = hetc.add %r1_1, %d_1 : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %lnf = hetc.weight "model.norm.weight" : tensor<64xf32>
  %wlm = hetc.weight "lm_head.weight" {transposed} : tensor<64x256xf32>
  %nf = hetc.rms_norm %r2_1, %lnf {epsilon = 1.0e-05 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %logits = hetc.lm_head %nf, %wlm : (tensor<?x?x64xf32>, tensor<64x256xf32>) -> tensor<?x?x256xf32>
  return %logits, %pk_0, %pv_0, %pk_1, %pv_1 : tensor<?x?x256xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>
}
