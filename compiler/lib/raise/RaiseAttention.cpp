// Self-attention with a KV cache, as a Hugging Face Llama exports it, from the attention output
// back to the projections:
//
//   out    = Reshape(Transpose(MatMul(probs, repeat_kv(present_v)), [0,2,1,3]), [B, S, H*D | -1])
//   probs  = Softmax(scores * scale + mask, axis = -1)      (Div by a constant or Mul by one)
//   scores = MatMul(rope(q4), Transpose(repeat_kv(present_k), [0,1,3,2]))
//   present_k = Concat(past_key, rope(k4), axis = 2)  -> a function result; same for v (no rope)
//   x4     = Transpose(Reshape(x, [B, S, heads, D]), [0,2,1,3])  for x in q, k, v
//   rope(x4) = x4 * cos + rotate_half(x4) * sin
//   rotate_half(x4) = Concat(-x4[..., D/2:], x4[..., :D/2], axis = -1)
//   cos/sin  = Unsqueeze(Cos/Sin(Concat(f, f, -1)), 1),  f = angles of position_ids and inv_freq
//              or Unsqueeze(Gather(table, position_ids), 1) from cos/sin tables [positions, D]
//              (transformers before 4.38), whose frequencies are recovered from their values
//   repeat_kv(x) = Reshape(Expand(Unsqueeze(x, 2), [.., .., n_rep, .., ..]), [B, H, T, D]) or x
//                  (or, with one KV head, x broadcast by the products: Falcon's multi-query)
//
// Without RoPE (OPT, GPT-2) q4 and k4 are the heads split alone; a scale may multiply the flat q
// (OPT's q_proj(x) * scaling). OPT's bmm form computes the same products on batch and heads
// flattened, [B * H, T, D] (each flattening checked to be one: headsMergeSource), its scores
// unflattened to add the mask and clamped, max(scores + mask, finfo.min), a clamp that changes no
// score the mask leaves visible.
//
// It becomes hetc.rope on the flat q and k (when they rotate), and hetc.attention whose present
// results replace the present outputs. hetc.attention applies the causal mask itself, so the mask operand must be
// computed from graph inputs only and, evaluated on sample inputs, be exactly the causal mask.
// An activation may reach it through Shape or Size alone (transformers slices the mask to the
// keys' length): the evaluation stands it in by zeros of its shape at the sample.
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"
#include "hetc/compiler/PlanAttributes.h"
#include "raise/AttentionFit.h"
#include "raise/RopeTables.h"
#include "raise/RotationFit.h"
#include "raise/ScalarFunctions.h"
#include "import/InterpreterSupport.h"
#include "import/OnnxInterpreter.h"
#include "raise/SampleInputs.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace hetc {
#define GEN_PASS_DEF_RAISEATTENTION
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

struct HeadsSplit {
  Value flat;
  int64_t heads;
  int64_t headDim;
  // Each head repeated this many times in a row (K and V broadcast to the query heads of their
  // group before the cache: Falcon's new decoder architecture).
  int64_t broadcast = 1;
};

// The inverse frequencies of a rotary embedding: constant values, or a [D/2] weight. While a
// cos or sin is matched alone, `table` is the [positions, D] table it gathers rows of; the rope
// then recovers the values from the cos and sin tables together.
struct InvFreq {
  SmallVector<double> values;
  Value weight;
  Value table;
  Operation *gather = nullptr; // the Gather that reads `table`, for messages
  bool operator==(const InvFreq &o) const {
    return values == o.values && weight == o.weight && table == o.table;
  }
};

struct Angles {
  Value positions;
  InvFreq invFreq;
};

struct RopeMatch {
  HeadsSplit split;
  Angles angles;
  int64_t rotaryDim = 0; // the first columns of each head rotated (head_dim: all; 0: no rope)
  bool interleaved = false;
  // How it was read by its values (RotationFit.h), for --explain; empty when read by its form.
  std::string fit;
};

// Why a match failed, when that is worth an error rather than leaving the nodes to CheckRaised.
struct Unsupported {
  Operation *op = nullptr;
  std::string why;
};

bool hasPerm(OnnxNodeOp transpose, ArrayRef<int64_t> perm) {
  auto attr = intsAttr(transpose, "perm");
  return attr && ArrayRef<int64_t>(*attr) == perm;
}

// Whether `axis` names dimension `dim` of a value of rank `rank` (rank may be unknown: -1).
bool isAxis(int64_t axis, int64_t dim, int64_t rank) {
  if (axis == dim)
    return true;
  return axis < 0 && (rank >= 0 ? axis + rank == dim : false);
}

// Whether entry `e` of a Reshape or Expand target stands for dimension `dim` of `of`: a 0 where
// the op copies that very dimension, that dimension read with Shape, or its static size.
bool entryIsDim(const ShapeEntry &e, Value of, int64_t dim, bool zeroCopies) {
  if (e.value) {
    if (*e.value == 0)
      return zeroCopies;
    auto type = dyn_cast<RankedTensorType>(of.getType());
    return type && dim < type.getRank() && !type.isDynamicDim(dim) &&
           type.getDimSize(dim) == *e.value;
  }
  return e.source && sameDimension(e.source, e.dim, of, dim);
}

// Whether the Reshape keeps the first `count` dimensions of `of` (its input's, when `of` is
// the input) in place: by its target's entries, or by static types.
bool keepsLeadingDims(OnnxNodeOp reshape, Value of, int64_t count) {
  auto entries = shapeEntrySources(reshape->getOperand(1));
  bool allowZero = intAttr(reshape, "allowzero").value_or(0) != 0;
  bool inputIsOf = skipNoOps(reshape->getOperand(0)) == skipNoOps(of);
  auto out = dyn_cast<RankedTensorType>(reshape->getResult(0).getType());
  auto ofType = dyn_cast<RankedTensorType>(of.getType());
  for (int64_t d = 0; d < count; ++d) {
    if (entries && static_cast<int64_t>(entries->size()) > d &&
        entryIsDim((*entries)[d], of, d, !allowZero && inputIsOf))
      continue;
    if (out && ofType && d < out.getRank() && d < ofType.getRank() && !out.isDynamicDim(d) &&
        out.getDimSize(d) == ofType.getDimSize(d))
      continue;
    return false;
  }
  return true;
}

// The rank of `v`: its type's, or where shape inference left it unranked, what the node computing
// it implies (a Reshape's shape length, a Transpose's perm, the rank of a MatMul's or an
// elementwise node's operands).
int64_t knownRank(Value v, int depth = 0) {
  if (int64_t rank = rankOf(v); rank >= 0 || depth > 8)
    return rank;
  auto node = v.getDefiningOp<OnnxNodeOp>();
  if (!node)
    return -1;
  StringRef type = node.getOpType();
  if (type == "Reshape" && node->getNumOperands() == 2)
    if (auto shape = dyn_cast<RankedTensorType>(node->getOperand(1).getType());
        shape && shape.getRank() == 1 && !shape.isDynamicDim(0))
      return shape.getDimSize(0);
  if (type == "Transpose")
    if (std::optional<SmallVector<int64_t>> perm = intsAttr(node, "perm"))
      return static_cast<int64_t>(perm->size());
  if (type == "MatMul" || type == "Softmax" || type == "Add" || type == "Max" || type == "Mul" ||
      type == "Div" || type == "Cast") {
    int64_t rank = -1;
    for (Value operand : node->getOperands())
      rank = std::max(rank, knownRank(operand, depth + 1));
    return rank;
  }
  return -1;
}

// Reshape(flat, [B, S, heads, D]): the features of a [B, S, heads * D] value split into heads.
std::optional<HeadsSplit> matchReshapeSplit(OnnxNodeOp reshape) {
  if (!reshape || reshape.getOpType() != "Reshape" || reshape->getNumOperands() != 2)
    return std::nullopt;
  Value flat = skipNoOps(reshape->getOperand(0));
  // A value reshaped before, batch and sequence kept both times, is split from its own features
  // (Falcon's query heads viewed [B, S, G, n, D] by group, then [B, S, G * n, D]).
  bool leadingKept = false;
  if (OnnxNodeOp inner = producer(flat, "Reshape");
      inner && knownRank(flat) > 3 && keepsLeadingDims(reshape, flat, 2)) {
    Value source = skipNoOps(inner->getOperand(0));
    if (keepsLeadingDims(inner, source, 2)) {
      flat = source;
      leadingKept = true;
    }
  }
  if (knownRank(flat) != 3)
    return std::nullopt;
  std::optional<int64_t> features = featureSize(flat.getType());
  auto entries = shapeEntries(reshape->getOperand(1));
  auto outType = dyn_cast<RankedTensorType>(reshape->getResult(0).getType());
  auto dim = [&](unsigned i) -> std::optional<int64_t> {
    if (outType && outType.getRank() == 4 && !outType.isDynamicDim(i))
      return outType.getDimSize(i);
    if (entries && entries->size() == 4 && (*entries)[i] && *(*entries)[i] > 0)
      return (*entries)[i];
    return std::nullopt;
  };
  if (entries && entries->size() != 4)
    return std::nullopt;
  std::optional<int64_t> heads = dim(2), headDim = dim(3);
  // view(b, s, -1, head_dim): the head count follows from the feature size.
  if (!heads && headDim && features && entries && (*entries)[2] == -1 && *features % *headDim == 0)
    heads = *features / *headDim;
  if (!headDim && heads && features && entries && (*entries)[3] == -1 && *features % *heads == 0)
    headDim = *features / *heads;
  if (!heads || !headDim || (features && *features != *heads * *headDim))
    return std::nullopt;
  // view(bsz, -1, heads, head_dim) (OPT's k and v): with the batch kept and heads x head_dim the
  // features, the -1 is the sequence.
  const bool inferredSequence = entries && (*entries)[1] == -1 && features &&
                                keepsLeadingDims(reshape, flat, 1);
  if (!leadingKept && !inferredSequence && !keepsLeadingDims(reshape, flat, 2))
    return std::nullopt;
  return HeadsSplit{flat, *heads, *headDim};
}

// Each of G heads repeated n times, as Falcon's new decoder architecture broadcasts K and V to
// the query heads of their group before the cache:
//   Reshape(Expand(s5, [B, S, G, n, D]), [B, S, G * n, D])
// with s5 = Reshape(flat, [B, S, G, 1, D]) or Unsqueeze(Reshape(flat, [B, S, G, D]), 3).
std::optional<HeadsSplit> matchBroadcastHeads(OnnxNodeOp reshape) {
  if (!reshape || reshape.getOpType() != "Reshape" || reshape->getNumOperands() != 2)
    return std::nullopt;
  Value v5 = skipNoOps(reshape->getOperand(0));
  OnnxNodeOp expand = producer(v5, "Expand");
  if (!expand)
    return std::nullopt;
  Value s5 = skipNoOps(expand->getOperand(0));
  auto in = dyn_cast<RankedTensorType>(s5.getType());
  auto out = dyn_cast<RankedTensorType>(v5.getType());
  auto merged = dyn_cast<RankedTensorType>(reshape->getResult(0).getType());
  if (!in || !out || !merged || in.getRank() != 5 || out.getRank() != 5 || merged.getRank() != 4)
    return std::nullopt;
  for (int64_t d : {2, 3, 4})
    if (in.isDynamicDim(d) || out.isDynamicDim(d))
      return std::nullopt;
  const int64_t groups = in.getDimSize(2), repeats = out.getDimSize(3), headDim = in.getDimSize(4);
  if (in.getDimSize(3) != 1 || out.getDimSize(2) != groups || out.getDimSize(4) != headDim ||
      merged.isDynamicDim(2) || merged.getDimSize(2) != groups * repeats ||
      merged.isDynamicDim(3) || merged.getDimSize(3) != headDim)
    return std::nullopt;
  // The Expand keeps batch and sequence; the merge keeps them too.
  auto entries = shapeEntrySources(expand->getOperand(1));
  if (!entries || entries->size() != 5)
    return std::nullopt;
  for (int64_t d : {0, 1}) {
    const ShapeEntry &e = (*entries)[d];
    if (!((e.value && (*e.value == 1 || *e.value == -1)) ||
          entryIsDim(e, s5, d, /*zeroCopies=*/false)))
      return std::nullopt;
  }
  if (!keepsLeadingDims(reshape, v5, 2))
    return std::nullopt;
  // The heads split before the broadcast.
  std::optional<HeadsSplit> split;
  if (OnnxNodeOp unsqueeze = producer(s5, "Unsqueeze")) {
    auto axes = axesOf(unsqueeze);
    if (axes && axes->size() == 1 && isAxis(axes->front(), 3, 5))
      split = matchReshapeSplit(producer(skipNoOps(unsqueeze->getOperand(0)), "Reshape"));
  } else if (OnnxNodeOp split5 = producer(s5, "Reshape")) {
    Value flat = skipNoOps(split5->getOperand(0));
    if (knownRank(flat) == 3 && featureSize(flat.getType()) == groups * headDim &&
        keepsLeadingDims(split5, flat, 2))
      split = HeadsSplit{flat, groups, headDim};
  }
  if (!split || split->heads != groups || split->headDim != headDim)
    return std::nullopt;
  split->broadcast = repeats;
  return split;
}

