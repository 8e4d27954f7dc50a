// RUN: hetc-opt %s --hetc-raise-attention -split-input-file | FileCheck %s

// The heads an attention reads, read by their values (compiler/lib/raise/RotationFit.cpp) where
// their form is not read: here the rotation is applied to [batch, sequence, heads, head_dim],
// before the transpose to heads first (GPT-J's order), cos and sin broadcast over the heads' axis.
// CHECK-LABEL: func.func @rotated_before_transpose
// CHECK-SAME: (%[[H:.*]]: tensor<?x?x8xf32>, %[[POS:.*]]: tensor<?x?xi64>,
// CHECK: %[[Q:.*]] = hetc.linear %[[H]], %{{.*}} : (tensor<?x?x8xf32>, tensor<8x8xf32>)
// CHECK: %[[K:.*]] = hetc.linear %[[H]], %{{.*}} : (tensor<?x?x8xf32>, tensor<8x4xf32>)
// CHECK: %[[V:.*]] = hetc.linear %[[H]]
// CHECK: %[[INV:.*]] = hetc.constant dense<[1.000000e+00, 0.00999999977]> : tensor<2xf32>
// CHECK: %[[QR:.*]] = hetc.rope %[[Q]], %[[POS]], %[[INV]] {head_dim = 4 : i64, heads = 2 : i64, hetc.fit = "fitted by values: 19 nodes from 'rotary/Expand' to 'attn/Transpose_q4' are 2 heads of 4 rotated in rotate-half over all 4 columns, frequencies 1 to 0.01 of 'graph input #1'; within {{.*}} of the terms on random inputs at positions 0 to 32 and 4094 to 4095; the next nearest, no rotation, differs by 2"}
// CHECK: %[[KR:.*]] = hetc.rope %[[K]], %[[POS]], %[[INV]] {head_dim = 4 : i64, heads = 1 : i64, hetc.fit = "fitted by values: 19 nodes from 'rotary/Expand' to 'attn/Transpose_k4' are 1 head of 4 rotated in rotate-half over all 4 columns
// CHECK: hetc.attention %[[QR]], %[[KR]], %[[V]]
func.func @rotated_before_transpose(%h: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %attention_mask: tensor<?x?xi64>)
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
  %q_neg = hetc.onnx.node "Neg"(%q_hi) {node_name = "attn/Neg_q_neg"} : (tensor<?x?x2x2xf32>) -> tensor<?x?x2x2xf32>
  %q_rot = hetc.onnx.node "Concat"(%q_neg, %q_lo) {node_name = "attn/Concat_q_rot", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x2x2xf32>, tensor<?x?x2x2xf32>) -> tensor<?x?x2x4xf32>
  %q_sin = hetc.onnx.node "Mul"(%q_rot, %sin4) {node_name = "attn/Mul_q_sin"} : (tensor<?x?x2x4xf32>, tensor<?x?x1x4xf32>) -> tensor<?x?x2x4xf32>
  %q_r3 = hetc.onnx.node "Add"(%q_cos, %q_sin) {node_name = "attn/Add_q_r"} : (tensor<?x?x2x4xf32>, tensor<?x?x2x4xf32>) -> tensor<?x?x2x4xf32>
  %q_r = hetc.onnx.node "Transpose"(%q_r3) {node_name = "attn/Transpose_q4", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k_cos = hetc.onnx.node "Mul"(%k3, %cos4) {node_name = "attn/Mul_k_cos"} : (tensor<?x?x1x4xf32>, tensor<?x?x1x4xf32>) -> tensor<?x?x1x4xf32>
  %k_lo = hetc.onnx.node "Slice"(%k3, %c0, %c2, %c3, %ax1) {node_name = "attn/Slice_k_lo"} : (tensor<?x?x1x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x1x2xf32>
  %k_hi = hetc.onnx.node "Slice"(%k3, %c2, %cmax, %c3, %ax1) {node_name = "attn/Slice_k_hi"} : (tensor<?x?x1x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x1x2xf32>
  %k_neg = hetc.onnx.node "Neg"(%k_hi) {node_name = "attn/Neg_k_neg"} : (tensor<?x?x1x2xf32>) -> tensor<?x?x1x2xf32>
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
  %o = hetc.onnx.node "MatMul"(%p, %vrep) {node_name = "attn/MatMul_o"} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %ot = hetc.onnx.node "Transpose"(%o) {node_name = "attn/Transpose_ot", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %out_shape = hetc.constant dense<[0, 0, -1]> : tensor<3xi64>
  %out = hetc.onnx.node "Reshape"(%ot, %out_shape) {node_name = "attn/Reshape_out"} : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %out, %pk, %pv : tensor<?x?x8xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>
}
