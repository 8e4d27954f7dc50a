// ONNX Runtime's contrib operators, as ONNX Runtime GenAI's model builder and transformer optimizer
// write them, and ONNX's own fused LayerNormalization, raised to the LLM ops they compute. The semantics are ONNX Runtime's contrib operator documentation's:
//
//   SimplifiedLayerNormalization(X, scale; epsilon, axis = -1)       -> hetc.rms_norm
//   SkipSimplifiedLayerNormalization(input, skip, gamma; epsilon)
//       output 3 (input + skip)  -> an Add, raised as the residual add it is by RaiseResidualAdd
//       output 0                 -> hetc.rms_norm of that sum
//   LayerNormalization(X, scale, B; epsilon, axis = -1) (ONNX, opset 17) -> hetc.layer_norm
//   SkipLayerNormalization(input, skip, gamma, beta; epsilon)        -> as the simplified one,
//                                                                       with hetc.layer_norm
//   RotaryEmbedding(input [B, S, N * H], position_ids, cos_cache, sin_cache [positions, R / 2];
//                   interleaved, rotary_embedding_dim = 0 or R, num_heads, scale = 1)
//                                                                    -> hetc.rope, its
//       frequencies read from the caches (RopeTables), rotating the first R columns of each head
//       (R = H without num_heads), in interleaved pairs or rotate-half
//   GroupQueryAttention(query, key, value, past_key, past_value [B, kv_heads, past, H],
//                       seqlens_k, total_sequence_length, cos_cache, sin_cache, position_ids;
//                       num_heads, kv_num_heads, scale, local_window_size, do_rotary,
//                       rotary_interleaved)                          -> hetc.attention
//       GroupQueryAttention is causal; seqlens_k and total_sequence_length place the sequences of
//       a right-padded batch, and hetc never pads a sequence (each keeps its own cache), so they
//       are not needed: computed from attention_mask or given as inputs, they become dead.
//       Packed QKV (no key and value; query [B, S, (num_heads + 2 kv_num_heads) H], as the GenAI
//       builder writes it for CPU and CUDA) is split by an ONNX Split of the last axis, which
//       RaiseLinear turns into q, k and v linears over column slices of the packed weight.
//       With do_rotary the attention rotates q and k by cos_cache/sin_cache at the positions
//       seqlens_k implies (each token's index in its sequence): two hetc.rope, the second
//       rotating kv_num_heads heads, with the frequencies read from the caches.
//
//   Attention(input, weights, bias, mask_index, past [2, B, heads, past, H]; num_heads,
//             unidirectional = 1)                                    -> hetc.attention over
//       q, k and v split from MatMul(input, weights) + bias (as packed QKV above), the stacked
//       past and present being the importer's two halves (ONNX Runtime's GPT-2 export)
//   EmbedLayerNormalization(input_ids, -, word_embedding, position_embedding, -, gamma, beta,
//                           -, position_ids)                         -> the token and position
//       Gathers (raised by RaiseEmbedding), their sum as output 2 and its hetc.layer_norm
//
// Whatever these ops do that the LLM ops do not (a bias on the skip sum, a softcap, an attention
// bias, head sinks, a read of the inverse deviation) is refused with the node and the attribute
// or input.
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"
#include "raise/RopeTables.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace hetc {
#define GEN_PASS_DEF_RAISECONTRIBOPS
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

bool isNone(Value v) { return isa<NoneType>(v.getType()); }

// The result type of an LLM op replacing `result`: its own, or [.., features] like `like`.
Type llmType(Value result, Value like, int64_t features) {
  if (featureSize(result.getType()) == features)
    return result.getType();
  Type base = isa<RankedTensorType>(like.getType()) ? like.getType() : result.getType();
  return withFeatureSize(base, features);
}

class ContribRaiser {
public:
  ContribRaiser(OpBuilder &builder, RopeTables &tables) : builder_(builder), tables_(tables) {}