// x4 = Transpose(Reshape(flat, [B, S, heads, D]), [0, 2, 1, 3]), or of heads broadcast
// (matchBroadcastHeads).
std::optional<HeadsSplit> matchHeadsSplit(Value v4) {
  OnnxNodeOp transpose = producer(v4, "Transpose");
  if (!transpose || !hasPerm(transpose, {0, 2, 1, 3}))
    return std::nullopt;
  OnnxNodeOp reshape = producer(transpose->getOperand(0), "Reshape");
  if (std::optional<HeadsSplit> split = matchReshapeSplit(reshape))
    return split;
  return matchBroadcastHeads(reshape);
}

// A norm of each head, rms_norm(Reshape(flat, [B, S, heads, D]), gamma [D]) (Qwen3's q_norm
// and k_norm, applied between the head split and the transpose), is the grouped norm of the flat
// value split the same way: Reshape(rms_norm(flat, gamma), [B, S, heads, D]). Rewritten so, the
// heads split reads the norm's flat result as it reads a projection's.
void perHeadNormsAsGroupedNorms(func::FuncOp func, OpBuilder &builder) {
  SmallVector<RmsNormOp> norms;
  func.walk([&](RmsNormOp norm) { norms.push_back(norm); });
  for (RmsNormOp norm : norms) {
    OnnxNodeOp reshape = producer(norm.getX(), "Reshape");
    std::optional<HeadsSplit> split = matchReshapeSplit(reshape);
    auto gamma = cast<RankedTensorType>(norm.getGamma().getType());
    if (!split || gamma.getDimSize(0) != split->headDim)
      continue;
    builder.setInsertionPoint(norm);
    auto grouped = builder.create<RmsNormOp>(norm.getLoc(), split->flat.getType(), split->flat,
                                             norm.getGamma(), norm.getEpsilonAttr());
    Operation *heads = builder.clone(*reshape);
    heads->setOperand(0, grouped.getResult());
    heads->getResult(0).setType(norm.getResult().getType());
    norm.getResult().replaceAllUsesWith(heads->getResult(0));
    norm->erase();
  }
}

// Whether scalar `v` is dimension 0 of `flat` read back: Gather(Shape(s), 0) of a value s whose
// first dimension is flat's (through Cast, Squeeze and Unsqueeze).
bool isBatchOf(Value v, Value flat) {
  v = skipNoOps(v);
  while (auto node = v.getDefiningOp<OnnxNodeOp>()) {
    StringRef type = node.getOpType();
    if ((type != "Cast" && type != "Squeeze" && type != "Unsqueeze") || node->getNumOperands() == 0)
      break;
    v = skipNoOps(node->getOperand(0));
  }
  OnnxNodeOp gather = producer(v, "Gather");
  OnnxNodeOp shape = gather ? producer(gather->getOperand(0), "Shape") : OnnxNodeOp();
  return shape && !shape.getOnnxAttrs() && scalarValue(gather->getOperand(1)) == 0.0 &&
         sameDimension(shape->getOperand(0), 0, flat, 0);
}

// OPT's bmm form flattens batch and heads: x3 = Reshape(x4, [B * H, -1, D]) from x4 [B, H, T, D],
// and back: Reshape(y3, [B, H, S, D]). The merge of `v`: x4, when the reshape keeps D last and
// its first entry is B * H: the batch of `flat` (the tokens' activation) times H, or H alone where
// the graph takes a batch of one only; null otherwise.
Value headsMergeSource(Value v, int64_t heads, int64_t headDim, Value flat, bool batchOfOne) {
  OnnxNodeOp reshape = producer(v, "Reshape");
  if (!reshape || knownRank(reshape->getOperand(0)) != 4)
    return {};
  auto entries = shapeEntries(reshape->getOperand(1));
  if (!entries || entries->size() != 3 || (*entries)[2] != headDim)
    return {};
  if ((*entries)[0] == heads)
    return batchOfOne ? reshape->getOperand(0) : Value();
  // [bsz * num_heads, -1, head_dim]: Concat(Unsqueeze(Mul(batch, H)), ...).
  OnnxNodeOp concat = producer(reshape->getOperand(1), "Concat");
  Value first = concat && concat->getNumOperands() == 3 ? skipNoOps(concat->getOperand(0)) : Value();
  while (OnnxNodeOp view = first ? producer(first, "Unsqueeze") : OnnxNodeOp())
    first = skipNoOps(view->getOperand(0));
  OnnxNodeOp mul = first ? producer(first, "Mul") : OnnxNodeOp();
  bool timesHeads = false;
  if (mul)
    matchCommutative(mul, [&](Value batch, Value c) {
      timesHeads = scalarValue(c) == static_cast<double>(heads) && isBatchOf(batch, flat);
      return timesHeads;
    });
  return timesHeads ? reshape->getOperand(0) : Value();
}

// Whether `reshape` unflattens [B * H, S, X] to [B, H, S, X]: its entries are flat's batch (or
// -1), H, flat's sequence (or -1, not both) and, when `last` is given, that last size.
bool isHeadsUnflatten(OnnxNodeOp reshape, Value flat, int64_t heads, std::optional<int64_t> last) {
  auto entries = shapeEntrySources(reshape->getOperand(1));
  if (!entries || entries->size() != 4 || (*entries)[1].value != heads ||
      (last && (*entries)[3].value != *last))
    return false;
  auto inferred = [](const ShapeEntry &e) { return e.value && *e.value == -1; };
  const bool batch = entryIsDim((*entries)[0], flat, 0, /*zeroCopies=*/false);
  const bool sequence = entryIsDim((*entries)[2], flat, 1, /*zeroCopies=*/false);
  return (batch && (sequence || inferred((*entries)[2]))) || (sequence && inferred((*entries)[0]));
}

// The [B * H, S, T] or [B * H, S, D] value a Reshape to rank 4 unflattens; `v` itself otherwise.
Value throughHeadsUnflatten(Value v) {
  OnnxNodeOp reshape = producer(v, "Reshape");
  if (reshape && knownRank(reshape->getOperand(0)) == 3)
    if (auto entries = shapeEntries(reshape->getOperand(1)); entries && entries->size() == 4)
      return reshape->getOperand(0);
  return v;
}

// The [B, H, S, T] scores a Reshape to rank 3 flattens for a softmax over [B * H, S, T]; `v`
// itself otherwise.
Value throughHeadsFlatten(Value v) {
  OnnxNodeOp reshape = producer(v, "Reshape");
  if (reshape && knownRank(reshape->getOperand(0)) == 4)
    if (auto entries = shapeEntries(reshape->getOperand(1)); entries && entries->size() == 3)
      return reshape->getOperand(0);
  return v;
}

// A slice bound: a constant, or arithmetic on x's last dimension, `lastDim` (-1: unknown), as
// `x[..., : x.shape[-1] // 2]` exports where shape inference left x's type unknown (the rotated
// columns of a partial rotary): Div(Gather(Shape(x), -1), c), under Unsqueeze or Cast.
std::optional<int64_t> sliceBound(Value v, Value x, int64_t lastDim) {
  if (auto values = intValues(v); values && values->size() == 1)
    return values->front();
  v = skipNoOps(v);
  while (auto node = v.getDefiningOp<OnnxNodeOp>()) {
    StringRef type = node.getOpType();
    if ((type != "Unsqueeze" && type != "Cast" && type != "Reshape") || node->getNumOperands() == 0)
      break;
    v = skipNoOps(node->getOperand(0));
  }
  if (OnnxNodeOp div = producer(v, "Div")) {
    std::optional<double> divisor = scalarValue(div->getOperand(1));
    std::optional<int64_t> n = sliceBound(div->getOperand(0), x, lastDim);
    if (divisor && *divisor >= 1 && *divisor == std::trunc(*divisor) && n && *n >= 0)
      return *n / static_cast<int64_t>(*divisor);
    return std::nullopt;
  }
  OnnxNodeOp gather = producer(v, "Gather");
  OnnxNodeOp shape = gather ? producer(gather->getOperand(0), "Shape") : OnnxNodeOp();
  std::optional<double> index = shape ? scalarValue(gather->getOperand(1)) : std::nullopt;
  if (lastDim > 0 && shape && skipNoOps(shape->getOperand(0)) == x && !shape.getOnnxAttrs() &&
      index && (*index == -1 || *index == 3))
    return lastDim;
  return std::nullopt;
}

// Whether `slice` is x[..., begin:end:step] on the last axis of a 4-D x, end >= `end` meaning "to
// the end"; `lastDim` is x's last dimension when the caller knows it (-1: not).
bool isLastAxisSlice(OnnxNodeOp slice, Value x, int64_t begin, int64_t end, bool toEnd,
                     int64_t step = 1, int64_t lastDim = -1) {
  if (slice->getNumOperands() < 4 || skipNoOps(slice->getOperand(0)) != x)
    return false;
  std::optional<int64_t> start = sliceBound(slice->getOperand(1), x, lastDim);
  std::optional<int64_t> stop = sliceBound(slice->getOperand(2), x, lastDim);
  auto axes = intValues(slice->getOperand(3));
  if (!start || !stop || !axes || axes->size() != 1)
    return false;
  if (!isAxis(axes->front(), 3, 4))
    return false;
  if (slice->getNumOperands() >= 5 && !isa<NoneType>(slice->getOperand(4).getType())) {
    auto steps = intValues(slice->getOperand(4));
    if (!steps || steps->size() != 1 || steps->front() != step)
      return false;
  } else if (step != 1) {
    return false;
  }
  return *start == begin && (toEnd ? *stop >= end : *stop == end);
}

// rotate_half(x) = Concat(-x[..., D/2:], x[..., :D/2], axis = -1).
bool isRotateHalf(Value rot, Value x, int64_t headDim) {
  OnnxNodeOp concat = producer(rot, "Concat");
  if (!concat || concat->getNumOperands() != 2 ||
      !isAxis(intAttr(concat, "axis").value_or(0), 3, 4))
    return false;
  OnnxNodeOp neg = producer(concat->getOperand(0), "Neg");
  OnnxNodeOp second = neg ? producer(neg->getOperand(0), "Slice") : OnnxNodeOp();
  OnnxNodeOp first = producer(concat->getOperand(1), "Slice");
  int64_t half = headDim / 2;
  return second && first && isLastAxisSlice(second, x, half, headDim, /*toEnd=*/true, 1, headDim) &&
         isLastAxisSlice(first, x, 0, half, /*toEnd=*/false, 1, headDim);
}

// Whether `v` is Unsqueeze(x, [-1]) of a 4-D x (as stack(.., dim = -1) exports), and gives x.
Value unsqueezedLast(Value v) {
  OnnxNodeOp unsqueeze = producer(v, "Unsqueeze");
  auto axes = unsqueeze ? axesOf(unsqueeze) : std::nullopt;
  if (!axes || axes->size() != 1 || !isAxis(axes->front(), 4, 5))
    return {};
  return skipNoOps(unsqueeze->getOperand(0));
}

// GPT-J's rotate_every_two(x) = stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2):
// Reshape(Concat(Unsqueeze(Neg(x[..., 1::2]), -1), Unsqueeze(x[..., ::2], -1), axis = -1)).
bool isRotateEveryTwo(Value rot, Value x, int64_t dim) {
  OnnxNodeOp reshape = producer(rot, "Reshape");
  OnnxNodeOp concat = reshape ? producer(reshape->getOperand(0), "Concat") : OnnxNodeOp();
  if (!concat || concat->getNumOperands() != 2 ||
      !isAxis(intAttr(concat, "axis").value_or(0), 4, 5))
    return false;
  Value negated = unsqueezedLast(concat->getOperand(0)), even = unsqueezedLast(concat->getOperand(1));
  OnnxNodeOp neg = negated ? producer(negated, "Neg") : OnnxNodeOp();
  OnnxNodeOp odd = neg ? producer(neg->getOperand(0), "Slice") : OnnxNodeOp();
  OnnxNodeOp evenSlice = even ? producer(even, "Slice") : OnnxNodeOp();
  return odd && evenSlice && isLastAxisSlice(odd, x, 1, dim, /*toEnd=*/true, 2) &&
         isLastAxisSlice(evenSlice, x, 0, dim, /*toEnd=*/true, 2);
}

// The integer position ids behind `Cast(Unsqueeze(position_ids))`: a graph input.
Value matchPositions(Value v) {
  v = skipNoOps(v);
  while (auto node = v.getDefiningOp<OnnxNodeOp>()) {
    if ((node.getOpType() != "Cast" && node.getOpType() != "Unsqueeze") ||
        node->getNumOperands() == 0)
      return {};
    v = skipNoOps(node->getOperand(0));
  }
  auto type = dyn_cast<ShapedType>(v.getType());
  if (!isa<BlockArgument>(v) || !type || !isa<IntegerType>(type.getElementType()))
    return {};
  return v;
}

