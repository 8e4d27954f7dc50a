// After raising and clean-up, every op the function's results depend on must be an LLM op, a
// weight or a constant. What is not is cut into regions: unraised nodes connected by the values
// they pass each other (a Shape read does not connect). Each region is one blocker and gets one
// error, at its first edge (an unraised node that feeds raised code or an output), naming where
// recognition stopped (the first node that reads an LLM op's values: usually the cause, a bias
// after a projection, a rotation of another form, rather than the output it finally reaches) and
// the region's ends: the LLM ops and graph inputs it reads and what reads it. A region a raising
// pass already refused with its reason (`hetc.refused` on one of its nodes) gets no second error.
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"

#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"

namespace hetc {
#define GEN_PASS_DEF_CHECKRAISED
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

bool isRaised(Operation *op) { return isa<LlmOp, WeightOp, ConstantOp, func::ReturnOp>(op); }

// The first op, in program order, of the unraised computation behind `edge` that reads the values
// of an LLM op's result; null when it reads none.
Operation *recognitionStop(Operation *edge) {
  llvm::SetVector<Operation *> cone;
  SmallVector<Operation *> worklist{edge};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!cone.insert(op))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp(); def && !isRaised(def))
        worklist.push_back(def);
  }
  // A node that reads only dimensions of an activation is never the cause.
  Operation *first = nullptr;
  for (Operation *op : cone)
    if (!readsDimensionsOnly(op) &&
        llvm::any_of(op->getOperands(),
                     [](Value v) { return v.getDefiningOp() && isa<LlmOp>(v.getDefiningOp()); }) &&
        (!first || op->isBeforeInBlock(first)))
      first = op;
  return first;
}

// How a region's end is named: an LLM op by its source node, a graph input by its name.
std::string endName(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto func = cast<func::FuncOp>(arg.getOwner()->getParentOp());
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "hetc.name");
    return name ? "the input '" + name.getValue().str() + "'"
                : "input #" + std::to_string(arg.getArgNumber());
  }
  Operation *op = v.getDefiningOp();
  std::string text = op->getName().getStringRef().str();
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    text += " ('" + name.getName().getValue().str() + "')";
  return text;
}

// Names in first-seen order, each once.
struct Names {
  std::vector<std::string> list;
  void insert(std::string name) {
    if (llvm::find(list, name) == list.end())
      list.push_back(std::move(name));
  }
  bool empty() const { return list.empty(); }
};

std::string listed(const Names &names) {
  constexpr size_t kNamed = 4;
  std::string text;
  for (size_t i = 0; i < names.list.size() && i < kNamed; ++i)
    text += (i ? ", " : "") + names.list[i];
  if (names.list.size() > kNamed)
    text += " and " + std::to_string(names.list.size() - kNamed) + " more";
  return text;
}