  // Raises `node` if it is one of the ops above; false after an error was emitted.
  bool raise(OnnxNodeOp node) {
    StringRef type = node.getOpType();
    builder_.setInsertionPoint(node);
    if (type == "SimplifiedLayerNormalization")
      return norm(node, node->getOperand(0), node->getOperand(1), Value(), /*skip=*/false,
                  /*layerNorm=*/false);
    if (type == "LayerNormalization")
      return norm(node, node->getOperand(0), node->getOperand(1), optionalOperand(node, 2),
                  /*skip=*/false, /*layerNorm=*/true);
    if (type == "SkipSimplifiedLayerNormalization" || type == "SkipLayerNormalization")
      return skipNorm(node, /*layerNorm=*/type == "SkipLayerNormalization");
    if (type == "RotaryEmbedding")
      return rotary(node);
    if (type == "GroupQueryAttention")
      return attention(node);
    if (type == "Attention")
      return packedAttention(node);
    if (type == "EmbedLayerNormalization")
      return embedLayerNorm(node);
    return true;
  }

private:
  bool refuse(OnnxNodeOp node, const Twine &why) {
    node.emitError() << "node " << describe(node) << " " << why;
    return false;
  }

  // Fails when one of `results` is read: what they compute has no LLM op.
  bool unread(OnnxNodeOp node, ArrayRef<unsigned> results, StringRef what) {
    for (unsigned r : results)
      if (r < node->getNumResults() && !node->getResult(r).use_empty())
        return refuse(node, "has its output " + Twine(r) + " (" + what +
                                ") read, which hetc does not compute");
    return true;
  }

  static Value optionalOperand(OnnxNodeOp node, unsigned i) {
    return i < node->getNumOperands() && !isNone(node->getOperand(i)) ? node->getOperand(i)
                                                                       : Value();
  }