// inv_freq behind Expand/Cast/Reshape/Unsqueeze: a constant of `half` elements, or a [half] weight.
std::optional<InvFreq> matchInvFreq(Value v, int64_t half) {
  v = skipNoOps(v);
  while (auto node = v.getDefiningOp<OnnxNodeOp>()) {
    StringRef type = node.getOpType();
    if ((type != "Expand" && type != "Cast" && type != "Reshape" && type != "Unsqueeze") ||
        node->getNumOperands() == 0)
      break;
    v = skipNoOps(node->getOperand(0));
  }
  if (auto weight = v.getDefiningOp<WeightOp>()) {
    auto type = cast<RankedTensorType>(weight.getType());
    if (type.getRank() == 1 && type.getDimSize(0) == half && !weight.getTransposed())
      return InvFreq{{}, v};
    return std::nullopt;
  }
  DenseElementsAttr attr = constantValue(v);
  if (!attr || attr.getNumElements() != half || !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  auto values = floatValues(attr);
  if (!values)
    return std::nullopt;
  return InvFreq{*values, {}};
}

// f = positions x inv_freq as [B, S, D/2], in the forms exporters produce:
//   Transpose(MatMul(inv[B, D/2, 1], pos[B, 1, S]), [0, 2, 1])   (Hugging Face today)
//   MatMul(pos[B, S, 1], inv[1, D/2])  or  Mul(pos[B, S, 1], inv[D/2])  (outer products)
std::optional<Angles> matchFrequencies(Value f, int64_t half) {
  if (OnnxNodeOp transpose = producer(skipFloatCasts(f), "Transpose")) {
    OnnxNodeOp matmul = hasPerm(transpose, {0, 2, 1})
                            ? producer(skipFloatCasts(transpose->getOperand(0)), "MatMul")
                            : OnnxNodeOp();
    if (!matmul)
      return std::nullopt;
    Value positions = matchPositions(matmul->getOperand(1));
    std::optional<InvFreq> inv = matchInvFreq(matmul->getOperand(0), half);
    if (!positions || !inv)
      return std::nullopt;
    return Angles{positions, *inv};
  }
  OnnxNodeOp node = producer(skipFloatCasts(f), "MatMul");
  if (!node)
    node = producer(skipFloatCasts(f), "Mul");
  if (!node)
    return std::nullopt;
  std::optional<Angles> result;
  auto tryOrder = [&](Value p, Value i) {
    Value positions = matchPositions(p);
    std::optional<InvFreq> inv = matchInvFreq(i, half);
    if (!positions || !inv)
      return false;
    result = Angles{positions, *inv};
    return true;
  };
  if (node.getOpType() == "Mul")
    matchCommutative(node, tryOrder);
  else
    tryOrder(node->getOperand(0), node->getOperand(1));
  return result;
}

// cos or sin broadcast over heads: Unsqueeze(Cos(dup(f)), [1]) with dup(f) = Concat(f, f, -1)
// (rotate-half) or stack((f, f), -1).flatten(-2) (interleaved pairs) over `rotaryDim` columns, or
// Unsqueeze(Gather(table, positions), [1]).
std::optional<Angles> matchTrig(Value v, StringRef function, int64_t rotaryDim,
                                bool interleaved) {
  OnnxNodeOp unsqueeze = producer(skipFloatCasts(v), "Unsqueeze");
  auto axes = unsqueeze ? axesOf(unsqueeze) : std::nullopt;
  if (!axes || axes->size() != 1 || (axes->front() != 1 && axes->front() != -3))
    return std::nullopt;
  Value inner = skipFloatCasts(unsqueeze->getOperand(0));
  OnnxNodeOp trig = producer(inner, function);
  if (!trig) {
    // Older exports gather rows of precomputed cos/sin tables by position.
    OnnxNodeOp gather = producer(inner, "Gather");
    if (!gather || intAttr(gather, "axis").value_or(0) != 0 || rankOf(gather->getOperand(0)) != 2)
      return std::nullopt;
    Value positions = matchPositions(gather->getOperand(1));
    Value table = skipNoOps(gather->getOperand(0));
    // Row i of the table stays row i: casts, squeezes of leading ones, slices from 0 (HF's
    // `cos_cached[:seq_len]`).
    while (auto node = table.getDefiningOp<OnnxNodeOp>()) {
      StringRef type = node.getOpType();
      if (node->getNumOperands() == 0)
        break;
      if (type == "Slice") {
        auto starts = intValues(node->getOperand(1));
        std::optional<SmallVector<int64_t>> steps = SmallVector<int64_t>{1};
        if (node->getNumOperands() >= 5 && !isa<NoneType>(node->getOperand(4).getType()))
          steps = intValues(node->getOperand(4));
        if (!starts || !steps || llvm::any_of(*starts, [](int64_t s) { return s != 0; }) ||
            llvm::any_of(*steps, [](int64_t s) { return s != 1; }))
          return std::nullopt;
      } else if (type != "Cast" && type != "Squeeze") {
        break; // what computes the table
      }
      table = skipNoOps(node->getOperand(0));
    }
    // A stored table, or one the graph computes from its inputs alone (cos of arange(total) x
    // inv_freq at run time), which RopeTables evaluates.
    if (!positions || !(table.getDefiningOp<WeightOp>() || table.getDefiningOp<ConstantOp>() ||
                        (isa<OnnxNodeOp>(table.getDefiningOp()) && computedFromInputs(table))))
      return std::nullopt;
    return Angles{positions, InvFreq{{}, {}, table, gather}};
  }
  if (interleaved) {
    // stack((f, f), -1).flatten(-2): each frequency twice. The fold-shapes pass writes the two
    // copies as Expand(Unsqueeze(f, -1), [1, 1, 1, 2]); an unfolded graph keeps the Concat.
    OnnxNodeOp reshape = producer(trig->getOperand(0), "Reshape");
    auto last = [](Value u) -> Value {
      OnnxNodeOp unsqueeze = producer(u, "Unsqueeze");
      auto axes = unsqueeze ? axesOf(unsqueeze) : std::nullopt;
      return axes && axes->size() == 1 && isAxis(axes->front(), 3, 4)
                 ? skipNoOps(unsqueeze->getOperand(0))
                 : Value();
    };
    Value f;
    if (OnnxNodeOp stack = reshape ? producer(reshape->getOperand(0), "Concat") : OnnxNodeOp()) {
      if (stack->getNumOperands() != 2 || !isAxis(intAttr(stack, "axis").value_or(0), 3, 4))
        return std::nullopt;
      f = last(stack->getOperand(0));
      if (!f || f != last(stack->getOperand(1)))
        return std::nullopt;
    } else if (OnnxNodeOp twice =
                   reshape ? producer(reshape->getOperand(0), "Expand") : OnnxNodeOp()) {
      if (intValues(twice->getOperand(1)) != std::optional<SmallVector<int64_t>>({1, 1, 1, 2}))
        return std::nullopt;
      f = last(twice->getOperand(0));
    }
    if (!f)
      return std::nullopt;
    return matchFrequencies(f, rotaryDim / 2);
  }
  OnnxNodeOp concat = producer(trig->getOperand(0), "Concat");
  if (!concat || concat->getNumOperands() != 2 ||
      skipNoOps(concat->getOperand(0)) != skipNoOps(concat->getOperand(1)))
    return std::nullopt;
  int64_t axis = intAttr(concat, "axis").value_or(0);
  if (!isAxis(axis, 2, 3))
    return std::nullopt;
  return matchFrequencies(concat->getOperand(0), rotaryDim / 2);
}

// rope(x4) = x4 * cos + rot(x4) * sin, rot rotate_half or GPT-J's rotate_every_two; or, for
// partial rotary, Concat(rope(x4[..., :R]), x4[..., R:], axis = -1) with rope over R columns.
std::optional<RopeMatch> matchRope(Value r, RopeTables &tables, Unsupported &unsupported) {
  // The partial form: the rotated first R columns, then the rest of each head as it was.
  Value rotated = r, passed;
  OnnxNodeOp rest;
  int64_t rotaryDim = 0;
  if (OnnxNodeOp concat = producer(r, "Concat");
      concat && concat->getNumOperands() == 2 && isAxis(intAttr(concat, "axis").value_or(0), 3, 4)) {
    rest = producer(concat->getOperand(1), "Slice");
    auto starts = rest && rest->getNumOperands() >= 4 ? intValues(rest->getOperand(1)) : std::nullopt;
    if (!starts || starts->size() != 1 || starts->front() <= 0)
      return std::nullopt;
    rotaryDim = starts->front();
    passed = skipNoOps(rest->getOperand(0));
    if (!isLastAxisSlice(rest, passed, rotaryDim, rotaryDim + 1, /*toEnd=*/true))
      return std::nullopt;
    rotated = concat->getOperand(0);
  }
  OnnxNodeOp add = producer(rotated, "Add");
  if (!add)
    return std::nullopt;
  std::optional<RopeMatch> result;
  matchCommutative(add, [&](Value cosTerm, Value sinTerm) {
    OnnxNodeOp cosMul = producer(cosTerm, "Mul"), sinMul = producer(sinTerm, "Mul");
    if (!cosMul || !sinMul)
      return false;
    return matchCommutative(cosMul, [&](Value x, Value cos) {
      // The rotated columns: the head itself, or its first R columns.
      Value xr = skipNoOps(x), x4 = xr;
      if (passed) {
        OnnxNodeOp first = producer(xr, "Slice");
        if (!first || !isLastAxisSlice(first, passed, 0, rotaryDim, /*toEnd=*/false))
          return false;
        x4 = passed;
      }
      std::optional<HeadsSplit> split = matchHeadsSplit(x4);
      if (!split)
        return false;
      // The columns passed through run to the end of the head.
      if (passed && !isLastAxisSlice(rest, passed, rotaryDim, split->headDim, /*toEnd=*/true))
        return false;
      const int64_t dim = passed ? rotaryDim : split->headDim;
      if (dim % 2 != 0 || dim > split->headDim)
        return false;
      return matchCommutative(sinMul, [&](Value rot, Value sin) {
        bool interleaved = false;
        if (!isRotateHalf(rot, xr, dim)) {
          if (!isRotateEveryTwo(rot, xr, dim))
            return false;
          interleaved = true;
        }
        std::optional<Angles> c = matchTrig(cos, "Cos", dim, interleaved);
        std::optional<Angles> s = matchTrig(sin, "Sin", dim, interleaved);
        if (!c || !s || c->positions != s->positions)
          return false;
        if (c->invFreq.table && s->invFreq.table) {
          std::string why;
          std::optional<SmallVector<double>> values = tables.recover(
              c->invFreq.table, s->invFreq.table, dim,
              interleaved ? RopeTables::Width::Pairs : RopeTables::Width::Duplicated, why);
          if (!values) {
            if (!unsupported.op)
              unsupported = {c->invFreq.gather, "reads RoPE cos/sin tables that " + why};
            return false;
          }
          c->invFreq = s->invFreq = InvFreq{*values, {}, {}, nullptr};
        }
        if (!(c->invFreq == s->invFreq))
          return false;
        result = RopeMatch{*split, *c, dim, interleaved};
        return true;
      });
    });
  });
  return result;
}

struct RepeatKv {
  Value base;
  int64_t nRep;
};

// repeat_kv: Reshape(Expand(Unsqueeze(x, [2]), [.., .., n_rep, .., ..]), [B, G*n_rep, T, D]).
RepeatKv matchRepeatKv(Value v) {
  v = skipNoOps(v);
  OnnxNodeOp reshape = producer(v, "Reshape");
  OnnxNodeOp expand = reshape ? producer(reshape->getOperand(0), "Expand") : OnnxNodeOp();
  OnnxNodeOp unsqueeze = expand ? producer(expand->getOperand(0), "Unsqueeze") : OnnxNodeOp();
  auto axes = unsqueeze ? axesOf(unsqueeze) : std::nullopt;
  if (!axes || axes->size() != 1 || axes->front() != 2)
    return {v, 1};
  std::optional<int64_t> nRep;
  if (auto entries = shapeEntries(expand->getOperand(1)); entries && entries->size() == 5)
    nRep = (*entries)[2];
  auto expandType = dyn_cast<RankedTensorType>(expand->getResult(0).getType());
  if ((!nRep || *nRep <= 0) && expandType && expandType.getRank() == 5 &&
      !expandType.isDynamicDim(2))
    nRep = expandType.getDimSize(2);
  if (!nRep || *nRep <= 0)
    return {{}, 0};
  Value base = skipNoOps(unsqueeze->getOperand(0));
  // Every other Expand entry keeps the dimension (1 or -1, or the dimension itself), and the
  // Reshape keeps batch and positions: [B, G, n, T, D] -> [B, G*n, T, D].
  auto expandEntries = shapeEntrySources(expand->getOperand(1));
  if (!expandEntries || expandEntries->size() != 5)
    return {{}, 0};
  const int64_t sourceDim[5] = {0, 1, -1, 2, 3};
  for (int64_t d : {0, 1, 3, 4}) {
    const ShapeEntry &e = (*expandEntries)[d];
    bool keeps = (e.value && (*e.value == 1 || *e.value == -1)) ||
                 entryIsDim(e, base, sourceDim[d], /*zeroCopies=*/false);
    if (!keeps)
      return {{}, 0};
  }
  auto reshapeEntries = shapeEntrySources(reshape->getOperand(1));
  if (!reshapeEntries || reshapeEntries->size() != 4)
    return {{}, 0};
  bool allowZero = intAttr(reshape, "allowzero").value_or(0) != 0;
  const ShapeEntry &batch = (*reshapeEntries)[0], &positions = (*reshapeEntries)[2];
  // A 0 copies the Expand's dimension: right for the batch, not for the positions.
  if (!entryIsDim(batch, base, 0, !allowZero) ||
      !(entryIsDim(positions, base, 2, /*zeroCopies=*/false) ||
        (positions.value && *positions.value == -1)))
    return {{}, 0};
  return {base, *nRep};
}

// The heads a repeat_kv result has, from its Reshape target or type; nullopt if unknown.
std::optional<int64_t> repeatedHeads(Value v) {
  OnnxNodeOp reshape = producer(v, "Reshape");
  if (!reshape)
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(reshape->getResult(0).getType());
  if (type && type.getRank() == 4 && !type.isDynamicDim(1))
    return type.getDimSize(1);
  if (auto entries = shapeEntries(reshape->getOperand(1)); entries && entries->size() == 4)
    return (*entries)[1];
  return std::nullopt;
}

struct KvConcat {
  Value past;
  Value fresh;
  OnnxNodeOp concat;
};

// present = Concat(past, new, axis = 2) with past a graph input and present a graph output.
std::optional<KvConcat> matchKvConcat(Value v) {
  OnnxNodeOp concat = producer(v, "Concat");
  if (!concat || concat->getNumOperands() != 2 ||
      !isAxis(intAttr(concat, "axis").value_or(0), 2, 4))
    return std::nullopt;
  // The past as the graph gives it, or cast to the graph's float type (a float16 graph with
  // float32 inputs).
  Value past = skipFloatCasts(concat->getOperand(0));
  if (!isa<BlockArgument>(past) || (rankOf(past) != 4 && rankOf(past) != -1))
    return std::nullopt;
  bool isOutput = llvm::any_of(concat->getResult(0).getUsers(),
                               [](Operation *user) { return isa<func::ReturnOp>(user); });
  if (!isOutput)
    return std::nullopt;
  return KvConcat{past, concat->getOperand(1), concat};
}

// computedFromInputs, remembered per mask (every layer reads the same one).
bool isInputMask(Value mask, DenseMap<Value, bool> &cache) {
  auto [it, inserted] = cache.try_emplace(mask);
  if (inserted)
    it->second = computedFromInputs(mask, /*weightsAreConstants=*/true);
  return it->second;
}

struct AttentionMatch {
  RopeMatch q, k;
  HeadsSplit v;
  KvConcat presentK, presentV;
  float scale;
  Value mask;
  std::optional<int64_t> window; // the mask's sliding window
  std::optional<float> softcap;  // the scores' soft-cap (Gemma 2)
  std::vector<float> alibiSlopes; // ALiBi's, one per query head; empty: none
};

// Whether `op`'s result reaches a comparison (or a Trilu) through arithmetic and shaping only.
bool feedsComparison(Operation *op) {
  SmallVector<Operation *> worklist{op};
  DenseSet<Operation *> seen;
  while (!worklist.empty()) {
    Operation *at = worklist.pop_back_val();
    if (!seen.insert(at).second)
      continue;
    for (Operation *user : at->getUsers()) {
      auto node = dyn_cast<OnnxNodeOp>(user);
      if (!node)
        continue;
      StringRef type = node.getOpType();
      if (type == "Less" || type == "Greater" || type == "LessOrEqual" ||
          type == "GreaterOrEqual" || type == "Trilu")
        return true;
      if (type == "Add" || type == "Sub" || type == "Cast" || type == "Unsqueeze" ||
          type == "Reshape" || type == "Expand" || type == "Slice" || type == "Neg")
        worklist.push_back(user);
    }
  }
  return false;
}

// The constant a sliding window offsets positions by, and its node: a comparison of positions
// shifted by a constant of 2 or more (`k > q - W`), a comparison with such a constant
// (`q - k >= W`), or a Trilu from a diagonal other than 0 or 1 (`triu(.., -W)`).
std::optional<std::pair<int64_t, Operation *>> windowOffset(Value mask) {
  DenseSet<Operation *> seen;
  SmallVector<Value> worklist{mask};
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || isa<LlmOp, WeightOp>(def) || readsDimensionsOnly(def) || !seen.insert(def).second)
      continue;
    llvm::append_range(worklist, def->getOperands());
    auto node = dyn_cast<OnnxNodeOp>(def);
    if (!node)
      continue;
    std::optional<double> offset;
    if (node.getOpType() == "Trilu" && node->getNumOperands() > 1)
      if (std::optional<double> k = scalarValue(node->getOperand(1)); k && *k != 0 && *k != 1)
        offset = *k;
    // No upper bound: a window of any size is measured, or refused by the evaluation budget,
    // never taken for plain causal attention.
    StringRef type = node.getOpType();
    const bool comparison = type == "Less" || type == "Greater" || type == "LessOrEqual" ||
                            type == "GreaterOrEqual";
    if (type == "Add" || type == "Sub" || comparison)
      for (Value operand : node->getOperands())
        if (std::optional<double> c = scalarValue(operand);
            c && std::fabs(*c) >= 2 && std::fabs(*c) < 2147483648.0 &&
            (comparison || feedsComparison(node)))
          offset = *c;
    if (offset && *offset == std::trunc(*offset))
      return std::make_pair(static_cast<int64_t>(std::fabs(*offset)), node.getOperation());
  }
  return std::nullopt;
}

