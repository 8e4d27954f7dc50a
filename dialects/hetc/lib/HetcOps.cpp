// Verifiers of the hetc ops. Shapes are often partly dynamic at this level, so every check
// compares only the dimensions that are known.
#include "hetc/Dialect/HetcDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace hetc;

#include "hetc/Dialect/HetcInterfaces.cpp.inc"

std::optional<int64_t> hetc::featureSize(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked || ranked.getRank() == 0 || ranked.isDynamicDim(ranked.getRank() - 1))
    return std::nullopt;
  return ranked.getDimSize(ranked.getRank() - 1);
}

namespace {

// Fails when both feature sizes are known and differ.
LogicalResult checkFeatureSize(Operation *op, Value value, int64_t expected, StringRef what) {
  std::optional<int64_t> actual = featureSize(value.getType());
  if (actual && *actual != expected)
    return op->emitOpError() << what << " has " << *actual << " features, expected " << expected;
  return success();
}

LogicalResult checkMatrixWeight(Operation *op, Value x, Value w, Value result) {
  auto wType = cast<RankedTensorType>(w.getType());
  if (wType.getRank() != 2 || !wType.hasStaticShape())
    return op->emitOpError() << "weight must be a static 2-D tensor, got " << wType;
  if (failed(checkFeatureSize(op, x, wType.getDimSize(0), "input")) ||
      failed(checkFeatureSize(op, result, wType.getDimSize(1), "result")))
    return failure();
  return success();
}

} // namespace

LogicalResult OnnxNodeOp::verify() {
  if (getOpType().empty())
    return emitOpError("has an empty op_type");
  return success();
}