  // A [hidden] weight or constant, through no-op nodes and float casts (a float16 file whose
  // norms ONNX Runtime's converter keeps in float32); null otherwise.
  static Value vectorWeight(Value v) {
    v = skipFloatCasts(v);
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || type.getRank() != 1 || !type.hasStaticShape() ||
        !(v.getDefiningOp<WeightOp>() || v.getDefiningOp<ConstantOp>()))
      return {};
    return v;
  }

  // RMSNorm (hetc.rms_norm) or, with `layerNorm`, LayerNorm with an optional bias `beta`
  // (hetc.layer_norm) of `x`.
  bool norm(OnnxNodeOp node, Value x, Value gamma, Value beta, bool skip, bool layerNorm) {
    std::optional<int64_t> axis = intAttr(node, "axis");
    if (axis && *axis != -1 && !(rankOf(x) > 0 && *axis == rankOf(x) - 1))
      return refuse(node, "normalizes over axis " + Twine(*axis) + ", not the last");
    // Outputs 1 and 2, where the op has them: the mean and the inverse standard deviation.
    if (!unread(node, {1, 2}, "the mean or inverse standard deviation"))
      return false;
    gamma = vectorWeight(gamma);
    if (!gamma)
      return refuse(node, "scales by a value that is not a [hidden] weight");
    if (beta) {
      beta = vectorWeight(beta);
      if (!beta || beta.getType() != gamma.getType())
        return refuse(node, "adds a bias that is not a [hidden] weight like its scale");
    }
    // Default epsilons: 1e-5 for the single norms (ONNX's LayerNormalization and ONNX Runtime's
    // SimplifiedLayerNormalization), 1e-12 for ONNX Runtime's skip norms.
    const double eps = floatAttr(node, "epsilon").value_or(skip ? 1e-12 : 1e-5);
    if (!(eps > 0.0))
      return refuse(node, "has epsilon " + printed(eps, 6) + "; hetc's norms need a positive one");
    const int64_t hidden = cast<RankedTensorType>(gamma.getType()).getDimSize(0);
    Type type = llmType(node->getResult(0), x, hidden);
    FloatAttr epsilon = builder_.getF32FloatAttr(static_cast<float>(eps));
    Value normed =
        layerNorm ? builder_.create<LayerNormOp>(node->getLoc(), type, x, gamma, beta, epsilon)
                        .getResult()
                  : builder_.create<RmsNormOp>(node->getLoc(), type, x, gamma, epsilon).getResult();
    node->getResult(0).replaceAllUsesWith(normed);
    return true;
  }

  // Skip(Simplified)LayerNormalization(input, skip, gamma[, beta], [bias]): the norm of
  // input + bias + skip, the sum as output 3. The bias is added to the input first: the bias of
  // the linear the input comes from, as ONNX Runtime's fusion takes it (GPT-2's c_proj).
  bool skipNorm(OnnxNodeOp node, bool layerNorm) {
    Value input = node->getOperand(0);
    if (Value bias = optionalOperand(node, layerNorm ? 4 : 3)) {
      if (!vectorWeight(bias))
        return refuse(node, "adds a bias to the skip sum that is not a [hidden] weight");
      input = builder_
                  .create<OnnxNodeOp>(node->getLoc(), TypeRange{input.getType()}, "Add",
                                      (node.getNodeName() + "/bias").str(), DictionaryAttr(),
                                      ValueRange{input, bias})
                  ->getResult(0);
    }
    std::optional<int64_t> hidden = knownFeatures(node->getOperand(0));
    if (!hidden)
      hidden = knownFeatures(node->getOperand(1));
    if (!hidden)
      return refuse(node, "adds activations whose feature size hetc cannot tell");
    // The sum as an ONNX Add: the residual add it is, raised once its operands are LLM values.
    Value sumResult = node->getNumResults() > 3 ? node->getResult(3) : Value();
    Type sumType = sumResult ? llmType(sumResult, node->getOperand(0), *hidden)
                             : withFeatureSize(node->getOperand(0).getType(), *hidden);
    auto sum = builder_.create<OnnxNodeOp>(
        node->getLoc(), TypeRange{sumType}, "Add", (node.getNodeName() + "/skip_sum").str(),
        DictionaryAttr(), ValueRange{input, node->getOperand(1)});
    if (sumResult)
      sumResult.replaceAllUsesWith(sum->getResult(0));
    return norm(node, sum->getResult(0), node->getOperand(2),
                layerNorm ? optionalOperand(node, 3) : Value(), /*skip=*/true, layerNorm);
  }

  bool rotary(OnnxNodeOp node) {
    if (double scale = floatAttr(node, "scale").value_or(1.0); scale != 1.0)
      return refuse(node, "scales positions by " + printed(scale, 6) + ", which hetc.rope does not do");
    if (intAttr(node, "is_packed_batching").value_or(0) != 0)
      return refuse(node, "takes packed batches, which hetc.rope does not");
    Value x = node->getOperand(0);
    if (rankOf(x) == 4)
      return refuse(node, "rotates a [batch, heads, sequence, head_dim] input; hetc.rope takes "
                          "[batch, sequence, heads * head_dim]");
    Value positions = skipNoOps(node->getOperand(1));
    auto posType = dyn_cast<RankedTensorType>(positions.getType());
    if (!isa<BlockArgument>(positions) || !posType || posType.getRank() != 2 ||
        !isa<IntegerType>(posType.getElementType()))
      return refuse(node, "reads positions that are not a [batch, sequence] graph input");
    std::optional<int64_t> features = knownFeatures(x);
    auto cache = dyn_cast<RankedTensorType>(skipNoOps(node->getOperand(2)).getType());
    if (!features || !cache || cache.getRank() != 2 || cache.isDynamicDim(1))
      return refuse(node, "rotates an input or reads caches whose sizes hetc cannot tell");
    // Without num_heads, a head is what the caches rotate.
    const int64_t rotaryDim = 2 * cache.getDimSize(1);
    int64_t heads = intAttr(node, "num_heads").value_or(0);
    int64_t headDim = heads > 0 ? *features / heads : rotaryDim;
    if (heads <= 0)
      heads = *features / headDim;
    if (heads * headDim != *features)
      return refuse(node, "splits " + Twine(*features) + " features into heads of " +
                              Twine(headDim) + ", which does not divide them");
    // The caches cover the rotated columns: all of a head, or its first rotary_embedding_dim.
    int64_t declared = intAttr(node, "rotary_embedding_dim").value_or(0);
    if (declared != 0 && declared != rotaryDim)
      return refuse(node, "declares rotary_embedding_dim " + Twine(declared) + " but its caches "
                              "cover " + Twine(rotaryDim) + " columns");
    std::optional<std::pair<Value, int64_t>> invFreq =
        frequencies(node, node->getOperand(2), node->getOperand(3), headDim);
    if (!invFreq)
      return false;
    const bool interleaved = intAttr(node, "interleaved").value_or(0) != 0;
    Value rope = rotate(node, llmType(node->getResult(0), x, *features), x, heads, headDim,
                        *invFreq, interleaved, positions);
    node->getResult(0).replaceAllUsesWith(rope);
    return true;
  }

  // inv_freq read from cos/sin caches [positions, R / 2], and R, the columns of a head of
  // `headDim` they rotate; nullopt after an error.
  std::optional<std::pair<Value, int64_t>> frequencies(OnnxNodeOp node, Value cos, Value sin,
                                                       int64_t headDim) {
    cos = skipNoOps(cos);
    auto cache = dyn_cast<RankedTensorType>(cos.getType());
    if (!cache || cache.getRank() != 2 || cache.isDynamicDim(1)) {
      refuse(node, "reads cos/sin caches whose sizes hetc cannot tell");
      return std::nullopt;
    }
    const int64_t rotaryDim = 2 * cache.getDimSize(1);
    if (rotaryDim > headDim) {
      refuse(node, "has cos/sin caches for " + Twine(rotaryDim) + " columns, more than its heads' " +
                       Twine(headDim));
      return std::nullopt;
    }
    std::string why;
    std::optional<SmallVector<double>> freqs =
        tables_.recover(cos, skipNoOps(sin), rotaryDim, RopeTables::Width::Half, why);
    if (!freqs) {
      refuse(node, "reads cos/sin caches that " + why);
      return std::nullopt;
    }
    auto invType = RankedTensorType::get({rotaryDim / 2}, builder_.getF32Type());
    SmallVector<float> values(freqs->begin(), freqs->end());
    Value invFreq = builder_.create<ConstantOp>(node->getLoc(), invType,
                                                DenseElementsAttr::get(invType, ArrayRef(values)));
    return std::make_pair(invFreq, rotaryDim);
  }

  // hetc.rope of `x` ([.., heads * headDim]) by `invFreq`, of type `type`; positions from the
  // cache without `positions`.
  Value rotate(OnnxNodeOp node, Type type, Value x, int64_t heads, int64_t headDim,
               std::pair<Value, int64_t> invFreq, bool interleaved, Value positions = {}) {
    auto [freqs, rotaryDim] = invFreq;
    return builder_.create<RopeOp>(
        node->getLoc(), type, x, positions, freqs, builder_.getI64IntegerAttr(heads),
        builder_.getI64IntegerAttr(headDim),
        rotaryDim == headDim ? IntegerAttr() : builder_.getI64IntegerAttr(rotaryDim),
        interleaved ? builder_.getUnitAttr() : UnitAttr());
  }

  // q, k and v out of packed QKV: an ONNX Split of the last axis, which RaiseLinear turns into
  // three linears over column slices of the packed projection's weight.
  std::tuple<Value, Value, Value> splitPacked(OnnxNodeOp node, Value packed, int64_t qFeatures,
                                              int64_t kvFeatures) {
    auto sizesType = RankedTensorType::get({3}, builder_.getI64Type());
    Value sizes = builder_.create<ConstantOp>(
        node->getLoc(), sizesType,
        DenseElementsAttr::get(sizesType, ArrayRef<int64_t>{qFeatures, kvFeatures, kvFeatures}));
    auto split = builder_.create<OnnxNodeOp>(
        node->getLoc(),
        TypeRange{withFeatureSize(packed.getType(), qFeatures),
                  withFeatureSize(packed.getType(), kvFeatures),
                  withFeatureSize(packed.getType(), kvFeatures)},
        "Split", (node.getNodeName() + "/packed_qkv").str(),
        builder_.getDictionaryAttr(builder_.getNamedAttr("axis", builder_.getI64IntegerAttr(-1))),
        ValueRange{packed, sizes});
    return {split->getResult(0), split->getResult(1), split->getResult(2)};
  }

  bool attention(OnnxNodeOp node) {
    const unsigned n = node->getNumOperands();
    auto input = [&](unsigned i) { return i < n && !isNone(node->getOperand(i)); };
    // local_window_size = W: each query sees its last W keys (ONNX Runtime's CPU kernel and
    // transformers' sliding_window = W agree, the export tests check).
    const int64_t window = intAttr(node, "local_window_size").value_or(-1);
    if (window == 0 || window < -1)
      return refuse(node, "has local_window_size " + Twine(window) + "; -1 or a positive one");
    // softcap = c > 0: scores c * tanh(s / c) after the scale (Gemma 2's, as ONNX Runtime's
    // kernels apply it), hetc.attention's softcap.
    const double softcap = floatAttr(node, "softcap").value_or(0.0);
    if (!(softcap >= 0.0) || !std::isfinite(softcap))
      return refuse(node, "has softcap " + printed(softcap, 6) + "; 0 or a positive one");
    if (intAttr(node, "smooth_softmax").value_or(0) != 0)
      return refuse(node, "uses a smooth softmax, which hetc.attention does not");
    if (intAttr(node, "causal").value_or(1) != 1)
      return refuse(node, "is not causal (causal = 0), which hetc.attention always is");
    if (input(1) != input(2))
      return refuse(node, "takes a key without a value or a value without a key");
    if (input(10) || input(11))
      return refuse(node, "adds an attention bias or head sinks, which hetc.attention does not");
    if (!unread(node, {3}, "the attention scores"))
      return false;
    Value pastK = input(3) ? skipNoOps(node->getOperand(3)) : Value();
    Value pastV = input(4) ? skipNoOps(node->getOperand(4)) : Value();
    if (!pastK || !pastV || !isa<BlockArgument>(pastK) || !isa<BlockArgument>(pastV) ||
        pastK == pastV)
      return refuse(node, "does not read its past key and value from two graph inputs");
    const int64_t heads = intAttr(node, "num_heads").value_or(0);
    const int64_t kvHeads = intAttr(node, "kv_num_heads").value_or(0);
    if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0)
      return refuse(node, "has num_heads " + Twine(heads) + " and kv_num_heads " + Twine(kvHeads) +
                              "; query heads must be a positive multiple of key/value heads");
    Value q = node->getOperand(0), k, v;
    std::optional<int64_t> qFeatures = knownFeatures(q);
    int64_t headDim = 0;
    if (input(1)) {
      k = node->getOperand(1);
      v = node->getOperand(2);
      std::optional<int64_t> kFeatures = knownFeatures(k), vFeatures = knownFeatures(v);
      if (!qFeatures || !kFeatures || !vFeatures || *qFeatures % heads != 0)
        return refuse(node, "has inputs whose sizes do not split into " + Twine(heads) + " heads");
      headDim = *qFeatures / heads;
      if (*kFeatures != kvHeads * headDim || *vFeatures != kvHeads * headDim)
        return refuse(node, "reads key/value of " + Twine(*kFeatures) + "/" + Twine(*vFeatures) +
                                " features; " + Twine(kvHeads) + " heads of " + Twine(headDim) +
                                " need " + Twine(kvHeads * headDim));
    } else {
      // Packed QKV: query holds q, k and v side by side, [B, S, (heads + 2 kv_heads) head_dim].
      const int64_t packedHeads = heads + 2 * kvHeads;
      if (!qFeatures || *qFeatures % packedHeads != 0)
        return refuse(node, "takes packed QKV whose size does not split into " + Twine(heads) +
                                " + 2 x " + Twine(kvHeads) + " heads");
      headDim = *qFeatures / packedHeads;
      std::tie(q, k, v) = splitPacked(node, q, heads * headDim, kvHeads * headDim);
    }
    // do_rotary: the attention rotates q and k by its cos/sin caches (inputs 7 and 8) at the
    // positions seqlens_k implies, each token's index in its sequence: hetc.rope without
    // positions.
    if (intAttr(node, "do_rotary").value_or(0) != 0) {
      if (!input(7) || !input(8))
        return refuse(node, "rotates q and k (do_rotary = 1) but has no cos/sin cache inputs");
      if (input(9) && !isa<BlockArgument>(skipNoOps(node->getOperand(9))))
        return refuse(node, "rotates at position ids that are not a graph input");
      const bool interleaved = intAttr(node, "rotary_interleaved").value_or(0) != 0;
      std::optional<std::pair<Value, int64_t>> invFreq =
          frequencies(node, node->getOperand(7), node->getOperand(8), headDim);
      if (!invFreq)
        return false;
      // position_ids, when given, hold the same positions; hetc.rope takes them as it finds them.
      Value positions = input(9) ? skipNoOps(node->getOperand(9)) : Value();
      q = rotate(node, withFeatureSize(q.getType(), heads * headDim), q, heads, headDim, *invFreq,
                 interleaved, positions);
      k = rotate(node, withFeatureSize(k.getType(), kvHeads * headDim), k, kvHeads, headDim,
                 *invFreq, interleaved, positions);
    } else if (input(7) || input(8) || input(9)) {
      return refuse(node, "takes cos/sin caches or position ids without do_rotary = 1");
    }
    double scale = floatAttr(node, "scale").value_or(0.0);
    if (scale == 0.0)
      scale = 1.0 / std::sqrt(static_cast<double>(headDim));
    Type out = llmType(node->getResult(0), node->getOperand(0), heads * headDim);
    auto attention = builder_.create<AttentionOp>(
        node->getLoc(), TypeRange{out, node->getResult(1).getType(), node->getResult(2).getType()},
        q, k, v, pastK, pastV,
        builder_.getI64IntegerAttr(heads), builder_.getI64IntegerAttr(kvHeads),
        builder_.getI64IntegerAttr(headDim), builder_.getF32FloatAttr(static_cast<float>(scale)),
        window > 0 ? builder_.getI64IntegerAttr(window) : IntegerAttr(),
        softcap > 0.0 ? builder_.getF32FloatAttr(static_cast<float>(softcap)) : FloatAttr(),
        UnitAttr(), DenseF32ArrayAttr());
    for (unsigned r = 0; r < 3; ++r)
      node->getResult(r).replaceAllUsesWith(attention->getResult(r));
    return true;
  }

  // EmbedLayerNormalization(input_ids, segment_ids, word_embedding, position_embedding,
  // segment_embedding, gamma, beta, mask, position_ids; epsilon): the token rows plus the
  // position rows (Gathers the embedding raising reads), output 2 that sum, output 0 its
  // LayerNorm. Segments and the mask index (output 1) are refused; so are positions not given
  // (ONNX Runtime then uses 0 .. S - 1, which is not a cached decoder's positions).
  bool embedLayerNorm(OnnxNodeOp node) {
    if (optionalOperand(node, 1) || optionalOperand(node, 4))
      return refuse(node, "adds segment embeddings, which a decoder hetc runs does not have");
    if (!unread(node, {1}, "the mask index"))
      return false;
    Value positions = optionalOperand(node, 8);
    if (!positions)
      return refuse(node, "has no position_ids: ONNX Runtime then embeds positions 0 .. S - 1 "
                          "at every step, which a decoder with a KV cache cannot use");
    Value table = node->getOperand(2), positionTable = node->getOperand(3);
    std::optional<int64_t> hidden = knownFeatures(table);
    if (!hidden || knownFeatures(positionTable) != hidden)
      return refuse(node, "has word and position tables whose widths hetc cannot tell or differ");
    Type rowType = withFeatureSize(node->getResult(0).getType(), *hidden);
    auto gather = [&](Value rows, Value index, StringRef what) {
      return builder_
          .create<OnnxNodeOp>(node->getLoc(), TypeRange{rowType}, "Gather",
                              (node.getNodeName() + "/" + what).str(),
                              builder_.getDictionaryAttr(
                                  builder_.getNamedAttr("axis", builder_.getI64IntegerAttr(0))),
                              ValueRange{rows, index})
          ->getResult(0);
    };
    Value tokens = gather(table, node->getOperand(0), "tokens");
    Value placed = gather(positionTable, positions, "positions");
    Value sum = builder_
                    .create<OnnxNodeOp>(node->getLoc(), TypeRange{rowType}, "Add",
                                        (node.getNodeName() + "/embedding_sum").str(),
                                        DictionaryAttr(), ValueRange{tokens, placed})
                    ->getResult(0);
    if (node->getNumResults() > 2)
      node->getResult(2).replaceAllUsesWith(sum);
    return norm(node, sum, node->getOperand(5), optionalOperand(node, 6), /*skip=*/true,
                /*layerNorm=*/true);
  }

  // The key and the value of a stacked KV input: the importer's Concat(Unsqueeze(key, [0]),
  // Unsqueeze(value, [0]), axis 0) of two graph inputs.
  static std::optional<std::pair<Value, Value>> stackedHalves(Value past) {
    OnnxNodeOp concat = producer(skipNoOps(past), "Concat");
    if (!concat || concat->getNumOperands() != 2 || intAttr(concat, "axis").value_or(-1) != 0)
      return std::nullopt;
    SmallVector<Value, 2> halves;
    for (Value part : concat->getOperands()) {
      OnnxNodeOp unsqueeze = producer(part, "Unsqueeze");
      std::optional<SmallVector<int64_t>> axes = unsqueeze ? axesOf(unsqueeze) : std::nullopt;
      if (!axes || *axes != SmallVector<int64_t>{0} ||
          !isa<BlockArgument>(unsqueeze->getOperand(0)))
        return std::nullopt;
      halves.push_back(unsqueeze->getOperand(0));
    }
    if (halves[0] == halves[1])
      return std::nullopt;
    return std::make_pair(halves[0], halves[1]);
  }

  // com.microsoft Attention(input, weights [hidden, 3 hidden], bias [3 hidden], mask_index,
  // past [2, batch, heads, past, head_dim], attention_bias, past_sequence_length; num_heads,
  // unidirectional, qkv_hidden_sizes, scale, ...) with a present [2, batch, heads, total,
  // head_dim] output: the projection as MatMul (+ Add of the bias) split into q, k and v (the
  // packed-QKV path above), and hetc.attention over the stacked cache's halves, whose present key
  // and value become the halves of the present output the importer took apart. A 2-D mask_index
  // is the padding mask, which hetc does not need (it never pads); other masks, an attention
  // bias, rotary, unequal q/k/v sizes and a non-causal attention are refused.
  bool packedAttention(OnnxNodeOp node) {
    const unsigned n = node->getNumOperands();
    auto input = [&](unsigned i) { return i < n && !isNone(node->getOperand(i)); };
    if (intAttr(node, "unidirectional").value_or(0) != 1)
      return refuse(node, "is not causal (unidirectional = 0), which hetc.attention always is");
    if (intAttr(node, "do_rotary").value_or(0) != 0)
      return refuse(node, "rotates q and k itself (do_rotary = 1), which hetc reads only in "
                          "GroupQueryAttention");
    if (intAttr(node, "past_present_share_buffer").value_or(0) != 0)
      return refuse(node, "shares its past and present buffers, which hetc does not read");
    if (input(5) || input(6))
      return refuse(node, "adds an attention bias or takes a past sequence length, which "
                          "hetc.attention does not");
    if (input(3) && rankOf(node->getOperand(3)) != 2)
      return refuse(node, "takes a mask_index of rank " + Twine(rankOf(node->getOperand(3))) +
                              "; hetc reads a [batch, total] padding mask (and needs none)");
    if (!input(4))
      return refuse(node, "has no past input: a decoder hetc runs keeps a KV cache");
    std::optional<std::pair<Value, Value>> past = stackedHalves(node->getOperand(4));
    if (!past)
      return refuse(node, "does not read its past from one stacked [2, batch, heads, past, "
                          "head_dim] graph input");
    const int64_t heads = intAttr(node, "num_heads").value_or(0);
    Value weights = skipNoOps(node->getOperand(1));
    auto weightType = dyn_cast<RankedTensorType>(weights.getType());
    if (heads <= 0 || !weightType || weightType.getRank() != 2 || !weightType.hasStaticShape() ||
        weightType.getDimSize(1) % 3 != 0 || (weightType.getDimSize(1) / 3) % heads != 0)
      return refuse(node, "has weights that do not split into q, k and v of " + Twine(heads) +
                              " heads");
    const int64_t features = weightType.getDimSize(1) / 3;
    if (std::optional<SmallVector<int64_t>> sizes = intsAttr(node, "qkv_hidden_sizes");
        sizes && *sizes != SmallVector<int64_t>{features, features, features})
      return refuse(node, "has q, k and v of different sizes (qkv_hidden_sizes)");
    const int64_t headDim = features / heads;
    Value x = node->getOperand(0);
    Value packed = builder_
                       .create<OnnxNodeOp>(node->getLoc(),
                                           TypeRange{withFeatureSize(x.getType(), 3 * features)},
                                           "MatMul", (node.getNodeName() + "/qkv").str(),
                                           DictionaryAttr(), ValueRange{x, node->getOperand(1)})
                       ->getResult(0);
    if (input(2))
      packed = builder_
                   .create<OnnxNodeOp>(node->getLoc(), TypeRange{packed.getType()}, "Add",
                                       (node.getNodeName() + "/qkv_bias").str(), DictionaryAttr(),
                                       ValueRange{packed, node->getOperand(2)})
                   ->getResult(0);
    auto [q, k, v] = splitPacked(node, packed, features, features);
    double scale = floatAttr(node, "scale").value_or(0.0);
    if (scale == 0.0)
      scale = 1.0 / std::sqrt(static_cast<double>(headDim));
    // The present halves: the past's type, their positions the total.
    auto pastType = cast<RankedTensorType>(past->first.getType());
    SmallVector<int64_t> presentShape(pastType.getShape());
    presentShape[2] = ShapedType::kDynamic;
    auto presentType = RankedTensorType::get(presentShape, pastType.getElementType());
    Type out = llmType(node->getResult(0), x, features);
    auto attention = builder_.create<AttentionOp>(
        node->getLoc(), TypeRange{out, presentType, presentType}, q, k, v, past->first,
        past->second, builder_.getI64IntegerAttr(heads), builder_.getI64IntegerAttr(heads),
        builder_.getI64IntegerAttr(headDim), builder_.getF32FloatAttr(static_cast<float>(scale)),
        IntegerAttr(), FloatAttr(), UnitAttr(), DenseF32ArrayAttr());
    node->getResult(0).replaceAllUsesWith(attention->getResult(0));
    // The present output is read only by the importer's halves: Gather(present, 0 or 1, axis 0).
    if (node->getNumResults() > 1) {
      for (OpOperand &use : llvm::make_early_inc_range(node->getResult(1).getUses())) {
        auto gather = dyn_cast<OnnxNodeOp>(use.getOwner());
        std::optional<double> half =
            gather && gather.getOpType() == "Gather" && gather->getNumOperands() == 2 &&
                    intAttr(gather, "axis").value_or(0) == 0
                ? scalarValue(gather->getOperand(1))
                : std::nullopt;
        if (!half || (*half != 0.0 && *half != 1.0))
          return refuse(node, "has its present output read other than as its key and value");
        gather->getResult(0).replaceAllUsesWith(attention->getResult(*half == 0.0 ? 1 : 2));
      }
    }
    return true;
  }

  OpBuilder &builder_;
  RopeTables &tables_;
};