// Evaluates the mask on sample inputs (Sample: new tokens after cached ones, one sequence with an
// attention_mask of ones or two with the first left-padded) and says how it differs from the
// causal mask hetc.attention
// applies (0 where key j <= past + i, very negative elsewhere), or which sliding window of W keys
// it also applies (a query at p sees p - W + 1 .. p).
struct MaskVerdict {
  std::optional<std::string> error; // completes "adds an attention mask that ..."
  std::optional<int64_t> window;
  bool unevaluable = false; // the error is that the graph could not be evaluated for the sample
};

class MaskProbe {
public:
  // With `minus`, the probe reads mask - minus at each sample: a mask that adds ALiBi's bias
  // (`minus`, one of its terms) read without it.
  MaskProbe(func::FuncOp func, Value positions, const compiler::WeightStore *weights,
            Value minus = {})
      : evaluator_(func, positions, weights), minus_(minus) {}

  MaskVerdict verdict(Value mask) {
    std::optional<int64_t> window;
    // Several new tokens after some cached ones, one after more, a first prefill; and a batch of
    // two whose first sequence is left-padded by one position (its padded key may be hidden or
    // not: hetc never pads; every other key must be as in the causal mask), or that sequence alone
    // where the graph takes a batch of one only.
    //
    // Some exports define their mask for a first prefill and for one new token only: ONNX Runtime
    // GenAI's attn_mask_reformat expands a [seq, seq] causal block to [seq, past + seq], which
    // ONNX Runtime itself refuses for several new tokens after cached ones. Where the graph
    // cannot be evaluated for that sample but every other sample is the causal mask, hetc
    // applies the causal mask to such chunks too (its chunked prefill and sessions need them).
    const int64_t batch = evaluator_.fixedBatchOfOne() ? 1 : 2;
    const MaskVerdict chunk = probe(mask, Sample{3, 2, 1, 0});
    if (chunk.error && !chunk.unevaluable)
      return chunk;
    const bool chunksUndefined = chunk.error.has_value();
    const Sample padded = chunksUndefined ? Sample{3, 0, batch, 1} : Sample{3, 2, batch, 1};
    for (const Sample &s : {Sample{3, 2, 1, 0}, Sample{1, 3, 1, 0}, Sample{2, 0, 1, 0}, padded}) {
      if (chunksUndefined && s.past > 0 && s.seq > 1)
        continue;
      MaskVerdict sample = probe(mask, s);
      if (sample.error)
        return sample;
      if (sample.window && window && *window != *sample.window)
        return {"hides keys from a distance of " + std::to_string(*window) + " in one sample and " +
                    std::to_string(*sample.window) + " in another: no one sliding window",
                std::nullopt};
      window = window ? window : sample.window;
    }
    if (window)
      return {std::nullopt, window};
    // The samples reach keys at most 4 positions back, so a wider window hides nothing in them;
    // the constant it offsets positions by names it, and one more sample that reaches past it
    // measures it (or says why it cannot).
    std::optional<std::pair<int64_t, Operation *>> offset = windowOffset(mask);
    if (!offset)
      return {};
    const std::string where = "offsets positions by " + std::to_string(offset->first) + " at " +
                              describe(offset->second) + " (a sliding window), ";
    // The KV concat the mask is sliced by holds every cached position: a bigger budget, for this
    // sample only (2^23 elements: Mistral's 8 KV heads of 128 at 4096 positions).
    ScopedEvaluationBudget budget(int64_t{1} << 23);
    MaskVerdict wide = probe(mask, Sample{2, offset->first + 2, 1, 0});
    if (wide.error)
      return {where + "but " + *wide.error, std::nullopt};
    if (!wide.window)
      return {where + "but hides no key of 2 new tokens after " +
                  std::to_string(offset->first + 2) + " cached ones",
              std::nullopt};
    return wide;
  }

private:
  MaskVerdict probe(Value mask, const Sample &s) {
    const int64_t seq = s.seq, past = s.past;
    const std::string sample = s.described();
    std::string error;
    std::optional<Tensor> evaluated = evaluator_.evaluate(mask, s, error);
    if (!evaluated)
      return {error, std::nullopt, /*unevaluable=*/true};
    if (minus_) {
      std::optional<Tensor> term = evaluator_.evaluate(minus_, s, error);
      if (!term)
        return {error, std::nullopt, /*unevaluable=*/true};
      std::optional<SmallVector<int64_t>> shape =
          interpreter::broadcastShape(evaluated->shape, term->shape);
      if (!shape || !evaluated->isFloat() || !term->isFloat())
        return {"does not broadcast with the position bias it adds" + sample, std::nullopt};
      Tensor difference{*shape, evaluated->elem, {}, {}};
      difference.floats.resize(difference.size());
      for (int64_t k = 0; k < difference.size(); ++k)
        difference.floats[k] =
            evaluated->floats[interpreter::broadcastIndex(k, *shape, evaluated->shape)] -
            term->floats[interpreter::broadcastIndex(k, *shape, term->shape)];
      evaluated = std::move(difference);
    }
    const Tensor &m = *evaluated;
    int64_t rank = static_cast<int64_t>(m.shape.size());
    int64_t total = past + seq;
    // [.., seq, total], each of them possibly broadcast; a [batch, heads, seq, total] mask's batch
    // dimension, when it is more than one, is the sample's (a rank-3 mask's first dimension lines
    // up with the scores' heads).
    const int64_t maskBatch = rank == 4 ? m.shape[0] : 1;
    if (!m.elem || rank < 2 || rank > 4 || (m.shape[rank - 2] != 1 && m.shape[rank - 2] != seq) ||
        (m.shape[rank - 1] != 1 && m.shape[rank - 1] != total) ||
        (maskBatch != 1 && maskBatch != s.batch))
      return {"does not have the shape of an attention mask" + sample, std::nullopt};
    const int64_t rows = m.shape[rank - 2], cols = m.shape[rank - 1];
    const int64_t perBatch = m.size() / maskBatch;
    // The dimensions between the batch and the rows (a rank-4 mask's heads, a rank-3 mask's
    // first): each must give the same value.
    const int64_t planes = rows * cols == 0 ? 0 : perBatch / (rows * cols);
    // What query qi of sequence b sees of key kj: 0 (visible), a large negative (hidden), or
    // anything else. Indexed directly: a sliding-window sample has thousands of keys.
    auto at = [&](int64_t b, int64_t qi, int64_t kj) -> std::optional<double> {
      std::optional<double> value;
      const int64_t first = maskBatch == 1 ? 0 : b * perBatch;
      const int64_t i = rows == 1 ? 0 : qi, j = cols == 1 ? 0 : kj;
      for (int64_t plane = 0; plane < planes; ++plane) {
        const double v = m.f(first + (plane * rows + i) * cols + j);
        if (value && *value != v)
          return std::nullopt; // broadcast dimensions that disagree
        value = v;
      }
      return value;
    };
    // The causal mask, or the first place it differs; a causal mask that also hides keys from a
    // distance on is a sliding window, named as such. A padded key may be either.
    auto padded = [&](int64_t b, int64_t kj) { return b == 0 && kj < s.padded; };
    std::optional<int64_t> window;
    std::optional<std::string> differs;
    for (int64_t b = 0; b < s.batch && !differs; ++b)
      for (int64_t qi = 0; qi < seq && !differs; ++qi)
        for (int64_t kj = 0; kj < total && !differs; ++kj) {
          std::optional<double> v = at(b, qi, kj);
          const bool causal = kj <= past + qi, hidden = v && *v <= kHiddenScore;
          if (v && padded(b, kj) && (*v == 0.0 || hidden))
            continue;
          if (causal && hidden)
            window = std::min(window.value_or(INT64_MAX), past + qi - kj); // nearest hidden key
          if (v && (causal ? (*v == 0.0 || hidden) : hidden))
            continue;
          differs = "is not the causal mask hetc.attention applies: " +
                    (s.batch > 1 ? "sequence " + std::to_string(b) + ", " : std::string()) +
                    "query " + std::to_string(qi) + " and key " + std::to_string(kj) + " get " +
                    (v ? printed(*v) : "several values");
        }
    if (differs)
      return {*differs + sample, std::nullopt};
    if (!window)
      return {};
    // A window: every key at that distance or more is hidden, every nearer one seen.
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t qi = 0; qi < seq; ++qi)
        for (int64_t kj = 0; kj <= past + qi; ++kj) {
          if (padded(b, kj))
            continue;
          if (const bool hidden = *at(b, qi, kj) <= kHiddenScore;
              hidden != (past + qi - kj >= *window))
            return {"is neither causal nor a sliding window: " +
                        (s.batch > 1 ? "sequence " + std::to_string(b) + ", " : std::string()) +
                        "query " + std::to_string(qi) +
                        (hidden ? " does not see key " : " sees key ") + std::to_string(kj) +
                        sample,
                    std::nullopt};
        }
    return {std::nullopt, window};
  }

  SampleEvaluator evaluator_;
  Value minus_;
};

