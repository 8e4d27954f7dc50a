// RUN: hetc-opt %s --hetc-raise-attention -split-input-file | FileCheck %s

// Grouped-query attention as Hugging Face's Llama exports it (2 query heads per KV head,
// head_dim 4): rotate-half RoPE from position_ids and inv_freq, the KV concat, repeat_kv, the
// score divided by sqrt(head_dim), a causal mask built from the inputs' shapes, softmax, and the
// heads merged back.
// CHECK-LABEL: func.func @llama_gqa
// CHECK-SAME: (%[[H:.*]]: tensor<?x?x8xf32>, %[[POS:.*]]: tensor<?x?xi64>, %[[PK:.*]]: tensor<?x1x?x4xf32>, %[[PV:.*]]: tensor<?x1x?x4xf32>, %{{.*}}: tensor<?x?xi64>)
// CHECK-DAG: %[[Q:.*]] = hetc.linear %[[H]], %{{.*}} : (tensor<?x?x8xf32>, tensor<8x8xf32>)
// CHECK-DAG: %[[K:.*]] = hetc.linear %[[H]], %{{.*}} : (tensor<?x?x8xf32>, tensor<8x4xf32>)
// CHECK: %[[V:.*]] = hetc.linear %[[H]]
// CHECK: %[[INV:.*]] = hetc.constant dense<[1.000000e+00, 0.00999999977]> : tensor<2xf32>
// CHECK: %[[QR:.*]] = hetc.rope %[[Q]], %[[POS]], %[[INV]] {head_dim = 4 : i64, heads = 2 : i64}
// CHECK: %[[KR:.*]] = hetc.rope %[[K]], %[[POS]], %[[INV]] {head_dim = 4 : i64, heads = 1 : i64}
// CHECK: %[[O:.*]], %[[NK:.*]], %[[NV:.*]] = hetc.attention %[[QR]], %[[KR]], %[[V]], %[[PK]], %[[PV]] {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32}
// CHECK-SAME: -> (tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>)
// CHECK: return %[[O]], %[[NK]], %[[NV]]
func.func @llama_gqa(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
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
  %o = hetc.onnx.node "MatMul"(%p, %vrep) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, -1]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>
}

// -----

