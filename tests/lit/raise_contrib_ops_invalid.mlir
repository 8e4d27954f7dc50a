// RUN: hetc-opt %s --hetc-raise-contrib-ops -split-input-file -verify-diagnostics

// A skip sum with a bias that is not a weight, a read of the norm's inverse deviation, packed QKV that does not split
// into the heads, rotation inside the attention without its caches or caches without rotation:
// each refused naming the node and what it does.
func.func @skip_bias(%x: tensor<?x?x8xf32>, %y: tensor<?x?x8xf32>, %b: tensor<8xf32>) -> tensor<*xf32> {
  %g = hetc.weight "g" : tensor<8xf32>
  // expected-error @+1 {{node 'norm' (SkipSimplifiedLayerNormalization) adds a bias to the skip sum that is not a [hidden] weight}}
  %s = hetc.onnx.node "SkipSimplifiedLayerNormalization"(%x, %y, %g, %b) {node_name = "norm"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<*xf32>
  return %s : tensor<*xf32>
}

// -----

func.func @inv_std_read(%x: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %g = hetc.weight "g" : tensor<8xf32>
  // expected-error @+1 {{node 'norm' (SimplifiedLayerNormalization) has its output 1 (the mean or inverse standard deviation) read, which hetc does not compute}}
  %n:2 = hetc.onnx.node "SimplifiedLayerNormalization"(%x, %g) {node_name = "norm"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %n#0, %n#1 : tensor<*xf32>, tensor<*xf32>
}

// -----

func.func @packed_qkv_odd(%qkv: tensor<?x?x15xf32>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %seqlens_k: tensor<?xi32>, %total: tensor<i32>) -> tensor<*xf32> {
  %none = hetc.onnx.none
  // expected-error @+1 {{node 'gqa' (GroupQueryAttention) takes packed QKV whose size does not split into 2 + 2 x 1 heads}}
  %a:3 = hetc.onnx.node "GroupQueryAttention"(%qkv, %none, %none, %past_k, %past_v, %seqlens_k, %total) {node_name = "gqa", onnx_attrs = {num_heads = 2 : i64, kv_num_heads = 1 : i64}} : (tensor<?x?x15xf32>, none, none, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?xi32>, tensor<i32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %a#0 : tensor<*xf32>
}

// -----

func.func @do_rotary_without_caches(%q: tensor<?x?x8xf32>, %k: tensor<?x?x4xf32>, %v: tensor<?x?x4xf32>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %seqlens_k: tensor<?xi32>, %total: tensor<i32>) -> tensor<*xf32> {
  // expected-error @+1 {{node 'gqa' (GroupQueryAttention) rotates q and k (do_rotary = 1) but has no cos/sin cache inputs}}
  %a:3 = hetc.onnx.node "GroupQueryAttention"(%q, %k, %v, %past_k, %past_v, %seqlens_k, %total) {node_name = "gqa", onnx_attrs = {num_heads = 2 : i64, kv_num_heads = 1 : i64, do_rotary = 1 : i64}} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?xi32>, tensor<i32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %a#0 : tensor<*xf32>
}

// -----

// Caches given but do_rotary 0: ONNX Runtime would not rotate; hetc does not guess.
func.func @caches_without_do_rotary(%q: tensor<?x?x8xf32>, %k: tensor<?x?x4xf32>, %v: tensor<?x?x4xf32>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %seqlens_k: tensor<?xi32>, %total: tensor<i32>, %cos: tensor<4x2xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{node 'gqa' (GroupQueryAttention) takes cos/sin caches or position ids without do_rotary = 1}}
  %a:3 = hetc.onnx.node "GroupQueryAttention"(%q, %k, %v, %past_k, %past_v, %seqlens_k, %total, %cos, %cos) {node_name = "gqa", onnx_attrs = {num_heads = 2 : i64, kv_num_heads = 1 : i64}} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?xi32>, tensor<i32>, tensor<4x2xf32>, tensor<4x2xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %a#0 : tensor<*xf32>
}

// -----

// A cache covering more columns than a head has.
func.func @do_rotary_wide_cache(%q: tensor<?x?x8xf32>, %k: tensor<?x?x4xf32>, %v: tensor<?x?x4xf32>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %seqlens_k: tensor<?xi32>, %total: tensor<i32>) -> tensor<*xf32> {
  %cos = hetc.constant dense<1.0> : tensor<4x3xf32>
  // expected-error @+1 {{node 'gqa' (GroupQueryAttention) has cos/sin caches for 6 columns, more than its heads' 4}}
  %a:3 = hetc.onnx.node "GroupQueryAttention"(%q, %k, %v, %past_k, %past_v, %seqlens_k, %total, %cos, %cos) {node_name = "gqa", onnx_attrs = {num_heads = 2 : i64, kv_num_heads = 1 : i64, do_rotary = 1 : i64}} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?xi32>, tensor<i32>, tensor<4x3xf32>, tensor<4x3xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %a#0 : tensor<*xf32>
}

// -----

func.func @layer_norm_mean_read(%x: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %g = hetc.weight "g" : tensor<8xf32>
  // expected-error @+1 {{node 'ln' (LayerNormalization) has its output 1 (the mean or inverse standard deviation) read, which hetc does not compute}}
  %n:2 = hetc.onnx.node "LayerNormalization"(%x, %g) {node_name = "ln"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %n#0, %n#1 : tensor<*xf32>, tensor<*xf32>
}

// -----

func.func @skip_layer_norm_bias(%x: tensor<?x?x8xf32>, %y: tensor<?x?x8xf32>, %c: tensor<?x?x8xf32>) -> tensor<*xf32> {
  %g = hetc.weight "g" : tensor<8xf32>
  %b = hetc.weight "b" : tensor<8xf32>
  // expected-error @+1 {{node 'skip_ln' (SkipLayerNormalization) adds a bias to the skip sum that is not a [hidden] weight}}
  %s = hetc.onnx.node "SkipLayerNormalization"(%x, %y, %g, %b, %c) {node_name = "skip_ln"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<*xf32>
  return %s : tensor<*xf32>
}

// -----

// com.microsoft Attention that is not causal, whose past is not the importer's stack of two
// graph inputs, or whose present is read as a whole; EmbedLayerNormalization without positions.
func.func @attention_not_causal(%x: tensor<?x?x8xf32>, %pk: tensor<?x2x?x4xf32>, %pv: tensor<?x2x?x4xf32>) -> tensor<*xf32> {
  %w = hetc.weight "c_attn" : tensor<8x24xf32>
  %uk = hetc.onnx.node "Unsqueeze"(%pk) {node_name = "past/stack_key", onnx_attrs = {axes = [0]}} : (tensor<?x2x?x4xf32>) -> tensor<1x?x2x?x4xf32>
  %uv = hetc.onnx.node "Unsqueeze"(%pv) {node_name = "past/stack_value", onnx_attrs = {axes = [0]}} : (tensor<?x2x?x4xf32>) -> tensor<1x?x2x?x4xf32>
  %past = hetc.onnx.node "Concat"(%uk, %uv) {node_name = "past/stack", onnx_attrs = {axis = 0 : i64}} : (tensor<1x?x2x?x4xf32>, tensor<1x?x2x?x4xf32>) -> tensor<2x?x2x?x4xf32>
  %none = hetc.onnx.none
  // expected-error @+1 {{node 'attn' (Attention) is not causal (unidirectional = 0), which hetc.attention always is}}
  %a:2 = hetc.onnx.node "Attention"(%x, %w, %none, %none, %past) {node_name = "attn", onnx_attrs = {num_heads = 2 : i64}} : (tensor<?x?x8xf32>, tensor<8x24xf32>, none, none, tensor<2x?x2x?x4xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %a#0 : tensor<*xf32>
}

// -----

func.func @attention_past_not_stacked(%x: tensor<?x?x8xf32>, %past: tensor<2x?x2x?x4xf32>) -> tensor<*xf32> {
  %w = hetc.weight "c_attn" : tensor<8x24xf32>
  %none = hetc.onnx.none
  // expected-error @+1 {{node 'attn' (Attention) does not read its past from one stacked [2, batch, heads, past, head_dim] graph input}}
  %a:2 = hetc.onnx.node "Attention"(%x, %w, %none, %none, %past) {node_name = "attn", onnx_attrs = {num_heads = 2 : i64, unidirectional = 1 : i64}} : (tensor<?x?x8xf32>, tensor<8x24xf32>, none, none, tensor<2x?x2x?x4xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %a#0 : tensor<*xf32>
}

// -----

func.func @attention_present_read_whole(%x: tensor<?x?x8xf32>, %pk: tensor<?x2x?x4xf32>, %pv: tensor<?x2x?x4xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %w = hetc.weight "c_attn" : tensor<8x24xf32>
  %uk = hetc.onnx.node "Unsqueeze"(%pk) {node_name = "past/stack_key", onnx_attrs = {axes = [0]}} : (tensor<?x2x?x4xf32>) -> tensor<1x?x2x?x4xf32>
  %uv = hetc.onnx.node "Unsqueeze"(%pv) {node_name = "past/stack_value", onnx_attrs = {axes = [0]}} : (tensor<?x2x?x4xf32>) -> tensor<1x?x2x?x4xf32>
  %past = hetc.onnx.node "Concat"(%uk, %uv) {node_name = "past/stack", onnx_attrs = {axis = 0 : i64}} : (tensor<1x?x2x?x4xf32>, tensor<1x?x2x?x4xf32>) -> tensor<2x?x2x?x4xf32>
  %none = hetc.onnx.none
  // expected-error @+1 {{node 'attn' (Attention) has its present output read other than as its key and value}}
  %a:2 = hetc.onnx.node "Attention"(%x, %w, %none, %none, %past) {node_name = "attn", onnx_attrs = {num_heads = 2 : i64, unidirectional = 1 : i64}} : (tensor<?x?x8xf32>, tensor<8x24xf32>, none, none, tensor<2x?x2x?x4xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %a#0, %a#1 : tensor<*xf32>, tensor<*xf32>
}

// -----

func.func @embed_layer_norm_without_positions(%ids: tensor<?x?xi32>) -> tensor<*xf32> {
  %wte = hetc.weight "wte" : tensor<16x8xf32>
  %wpe = hetc.weight "wpe" : tensor<32x8xf32>
  %g = hetc.weight "g" : tensor<8xf32>
  %b = hetc.weight "b" : tensor<8xf32>
  %none = hetc.onnx.none
  // expected-error @+1 {{node 'embed' (EmbedLayerNormalization) has no position_ids: ONNX Runtime then embeds positions 0 .. S - 1 at every step, which a decoder with a KV cache cannot use}}
  %e:3 = hetc.onnx.node "EmbedLayerNormalization"(%ids, %none, %wte, %wpe, %none, %g, %b) {node_name = "embed"} : (tensor<?x?xi32>, none, tensor<16x8xf32>, tensor<32x8xf32>, none, tensor<8xf32>, tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %e#0 : tensor<*xf32>
}

// -----

func.func @layer_norm_bias_not_a_weight(%x: tensor<?x?x8xf32>, %b: tensor<8xf32>) -> tensor<*xf32> {
  %g = hetc.weight "g" : tensor<8xf32>
  // expected-error @+1 {{node 'ln' (LayerNormalization) adds a bias that is not a [hidden] weight like its scale}}
  %n = hetc.onnx.node "LayerNormalization"(%x, %g, %b) {node_name = "ln"} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<*xf32>
  return %n : tensor<*xf32>
}
