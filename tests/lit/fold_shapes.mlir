// RUN: hetc-opt %s --hetc-fold-shapes --hetc-fold-constants -split-input-file | FileCheck %s

// q.view(b, s, heads, head_dim) with b and s read back by size(): Shape -> Gather -> Unsqueeze ->
// Concat. Both symbolic entries are the input's own dimensions at their index: 0.
// CHECK-LABEL: func.func @view_from_size
// CHECK: %[[T:.*]] = hetc.constant dense<[0, 0, 4, 32]> : tensor<4xi64>
// CHECK: hetc.onnx.node "Reshape"(%{{.*}}, %[[T]]) {{.*}} -> tensor<?x?x4x32xf32>
func.func @view_from_size(%x: tensor<?x?x128xf32> {hetc.dims = ["batch", "seq", ""]}) -> tensor<*xf32> {
  %shape = hetc.onnx.node "Shape"(%x) {node_name = "Shape"} : (tensor<?x?x128xf32>) -> tensor<3xi64>
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %b = hetc.onnx.node "Gather"(%shape, %i0) {node_name = "Gather_b", onnx_attrs = {axis = 0 : i64}} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %s = hetc.onnx.node "Gather"(%shape, %i1) {node_name = "Gather_s", onnx_attrs = {axis = 0 : i64}} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %a0 = hetc.constant dense<[0]> : tensor<1xi64>
  %bu = hetc.onnx.node "Unsqueeze"(%b, %a0) {node_name = "Unsqueeze_b"} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %su = hetc.onnx.node "Unsqueeze"(%s, %a0) {node_name = "Unsqueeze_s"} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %hd = hetc.constant dense<[4, 32]> : tensor<2xi64>
  %target = hetc.onnx.node "Concat"(%bu, %su, %hd) {node_name = "Concat", onnx_attrs = {axis = 0 : i64}} : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = hetc.onnx.node "Reshape"(%x, %target) {node_name = "Reshape"} : (tensor<?x?x128xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// transformers 4.48+: hidden_shape = (*x.shape[:-1], -1, head_dim), a Slice of the Shape. The
// literal -1 is what the element count leaves: 128 / 32 heads.
// CHECK-LABEL: func.func @view_hidden_shape
// CHECK: %[[T:.*]] = hetc.constant dense<[0, 0, 4, 32]> : tensor<4xi64>
// CHECK: hetc.onnx.node "Reshape"(%{{.*}}, %[[T]])
func.func @view_hidden_shape(%x: tensor<?x?x128xf32> {hetc.dims = ["batch", "seq", ""]}) -> tensor<*xf32> {
  %shape = hetc.onnx.node "Shape"(%x) {node_name = "Shape"} : (tensor<?x?x128xf32>) -> tensor<3xi64>
  %st = hetc.constant dense<[0]> : tensor<1xi64>
  %en = hetc.constant dense<[-1]> : tensor<1xi64>
  %lead = hetc.onnx.node "Slice"(%shape, %st, %en) {node_name = "Slice"} : (tensor<3xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %tail = hetc.constant dense<[-1, 32]> : tensor<2xi64>
  %target = hetc.onnx.node "Concat"(%lead, %tail) {node_name = "Concat", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = hetc.onnx.node "Reshape"(%x, %target) {node_name = "Reshape"} : (tensor<?x?x128xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// The merge back, reshape(b, s, heads * head_dim), of the transposed attention output, with b
// and s read from the value before the transpose: the transpose moved the sequence to index 1,
// where the target has it, so both entries are the input's own dimensions.
// CHECK-LABEL: func.func @merge_heads
// CHECK: %[[T:.*]] = hetc.constant dense<[0, 0, 128]> : tensor<3xi64>
// CHECK: hetc.onnx.node "Reshape"(%{{.*}}, %[[T]]) {{.*}} -> tensor<?x?x128xf32>
func.func @merge_heads(%x: tensor<?x4x?x32xf32> {hetc.dims = ["batch", "", "seq", ""]}) -> tensor<*xf32> {
  %t = hetc.onnx.node "Transpose"(%x) {node_name = "Transpose", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<?x4x?x32xf32>) -> tensor<*xf32>
  %shape = hetc.onnx.node "Shape"(%x) {node_name = "Shape"} : (tensor<?x4x?x32xf32>) -> tensor<4xi64>
  %i0 = hetc.constant dense<0> : tensor<i64>
  %i2 = hetc.constant dense<2> : tensor<i64>
  %b = hetc.onnx.node "Gather"(%shape, %i0) {node_name = "Gather_b", onnx_attrs = {axis = 0 : i64}} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %s = hetc.onnx.node "Gather"(%shape, %i2) {node_name = "Gather_s", onnx_attrs = {axis = 0 : i64}} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %a0 = hetc.constant dense<[0]> : tensor<1xi64>
  %bu = hetc.onnx.node "Unsqueeze"(%b, %a0) {node_name = "Unsqueeze_b"} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %su = hetc.onnx.node "Unsqueeze"(%s, %a0) {node_name = "Unsqueeze_s"} : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %f = hetc.constant dense<[128]> : tensor<1xi64>
  %target = hetc.onnx.node "Concat"(%bu, %su, %f) {node_name = "Concat", onnx_attrs = {axis = 0 : i64}} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %r = hetc.onnx.node "Reshape"(%t, %target) {node_name = "Reshape"} : (tensor<*xf32>, tensor<3xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// torch's expand(b, n_rep, s, d) exports the target through Where(Equal(shape, -1), 1, shape):
// a dimension is never -1, so the Where picks the shape, and the entries equal to the input's
// symbolic dimensions become 1 (the static ones stay what they are).
// CHECK-LABEL: func.func @expand_where_equal
// CHECK: %[[T:.*]] = hetc.constant dense<[1, 2, 3, 1, 16]> : tensor<5xi64>
// CHECK: hetc.onnx.node "Expand"(%{{.*}}, %[[T]])
func.func @expand_where_equal(%x: tensor<?x2x1x?x16xf32> {hetc.dims = ["batch", "", "", "past", ""]}) -> tensor<*xf32> {
  %shape = hetc.onnx.node "Shape"(%x) {node_name = "Shape"} : (tensor<?x2x1x?x16xf32>) -> tensor<5xi64>
  %i0 = hetc.constant dense<[0, 1]> : tensor<2xi64>
  %i3 = hetc.constant dense<[3, 4]> : tensor<2xi64>
  %head = hetc.onnx.node "Gather"(%shape, %i0) {node_name = "Gather_h", onnx_attrs = {axis = 0 : i64}} : (tensor<5xi64>, tensor<2xi64>) -> tensor<2xi64>
  %tail = hetc.onnx.node "Gather"(%shape, %i3) {node_name = "Gather_t", onnx_attrs = {axis = 0 : i64}} : (tensor<5xi64>, tensor<2xi64>) -> tensor<2xi64>
  %rep = hetc.constant dense<[3]> : tensor<1xi64>
  %target = hetc.onnx.node "Concat"(%head, %rep, %tail) {node_name = "Concat", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<5xi64>
  %m1 = hetc.constant dense<-1> : tensor<5xi64>
  %eq = hetc.onnx.node "Equal"(%target, %m1) {node_name = "Equal"} : (tensor<5xi64>, tensor<5xi64>) -> tensor<5xi1>
  %ones = hetc.constant dense<1> : tensor<5xi64>
  %w = hetc.onnx.node "Where"(%eq, %ones, %target) {node_name = "Where"} : (tensor<5xi1>, tensor<5xi64>, tensor<5xi64>) -> tensor<5xi64>
  %e = hetc.onnx.node "Expand"(%x, %w) {node_name = "Expand"} : (tensor<?x2x1x?x16xf32>, tensor<5xi64>) -> tensor<*xf32>
  return %e : tensor<*xf32>
}

// -----

// Slices of the concatenated cache by its own length: k[:, :, 0:total] is "to the end";
// k[:, :, total - 1:] (the last position) starts at -1.
// CHECK-LABEL: func.func @slice_by_own_length
// CHECK-DAG: %[[END:.*]] = hetc.constant dense<9223372036854775807> : tensor<1xi64>
// CHECK-DAG: %[[ZERO:.*]] = hetc.constant dense<0> : tensor<1xi64>
// CHECK: hetc.onnx.node "Slice"(%[[K:.*]], %[[ZERO]], %[[END]], %{{.*}}) {{.*}} -> tensor<?x2x?x16xf32>
// CHECK: %[[LAST:.*]] = hetc.constant dense<-1> : tensor<1xi64>
// CHECK: hetc.onnx.node "Slice"(%[[K]], %[[LAST]], %{{.*}}, %{{.*}}) {{.*}} -> tensor<?x2x1x16xf32>
func.func @slice_by_own_length(%past: tensor<?x2x?x16xf32> {hetc.dims = ["batch", "", "past", ""]},
                               %new: tensor<?x2x?x16xf32> {hetc.dims = ["batch", "", "seq", ""]}) -> (tensor<*xf32>, tensor<*xf32>) {
  %k = hetc.onnx.node "Concat"(%past, %new) {node_name = "Concat_kv", onnx_attrs = {axis = 2 : i64}} : (tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<*xf32>
  %ks = hetc.onnx.node "Shape"(%k) {node_name = "Shape"} : (tensor<*xf32>) -> tensor<4xi64>
  %i2 = hetc.constant dense<[2]> : tensor<1xi64>
  %total = hetc.onnx.node "Gather"(%ks, %i2) {node_name = "Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<4xi64>, tensor<1xi64>) -> tensor<1xi64>
  %zero = hetc.constant dense<0> : tensor<1xi64>
  %all = hetc.onnx.node "Slice"(%k, %zero, %total, %i2) {node_name = "Slice_all"} : (tensor<*xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %one = hetc.constant dense<[1]> : tensor<1xi64>
  %start = hetc.onnx.node "Sub"(%total, %one) {node_name = "Sub"} : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %big = hetc.constant dense<[9223372036854775807]> : tensor<1xi64>
  %last = hetc.onnx.node "Slice"(%k, %start, %big, %i2) {node_name = "Slice_last"} : (tensor<*xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  return %all, %last : tensor<*xf32>, tensor<*xf32>
}

// -----

// Entries that are not the input's dimensions and more than one symbolic: left as computed.
// CHECK-LABEL: func.func @two_unknown_entries
// CHECK: %[[T:.*]] = hetc.onnx.node "Concat"
// CHECK: hetc.onnx.node "Reshape"(%{{.*}}, %[[T]])
func.func @two_unknown_entries(%x: tensor<?x?xf32> {hetc.dims = ["a", "b"]}, %y: tensor<?x?xf32> {hetc.dims = ["c", "d"]}) -> tensor<*xf32> {
  %shape = hetc.onnx.node "Shape"(%y) {node_name = "Shape"} : (tensor<?x?xf32>) -> tensor<2xi64>
  %one = hetc.constant dense<[1]> : tensor<1xi64>
  %target = hetc.onnx.node "Concat"(%shape, %one) {node_name = "Concat", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %r = hetc.onnx.node "Reshape"(%x, %target) {node_name = "Reshape"} : (tensor<?x?xf32>, tensor<3xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// torch.split(x, 16, dim=-1) (rotate-half, a fused gate/up): one Slice per piece.
// CHECK-LABEL: func.func @split_into_slices
// CHECK-DAG: %[[AX:.*]] = hetc.constant dense<3> : tensor<1xi64>
// CHECK-DAG: %[[ZERO:.*]] = hetc.constant dense<0> : tensor<1xi64>
// CHECK-DAG: %[[MID:.*]] = hetc.constant dense<16> : tensor<1xi64>
// CHECK-DAG: %[[END:.*]] = hetc.constant dense<32> : tensor<1xi64>
// CHECK-DAG: %[[A:.*]] = hetc.onnx.node "Slice"(%arg0, %[[ZERO]], %[[MID]], %[[AX]]) {node_name = "Split/piece0"}
// CHECK-DAG: %[[B:.*]] = hetc.onnx.node "Slice"(%arg0, %{{.*}}, %[[END]], %[[AX]]) {node_name = "Split/piece1"}
// CHECK: return %[[B]], %[[A]]
func.func @split_into_slices(%x: tensor<?x4x?x32xf32> {hetc.dims = ["batch", "", "seq", ""]}) -> (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) {
  %sizes = hetc.constant dense<[16, 16]> : tensor<2xi64>
  %a, %b = hetc.onnx.node "Split"(%x, %sizes) {node_name = "Split", onnx_attrs = {axis = -1 : i64}} : (tensor<?x4x?x32xf32>, tensor<2xi64>) -> (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>)
  return %b, %a : tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>
}

// -----

// The scores plus a mask whose shape nothing tells: the sum has the scores' dimensions, so
// flatten(2) of the attention output ([B, S, H, D] -> Concat(Shape[:2], [-1])) folds, its -1
// being 4 x 8.
// CHECK-LABEL: func.func @broadcast_with_unknown
// CHECK: hetc.onnx.node "Add"{{.*}} -> tensor<?x4x?x8xf32>
// CHECK: %[[T:.*]] = hetc.constant dense<[0, 0, 32]> : tensor<3xi64>
// CHECK: hetc.onnx.node "Reshape"(%{{.*}}, %[[T]])
func.func @broadcast_with_unknown(%s: tensor<?x4x?x8xf32> {hetc.dims = ["batch", "", "seq", ""]}, %raw: tensor<?xf32>, %dims: tensor<4xi64>) -> tensor<*xf32> {
  %m = hetc.onnx.node "Reshape"(%raw, %dims) {node_name = "Reshape_mask"} : (tensor<?xf32>, tensor<4xi64>) -> tensor<?x?x?x?xf32>
  %sum = hetc.onnx.node "Add"(%s, %m) {node_name = "Add"} : (tensor<?x4x?x8xf32>, tensor<?x?x?x?xf32>) -> tensor<*xf32>
  %t = hetc.onnx.node "Transpose"(%sum) {node_name = "Transpose", onnx_attrs = {perm = [0, 2, 1, 3]}} : (tensor<*xf32>) -> tensor<*xf32>
  %shape = hetc.onnx.node "Shape"(%t) {node_name = "Shape"} : (tensor<*xf32>) -> tensor<4xi64>
  %st = hetc.constant dense<[0]> : tensor<1xi64>
  %en = hetc.constant dense<[2]> : tensor<1xi64>
  %lead = hetc.onnx.node "Slice"(%shape, %st, %en) {node_name = "Slice"} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %m1 = hetc.constant dense<[-1]> : tensor<1xi64>
  %target = hetc.onnx.node "Concat"(%lead, %m1) {node_name = "Concat", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %r = hetc.onnx.node "Reshape"(%t, %target) {node_name = "Reshape"} : (tensor<*xf32>, tensor<3xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// repeat_kv as torch.stack([x] * 2, dim=2).flatten(1, 2): two Unsqueeze copies concatenated
// along their dimension of 1 are an Expand to 2 there; the flatten's [B, -1, T, D] has its -1
// resolved to 2 x 2 = 4 from the element count, so the cache length T takes the -1.
// CHECK-LABEL: func.func @stack_as_expand
// CHECK: %[[REP:.*]] = hetc.constant dense<[1, 1, 2, 1, 1]> : tensor<5xi64>
// CHECK: %[[E:.*]] = hetc.onnx.node "Expand"(%{{.*}}, %[[REP]]) {node_name = "Concat/as_expand"}
// CHECK: %[[T:.*]] = hetc.constant dense<[0, 4, -1, 16]> : tensor<4xi64>
// CHECK: hetc.onnx.node "Reshape"(%[[E]], %[[T]])
func.func @stack_as_expand(%kv: tensor<?x2x?x16xf32> {hetc.dims = ["batch", "", "total", ""]}) -> tensor<*xf32> {
  %a2 = hetc.constant dense<[2]> : tensor<1xi64>
  %a2b = hetc.constant dense<[2]> : tensor<1xi64>
  %u1 = hetc.onnx.node "Unsqueeze"(%kv, %a2) {node_name = "Unsqueeze_1"} : (tensor<?x2x?x16xf32>, tensor<1xi64>) -> tensor<?x2x1x?x16xf32>
  %u2 = hetc.onnx.node "Unsqueeze"(%kv, %a2b) {node_name = "Unsqueeze_2"} : (tensor<?x2x?x16xf32>, tensor<1xi64>) -> tensor<?x2x1x?x16xf32>
  %cat = hetc.onnx.node "Concat"(%u1, %u2) {node_name = "Concat", onnx_attrs = {axis = 2 : i64}} : (tensor<?x2x1x?x16xf32>, tensor<?x2x1x?x16xf32>) -> tensor<?x2x2x?x16xf32>
  %shape = hetc.onnx.node "Shape"(%cat) {node_name = "Shape"} : (tensor<?x2x2x?x16xf32>) -> tensor<5xi64>
  %s0 = hetc.constant dense<[0]> : tensor<1xi64>
  %e1 = hetc.constant dense<[1]> : tensor<1xi64>
  %s3 = hetc.constant dense<[3]> : tensor<1xi64>
  %e5 = hetc.constant dense<[5]> : tensor<1xi64>
  %lead = hetc.onnx.node "Slice"(%shape, %s0, %e1) {node_name = "Slice_a"} : (tensor<5xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %tail = hetc.onnx.node "Slice"(%shape, %s3, %e5) {node_name = "Slice_b"} : (tensor<5xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %m1 = hetc.constant dense<[-1]> : tensor<1xi64>
  %target = hetc.onnx.node "Concat"(%lead, %m1, %tail) {node_name = "Concat_t", onnx_attrs = {axis = 0 : i64}} : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = hetc.onnx.node "Reshape"(%cat, %target) {node_name = "Reshape"} : (tensor<?x2x2x?x16xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// torch's squeeze(1) of a dimension the trace could not see, as the importer flattens it:
// If(Shape(x)[1] == 1; then Squeeze(x, 1); else x). The dimension is 1, so the If is its then
// branch.
// CHECK-LABEL: func.func @if_of_known_condition
// CHECK: %[[SQ:.*]] = hetc.onnx.node "Squeeze"
// CHECK: return %[[SQ]]
func.func @if_of_known_condition(%x: tensor<?x1x?x16xf32> {hetc.dims = ["batch", "", "seq", ""]}) -> tensor<*xf32> {
  %shape = hetc.onnx.node "Shape"(%x) {node_name = "Shape"} : (tensor<?x1x?x16xf32>) -> tensor<4xi64>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %d = hetc.onnx.node "Gather"(%shape, %i1) {node_name = "Gather", onnx_attrs = {axis = 0 : i64}} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %one = hetc.constant dense<1> : tensor<i64>
  %cond = hetc.onnx.node "Equal"(%d, %one) {node_name = "Equal"} : (tensor<i64>, tensor<i64>) -> tensor<i1>
  %axes = hetc.constant dense<[1]> : tensor<1xi64>
  %sq = hetc.onnx.node "Squeeze"(%x, %axes) {node_name = "Squeeze"} : (tensor<?x1x?x16xf32>, tensor<1xi64>) -> tensor<?x?x16xf32>
  %id = hetc.onnx.node "Identity"(%x) {node_name = "Identity"} : (tensor<?x1x?x16xf32>) -> tensor<?x1x?x16xf32>
  %r = hetc.onnx.node "If"(%cond, %sq, %id) {node_name = "If"} : (tensor<i1>, tensor<?x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// GPT-2's stored causal buffer: where(bias, scores, finfo.min) is scores + where(bias, 0, min),
// and the padding mask added after it joins it: scores + (causal + padding).
// CHECK-LABEL: func.func @where_as_mask_add
// CHECK: %[[CAUSAL:.*]] = hetc.onnx.node "Where"(%arg2, %{{.*}}, %{{.*}}) {node_name = "Where/mask"}
// CHECK: %[[MASKS:.*]] = hetc.onnx.node "Add"(%[[CAUSAL]], %arg3) {node_name = "Add/masks"}
// CHECK: hetc.onnx.node "Add"(%[[S:.*]], %[[MASKS]]) {node_name = "Add"}
func.func @where_as_mask_add(%q: tensor<?x4x?x8xf32> {hetc.dims = ["batch", "", "seq", ""]}, %w: tensor<8x8xf32>,
                             %bias: tensor<?x?xi1>, %pad: tensor<?x1x1x?xf32>) -> tensor<*xf32> {
  %wk = hetc.weight "k" : tensor<8x8xf32>
  %s = hetc.onnx.node "MatMul"(%q, %wk) {node_name = "MatMul"} : (tensor<?x4x?x8xf32>, tensor<8x8xf32>) -> tensor<?x4x?x8xf32>
  %min = hetc.constant dense<-3.40282347e+38> : tensor<f32>
  %masked = hetc.onnx.node "Where"(%bias, %s, %min) {node_name = "Where"} : (tensor<?x?xi1>, tensor<?x4x?x8xf32>, tensor<f32>) -> tensor<*xf32>
  %sum = hetc.onnx.node "Add"(%masked, %pad) {node_name = "Add"} : (tensor<*xf32>, tensor<?x1x1x?xf32>) -> tensor<*xf32>
  %p = hetc.onnx.node "Softmax"(%sum) {node_name = "Softmax"} : (tensor<*xf32>) -> tensor<*xf32>
  return %p : tensor<*xf32>
}

// -----

// GPT-J divides by sqrt(head_dim) after its causal where: (scores + causal) / c is
// scores / c + causal / c, and the padding added after it joins the scaled causal mask.
// CHECK-LABEL: func.func @scale_after_mask
// CHECK-DAG: %[[SCALED:.*]] = hetc.onnx.node "Div"(%[[S:.*]], %[[C:.*]]) {node_name = "Div/scores"}
// CHECK-DAG: %[[CAUSAL:.*]] = hetc.onnx.node "Div"(%{{.*}}, %[[C]]) {node_name = "Div/mask"}
// CHECK: %[[MASKS:.*]] = hetc.onnx.node "Add"(%[[CAUSAL]], %arg3) {node_name = "Add/masks"}
// CHECK: hetc.onnx.node "Add"(%[[SCALED]], %[[MASKS]]) {node_name = "Add"}
func.func @scale_after_mask(%q: tensor<?x4x?x8xf32> {hetc.dims = ["batch", "", "seq", ""]}, %w: tensor<8x8xf32>,
                            %bias: tensor<?x?xi1>, %pad: tensor<?x1x1x?xf32>) -> tensor<*xf32> {
  %wk = hetc.weight "k" : tensor<8x8xf32>
  %s = hetc.onnx.node "MatMul"(%q, %wk) {node_name = "MatMul"} : (tensor<?x4x?x8xf32>, tensor<8x8xf32>) -> tensor<?x4x?x8xf32>
  %min = hetc.constant dense<-3.40282347e+38> : tensor<f32>
  %masked = hetc.onnx.node "Where"(%bias, %s, %min) {node_name = "Where"} : (tensor<?x?xi1>, tensor<?x4x?x8xf32>, tensor<f32>) -> tensor<*xf32>
  %c = hetc.constant dense<2.82842708> : tensor<f32>
  %scaled = hetc.onnx.node "Div"(%masked, %c) {node_name = "Div"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %sum = hetc.onnx.node "Add"(%scaled, %pad) {node_name = "Add"} : (tensor<*xf32>, tensor<?x1x1x?xf32>) -> tensor<*xf32>
  %p = hetc.onnx.node "Softmax"(%sum) {node_name = "Softmax"} : (tensor<*xf32>) -> tensor<*xf32>
  return %p : tensor<*xf32>
}

// -----

// A scale of a projection plus its bias (OPT's q_proj * scaling) is left alone: the bias is a
// weight, no mask.
// CHECK-LABEL: func.func @scale_of_biased_projection
// CHECK: hetc.onnx.node "Mul"(%{{.*}}, %{{.*}}) {node_name = "Mul"}
// CHECK-NOT: Mul/scores
func.func @scale_of_biased_projection(%q: tensor<?x4x?x8xf32> {hetc.dims = ["batch", "", "seq", ""]}) -> tensor<*xf32> {
  %wk = hetc.weight "k" : tensor<8x8xf32>
  %bk = hetc.weight "k.bias" : tensor<8xf32>
  %a = hetc.onnx.node "MatMul"(%q, %wk) {node_name = "MatMul"} : (tensor<?x4x?x8xf32>, tensor<8x8xf32>) -> tensor<?x4x?x8xf32>
  %sum = hetc.onnx.node "Add"(%a, %bk) {node_name = "Add"} : (tensor<?x4x?x8xf32>, tensor<8xf32>) -> tensor<*xf32>
  %c = hetc.constant dense<0.125> : tensor<f32>
  %scaled = hetc.onnx.node "Mul"(%sum, %c) {node_name = "Mul"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  return %scaled : tensor<*xf32>
}

// -----

// baddbmm(zeros, q, k^T, beta=1, alpha=a) (GPT-NeoX): the product plus 1 * zeros of its own
// shape is the product.
// CHECK-LABEL: func.func @add_of_zeros
// CHECK: %[[P:.*]] = hetc.onnx.node "MatMul"
// CHECK: return %[[P]]
func.func @add_of_zeros(%q: tensor<?x?x8xf32> {hetc.dims = ["bh", "seq", ""]}) -> tensor<*xf32> {
  %wk = hetc.weight "k" : tensor<8x8xf32>
  %p = hetc.onnx.node "MatMul"(%q, %wk) {node_name = "MatMul"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %shape = hetc.onnx.node "Shape"(%q) {node_name = "Shape"} : (tensor<?x?x8xf32>) -> tensor<3xi64>
  %z = hetc.onnx.node "ConstantOfShape"(%shape) {node_name = "ConstantOfShape", onnx_attrs = {value = dense<0.0> : tensor<1xf32>}} : (tensor<3xi64>) -> tensor<?x?x8xf32>
  %one = hetc.constant dense<1.0> : tensor<f32>
  %bz = hetc.onnx.node "Mul"(%z, %one) {node_name = "Mul_beta"} : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %sum = hetc.onnx.node "Add"(%p, %bz) {node_name = "Add"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<*xf32>
  return %sum : tensor<*xf32>
}

// -----

// GPT-NeoX's scores: q and k flattened to [B * H, ., D], bmm with k transposed, scaled, and
// unflattened to [B, H, S, T], are the product over [B, H, ., .] scaled.
// CHECK-LABEL: func.func @unflatten_batched_product
// CHECK: %[[KT:.*]] = hetc.onnx.node "Transpose"(%arg1) {node_name = "Transpose/heads", onnx_attrs = {perm = [0, 1, 3, 2]}}
// CHECK: %[[P:.*]] = hetc.onnx.node "MatMul"(%arg0, %[[KT]]) {node_name = "MatMul/heads"}
// CHECK: %[[S:.*]] = hetc.onnx.node "Mul"(%[[P]], %{{.*}}) {node_name = "Mul/heads"}
// CHECK: return %[[S]]
func.func @unflatten_batched_product(%q: tensor<?x4x?x8xf32> {hetc.dims = ["batch", "", "seq", ""]},
                                     %k: tensor<?x4x?x8xf32> {hetc.dims = ["batch", "", "total", ""]}) -> tensor<*xf32> {
  %qs = hetc.onnx.node "Shape"(%q) {node_name = "Shape_q"} : (tensor<?x4x?x8xf32>) -> tensor<4xi64>
  %ks = hetc.onnx.node "Shape"(%k) {node_name = "Shape_k"} : (tensor<?x4x?x8xf32>) -> tensor<4xi64>
  %i0 = hetc.constant dense<[0]> : tensor<1xi64>
  %i2 = hetc.constant dense<[2]> : tensor<1xi64>
  %b = hetc.onnx.node "Gather"(%qs, %i0) {node_name = "Gather_b", onnx_attrs = {axis = 0 : i64}} : (tensor<4xi64>, tensor<1xi64>) -> tensor<1xi64>
  %s = hetc.onnx.node "Gather"(%qs, %i2) {node_name = "Gather_s", onnx_attrs = {axis = 0 : i64}} : (tensor<4xi64>, tensor<1xi64>) -> tensor<1xi64>
  %t = hetc.onnx.node "Gather"(%ks, %i2) {node_name = "Gather_t", onnx_attrs = {axis = 0 : i64}} : (tensor<4xi64>, tensor<1xi64>) -> tensor<1xi64>
  %four = hetc.constant dense<[4]> : tensor<1xi64>
  %bh = hetc.onnx.node "Mul"(%b, %four) {node_name = "Mul_bh"} : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %d = hetc.constant dense<[8]> : tensor<1xi64>
  %q3t = hetc.onnx.node "Concat"(%bh, %s, %d) {node_name = "Concat_q", onnx_attrs = {axis = 0 : i64}} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %k3t = hetc.onnx.node "Concat"(%bh, %t, %d) {node_name = "Concat_k", onnx_attrs = {axis = 0 : i64}} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %q3 = hetc.onnx.node "Reshape"(%q, %q3t) {node_name = "Reshape_q"} : (tensor<?x4x?x8xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %k3 = hetc.onnx.node "Reshape"(%k, %k3t) {node_name = "Reshape_k"} : (tensor<?x4x?x8xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %kT = hetc.onnx.node "Transpose"(%k3) {node_name = "Transpose", onnx_attrs = {perm = [0, 2, 1]}} : (tensor<?x?x8xf32>) -> tensor<?x8x?xf32>
  %p = hetc.onnx.node "MatMul"(%q3, %kT) {node_name = "MatMul"} : (tensor<?x?x8xf32>, tensor<?x8x?xf32>) -> tensor<?x?x?xf32>
  %alpha = hetc.constant dense<0.353553385> : tensor<f32>
  %sc = hetc.onnx.node "Mul"(%p, %alpha) {node_name = "Mul"} : (tensor<?x?x?xf32>, tensor<f32>) -> tensor<?x?x?xf32>
  %h = hetc.constant dense<[4]> : tensor<1xi64>
  %outt = hetc.onnx.node "Concat"(%b, %h, %s, %t) {node_name = "Concat_o", onnx_attrs = {axis = 0 : i64}} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %r = hetc.onnx.node "Reshape"(%sc, %outt) {node_name = "Reshape_o"} : (tensor<?x?x?xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// transformers 4.28: torch.gather(cos_cached.repeat(b, 1, 1, 1), 2, pos[:, None, :, None]
// .repeat(1, 1, 1, dim)) picks whole rows of the table: Gather of the rows by the positions,
// the unit axis restored.
// CHECK-LABEL: func.func @gather_elements_rows
// CHECK: %[[T:.*]] = hetc.constant dense<5.000000e-01> : tensor<64x16xf32>
// CHECK: %[[G:.*]] = hetc.onnx.node "Gather"(%[[T]], %arg0) {node_name = "GatherElements/rows"
// CHECK: %[[U:.*]] = hetc.onnx.node "Unsqueeze"(%[[G]], %{{.*}}) {node_name = "GatherElements/unit_axes"}
// CHECK: return %[[U]]
func.func @gather_elements_rows(%pos: tensor<?x?xi64> {hetc.dims = ["batch", "seq"]}) -> tensor<*xf32> {
  %table = hetc.constant dense<0.5> : tensor<1x1x64x16xf32>
  %ps = hetc.onnx.node "Shape"(%pos) {node_name = "Shape"} : (tensor<?x?xi64>) -> tensor<2xi64>
  %i0 = hetc.constant dense<[0]> : tensor<1xi64>
  %b = hetc.onnx.node "Gather"(%ps, %i0) {node_name = "Gather_b", onnx_attrs = {axis = 0 : i64}} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %ones = hetc.constant dense<[1, 1, 1]> : tensor<3xi64>
  %reps = hetc.onnx.node "Concat"(%b, %ones) {node_name = "Concat", onnx_attrs = {axis = 0 : i64}} : (tensor<1xi64>, tensor<3xi64>) -> tensor<4xi64>
  %data = hetc.onnx.node "Tile"(%table, %reps) {node_name = "Tile_table"} : (tensor<1x1x64x16xf32>, tensor<4xi64>) -> tensor<?x1x64x16xf32>
  %a1 = hetc.constant dense<[1]> : tensor<1xi64>
  %a3 = hetc.constant dense<[3]> : tensor<1xi64>
  %p1 = hetc.onnx.node "Unsqueeze"(%pos, %a1) {node_name = "Unsqueeze_1"} : (tensor<?x?xi64>, tensor<1xi64>) -> tensor<?x1x?xi64>
  %p3 = hetc.onnx.node "Unsqueeze"(%p1, %a3) {node_name = "Unsqueeze_3"} : (tensor<?x1x?xi64>, tensor<1xi64>) -> tensor<?x1x?x1xi64>
  %wide = hetc.constant dense<[1, 1, 1, 16]> : tensor<4xi64>
  %idx = hetc.onnx.node "Tile"(%p3, %wide) {node_name = "Tile_idx"} : (tensor<?x1x?x1xi64>, tensor<4xi64>) -> tensor<?x1x?x16xi64>
  %g = hetc.onnx.node "GatherElements"(%data, %idx) {node_name = "GatherElements", onnx_attrs = {axis = 2 : i64}} : (tensor<?x1x64x16xf32>, tensor<?x1x?x16xi64>) -> tensor<*xf32>
  return %g : tensor<*xf32>
}

// -----

// A Softmax of opset 11 whose input's rank the importer did not know: over the last axis of the
// [B, H, S, T] scores, it is opset 13's softmax over axis -1.
// CHECK-LABEL: func.func @softmax_before_13_last_axis
// CHECK: hetc.onnx.node "Softmax"(%{{.*}}) {node_name = "softmax", onnx_attrs = {axis = -1 : i64}}
func.func @softmax_before_13_last_axis(%q: tensor<?x2x?x4xf32>, %k: tensor<?x2x4x?xf32>) -> tensor<*xf32> {
  %s = hetc.onnx.node "MatMul"(%q, %k) {node_name = "scores"} : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<*xf32>
  %p = hetc.onnx.node "Softmax"(%s) {node_name = "softmax", onnx_attrs = {axis = 3 : i64, hetc.flattens_before_13 = 11 : i64}} : (tensor<*xf32>) -> tensor<*xf32>
  return %p : tensor<*xf32>
}

// -----

// A shape read back after F.pad: Pad adds its pads to each dimension (here 2 + 1 columns after
// 5, the axes given as opset 18's input), so the Pad is [batch, 8] and the Reshape of a
// [batch, 8] value to that shape keeps it as it is.
// CHECK-LABEL: func.func @shape_after_pad
// CHECK: hetc.onnx.node "Pad"({{.*}}) -> tensor<?x8xf32>
// CHECK: return %arg1
func.func @shape_after_pad(%x: tensor<?x5xf32> {hetc.dims = ["batch", ""]}, %y: tensor<?x8xf32> {hetc.dims = ["batch", ""]}) -> tensor<*xf32> {
  %pads = hetc.constant dense<[2, 1]> : tensor<2xi64>
  %none = hetc.onnx.none
  %axes = hetc.constant dense<[-1]> : tensor<1xi64>
  %p = hetc.onnx.node "Pad"(%x, %pads, %none, %axes) {node_name = "Pad"} : (tensor<?x5xf32>, tensor<2xi64>, none, tensor<1xi64>) -> tensor<*xf32>
  %shape = hetc.onnx.node "Shape"(%p) {node_name = "Shape"} : (tensor<*xf32>) -> tensor<2xi64>
  %r = hetc.onnx.node "Reshape"(%y, %shape) {node_name = "Reshape"} : (tensor<?x8xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// A projection plus its bias plus the embeddings (ONNX Runtime's fused GPT-2 adds its first
// attention's output projection, its bias and EmbedLayerNormalization's sum in that order) is no
// sum of masks, though the contrib op reads only inputs and weights: no Softmax reads it, and the
// adds are left as they are.
// CHECK-LABEL: func.func @residual_is_no_mask
// CHECK: %[[YB:.*]] = hetc.onnx.node "Add"(%{{.*}}, %{{.*}}) {node_name = "bias"}
// CHECK-NEXT: hetc.onnx.node "Add"(%[[YB]], %{{.*}}) {node_name = "residual"}
func.func @residual_is_no_mask(%ids: tensor<?x?xi32> {hetc.dims = ["batch", "seq"]},
                               %pos: tensor<?x?xi32> {hetc.dims = ["batch", "seq"]}) -> tensor<*xf32> {
  %none = hetc.onnx.none
  %wte = hetc.weight "wte" : tensor<16x8xf32>
  %wpe = hetc.weight "wpe" : tensor<32x8xf32>
  %g = hetc.weight "ln.weight" : tensor<8xf32>
  %w = hetc.weight "c_proj" : tensor<8x8xf32>
  %b = hetc.weight "c_proj.bias" : tensor<8xf32>
  %e:3 = hetc.onnx.node "EmbedLayerNormalization"(%ids, %none, %wte, %wpe, %none, %g, %b, %none, %pos) {node_name = "embed", onnx_attrs = {epsilon = 1.0e-05 : f32}} : (tensor<?x?xi32>, none, tensor<16x8xf32>, tensor<32x8xf32>, none, tensor<8xf32>, tensor<8xf32>, none, tensor<?x?xi32>) -> (tensor<*xf32>, tensor<*xi32>, tensor<*xf32>)
  %y = hetc.onnx.node "MatMul"(%e#0, %w) {node_name = "MatMul"} : (tensor<*xf32>, tensor<8x8xf32>) -> tensor<*xf32>
  %yb = hetc.onnx.node "Add"(%y, %b) {node_name = "bias"} : (tensor<*xf32>, tensor<8xf32>) -> tensor<*xf32>
  %sum = hetc.onnx.node "Add"(%yb, %e#2) {node_name = "residual"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  return %sum : tensor<*xf32>
}

// -----

// An Einsum's shape from its equation: the scores' heads from q's, and an implicit output (the
// letters that occur once, alphabetically: "dq") led by the values' head_dim.
// CHECK-LABEL: func.func @einsum_shape
// CHECK-DAG: %[[H:.*]] = hetc.constant dense<4> : tensor<i64>
// CHECK-DAG: %[[D:.*]] = hetc.constant dense<8> : tensor<i64>
// CHECK: return %[[H]], %[[D]]
func.func @einsum_shape(%q: tensor<?x4x?x8xf32> {hetc.dims = ["batch", "", "seq", ""]}, %k: tensor<?x4x?x8xf32> {hetc.dims = ["batch", "", "total", ""]}) -> (tensor<*xi64>, tensor<*xi64>) {
  %s = hetc.onnx.node "Einsum"(%q, %k) {node_name = "Einsum", onnx_attrs = {equation = "bhqd,bhkd->bhqk"}} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<*xf32>
  %p = hetc.onnx.node "Einsum"(%s, %k) {node_name = "Einsum_1", onnx_attrs = {equation = "bhqk,bhkd"}} : (tensor<*xf32>, tensor<?x4x?x8xf32>) -> tensor<*xf32>
  %i1 = hetc.constant dense<1> : tensor<i64>
  %i0 = hetc.constant dense<0> : tensor<i64>
  %shape_s = hetc.onnx.node "Shape"(%s) {node_name = "Shape"} : (tensor<*xf32>) -> tensor<*xi64>
  %heads = hetc.onnx.node "Gather"(%shape_s, %i1) {node_name = "Gather"} : (tensor<*xi64>, tensor<i64>) -> tensor<*xi64>
  %shape_p = hetc.onnx.node "Shape"(%p) {node_name = "Shape_1"} : (tensor<*xf32>) -> tensor<*xi64>
  %d = hetc.onnx.node "Gather"(%shape_p, %i0) {node_name = "Gather_1"} : (tensor<*xi64>, tensor<i64>) -> tensor<*xi64>
  return %heads, %d : tensor<*xi64>, tensor<*xi64>
}