// One KV head per query head (no repeat_kv), the scale as a Mul by 1/sqrt(head_dim), and every
// Mul and Add of RoPE and the mask in the other operand order.
// CHECK-LABEL: func.func @mha_swapped
// CHECK: hetc.rope {{.*}} {head_dim = 4 : i64, heads = 2 : i64}
// CHECK: hetc.rope {{.*}} {head_dim = 4 : i64, heads = 2 : i64}
// CHECK: hetc.attention {{.*}} {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 2 : i64, scale = 5.000000e-01 : f32}
func.func @mha_swapped(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x2x?x4xf32>, %past_v: tensor<?x2x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}, tensor<?x2x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x2x?x4xf32> {hetc.name = "present.0.value"}) {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x8xf32>
  %wv = hetc.weight "v_proj" : tensor<8x8xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %h, %wk : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %v = hetc.linear %h, %wv : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
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
  %kv_shape = hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
  %q3 = hetc.onnx.node "Reshape"(%q, %q_shape) {node_name = "attn/Reshape_q3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q4 = hetc.onnx.node "Transpose"(%q3) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k3 = hetc.onnx.node "Reshape"(%k, %kv_shape) {node_name = "attn/Reshape_k3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %k4 = hetc.onnx.node "Transpose"(%k3) {node_name = "attn/Transpose_k4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %v3 = hetc.onnx.node "Reshape"(%v, %kv_shape) {node_name = "attn/Reshape_v3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %v4 = hetc.onnx.node "Transpose"(%v3) {node_name = "attn/Transpose_v4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  // rope: x * cos + rotate_half(x) * sin
  %c0 = hetc.constant dense<0> : tensor<1xi64>
  %c2 = hetc.constant dense<2> : tensor<1xi64>
  %c3 = hetc.constant dense<3> : tensor<1xi64>
  %cmax = hetc.constant dense<9223372036854775807> : tensor<1xi64>
  %q_cos = hetc.onnx.node "Mul"(%cos4, %q4) {node_name = "attn/Mul_q_cos"} : (tensor<?x1x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_lo = hetc.onnx.node "Slice"(%q4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_q_lo"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_hi = hetc.onnx.node "Slice"(%q4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_q_hi"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %q_neg = hetc.onnx.node "Neg"(%q_hi) {node_name = "attn/Neg_q_neg"} : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %q_rot = hetc.onnx.node "Concat"(%q_neg, %q_lo) {node_name = "attn/Concat_q_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %q_sin = hetc.onnx.node "Mul"(%sin4, %q_rot) {node_name = "attn/Mul_q_sin"} : (tensor<?x1x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %q_r = hetc.onnx.node "Add"(%q_sin, %q_cos) {node_name = "attn/Add_q_r"} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %k_cos = hetc.onnx.node "Mul"(%cos4, %k4) {node_name = "attn/Mul_k_cos"} : (tensor<?x1x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %k_lo = hetc.onnx.node "Slice"(%k4, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_k_lo"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %k_hi = hetc.onnx.node "Slice"(%k4, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_k_hi"} : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %k_neg = hetc.onnx.node "Neg"(%k_hi) {node_name = "attn/Neg_k_neg"} : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %k_rot = hetc.onnx.node "Concat"(%k_neg, %k_lo) {node_name = "attn/Concat_k_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %k_sin = hetc.onnx.node "Mul"(%sin4, %k_rot) {node_name = "attn/Mul_k_sin"} : (tensor<?x1x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %k_r = hetc.onnx.node "Add"(%k_sin, %k_cos) {node_name = "attn/Add_k_r"} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  // the KV cache
  %pk = hetc.onnx.node "Concat"(%past_k, %k_r) {node_name = "attn/Concat_pk", onnx_attrs = {axis = 2 : i64}} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %pv = hetc.onnx.node "Concat"(%past_v, %v4) {node_name = "attn/Concat_pv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
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
  %kt = hetc.onnx.node "Transpose"(%pk) {node_name = "attn/Transpose_kt", onnx_attrs = {perm = [0, 1, 3, 2]}} : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s = hetc.onnx.node "MatMul"(%q_r, %kt) {node_name = "attn/MatMul_s"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %inv_sqrt_d = hetc.constant dense<0.5> : tensor<1xf32>
  %sd = hetc.onnx.node "Mul"(%inv_sqrt_d, %s) {node_name = "attn/Mul_sd"} : (tensor<1xf32>, tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %sm = hetc.onnx.node "Add"(%mask, %sd) {node_name = "attn/Add_sm"} : (tensor<1x1x?x?xf32>, tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = hetc.onnx.node "Softmax"(%sm) {node_name = "attn/Softmax_p", onnx_attrs = {axis = -1 : i64}} : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o = hetc.onnx.node "MatMul"(%p, %pv) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, -1]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>
}

// -----

// The heads merged back into [bsz, q_len, -1] with bsz and q_len read from the input's shape.
// CHECK-LABEL: func.func @shape_read_back
// CHECK: hetc.attention
func.func @shape_read_back(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
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
  %o = hetc.onnx.node "MatMul"(%p, %vrep) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %ax0 = hetc.constant dense<0> : tensor<1xi64>
  %minus1 = hetc.constant dense<-1> : tensor<1xi64>
  %h_shape = hetc.onnx.node "Shape"(%h) {node_name = "attn/Shape"} : (tensor<?x?x8xf32>) -> tensor<3xi64>
  %bsz = hetc.onnx.node "Gather"(%h_shape, %i0) {node_name = "attn/Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %qlen = hetc.onnx.node "Gather"(%h_shape, %i1) {node_name = "attn/Gather_1", onnx_attrs = {axis = 0 : i64}} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %bsz1 = hetc.onnx.node "Unsqueeze"(%bsz, %ax0) {node_name = "attn/Unsqueeze_b"} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %qlen1 = hetc.onnx.node "Unsqueeze"(%qlen, %ax0) {node_name = "attn/Unsqueeze_s"} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %out_shape = hetc.onnx.node "Concat"(%bsz1, %qlen1, %minus1) {node_name = "attn/Concat_out", onnx_attrs = {axis = 0 : i64}} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>
}

// -----

// Falcon's new decoder architecture: q viewed [B, S, G, n, D] by group, then [B, S, G * n, D];
// the one KV head broadcast to both query heads before the cache, which the graph holds with
// two heads. Grouped-query attention over one KV head whose graph cache repeats it.
// CHECK-LABEL: func.func @broadcast_before_cache
// CHECK: hetc.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {broadcast_cache, head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32}
// CHECK-SAME: -> (tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>)
// CHECK-NOT: "Expand"
func.func @broadcast_before_cache(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64> {hetc.name = "position_ids"}, %past_k: tensor<?x2x?x4xf32>, %past_v: tensor<?x2x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}, tensor<?x2x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x2x?x4xf32> {hetc.name = "present.0.value"}) {
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
  %v5 = hetc.onnx.node "Reshape"(%v, %group_kv) {node_name = "attn/Reshape_v5"} : (tensor<?x?x4xf32>, tensor<5xi64>) -> tensor<?x?x1x1x4xf32>
  %vb = hetc.onnx.node "Expand"(%v5, %bcast) {node_name = "attn/Expand_v"} : (tensor<?x?x1x1x4xf32>, tensor<5xi64>) -> tensor<?x?x1x2x4xf32>
  %v3 = hetc.onnx.node "Reshape"(%vb, %heads_shape) {node_name = "attn/Reshape_v3"} : (tensor<?x?x1x2x4xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %v4 = hetc.onnx.node "Transpose"(%v3) {node_name = "attn/Transpose_v4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %pk = hetc.onnx.node "Concat"(%past_k, %k4) {node_name = "attn/Concat_pk", onnx_attrs = {axis = 2 : i64}} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %pv = hetc.onnx.node "Concat"(%past_v, %v4) {node_name = "attn/Concat_pv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
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
  %o = hetc.onnx.node "MatMul"(%p, %pv) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, 8]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>
}

// -----

// The same attention with RoPE read from cos/sin tables gathered by position_ids, as
// transformers before 4.38 exports it (the cos table sliced from row 0, `cos_cached[:seq_len]`):
// the frequencies are recovered from the tables' values.
// CHECK-LABEL: func.func @rope_tables
// CHECK: %[[INV:.*]] = hetc.constant dense<[1.000000e+00, 0.00999999977]> : tensor<2xf32>
// CHECK: hetc.rope %{{.*}}, %{{.*}}, %[[INV]] {head_dim = 4 : i64, heads = 2 : i64}
// CHECK: hetc.rope %{{.*}}, %{{.*}}, %[[INV]] {head_dim = 4 : i64, heads = 1 : i64}
// CHECK: hetc.attention
func.func @rope_tables(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
    -> (tensor<?x?x8xf32> {hetc.name = "out"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.key"}, tensor<?x1x?x4xf32> {hetc.name = "present.0.value"}) {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x4xf32>
  %wv = hetc.weight "v_proj" : tensor<8x4xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = hetc.linear %h, %wk : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v = hetc.linear %h, %wv : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  // cos/sin tables [6, 4] gathered by position
  %ax1 = hetc.constant dense<1> : tensor<1xi64>
  %cos_t = hetc.constant dense<[[1.0, 1.0, 1.0, 1.0], [0.5403022766113281, 0.9999499917030334, 0.5403022766113281, 0.9999499917030334], [-0.41614681482315063, 0.9998000264167786, -0.41614681482315063, 0.9998000264167786], [-0.9899924993515015, 0.9995500445365906, -0.9899924993515015, 0.9995500445365906], [-0.6536436080932617, 0.9992001056671143, -0.6536436080932617, 0.9992001056671143], [0.28366217017173767, 0.9987502694129944, 0.28366217017173767, 0.9987502694129944]]> : tensor<6x4xf32>
  %sin_t = hetc.constant dense<[[0.0, 0.0, 0.0, 0.0], [0.8414710164070129, 0.009999833069741726, 0.8414710164070129, 0.009999833069741726], [0.9092974066734314, 0.019998665899038315, 0.9092974066734314, 0.019998665899038315], [0.14112000167369843, 0.029995499178767204, 0.14112000167369843, 0.029995499178767204], [-0.756802499294281, 0.03998933359980583, -0.756802499294281, 0.03998933359980583], [-0.9589242935180664, 0.04997916519641876, -0.9589242935180664, 0.04997916519641876]]> : tensor<6x4xf32>
  %z1 = hetc.constant dense<0> : tensor<1xi64>
  %len = hetc.constant dense<5> : tensor<1xi64>
  %cos_s = hetc.onnx.node "Slice"(%cos_t, %z1, %len) {node_name = "rotary/Slice"} : (tensor<6x4xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4xf32>
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

// Qwen3's q_norm: an RMSNorm of each head, between the head split and the transpose, becomes the
// grouped rms_norm of the flat projection (gamma of a head's 4 features over 8), split after it,
// so the heads split reads it as it reads a projection.
// CHECK-LABEL: func.func @per_head_norm
// CHECK: %[[Q:.*]] = hetc.linear
// CHECK: %[[N:.*]] = hetc.rms_norm %[[Q]], %{{.*}} {epsilon = 9.99999997E-7 : f32} : (tensor<?x?x8xf32>, tensor<4xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[R:.*]] = hetc.onnx.node "Reshape"(%[[N]], %{{.*}}) {node_name = "attn/Reshape_q3"}
// CHECK: hetc.onnx.node "Transpose"(%[[R]])
func.func @per_head_norm(%h: tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> {
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %g = hetc.weight "q_norm" : tensor<4xf32>
  %q = hetc.linear %h, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %q_shape = hetc.constant dense<[0, 0, 2, 4]> : tensor<4xi64>
  %q3 = hetc.onnx.node "Reshape"(%q, %q_shape) {node_name = "attn/Reshape_q3"} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %n = hetc.rms_norm %q3, %g {epsilon = 1.0e-06 : f32} : (tensor<?x?x2x4xf32>, tensor<4xf32>) -> tensor<?x?x2x4xf32>
  %q4 = hetc.onnx.node "Transpose"(%n) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  return %q4 : tensor<?x2x?x4xf32>
}