class AttentionMatcher {
public:
  AttentionMatcher(DenseMap<Value, bool> &maskCache,
                   DenseMap<Value, MaskVerdict> &maskVerdicts, RopeTables &tables)
      : maskCache_(maskCache), maskVerdicts_(maskVerdicts), tables_(tables) {}

  std::optional<AttentionMatch> match(OnnxNodeOp reshape) {
    auto entries = shapeEntries(reshape->getOperand(1));
    int64_t outRank = rankOf(reshape->getResult(0));
    if (!(entries && entries->size() == 3) && outRank != 3)
      return std::nullopt;
    OnnxNodeOp transpose = producer(reshape->getOperand(0), "Transpose");
    if (!transpose || !hasPerm(transpose, {0, 2, 1, 3}))
      return std::nullopt;
    Value pvValue = throughHeadsUnflatten(transpose->getOperand(0));
    OnnxNodeOp pvUnflatten =
        pvValue != transpose->getOperand(0) ? producer(transpose->getOperand(0), "Reshape")
                                            : OnnxNodeOp();
    OnnxNodeOp pv = producer(pvValue, "MatMul");
    if (!pv)
      return std::nullopt;
    // From here on the region is an attention (heads merged back from a product of weights and
    // values): why it is not raised is worth saying (AttentionMatcher::diagnosis).
    product_ = pv;
    // The weights as the softmax gave them: BLOOM's bmm form flattens a softmax over [B, H, S, T]
    // to [B * H, S, T] for the product.
    OnnxNodeOp softmax = producer(pv->getOperand(0), "Softmax");
    if (!softmax && knownRank(pv->getResult(0)) == 3)
      softmax = producer(throughHeadsFlatten(pv->getOperand(0)), "Softmax");
    const int64_t softmaxRank = softmax ? knownRank(softmax->getOperand(0)) : -1;
    if (!softmax)
      return note(pv, "weights the values by " + describeValue(pv->getOperand(0)) +
                          ", not by a softmax of the scores");
    if ((softmaxRank != 3 && softmaxRank != 4) ||
        !isAxis(intAttr(softmax, "axis").value_or(-1), softmaxRank - 1, softmaxRank))
      return note(softmax, "is not a softmax over the keys (the last axis)");
    // OPT: softmax over [B * H, S, T] of max(scores + mask, finfo.min) unflattened to add the mask;
    // a clamp at a score that hides (kHiddenScore or below) changes no score a mask leaves
    // visible, and leaves hidden the ones it hides. A float16 file may compute the clamp in
    // float32 between Casts (onnxconverter-common keeps Max in float32).
    Value logits = skipFloatCasts(softmaxRank == 3 ? throughHeadsFlatten(softmax->getOperand(0))
                                                   : softmax->getOperand(0));
    if (OnnxNodeOp max = producer(logits, "Max"); max && max->getNumOperands() == 2)
      matchCommutative(max, [&](Value x, Value floor) {
        std::optional<double> c = scalarValue(floor);
        if (!c || !(*c <= kHiddenScore))
          return false;
        logits = skipFloatCasts(x);
        return true;
      });
    OnnxNodeOp maskAdd = producer(logits, "Add");
    if (!maskAdd)
      return note(softmax, "reads scores to which no mask is added; hetc's attention is causal, "
                           "and a decoder's scores get a causal mask");

    std::optional<AttentionMatch> result;
    matchCommutative(maskAdd, [&](Value scaled, Value mask) {
      if (!isInputMask(mask, maskCache_)) {
        if (!isInputMask(scaled, maskCache_))
          note(maskAdd, "adds two values that both read activations: neither is a mask "
                        "computed from the graph inputs and the file's constants");
        return false;
      }
      std::optional<ScaledSoftCap> form;
      OnnxNodeOp scores = matchScaledScores(scaled, form);
      if (!scores) {
        note(maskAdd, "adds the mask to " + describeValue(scaled) +
                          ", which is not a product of q and k^T under a scale");
        return false;
      }
      result = matchOperands(scores, static_cast<float>(form->scale), pv->getOperand(1));
      // The scores plus two terms computed from the inputs: the inner one is ALiBi's bias and
      // the outer the mask, or the other way round (a mask folded into the scores' sum, the bias
      // added last).
      Value maskTerm = mask;
      if (result && positionBias_) {
        std::string why, otherWhy;
        std::optional<std::vector<float>> slopes =
            fitAlibiSlopes(positionBias_, result->q.split.heads, why);
        if (!slopes) {
          slopes = fitAlibiSlopes(mask, result->q.split.heads, otherWhy);
          maskTerm = positionBias_;
        }
        if (!slopes) {
          note(positionBias_.getDefiningOp() ? positionBias_.getDefiningOp()
                                             : maskAdd.getOperation(),
               why);
          result.reset();
        } else {
          result->alibiSlopes = std::move(*slopes);
        }
      }
      if (result) {
        result->mask = maskTerm;
        if (form->cap > 0)
          result->softcap = static_cast<float>(form->cap);
      }
      return result.has_value();
    });
    if (!result)
      return std::nullopt;
    // OPT's bmm form: the products' results unflatten to [B, H, S, D] and [B, H, S, T].
    const int64_t heads = result->q.split.heads;
    if (pvUnflatten &&
        !unflattensHeads(pvUnflatten, result->q.split.flat, heads, result->q.split.headDim))
      return note(pvUnflatten, "does not unflatten the products over batch x heads back to "
                               "[batch, heads, sequence, head_dim]");
    if (scoresUnflatten_ &&
        !unflattensHeads(scoresUnflatten_, result->q.split.flat, heads, std::nullopt))
      return note(scoresUnflatten_, "does not unflatten the scores over batch x heads back to "
                                    "[batch, heads, sequence, keys]");

    // The output reshape must merge the heads back: [B, S, H*D] or [B, S, -1].
    int64_t width = result->q.split.heads * result->q.split.headDim;
    std::optional<int64_t> merged;
    if (entries && entries->size() == 3 && (*entries)[2] && *(*entries)[2] != -1)
      merged = *(*entries)[2];
    if (std::optional<int64_t> f = featureSize(reshape->getResult(0).getType()))
      merged = f;
    if (merged && *merged != width)
      return note(reshape, "merges the heads into " + std::to_string(*merged) +
                               " features, where q has " + std::to_string(heads) + " heads of " +
                               std::to_string(result->q.split.headDim) + " (" +
                               std::to_string(width) + ")");
    // ... and keep batch and sequence where they are: a 0 copies them from [B, S, H, D].
    auto outEntries = shapeEntrySources(reshape->getOperand(1));
    bool allowZero = intAttr(reshape, "allowzero").value_or(0) != 0;
    for (int64_t d = 0; d < 2; ++d) {
      bool kept = outEntries && outEntries->size() == 3 &&
                  (((*outEntries)[d].value == 0 && !allowZero) ||
                   entryIsDim((*outEntries)[d], result->q.split.flat, d, /*zeroCopies=*/false));
      if (!kept)
        return note(reshape, "merges the heads without keeping batch and sequence in place");
    }

    // Everything else is attention: a mask other than the causal one would be a wrong answer.
    const MaskVerdict &verdict = verdictOf(result->mask, reshape, *result);
    if (verdict.error && !splitPositionBias(*result, reshape)) {
      unsupported = {maskAdd, "adds an attention mask that " + *verdict.error};
      return std::nullopt;
    }
    if (!verdict.error)
      result->window = verdict.window;
    return result;
  }

  Unsupported unsupported;
  // Where and why an attention (its product of weights and values found) did not match, when it
  // did not: the first reason met. Unlike `unsupported` not an error by itself: another reading of
  // the same attention may still match (the pass reports it for a product nothing raised).
  Unsupported diagnosis;
  OnnxNodeOp product() const { return product_; }

private:
  // Notes the first reason an attention did not match; returns nothing, for `return note(..)`.
  std::nullopt_t note(Operation *op, std::string why) {
    if (!diagnosis.op)
      diagnosis = {op, std::move(why)};
    return std::nullopt;
  }

  // "'name' (OpType)" of the node computing `v`, or what `v` is.
  static std::string describeValue(Value v) {
    if (Operation *def = v.getDefiningOp())
      return describe(def);
    return "graph input #" + std::to_string(cast<BlockArgument>(v).getArgNumber());
  }

  // "H heads of D" of a split.
  static std::string headsOf(const HeadsSplit &split) {
    std::string text = std::to_string(split.heads) + (split.heads == 1 ? " head of " : " heads of ") +
                       std::to_string(split.headDim);
    if (split.broadcast != 1)
      text += " (each repeated " + std::to_string(split.broadcast) + " times)";
    return text;
  }

  // MatMul(q, kT) then elementwise nodes of it and scalar constants, read by their values
  // (ScalarFunctions.h): a scale, however written (Div by a constant, Mul by one, none when q and
  // k were scaled before the product), then maybe a soft-cap, c * tanh(s / c) (Gemma 2); then
  // maybe a position bias computed from the graph's inputs alone (positionBias_, fitted to ALiBi
  // once the heads are known: BLOOM's baddbmm, MPT's added bias).
  OnnxNodeOp matchScaledScores(Value scaled, std::optional<ScaledSoftCap> &form) {
    // The product, or OPT's [B * H, S, T] product unflattened (scoresUnflatten_, checked once q
    // is known).
    auto product = [&](Value v) {
      Value through = throughHeadsUnflatten(v);
      scoresUnflatten_ = through != v ? producer(v, "Reshape") : OnnxNodeOp();
      return producer(through, "MatMul");
    };
    positionBias_ = Value();
    OnnxNodeOp unflatten; // of the scores plus a bias
    std::optional<ElementwiseChain> chain =
        chainBackTo(scaled, [&](Value v) { return bool(product(v)); });
    if (!chain) {
      // Scores plus a bias, the sum perhaps unflattened from [B * H, S, T] (BLOOM's).
      Value sum = throughHeadsUnflatten(scaled);
      unflatten = sum != scaled ? producer(scaled, "Reshape") : OnnxNodeOp();
      OnnxNodeOp add = producer(sum, "Add");
      if (add)
        matchCommutative(add, [&](Value scores, Value bias) {
          // From the inputs and the file's constants (MPT stores its bias for every position).
          if (scalarValue(bias) || !computedFromInputs(bias, /*weightsAreConstants=*/true))
            return false;
          chain = chainBackTo(scores, [&](Value v) { return bool(product(v)); });
          if (chain)
            positionBias_ = bias;
          return chain.has_value();
        });
      if (!chain)
        return {};
    }
    OnnxNodeOp scores = product(chain->input);
    if (unflatten) {
      if (scoresUnflatten_)
        return {}; // the product unflattened, then the sum again
      scoresUnflatten_ = unflatten;
    }
    form = chain->nodes.empty() ? std::optional<ScaledSoftCap>(ScaledSoftCap{})
                                : fitScaledSoftCap(*chain);
    if (!form) {
      unsupported = {chain->nodes.back(),
                     "computes the attention scores from the product of q and k by a function "
                     "that is neither a scale nor a scale and a soft-cap c * tanh(s / c)"};
      return {};
    }
    return scores;
  }

