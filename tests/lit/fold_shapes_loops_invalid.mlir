// RUN: hetc-opt %s --hetc-fold-shapes -split-input-file -verify-diagnostics

// A loop without a trip count runs until its condition turns false: not unrolled.
func.func @no_trip_count(%x: tensor<4xf32>, %c: tensor<i1>) -> tensor<*xf32> {
  %none = hetc.onnx.none
  // expected-error @+1 {{node 'while' (Loop) has no trip count: it runs until its condition turns false, and hetc unrolls only loops whose number of iterations the model's shapes fix}}
  %out = hetc.onnx.loop(%none, %c, %x) {node_name = "while"} : (none, tensor<i1>, tensor<4xf32>) -> (tensor<*xf32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>, %acc: tensor<*xf32>):
    hetc.onnx.yield %cond, %acc : tensor<i1>, tensor<*xf32>
  }
  return %out : tensor<*xf32>
}

// -----

// A trip count read from a value the graph's inputs give (not from a shape).
func.func @trip_count_from_data(%x: tensor<4xf32>, %m: tensor<i64>) -> tensor<*xf32> {
  %true = hetc.constant dense<true> : tensor<i1>
  // expected-error @+1 {{node 'loop' (Loop) runs a number of iterations that does not evaluate to a constant: hetc unrolls only loops whose number of iterations the model's shapes fix}}
  %out = hetc.onnx.loop(%m, %true, %x) {node_name = "loop"} : (tensor<i64>, tensor<i1>, tensor<4xf32>) -> (tensor<*xf32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>, %acc: tensor<*xf32>):
    hetc.onnx.yield %cond, %acc : tensor<i1>, tensor<*xf32>
  }
  return %out : tensor<*xf32>
}

// -----

// A body whose condition comes from the data may stop before its trip count.
func.func @data_condition(%x: tensor<4xf32>) -> tensor<*xf32> {
  %m = hetc.constant dense<3> : tensor<i64>
  %true = hetc.constant dense<true> : tensor<i1>
  %zero = hetc.constant dense<0.0> : tensor<f32>
  %out = hetc.onnx.loop(%m, %true, %x) {node_name = "loop"} : (tensor<i64>, tensor<i1>, tensor<4xf32>) -> (tensor<*xf32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>, %acc: tensor<*xf32>):
    %s = hetc.onnx.node "ReduceSum"(%acc) {node_name = "sum"} : (tensor<*xf32>) -> tensor<*xf32>
    // expected-error @+1 {{node 'loop' (Loop), iteration 0: the loop's condition does not evaluate to a constant, so it may stop before its trip count; hetc unrolls only loops that run their trip count}}
    %more = hetc.onnx.node "Less"(%s, %zero) {node_name = "more"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xi1>
    hetc.onnx.yield %more, %acc : tensor<*xi1>, tensor<*xf32>
  }
  return %out : tensor<*xf32>
}

// -----

// Unrolled, more nodes than hetc unrolls.
func.func @too_many_iterations(%x: tensor<4xf32>) -> tensor<*xf32> {
  %m = hetc.constant dense<100000> : tensor<i64>
  %true = hetc.constant dense<true> : tensor<i1>
  // expected-error @+1 {{node 'loop' (Loop) runs 100000 iterations of a body of 1 nodes: unrolled, more than 65536 nodes, which hetc does not unroll}}
  %out = hetc.onnx.loop(%m, %true, %x) {node_name = "loop"} : (tensor<i64>, tensor<i1>, tensor<4xf32>) -> (tensor<*xf32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>, %acc: tensor<*xf32>):
    %n = hetc.onnx.node "Neg"(%acc) {node_name = "neg"} : (tensor<*xf32>) -> tensor<*xf32>
    hetc.onnx.yield %cond, %n : tensor<i1>, tensor<*xf32>
  }
  return %out : tensor<*xf32>
}

// -----

// No iterations, and the scan output read: an empty tensor.
func.func @empty_scan(%x: tensor<4xf32>) -> tensor<*xf32> {
  %m = hetc.constant dense<0> : tensor<i64>
  %true = hetc.constant dense<true> : tensor<i1>
  // expected-error @+1 {{node 'loop' (Loop) runs no iterations, and its scan output 0 is an empty tensor, which hetc does not represent}}
  %out:2 = hetc.onnx.loop(%m, %true, %x) {node_name = "loop"} : (tensor<i64>, tensor<i1>, tensor<4xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>, %acc: tensor<*xf32>):
    hetc.onnx.yield %cond, %acc, %acc : tensor<i1>, tensor<*xf32>, tensor<*xf32>
  }
  return %out#1 : tensor<*xf32>
}

