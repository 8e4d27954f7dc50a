// RUN: hetc-opt %s --hetc-fold-shapes -split-input-file | FileCheck %s
// RUN: hetc-opt %s --hetc-fold-shapes -split-input-file | FileCheck %s --check-prefix=GONE

// Nothing of a loop or a sequence is left.
// GONE-NOT: hetc.onnx.loop
// GONE-NOT: Sequence
// GONE-NOT: onnx_sequence

// torch 1.13's repeat_interleave of the last axis of x [B, S, 3] by 2, as GPT-J's rotary tables
// export: the trip count is the axis's size (Shape -> Gather), each iteration takes element i of
// the split tensor and appends its expansion to the carried sequence. Unrolled: three Slices of
// x, each expanded, concatenated; no loop or sequence is left.
// CHECK-LABEL: func.func @repeat_interleave
// CHECK-COUNT-3: hetc.onnx.node "Slice"(%arg0
// CHECK: hetc.onnx.node "Concat"({{.*}}) {node_name = "concat", onnx_attrs = {axis = 2 : i64}}
// CHECK-SAME: -> tensor<?x?x6xf32>
func.func @repeat_interleave(%x: tensor<?x?x3xf32>) -> tensor<*xf32> {
  %axis = hetc.constant dense<2> : tensor<i64>
  %two = hetc.constant dense<[1, 1, 2]> : tensor<3xi64>
  %ones = hetc.constant dense<1> : tensor<3xi64>
  %true = hetc.constant dense<true> : tensor<i1>
  %shape = hetc.onnx.node "Shape"(%x) {node_name = "shape"} : (tensor<?x?x3xf32>) -> tensor<3xi64>
  %n = hetc.onnx.node "Gather"(%shape, %axis) {node_name = "n", onnx_attrs = {axis = 0 : i64}} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %pieces = hetc.onnx.node "SplitToSequence"(%x, %ones) {node_name = "split", onnx_attrs = {axis = 2 : i64}} : (tensor<?x?x3xf32>, tensor<3xi64>) -> !hetc.onnx_sequence
  %empty = hetc.onnx.node "SequenceEmpty"() {node_name = "empty"} : () -> !hetc.onnx_sequence
  %out = hetc.onnx.loop(%n, %true, %empty) {node_name = "loop"} : (tensor<i64>, tensor<i1>, !hetc.onnx_sequence) -> (!hetc.onnx_sequence) {
  ^bb0(%i: tensor<i64>, %c: tensor<i1>, %seq: !hetc.onnx_sequence):
    %piece = hetc.onnx.node "SequenceAt"(%pieces, %i) {node_name = "at"} : (!hetc.onnx_sequence, tensor<i64>) -> tensor<*xf32>
    %pshape = hetc.onnx.node "Shape"(%piece) {node_name = "pshape"} : (tensor<*xf32>) -> tensor<3xi64>
    %target = hetc.onnx.node "Mul"(%pshape, %two) {node_name = "target"} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
    %e = hetc.onnx.node "Expand"(%piece, %target) {node_name = "expand"} : (tensor<*xf32>, tensor<3xi64>) -> tensor<*xf32>
    %next = hetc.onnx.node "SequenceInsert"(%seq, %e) {node_name = "insert"} : (!hetc.onnx_sequence, tensor<*xf32>) -> !hetc.onnx_sequence
    %c2 = hetc.onnx.node "Identity"(%c) {node_name = "cond"} : (tensor<i1>) -> tensor<i1>
    hetc.onnx.yield %c2, %next : tensor<i1>, !hetc.onnx_sequence
  }
  %r = hetc.onnx.node "ConcatFromSequence"(%out) {node_name = "concat", onnx_attrs = {axis = 2 : i64}} : (!hetc.onnx_sequence) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// A scan output: each iteration's value stacked on a new first axis (Unsqueeze, then Concat);
// the carried value threads through the copies of the body, the iteration number a constant.
// CHECK-LABEL: func.func @scan
// CHECK: %[[I0:.*]] = hetc.constant dense<0> : tensor<i64>
// CHECK: %[[A0:.*]] = hetc.onnx.node "Add"(%arg0, %[[I0]]) {node_name = "add (iteration 0)"}
// CHECK: %[[I1:.*]] = hetc.constant dense<1> : tensor<i64>
// CHECK: %[[A1:.*]] = hetc.onnx.node "Add"(%[[A0]], %[[I1]]) {node_name = "add (iteration 1)"}
// CHECK: %[[U0:.*]] = hetc.onnx.node "Unsqueeze"(%[[A0]],
// CHECK: %[[U1:.*]] = hetc.onnx.node "Unsqueeze"(%[[A1]],
// CHECK: %[[S:.*]] = hetc.onnx.node "Concat"(%[[U0]], %[[U1]]) {node_name = "loop/scan", onnx_attrs = {axis = 0 : i64}}
// CHECK: return %[[A1]], %[[S]]
func.func @scan(%x: tensor<4xi64>) -> (tensor<*xi64>, tensor<*xi64>) {
  %m = hetc.constant dense<2> : tensor<i64>
  %none = hetc.onnx.none
  %out:2 = hetc.onnx.loop(%m, %none, %x) {node_name = "loop"} : (tensor<i64>, none, tensor<4xi64>) -> (tensor<*xi64>, tensor<*xi64>) {
  ^bb0(%i: tensor<i64>, %c: tensor<i1>, %acc: tensor<*xi64>):
    %next = hetc.onnx.node "Add"(%acc, %i) {node_name = "add"} : (tensor<*xi64>, tensor<i64>) -> tensor<*xi64>
    hetc.onnx.yield %c, %next, %next : tensor<i1>, tensor<*xi64>, tensor<*xi64>
  }
  return %out#0, %out#1 : tensor<*xi64>, tensor<*xi64>
}

// -----

// A sequence holding a value that a later step replaces: the concatenation of a first loop's
// sequence, put in a second sequence that a second loop (as many iterations as the first
// sequence's length) reads. Each replacement reaches the sequences holding the value.
// CHECK-LABEL: func.func @chained
// CHECK-NOT: hetc.onnx.loop
// CHECK: hetc.onnx.node "Concat"({{.*}}) {node_name = "concat", onnx_attrs = {axis = 0 : i64}}
// CHECK-SAME: -> tensor<3xf32>
// CHECK: hetc.onnx.node "Add"({{.*}}) {node_name = "add (iteration 2)"}
func.func @chained(%x: tensor<3xf32>) -> tensor<*xf32> {
  %m = hetc.constant dense<3> : tensor<i64>
  %zero = hetc.constant dense<0> : tensor<i64>
  %true = hetc.constant dense<true> : tensor<i1>
  %empty = hetc.onnx.node "SequenceEmpty"() {node_name = "empty"} : () -> !hetc.onnx_sequence
  %seq = hetc.onnx.loop(%m, %true, %empty) {node_name = "first"} : (tensor<i64>, tensor<i1>, !hetc.onnx_sequence) -> (!hetc.onnx_sequence) {
  ^bb0(%i: tensor<i64>, %c: tensor<i1>, %s: !hetc.onnx_sequence):
    %f = hetc.onnx.node "Cast"(%i) {node_name = "cast", onnx_attrs = {to = 1 : i64}} : (tensor<i64>) -> tensor<f32>
    %u = hetc.onnx.node "Unsqueeze"(%f, %zero) {node_name = "unsqueeze"} : (tensor<f32>, tensor<i64>) -> tensor<*xf32>
    %next = hetc.onnx.node "SequenceInsert"(%s, %u) {node_name = "insert"} : (!hetc.onnx_sequence, tensor<*xf32>) -> !hetc.onnx_sequence
    hetc.onnx.yield %c, %next : tensor<i1>, !hetc.onnx_sequence
  }
  %n = hetc.onnx.node "SequenceLength"(%seq) {node_name = "length"} : (!hetc.onnx_sequence) -> tensor<i64>
  %cat = hetc.onnx.node "ConcatFromSequence"(%seq) {node_name = "concat", onnx_attrs = {axis = 0 : i64}} : (!hetc.onnx_sequence) -> tensor<*xf32>
  %s2 = hetc.onnx.node "SequenceConstruct"(%cat) {node_name = "construct"} : (tensor<*xf32>) -> !hetc.onnx_sequence
  %out = hetc.onnx.loop(%n, %true, %x) {node_name = "second"} : (tensor<i64>, tensor<i1>, tensor<3xf32>) -> (tensor<*xf32>) {
  ^bb0(%i: tensor<i64>, %c: tensor<i1>, %acc: tensor<*xf32>):
    %e = hetc.onnx.node "SequenceAt"(%s2, %zero) {node_name = "at"} : (!hetc.onnx_sequence, tensor<i64>) -> tensor<*xf32>
    %next = hetc.onnx.node "Add"(%acc, %e) {node_name = "add"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
    hetc.onnx.yield %c, %next : tensor<i1>, tensor<*xf32>
  }
  return %out : tensor<*xf32>
}

// -----

// A loop hetc cannot unroll (its trip count is the data) in the branch of an If that the shapes
// decide against: erased with the branch, not refused.
// CHECK-LABEL: func.func @untaken_branch
// CHECK-NOT: hetc.onnx.loop
// CHECK: return %arg0
func.func @untaken_branch(%x: tensor<4xf32>, %m: tensor<i64>) -> tensor<*xf32> {
  %true = hetc.constant dense<true> : tensor<i1>
  %four = hetc.constant dense<4> : tensor<1xi64>
  %shape = hetc.onnx.node "Shape"(%x) {node_name = "shape"} : (tensor<4xf32>) -> tensor<1xi64>
  %cond = hetc.onnx.node "Equal"(%shape, %four) {node_name = "cond"} : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi1>
  %looped = hetc.onnx.loop(%m, %true, %x) {node_name = "loop"} : (tensor<i64>, tensor<i1>, tensor<4xf32>) -> (tensor<*xf32>) {
  ^bb0(%i: tensor<i64>, %c: tensor<i1>, %acc: tensor<*xf32>):
    %n = hetc.onnx.node "Neg"(%acc) {node_name = "neg"} : (tensor<*xf32>) -> tensor<*xf32>
    hetc.onnx.yield %c, %n : tensor<i1>, tensor<*xf32>
  }
  %r = hetc.onnx.node "If"(%cond, %x, %looped) {node_name = "if"} : (tensor<1xi1>, tensor<4xf32>, tensor<*xf32>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// A loop with no trip count (a while loop) in the branch the shapes decide against: erased with
// the branch, not refused.
// CHECK-LABEL: func.func @untaken_while
// CHECK-NOT: hetc.onnx.loop
// CHECK: return %arg0
func.func @untaken_while(%x: tensor<4xf32>, %c: tensor<i1>) -> tensor<*xf32> {
  %none = hetc.onnx.none
  %four = hetc.constant dense<4> : tensor<1xi64>
  %shape = hetc.onnx.node "Shape"(%x) {node_name = "shape"} : (tensor<4xf32>) -> tensor<1xi64>
  %cond = hetc.onnx.node "Equal"(%shape, %four) {node_name = "cond"} : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi1>
  %looped = hetc.onnx.loop(%none, %c, %x) {node_name = "while"} : (none, tensor<i1>, tensor<4xf32>) -> (tensor<*xf32>) {
  ^bb0(%i: tensor<i64>, %cc: tensor<i1>, %acc: tensor<*xf32>):
    %n = hetc.onnx.node "Neg"(%acc) {node_name = "neg"} : (tensor<*xf32>) -> tensor<*xf32>
    hetc.onnx.yield %cc, %n : tensor<i1>, tensor<*xf32>
  }
  %r = hetc.onnx.node "If"(%cond, %x, %looped) {node_name = "if"} : (tensor<1xi1>, tensor<4xf32>, tensor<*xf32>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}