  // The mask probe's verdict on `mask` (MaskProbe), once per mask value.
  const MaskVerdict &verdictOf(Value mask, OnnxNodeOp reshape, const AttentionMatch &m) {
    auto [it, inserted] = maskVerdicts_.try_emplace(mask);
    if (inserted)
      it->second = MaskProbe(reshape->getParentOfType<func::FuncOp>(), m.q.angles.positions,
                             tables_.weights())
                       .verdict(mask);
    return it->second;
  }

  // A "mask" that is ALiBi's bias plus the mask (MPT adds its bias to the scores and then the
  // mask; hetc-fold-shapes reassociates such sums to scores + (bias + mask + ...)): a term of the
  // sum (its tree of Adds) that fits ALiBi (fitAlibiSlopes) becomes the slopes, where the sum
  // without it is causal (the probe reads the difference).
  bool splitPositionBias(AttentionMatch &m, OnnxNodeOp reshape) {
    if (!m.alibiSlopes.empty())
      return false;
    SmallVector<Value> terms, worklist{m.mask};
    while (!worklist.empty() && terms.size() < 8) {
      Value v = worklist.pop_back_val();
      if (OnnxNodeOp sum = producer(v, "Add")) {
        worklist.push_back(sum->getOperand(0));
        worklist.push_back(sum->getOperand(1));
        continue;
      }
      terms.push_back(v);
    }
    for (Value term : terms) {
      std::string why;
      std::optional<std::vector<float>> slopes = fitAlibiSlopes(term, m.q.split.heads, why);
      if (!slopes)
        continue;
      MaskVerdict verdict = MaskProbe(reshape->getParentOfType<func::FuncOp>(),
                                      m.q.angles.positions, tables_.weights(), term)
                                .verdict(m.mask);
      if (verdict.error)
        continue;
      m.alibiSlopes = std::move(*slopes);
      m.window = verdict.window;
      return true;
    }
    return false;
  }

  // Whether the Reshape unflattens [B * H, S, X] to [B, H, S, X] (X = last where given): by its
  // target's entries (isHeadsUnflatten), or else by the target's values at a sample of two
  // sequences (one where the graph takes one only), which must be [batch, heads, new tokens, X]
  // (BLOOM computes B as the product's first dimension divided by H).
  bool unflattensHeads(OnnxNodeOp reshape, Value flat, int64_t heads,
                       std::optional<int64_t> last) {
    if (isHeadsUnflatten(reshape, flat, heads, last))
      return true;
    auto func = reshape->getParentOfType<func::FuncOp>();
    SampleEvaluator evaluator(func, {}, tables_.weights());
    const Sample sample{3, 5, evaluator.fixedBatchOfOne() ? 1 : 2, 0};
    std::string error;
    std::optional<Tensor> target = evaluator.evaluate(reshape->getOperand(1), sample, error);
    if (!target || target->isFloat() || target->size() != 4)
      return false;
    const std::vector<int64_t> &t = target->ints;
    // One of batch and new tokens may be left to the element count (-1).
    const bool batch = t[0] == sample.batch, tokens = t[2] == sample.seq;
    return t[1] == heads && (batch || (t[0] == -1 && tokens)) &&
           (tokens || (t[2] == -1 && batch)) && (!last || t[3] == *last || t[3] == -1);
  }

  // ALiBi's slopes of a bias added to the scores (positionBias_), one per query head, by its
  // values: evaluated at a prefill after a cache and at a decode step (one sequence), each row of
  // keys must be linear in the key's position, b_j = b_0 + slope j (a constant per row changes no
  // softmax: BLOOM counts from the first key, MPT back from the last), within 1e-5 relative; the
  // rows of one head (its queries) share a slope, which both samples agree on. The bias is
  // [..., heads or 1, queries or 1, keys] (or BLOOM's [batch * heads, 1, keys]). Anything else is
  // refused: `why` completes "<the Add> ...".
  std::optional<std::vector<float>> fitAlibiSlopes(Value bias, int64_t heads, std::string &why) {
    auto func = bias.getParentRegion()->getParentOfType<func::FuncOp>();
    SampleEvaluator evaluator(func, {}, tables_.weights());
    std::vector<float> slopes;
    for (const Sample &sample : {Sample{3, 5, 1, 0}, Sample{1, 9, 1, 0}}) {
      std::string error;
      std::optional<Tensor> t = evaluator.evaluate(bias, sample, error);
      if (!t || !t->isFloat()) {
        why = "adds to the scores a bias that could not be evaluated" + sample.described() +
              (error.empty() ? std::string() : ": " + error);
        return std::nullopt;
      }
      const int64_t keys = t->shape.empty() ? 1 : t->shape.back();
      const int64_t queries = t->shape.size() >= 2 ? t->shape[t->shape.size() - 2] : 1;
      const int64_t rows = keys > 0 ? t->size() / keys : 0;
      const int64_t headRows = queries > 0 ? rows / queries : 0;
      if (keys != sample.past + sample.seq || (headRows != 1 && headRows != heads)) {
        std::string shape;
        for (int64_t d : t->shape)
          shape += (shape.empty() ? "[" : ", ") + std::to_string(d);
        why = "adds to the scores a bias of shape " + shape + "]" + sample.described() +
              ", which is not per head and key (" + std::to_string(heads) + " heads, " +
              std::to_string(sample.past + sample.seq) + " keys)";
        return std::nullopt;
      }
      std::vector<double> fitted(heads, NAN);
      for (int64_t r = 0; r < rows; ++r) {
        const double *b = &t->floats[r * keys];
        const double slope = keys > 1 ? b[1] - b[0] : 0.0;
        for (int64_t j = 0; j < keys; ++j)
          if (!(std::fabs(b[j] - b[0] - slope * j) <= 1e-5 * (1 + std::fabs(b[j])))) {
            why = "adds to the scores a bias that is not linear in the key's position (ALiBi's "
                  "slope x position): at key " + std::to_string(j) + " of row " +
                  std::to_string(r) + " it is " + printed(b[j]) +
                  ", the line from its first two keys gives " + printed(b[0] + slope * j) +
                  sample.described();
            return std::nullopt;
          }
        // The row's head, or every head where the bias has none of its own.
        const int64_t first = headRows == 1 ? 0 : r / queries;
        const int64_t end = headRows == 1 ? heads : first + 1;
        for (int64_t h = first; h < end; ++h) {
          if (std::isnan(fitted[h]))
            fitted[h] = slope;
          else if (std::fabs(fitted[h] - slope) > 1e-5 * (1 + std::fabs(slope))) {
            why = "adds to the scores a position bias whose slope differs between the queries "
                  "of head " + std::to_string(h) + " (" + printed(fitted[h]) + " and " +
                  printed(slope) + ")" + sample.described();
            return std::nullopt;
          }
        }
      }
      if (slopes.empty()) {
        for (double f : fitted)
          slopes.push_back(static_cast<float>(f));
        continue;
      }
      for (int64_t h = 0; h < heads; ++h)
        if (std::fabs(slopes[h] - fitted[h]) > 1e-5 * (1 + std::fabs(fitted[h]))) {
          why = "adds to the scores a position bias whose slope for head " + std::to_string(h) +
                " changes with the length: " + printed(slopes[h]) + " and " + printed(fitted[h]) +
                sample.described();
          return std::nullopt;
        }
    }
    // A bias of zeros is no ALiBi: a padding mask of ones at these samples reads so.
    if (llvm::all_of(slopes, [](float slope) { return slope == 0.0f; })) {
      why = "adds to the scores a bias that is zero at one sequence without padding, where "
            "hetc expects a mask (or ALiBi's slopes)";
      return std::nullopt;
    }
    return slopes;
  }

  // x4 rotated (RopeMatch), or x4 as split into heads with rotaryDim 0 (OPT, GPT-2: no RoPE); the
  // flat value may be scaled first (OPT's q * scaling), which multiplies `scale`. A scaled k is
  // folded too: the ONNX cache then holds c k where hetc's holds k, but every key of the scores,
  // cached or new, is scaled alike, and hetc's cache is its own (never an output).
  std::optional<RopeMatch> rotatedOrNot(Value x4, float &scale) {
    if (headsByValuesOnly())
      return fitted(x4, scale);
    const Unsupported before = unsupported;
    if (std::optional<RopeMatch> rope = matchRope(x4, tables_, unsupported))
      return rope;
    std::optional<HeadsSplit> split = matchHeadsSplit(skipNoOps(x4));
    if (!split) {
      // A form read up to a part hetc refuses (RoPE tables whose halves differ by more than
      // a few ulps) may still be a rotation by its values; if not, the form's reason stands.
      std::optional<RopeMatch> byValues = fitted(x4, scale);
      if (byValues)
        unsupported = before;
      return byValues;
    }
    split->flat = withoutScale(split->flat, scale);
    return RopeMatch{*split, Angles{}, /*rotaryDim=*/0};
  }

  // The heads read by their values (RotationFit.h), where their form was not read: a uniform
  // scale of the region multiplies `scale`. Why not, if there is a region to fit, is kept in
  // fitWhy_ for the note that follows.
  std::optional<RopeMatch> fitted(Value x4, float &scale) {
    std::string why;
    std::optional<RotationFit> fit = fitRotation(x4, tables_.weights(), why);
    if (!fit) {
      fitWhy_ = why.empty() ? std::string() : "; read by its values, " + why;
      return std::nullopt;
    }
    scale *= static_cast<float>(fit->scale);
    OpBuilder builder(x4.getContext());
    RopeMatch match{HeadsSplit{projectionValue(*fit, builder), fit->heads, fit->headDim,
                               fit->broadcast},
                    Angles{fit->positions, InvFreq{fit->invFreq, {}, {}, nullptr}},
                    fit->rotaryDim, fit->interleaved};
    match.fit = fit->described;
    return match;
  }

  // HETC_RAISE_HEADS_BY_VALUES=1: every attention's heads read by their values alone, never by
  // their form (a check of the fit on exports whose form is read too; compiles are slower).
  static bool headsByValuesOnly() {
    static const bool first = [] {
      const char *flag = std::getenv("HETC_RAISE_HEADS_BY_VALUES");
      return flag && std::string(flag) == "1";
    }();
    return first;
  }

