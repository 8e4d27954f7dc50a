// RUN: hetc-opt %s --hetc-raise-attention --canonicalize --hetc-check-raised -verify-diagnostics -split-input-file

// Cos/sin tables held as weights: hetc-opt has no weight store to read their values from, and
// says so (hetc compile reads them; see raise_attention.mlir's @rope_tables for constants).
func.func @cached_tables(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.value"}) {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x4xf32>
  %wv = hetc.weight "v_proj" : tensor<8x4xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %h, %wk : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v = hetc.linear %h, %wv : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  // cos and sin of position * inv_freq
  %ax1 = hetc.constant dense<1> : tensor<1xi64>
  %cos_cached = hetc.weight "rotary.cos_cached" : tensor<64x4xf32>
  %sin_cached = hetc.weight "rotary.sin_cached" : tensor<64x4xf32>
  // expected-error @+1 {{node 'rotary/Gather' (Gather) reads RoPE cos/sin tables that have no values to read (without a weight store, as in hetc-opt, tables must be hetc.constant)}}
  %cos = hetc.onnx.node "Gather"(%cos_cached, %pos) {node_name = "rotary/Gather"} : (tensor<64x4xf32>, tensor<?x?xi64>) -> tensor<?x?x4xf32>
  %sin = hetc.onnx.node "Gather"(%sin_cached, %pos) {node_name = "rotary/Gather_1"} : (tensor<64x4xf32>, tensor<?x?xi64>) -> tensor<?x?x4xf32>
  %cos4 = hetc.onnx.node "Unsqueeze"(%cos, %ax1) {node_name = "attn/Unsqueeze_cos4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  %sin4 = hetc.onnx.node "Unsqueeze"(%sin, %ax1) {node_name = "attn/Unsqueeze_sin4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  // heads: [B, S, heads * D] -> [B, heads, S, D]
  %q_shape = hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
  %kv_shape = hetc.constant dense<[0, 0, 1, 4]> : tensor<4xi64>
  %q3 = hetc.onnx.node "Reshape"(%q, %q_shape) {node_name = "attn/Reshape_q3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q4 = hetc.onnx.node "Transpose"(%q3) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k3 = hetc.onnx.node "Reshape"(%k, %kv_shape) {node_name = "attn/Reshape_k3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k4 = hetc.onnx.node "Transpose"(%k3) {node_name = "attn/Transpose_k4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v3 = hetc.onnx.node "Reshape"(%v, %kv_shape) {node_name = "attn/Reshape_v3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v4 = hetc.onnx.node "Transpose"(%v3) {node_name = "attn/Transpose_v4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  // rope: x * cos + rotate_half(x) * sin
  %c0 = hetc.constant dense<0> : tensor<1xi64>
  %c2 = hetc.constant dense<2> : tensor<1xi64>
  %c3 = hetc.constant dense<3> : tensor<1xi64>
  %cmax = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %q_cos = hetc.onnx.node "Mul"(%q4, %cos4) {node_name = "attn/Mul_q_cos"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_lo = hetc.onnx.node "Slice"(%q4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_q_lo"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_hi = hetc.onnx.node "Slice"(%q4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_q_hi"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_neg = hetc.onnx.node "Neg"(%q_hi) {node_name = "attn/Neg_q_neg"} : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %q_rot = hetc.onnx.node "Concat"(%q_neg, %q_lo) {node_name = "attn/Concat_q_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %q_sin = hetc.onnx.node "Mul"(%q_rot, %sin4) {node_name = "attn/Mul_q_sin"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_r = hetc.onnx.node "Add"(%q_cos, %q_sin) {node_name = "attn/Add_q_r"} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %k_cos = hetc.onnx.node "Mul"(%k4, %cos4) {node_name = "attn/Mul_k_cos"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_lo = hetc.onnx.node "Slice"(%k4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_k_lo"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_hi = hetc.onnx.node "Slice"(%k4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_k_hi"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_neg = hetc.onnx.node "Neg"(%k_hi) {node_name = "attn/Neg_k_neg"} : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %k_rot = hetc.onnx.node "Concat"(%k_neg, %k_lo) {node_name = "attn/Concat_k_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %k_sin = hetc.onnx.node "Mul"(%k_rot, %sin4) {node_name = "attn/Mul_k_sin"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_r = hetc.onnx.node "Add"(%k_cos, %k_sin) {node_name = "attn/Add_k_r"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // the KV cache
  %pk = hetc.onnx.node "Concat"(%past_k, %k_r) {node_name = "attn/Concat_pk", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %pv = hetc.onnx.node "Concat"(%past_v, %v4) {node_name = "attn/Concat_pv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // repeat_kv
  %ax2 = hetc.constant dense<2> : tensor<1xi64>
  %rep = hetc.constant dense<[1, 1, 2, 1, 1]> : tensor<5xi64>
  %rep_shape = hetc.constant dense<[0, 2, -1, 4]> : tensor<4xi64>
  %ku = hetc.onnx.node "Unsqueeze"(%pk, %ax2) {node_name = "attn/Unsqueeze_ku"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ke = hetc.onnx.node "Expand"(%ku, %rep) {node_name = "attn/Expand_ke"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %krep = hetc.onnx.node "Reshape"(%ke, %rep_shape) {node_name = "attn/Reshape_krep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vu = hetc.onnx.node "Unsqueeze"(%pv, %ax2) {node_name = "attn/Unsqueeze_vu"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ve = hetc.onnx.node "Expand"(%vu, %rep) {node_name = "attn/Expand_ve"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vrep = hetc.onnx.node "Reshape"(%ve, %rep_shape) {node_name = "attn/Reshape_vrep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  // the causal mask: key j is hidden from query i when j > past + i
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %pos_shape = hetc.onnx.node "Shape"(%pos) {node_name = "mask/Shape"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = hetc.onnx.node "Gather"(%pos_shape, %i1) {node_name = "mask/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %am_shape = hetc.onnx.node "Shape"(%attention_mask) {node_name = "mask/Shape_1"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %total = hetc.onnx.node "Gather"(%am_shape, %i1) {node_name = "mask/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %past = hetc.onnx.node "Sub"(%total, %seq) {node_name = "mask/Sub"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %keys = hetc.onnx.node "Range"(%i0, %total, %i1) {node_name = "mask/Range"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries = hetc.onnx.node "Range"(%past, %total, %i1) {node_name = "mask/Range_1"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries_col = hetc.onnx.node "Unsqueeze"(%queries, %ax1) {node_name = "mask/Unsqueeze"} : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %hidden = hetc.onnx.node "Greater"(%keys, %queries_col) {node_name = "mask/Greater"} : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %lowest = hetc.constant dense<-3.40282347E+38> : tensor<f32>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %m2 = hetc.onnx.node "Where"(%hidden, %lowest, %zero) {node_name = "mask/Where"} : (tensor<?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
  %ax01 = hetc.constant dense<[0, 1]> : tensor<2xi64>
  %mask = hetc.onnx.node "Unsqueeze"(%m2, %ax01) {node_name = "mask/Unsqueeze_1"} : (tensor<?x?xf32>, tensor<2xi64>) -> tensor<1x1x?x?xf32>
  // softmax(q k^T * scale + mask) v
  %kt = hetc.onnx.node "Transpose"(%krep) {node_name = "attn/Transpose_kt", onnx_attrs = {perm = [0, 1, 3, 2]}} : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s = hetc.onnx.node "MatMul"(%q_r, %kt) {node_name = "attn/MatMul_s"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %sqrt_d = hetc.constant dense<2.0> : tensor<f32>
  %sd = hetc.onnx.node "Div"(%s, %sqrt_d) {node_name = "attn/Div_sd"} : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %sm = hetc.onnx.node "Add"(%sd, %mask) {node_name = "attn/Add_sm"} : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = hetc.onnx.node "Softmax"(%sm) {node_name = "attn/Softmax_p", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o = hetc.onnx.node "MatMul"(%p, %vrep) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, -1]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>
}

// -----

// rotate_half with the halves swapped is not RoPE: the attention is refused at its root, the
// query heads its scores multiply, not at the cache and output nodes downstream of them.
func.func @halves_swapped(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.value"}) {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x4xf32>
  %wv = hetc.weight "v_proj" : tensor<8x4xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %h, %wk : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v = hetc.linear %h, %wv : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  // cos and sin of position * inv_freq
  %ax1 = hetc.constant dense<1> : tensor<1xi64>
  %inv = hetc.constant dense<[[[1.0], [0.01]]]> : tensor<1x2x1xf32>
  %inv_shape = hetc.constant dense<[1, 2, 1]> : tensor<3xi64>
  %inv_b = hetc.onnx.node "Expand"(%inv, %inv_shape) {node_name = "rotary/Expand"} : (tensor<1x2x1xf32>, tensor<3xi64>) -> tensor<1x2x1xf32>
  %pos_u = hetc.onnx.node "Unsqueeze"(%pos, %ax1) {node_name = "rotary/Unsqueeze"} : (tensor<?x?xi64>, tensor<1xi64>) -> tensor<?x1x?xi64>
  %pos_f = hetc.onnx.node "Cast"(%pos_u) {node_name = "rotary/Cast", onnx_attrs = {to = 1 : i64}} : (tensor<?x1x?xi64>) -> tensor<?x1x?xf32>
  %freqs = hetc.onnx.node "MatMul"(%inv_b, %pos_f) {node_name = "rotary/MatMul"} : (tensor<1x2x1xf32>, tensor<?x1x?xf32>) -> tensor<?x2x?xf32>
  %freqs_t = hetc.onnx.node "Transpose"(%freqs) {node_name = "rotary/Transpose", onnx_attrs = {perm = [0, 2, 1]}} : (tensor<?x2x?xf32>) -> tensor<?x?x2xf32>
  %emb = hetc.onnx.node "Concat"(%freqs_t, %freqs_t) {node_name = "rotary/Concat", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x4xf32>
  %cos = hetc.onnx.node "Cos"(%emb) {node_name = "rotary/Cos"} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %sin = hetc.onnx.node "Sin"(%emb) {node_name = "rotary/Sin"} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %cos4 = hetc.onnx.node "Unsqueeze"(%cos, %ax1) {node_name = "attn/Unsqueeze_cos4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  %sin4 = hetc.onnx.node "Unsqueeze"(%sin, %ax1) {node_name = "attn/Unsqueeze_sin4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  // heads: [B, S, heads * D] -> [B, heads, S, D]
  %q_shape = hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
  %kv_shape = hetc.constant dense<[0, 0, 1, 4]> : tensor<4xi64>
  %q3 = hetc.onnx.node "Reshape"(%q, %q_shape) {node_name = "attn/Reshape_q3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q4 = hetc.onnx.node "Transpose"(%q3) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k3 = hetc.onnx.node "Reshape"(%k, %kv_shape) {node_name = "attn/Reshape_k3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k4 = hetc.onnx.node "Transpose"(%k3) {node_name = "attn/Transpose_k4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v3 = hetc.onnx.node "Reshape"(%v, %kv_shape) {node_name = "attn/Reshape_v3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v4 = hetc.onnx.node "Transpose"(%v3) {node_name = "attn/Transpose_v4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  // rope: x * cos + rotate_half(x) * sin
  %c0 = hetc.constant dense<0> : tensor<1xi64>
  %c2 = hetc.constant dense<2> : tensor<1xi64>
  %c3 = hetc.constant dense<3> : tensor<1xi64>
  %cmax = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %q_cos = hetc.onnx.node "Mul"(%q4, %cos4) {node_name = "attn/Mul_q_cos"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_lo = hetc.onnx.node "Slice"(%q4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_q_lo"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_hi = hetc.onnx.node "Slice"(%q4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_q_hi"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_neg = hetc.onnx.node "Neg"(%q_hi) {node_name = "attn/Neg_q_neg"} : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %q_rot = hetc.onnx.node "Concat"(%q_lo, %q_neg) {node_name = "attn/Concat_q_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %q_sin = hetc.onnx.node "Mul"(%q_rot, %sin4) {node_name = "attn/Mul_q_sin"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_r = hetc.onnx.node "Add"(%q_cos, %q_sin) {node_name = "attn/Add_q_r"} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %k_cos = hetc.onnx.node "Mul"(%k4, %cos4) {node_name = "attn/Mul_k_cos"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_lo = hetc.onnx.node "Slice"(%k4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_k_lo"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_hi = hetc.onnx.node "Slice"(%k4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_k_hi"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_neg = hetc.onnx.node "Neg"(%k_hi) {node_name = "attn/Neg_k_neg"} : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %k_rot = hetc.onnx.node "Concat"(%k_lo, %k_neg) {node_name = "attn/Concat_k_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %k_sin = hetc.onnx.node "Mul"(%k_rot, %sin4) {node_name = "attn/Mul_k_sin"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_r = hetc.onnx.node "Add"(%k_cos, %k_sin) {node_name = "attn/Add_k_r"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // the KV cache
  %pk = hetc.onnx.node "Concat"(%past_k, %k_r) {node_name = "attn/Concat_pk", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %pv = hetc.onnx.node "Concat"(%past_v, %v4) {node_name = "attn/Concat_pv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // repeat_kv
  %ax2 = hetc.constant dense<2> : tensor<1xi64>
  %rep = hetc.constant dense<[1, 1, 2, 1, 1]> : tensor<5xi64>
  %rep_shape = hetc.constant dense<[0, 2, -1, 4]> : tensor<4xi64>
  %ku = hetc.onnx.node "Unsqueeze"(%pk, %ax2) {node_name = "attn/Unsqueeze_ku"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ke = hetc.onnx.node "Expand"(%ku, %rep) {node_name = "attn/Expand_ke"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %krep = hetc.onnx.node "Reshape"(%ke, %rep_shape) {node_name = "attn/Reshape_krep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vu = hetc.onnx.node "Unsqueeze"(%pv, %ax2) {node_name = "attn/Unsqueeze_vu"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ve = hetc.onnx.node "Expand"(%vu, %rep) {node_name = "attn/Expand_ve"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vrep = hetc.onnx.node "Reshape"(%ve, %rep_shape) {node_name = "attn/Reshape_vrep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  // the causal mask: key j is hidden from query i when j > past + i
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %pos_shape = hetc.onnx.node "Shape"(%pos) {node_name = "mask/Shape"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = hetc.onnx.node "Gather"(%pos_shape, %i1) {node_name = "mask/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %am_shape = hetc.onnx.node "Shape"(%attention_mask) {node_name = "mask/Shape_1"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %total = hetc.onnx.node "Gather"(%am_shape, %i1) {node_name = "mask/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %past = hetc.onnx.node "Sub"(%total, %seq) {node_name = "mask/Sub"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %keys = hetc.onnx.node "Range"(%i0, %total, %i1) {node_name = "mask/Range"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries = hetc.onnx.node "Range"(%past, %total, %i1) {node_name = "mask/Range_1"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries_col = hetc.onnx.node "Unsqueeze"(%queries, %ax1) {node_name = "mask/Unsqueeze"} : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %hidden = hetc.onnx.node "Greater"(%keys, %queries_col) {node_name = "mask/Greater"} : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %lowest = hetc.constant dense<-3.40282347E+38> : tensor<f32>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %m2 = hetc.onnx.node "Where"(%hidden, %lowest, %zero) {node_name = "mask/Where"} : (tensor<?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
  %ax01 = hetc.constant dense<[0, 1]> : tensor<2xi64>
  %mask = hetc.onnx.node "Unsqueeze"(%m2, %ax01) {node_name = "mask/Unsqueeze_1"} : (tensor<?x?xf32>, tensor<2xi64>) -> tensor<1x1x?x?xf32>
  // softmax(q k^T * scale + mask) v
  %kt = hetc.onnx.node "Transpose"(%krep) {node_name = "attn/Transpose_kt", onnx_attrs = {perm = [0, 1, 3, 2]}} : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s = hetc.onnx.node "MatMul"(%q_r, %kt) {node_name = "attn/MatMul_s"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %sqrt_d = hetc.constant dense<2.0> : tensor<f32>
  %sd = hetc.onnx.node "Div"(%s, %sqrt_d) {node_name = "attn/Div_sd"} : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %sm = hetc.onnx.node "Add"(%sd, %mask) {node_name = "attn/Add_sm"} : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = hetc.onnx.node "Softmax"(%sm) {node_name = "attn/Softmax_p", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  // expected-error @+1 {{node 'attn/MatMul_o' (MatMul) closes an attention hetc does not run: node 'attn/MatMul_s' (MatMul) multiplies 'attn/Add_q_r' (Add), which is not the query heads: Transpose(Reshape(q, [batch, sequence, heads, head_dim]), [0, 2, 1, 3]), rotated or not}}
  %o = hetc.onnx.node "MatMul"(%p, %vrep) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, -1]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>
}

// -----

// A mask that hides the past instead of the future is not the causal mask hetc.attention
// applies: refused, with the first query/key pair that differs (a future key it shows).
func.func @anti_causal(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.value"}) {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x4xf32>
  %wv = hetc.weight "v_proj" : tensor<8x4xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %h, %wk : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v = hetc.linear %h, %wv : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  // cos and sin of position * inv_freq
  %ax1 = hetc.constant dense<1> : tensor<1xi64>
  %inv = hetc.constant dense<[[[1.0], [0.01]]]> : tensor<1x2x1xf32>
  %inv_shape = hetc.constant dense<[1, 2, 1]> : tensor<3xi64>
  %inv_b = hetc.onnx.node "Expand"(%inv, %inv_shape) {node_name = "rotary/Expand"} : (tensor<1x2x1xf32>, tensor<3xi64>) -> tensor<1x2x1xf32>
  %pos_u = hetc.onnx.node "Unsqueeze"(%pos, %ax1) {node_name = "rotary/Unsqueeze"} : (tensor<?x?xi64>, tensor<1xi64>) -> tensor<?x1x?xi64>
  %pos_f = hetc.onnx.node "Cast"(%pos_u) {node_name = "rotary/Cast", onnx_attrs = {to = 1 : i64}} : (tensor<?x1x?xi64>) -> tensor<?x1x?xf32>
  %freqs = hetc.onnx.node "MatMul"(%inv_b, %pos_f) {node_name = "rotary/MatMul"} : (tensor<1x2x1xf32>, tensor<?x1x?xf32>) -> tensor<?x2x?xf32>
  %freqs_t = hetc.onnx.node "Transpose"(%freqs) {node_name = "rotary/Transpose", onnx_attrs = {perm = [0, 2, 1]}} : (tensor<?x2x?xf32>) -> tensor<?x?x2xf32>
  %emb = hetc.onnx.node "Concat"(%freqs_t, %freqs_t) {node_name = "rotary/Concat", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x4xf32>
  %cos = hetc.onnx.node "Cos"(%emb) {node_name = "rotary/Cos"} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %sin = hetc.onnx.node "Sin"(%emb) {node_name = "rotary/Sin"} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %cos4 = hetc.onnx.node "Unsqueeze"(%cos, %ax1) {node_name = "attn/Unsqueeze_cos4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  %sin4 = hetc.onnx.node "Unsqueeze"(%sin, %ax1) {node_name = "attn/Unsqueeze_sin4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  // heads: [B, S, heads * D] -> [B, heads, S, D]
  %q_shape = hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
  %kv_shape = hetc.constant dense<[0, 0, 1, 4]> : tensor<4xi64>
  %q3 = hetc.onnx.node "Reshape"(%q, %q_shape) {node_name = "attn/Reshape_q3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q4 = hetc.onnx.node "Transpose"(%q3) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k3 = hetc.onnx.node "Reshape"(%k, %kv_shape) {node_name = "attn/Reshape_k3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k4 = hetc.onnx.node "Transpose"(%k3) {node_name = "attn/Transpose_k4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v3 = hetc.onnx.node "Reshape"(%v, %kv_shape) {node_name = "attn/Reshape_v3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v4 = hetc.onnx.node "Transpose"(%v3) {node_name = "attn/Transpose_v4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  // rope: x * cos + rotate_half(x) * sin
  %c0 = hetc.constant dense<0> : tensor<1xi64>
  %c2 = hetc.constant dense<2> : tensor<1xi64>
  %c3 = hetc.constant dense<3> : tensor<1xi64>
  %cmax = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %q_cos = hetc.onnx.node "Mul"(%q4, %cos4) {node_name = "attn/Mul_q_cos"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_lo = hetc.onnx.node "Slice"(%q4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_q_lo"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_hi = hetc.onnx.node "Slice"(%q4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_q_hi"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_neg = hetc.onnx.node "Neg"(%q_hi) {node_name = "attn/Neg_q_neg"} : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %q_rot = hetc.onnx.node "Concat"(%q_neg, %q_lo) {node_name = "attn/Concat_q_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %q_sin = hetc.onnx.node "Mul"(%q_rot, %sin4) {node_name = "attn/Mul_q_sin"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_r = hetc.onnx.node "Add"(%q_cos, %q_sin) {node_name = "attn/Add_q_r"} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %k_cos = hetc.onnx.node "Mul"(%k4, %cos4) {node_name = "attn/Mul_k_cos"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_lo = hetc.onnx.node "Slice"(%k4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_k_lo"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_hi = hetc.onnx.node "Slice"(%k4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_k_hi"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_neg = hetc.onnx.node "Neg"(%k_hi) {node_name = "attn/Neg_k_neg"} : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %k_rot = hetc.onnx.node "Concat"(%k_neg, %k_lo) {node_name = "attn/Concat_k_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %k_sin = hetc.onnx.node "Mul"(%k_rot, %sin4) {node_name = "attn/Mul_k_sin"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_r = hetc.onnx.node "Add"(%k_cos, %k_sin) {node_name = "attn/Add_k_r"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // the KV cache
  %pk = hetc.onnx.node "Concat"(%past_k, %k_r) {node_name = "attn/Concat_pk", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %pv = hetc.onnx.node "Concat"(%past_v, %v4) {node_name = "attn/Concat_pv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // repeat_kv
  %ax2 = hetc.constant dense<2> : tensor<1xi64>
  %rep = hetc.constant dense<[1, 1, 2, 1, 1]> : tensor<5xi64>
  %rep_shape = hetc.constant dense<[0, 2, -1, 4]> : tensor<4xi64>
  %ku = hetc.onnx.node "Unsqueeze"(%pk, %ax2) {node_name = "attn/Unsqueeze_ku"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ke = hetc.onnx.node "Expand"(%ku, %rep) {node_name = "attn/Expand_ke"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %krep = hetc.onnx.node "Reshape"(%ke, %rep_shape) {node_name = "attn/Reshape_krep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vu = hetc.onnx.node "Unsqueeze"(%pv, %ax2) {node_name = "attn/Unsqueeze_vu"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ve = hetc.onnx.node "Expand"(%vu, %rep) {node_name = "attn/Expand_ve"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vrep = hetc.onnx.node "Reshape"(%ve, %rep_shape) {node_name = "attn/Reshape_vrep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  // the causal mask: key j is hidden from query i when j > past + i
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %pos_shape = hetc.onnx.node "Shape"(%pos) {node_name = "mask/Shape"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = hetc.onnx.node "Gather"(%pos_shape, %i1) {node_name = "mask/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %am_shape = hetc.onnx.node "Shape"(%attention_mask) {node_name = "mask/Shape_1"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %total = hetc.onnx.node "Gather"(%am_shape, %i1) {node_name = "mask/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %past = hetc.onnx.node "Sub"(%total, %seq) {node_name = "mask/Sub"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %keys = hetc.onnx.node "Range"(%i0, %total, %i1) {node_name = "mask/Range"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries = hetc.onnx.node "Range"(%past, %total, %i1) {node_name = "mask/Range_1"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries_col = hetc.onnx.node "Unsqueeze"(%queries, %ax1) {node_name = "mask/Unsqueeze"} : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %hidden = hetc.onnx.node "Less"(%keys, %queries_col) {node_name = "mask/Less"} : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %lowest = hetc.constant dense<-3.40282347E+38> : tensor<f32>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %m2 = hetc.onnx.node "Where"(%hidden, %lowest, %zero) {node_name = "mask/Where"} : (tensor<?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
  %ax01 = hetc.constant dense<[0, 1]> : tensor<2xi64>
  %mask = hetc.onnx.node "Unsqueeze"(%m2, %ax01) {node_name = "mask/Unsqueeze_1"} : (tensor<?x?xf32>, tensor<2xi64>) -> tensor<1x1x?x?xf32>
  // softmax(q k^T * scale + mask) v
  %kt = hetc.onnx.node "Transpose"(%krep) {node_name = "attn/Transpose_kt", onnx_attrs = {perm = [0, 1, 3, 2]}} : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s = hetc.onnx.node "MatMul"(%q_r, %kt) {node_name = "attn/MatMul_s"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %sqrt_d = hetc.constant dense<2.0> : tensor<f32>
  %sd = hetc.onnx.node "Div"(%s, %sqrt_d) {node_name = "attn/Div_sd"} : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  // expected-error @+1 {{node 'attn/Add_sm' (Add) adds an attention mask that is not the causal mask hetc.attention applies: query 0 and key 3 get 0 (for 3 new tokens after 2 cached ones)}}
  %sm = hetc.onnx.node "Add"(%sd, %mask) {node_name = "attn/Add_sm"} : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = hetc.onnx.node "Softmax"(%sm) {node_name = "attn/Softmax_p", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o = hetc.onnx.node "MatMul"(%p, %vrep) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, -1]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>
}

// -----

// Tables scaled by an attention factor (YaRN's mscale) are not a plain RoPE's: refused with what
// differs.
func.func @rope_tables_scaled(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.value"}) {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x4xf32>
  %wv = hetc.weight "v_proj" : tensor<8x4xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %h, %wk : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v = hetc.linear %h, %wv : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  // cos/sin tables [6, 4] gathered by position
  %ax1 = hetc.constant dense<1> : tensor<1xi64>
  %cos_t = hetc.constant dense<[[1.2000000476837158, 1.2000000476837158, 1.2000000476837158, 1.2000000476837158], [0.6483627557754517, 1.1999400854110718, 0.6483627557754517, 1.1999400854110718], [-0.49937620759010315, 1.19976007938385, -0.49937620759010315, 1.19976007938385], [-1.1879910230636597, 1.1994601488113403, -1.1879910230636597, 1.1994601488113403], [-0.7843723893165588, 1.199040174484253, -0.7843723893165588, 1.199040174484253], [0.34039461612701416, 1.198500394821167, 0.34039461612701416, 1.198500394821167]]> : tensor<6x4xf32>
  %sin_t = hetc.constant dense<[[0.0, 0.0, 0.0, 0.0], [1.0097652673721313, 0.011999799869954586, 1.0097652673721313, 0.011999799869954586], [1.0911569595336914, 0.023998400196433067, 1.0911569595336914, 0.023998400196433067], [0.1693440079689026, 0.035994600504636765, 0.1693440079689026, 0.035994600504636765], [-0.9081630110740662, 0.0479872040450573, -0.9081630110740662, 0.0479872040450573], [-1.1507091522216797, 0.05997500196099281, -1.1507091522216797, 0.05997500196099281]]> : tensor<6x4xf32>
  %z1 = hetc.constant dense<0> : tensor<1xi64>
  %len = hetc.constant dense<5> : tensor<1xi64>
  %cos_s = hetc.onnx.node "Slice"(%cos_t, %z1, %len) {node_name = "rotary/Slice"} : (tensor<6x4xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4xf32>
  // expected-error @+1 {{node 'rotary/Gather' (Gather) reads RoPE cos/sin tables that hold cos 1.2 and sin 0 at position 0, column 0; a RoPE table holds 1 and 0 there (a scaled table is not supported)}}
  %cos = hetc.onnx.node "Gather"(%cos_s, %pos) {node_name = "rotary/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<?x4xf32>, tensor<?x?xi64>) -> tensor<?x?x4xf32>
  %sin = hetc.onnx.node "Gather"(%sin_t, %pos) {node_name = "rotary/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<6x4xf32>, tensor<?x?xi64>) -> tensor<?x?x4xf32>
  %cos4 = hetc.onnx.node "Unsqueeze"(%cos, %ax1) {node_name = "attn/Unsqueeze_cos4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  %sin4 = hetc.onnx.node "Unsqueeze"(%sin, %ax1) {node_name = "attn/Unsqueeze_sin4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  // heads: [B, S, heads * D] -> [B, heads, S, D]
  %q_shape = hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
  %kv_shape = hetc.constant dense<[0, 0, 1, 4]> : tensor<4xi64>
  %q3 = hetc.onnx.node "Reshape"(%q, %q_shape) {node_name = "attn/Reshape_q3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q4 = hetc.onnx.node "Transpose"(%q3) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k3 = hetc.onnx.node "Reshape"(%k, %kv_shape) {node_name = "attn/Reshape_k3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k4 = hetc.onnx.node "Transpose"(%k3) {node_name = "attn/Transpose_k4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v3 = hetc.onnx.node "Reshape"(%v, %kv_shape) {node_name = "attn/Reshape_v3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v4 = hetc.onnx.node "Transpose"(%v3) {node_name = "attn/Transpose_v4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  // rope: x * cos + rotate_half(x) * sin
  %c0 = hetc.constant dense<0> : tensor<1xi64>
  %c2 = hetc.constant dense<2> : tensor<1xi64>
  %c3 = hetc.constant dense<3> : tensor<1xi64>
  %cmax = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %q_cos = hetc.onnx.node "Mul"(%q4, %cos4) {node_name = "attn/Mul_q_cos"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_lo = hetc.onnx.node "Slice"(%q4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_q_lo"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_hi = hetc.onnx.node "Slice"(%q4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_q_hi"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_neg = hetc.onnx.node "Neg"(%q_hi) {node_name = "attn/Neg_q_neg"} : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %q_rot = hetc.onnx.node "Concat"(%q_neg, %q_lo) {node_name = "attn/Concat_q_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %q_sin = hetc.onnx.node "Mul"(%q_rot, %sin4) {node_name = "attn/Mul_q_sin"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_r = hetc.onnx.node "Add"(%q_cos, %q_sin) {node_name = "attn/Add_q_r"} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %k_cos = hetc.onnx.node "Mul"(%k4, %cos4) {node_name = "attn/Mul_k_cos"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_lo = hetc.onnx.node "Slice"(%k4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_k_lo"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_hi = hetc.onnx.node "Slice"(%k4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_k_hi"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_neg = hetc.onnx.node "Neg"(%k_hi) {node_name = "attn/Neg_k_neg"} : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %k_rot = hetc.onnx.node "Concat"(%k_neg, %k_lo) {node_name = "attn/Concat_k_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %k_sin = hetc.onnx.node "Mul"(%k_rot, %sin4) {node_name = "attn/Mul_k_sin"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_r = hetc.onnx.node "Add"(%k_cos, %k_sin) {node_name = "attn/Add_k_r"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // the KV cache
  %pk = hetc.onnx.node "Concat"(%past_k, %k_r) {node_name = "attn/Concat_pk", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %pv = hetc.onnx.node "Concat"(%past_v, %v4) {node_name = "attn/Concat_pv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // repeat_kv
  %ax2 = hetc.constant dense<2> : tensor<1xi64>
  %rep = hetc.constant dense<[1, 1, 2, 1, 1]> : tensor<5xi64>
  %rep_shape = hetc.constant dense<[0, 2, -1, 4]> : tensor<4xi64>
  %ku = hetc.onnx.node "Unsqueeze"(%pk, %ax2) {node_name = "attn/Unsqueeze_ku"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ke = hetc.onnx.node "Expand"(%ku, %rep) {node_name = "attn/Expand_ke"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %krep = hetc.onnx.node "Reshape"(%ke, %rep_shape) {node_name = "attn/Reshape_krep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vu = hetc.onnx.node "Unsqueeze"(%pv, %ax2) {node_name = "attn/Unsqueeze_vu"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ve = hetc.onnx.node "Expand"(%vu, %rep) {node_name = "attn/Expand_ve"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vrep = hetc.onnx.node "Reshape"(%ve, %rep_shape) {node_name = "attn/Reshape_vrep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  // the causal mask: key j is hidden from query i when j > past + i
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %pos_shape = hetc.onnx.node "Shape"(%pos) {node_name = "mask/Shape"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = hetc.onnx.node "Gather"(%pos_shape, %i1) {node_name = "mask/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %am_shape = hetc.onnx.node "Shape"(%attention_mask) {node_name = "mask/Shape_1"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %total = hetc.onnx.node "Gather"(%am_shape, %i1) {node_name = "mask/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %past = hetc.onnx.node "Sub"(%total, %seq) {node_name = "mask/Sub"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %keys = hetc.onnx.node "Range"(%i0, %total, %i1) {node_name = "mask/Range"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries = hetc.onnx.node "Range"(%past, %total, %i1) {node_name = "mask/Range_1"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries_col = hetc.onnx.node "Unsqueeze"(%queries, %ax1) {node_name = "mask/Unsqueeze"} : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %hidden = hetc.onnx.node "Greater"(%keys, %queries_col) {node_name = "mask/Greater"} : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %lowest = hetc.constant dense<-3.40282347E+38> : tensor<f32>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %m2 = hetc.onnx.node "Where"(%hidden, %lowest, %zero) {node_name = "mask/Where"} : (tensor<?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
  %ax01 = hetc.constant dense<[0, 1]> : tensor<2xi64>
  %mask = hetc.onnx.node "Unsqueeze"(%m2, %ax01) {node_name = "mask/Unsqueeze_1"} : (tensor<?x?xf32>, tensor<2xi64>) -> tensor<1x1x?x?xf32>
  // softmax(q k^T * scale + mask) v
  %kt = hetc.onnx.node "Transpose"(%krep) {node_name = "attn/Transpose_kt", onnx_attrs = {perm = [0, 1, 3, 2]}} : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s = hetc.onnx.node "MatMul"(%q_r, %kt) {node_name = "attn/MatMul_s"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %sqrt_d = hetc.constant dense<2.0> : tensor<f32>
  %sd = hetc.onnx.node "Div"(%s, %sqrt_d) {node_name = "attn/Div_sd"} : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %sm = hetc.onnx.node "Add"(%sd, %mask) {node_name = "attn/Add_sm"} : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = hetc.onnx.node "Softmax"(%sm) {node_name = "attn/Softmax_p", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o = hetc.onnx.node "MatMul"(%p, %vrep) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, -1]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>
}


// -----

// Tables of interleaved pairs (GPT-J) read by a rotate-half rotation: the halves differ.
func.func @rope_tables_interleaved(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.value"}) {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x4xf32>
  %wv = hetc.weight "v_proj" : tensor<8x4xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %h, %wk : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v = hetc.linear %h, %wv : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  // cos/sin tables [6, 4] gathered by position
  %ax1 = hetc.constant dense<1> : tensor<1xi64>
  %cos_t = hetc.constant dense<[[1.0, 1.0, 1.0, 1.0], [0.5403022766113281, 0.5403022766113281, 0.9999499917030334, 0.9999499917030334], [-0.41614681482315063, -0.41614681482315063, 0.9998000264167786, 0.9998000264167786], [-0.9899924993515015, -0.9899924993515015, 0.9995500445365906, 0.9995500445365906], [-0.6536436080932617, -0.6536436080932617, 0.9992001056671143, 0.9992001056671143], [0.28366217017173767, 0.28366217017173767, 0.9987502694129944, 0.9987502694129944]]> : tensor<6x4xf32>
  %sin_t = hetc.constant dense<[[0.0, 0.0, 0.0, 0.0], [0.8414710164070129, 0.8414710164070129, 0.009999833069741726, 0.009999833069741726], [0.9092974066734314, 0.9092974066734314, 0.019998665899038315, 0.019998665899038315], [0.14112000167369843, 0.14112000167369843, 0.029995499178767204, 0.029995499178767204], [-0.756802499294281, -0.756802499294281, 0.03998933359980583, 0.03998933359980583], [-0.9589242935180664, -0.9589242935180664, 0.04997916519641876, 0.04997916519641876]]> : tensor<6x4xf32>
  %z1 = hetc.constant dense<0> : tensor<1xi64>
  %len = hetc.constant dense<5> : tensor<1xi64>
  %cos_s = hetc.onnx.node "Slice"(%cos_t, %z1, %len) {node_name = "rotary/Slice"} : (tensor<6x4xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4xf32>
  // expected-error @+1 {{node 'rotary/Gather' (Gather) reads RoPE cos/sin tables that differ between their two halves at position 1, column 0 by more than 4 ulps: not Concat(f, f) of rotate-half RoPE}}
  %cos = hetc.onnx.node "Gather"(%cos_s, %pos) {node_name = "rotary/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<?x4xf32>, tensor<?x?xi64>) -> tensor<?x?x4xf32>
  %sin = hetc.onnx.node "Gather"(%sin_t, %pos) {node_name = "rotary/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<6x4xf32>, tensor<?x?xi64>) -> tensor<?x?x4xf32>
  %cos4 = hetc.onnx.node "Unsqueeze"(%cos, %ax1) {node_name = "attn/Unsqueeze_cos4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  %sin4 = hetc.onnx.node "Unsqueeze"(%sin, %ax1) {node_name = "attn/Unsqueeze_sin4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  // heads: [B, S, heads * D] -> [B, heads, S, D]
  %q_shape = hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
  %kv_shape = hetc.constant dense<[0, 0, 1, 4]> : tensor<4xi64>
  %q3 = hetc.onnx.node "Reshape"(%q, %q_shape) {node_name = "attn/Reshape_q3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q4 = hetc.onnx.node "Transpose"(%q3) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k3 = hetc.onnx.node "Reshape"(%k, %kv_shape) {node_name = "attn/Reshape_k3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k4 = hetc.onnx.node "Transpose"(%k3) {node_name = "attn/Transpose_k4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v3 = hetc.onnx.node "Reshape"(%v, %kv_shape) {node_name = "attn/Reshape_v3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v4 = hetc.onnx.node "Transpose"(%v3) {node_name = "attn/Transpose_v4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  // rope: x * cos + rotate_half(x) * sin
  %c0 = hetc.constant dense<0> : tensor<1xi64>
  %c2 = hetc.constant dense<2> : tensor<1xi64>
  %c3 = hetc.constant dense<3> : tensor<1xi64>
  %cmax = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %q_cos = hetc.onnx.node "Mul"(%q4, %cos4) {node_name = "attn/Mul_q_cos"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_lo = hetc.onnx.node "Slice"(%q4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_q_lo"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_hi = hetc.onnx.node "Slice"(%q4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_q_hi"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_neg = hetc.onnx.node "Neg"(%q_hi) {node_name = "attn/Neg_q_neg"} : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %q_rot = hetc.onnx.node "Concat"(%q_neg, %q_lo) {node_name = "attn/Concat_q_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %q_sin = hetc.onnx.node "Mul"(%q_rot, %sin4) {node_name = "attn/Mul_q_sin"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_r = hetc.onnx.node "Add"(%q_cos, %q_sin) {node_name = "attn/Add_q_r"} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %k_cos = hetc.onnx.node "Mul"(%k4, %cos4) {node_name = "attn/Mul_k_cos"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_lo = hetc.onnx.node "Slice"(%k4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_k_lo"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_hi = hetc.onnx.node "Slice"(%k4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_k_hi"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_neg = hetc.onnx.node "Neg"(%k_hi) {node_name = "attn/Neg_k_neg"} : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %k_rot = hetc.onnx.node "Concat"(%k_neg, %k_lo) {node_name = "attn/Concat_k_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %k_sin = hetc.onnx.node "Mul"(%k_rot, %sin4) {node_name = "attn/Mul_k_sin"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_r = hetc.onnx.node "Add"(%k_cos, %k_sin) {node_name = "attn/Add_k_r"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // the KV cache
  %pk = hetc.onnx.node "Concat"(%past_k, %k_r) {node_name = "attn/Concat_pk", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %pv = hetc.onnx.node "Concat"(%past_v, %v4) {node_name = "attn/Concat_pv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // repeat_kv
  %ax2 = hetc.constant dense<2> : tensor<1xi64>
  %rep = hetc.constant dense<[1, 1, 2, 1, 1]> : tensor<5xi64>
  %rep_shape = hetc.constant dense<[0, 2, -1, 4]> : tensor<4xi64>
  %ku = hetc.onnx.node "Unsqueeze"(%pk, %ax2) {node_name = "attn/Unsqueeze_ku"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ke = hetc.onnx.node "Expand"(%ku, %rep) {node_name = "attn/Expand_ke"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %krep = hetc.onnx.node "Reshape"(%ke, %rep_shape) {node_name = "attn/Reshape_krep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vu = hetc.onnx.node "Unsqueeze"(%pv, %ax2) {node_name = "attn/Unsqueeze_vu"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ve = hetc.onnx.node "Expand"(%vu, %rep) {node_name = "attn/Expand_ve"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vrep = hetc.onnx.node "Reshape"(%ve, %rep_shape) {node_name = "attn/Reshape_vrep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  // the causal mask: key j is hidden from query i when j > past + i
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %pos_shape = hetc.onnx.node "Shape"(%pos) {node_name = "mask/Shape"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = hetc.onnx.node "Gather"(%pos_shape, %i1) {node_name = "mask/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %am_shape = hetc.onnx.node "Shape"(%attention_mask) {node_name = "mask/Shape_1"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %total = hetc.onnx.node "Gather"(%am_shape, %i1) {node_name = "mask/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %past = hetc.onnx.node "Sub"(%total, %seq) {node_name = "mask/Sub"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %keys = hetc.onnx.node "Range"(%i0, %total, %i1) {node_name = "mask/Range"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries = hetc.onnx.node "Range"(%past, %total, %i1) {node_name = "mask/Range_1"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries_col = hetc.onnx.node "Unsqueeze"(%queries, %ax1) {node_name = "mask/Unsqueeze"} : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %hidden = hetc.onnx.node "Greater"(%keys, %queries_col) {node_name = "mask/Greater"} : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %lowest = hetc.constant dense<-3.40282347E+38> : tensor<f32>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %m2 = hetc.onnx.node "Where"(%hidden, %lowest, %zero) {node_name = "mask/Where"} : (tensor<?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
  %ax01 = hetc.constant dense<[0, 1]> : tensor<2xi64>
  %mask = hetc.onnx.node "Unsqueeze"(%m2, %ax01) {node_name = "mask/Unsqueeze_1"} : (tensor<?x?xf32>, tensor<2xi64>) -> tensor<1x1x?x?xf32>
  // softmax(q k^T * scale + mask) v
  %kt = hetc.onnx.node "Transpose"(%krep) {node_name = "attn/Transpose_kt", onnx_attrs = {perm = [0, 1, 3, 2]}} : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s = hetc.onnx.node "MatMul"(%q_r, %kt) {node_name = "attn/MatMul_s"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %sqrt_d = hetc.constant dense<2.0> : tensor<f32>
  %sd = hetc.onnx.node "Div"(%s, %sqrt_d) {node_name = "attn/Div_sd"} : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %sm = hetc.onnx.node "Add"(%sd, %mask) {node_name = "attn/Add_sm"} : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = hetc.onnx.node "Softmax"(%sm) {node_name = "attn/Softmax_p", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o = hetc.onnx.node "MatMul"(%p, %vrep) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, -1]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>
}


// -----

// ONNX Runtime's MultiHeadAttention with neither an attention_bias nor unidirectional = 1 attends
// to every key: not a decoder's attention.
func.func @mha_not_causal(%q: tensor<?x?x8xf32>, %k: tensor<?x?x8xf32>, %v: tensor<?x?x8xf32>, %past_k: tensor<?x2x?x4xf32>, %past_v: tensor<?x2x?x4xf32>)
    -> (tensor<*xf32> {hetc.name = "out"}, tensor<*xf32> {hetc.name = "present.0.key"}, tensor<*xf32> {hetc.name = "present.0.value"}) {
  %none = hetc.onnx.none
  // expected-error @+1 {{node 'mha' (MultiHeadAttention) attends without a causal mask (no attention_bias, unidirectional = 0), which is not a decoder's attention}}
  %a:3 = hetc.onnx.node "MultiHeadAttention"(%q, %k, %v, %none, %none, %none, %past_k, %past_v) {node_name = "mha", onnx_attrs = {num_heads = 2 : i64}} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, none, none, none, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %a#0, %a#1, %a#2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// A padding term taken from the first sequence's attention_mask and applied to the whole batch:
// right for one sequence, wrong for a batch whose first sequence is left-padded. The batch-of-two
// sample shows it.
func.func @padding_from_the_first_row(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.value"}) {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x4xf32>
  %wv = hetc.weight "v_proj" : tensor<8x4xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %h, %wk : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v = hetc.linear %h, %wv : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  // cos and sin of position * inv_freq
  %ax1 = hetc.constant dense<1> : tensor<1xi64>
  %inv = hetc.constant dense<[[[1.0], [0.01]]]> : tensor<1x2x1xf32>
  %inv_shape = hetc.constant dense<[1, 2, 1]> : tensor<3xi64>
  %inv_b = hetc.onnx.node "Expand"(%inv, %inv_shape) {node_name = "rotary/Expand"} : (tensor<1x2x1xf32>, tensor<3xi64>) -> tensor<1x2x1xf32>
  %pos_u = hetc.onnx.node "Unsqueeze"(%pos, %ax1) {node_name = "rotary/Unsqueeze"} : (tensor<?x?xi64>, tensor<1xi64>) -> tensor<?x1x?xi64>
  %pos_f = hetc.onnx.node "Cast"(%pos_u) {node_name = "rotary/Cast", onnx_attrs = {to = 1 : i64}} : (tensor<?x1x?xi64>) -> tensor<?x1x?xf32>
  %freqs = hetc.onnx.node "MatMul"(%inv_b, %pos_f) {node_name = "rotary/MatMul"} : (tensor<1x2x1xf32>, tensor<?x1x?xf32>) -> tensor<?x2x?xf32>
  %freqs_t = hetc.onnx.node "Transpose"(%freqs) {node_name = "rotary/Transpose", onnx_attrs = {perm = [0, 2, 1]}} : (tensor<?x2x?xf32>) -> tensor<?x?x2xf32>
  %emb = hetc.onnx.node "Concat"(%freqs_t, %freqs_t) {node_name = "rotary/Concat", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x4xf32>
  %cos = hetc.onnx.node "Cos"(%emb) {node_name = "rotary/Cos"} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %sin = hetc.onnx.node "Sin"(%emb) {node_name = "rotary/Sin"} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %cos4 = hetc.onnx.node "Unsqueeze"(%cos, %ax1) {node_name = "attn/Unsqueeze_cos4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  %sin4 = hetc.onnx.node "Unsqueeze"(%sin, %ax1) {node_name = "attn/Unsqueeze_sin4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  // heads: [B, S, heads * D] -> [B, heads, S, D]
  %q_shape = hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
  %kv_shape = hetc.constant dense<[0, 0, 1, 4]> : tensor<4xi64>
  %q3 = hetc.onnx.node "Reshape"(%q, %q_shape) {node_name = "attn/Reshape_q3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q4 = hetc.onnx.node "Transpose"(%q3) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k3 = hetc.onnx.node "Reshape"(%k, %kv_shape) {node_name = "attn/Reshape_k3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k4 = hetc.onnx.node "Transpose"(%k3) {node_name = "attn/Transpose_k4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v3 = hetc.onnx.node "Reshape"(%v, %kv_shape) {node_name = "attn/Reshape_v3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v4 = hetc.onnx.node "Transpose"(%v3) {node_name = "attn/Transpose_v4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  // rope: x * cos + rotate_half(x) * sin
  %c0 = hetc.constant dense<0> : tensor<1xi64>
  %c2 = hetc.constant dense<2> : tensor<1xi64>
  %c3 = hetc.constant dense<3> : tensor<1xi64>
  %cmax = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %q_cos = hetc.onnx.node "Mul"(%q4, %cos4) {node_name = "attn/Mul_q_cos"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_lo = hetc.onnx.node "Slice"(%q4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_q_lo"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_hi = hetc.onnx.node "Slice"(%q4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_q_hi"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_neg = hetc.onnx.node "Neg"(%q_hi) {node_name = "attn/Neg_q_neg"} : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %q_rot = hetc.onnx.node "Concat"(%q_neg, %q_lo) {node_name = "attn/Concat_q_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %q_sin = hetc.onnx.node "Mul"(%q_rot, %sin4) {node_name = "attn/Mul_q_sin"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_r = hetc.onnx.node "Add"(%q_cos, %q_sin) {node_name = "attn/Add_q_r"} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %k_cos = hetc.onnx.node "Mul"(%k4, %cos4) {node_name = "attn/Mul_k_cos"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_lo = hetc.onnx.node "Slice"(%k4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_k_lo"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_hi = hetc.onnx.node "Slice"(%k4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_k_hi"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_neg = hetc.onnx.node "Neg"(%k_hi) {node_name = "attn/Neg_k_neg"} : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %k_rot = hetc.onnx.node "Concat"(%k_neg, %k_lo) {node_name = "attn/Concat_k_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %k_sin = hetc.onnx.node "Mul"(%k_rot, %sin4) {node_name = "attn/Mul_k_sin"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_r = hetc.onnx.node "Add"(%k_cos, %k_sin) {node_name = "attn/Add_k_r"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // the KV cache
  %pk = hetc.onnx.node "Concat"(%past_k, %k_r) {node_name = "attn/Concat_pk", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %pv = hetc.onnx.node "Concat"(%past_v, %v4) {node_name = "attn/Concat_pv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // repeat_kv
  %ax2 = hetc.constant dense<2> : tensor<1xi64>
  %rep = hetc.constant dense<[1, 1, 2, 1, 1]> : tensor<5xi64>
  %rep_shape = hetc.constant dense<[0, 2, -1, 4]> : tensor<4xi64>
  %ku = hetc.onnx.node "Unsqueeze"(%pk, %ax2) {node_name = "attn/Unsqueeze_ku"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ke = hetc.onnx.node "Expand"(%ku, %rep) {node_name = "attn/Expand_ke"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %krep = hetc.onnx.node "Reshape"(%ke, %rep_shape) {node_name = "attn/Reshape_krep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vu = hetc.onnx.node "Unsqueeze"(%pv, %ax2) {node_name = "attn/Unsqueeze_vu"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ve = hetc.onnx.node "Expand"(%vu, %rep) {node_name = "attn/Expand_ve"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vrep = hetc.onnx.node "Reshape"(%ve, %rep_shape) {node_name = "attn/Reshape_vrep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  // the causal mask: key j is hidden from query i when j > past + i
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %pos_shape = hetc.onnx.node "Shape"(%pos) {node_name = "mask/Shape"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = hetc.onnx.node "Gather"(%pos_shape, %i1) {node_name = "mask/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %am_shape = hetc.onnx.node "Shape"(%attention_mask) {node_name = "mask/Shape_1"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %total = hetc.onnx.node "Gather"(%am_shape, %i1) {node_name = "mask/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %past = hetc.onnx.node "Sub"(%total, %seq) {node_name = "mask/Sub"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %keys = hetc.onnx.node "Range"(%i0, %total, %i1) {node_name = "mask/Range"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries = hetc.onnx.node "Range"(%past, %total, %i1) {node_name = "mask/Range_1"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries_col = hetc.onnx.node "Unsqueeze"(%queries, %ax1) {node_name = "mask/Unsqueeze"} : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %hidden = hetc.onnx.node "Greater"(%keys, %queries_col) {node_name = "mask/Greater"} : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %lowest = hetc.constant dense<-3.40282347E+38> : tensor<f32>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %m2 = hetc.onnx.node "Where"(%hidden, %lowest, %zero) {node_name = "mask/Where"} : (tensor<?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
  %ax01 = hetc.constant dense<[0, 1]> : tensor<2xi64>
  %mask = hetc.onnx.node "Unsqueeze"(%m2, %ax01) {node_name = "mask/Unsqueeze_1"} : (tensor<?x?xf32>, tensor<2xi64>) -> tensor<1x1x?x?xf32>
  // The padding term read from the first sequence's attention_mask only, applied to every one.
  %s0 = hetc.constant dense<0> : tensor<1xi64>
  %s1 = hetc.constant dense<1> : tensor<1xi64>
  %am0 = hetc.onnx.node "Slice"(%attention_mask, %s0, %s1, %s0) {node_name = "mask/Slice_row0"} : (tensor<?x?xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x?xi64>
  %padq = hetc.onnx.node "Equal"(%am0, %i0) {node_name = "mask/Equal_pad"} : (tensor<1x?xi64>, tensor<i64>) -> tensor<1x?xi1>
  %padv = hetc.onnx.node "Where"(%padq, %lowest, %zero) {node_name = "mask/Where_pad"} : (tensor<1x?xi1>, tensor<f32>, tensor<f32>) -> tensor<1x?xf32>
  %ax12 = hetc.constant dense<[1, 2]> : tensor<2xi64>
  %pad4 = hetc.onnx.node "Unsqueeze"(%padv, %ax12) {node_name = "mask/Unsqueeze_pad"} : (tensor<1x?xf32>, tensor<2xi64>) -> tensor<1x1x1x?xf32>
  %maskp = hetc.onnx.node "Add"(%mask, %pad4) {node_name = "mask/Add_pad"} : (tensor<1x1x?x?xf32>, tensor<1x1x1x?xf32>) -> tensor<1x1x?x?xf32>
  // softmax(q k^T * scale + mask) v
  %kt = hetc.onnx.node "Transpose"(%krep) {node_name = "attn/Transpose_kt", onnx_attrs = {perm = [0, 1, 3, 2]}} : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s = hetc.onnx.node "MatMul"(%q_r, %kt) {node_name = "attn/MatMul_s"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %sqrt_d = hetc.constant dense<2.0> : tensor<f32>
  %sd = hetc.onnx.node "Div"(%s, %sqrt_d) {node_name = "attn/Div_sd"} : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  // expected-error @+1 {{node 'attn/Add_sm' (Add) adds an attention mask that is neither causal nor a sliding window: sequence 0, query 1 sees key 1 (for 3 new tokens after 2 cached ones, a batch of 2, the first left-padded by 1)}}
  %sm = hetc.onnx.node "Add"(%sd, %maskp) {node_name = "attn/Add_sm"} : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = hetc.onnx.node "Softmax"(%sm) {node_name = "attn/Softmax_p", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o = hetc.onnx.node "MatMul"(%p, %vrep) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, -1]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>
}


// -----

// Not attention hetc can serve: the output Reshape puts q_len first and the batch second.
func.func @batch_and_sequence_swapped(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.value"}) {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x4xf32>
  %wv = hetc.weight "v_proj" : tensor<8x4xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %h, %wk : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v = hetc.linear %h, %wv : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  // cos and sin of position * inv_freq
  %ax1 = hetc.constant dense<1> : tensor<1xi64>
  %inv = hetc.constant dense<[[[1.0], [0.01]]]> : tensor<1x2x1xf32>
  %inv_shape = hetc.constant dense<[1, 2, 1]> : tensor<3xi64>
  %inv_b = hetc.onnx.node "Expand"(%inv, %inv_shape) {node_name = "rotary/Expand"} : (tensor<1x2x1xf32>, tensor<3xi64>) -> tensor<1x2x1xf32>
  %pos_u = hetc.onnx.node "Unsqueeze"(%pos, %ax1) {node_name = "rotary/Unsqueeze"} : (tensor<?x?xi64>, tensor<1xi64>) -> tensor<?x1x?xi64>
  %pos_f = hetc.onnx.node "Cast"(%pos_u) {node_name = "rotary/Cast", onnx_attrs = {to = 1 : i64}} : (tensor<?x1x?xi64>) -> tensor<?x1x?xf32>
  %freqs = hetc.onnx.node "MatMul"(%inv_b, %pos_f) {node_name = "rotary/MatMul"} : (tensor<1x2x1xf32>, tensor<?x1x?xf32>) -> tensor<?x2x?xf32>
  %freqs_t = hetc.onnx.node "Transpose"(%freqs) {node_name = "rotary/Transpose", onnx_attrs = {perm = [0, 2, 1]}} : (tensor<?x2x?xf32>) -> tensor<?x?x2xf32>
  %emb = hetc.onnx.node "Concat"(%freqs_t, %freqs_t) {node_name = "rotary/Concat", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x4xf32>
  %cos = hetc.onnx.node "Cos"(%emb) {node_name = "rotary/Cos"} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %sin = hetc.onnx.node "Sin"(%emb) {node_name = "rotary/Sin"} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %cos4 = hetc.onnx.node "Unsqueeze"(%cos, %ax1) {node_name = "attn/Unsqueeze_cos4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  %sin4 = hetc.onnx.node "Unsqueeze"(%sin, %ax1) {node_name = "attn/Unsqueeze_sin4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  // heads: [B, S, heads * D] -> [B, heads, S, D]
  %q_shape = hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
  %kv_shape = hetc.constant dense<[0, 0, 1, 4]> : tensor<4xi64>
  %q3 = hetc.onnx.node "Reshape"(%q, %q_shape) {node_name = "attn/Reshape_q3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q4 = hetc.onnx.node "Transpose"(%q3) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k3 = hetc.onnx.node "Reshape"(%k, %kv_shape) {node_name = "attn/Reshape_k3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k4 = hetc.onnx.node "Transpose"(%k3) {node_name = "attn/Transpose_k4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v3 = hetc.onnx.node "Reshape"(%v, %kv_shape) {node_name = "attn/Reshape_v3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v4 = hetc.onnx.node "Transpose"(%v3) {node_name = "attn/Transpose_v4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  // rope: x * cos + rotate_half(x) * sin
  %c0 = hetc.constant dense<0> : tensor<1xi64>
  %c2 = hetc.constant dense<2> : tensor<1xi64>
  %c3 = hetc.constant dense<3> : tensor<1xi64>
  %cmax = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %q_cos = hetc.onnx.node "Mul"(%q4, %cos4) {node_name = "attn/Mul_q_cos"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_lo = hetc.onnx.node "Slice"(%q4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_q_lo"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_hi = hetc.onnx.node "Slice"(%q4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_q_hi"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_neg = hetc.onnx.node "Neg"(%q_hi) {node_name = "attn/Neg_q_neg"} : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %q_rot = hetc.onnx.node "Concat"(%q_neg, %q_lo) {node_name = "attn/Concat_q_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %q_sin = hetc.onnx.node "Mul"(%q_rot, %sin4) {node_name = "attn/Mul_q_sin"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_r = hetc.onnx.node "Add"(%q_cos, %q_sin) {node_name = "attn/Add_q_r"} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %k_cos = hetc.onnx.node "Mul"(%k4, %cos4) {node_name = "attn/Mul_k_cos"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_lo = hetc.onnx.node "Slice"(%k4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_k_lo"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_hi = hetc.onnx.node "Slice"(%k4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_k_hi"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_neg = hetc.onnx.node "Neg"(%k_hi) {node_name = "attn/Neg_k_neg"} : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %k_rot = hetc.onnx.node "Concat"(%k_neg, %k_lo) {node_name = "attn/Concat_k_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %k_sin = hetc.onnx.node "Mul"(%k_rot, %sin4) {node_name = "attn/Mul_k_sin"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_r = hetc.onnx.node "Add"(%k_cos, %k_sin) {node_name = "attn/Add_k_r"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // the KV cache
  %pk = hetc.onnx.node "Concat"(%past_k, %k_r) {node_name = "attn/Concat_pk", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %pv = hetc.onnx.node "Concat"(%past_v, %v4) {node_name = "attn/Concat_pv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // repeat_kv
  %ax2 = hetc.constant dense<2> : tensor<1xi64>
  %rep = hetc.constant dense<[1, 1, 2, 1, 1]> : tensor<5xi64>
  %rep_shape = hetc.constant dense<[0, 2, -1, 4]> : tensor<4xi64>
  %ku = hetc.onnx.node "Unsqueeze"(%pk, %ax2) {node_name = "attn/Unsqueeze_ku"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ke = hetc.onnx.node "Expand"(%ku, %rep) {node_name = "attn/Expand_ke"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %krep = hetc.onnx.node "Reshape"(%ke, %rep_shape) {node_name = "attn/Reshape_krep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vu = hetc.onnx.node "Unsqueeze"(%pv, %ax2) {node_name = "attn/Unsqueeze_vu"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ve = hetc.onnx.node "Expand"(%vu, %rep) {node_name = "attn/Expand_ve"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vrep = hetc.onnx.node "Reshape"(%ve, %rep_shape) {node_name = "attn/Reshape_vrep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  // the causal mask: key j is hidden from query i when j > past + i
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %pos_shape = hetc.onnx.node "Shape"(%pos) {node_name = "mask/Shape"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = hetc.onnx.node "Gather"(%pos_shape, %i1) {node_name = "mask/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %am_shape = hetc.onnx.node "Shape"(%attention_mask) {node_name = "mask/Shape_1"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %total = hetc.onnx.node "Gather"(%am_shape, %i1) {node_name = "mask/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %past = hetc.onnx.node "Sub"(%total, %seq) {node_name = "mask/Sub"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %keys = hetc.onnx.node "Range"(%i0, %total, %i1) {node_name = "mask/Range"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries = hetc.onnx.node "Range"(%past, %total, %i1) {node_name = "mask/Range_1"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries_col = hetc.onnx.node "Unsqueeze"(%queries, %ax1) {node_name = "mask/Unsqueeze"} : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %hidden = hetc.onnx.node "Greater"(%keys, %queries_col) {node_name = "mask/Greater"} : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %lowest = hetc.constant dense<-3.40282347E+38> : tensor<f32>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %m2 = hetc.onnx.node "Where"(%hidden, %lowest, %zero) {node_name = "mask/Where"} : (tensor<?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
  %ax01 = hetc.constant dense<[0, 1]> : tensor<2xi64>
  %mask = hetc.onnx.node "Unsqueeze"(%m2, %ax01) {node_name = "mask/Unsqueeze_1"} : (tensor<?x?xf32>, tensor<2xi64>) -> tensor<1x1x?x?xf32>
  // softmax(q k^T * scale + mask) v
  %kt = hetc.onnx.node "Transpose"(%krep) {node_name = "attn/Transpose_kt", onnx_attrs = {perm = [0, 1, 3, 2]}} : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s = hetc.onnx.node "MatMul"(%q_r, %kt) {node_name = "attn/MatMul_s"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %sqrt_d = hetc.constant dense<2.0> : tensor<f32>
  %sd = hetc.onnx.node "Div"(%s, %sqrt_d) {node_name = "attn/Div_sd"} : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %sm = hetc.onnx.node "Add"(%sd, %mask) {node_name = "attn/Add_sm"} : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = hetc.onnx.node "Softmax"(%sm) {node_name = "attn/Softmax_p", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  // expected-error @+1 {{node 'attn/MatMul_o' (MatMul) closes an attention hetc does not run: node 'attn/Reshape_out' (Reshape) merges the heads without keeping batch and sequence in place}}
  %o = hetc.onnx.node "MatMul"(%p, %vrep) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %ax0 = hetc.constant dense<0> : tensor<1xi64>
  %minus1 = hetc.constant dense<-1> : tensor<1xi64>
  %h_shape = hetc.onnx.node "Shape"(%h) {node_name = "attn/Shape"} : (tensor<?x?x8xf32>) -> tensor<3xi64>
  %bsz = hetc.onnx.node "Gather"(%h_shape, %i0) {node_name = "attn/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %qlen = hetc.onnx.node "Gather"(%h_shape, %i1) {node_name = "attn/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %bsz1 = hetc.onnx.node "Unsqueeze"(%bsz, %ax0) {node_name = "attn/Unsqueeze_b"} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %qlen1 = hetc.onnx.node "Unsqueeze"(%qlen, %ax0) {node_name = "attn/Unsqueeze_s"} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %out_shape = hetc.onnx.node "Concat"(%qlen1, %bsz1, %minus1) {node_name = "attn/Concat_out", onnx_attrs = {axis = 0 : i64}} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>
}

// -----

// Not a KV-cached attention hetc can serve: the concatenated keys are not a present output.
func.func @no_present(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}) {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x4xf32>
  %wv = hetc.weight "v_proj" : tensor<8x4xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %h, %wk : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v = hetc.linear %h, %wv : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  // cos and sin of position * inv_freq
  %ax1 = hetc.constant dense<1> : tensor<1xi64>
  %inv = hetc.constant dense<[[[1.0], [0.01]]]> : tensor<1x2x1xf32>
  %inv_shape = hetc.constant dense<[1, 2, 1]> : tensor<3xi64>
  %inv_b = hetc.onnx.node "Expand"(%inv, %inv_shape) {node_name = "rotary/Expand"} : (tensor<1x2x1xf32>, tensor<3xi64>) -> tensor<1x2x1xf32>
  %pos_u = hetc.onnx.node "Unsqueeze"(%pos, %ax1) {node_name = "rotary/Unsqueeze"} : (tensor<?x?xi64>, tensor<1xi64>) -> tensor<?x1x?xi64>
  %pos_f = hetc.onnx.node "Cast"(%pos_u) {node_name = "rotary/Cast", onnx_attrs = {to = 1 : i64}} : (tensor<?x1x?xi64>) -> tensor<?x1x?xf32>
  %freqs = hetc.onnx.node "MatMul"(%inv_b, %pos_f) {node_name = "rotary/MatMul"} : (tensor<1x2x1xf32>, tensor<?x1x?xf32>) -> tensor<?x2x?xf32>
  %freqs_t = hetc.onnx.node "Transpose"(%freqs) {node_name = "rotary/Transpose", onnx_attrs = {perm = [0, 2, 1]}} : (tensor<?x2x?xf32>) -> tensor<?x?x2xf32>
  %emb = hetc.onnx.node "Concat"(%freqs_t, %freqs_t) {node_name = "rotary/Concat", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x4xf32>
  %cos = hetc.onnx.node "Cos"(%emb) {node_name = "rotary/Cos"} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %sin = hetc.onnx.node "Sin"(%emb) {node_name = "rotary/Sin"} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %cos4 = hetc.onnx.node "Unsqueeze"(%cos, %ax1) {node_name = "attn/Unsqueeze_cos4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  %sin4 = hetc.onnx.node "Unsqueeze"(%sin, %ax1) {node_name = "attn/Unsqueeze_sin4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x1x?x4xf32>
  // heads: [B, S, heads * D] -> [B, heads, S, D]
  %q_shape = hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
  %kv_shape = hetc.constant dense<[0, 0, 1, 4]> : tensor<4xi64>
  %q3 = hetc.onnx.node "Reshape"(%q, %q_shape) {node_name = "attn/Reshape_q3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q4 = hetc.onnx.node "Transpose"(%q3) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k3 = hetc.onnx.node "Reshape"(%k, %kv_shape) {node_name = "attn/Reshape_k3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k4 = hetc.onnx.node "Transpose"(%k3) {node_name = "attn/Transpose_k4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v3 = hetc.onnx.node "Reshape"(%v, %kv_shape) {node_name = "attn/Reshape_v3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v4 = hetc.onnx.node "Transpose"(%v3) {node_name = "attn/Transpose_v4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  // rope: x * cos + rotate_half(x) * sin
  %c0 = hetc.constant dense<0> : tensor<1xi64>
  %c2 = hetc.constant dense<2> : tensor<1xi64>
  %c3 = hetc.constant dense<3> : tensor<1xi64>
  %cmax = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %q_cos = hetc.onnx.node "Mul"(%q4, %cos4) {node_name = "attn/Mul_q_cos"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_lo = hetc.onnx.node "Slice"(%q4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_q_lo"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_hi = hetc.onnx.node "Slice"(%q4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_q_hi"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_neg = hetc.onnx.node "Neg"(%q_hi) {node_name = "attn/Neg_q_neg"} : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %q_rot = hetc.onnx.node "Concat"(%q_neg, %q_lo) {node_name = "attn/Concat_q_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %q_sin = hetc.onnx.node "Mul"(%q_rot, %sin4) {node_name = "attn/Mul_q_sin"} : (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_r = hetc.onnx.node "Add"(%q_cos, %q_sin) {node_name = "attn/Add_q_r"} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %k_cos = hetc.onnx.node "Mul"(%k4, %cos4) {node_name = "attn/Mul_k_cos"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_lo = hetc.onnx.node "Slice"(%k4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_k_lo"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_hi = hetc.onnx.node "Slice"(%k4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_k_hi"} : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %k_neg = hetc.onnx.node "Neg"(%k_hi) {node_name = "attn/Neg_k_neg"} : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %k_rot = hetc.onnx.node "Concat"(%k_neg, %k_lo) {node_name = "attn/Concat_k_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %k_sin = hetc.onnx.node "Mul"(%k_rot, %sin4) {node_name = "attn/Mul_k_sin"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %k_r = hetc.onnx.node "Add"(%k_cos, %k_sin) {node_name = "attn/Add_k_r"} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // the KV cache
  %pk = hetc.onnx.node "Concat"(%past_k, %k_r) {node_name = "attn/Concat_pk", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %pv = hetc.onnx.node "Concat"(%past_v, %v4) {node_name = "attn/Concat_pv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // repeat_kv
  %ax2 = hetc.constant dense<2> : tensor<1xi64>
  %rep = hetc.constant dense<[1, 1, 2, 1, 1]> : tensor<5xi64>
  %rep_shape = hetc.constant dense<[0, 2, -1, 4]> : tensor<4xi64>
  %ku = hetc.onnx.node "Unsqueeze"(%pk, %ax2) {node_name = "attn/Unsqueeze_ku"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ke = hetc.onnx.node "Expand"(%ku, %rep) {node_name = "attn/Expand_ke"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %krep = hetc.onnx.node "Reshape"(%ke, %rep_shape) {node_name = "attn/Reshape_krep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vu = hetc.onnx.node "Unsqueeze"(%pv, %ax2) {node_name = "attn/Unsqueeze_vu"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ve = hetc.onnx.node "Expand"(%vu, %rep) {node_name = "attn/Expand_ve"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vrep = hetc.onnx.node "Reshape"(%ve, %rep_shape) {node_name = "attn/Reshape_vrep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  // the causal mask: key j is hidden from query i when j > past + i
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %pos_shape = hetc.onnx.node "Shape"(%pos) {node_name = "mask/Shape"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = hetc.onnx.node "Gather"(%pos_shape, %i1) {node_name = "mask/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %am_shape = hetc.onnx.node "Shape"(%attention_mask) {node_name = "mask/Shape_1"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %total = hetc.onnx.node "Gather"(%am_shape, %i1) {node_name = "mask/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %past = hetc.onnx.node "Sub"(%total, %seq) {node_name = "mask/Sub"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %keys = hetc.onnx.node "Range"(%i0, %total, %i1) {node_name = "mask/Range"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries = hetc.onnx.node "Range"(%past, %total, %i1) {node_name = "mask/Range_1"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries_col = hetc.onnx.node "Unsqueeze"(%queries, %ax1) {node_name = "mask/Unsqueeze"} : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %hidden = hetc.onnx.node "Greater"(%keys, %queries_col) {node_name = "mask/Greater"} : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %lowest = hetc.constant dense<-3.40282347E+38> : tensor<f32>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %m2 = hetc.onnx.node "Where"(%hidden, %lowest, %zero) {node_name = "mask/Where"} : (tensor<?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
  %ax01 = hetc.constant dense<[0, 1]> : tensor<2xi64>
  %mask = hetc.onnx.node "Unsqueeze"(%m2, %ax01) {node_name = "mask/Unsqueeze_1"} : (tensor<?x?xf32>, tensor<2xi64>) -> tensor<1x1x?x?xf32>
  // softmax(q k^T * scale + mask) v
  %kt = hetc.onnx.node "Transpose"(%krep) {node_name = "attn/Transpose_kt", onnx_attrs = {perm = [0, 1, 3, 2]}} : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s = hetc.onnx.node "MatMul"(%q_r, %kt) {node_name = "attn/MatMul_s"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %sqrt_d = hetc.constant dense<2.0> : tensor<f32>
  %sd = hetc.onnx.node "Div"(%s, %sqrt_d) {node_name = "attn/Div_sd"} : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %sm = hetc.onnx.node "Add"(%sd, %mask) {node_name = "attn/Add_sm"} : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = hetc.onnx.node "Softmax"(%sm) {node_name = "attn/Softmax_p", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  // expected-error @+1 {{node 'attn/MatMul_o' (MatMul) closes an attention hetc does not run: node 'attn/MatMul_s' (MatMul) reads keys ('attn/Concat_pk' (Concat)) that are not Concat(past input, new ones) along the positions, written to a present output: a KV cache hetc can own}}
  %o = hetc.onnx.node "MatMul"(%p, %vrep) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, -1]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out : tensor<?x?x8xf32>
}

// -----

// Keys broadcast to the query heads before the cache and values not: no grouping of query heads
// over KV heads reads them both. Refused at the scores, with the heads each operand has.
func.func @values_not_broadcast(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x2x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}, tensor<?x2x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.value"}) {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x4xf32>
  %wv = hetc.weight "v_proj" : tensor<8x4xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %h, %wk : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v = hetc.linear %h, %wv : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %ax1 = hetc.constant dense<1> : tensor<1xi64>
  %group_q = hetc.constant dense<[0, 0, 1, 2, 4]> : tensor<5xi64>
  %group_kv = hetc.constant dense<[0, 0, 1, 1, 4]> : tensor<5xi64>
  %bcast = hetc.constant dense<[1, 1, 1, 2, 1]> : tensor<5xi64>
  %heads_shape = hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
  %q5 = hetc.onnx.node "Reshape"(%q, %group_q) {node_name = "attn/Reshape_q5"} : (tensor<?x?x8xf32>, tensor<5xi64>) -> tensor<?x?x1x2x4xf32>
  %q3 = hetc.onnx.node "Reshape"(%q5, %heads_shape) {node_name = "attn/Reshape_q3"} : (tensor<?x?x1x2x4xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q4 = hetc.onnx.node "Transpose"(%q3) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k5 = hetc.onnx.node "Reshape"(%k, %group_kv) {node_name = "attn/Reshape_k5"} : (tensor<?x?x4xf32>, tensor<5xi64>) -> tensor<?x?x1x1x4xf32>
  %kb = hetc.onnx.node "Expand"(%k5, %bcast) {node_name = "attn/Expand_k"} : (tensor<?x?x1x1x4xf32>, tensor<5xi64>) -> tensor<?x?x1x2x4xf32>
  %k3 = hetc.onnx.node "Reshape"(%kb, %heads_shape) {node_name = "attn/Reshape_k3"} : (tensor<?x?x1x2x4xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %k4 = hetc.onnx.node "Transpose"(%k3) {node_name = "attn/Transpose_k4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %kv_shape = hetc.constant dense<[0, 0, 1, 4]> : tensor<4xi64>
  %v3 = hetc.onnx.node "Reshape"(%v, %kv_shape) {node_name = "attn/Reshape_v3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v4 = hetc.onnx.node "Transpose"(%v3) {node_name = "attn/Transpose_v4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %pv = hetc.onnx.node "Concat"(%past_v, %v4) {node_name = "attn/Concat_pv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %pk = hetc.onnx.node "Concat"(%past_k, %k4) {node_name = "attn/Concat_pk", onnx_attrs = {axis = 2 : i64}} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  // the causal mask: key j is hidden from query i when j > past + i
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %pos_shape = hetc.onnx.node "Shape"(%pos) {node_name = "mask/Shape"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = hetc.onnx.node "Gather"(%pos_shape, %i1) {node_name = "mask/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %am_shape = hetc.onnx.node "Shape"(%attention_mask) {node_name = "mask/Shape_1"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %total = hetc.onnx.node "Gather"(%am_shape, %i1) {node_name = "mask/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %past = hetc.onnx.node "Sub"(%total, %seq) {node_name = "mask/Sub"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %keys = hetc.onnx.node "Range"(%i0, %total, %i1) {node_name = "mask/Range"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries = hetc.onnx.node "Range"(%past, %total, %i1) {node_name = "mask/Range_1"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries_col = hetc.onnx.node "Unsqueeze"(%queries, %ax1) {node_name = "mask/Unsqueeze"} : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %hidden = hetc.onnx.node "Greater"(%keys, %queries_col) {node_name = "mask/Greater"} : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %lowest = hetc.constant dense<-3.40282347E+38> : tensor<f32>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %m2 = hetc.onnx.node "Where"(%hidden, %lowest, %zero) {node_name = "mask/Where"} : (tensor<?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
  %ax01 = hetc.constant dense<[0, 1]> : tensor<2xi64>
  %mask = hetc.onnx.node "Unsqueeze"(%m2, %ax01) {node_name = "mask/Unsqueeze_1"} : (tensor<?x?xf32>, tensor<2xi64>) -> tensor<1x1x?x?xf32>
  // softmax(q k^T * scale + mask) v, no repeat_kv: the graph's cache has every query head
  %kt = hetc.onnx.node "Transpose"(%pk) {node_name = "attn/Transpose_kt", onnx_attrs = {perm = [0, 1, 3, 2]}} : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s = hetc.onnx.node "MatMul"(%q4, %kt) {node_name = "attn/MatMul_s"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %sqrt_d = hetc.constant dense<2.0> : tensor<f32>
  %sd = hetc.onnx.node "Div"(%s, %sqrt_d) {node_name = "attn/Div_sd"} : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %sm = hetc.onnx.node "Add"(%sd, %mask) {node_name = "attn/Add_sm"} : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = hetc.onnx.node "Softmax"(%sm) {node_name = "attn/Softmax_p", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  // expected-error @+1 {{node 'attn/MatMul_o' (MatMul) closes an attention hetc does not run: node 'attn/MatMul_s' (MatMul) multiplies queries of 2 heads of 4 with keys of 1 head of 4 (each repeated 2 times) and values of 1 head of 4: hetc's attention groups the query heads evenly over KV heads of one head_dim}}
  %o = hetc.onnx.node "MatMul"(%p, %pv) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, 8]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>
}

// -----

// A rotation read by its values (the heads rotated before their transpose, RotationFit.cpp) whose
// rotate_half lost its Neg: a reflection, not a rotation, refused with where it differs.
func.func @not_a_rotation(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.value"}) {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x4xf32>
  %wv = hetc.weight "v_proj" : tensor<8x4xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %h, %wk : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v = hetc.linear %h, %wv : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  // cos and sin of position * inv_freq
  %ax1 = hetc.constant dense<1> : tensor<1xi64>
  %inv = hetc.constant dense<[[[1.0], [0.01]]]> : tensor<1x2x1xf32>
  %inv_shape = hetc.constant dense<[1, 2, 1]> : tensor<3xi64>
  %inv_b = hetc.onnx.node "Expand"(%inv, %inv_shape) {node_name = "rotary/Expand"} : (tensor<1x2x1xf32>, tensor<3xi64>) -> tensor<1x2x1xf32>
  %pos_u = hetc.onnx.node "Unsqueeze"(%pos, %ax1) {node_name = "rotary/Unsqueeze"} : (tensor<?x?xi64>, tensor<1xi64>) -> tensor<?x1x?xi64>
  %pos_f = hetc.onnx.node "Cast"(%pos_u) {node_name = "rotary/Cast", onnx_attrs = {to = 1 : i64}} : (tensor<?x1x?xi64>) -> tensor<?x1x?xf32>
  %freqs = hetc.onnx.node "MatMul"(%inv_b, %pos_f) {node_name = "rotary/MatMul"} : (tensor<1x2x1xf32>, tensor<?x1x?xf32>) -> tensor<?x2x?xf32>
  %freqs_t = hetc.onnx.node "Transpose"(%freqs) {node_name = "rotary/Transpose", onnx_attrs = {perm = [0, 2, 1]}} : (tensor<?x2x?xf32>) -> tensor<?x?x2xf32>
  %emb = hetc.onnx.node "Concat"(%freqs_t, %freqs_t) {node_name = "rotary/Concat", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x4xf32>
  %cos = hetc.onnx.node "Cos"(%emb) {node_name = "rotary/Cos"} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %sin = hetc.onnx.node "Sin"(%emb) {node_name = "rotary/Sin"} : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %axh = hetc.constant dense<2> : tensor<1xi64>
  %cos4 = hetc.onnx.node "Unsqueeze"(%cos, %axh) {node_name = "attn/Unsqueeze_cos4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x?x1x4xf32>
  %sin4 = hetc.onnx.node "Unsqueeze"(%sin, %axh) {node_name = "attn/Unsqueeze_sin4"} : (tensor<?x?x4xf32>, tensor<1xi64>) -> tensor<?x?x1x4xf32>
  // heads: [B, S, heads * D] -> [B, heads, S, D]
  %q_shape = hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
  %kv_shape = hetc.constant dense<[0, 0, 1, 4]> : tensor<4xi64>
  %q3 = hetc.onnx.node "Reshape"(%q, %q_shape) {node_name = "attn/Reshape_q3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %k3 = hetc.onnx.node "Reshape"(%k, %kv_shape) {node_name = "attn/Reshape_k3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v3 = hetc.onnx.node "Reshape"(%v, %kv_shape) {node_name = "attn/Reshape_v3"} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v4 = hetc.onnx.node "Transpose"(%v3) {node_name = "attn/Transpose_v4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  // rope: x * cos + rotate_half(x) * sin
  %c0 = hetc.constant dense<0> : tensor<1xi64>
  %c2 = hetc.constant dense<2> : tensor<1xi64>
  %c3 = hetc.constant dense<3> : tensor<1xi64>
  %cmax = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %q_cos = hetc.onnx.node "Mul"(%q3, %cos4) {node_name = "attn/Mul_q_cos"} : (tensor<?x?x2x4xf32>, tensor<?x?x1x4xf32>) -> tensor<?x?x2x4xf32>
  %q_lo = hetc.onnx.node "Slice"(%q3, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_q_lo"} : (tensor<?x?x2x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x2x2xf32>
  %q_hi = hetc.onnx.node "Slice"(%q3, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_q_hi"} : (tensor<?x?x2x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x2x2xf32>
  %q_neg = hetc.onnx.node "Identity"(%q_hi) {node_name = "attn/Identity_q_neg"} : (tensor<?x?x2x2xf32>) -> tensor<?x?x2x2xf32>
  %q_rot = hetc.onnx.node "Concat"(%q_neg, %q_lo) {node_name = "attn/Concat_q_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x2x2xf32>, tensor<?x?x2x2xf32>) -> tensor<?x?x2x4xf32>
  %q_sin = hetc.onnx.node "Mul"(%q_rot, %sin4) {node_name = "attn/Mul_q_sin"} : (tensor<?x?x2x4xf32>, tensor<?x?x1x4xf32>) -> tensor<?x?x2x4xf32>
  %q_r3 = hetc.onnx.node "Add"(%q_cos, %q_sin) {node_name = "attn/Add_q_r"} : (tensor<?x?x2x4xf32>, tensor<?x?x2x4xf32>) -> tensor<?x?x2x4xf32>
  %q_r = hetc.onnx.node "Transpose"(%q_r3) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k_cos = hetc.onnx.node "Mul"(%k3, %cos4) {node_name = "attn/Mul_k_cos"} : (tensor<?x?x1x4xf32>, tensor<?x?x1x4xf32>) -> tensor<?x?x1x4xf32>
  %k_lo = hetc.onnx.node "Slice"(%k3, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_k_lo"} : (tensor<?x?x1x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x1x2xf32>
  %k_hi = hetc.onnx.node "Slice"(%k3, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_k_hi"} : (tensor<?x?x1x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x1x2xf32>
  %k_neg = hetc.onnx.node "Identity"(%k_hi) {node_name = "attn/Identity_k_neg"} : (tensor<?x?x1x2xf32>) -> tensor<?x?x1x2xf32>
  %k_rot = hetc.onnx.node "Concat"(%k_neg, %k_lo) {node_name = "attn/Concat_k_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x1x2xf32>, tensor<?x?x1x2xf32>) -> tensor<?x?x1x4xf32>
  %k_sin = hetc.onnx.node "Mul"(%k_rot, %sin4) {node_name = "attn/Mul_k_sin"} : (tensor<?x?x1x4xf32>, tensor<?x?x1x4xf32>) -> tensor<?x?x1x4xf32>
  %k_r3 = hetc.onnx.node "Add"(%k_cos, %k_sin) {node_name = "attn/Add_k_r"} : (tensor<?x?x1x4xf32>, tensor<?x?x1x4xf32>) -> tensor<?x?x1x4xf32>
  %k_r = hetc.onnx.node "Transpose"(%k_r3) {node_name = "attn/Transpose_k4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  // the KV cache
  %pk = hetc.onnx.node "Concat"(%past_k, %k_r) {node_name = "attn/Concat_pk", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %pv = hetc.onnx.node "Concat"(%past_v, %v4) {node_name = "attn/Concat_pv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  // repeat_kv
  %ax2 = hetc.constant dense<2> : tensor<1xi64>
  %rep = hetc.constant dense<[1, 1, 2, 1, 1]> : tensor<5xi64>
  %rep_shape = hetc.constant dense<[0, 2, -1, 4]> : tensor<4xi64>
  %ku = hetc.onnx.node "Unsqueeze"(%pk, %ax2) {node_name = "attn/Unsqueeze_ku"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ke = hetc.onnx.node "Expand"(%ku, %rep) {node_name = "attn/Expand_ke"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %krep = hetc.onnx.node "Reshape"(%ke, %rep_shape) {node_name = "attn/Reshape_krep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vu = hetc.onnx.node "Unsqueeze"(%pv, %ax2) {node_name = "attn/Unsqueeze_vu"} : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %ve = hetc.onnx.node "Expand"(%vu, %rep) {node_name = "attn/Expand_ve"} : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vrep = hetc.onnx.node "Reshape"(%ve, %rep_shape) {node_name = "attn/Reshape_vrep"} : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  // the causal mask: key j is hidden from query i when j > past + i
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %pos_shape = hetc.onnx.node "Shape"(%pos) {node_name = "mask/Shape"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = hetc.onnx.node "Gather"(%pos_shape, %i1) {node_name = "mask/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %am_shape = hetc.onnx.node "Shape"(%attention_mask) {node_name = "mask/Shape_1"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %total = hetc.onnx.node "Gather"(%am_shape, %i1) {node_name = "mask/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %past = hetc.onnx.node "Sub"(%total, %seq) {node_name = "mask/Sub"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %keys = hetc.onnx.node "Range"(%i0, %total, %i1) {node_name = "mask/Range"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries = hetc.onnx.node "Range"(%past, %total, %i1) {node_name = "mask/Range_1"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %queries_col = hetc.onnx.node "Unsqueeze"(%queries, %ax1) {node_name = "mask/Unsqueeze"} : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %hidden = hetc.onnx.node "Greater"(%keys, %queries_col) {node_name = "mask/Greater"} : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %lowest = hetc.constant dense<-3.40282347E+38> : tensor<f32>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %m2 = hetc.onnx.node "Where"(%hidden, %lowest, %zero) {node_name = "mask/Where"} : (tensor<?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
  %ax01 = hetc.constant dense<[0, 1]> : tensor<2xi64>
  %mask = hetc.onnx.node "Unsqueeze"(%m2, %ax01) {node_name = "mask/Unsqueeze_1"} : (tensor<?x?xf32>, tensor<2xi64>) -> tensor<1x1x?x?xf32>
  // softmax(q k^T * scale + mask) v
  %kt = hetc.onnx.node "Transpose"(%krep) {node_name = "attn/Transpose_kt", onnx_attrs = {perm = [0, 1, 3, 2]}} : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s = hetc.onnx.node "MatMul"(%q_r, %kt) {node_name = "attn/MatMul_s"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %sqrt_d = hetc.constant dense<2.0> : tensor<f32>
  %sd = hetc.onnx.node "Div"(%s, %sqrt_d) {node_name = "attn/Div_sd"} : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %sm = hetc.onnx.node "Add"(%sd, %mask) {node_name = "attn/Add_sm"} : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = hetc.onnx.node "Softmax"(%sm) {node_name = "attn/Softmax_p", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  // expected-error @+1 {{node 'attn/MatMul_o' (MatMul) closes an attention hetc does not run: node 'attn/MatMul_s' (MatMul) multiplies 'attn/Transpose_q4' (Transpose), which is not the query heads: Transpose(Reshape(q, [batch, sequence, heads, head_dim]), [0, 2, 1, 3]), rotated or not; read by its values, the 19 nodes from 'rotary/Expand' to 'attn/Transpose_q4' are not a rotation of each head: the nearest, rotate-half over all 4 columns, differs from them by 1.68 at position 1, where column 2 of a head gives 0.841 in column 0 where the rotation gives -0.841}}
  %o = hetc.onnx.node "MatMul"(%p, %vrep) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, -1]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>
}
