#include "raise/SampleInputs.h"

#include "import/OnnxGraph.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace hetc;

std::string Sample::described() const {
  return " (for " + std::to_string(seq) + " new tokens after " + std::to_string(past) +
         " cached ones" + (batch > 1 ? ", a batch of " + std::to_string(batch) : "") +
         (padded ? ", the first left-padded by " + std::to_string(padded) : "") + ")";
}

bool hetc::takesBatchOfOneOnly(func::FuncOp func) {
  return llvm::any_of(func.getArguments(), [](BlockArgument arg) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    return type && type.getRank() >= 2 && type.getDimSize(0) == 1;
  });
}

SampleEvaluator::SampleEvaluator(func::FuncOp func, Value positions,
                                 const compiler::WeightStore *weights)
    : func_(func), positions_(positions), fixedBatchOfOne_(takesBatchOfOneOnly(func)),
      weights_(weights) {
  // The token ids' graph input (the embedding may read it through a cast or a view).
  func.walk([&](EmbeddingOp op) { ids_ = graphInputThroughViews(op.getIds()); });
  for (BlockArgument arg : func.getArguments()) {
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "hetc.name");
    if (!positions_ && name && name.getValue() == "position_ids")
      positions_ = arg;
    if (!ids_ && name && name.getValue() == "input_ids")
      ids_ = arg;
  }
}

// A sample value for a graph input, by its role: a past key or value (rank 4, float), the token
// ids, the positions, or else the attention mask ([batch, past + seq]).
std::optional<Tensor> SampleEvaluator::sampleInput(BlockArgument arg, const Sample &s) {
  auto type = dyn_cast<RankedTensorType>(arg.getType());
  if (!type)
    return std::nullopt;
  Tensor t;
  t.elem = type.getElementType();
  const int64_t total = s.past + s.seq;
  if (type.getRank() == 4 && isa<FloatType>(t.elem) && !type.isDynamicDim(1) &&
      !type.isDynamicDim(3)) {
    t.shape = {s.batch, type.getDimSize(1), s.past, type.getDimSize(3)};
    // Read through Shape or Size alone, a past key or value needs no elements: a sample of
    // thousands of cached positions costs nothing.
    if (!llvm::all_of(arg.getUsers(), [](Operation *u) { return readsDimensionsOnly(u); }))
      t.resize(t.size());
    return t;
  }
  if (type.getRank() != 2 || !isa<IntegerType>(t.elem))
    return std::nullopt;
  const bool isPositions = arg == positions_, isIds = arg == ids_;
  const int64_t cols = isPositions || isIds ? s.seq : total; // else attention_mask
  t.shape = {s.batch, cols};
  t.resize(t.size());
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t k = 0; k < cols; ++k) {
      const int64_t padded = b == 0 ? s.padded : 0;
      // Positions count real tokens only (transformers' cumsum of the mask, minus one).
      const int64_t value = isPositions ? s.past + k - padded
                            : isIds     ? 1 + k
                                        : (k < padded ? 0 : 1);
      t.setInt(b * cols + k, value);
    }
  return t;
}

// An LLM op's result is [batch, seq, features] (the dialect's activations keep the input ids'
// dimensions); a weight has its static shape.
std::optional<Tensor> SampleEvaluator::standIn(Operation &op, const Sample &s) {
  auto type = dyn_cast<RankedTensorType>(op.getResult(0).getType());
  if (!type || (!type.hasStaticShape() && isa<WeightOp>(op)))
    return std::nullopt;
  Tensor t;
  t.elem = type.getElementType();
  if (isa<WeightOp>(op)) {
    t.shape.assign(type.getShape().begin(), type.getShape().end());
  } else {
    if (type.getRank() != 3 || type.isDynamicDim(2))
      return std::nullopt;
    t.shape = {s.batch, s.seq, type.getDimSize(2)};
  }
  if (t.size() > evaluationBudget())
    return std::nullopt;
  t.resize(t.size());
  return t;
}

