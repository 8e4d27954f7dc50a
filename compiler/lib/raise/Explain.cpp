// hetc compile --explain: the imported graph's nodes, each attributed to the LLM op nearest
// downstream of it. Raising gives every LLM op the location of the node whose result it replaces
// (the anchor), so a backward breadth-first walk from all anchors at once assigns each node to
// the anchor that reaches it first: the norm's Pow and ReduceMean to the norm, the mask and the
// rotary nodes to the first attention that reads them, a weight's Transpose to its linear.
#include "hetc/compiler/Explain.h"

#include "hetc/compiler/PlanAttributes.h"
#include "import/OnnxGraph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <deque>
#include <map>

using namespace mlir;
using namespace hetc;
using namespace hetc::planning;

namespace {

std::optional<std::string> locName(Operation *op) {
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    return name.getName().str();
  return std::nullopt;
}

std::string features(Value weight, unsigned dim) {
  return std::to_string(cast<RankedTensorType>(weight.getType()).getDimSize(dim));
}

// The LLM op and what the compiler decided for it, in one line.
std::string summary(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    os << "embedding " << features(embedding.getTable(), 0) << " x "
       << features(embedding.getTable(), 1);
    if (Value positions = embedding.getPositions())
      os << " + learned positions (" << features(positions, 0) << " rows, offset "
         << embedding.getPositionOffset().value_or(0) << ")";
    if (std::optional<APFloat> scale = embedding.getScale())
      os << ", scaled by " << printed(scale->convertToFloat(), 7);
  } else if (auto norm = dyn_cast<RmsNormOp>(op)) {
    os << "rms_norm eps " << printed(norm.getEpsilon().convertToFloat(), 6);
  } else if (auto norm = dyn_cast<LayerNormOp>(op)) {
    os << "layer_norm eps " << printed(norm.getEpsilon().convertToFloat(), 6)
       << (norm.getBeta() ? " + bias" : "");
  } else if (auto activation = dyn_cast<ActivationOp>(op)) {
    os << "activation " << activation.getFunction();
  } else if (auto linear = dyn_cast<LinearOp>(op)) {
    os << "linear " << features(linear.getW(), 0) << " -> " << features(linear.getW(), 1)
       << (linear.getBias() ? " + bias" : "");
    if (auto weight = linear.getW().getDefiningOp<WeightOp>())
      if (std::optional<std::pair<int64_t, int64_t>> columns = weight.getColumnRange()) {
        os << ", columns " << columns->first << ".." << columns->second;
        if (std::optional<int64_t> period = weight.getColumnPeriod())
          os << " of every " << *period;
        os << " of '" << weight.getName() << "'";
      }
    if (op->hasAttr(kResidual))
      os << ", with the residual add after it fused";
    if (auto role = op->getAttrOfType<StringAttr>(kSwiGlu))
      os << ", computing the swiglu's " << role.getValue() << " with the swiglu fused";
  } else if (auto rope = dyn_cast<RopeOp>(op)) {
    os << "rope heads " << rope.getHeads() << " head_dim " << rope.getHeadDim();
  } else if (auto attention = dyn_cast<AttentionOp>(op)) {
    os << "attention heads " << attention.getHeads() << " kv_heads " << attention.getKvHeads()
       << " head_dim " << attention.getHeadDim() << " scale "
       << printed(attention.getScale().convertToFloat(), 6) << ", causal";
    if (std::optional<int64_t> window = attention.getSlidingWindow())
      os << " within a sliding window of " << *window << " keys";
    if (std::optional<APFloat> cap = attention.getSoftcap())
      os << ", scores soft-capped at " << printed(cap->convertToFloat(), 6);
    if (std::optional<ArrayRef<float>> slopes = attention.getAlibiSlopes())
      os << ", ALiBi (slope x key position, fitted by values) with slopes from "
         << printed(slopes->front(), 6) << " (head 0) to " << printed(slopes->back(), 6);
    if (attention.getBroadcastCache())
      os << ", the graph's cache holding each KV head repeated for its "
         << attention.getHeads() / attention.getKvHeads() << " query heads (hetc's holds it once)";
    os << (op->hasAttr(kRope) ? ", rotating q and k itself" : "");
  } else if (auto swiglu = dyn_cast<SwiGluOp>(op)) {
    os << "swiglu";
    if (std::optional<StringRef> function = swiglu.getFunction())
      os << " gated by " << *function;
  } else if (isa<AddOp>(op)) {
    os << "add";
  } else if (auto head = dyn_cast<LmHeadOp>(op)) {
    os << "lm_head " << features(head.getW(), 0) << " -> " << features(head.getW(), 1)
       << (head.getBias() ? " + bias" : "");
    if (std::optional<APFloat> cap = head.getSoftcap())
      os << ", logits soft-capped at " << printed(cap->convertToFloat(), 6);
  } else {
    os << op->getName().getStringRef();
  }
  if (op->hasAttr(kFused))
    os << (isa<RopeOp>(op) ? " (fused into the attention)" : " (fused into the linear before it)");
  return text;
}

} // namespace