LogicalResult OnnxLoopOp::verify() {
  // inputs: M, cond, carried...; block: iteration, cond, carried...; yield: cond, carried...,
  // scans...; outputs: carried..., scans...
  if (getInputs().size() < 2)
    return emitOpError("takes a trip count and a condition (or none) before its carried values");
  const size_t carried = getInputs().size() - 2;
  Block &body = getBody().front();
  if (body.getNumArguments() != carried + 2)
    return emitOpError() << "body takes " << body.getNumArguments() << " arguments, expected "
                         << carried + 2 << " (iteration, condition and " << carried
                         << " carried values)";
  auto yield = body.empty() ? OnnxYieldOp() : dyn_cast<OnnxYieldOp>(body.back());
  if (!yield)
    return emitOpError("body must end in hetc.onnx.yield");
  if (yield.getValues().size() < carried + 1 ||
      yield.getValues().size() - 1 != getOutputs().size())
    return emitOpError() << "body yields " << yield.getValues().size()
                         << " values for a condition and " << getOutputs().size()
                         << " outputs, of which " << carried << " are carried";
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult WeightOp::verify() {
  auto type = cast<RankedTensorType>(getType());
  if (getTransposed() && type.getRank() != 2)
    return emitOpError() << "only a 2-D weight can be transposed, got " << type;
  if (std::optional<ArrayRef<int64_t>> columns = getColumns()) {
    if ((columns->size() != 2 && columns->size() != 3) || (*columns)[0] < 0 ||
        (*columns)[1] <= (*columns)[0] || (columns->size() == 3 && (*columns)[2] < (*columns)[1]))
      return emitOpError("columns must be [begin, end] or [begin, end, period] with 0 <= begin < "
                         "end <= period");
    const int64_t width = (*columns)[1] - (*columns)[0];
    if (type.getRank() < 1 || type.getDimSize(type.getRank() - 1) % width != 0 ||
        (columns->size() == 2 && type.getDimSize(type.getRank() - 1) != width))
      return emitOpError() << "columns [" << (*columns)[0] << ", " << (*columns)[1]
                           << ") do not match the last dimension of " << type;
  }
  return success();
}

LogicalResult EmbeddingOp::verify() {
  auto table = cast<RankedTensorType>(getTable().getType());
  if (table.getRank() != 2 || !table.hasStaticShape())
    return emitOpError() << "table must be a static [vocab, hidden] tensor, got " << table;
  if (Value positions = getPositions()) {
    auto type = cast<RankedTensorType>(positions.getType());
    if (type.getRank() != 2 || !type.hasStaticShape() || type.getDimSize(1) != table.getDimSize(1))
      return emitOpError() << "positions must be a static [max_positions, " << table.getDimSize(1)
                           << "] tensor, got " << type;
    if (getPositionOffset().value_or(0) < 0 ||
        getPositionOffset().value_or(0) >= type.getDimSize(0))
      return emitOpError() << "position_offset " << getPositionOffset().value_or(0)
                           << " is outside the " << type.getDimSize(0) << " position rows";
  } else if (getPositionOffset()) {
    return emitOpError("has a position_offset but no positions table");
  }
  if (std::optional<APFloat> scale = getScale();
      scale && (!scale->isFinite() || scale->isZero()))
    return emitOpError() << "scale must be finite and non-zero, got "
                         << scale->convertToFloat();
  return checkFeatureSize(*this, getResult(), table.getDimSize(1), "result");
}

LogicalResult LayerNormOp::verify() {
  auto gamma = cast<RankedTensorType>(getGamma().getType());
  if (gamma.getRank() != 1 || !gamma.hasStaticShape())
    return emitOpError() << "gamma must be a static 1-D tensor, got " << gamma;
  if (Value beta = getBeta(); beta && cast<RankedTensorType>(beta.getType()) != gamma)
    return emitOpError() << "beta must have gamma's type " << gamma << ", got " << beta.getType();
  if (!(getEpsilon().convertToFloat() > 0.0f))
    return emitOpError("epsilon must be positive");
  if (failed(checkFeatureSize(*this, getX(), gamma.getDimSize(0), "input")))
    return failure();
  return checkFeatureSize(*this, getResult(), gamma.getDimSize(0), "result");
}

LogicalResult ActivationOp::verify() {
  StringRef function = getFunction();
  if (function != "relu" && function != "gelu" && function != "gelu_tanh" && function != "silu" &&
      function != "relu2")
    return emitOpError() << "function must be relu, gelu, gelu_tanh, silu or relu2, got '"
                         << function << "'";
  std::optional<int64_t> in = featureSize(getX().getType());
  if (in && failed(checkFeatureSize(*this, getResult(), *in, "result")))
    return failure();
  return success();
}

LogicalResult RmsNormOp::verify() {
  auto gamma = cast<RankedTensorType>(getGamma().getType());
  if (gamma.getRank() != 1 || !gamma.hasStaticShape())
    return emitOpError() << "gamma must be a static 1-D tensor, got " << gamma;
  if (!(getEpsilon().convertToFloat() > 0.0f))
    return emitOpError("epsilon must be positive");
  // A gamma shorter than the features normalizes each group of its length (see the op's
  // description): the input's feature size must be a multiple of it, the result's the same.
  const int64_t group = gamma.getDimSize(0);
  std::optional<int64_t> features = featureSize(getX().getType());
  if (group <= 0 || (features && *features % group != 0))
    return emitOpError() << "input has " << (features ? *features : -1)
                         << " features, which groups of gamma's " << group << " do not divide";
  return features ? checkFeatureSize(*this, getResult(), *features, "result") : success();
}

LogicalResult LinearOp::verify() {
  if (failed(checkMatrixWeight(*this, getX(), getW(), getResult())))
    return failure();
  if (!getBias())
    return success();
  auto bias = cast<RankedTensorType>(getBias().getType());
  int64_t n = cast<RankedTensorType>(getW().getType()).getDimSize(1);
  if (bias.getRank() != 1 || bias.isDynamicDim(0) || bias.getDimSize(0) != n ||
      !isa<FloatType>(bias.getElementType()))
    return emitOpError() << "bias must be a float [" << n << "] tensor, got " << bias;
  return success();
}

// A soft-cap is a positive finite float.
static LogicalResult checkSoftCap(Operation *op, std::optional<APFloat> cap) {
  if (cap && !(cap->isFinite() && cap->convertToFloat() > 0.0f))
    return op->emitOpError() << "softcap must be positive and finite, got "
                             << cap->convertToFloat();
  return success();
}

LogicalResult LmHeadOp::verify() {
  if (failed(checkSoftCap(*this, getSoftcap())))
    return failure();
  if (Value bias = getBias()) {
    auto type = cast<RankedTensorType>(bias.getType());
    auto w = cast<RankedTensorType>(getW().getType());
    if (type.getRank() != 1 || w.getRank() != 2 || type.getDimSize(0) != w.getDimSize(1))
      return emitOpError() << "bias must be [vocab], got " << type << " for weight " << w;
  }
  return checkMatrixWeight(*this, getX(), getW(), getResult());
}

LogicalResult RopeOp::verify() {
  int64_t heads = getHeads(), headDim = getHeadDim();
  if (heads <= 0 || headDim <= 0 || headDim % 2 != 0)
    return emitOpError() << "needs positive heads and an even head_dim, got heads = " << heads
                         << ", head_dim = " << headDim;
  int64_t rotated = getRotatedColumns();
  if (rotated <= 0 || rotated > headDim || rotated % 2 != 0)
    return emitOpError() << "rotary_dim must be even, positive and at most head_dim " << headDim
                         << ", got " << rotated;
  auto invFreq = cast<RankedTensorType>(getInvFreq().getType());
  if (invFreq.getRank() != 1 || invFreq.getDimSize(0) != rotated / 2)
    return emitOpError() << "inv_freq must be [" << rotated / 2 << "], got " << invFreq;
  if (failed(checkFeatureSize(*this, getX(), heads * headDim, "input")))
    return failure();
  return checkFeatureSize(*this, getResult(), heads * headDim, "result");
}

LogicalResult AttentionOp::verify() {
  int64_t heads = getHeads(), kvHeads = getKvHeads(), headDim = getHeadDim();
  if (heads <= 0 || kvHeads <= 0 || headDim <= 0)
    return emitOpError("needs positive heads, kv_heads and head_dim");
  if (heads % kvHeads != 0)
    return emitOpError() << heads << " query heads cannot be grouped over " << kvHeads
                         << " KV heads";
  if (!(getScale().convertToFloat() > 0.0f))
    return emitOpError("scale must be positive");
  if (std::optional<int64_t> window = getSlidingWindow(); window && *window <= 0)
    return emitOpError() << "sliding_window must be positive, got " << *window;
  if (failed(checkSoftCap(*this, getSoftcap())))
    return failure();
  if (std::optional<ArrayRef<float>> slopes = getAlibiSlopes()) {
    if (static_cast<int64_t>(slopes->size()) != heads)
      return emitOpError() << "alibi_slopes has " << slopes->size() << " slopes for " << heads
                           << " heads";
    if (!llvm::all_of(*slopes, [](float slope) { return std::isfinite(slope); }))
      return emitOpError("alibi_slopes must be finite");
  }
  if (failed(checkFeatureSize(*this, getQ(), heads * headDim, "q")) ||
      failed(checkFeatureSize(*this, getK(), kvHeads * headDim, "k")) ||
      failed(checkFeatureSize(*this, getV(), kvHeads * headDim, "v")) ||
      failed(checkFeatureSize(*this, getResult(), heads * headDim, "result")))
    return failure();
  // The graph's view of the cache: each KV head once, or repeated for every query head.
  const int64_t cacheHeads = getBroadcastCache() ? heads : kvHeads;
  for (Value cache : {getPastKey(), getPastValue(), getPresentKey(), getPresentValue()}) {
    auto ranked = dyn_cast<RankedTensorType>(cache.getType());
    if (!ranked)
      continue;
    if (ranked.getRank() != 4)
      return emitOpError() << "KV cache tensors are [batch, kv_heads, positions, head_dim], got "
                           << ranked;
    if (!ranked.isDynamicDim(1) && ranked.getDimSize(1) != cacheHeads)
      return emitOpError() << "KV cache has " << ranked.getDimSize(1) << " heads, expected "
                           << cacheHeads;
    if (failed(checkFeatureSize(*this, cache, headDim, "KV cache")))
      return failure();
  }
  return success();
}

static LogicalResult checkSameFeatures(Operation *op, Value a, Value b, Value result) {
  std::optional<int64_t> fa = featureSize(a.getType()), fb = featureSize(b.getType());
  if (fa && fb && *fa != *fb)
    return op->emitOpError() << "operands have " << *fa << " and " << *fb << " features";
  std::optional<int64_t> known = fa ? fa : fb;
  return known ? checkFeatureSize(op, result, *known, "result") : success();
}

LogicalResult SwiGluOp::verify() {
  if (std::optional<StringRef> f = getFunction(); f && *f != "silu" && *f != "gelu" &&
                                                    *f != "gelu_tanh")
    return emitOpError() << "function must be silu, gelu or gelu_tanh, got '" << *f << "'";
  return checkSameFeatures(*this, getGate(), getUp(), getResult());
}

LogicalResult AddOp::verify() { return checkSameFeatures(*this, getLhs(), getRhs(), getResult()); }

// The LlmOp facts the ops do not take by default (HetcOps.td).

// The table is a weight and the ids are step metadata: nothing comes from an activation buffer.
SmallVector<unsigned> EmbeddingOp::getActivationOperandPositions() { return {}; }
Value EmbeddingOp::getTokenSource() { return getIds(); }

// q, k and v; the past cache is the plan's KV cache.
SmallVector<unsigned> AttentionOp::getActivationOperandPositions() { return {0, 1, 2}; }

SmallVector<unsigned> SwiGluOp::getActivationOperandPositions() { return {0, 1}; }

SmallVector<unsigned> AddOp::getActivationOperandPositions() { return {0, 1}; }

#define GET_OP_CLASSES
#include "hetc/Dialect/HetcOps.cpp.inc"