// A plain float weight's values from the store (not a transposed or column view of one, which
// only the raising makes, and never of what a sample evaluation reads).
std::optional<Tensor> SampleEvaluator::storedWeight(WeightOp weight) const {
  // A bound on what one read costs (doubles): a [4096, 4096] buffer is 128 MiB.
  constexpr uint64_t kMaxElements = uint64_t{1} << 24;
  const compiler::StoredWeight *stored =
      weights_ ? weights_->find(weight.getName().str()) : nullptr;
  auto type = dyn_cast<RankedTensorType>(weight.getType());
  if (!stored || !type || !type.hasStaticShape() || weight.getTransposed() ||
      weight.getColumns() || stored->elementCount() > kMaxElements ||
      static_cast<int64_t>(stored->elementCount()) != type.getNumElements())
    return std::nullopt;
  std::vector<float> values = stored->toFloats();
  if (values.size() != stored->elementCount())
    return std::nullopt;
  Tensor t;
  t.elem = type.getElementType();
  t.shape.assign(type.getShape().begin(), type.getShape().end());
  t.floats.assign(values.begin(), values.end());
  return t;
}

std::optional<Tensor> SampleEvaluator::evaluate(Value v, const Sample &s, std::string &error,
                                                const DenseMap<Value, Tensor> &given) {
  // The computation, in program order. An LLM op's stand-in needs none of its operands, so the
  // walk stops there: each layer's mask reaches back to its own projections, not through the
  // whole model.
  DenseSet<Operation *> slice;
  SmallVector<Value> worklist{v};
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || !slice.insert(def).second)
      continue;
    if (!isa<LlmOp>(def))
      llvm::append_range(worklist, def->getOperands());
  }
  DenseMap<Value, Tensor> values;
  for (BlockArgument arg : func_.getArguments()) {
    // An LLM op in the slice stands in for itself: its operands are not read.
    bool used = llvm::any_of(arg.getUsers(),
                             [&](Operation *u) { return slice.contains(u) && !isa<LlmOp>(u); });
    if (!used && arg != v)
      continue;
    if (auto it = given.find(arg); it != given.end()) {
      values[arg] = it->second;
      continue;
    }
    std::optional<Tensor> t = sampleInput(arg, s);
    if (!t) {
      error = "reads graph input #" + std::to_string(arg.getArgNumber()) +
              ", whose role hetc cannot tell";
      return std::nullopt;
    }
    values[arg] = *t;
  }
  for (Operation &op : func_.getBody().front()) {
    if (!slice.contains(&op))
      continue;
    std::optional<Tensor> out;
    std::optional<SmallVector<Tensor>> results;
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      if (auto attr = dyn_cast<DenseElementsAttr>(constant.getValue()))
        out = tensorFromAttr(attr);
    } else if (isa<OnnxNoneOp>(op)) {
      out = Tensor{};
    } else if (auto weight = dyn_cast<WeightOp>(op);
               weight && !llvm::all_of(weight->getUsers(), [&](Operation *u) {
                 return !slice.contains(u) || readsDimensionsOnly(u);
               })) {
      out = storedWeight(weight);
      if (!out) {
        error = "reads the values of weight '" + weight.getName().str() +
                "', which hetc cannot read here";
        return std::nullopt;
      }
    } else if (auto it = given.find(op.getResult(0)); it != given.end() && isa<LlmOp>(op)) {
      out = it->second;
    } else if (isa<LlmOp, WeightOp>(op)) {
      out = standIn(op, s);
    } else if (auto node = dyn_cast<OnnxNodeOp>(op)) {
      SmallVector<Tensor> inputs;
      for (Value operand : node->getOperands())
        inputs.push_back(values.lookup(operand));
      results = evaluateNodeResults(node, inputs);
    }
    if (!out && !results) {
      error = "is computed by " + describe(&op) + ", which hetc cannot evaluate" + s.described();
      return std::nullopt;
    }
    // A stand-in is the op's first result; a node gives every result.
    if (out)
      values[op.getResult(0)] = std::move(*out);
    else
      for (auto [result, tensor] : llvm::zip_equal(op.getResults(), *results))
        values[result] = std::move(tensor);
  }
  return values[v];
}