struct RaiseContribOpsPass : public hetc::impl::RaiseContribOpsBase<RaiseContribOpsPass> {
  RaiseContribOpsPass() = default;
  explicit RaiseContribOpsPass(const compiler::WeightStore *weights) : weights_(weights) {}

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<OnnxNodeOp> nodes;
    func.walk([&](OnnxNodeOp node) { nodes.push_back(node); });
    OpBuilder builder(&getContext());
    RopeTables tables(weights_);
    ContribRaiser raiser(builder, tables);
    for (OnnxNodeOp node : nodes) {
      if (!raiser.raise(node))
        return signalPassFailure();
    }
    // The raised nodes are unread now; their other operands (seqlens_k's computation) go with them
    // in the clean-up after raising.
    for (OnnxNodeOp node : llvm::reverse(nodes))
      if (node->use_empty() &&
          llvm::is_contained({StringRef("SimplifiedLayerNormalization"),
                              StringRef("SkipSimplifiedLayerNormalization"),
                              StringRef("LayerNormalization"), StringRef("SkipLayerNormalization"),
                              StringRef("RotaryEmbedding"), StringRef("GroupQueryAttention"),
                              StringRef("Attention"), StringRef("EmbedLayerNormalization")},
                             node.getOpType()))
        node->erase();
    syncResultTypes(func);
  }

  // Where RotaryEmbedding's caches are read; none in hetc-opt, where they must be hetc.constant.
  const compiler::WeightStore *weights_ = nullptr;
};

} // namespace

std::unique_ptr<Pass> hetc::createRaiseContribOps(const compiler::WeightStore *weights) {
  return std::make_unique<RaiseContribOpsPass>(weights);
}