  // Whether q and k rotate by the same frequencies: equal, or both read by their values from
  // tables that round alike (then k takes q's).
  static bool sameFrequencies(const RopeMatch &q, RopeMatch &k) {
    if (k.angles.invFreq == q.angles.invFreq)
      return true;
    const SmallVector<double> &a = q.angles.invFreq.values, &b = k.angles.invFreq.values;
    if (q.fit.empty() || k.fit.empty() || a.size() != b.size())
      return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::fabs(a[i] - b[i]) > 1e-6 * std::fabs(a[i]))
        return false;
    k.angles.invFreq = q.angles.invFreq;
    return true;
  }

  // `v` without a Mul by a positive scalar constant, which multiplies `scale`.
  static Value withoutScale(Value v, float &scale) {
    OnnxNodeOp mul = producer(v, "Mul");
    if (!mul)
      return v;
    Value rest;
    matchCommutative(mul, [&](Value x, Value c) {
      std::optional<double> value = scalarValue(c);
      if (!value || !(*value > 0.0))
        return false;
      scale *= static_cast<float>(*value);
      rest = x;
      return true;
    });
    return rest ? rest : v;
  }

  // q and k^T may each be scaled before the product (torch.onnx writes SDPA as
  // MatMul(q * sqrt(s), k^T * sqrt(s))), k before or after its transpose.
  std::optional<AttentionMatch> matchOperands(OnnxNodeOp scores, float scale, Value vRep) {
    // OPT multiplies [B * H, S, D] by [B * H, D, T]: the same product once the heads merges are
    // looked through (headsMergeSource checks each is one).
    const bool flat = knownRank(scores->getResult(0)) == 3;
    Value qIn = withoutScale(scores->getOperand(0), scale);
    OnnxNodeOp qMerge = flat ? producer(qIn, "Reshape") : OnnxNodeOp();
    if (qMerge)
      qIn = qMerge->getOperand(0);
    std::optional<RopeMatch> q = rotatedOrNot(qIn, scale);
    OnnxNodeOp kT = producer(withoutScale(scores->getOperand(1), scale), "Transpose");
    if (!q)
      return note(scores, "multiplies " + describeValue(qIn) +
                              ", which is not the query heads: Transpose(Reshape(q, [batch, "
                              "sequence, heads, head_dim]), [0, 2, 1, 3]), rotated or not" +
                              fitWhy_);
    if (!kT || !hasPerm(kT, flat ? ArrayRef<int64_t>{0, 2, 1} : ArrayRef<int64_t>{0, 1, 3, 2}))
      return note(scores, "multiplies the query heads by " +
                              describeValue(scores->getOperand(1)) +
                              ", which is not the keys transposed (the last two axes swapped)");
    int64_t heads = q->split.heads, headDim = q->split.headDim;
    Value kIn = withoutScale(kT->getOperand(0), scale);
    if (flat) {
      const Value tokens = q->split.flat;
      const bool batchOfOne = takesBatchOfOneOnly(scores->getParentOfType<func::FuncOp>());
      kIn = headsMergeSource(kIn, heads, headDim, tokens, batchOfOne);
      vRep = headsMergeSource(vRep, heads, headDim, tokens, batchOfOne);
      if (!qMerge ||
          headsMergeSource(qMerge->getResult(0), heads, headDim, tokens, batchOfOne) != qIn ||
          !kIn || !vRep)
        return note(scores, "multiplies q, k and v flattened over batch x heads in a way hetc "
                            "cannot trace back to [batch, heads, sequence, head_dim]");
    }

    RepeatKv kRepeat = matchRepeatKv(kIn);
    RepeatKv vRepeat = matchRepeatKv(vRep);
    if (!kRepeat.base || !vRepeat.base)
      return note(scores, "repeats the cached " + std::string(kRepeat.base ? "values" : "keys") +
                              " over the query heads in a form hetc does not read (repeat_kv: "
                              "Reshape(Expand(Unsqueeze(x, 2), [.., n, ..]), [batch, heads * n, "
                              "positions, head_dim]))");
    std::optional<KvConcat> presentK = matchKvConcat(kRepeat.base);
    std::optional<KvConcat> presentV = matchKvConcat(vRepeat.base);
    if (!presentK || !presentV || presentK->past == presentV->past)
      return note(scores, "reads " + std::string(presentK ? "values" : "keys") + " (" +
                              describeValue(presentK ? vRepeat.base : kRepeat.base) +
                              ") that are not Concat(past input, new ones) along the positions, "
                              "written to a present output: a KV cache hetc can own");
    fitWhy_.clear();
    const float scaleBeforeKeys = scale;
    std::optional<RopeMatch> k = rotatedOrNot(presentK->fresh, scale);
    if (k && q->rotaryDim && !k->rotaryDim && k->fit.empty()) {
      // The form's split may have taken a scale the region read by its values holds too.
      scale = scaleBeforeKeys;
      k = fitted(presentK->fresh, scale);
    }
    if (!k)
      return note(presentK->concat,
                  "appends new keys (" + describeValue(presentK->fresh) + ") that are not the " +
                      "key heads split" +
                      (q->rotaryDim ? " and rotated as the query heads are" : std::string()) +
                      fitWhy_);
    // The query heads read by their form and the keys by their values (or the other way round):
    // both by their values, so that their frequencies compare.
    if (q->rotaryDim && k->rotaryDim && q->fit.empty() != k->fit.empty()) {
      float refitScale = 1.0f;
      std::optional<RopeMatch> refit =
          q->fit.empty() ? fitted(qIn, refitScale) : fitted(presentK->fresh, refitScale);
      if (refit && refitScale == 1.0f)
        *(q->fit.empty() ? &q : &k) = std::move(refit);
    }
    std::optional<HeadsSplit> v =
        headsByValuesOnly() ? std::nullopt : matchHeadsSplit(skipNoOps(presentV->fresh));
    if (!v) {
      fitWhy_.clear();
      float valueScale = 1.0f;
      std::optional<RopeMatch> values = fitted(presentV->fresh, valueScale);
      if (values && values->rotaryDim == 0 && valueScale == 1.0f)
        v = values->split;
      else if (values)
        fitWhy_ = "; read by their values, they are " +
                  std::string(values->rotaryDim ? "rotated" : "scaled");
    }
    if (!v)
      return note(presentV->concat, "appends new values (" + describeValue(presentV->fresh) +
                                        ") that are not the value heads split" + fitWhy_);
    if ((k->rotaryDim == 0) != (q->rotaryDim == 0))
      return note(scores, "rotates the query heads and not the keys");
    int64_t kvHeads = k->split.heads;
    if (q->split.broadcast != 1 || k->split.headDim != headDim || v->headDim != headDim ||
        v->heads != kvHeads || v->broadcast != k->split.broadcast || heads % kvHeads != 0)
      return note(scores, "multiplies queries of " + headsOf(q->split) + " with keys of " +
                              headsOf(k->split) + " and values of " + headsOf(*v) +
                              ": hetc's attention groups the query heads evenly over KV heads of "
                              "one head_dim");
    int64_t nRep = heads / kvHeads;
    // K and V broadcast to every query head before the cache need no repeat_kv after it.
    const bool broadcastCache = k->split.broadcast != 1;
    if (broadcastCache && k->split.broadcast != nRep)
      return note(scores, "caches keys of " + headsOf(k->split) + " for " +
                              std::to_string(heads) + " query heads");
    // One KV head needs no repeat_kv: the products broadcast it over the query heads (Falcon's
    // multi-query attention).
    auto repeats = [&](const RepeatKv &repeat) {
      if (broadcastCache)
        return repeat.nRep == 1;
      return repeat.nRep == nRep || (kvHeads == 1 && repeat.nRep == 1 && !flat);
    };
    if (!repeats(kRepeat) || !repeats(vRepeat))
      return note(scores, std::to_string(heads) + " query heads over " +
                              std::to_string(kvHeads) + " KV heads read each KV head " +
                              std::to_string(nRep) + " times; the graph repeats the keys " +
                              std::to_string(kRepeat.nRep) + " and the values " +
                              std::to_string(vRepeat.nRep) + " times");
    for (Value repeated : {kT->getOperand(0), vRep})
      if (nRep != 1 && !broadcastCache)
        if (std::optional<int64_t> h = repeatedHeads(repeated); h && *h != heads)
          return note(scores, "repeats the KV heads into " + std::to_string(*h) +
                                  " heads for " + std::to_string(heads) + " query heads");
    if (k->angles.positions != q->angles.positions || !sameFrequencies(*q, *k) ||
        k->rotaryDim != q->rotaryDim || k->interleaved != q->interleaved)
      return note(scores, "rotates the query heads and the keys differently (rotary dims " +
                              std::to_string(q->rotaryDim) + " and " +
                              std::to_string(k->rotaryDim) +
                              ", or other positions, frequencies or pairing)");
    return AttentionMatch{*q, *k, *v, *presentK, *presentV, scale};
  }

  DenseMap<Value, bool> &maskCache_;
  DenseMap<Value, MaskVerdict> &maskVerdicts_;
  RopeTables &tables_;
  OnnxNodeOp product_;
  // The Reshape that unflattens the scores' product to add the mask (OPT's bmm form), if any.
  OnnxNodeOp scoresUnflatten_;
  // A bias added to the scaled scores, computed from the graph's inputs (ALiBi), if any.
  Value positionBias_;
  // Why the last region read by its values was not heads (fitted), for the note that follows.
  std::string fitWhy_;
};

// hetc.rope on q and k (where they rotate) and hetc.attention in place of the region that ends
// at `out` (then read by nothing); the present outputs read the attention's caches.
AttentionOp rewriteAttention(const AttentionMatch &m, Value out, OpBuilder &builder) {
  builder.setInsertionPoint(out.getDefiningOp());
  Location loc = out.getLoc();
  int64_t heads = m.q.split.heads, kvHeads = m.k.split.heads, headDim = m.q.split.headDim;

  const int64_t rotaryDim = m.q.rotaryDim;
  Value invFreq = m.q.angles.invFreq.weight;
  if (!invFreq && rotaryDim) {
    auto type = RankedTensorType::get({rotaryDim / 2}, builder.getF32Type());
    SmallVector<float> values(m.q.angles.invFreq.values.begin(),
                              m.q.angles.invFreq.values.end());
    auto value = DenseElementsAttr::get(type, ArrayRef(values));
    invFreq = builder.create<ConstantOp>(loc, type, value);
  }
  Value positions = m.q.angles.positions;
  auto rope = [&](const HeadsSplit &split) {
    Type type = split.flat.getType();
    if (!featureSize(type))
      type = withFeatureSize(type, split.heads * split.headDim);
    return builder.create<RopeOp>(
        loc, type, split.flat, positions, invFreq, builder.getI64IntegerAttr(split.heads),
        builder.getI64IntegerAttr(split.headDim),
        rotaryDim == split.headDim ? IntegerAttr() : builder.getI64IntegerAttr(rotaryDim),
        m.q.interleaved ? builder.getUnitAttr() : UnitAttr());
  };
  auto rotated = [&](const RopeMatch &match) -> Value {
    if (!rotaryDim)
      return match.split.flat;
    RopeOp op = rope(match.split);
    if (!match.fit.empty())
      op->setAttr(planning::kFit, builder.getStringAttr(match.fit));
    return op.getResult();
  };
  Value q = rotated(m.q);
  Value k = rotated(m.k);

  Type resultType = out.getType();
  if (rankOf(out) != 3 || !featureSize(resultType))
    resultType = withFeatureSize(m.q.split.flat.getType(), heads * headDim);
  Value presentK = m.presentK.concat->getResult(0);
  Value presentV = m.presentV.concat->getResult(0);
  auto attention = builder.create<AttentionOp>(
      loc, TypeRange{resultType, presentK.getType(), presentV.getType()}, q, k,
      m.v.flat, m.presentK.past, m.presentV.past, builder.getI64IntegerAttr(heads),
      builder.getI64IntegerAttr(kvHeads), builder.getI64IntegerAttr(headDim),
      builder.getF32FloatAttr(m.scale),
      m.window ? builder.getI64IntegerAttr(*m.window) : IntegerAttr(),
      m.softcap ? builder.getF32FloatAttr(*m.softcap) : FloatAttr(),
      m.k.split.broadcast > 1 ? builder.getUnitAttr() : UnitAttr(),
      m.alibiSlopes.empty() ? DenseF32ArrayAttr()
                             : builder.getDenseF32ArrayAttr(m.alibiSlopes));

  out.replaceAllUsesWith(attention.getResult());
  // Earlier readers of the present values belong to the matched (now dead) computation.
  auto afterAttention = [&](OpOperand &use) {
    return use.getOwner()->getBlock() == attention->getBlock() &&
           attention->isBeforeInBlock(use.getOwner());
  };
  presentK.replaceUsesWithIf(attention.getPresentKey(), afterAttention);
  presentV.replaceUsesWithIf(attention.getPresentValue(), afterAttention);
  return attention;
}

// An attention found by dataflow alone, for its reading by values (AttentionFit.h): every node
// from the value an output projection reads back to LLM values and graph inputs, where it reads
// the values of two rank-4 graph inputs (the past caches) and appends to each a present output.
struct DataflowRegion {
  SmallVector<Operation *> nodes; // in program order
  SmallVector<Value> read;        // the LLM values it reads
  SmallVector<KvConcat> caches;
};

// A bound on a region's nodes: a layer's attention is tens to a few hundred (with its mask).
constexpr size_t kMaxDataflowRegionNodes = 4096;

std::optional<DataflowRegion> attentionRegionBehind(Value out) {
  Operation *end = out.getDefiningOp();
  if (!end || isa<LlmOp, WeightOp>(end) || (rankOf(out) != 3 && rankOf(out) != -1))
    return std::nullopt;
  DenseSet<Operation *> seen;
  llvm::SetVector<Value> read, pasts;
  SmallVector<Value> worklist{out};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (type && type.getRank() == 4 && isa<FloatType>(type.getElementType()))
        pasts.insert(arg);
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (isa<LlmOp>(def)) {
      read.insert(v);
      continue;
    }
    if (def->getBlock() != end->getBlock() || seen.size() >= kMaxDataflowRegionNodes)
      return std::nullopt;
    if (!seen.insert(def).second || isa<WeightOp>(def) || readsDimensionsOnly(def))
      continue; // what is read through Shape or Size alone is not read by value
    llvm::append_range(worklist, def->getOperands());
  }
  if (pasts.size() != 2)
    return std::nullopt;
  DataflowRegion region;
  // Its computation: constants and weights are what it reads, not where it starts.
  for (Operation *op : seen)
    if (!isa<ConstantOp, WeightOp>(op))
      region.nodes.push_back(op);
  llvm::sort(region.nodes, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  region.read.assign(read.begin(), read.end());
  for (Operation *op : region.nodes)
    if (isOnnx(op, "Concat"))
      if (std::optional<KvConcat> cache = matchKvConcat(op->getResult(0)))
        region.caches.push_back(*cache);
  return region;
}

