// RUN: hetc-opt %s --hetc-raise-activation -split-input-file | FileCheck %s

// Relu of a linear (OPT's fc1), Gelu with approximate = "tanh" (opset 20) and FastGelu, whose
// bias becomes the bias of the linear before it.
// CHECK-LABEL: func.func @activations
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x8xf32>)
// CHECK: %[[B:.*]] = hetc.weight "fc.bias" : tensor<16xf32>
// CHECK: %[[H:.*]] = hetc.linear %[[X]], %{{.*}} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
// CHECK: %[[H2:.*]] = hetc.linear %[[X]], %{{.*}}, %[[B]] : (tensor<?x?x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
// CHECK: %[[R:.*]] = hetc.activation %[[H]] {function = "relu"} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
// CHECK: %[[F:.*]] = hetc.activation %[[H2]] {function = "gelu_tanh"}
// CHECK: %[[G:.*]] = hetc.activation %[[H]] {function = "gelu_tanh"}
// CHECK: %[[E:.*]] = hetc.activation %[[H]] {function = "gelu"}
// CHECK-NOT: hetc.onnx.node
// CHECK: return %[[R]], %[[F]], %[[G]], %[[E]]
func.func @activations(%x: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %w = hetc.weight "fc" : tensor<8x16xf32>
  %w2 = hetc.weight "fc2" : tensor<8x16xf32>
  %b = hetc.weight "fc.bias" : tensor<16xf32>
  %h = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %h2 = hetc.linear %x, %w2 : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %r = hetc.onnx.node "Relu"(%h) {node_name = "relu"} : (tensor<?x?x16xf32>) -> tensor<*xf32>
  %f = hetc.onnx.node "FastGelu"(%h2, %b) {node_name = "fast_gelu"} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<*xf32>
  %g = hetc.onnx.node "Gelu"(%h) {node_name = "gelu_tanh", onnx_attrs = {approximate = "tanh"}} : (tensor<?x?x16xf32>) -> tensor<*xf32>
  %e = hetc.onnx.node "Gelu"(%h) {node_name = "gelu"} : (tensor<?x?x16xf32>) -> tensor<*xf32>
  return %r, %f, %g, %e : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// A Relu of a graph input is no LLM activation: left for CheckRaised to name.
// CHECK-LABEL: func.func @not_an_llm_value
// CHECK: hetc.onnx.node "Relu"
// CHECK-NOT: hetc.activation
func.func @not_an_llm_value(%x: tensor<?x?x8xf32>) -> tensor<*xf32> {
  %r = hetc.onnx.node "Relu"(%x) {node_name = "relu"} : (tensor<?x?x8xf32>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// Written out: nn.GELU() as torch.onnx writes it at opset 17, GPT-2's gelu_new with tanh and x^3,
// and a ReLU as Max(x, 0); each recognised by its values. A scaling (q * 0.125) is none of them.
// CHECK-LABEL: func.func @written_out
// CHECK: %[[H:.*]] = hetc.linear
// CHECK-DAG: hetc.activation %[[H]] {function = "gelu", hetc.fit = "fitted by values: 5 nodes from 'gelu/Div' to 'gelu/Mul_1' are gelu (within {{.*}} at 241 points from -30 to 30; the next nearest, gelu_tanh, is {{.*}} away)"}
// CHECK-DAG: hetc.activation %[[H]] {function = "gelu_tanh", hetc.fit = "fitted by values: 8 nodes from 'new/Pow' to 'new/Mul_3' are gelu_tanh {{.*}}"}
// CHECK-DAG: hetc.activation %[[H]] {function = "relu", hetc.fit = "fitted by values: 1 node, 'relu/Max', is relu {{.*}}"}
// CHECK-DAG: hetc.onnx.node "Mul"(%[[H]], %{{.*}}) {node_name = "scaled"}
// CHECK-NOT: "Erf"
// CHECK-NOT: "Tanh"
func.func @written_out(%x: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %w = hetc.weight "fc" : tensor<8x16xf32>
  %h = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %sqrt2 = hetc.constant dense<1.41421354> : tensor<f32>
  %one = hetc.constant dense<1.0> : tensor<f32>
  %half = hetc.constant dense<0.5> : tensor<f32>
  %d = hetc.onnx.node "Div"(%h, %sqrt2) {node_name = "gelu/Div"} : (tensor<?x?x16xf32>, tensor<f32>) -> tensor<*xf32>
  %e = hetc.onnx.node "Erf"(%d) {node_name = "gelu/Erf"} : (tensor<*xf32>) -> tensor<*xf32>
  %a = hetc.onnx.node "Add"(%e, %one) {node_name = "gelu/Add"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %m = hetc.onnx.node "Mul"(%h, %a) {node_name = "gelu/Mul"} : (tensor<?x?x16xf32>, tensor<*xf32>) -> tensor<*xf32>
  %g = hetc.onnx.node "Mul"(%m, %half) {node_name = "gelu/Mul_1"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %three = hetc.constant dense<3.0> : tensor<f32>
  %k = hetc.constant dense<0.044715> : tensor<f32>
  %c = hetc.constant dense<0.797884583> : tensor<f32>
  %cube = hetc.onnx.node "Pow"(%h, %three) {node_name = "new/Pow"} : (tensor<?x?x16xf32>, tensor<f32>) -> tensor<*xf32>
  %kc = hetc.onnx.node "Mul"(%cube, %k) {node_name = "new/Mul"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %inner = hetc.onnx.node "Add"(%h, %kc) {node_name = "new/Add"} : (tensor<?x?x16xf32>, tensor<*xf32>) -> tensor<*xf32>
  %scaled_inner = hetc.onnx.node "Mul"(%inner, %c) {node_name = "new/Mul_1"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %t = hetc.onnx.node "Tanh"(%scaled_inner) {node_name = "new/Tanh"} : (tensor<*xf32>) -> tensor<*xf32>
  %t1 = hetc.onnx.node "Add"(%t, %one) {node_name = "new/Add_1"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %hx = hetc.onnx.node "Mul"(%h, %half) {node_name = "new/Mul_2"} : (tensor<?x?x16xf32>, tensor<f32>) -> tensor<*xf32>
  %n = hetc.onnx.node "Mul"(%hx, %t1) {node_name = "new/Mul_3"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %r = hetc.onnx.node "Max"(%h, %zero) {node_name = "relu/Max"} : (tensor<?x?x16xf32>, tensor<f32>) -> tensor<*xf32>
  %eighth = hetc.constant dense<0.125> : tensor<f32>
  %s = hetc.onnx.node "Mul"(%h, %eighth) {node_name = "scaled"} : (tensor<?x?x16xf32>, tensor<f32>) -> tensor<*xf32>
  return %g, %n, %r, %s : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// Two computations sharing a node: Max(h, 0), a ReLU, and Mul(Max, 3), none of the functions.
// Raising the ReLU replaces the Max for every reader; the other computation, which listed the
// erased Max, is skipped, and its Mul reads the activation.
// CHECK-LABEL: func.func @shared_nodes
// CHECK: %[[H:.*]] = hetc.linear
// CHECK: %[[A:.*]] = hetc.activation %[[H]] {function = "relu", hetc.fit = {{.*}}}
// CHECK: hetc.onnx.node "Mul"(%[[A]]
// CHECK-NOT: "Max"
func.func @shared_nodes(%x: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %w = hetc.weight "fc" : tensor<8x16xf32>
  %h = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %three = hetc.constant dense<3.0> : tensor<f32>
  %m = hetc.onnx.node "Max"(%h, %zero) {node_name = "Max"} : (tensor<?x?x16xf32>, tensor<f32>) -> tensor<*xf32>
  %t = hetc.onnx.node "Mul"(%m, %three) {node_name = "Mul"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  return %m, %t : tensor<*xf32>, tensor<*xf32>
}

// -----

// nn.GELU() in a float16 file (onnxconverter-common's conversion): its constants rounded to
// float16 (sqrt 2 is 1.4140625, 1.5e-4 off) move the values by up to 1.7e-5 of their size, more
// than float32's eight ulps and well within float16's (7.8e-3): the chain is held to its own
// type. The same rounded constant in a float32 chain is not GELU.
// CHECK-LABEL: func.func @gelu_float16
// CHECK: hetc.activation %{{.*}} {function = "gelu", hetc.fit = "fitted by values: 5 nodes from 'f16/Div' to 'f16/Mul_1' are gelu (within {{.*}} of a tolerance of 0.0078 at 241 points
// CHECK: hetc.onnx.node "Erf"(%{{.*}}) {node_name = "f32/Erf"}
func.func @gelu_float16(%x: tensor<?x?x8xf16>, %y: tensor<?x?x8xf32>) -> (tensor<*xf16>, tensor<*xf32>) {
  %w = hetc.weight "fc" : tensor<8x16xf16>
  %h = hetc.linear %x, %w : (tensor<?x?x8xf16>, tensor<8x16xf16>) -> tensor<?x?x16xf16>
  %sqrt2 = hetc.constant dense<1.4140625> : tensor<f16>
  %one = hetc.constant dense<1.0> : tensor<f16>
  %half = hetc.constant dense<0.5> : tensor<f16>
  %d = hetc.onnx.node "Div"(%h, %sqrt2) {node_name = "f16/Div"} : (tensor<?x?x16xf16>, tensor<f16>) -> tensor<*xf16>
  %e = hetc.onnx.node "Erf"(%d) {node_name = "f16/Erf"} : (tensor<*xf16>) -> tensor<*xf16>
  %a = hetc.onnx.node "Add"(%e, %one) {node_name = "f16/Add"} : (tensor<*xf16>, tensor<f16>) -> tensor<*xf16>
  %m = hetc.onnx.node "Mul"(%h, %a) {node_name = "f16/Mul"} : (tensor<?x?x16xf16>, tensor<*xf16>) -> tensor<*xf16>
  %g = hetc.onnx.node "Mul"(%m, %half) {node_name = "f16/Mul_1"} : (tensor<*xf16>, tensor<f16>) -> tensor<*xf16>
  %w32 = hetc.weight "fc32" : tensor<8x16xf32>
  %h32 = hetc.linear %y, %w32 : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %sqrt2r = hetc.constant dense<1.4140625> : tensor<f32>
  %one32 = hetc.constant dense<1.0> : tensor<f32>
  %half32 = hetc.constant dense<0.5> : tensor<f32>
  %d32 = hetc.onnx.node "Div"(%h32, %sqrt2r) {node_name = "f32/Div"} : (tensor<?x?x16xf32>, tensor<f32>) -> tensor<*xf32>
  %e32 = hetc.onnx.node "Erf"(%d32) {node_name = "f32/Erf"} : (tensor<*xf32>) -> tensor<*xf32>
  %a32 = hetc.onnx.node "Add"(%e32, %one32) {node_name = "f32/Add"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %m32 = hetc.onnx.node "Mul"(%h32, %a32) {node_name = "f32/Mul"} : (tensor<?x?x16xf32>, tensor<*xf32>) -> tensor<*xf32>
  %g32 = hetc.onnx.node "Mul"(%m32, %half32) {node_name = "f32/Mul_1"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  return %g, %g32 : tensor<*xf16>, tensor<*xf32>
}

// -----

// Squared ReLU (transformers' relu2: square(relu(x)), Primer's and Nemotron's) as torch writes
// it, Pow(Relu(x), 2), and as a product: each one function of two nodes, fitted before a Relu
// alone could be raised and hide the square. A Relu read by nothing else stays relu.
// CHECK-LABEL: func.func @relu_squared
// CHECK-DAG: hetc.activation %{{.*}} {function = "relu2", hetc.fit = "fitted by values: 2 nodes from 'sq/Relu' to 'sq/Pow' are relu2
// CHECK-DAG: hetc.activation %{{.*}} {function = "relu2", hetc.fit = "fitted by values: 2 nodes from 'mul/Relu' to 'mul/Mul' are relu2
// CHECK-DAG: hetc.activation %{{.*}} {function = "relu"} :
// CHECK-NOT: "Relu"
func.func @relu_squared(%x: tensor<?x?x8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %w = hetc.weight "fc" : tensor<8x16xf32>
  %h = hetc.linear %x, %w : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %w2 = hetc.weight "fc2" : tensor<8x16xf32>
  %h2 = hetc.linear %x, %w2 : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %w3 = hetc.weight "fc3" : tensor<8x16xf32>
  %h3 = hetc.linear %x, %w3 : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  %two = hetc.constant dense<2.0> : tensor<f32>
  %r = hetc.onnx.node "Relu"(%h) {node_name = "sq/Relu"} : (tensor<?x?x16xf32>) -> tensor<*xf32>
  %s = hetc.onnx.node "Pow"(%r, %two) {node_name = "sq/Pow"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %r2 = hetc.onnx.node "Relu"(%h2) {node_name = "mul/Relu"} : (tensor<?x?x16xf32>) -> tensor<*xf32>
  %m = hetc.onnx.node "Mul"(%r2, %r2) {node_name = "mul/Mul"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %plain = hetc.onnx.node "Relu"(%h3) {node_name = "plain/Relu"} : (tensor<?x?x16xf32>) -> tensor<*xf32>
  return %s, %m, %plain : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