struct CheckRaisedPass : public hetc::impl::CheckRaisedBase<CheckRaisedPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto ret = dyn_cast<func::ReturnOp>(func.getBody().front().getTerminator());
    if (!ret)
      return;

    // Everything the results depend on.
    llvm::SetVector<Operation *> needed;
    SmallVector<Value> worklist(ret.getOperands());
    while (!worklist.empty()) {
      Operation *def = worklist.pop_back_val().getDefiningOp();
      if (!def || !needed.insert(def))
        continue;
      for (Value operand : def->getOperands())
        worklist.push_back(operand);
    }

    // The regions: unraised needed ops joined by the values one passes another.
    llvm::EquivalenceClasses<Operation *> regions;
    for (Operation *op : needed) {
      if (isRaised(op))
        continue;
      regions.insert(op);
      if (readsDimensionsOnly(op))
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp(); def && !isRaised(def) && needed.contains(def))
          regions.unionSets(op, def);
    }
    DenseSet<Operation *> refusedRegions, reportedRegions;
    for (Operation *op : needed)
      if (!isRaised(op) && op->hasAttr(kRefused))
        refusedRegions.insert(regions.getLeaderValue(op));

    bool failed = false;
    for (Operation &op : func.getBody().front()) {
      if (isRaised(&op) || !needed.contains(&op))
        continue;
      failed = true;
      Operation *region = regions.getLeaderValue(&op);
      if (refusedRegions.contains(region) || reportedRegions.contains(region))
        continue;
      // Only the edge: an unraised op read by raised code or by the return.
      Operation *reader = nullptr;
      unsigned output = 0;
      for (Value result : op.getResults())
        for (OpOperand &use : result.getUses())
          if (isRaised(use.getOwner()) && !reader) {
            reader = use.getOwner();
            output = use.getOperandNumber();
          }
      if (!reader)
        continue;
      reportedRegions.insert(region);
      std::string feeds;
      if (isa<func::ReturnOp>(reader)) {
        auto name = func.getResultAttrOfType<StringAttr>(output, "hetc.name");
        feeds = name ? "the output '" + name.getValue().str() + "'"
                     : "output #" + std::to_string(output);
      } else {
        feeds = reader->getName().getStringRef().str();
      }
      std::string subject = isa<OnnxNodeOp>(op) ? "node " + describe(&op) : describe(&op);
      InFlightDiagnostic error = op.emitError()
                                 << subject << " is not part of a computation hetc recognises: its "
                                 << "result feeds " << feeds << " but no raising pattern matched";
      // A norm over the last dimension of a [batch, sequence, heads, head_dim] value normalizes
      // each head on its own (Qwen3's q_norm and k_norm).
      if (isa<RmsNormOp, LayerNormOp>(reader) && rankOf(reader->getOperand(0)) == 4)
        error << " (" << reader->getName().getStringRef()
              << " over each head of a [batch, sequence, heads, head_dim] value: a per-head norm "
                 "of q or k; hetc runs an rms_norm of each head of a projection split into heads "
                 "(Qwen3's q_norm and k_norm), not this one)";
      if (Operation *stop = recognitionStop(&op); stop && stop != &op) {
        Operation *read = nullptr;
        for (Value v : stop->getOperands())
          if (v.getDefiningOp() && isa<LlmOp>(v.getDefiningOp()) && !read)
            read = v.getDefiningOp();
        error << "; recognition stops at node " << describe(stop) << ", the first that reads a "
              << read->getName().getStringRef() << " result";
        if (auto name = dyn_cast<NameLoc>(read->getLoc()))
          error << " (raised from node '" << name.getName().getValue() << "')";
      }
      describeRegion(error, regions, region, func);
      for (auto it = regions.member_begin(regions.findValue(region)); it != regions.member_end();
           ++it)
        if (auto why = (*it)->getAttrOfType<StringAttr>(kNotANorm))
          error << "; " << why.getValue();
    }
    if (failed)
      signalPassFailure();
  }

  // "; the region: N nodes between <what it reads> and <what reads it>".
  static void describeRegion(InFlightDiagnostic &error,
                             llvm::EquivalenceClasses<Operation *> &regions, Operation *leader,
                             func::FuncOp func) {
    Names from, to;
    size_t nodes = 0;
    for (auto it = regions.member_begin(regions.findValue(leader)); it != regions.member_end();
         ++it) {
      Operation *op = *it;
      ++nodes;
      if (!readsDimensionsOnly(op))
        for (Value operand : op->getOperands()) {
          Operation *def = operand.getDefiningOp();
          if ((!def && isa<BlockArgument>(operand)) || (def && isa<LlmOp>(def)))
            from.insert(endName(operand));
        }
      for (Value result : op->getResults())
        for (OpOperand &use : result.getUses()) {
          Operation *user = use.getOwner();
          if (isa<func::ReturnOp>(user)) {
            auto name = func.getResultAttrOfType<StringAttr>(use.getOperandNumber(), "hetc.name");
            to.insert(name ? "the output '" + name.getValue().str() + "'"
                           : "output #" + std::to_string(use.getOperandNumber()));
          } else if (isa<LlmOp>(user)) {
            to.insert(endName(user->getResult(0)));
          }
        }
    }
    error << "; the region hetc does not recognise has " << nodes
          << (nodes == 1 ? " node" : " nodes");
    if (!from.empty())
      error << " reading " << listed(from);
    if (!to.empty())
      error << ", read by " << listed(to);
  }
};

} // namespace