// The region read by its values (fitAttentionRegion): the match hetc.attention is made from, its
// fit text in `described`; or why not.
std::optional<AttentionMatch> matchByValues(const DataflowRegion &region, Value out,
                                            const compiler::WeightStore *weights,
                                            std::string &why, std::string &described) {
  const std::string named = regionNamed(region.nodes);
  if (region.caches.size() != 2 || region.caches[0].past == region.caches[1].past) {
    why = named + " read two past caches but do not append to each one a present output "
                  "(Concat along the positions, returned)";
    return std::nullopt;
  }
  std::optional<RotationFit> fits[2];
  for (int i : {0, 1}) {
    std::string fitWhy;
    fits[i] = fitRotation(region.caches[i].fresh, weights, fitWhy);
    if (!fits[i] || !fits[i]->flat) {
      why = "node " + describe(region.caches[i].concat) +
            " appends new entries that are not the heads of one projection, rotated or not" +
            (fitWhy.empty() ? std::string() : ": " + fitWhy);
      return std::nullopt;
    }
  }
  if (fits[0]->rotaryDim && fits[1]->rotaryDim) {
    why = named + " rotate both caches' new entries: keys rotate, values do not";
    return std::nullopt;
  }
  // The keys are the rotated entries; where neither rotates, the first cache is tried as the keys
  // first, and the fit tells them apart (values weighted by a softmax give its weights back).
  SmallVector<std::pair<int, int>> orders;
  if (fits[1]->rotaryDim)
    orders = {{1, 0}};
  else if (fits[0]->rotaryDim)
    orders = {{0, 1}};
  else
    orders = {{0, 1}, {1, 0}};
  for (auto [ki, vi] : orders) {
    const RotationFit &keys = *fits[ki], &values = *fits[vi];
    SmallVector<Value> queries;
    for (Value v : region.read)
      if (v != keys.flat && v != values.flat)
        queries.push_back(v);
    if (queries.size() != 1) {
      if (why.empty())
        why = named + " read " + std::to_string(queries.size()) +
              " LLM values besides the keys' and values' projections, where an attention reads "
              "one, the queries";
      continue;
    }
    AttentionRegion attention{out,
                              queries.front(),
                              keys.flat,
                              values.flat,
                              region.caches[ki].past,
                              region.caches[vi].past,
                              region.caches[ki].concat->getResult(0),
                              region.caches[vi].concat->getResult(0),
                              &keys,
                              &values,
                              region.nodes};
    if (std::optional<std::pair<int64_t, Operation *>> offset = windowOffset(out))
      attention.windowHint = offset->first;
    std::string fitWhy;
    std::optional<AttentionRegionFit> fit = fitAttentionRegion(attention, weights, fitWhy);
    if (!fit) {
      if (why.empty())
        why = fitWhy;
      continue;
    }
    RopeMatch k{HeadsSplit{keys.flat, keys.heads, keys.headDim, keys.broadcast},
                Angles{keys.positions, InvFreq{keys.invFreq, {}, {}, nullptr}}, keys.rotaryDim,
                keys.interleaved, keys.described};
    RopeMatch q = k;
    q.split.flat = attention.q;
    q.split.heads = fit->heads;
    q.split.broadcast = 1;
    q.fit.clear();
    AttentionMatch m{q,
                     k,
                     HeadsSplit{values.flat, values.heads, values.headDim, values.broadcast},
                     region.caches[ki],
                     region.caches[vi],
                     static_cast<float>(fit->scale * keys.scale)};
    m.window = fit->window;
    m.alibiSlopes = fit->alibiSlopes;
    if (fit->softcap)
      m.softcap = static_cast<float>(*fit->softcap);
    described = fit->described;
    return m;
  }
  return std::nullopt;
}

// HETC_RAISE_ATTENTION_BY_VALUES=1: every attention read by its values alone, never by its form
// (a check of the fit on exports whose form is read too).
bool attentionsByValuesOnly() {
  static const bool only = [] {
    const char *flag = std::getenv("HETC_RAISE_ATTENTION_BY_VALUES");
    return flag && std::string(flag) == "1";
  }();
  return only;
}

// ONNX Runtime's MultiHeadAttention (com.microsoft), as its transformer optimizer fuses a Llama's
// attention: query, key, value [B, S, N * H] (q and k rotated before it), past_key and past_value
// [B, N, past, H] graph inputs, the mask as attention_bias (an additive mask computed from the
// inputs, which the probe must find causal, or causal within a window) or `unidirectional = 1`,
// a key_padding_mask computed from the inputs (all ones in hetc's use: sequences are never
// padded). Outputs: the attention, present_key, present_value. Returns false after an error.
bool raiseMultiHeadAttention(OnnxNodeOp node, DenseMap<Value, bool> &maskCache,
                             const compiler::WeightStore *weights, OpBuilder &builder) {
  auto refuse = [&](const Twine &why) {
    node.emitError() << "node " << describe(node) << " " << why;
    return false;
  };
  const unsigned n = node->getNumOperands();
  auto input = [&](unsigned i) { return i < n && !isa<NoneType>(node->getOperand(i).getType()); };
  if (!input(1) || !input(2) || rankOf(node->getOperand(1)) == 4)
    return refuse("takes packed QKV or a [batch, heads, sequence, head_dim] key, which hetc "
                  "does not split");
  if (input(3))
    return refuse("adds a bias to q, k and v, which hetc.attention does not");
  if (input(8) || input(9))
    return refuse("reads a past_sequence_length or cache_indirection (beam search), which "
                  "hetc.attention does not");
  if (node->getNumResults() > 3 && !node->getResult(3).use_empty())
    return refuse("has its scores output read, which hetc does not compute");
  Value pastK = input(6) ? skipNoOps(node->getOperand(6)) : Value();
  Value pastV = input(7) ? skipNoOps(node->getOperand(7)) : Value();
  if (!pastK || !pastV || !isa<BlockArgument>(pastK) || !isa<BlockArgument>(pastV) ||
      pastK == pastV || node->getNumResults() < 3)
    return refuse("does not read its past key and value from two graph inputs and write the "
                  "present ones");
  if (input(4) && !isInputMask(node->getOperand(4), maskCache))
    return refuse("reads a key_padding_mask computed from more than the graph inputs");
  const int64_t heads = intAttr(node, "num_heads").value_or(0);
  std::optional<int64_t> qf = knownFeatures(node->getOperand(0));
  std::optional<int64_t> kf = knownFeatures(node->getOperand(1));
  std::optional<int64_t> vf = knownFeatures(node->getOperand(2));
  if (heads <= 0 || !qf || !kf || !vf || *qf % heads != 0 || *kf != *qf || *vf != *qf)
    return refuse("has num_heads " + Twine(heads) + " and q, k, v whose sizes do not split into "
                  "them alike");
  const int64_t headDim = *qf / heads;
  std::optional<int64_t> window;
  if (input(5)) {
    Value mask = node->getOperand(5);
    if (!isInputMask(mask, maskCache))
      return refuse("adds an attention_bias computed from more than the graph inputs");
    Value positions;
    if (auto rope = skipNoOps(node->getOperand(0)).getDefiningOp<RopeOp>())
      positions = rope.getPositions();
    MaskVerdict verdict =
        MaskProbe(node->getParentOfType<func::FuncOp>(), positions, weights).verdict(mask);
    if (verdict.error)
      return refuse("adds an attention_bias that " + *verdict.error);
    window = verdict.window;
  } else if (intAttr(node, "unidirectional").value_or(0) != 1) {
    return refuse("attends without a causal mask (no attention_bias, unidirectional = 0), which "
                  "is not a decoder's attention");
  }
  double scale = floatAttr(node, "scale").value_or(0.0);
  if (scale == 0.0)
    scale = 1.0 / std::sqrt(static_cast<double>(headDim));
  builder.setInsertionPoint(node);
  Type out = node->getResult(0).getType();
  if (featureSize(out) != *qf)
    out = withFeatureSize(isa<RankedTensorType>(node->getOperand(0).getType())
                              ? node->getOperand(0).getType()
                              : out,
                          *qf);
  auto attention = builder.create<AttentionOp>(
      node->getLoc(), TypeRange{out, node->getResult(1).getType(), node->getResult(2).getType()},
      node->getOperand(0), node->getOperand(1), node->getOperand(2), pastK, pastV,
      builder.getI64IntegerAttr(heads), builder.getI64IntegerAttr(heads),
      builder.getI64IntegerAttr(headDim), builder.getF32FloatAttr(static_cast<float>(scale)),
      window ? builder.getI64IntegerAttr(*window) : IntegerAttr(), FloatAttr(), UnitAttr(),
      DenseF32ArrayAttr());
  for (unsigned r = 0; r < 3; ++r)
    node->getResult(r).replaceAllUsesWith(attention->getResult(r));
  node->erase();
  return true;
}

struct RaiseAttentionPass : public hetc::impl::RaiseAttentionBase<RaiseAttentionPass> {
  RaiseAttentionPass() = default;
  explicit RaiseAttentionPass(const compiler::WeightStore *weights) : weights_(weights) {}

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    OpBuilder builder(&getContext());
    perHeadNormsAsGroupedNorms(func, builder);
    SmallVector<OnnxNodeOp> reshapes, fused;
    func.walk([&](OnnxNodeOp op) {
      if (op.getOpType() == "Reshape" && op->getNumOperands() == 2 && op->getNumResults() == 1)
        reshapes.push_back(op);
      if (op.getOpType() == "MultiHeadAttention")
        fused.push_back(op);
    });
    DenseMap<Value, bool> maskCache;
    for (OnnxNodeOp node : fused)
      if (!raiseMultiHeadAttention(node, maskCache, weights_, builder))
        return signalPassFailure();
    DenseMap<Value, MaskVerdict> maskVerdicts;
    RopeTables tables(weights_);
    bool failed = false;
    // Attentions found by their product of weights and values and not raised, with the first
    // reason; and the products that were raised (by another reading of the same attention).
    llvm::MapVector<Operation *, Unsupported> unraised;
    DenseSet<Operation *> raisedProducts;
    // Structural errors wait until the attentions the forms did not read are read by values;
    // each is kept with its attention's product of weights and values (the region it is in:
    // the error's own node may be shared by every layer, a RoPE table's Gather).
    SmallVector<std::pair<Unsupported, Operation *>> errors;
    for (OnnxNodeOp reshape : attentionsByValuesOnly() ? SmallVector<OnnxNodeOp>() : reshapes) {
      AttentionMatcher matcher(maskCache, maskVerdicts, tables);
      std::optional<AttentionMatch> m = matcher.match(reshape);
      if (!m) {
        if (matcher.unsupported.op)
          errors.push_back({matcher.unsupported, matcher.product()});
        else if (matcher.diagnosis.op)
          unraised.try_emplace(matcher.product(), matcher.diagnosis);
        continue;
      }
      raisedProducts.insert(matcher.product());
      rewriteAttention(*m, reshape->getResult(0), builder);
      reshape->erase();
    }

    // What the forms did not read, found by dataflow from each output projection and read by its
    // values (AttentionFit.h).
    DenseSet<Operation *> fittedNodes;
    struct FailedFit {
      DataflowRegion region;
      std::string why;
    };
    SmallVector<FailedFit> failedFits;
    SmallVector<LinearOp> linears;
    func.walk([&](LinearOp linear) { linears.push_back(linear); });
    for (LinearOp linear : linears) {
      Value out = throughRowReshapes(linear.getX());
      std::optional<DataflowRegion> region = attentionRegionBehind(out);
      if (!region)
        continue;
      std::string why, described;
      std::optional<AttentionMatch> m = matchByValues(*region, out, weights_, why, described);
      if (!m) {
        failedFits.push_back({std::move(*region), std::move(why)});
        continue;
      }
      AttentionOp attention = rewriteAttention(*m, out, builder);
      attention->setAttr(planning::kFit, builder.getStringAttr(described));
      fittedNodes.insert(region->nodes.begin(), region->nodes.end());
    }
    // Why the region holding an attention's product was not read by its values either, if one
    // was tried.
    auto byValuesWhy = [&](Operation *product) -> std::string {
      for (FailedFit &failure : failedFits)
        if (product && llvm::is_contained(failure.region.nodes, product)) {
          failure.region.nodes.clear(); // said once
          return "; read by its values, " + failure.why;
        }
      return {};
    };
    for (const auto &[error, product] : errors) {
      if (product && fittedNodes.contains(product))
        continue;
      error.op->emitError() << "node " << describe(error.op) << " " << error.why
                            << byValuesWhy(product);
      failed = true;
    }
    // The root of the refusal: the attention region and why it did not match, rather than the
    // first node after it that CheckRaised would name. Not a failure of this pass: CheckRaised
    // fails on the unraised region (without a second error for it, `hetc.refused`) after the
    // passes in between had their say on the rest of the model, so that every blocker is listed.
    auto refuse = [&](Operation *root, const std::string &why) {
      root->emitError() << "node " << describe(root)
                        << " closes an attention hetc does not run: " << why;
      root->setAttr(kRefused, UnitAttr::get(root->getContext()));
    };
    for (auto &[product, why] : unraised)
      if (!raisedProducts.contains(product) && !fittedNodes.contains(product))
        refuse(product, (why.op == product ? "it" : "node " + describe(why.op)) + " " + why.why +
                            byValuesWhy(product));
    for (const FailedFit &failure : failedFits)
      if (!failure.region.nodes.empty())
        refuse(failure.region.nodes.back(), "read by its values, " + failure.why);
    // A linear after the attention may read its rows flattened (GPT-2's Conv1D).
    foldActivationViews(func);
    syncResultTypes(func);
    if (failed)
      signalPassFailure();
  }

  // Where RoPE tables' values are read; none in hetc-opt, where tables must be hetc.constant.
  const compiler::WeightStore *weights_ = nullptr;
};

} // namespace

std::unique_ptr<Pass> hetc::createRaiseAttention(const compiler::WeightStore *weights) {
  return std::make_unique<RaiseAttentionPass>(weights);
}