void hetc::compiler::explainRaising(ModuleOp imported, ModuleOp planned, llvm::raw_ostream &os) {
  func::FuncOp source = findModelFunction(imported);
  func::FuncOp model = findModelFunction(planned);
  if (!source || !model)
    return;

  // LLM ops grouped by the anchor node they took the place of, in program order.
  SmallVector<std::pair<std::string, SmallVector<Operation *>>> groups;
  std::map<std::string, unsigned> groupOf;
  size_t llmOps = 0;
  model.walk([&](Operation *op) {
    if (!isa<LlmOp>(op))
      return;
    ++llmOps;
    std::string anchor = locName(op).value_or("");
    auto [it, inserted] = groupOf.try_emplace(anchor, groups.size());
    if (inserted)
      groups.push_back({anchor, {}});
    groups[it->second].second.push_back(op);
  });

  // Multi-source backward BFS over the imported graph from the anchors' nodes.
  llvm::StringMap<Operation *> nodeByName;
  SmallVector<OnnxNodeOp> nodes;
  source.walk([&](OnnxNodeOp node) {
    nodes.push_back(node);
    if (std::optional<std::string> name = locName(node))
      nodeByName[*name] = node;
  });
  DenseMap<Operation *, unsigned> owner;
  std::deque<Operation *> queue;
  for (auto [index, group] : llvm::enumerate(groups))
    if (auto it = nodeByName.find(group.first); it != nodeByName.end()) {
      owner[it->second] = index;
      queue.push_back(it->second);
    }
  while (!queue.empty()) {
    Operation *at = queue.front();
    queue.pop_front();
    for (Value operand : at->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !isa<OnnxNodeOp>(def) || owner.count(def))
        continue;
      owner[def] = owner[at];
      queue.push_back(def);
    }
  }
  SmallVector<SmallVector<OnnxNodeOp>> replaced(groups.size());
  size_t unattributed = 0;
  for (OnnxNodeOp node : nodes) {
    auto it = owner.find(node);
    if (it == owner.end())
      ++unattributed;
    else
      replaced[it->second].push_back(node);
  }

  os << "hetc compile --explain: " << nodes.size() << " ONNX nodes became " << llmOps
     << " LLM ops";
  if (unattributed)
    os << "; " << unattributed
       << " nodes feed no LLM op (shape arithmetic folded to constants, or values no output needs)";
  os << "\n";
  if (auto notes = imported->getAttrOfType<ArrayAttr>(kImportNotes))
    for (Attribute note : notes)
      if (auto text = dyn_cast<StringAttr>(note))
        os << "import: " << text.getValue() << "\n";
  std::optional<int64_t> currentLayer;
  bool first = true;
  for (auto [index, group] : llvm::enumerate(groups)) {
    const SmallVector<Operation *> &ops = group.second;
    auto layer = ops.front()->getAttrOfType<IntegerAttr>(kLayer);
    std::optional<int64_t> l = layer ? std::optional<int64_t>(layer.getInt()) : std::nullopt;
    if (first || l != currentLayer)
      os << (l ? "layer " + std::to_string(*l) : std::string("outside the layers")) << "\n";
    first = false;
    currentLayer = l;
    for (Operation *op : ops) {
      os << "  " << summary(op) << "\n";
      if (auto fit = op->getAttrOfType<StringAttr>(kFit))
        os << "    " << fit.getValue() << "\n";
    }
    const SmallVector<OnnxNodeOp> &from = replaced[index];
    os << "    from " << from.size() << (from.size() == 1 ? " node:" : " nodes:");
    for (OnnxNodeOp node : from)
      os << " " << describe(node);
    os << "\n";
  }
}
