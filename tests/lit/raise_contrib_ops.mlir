// RUN: hetc-opt %s --hetc-raise-contrib-ops -split-input-file | FileCheck %s

// ONNX Runtime GenAI's fused decoder layer (head_dim 4, 2 query heads, 1 KV head): the norms, the
// skip sum, the rotary embeddings (frequencies read from the caches) and GroupQueryAttention.
// CHECK-LABEL: func.func @genai_layer
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>, %[[POS:.*]]: tensor<?x?xi64>, %[[PK:.*]]: tensor<?x1x?x4xf32>, %[[PV:.*]]: tensor<?x1x?x4xf32>, %{{.*}}: tensor<?xi32>, %{{.*}}: tensor<i32>)
// CHECK: %[[N:.*]] = hetc.rms_norm %[[X]], %{{.*}} {epsilon = 9.99999974E-6 : f32}
// CHECK: %[[Q:.*]] = hetc.onnx.node "MatMul"(%[[N]]
// CHECK: %[[K:.*]] = hetc.onnx.node "MatMul"(%[[N]]
// CHECK: %[[V:.*]] = hetc.onnx.node "MatMul"(%[[N]]
// CHECK: %[[INV:.*]] = hetc.constant dense<[1.000000e+00, 0.0099999{{[0-9]+}}]> : tensor<2xf32>
// CHECK: %[[QR:.*]] = hetc.rope %[[Q]], %[[POS]], %[[INV]] {head_dim = 4 : i64, heads = 2 : i64}
// CHECK: %[[KR:.*]] = hetc.rope %[[K]], %[[POS]], %{{.*}} {head_dim = 4 : i64, heads = 1 : i64}
// CHECK: %[[O:.*]], %[[NK:.*]], %[[NV:.*]] = hetc.attention %[[QR]], %[[KR]], %[[V]], %[[PK]], %[[PV]] {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32, sliding_window = 3 : i64}
// CHECK: %[[P:.*]] = hetc.onnx.node "MatMul"(%[[O]]
// CHECK: %[[SUM:.*]] = hetc.onnx.node "Add"(%[[X]], %[[P]]) {node_name = "layer/post_norm/skip_sum"}
// CHECK: %[[N2:.*]] = hetc.rms_norm %[[SUM]], %{{.*}} {epsilon = 9.99999997E-7 : f32}
// CHECK-NOT: SkipSimplifiedLayerNormalization
// CHECK-NOT: GroupQueryAttention
// CHECK: return %[[N2]], %[[SUM]], %[[NK]], %[[NV]]
func.func @genai_layer(%x: tensor<?x?x8xf32>, %pos: tensor<?x?xi64>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %seqlens_k: tensor<?xi32>, %total: tensor<i32>)
    -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %g1 = hetc.weight "input_layernorm.weight" : tensor<8xf32>
  %g2 = hetc.weight "post_attention_layernorm.weight" : tensor<8xf32>
  %wq = hetc.weight "q_proj" : tensor<8x8xf32>
  %wk = hetc.weight "k_proj" : tensor<8x4xf32>
  %wv = hetc.weight "v_proj" : tensor<8x4xf32>
  %wo = hetc.weight "o_proj" : tensor<8x8xf32>
  %cos = hetc.constant dense<[[1.0, 1.0], [0.5403022766113281, 0.9999499917030334], [-0.41614681482315063, 0.9998000264167786], [-0.9899924993515015, 0.9995500445365906]]> : tensor<4x2xf32>
  %sin = hetc.constant dense<[[0.0, 0.0], [0.8414710164070129, 0.009999833069741726], [0.9092974066734314, 0.019998665899038315], [0.14112000167369843, 0.029995499178767204]]> : tensor<4x2xf32>
  %n:2 = hetc.onnx.node "SimplifiedLayerNormalization"(%x, %g1) {node_name = "layer/input_norm", onnx_attrs = {axis = -1 : i64, epsilon = 1.0e-05 : f32}} : (tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  %q = hetc.onnx.node "MatMul"(%n#0, %wq) {node_name = "layer/q_proj"} : (tensor<*xf32>, tensor<8x8xf32>) -> tensor<*xf32>
  %k = hetc.onnx.node "MatMul"(%n#0, %wk) {node_name = "layer/k_proj"} : (tensor<*xf32>, tensor<8x4xf32>) -> tensor<*xf32>
  %v = hetc.onnx.node "MatMul"(%n#0, %wv) {node_name = "layer/v_proj"} : (tensor<*xf32>, tensor<8x4xf32>) -> tensor<*xf32>
  %qr = hetc.onnx.node "RotaryEmbedding"(%q, %pos, %cos, %sin) {node_name = "layer/q_rotary"} : (tensor<*xf32>, tensor<?x?xi64>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<*xf32>
  %kr = hetc.onnx.node "RotaryEmbedding"(%k, %pos, %cos, %sin) {node_name = "layer/k_rotary"} : (tensor<*xf32>, tensor<?x?xi64>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<*xf32>
  %a:3 = hetc.onnx.node "GroupQueryAttention"(%qr, %kr, %v, %past_k, %past_v, %seqlens_k, %total) {node_name = "layer/gqa", onnx_attrs = {num_heads = 2 : i64, kv_num_heads = 1 : i64, local_window_size = 3 : i64}} : (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?xi32>, tensor<i32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  %o = hetc.onnx.node "MatMul"(%a#0, %wo) {node_name = "layer/o_proj"} : (tensor<*xf32>, tensor<8x8xf32>) -> tensor<*xf32>
  %s:4 = hetc.onnx.node "SkipSimplifiedLayerNormalization"(%x, %o, %g2) {node_name = "layer/post_norm", onnx_attrs = {epsilon = 1.0e-06 : f32}} : (tensor<?x?x8xf32>, tensor<*xf32>, tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %s#0, %s#3, %a#1, %a#2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// The builder's default for CPU and CUDA: q, k and v packed in the query ([B, S, (2 + 2 x 1) x 4])
// and rotated by the attention (do_rotary, interleaved, caches as inputs 7 and 8). The packed
// value is split into q, k and v (for RaiseLinear to cut the projection); each is rotated without
// positions.
// CHECK-LABEL: func.func @genai_packed_do_rotary
// CHECK-SAME: (%[[QKV:.*]]: tensor<?x?x16xf32>, %[[PK:.*]]: tensor<?x1x?x4xf32>, %[[PV:.*]]: tensor<?x1x?x4xf32>
// CHECK: %[[SIZES:.*]] = hetc.constant dense<[8, 4, 4]> : tensor<3xi64>
// CHECK: %[[S:.*]]:3 = hetc.onnx.node "Split"(%[[QKV]], %[[SIZES]]) {node_name = "gqa/packed_qkv", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x16xf32>, tensor<3xi64>) -> (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>)
// CHECK: %[[INV:.*]] = hetc.constant dense<[1.000000e+00, 0.0099999{{[0-9]+}}]> : tensor<2xf32>
// CHECK: %[[QR:.*]] = hetc.rope %[[S]]#0, %[[INV]] {head_dim = 4 : i64, heads = 2 : i64, interleaved} : (tensor<?x?x8xf32>, tensor<2xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[KR:.*]] = hetc.rope %[[S]]#1, %[[INV]] {head_dim = 4 : i64, heads = 1 : i64, interleaved} : (tensor<?x?x4xf32>, tensor<2xf32>) -> tensor<?x?x4xf32>
// CHECK: hetc.attention %[[QR]], %[[KR]], %[[S]]#2, %[[PK]], %[[PV]] {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 1 : i64, scale = 5.000000e-01 : f32}
// CHECK-NOT: GroupQueryAttention
func.func @genai_packed_do_rotary(%qkv: tensor<?x?x16xf32>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %seqlens_k: tensor<?xi32>, %total: tensor<i32>)
    -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %none = hetc.onnx.none
  %cos = hetc.constant dense<[[1.0, 1.0], [0.5403022766113281, 0.9999499917030334], [-0.41614681482315063, 0.9998000264167786], [-0.9899924993515015, 0.9995500445365906]]> : tensor<4x2xf32>
  %sin = hetc.constant dense<[[0.0, 0.0], [0.8414710164070129, 0.009999833069741726], [0.9092974066734314, 0.019998665899038315], [0.14112000167369843, 0.029995499178767204]]> : tensor<4x2xf32>
  %a:3 = hetc.onnx.node "GroupQueryAttention"(%qkv, %none, %none, %past_k, %past_v, %seqlens_k, %total, %cos, %sin) {node_name = "gqa", onnx_attrs = {num_heads = 2 : i64, kv_num_heads = 1 : i64, do_rotary = 1 : i64, rotary_interleaved = 1 : i64}} : (tensor<?x?x16xf32>, none, none, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?xi32>, tensor<i32>, tensor<4x2xf32>, tensor<4x2xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %a#0, %a#1, %a#2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// ONNX's LayerNormalization (opset 17, OPT's and GPT-2's norms) and ONNX Runtime's
// SkipLayerNormalization: hetc.layer_norm with the bias, the skip sum an Add (output 3).
// CHECK-LABEL: func.func @layer_norms
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>, %[[Y:.*]]: tensor<?x?x8xf32>)
// CHECK: %[[G:.*]] = hetc.weight "ln.weight"
// CHECK: %[[B:.*]] = hetc.weight "ln.bias"
// CHECK: %[[N:.*]] = hetc.layer_norm %[[X]], %[[G]], %[[B]] {epsilon = 9.99999974E-6 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[SUM:.*]] = hetc.onnx.node "Add"(%[[N]], %[[Y]]) {node_name = "skip_ln/skip_sum"}
// CHECK: %[[N2:.*]] = hetc.layer_norm %[[SUM]], %[[G]] {epsilon = 9.99999996E-13 : f32}
// CHECK: return %[[N2]], %[[SUM]]
func.func @layer_norms(%x: tensor<?x?x8xf32>, %y: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %g = hetc.weight "ln.weight" : tensor<8xf32>
  %b = hetc.weight "ln.bias" : tensor<8xf32>
  %none = hetc.onnx.none
  %n = hetc.onnx.node "LayerNormalization"(%x, %g, %b) {node_name = "ln", onnx_attrs = {axis = -1 : i64}} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<*xf32>
  %s:4 = hetc.onnx.node "SkipLayerNormalization"(%n, %y, %g, %none) {node_name = "skip_ln"} : (tensor<*xf32>, tensor<?x?x8xf32>, tensor<8xf32>, none) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %s#0, %s#3 : tensor<*xf32>, tensor<*xf32>
}

// -----

// ONNX Runtime's GPT-2 export (opset 11): EmbedLayerNormalization (token and position rows,
// their sum, its LayerNorm), com.microsoft Attention over a KV cache stacked as past [2, B, 2,
// P, 4] (the importer's halves: Concat of Unsqueezes in, Gathers out), and a SkipLayerNormalization
// whose bias joins the projection before the skip sum.
// CHECK-LABEL: func.func @gpt2_layer
// CHECK-SAME: (%[[IDS:.*]]: tensor<?x?xi32>, %[[POS:.*]]: tensor<?x?xi32>, %[[PK:.*]]: tensor<?x2x?x4xf32>, %[[PV:.*]]: tensor<?x2x?x4xf32>)
// CHECK: %[[T:.*]] = hetc.onnx.node "Gather"(%[[WTE:.*]], %[[IDS]]) {node_name = "embed/tokens", onnx_attrs = {axis = 0 : i64}}
// CHECK: %[[P:.*]] = hetc.onnx.node "Gather"(%[[WPE:.*]], %[[POS]]) {node_name = "embed/positions", onnx_attrs = {axis = 0 : i64}}
// CHECK: %[[SUM:.*]] = hetc.onnx.node "Add"(%[[T]], %[[P]]) {node_name = "embed/embedding_sum"}
// CHECK: %[[LN:.*]] = hetc.layer_norm %[[SUM]], %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32}
// CHECK: %[[QKV:.*]] = hetc.onnx.node "MatMul"(%[[LN]], %{{.*}}) {node_name = "attn/qkv"}
// CHECK: %[[QKVB:.*]] = hetc.onnx.node "Add"(%[[QKV]], %{{.*}}) {node_name = "attn/qkv_bias"}
// CHECK: %[[S:.*]]:3 = hetc.onnx.node "Split"(%[[QKVB]]
// CHECK: %[[O:.*]], %[[NK:.*]], %[[NV:.*]] = hetc.attention %[[S]]#0, %[[S]]#1, %[[S]]#2, %[[PK]], %[[PV]] {head_dim = 4 : i64, heads = 2 : i64, kv_heads = 2 : i64, scale = 5.000000e-01 : f32}
// CHECK: %[[PROJ:.*]] = hetc.onnx.node "MatMul"(%[[O]]
// CHECK: %[[BIASED:.*]] = hetc.onnx.node "Add"(%[[PROJ]], %{{.*}}) {node_name = "ln_2/bias"}
// CHECK: %[[RES:.*]] = hetc.onnx.node "Add"(%[[BIASED]], %[[SUM]]) {node_name = "ln_2/skip_sum"}
// CHECK: %[[LN2:.*]] = hetc.layer_norm %[[RES]]
// CHECK-NOT: "Attention"
// CHECK-NOT: EmbedLayerNormalization
// CHECK: return %[[LN2]], %[[RES]], %[[NK]], %[[NV]]
func.func @gpt2_layer(%ids: tensor<?x?xi32>, %pos: tensor<?x?xi32>, %pk: tensor<?x2x?x4xf32>, %pv: tensor<?x2x?x4xf32>)
    -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %wte = hetc.weight "wte" : tensor<16x8xf32>
  %wpe = hetc.weight "wpe" : tensor<32x8xf32>
  %g1 = hetc.weight "ln_1.weight" : tensor<8xf32>
  %b1 = hetc.weight "ln_1.bias" : tensor<8xf32>
  %w = hetc.weight "c_attn.weight" : tensor<8x24xf32>
  %wb = hetc.weight "c_attn.bias" : tensor<24xf32>
  %wo = hetc.weight "c_proj.weight" : tensor<8x8xf32>
  %bo = hetc.weight "c_proj.bias" : tensor<8xf32>
  %g2 = hetc.weight "ln_2.weight" : tensor<8xf32>
  %b2 = hetc.weight "ln_2.bias" : tensor<8xf32>
  %none = hetc.onnx.none
  %e:3 = hetc.onnx.node "EmbedLayerNormalization"(%ids, %none, %wte, %wpe, %none, %g1, %b1, %none, %pos) {node_name = "embed", onnx_attrs = {epsilon = 1.0e-05 : f32}} : (tensor<?x?xi32>, none, tensor<16x8xf32>, tensor<32x8xf32>, none, tensor<8xf32>, tensor<8xf32>, none, tensor<?x?xi32>) -> (tensor<*xf32>, tensor<*xi32>, tensor<*xf32>)
  %uk = hetc.onnx.node "Unsqueeze"(%pk) {node_name = "past/stack_key", onnx_attrs = {axes = [0]}} : (tensor<?x2x?x4xf32>) -> tensor<1x?x2x?x4xf32>
  %uv = hetc.onnx.node "Unsqueeze"(%pv) {node_name = "past/stack_value", onnx_attrs = {axes = [0]}} : (tensor<?x2x?x4xf32>) -> tensor<1x?x2x?x4xf32>
  %past = hetc.onnx.node "Concat"(%uk, %uv) {node_name = "past/stack", onnx_attrs = {axis = 0 : i64}} : (tensor<1x?x2x?x4xf32>, tensor<1x?x2x?x4xf32>) -> tensor<2x?x2x?x4xf32>
  %a:2 = hetc.onnx.node "Attention"(%e#0, %w, %wb, %none, %past) {node_name = "attn", onnx_attrs = {num_heads = 2 : i64, unidirectional = 1 : i64}} : (tensor<*xf32>, tensor<8x24xf32>, tensor<24xf32>, none, tensor<2x?x2x?x4xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  %zero = hetc.constant dense<0> : tensor<i64>
  %one = hetc.constant dense<1> : tensor<i64>
  %nk = hetc.onnx.node "Gather"(%a#1, %zero) {node_name = "present/key", onnx_attrs = {axis = 0 : i64}} : (tensor<*xf32>, tensor<i64>) -> tensor<*xf32>
  %nv = hetc.onnx.node "Gather"(%a#1, %one) {node_name = "present/value", onnx_attrs = {axis = 0 : i64}} : (tensor<*xf32>, tensor<i64>) -> tensor<*xf32>
  %o = hetc.onnx.node "MatMul"(%a#0, %wo) {node_name = "c_proj"} : (tensor<*xf32>, tensor<8x8xf32>) -> tensor<*xf32>
  %s:4 = hetc.onnx.node "SkipLayerNormalization"(%o, %e#2, %g2, %b2, %bo) {node_name = "ln_2", onnx_attrs = {epsilon = 1.0e-05 : f32}} : (tensor<*xf32>, tensor<*xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %s#0, %s#3, %nk, %nv : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
