// ONNX Runtime's contrib operators, as ONNX Runtime GenAI's model builder writes them, raised to
// the LLM ops they compute. The semantics are ONNX Runtime's contrib operator documentation's:
//
//   SimplifiedLayerNormalization(X, scale; epsilon, axis = -1)       -> hetc.rms_norm
//   SkipSimplifiedLayerNormalization(input, skip, gamma; epsilon)
//       output 3 (input + skip)  -> an Add, raised as the residual add it is by RaiseResidualAdd
//       output 0                 -> hetc.rms_norm of that sum
//   RotaryEmbedding(input [B, S, N * H], position_ids, cos_cache, sin_cache [positions, R / 2];
//                   interleaved, rotary_embedding_dim = 0 or R, num_heads, scale = 1)
//                                                                    -> hetc.rope, its
//       frequencies read from the caches (RopeTables), rotating the first R columns of each head
//       (R = H without num_heads), in interleaved pairs or rotate-half
//   GroupQueryAttention(query, key, value, past_key, past_value [B, kv_heads, past, H],
//                       seqlens_k, total_sequence_length; num_heads, kv_num_heads, scale)
//                                                                    -> hetc.attention
//       GroupQueryAttention is causal; seqlens_k and total_sequence_length place the sequences of
//       a right-padded batch, and hetc never pads a sequence (each keeps its own cache), so they
//       are not needed: computed from attention_mask or given as inputs, they become dead.
//
// Whatever these ops do that the LLM ops do not (a bias on the skip sum, rotation inside the
// attention, a softcap, an attention bias, packed
// QKV, a read of the inverse deviation) is refused with the node and the attribute or input.
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
      return norm(node, node->getOperand(0), node->getOperand(1), /*sumResult=*/-1);
    if (type == "SkipSimplifiedLayerNormalization")
      return skipNorm(node);
    if (type == "RotaryEmbedding")
      return rotary(node);
    if (type == "GroupQueryAttention")
      return attention(node);
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

  bool norm(OnnxNodeOp node, Value x, Value gamma, int sumResult) {
    std::optional<int64_t> axis = intAttr(node, "axis");
    if (axis && *axis != -1 && !(rankOf(x) > 0 && *axis == rankOf(x) - 1))
      return refuse(node, "normalizes over axis " + Twine(*axis) + ", not the last");
    const SmallVector<unsigned> statistics =
        sumResult < 0 ? SmallVector<unsigned>{1} : SmallVector<unsigned>{1, 2};
    if (!unread(node, statistics, "the mean or inverse standard deviation"))
      return false;
    gamma = skipNoOps(gamma);
    auto gammaType = dyn_cast<RankedTensorType>(gamma.getType());
    if (!gammaType || gammaType.getRank() != 1 || !gammaType.hasStaticShape() ||
        !(gamma.getDefiningOp<WeightOp>() || gamma.getDefiningOp<ConstantOp>()))
      return refuse(node, "scales by a value that is not a [hidden] weight");
    const double eps = floatAttr(node, "epsilon").value_or(sumResult < 0 ? 1e-5 : 1e-12);
    if (!(eps > 0.0))
      return refuse(node, "has epsilon " + printed(eps, 6) + "; hetc.rms_norm needs a positive one");
    const int64_t hidden = gammaType.getDimSize(0);
    Type type = llmType(node->getResult(0), x, hidden);
    auto rms = builder_.create<RmsNormOp>(node->getLoc(), type, x, gamma,
                                          builder_.getF32FloatAttr(static_cast<float>(eps)));
    node->getResult(0).replaceAllUsesWith(rms.getResult());
    return true;
  }

  bool skipNorm(OnnxNodeOp node) {
    if (node->getNumOperands() > 3 && !isNone(node->getOperand(3)))
      return refuse(node, "adds a bias to the skip sum, which hetc does not do");
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
        DictionaryAttr(), ValueRange{node->getOperand(0), node->getOperand(1)});
    if (sumResult)
      sumResult.replaceAllUsesWith(sum->getResult(0));
    return norm(node, sum->getResult(0), node->getOperand(2), /*sumResult=*/3);
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
    if ((declared != 0 && declared != rotaryDim) || rotaryDim > headDim)
      return refuse(node, "declares rotary_embedding_dim " + Twine(declared) + " but its caches "
                              "cover " + Twine(rotaryDim) + " columns of heads of " +
                              Twine(headDim));
    std::string why;
    std::optional<SmallVector<double>> freqs =
        tables_.recover(skipNoOps(node->getOperand(2)), skipNoOps(node->getOperand(3)),
                        rotaryDim, RopeTables::Width::Half, why);
    if (!freqs)
      return refuse(node, "reads cos/sin caches that " + why);
    auto invType = RankedTensorType::get({rotaryDim / 2}, builder_.getF32Type());
    SmallVector<float> values(freqs->begin(), freqs->end());
    Value invFreq = builder_.create<ConstantOp>(node->getLoc(), invType,
                                                DenseElementsAttr::get(invType, ArrayRef(values)));
    const bool interleaved = intAttr(node, "interleaved").value_or(0) != 0;
    auto rope = builder_.create<RopeOp>(
        node->getLoc(), llmType(node->getResult(0), x, *features), x, positions, invFreq,
        builder_.getI64IntegerAttr(heads), builder_.getI64IntegerAttr(headDim),
        rotaryDim == headDim ? IntegerAttr() : builder_.getI64IntegerAttr(rotaryDim),
        interleaved ? builder_.getUnitAttr() : UnitAttr());
    node->getResult(0).replaceAllUsesWith(rope.getResult());
    return true;
  }

  bool attention(OnnxNodeOp node) {
    const unsigned n = node->getNumOperands();
    auto input = [&](unsigned i) { return i < n && !isNone(node->getOperand(i)); };
    if (intAttr(node, "do_rotary").value_or(0) != 0)
      return refuse(node, "rotates q and k itself (do_rotary = 1); hetc takes the RoPE as "
                          "RotaryEmbedding nodes before it");
    // local_window_size = W: each query sees its last W keys (ONNX Runtime's CPU kernel and
    // transformers' sliding_window = W agree, the export tests check).
    const int64_t window = intAttr(node, "local_window_size").value_or(-1);
    if (window == 0 || window < -1)
      return refuse(node, "has local_window_size " + Twine(window) + "; -1 or a positive one");
    if (double softcap = floatAttr(node, "softcap").value_or(0.0); softcap != 0.0)
      return refuse(node, "caps scores with softcap " + printed(softcap, 6) +
                              ", which hetc.attention does not do");
    if (intAttr(node, "smooth_softmax").value_or(0) != 0)
      return refuse(node, "uses a smooth softmax, which hetc.attention does not");
    if (!input(1) || !input(2))
      return refuse(node, "takes packed QKV (no key and value inputs), which hetc does not split");
    if (input(10) || input(11))
      return refuse(node, "adds an attention bias or head sinks, which hetc.attention does not");
    if (!unread(node, {3}, "the attention scores"))
      return false;
    Value pastK = input(3) ? skipNoOps(node->getOperand(3)) : Value();
    Value pastV = input(4) ? skipNoOps(node->getOperand(4)) : Value();
    if (!pastK || !pastV || !isa<BlockArgument>(pastK) || !isa<BlockArgument>(pastV) ||
        pastK == pastV)
      return refuse(node, "does not read its past key and value from two graph inputs");
    int64_t heads = intAttr(node, "num_heads").value_or(0);
    int64_t kvHeads = intAttr(node, "kv_num_heads").value_or(0);
    std::optional<int64_t> qFeatures = knownFeatures(node->getOperand(0));
    std::optional<int64_t> kFeatures = knownFeatures(node->getOperand(1));
    std::optional<int64_t> vFeatures = knownFeatures(node->getOperand(2));
    if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0 || !qFeatures || !kFeatures ||
        !vFeatures || *qFeatures % heads != 0)
      return refuse(node, "has num_heads " + Twine(heads) + ", kv_num_heads " + Twine(kvHeads) +
                              " and inputs whose sizes do not split into them");
    const int64_t headDim = *qFeatures / heads;
    if (*kFeatures != kvHeads * headDim || *vFeatures != kvHeads * headDim)
      return refuse(node, "reads key/value of " + Twine(*kFeatures) + "/" + Twine(*vFeatures) +
                              " features; " + Twine(kvHeads) + " heads of " + Twine(headDim) +
                              " need " + Twine(kvHeads * headDim));
    double scale = floatAttr(node, "scale").value_or(0.0);
    if (scale == 0.0)
      scale = 1.0 / std::sqrt(static_cast<double>(headDim));
    Type out = llmType(node->getResult(0), node->getOperand(0), *qFeatures);
    auto attention = builder_.create<AttentionOp>(
        node->getLoc(), TypeRange{out, node->getResult(1).getType(), node->getResult(2).getType()},
        node->getOperand(0), node->getOperand(1), node->getOperand(2), pastK, pastV,
        builder_.getI64IntegerAttr(heads), builder_.getI64IntegerAttr(kvHeads),
        builder_.getI64IntegerAttr(headDim), builder_.getF32FloatAttr(static_cast<float>(scale)),
        window > 0 ? builder_.getI64IntegerAttr(window) : IntegerAttr());
    for (unsigned r = 0; r < 3; ++r)
      node->getResult(r).replaceAllUsesWith(attention->getResult(r));
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
                              StringRef("RotaryEmbedding"), StringRef("GroupQueryAttention")},
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
