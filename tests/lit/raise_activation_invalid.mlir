// RUN: hetc-opt %s --hetc-raise-activation -split-input-file -verify-diagnostics

// FastGelu's bias after a linear that has a bias of its own: two biases hetc.linear cannot hold.
func.func @fast_gelu_second_bias(%x: tensor<?x?x8xf32>) -> tensor<*xf32> {
  %w = hetc.weight "fc" : tensor<8x16xf32>
  %b = hetc.weight "fc.bias" : tensor<16xf32>
  %h = hetc.linear %x, %w, %b : (tensor<?x?x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  // expected-error @+1 {{node 'fast_gelu' (FastGelu) adds a bias that hetc cannot give to the linear before it}}
  %f = hetc.onnx.node "FastGelu"(%h, %b) {node_name = "fast_gelu"} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<*xf32>
  return %f : tensor<*xf32>
}
