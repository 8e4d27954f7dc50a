// RUN: hetc-opt %s --hetc-raise-contrib-ops -split-input-file -verify-diagnostics

// A skip sum with a bias, a read of the norm's inverse deviation, packed QKV and rotation inside
// the attention: each refused naming the node and what it does.
func.func @skip_bias(%x: tensor<?x?x8xf32>, %y: tensor<?x?x8xf32>) -> tensor<*xf32> {
  %g = hetc.weight "g" : tensor<8xf32>
  %b = hetc.weight "b" : tensor<8xf32>
  // expected-error @+1 {{node 'norm' (SkipSimplifiedLayerNormalization) adds a bias to the skip sum, which hetc does not do}}
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

func.func @packed_qkv(%qkv: tensor<?x?x16xf32>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %seqlens_k: tensor<?xi32>, %total: tensor<i32>) -> tensor<*xf32> {
  %none = hetc.onnx.none
  // expected-error @+1 {{node 'gqa' (GroupQueryAttention) takes packed QKV (no key and value inputs), which hetc does not split}}
  %a:3 = hetc.onnx.node "GroupQueryAttention"(%qkv, %none, %none, %past_k, %past_v, %seqlens_k, %total) {node_name = "gqa", onnx_attrs = {num_heads = 2 : i64, kv_num_heads = 1 : i64}} : (tensor<?x?x16xf32>, none, none, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?xi32>, tensor<i32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %a#0 : tensor<*xf32>
}

// -----

func.func @do_rotary(%q: tensor<?x?x8xf32>, %k: tensor<?x?x4xf32>, %v: tensor<?x?x4xf32>, %past_k: tensor<?x1x?x4xf32>, %past_v: tensor<?x1x?x4xf32>, %seqlens_k: tensor<?xi32>, %total: tensor<i32>) -> tensor<*xf32> {
  // expected-error @+1 {{node 'gqa' (GroupQueryAttention) rotates q and k itself (do_rotary = 1); hetc takes the RoPE as RotaryEmbedding nodes before it}}
  %a:3 = hetc.onnx.node "GroupQueryAttention"(%q, %k, %v, %past_k, %past_v, %seqlens_k, %total) {node_name = "gqa", onnx_attrs = {num_heads = 2 : i64, kv_num_heads = 1 : i64, do_rotary = 1 : i64}} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?xi32>, tensor<i32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %a#0 : tensor<*xf32>
}