// -----

// A position past the end of the sequence.
func.func @at_past_the_end(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<*xf32> {
  %two = hetc.constant dense<2> : tensor<i64>
  %seq = hetc.onnx.node "SequenceConstruct"(%a, %b) {node_name = "construct"} : (tensor<4xf32>, tensor<4xf32>) -> !hetc.onnx_sequence
  // expected-error @+1 {{node 'at' (SequenceAt) reads position 2 of a sequence of 2 elements}}
  %r = hetc.onnx.node "SequenceAt"(%seq, %two) {node_name = "at"} : (!hetc.onnx_sequence, tensor<i64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// A sequence split at positions the graph's inputs give.
func.func @split_by_data(%x: tensor<4xf32>, %sizes: tensor<2xi64>) -> tensor<*xf32> {
  %zero = hetc.constant dense<0> : tensor<i64>
  // expected-error @+1 {{node 'split' (SplitToSequence) splits into pieces whose sizes do not evaluate to constants}}
  %seq = hetc.onnx.node "SplitToSequence"(%x, %sizes) {node_name = "split"} : (tensor<4xf32>, tensor<2xi64>) -> !hetc.onnx_sequence
  %r = hetc.onnx.node "SequenceAt"(%seq, %zero) {node_name = "at"} : (!hetc.onnx_sequence, tensor<i64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// A body that does nothing (what constant folding leaves of a pass-through body) still counts:
// a trip count past the bound is refused, not unrolled for ever.
func.func @empty_body(%x: tensor<4xf32>) -> tensor<*xf32> {
  %m = hetc.constant dense<9223372036854775807> : tensor<i64>
  %true = hetc.constant dense<true> : tensor<i1>
  // expected-error @+1 {{node 'loop' (Loop) runs 9223372036854775807 iterations of a body of 0 nodes: unrolled, more than 65536 nodes, which hetc does not unroll}}
  %out = hetc.onnx.loop(%m, %true, %x) {node_name = "loop"} : (tensor<i64>, tensor<i1>, tensor<4xf32>) -> (tensor<*xf32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>, %acc: tensor<*xf32>):
    hetc.onnx.yield %cond, %acc : tensor<i1>, tensor<*xf32>
  }
  return %out : tensor<*xf32>
}

// -----

// A split into more pieces than hetc unrolls.
func.func @too_many_pieces(%x: tensor<100000xf32>) -> tensor<*xf32> {
  %zero = hetc.constant dense<0> : tensor<i64>
  // expected-error @+1 {{node 'split' (SplitToSequence) splits into more than 65536 pieces, which hetc does not unroll}}
  %seq = hetc.onnx.node "SplitToSequence"(%x) {node_name = "split", onnx_attrs = {axis = 0 : i64}} : (tensor<100000xf32>) -> !hetc.onnx_sequence
  %r = hetc.onnx.node "SequenceAt"(%seq, %zero) {node_name = "at"} : (!hetc.onnx_sequence, tensor<i64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// A sequence inserted into a sequence: not a tensor element.
func.func @sequence_of_sequences(%a: tensor<4xf32>) -> tensor<*xf32> {
  %inner = hetc.onnx.node "SequenceConstruct"(%a) {node_name = "inner"} : (tensor<4xf32>) -> !hetc.onnx_sequence
  %outer = hetc.onnx.node "SequenceEmpty"() {node_name = "outer"} : () -> !hetc.onnx_sequence
  // expected-error @+1 {{node 'insert' (SequenceInsert) inserts a value that is not a tensor}}
  %both = hetc.onnx.node "SequenceInsert"(%outer, %inner) {node_name = "insert"} : (!hetc.onnx_sequence, !hetc.onnx_sequence) -> !hetc.onnx_sequence
  %r = hetc.onnx.node "ConcatFromSequence"(%both) {node_name = "concat", onnx_attrs = {axis = 0 : i64}} : (!hetc.onnx_sequence) -> tensor<*xf32>
  return %r : tensor<*xf32>
}
