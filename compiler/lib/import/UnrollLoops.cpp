// ONNX loops and sequences, unrolled where the model's shapes fix them.
//
// torch's exporter writes a Loop over sequences for `repeat_interleave` over a dimension its trace
// could not see (GPT-J's rotary tables in transformers' own code): SplitToSequence of the tensor
// and of the repeats, a Loop whose body takes element i of each (SequenceAt), expands it and
// appends it to a carried sequence (SequenceInsert), and ConcatFromSequence of the result. Its
// trip count comes from a shape (Shape -> Gather), so it is a constant once shapes are evaluated:
//
// - a Loop whose trip count and initial condition evaluate to constants becomes that many copies
//   of its body, the iteration number a constant in each, the carried values threaded through,
//   each scan output the Concat of its iterations along a new first axis; the condition each
//   iteration computes must then evaluate to true (a loop that may stop early is refused);
// - a sequence becomes the list of its elements, known as each sequence op is met in order
//   (SequenceEmpty, SequenceConstruct, SplitToSequence as Slices of known bounds, SequenceInsert,
//   SequenceErase, Identity), and what reads one becomes plain nodes: SequenceAt the element,
//   SequenceLength a constant, ConcatFromSequence a Concat (of Unsqueezes with new_axis).
//
// Where one step needs a value another step computes (a trip count read from a sequence's
// length, a split from an unrolled loop's result), shapes are evaluated again and the steps
// repeat until none is left. hetc-fold-shapes calls this twice: first leaving what waits, then,
// once the rest of the pass has decided the Ifs, erasing what nothing live reads and refusing
// what still cannot be unrolled, naming the node and why. Unrolling is bounded (kMaxUnrolledNodes)
// so that no file makes the compiler run for ever.
#include "UnrollLoops.h"

#include "OnnxGraph.h"
#include "SymbolicShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <string>

using namespace mlir;

namespace hetc {
namespace {

// More nodes than this from unrolling one loop (or splitting one sequence) is refused, and more
// than kMaxCreatedNodes from all of them: the raising and the interpreter work on graphs of a few
// thousand nodes per layer, not of millions.
constexpr int64_t kMaxUnrolledNodes = 1 << 16;
constexpr int64_t kMaxCreatedNodes = 1 << 18;
// The op type of a node holding a loop's condition that the first call could not evaluate (it may
// hang on an If not yet decided), named by its node_name: the final call checks and erases it.
// A node, not an attribute, so that the condition survives the rewrites between the two calls.
constexpr llvm::StringLiteral kPendingCondition = "hetc.pending_loop_condition";

bool isPendingCondition(Operation *op) {
  auto node = dyn_cast<OnnxNodeOp>(op);
  return node && node.getOpType() == kPendingCondition;
}

bool isSequence(Value v) { return isa<OnnxSequenceType>(v.getType()); }

Value int64Constant(OpBuilder &b, Location loc, ArrayRef<int64_t> values,
                    ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, b.getI64Type());
  return b.create<ConstantOp>(loc, type, DenseElementsAttr::get(type, values));
}

Value trueConstant(OpBuilder &b, Location loc) {
  auto type = RankedTensorType::get({}, b.getI1Type());
  return b.create<ConstantOp>(loc, type, DenseElementsAttr::get(type, ArrayRef<bool>{true}));
}

Value makeNode(OpBuilder &b, Location loc, StringRef opType, const std::string &name,
               ValueRange operands, Type result, ArrayRef<NamedAttribute> attrs = {}) {
  DictionaryAttr dict = attrs.empty() ? DictionaryAttr() : b.getDictionaryAttr(attrs);
  return b.create<OnnxNodeOp>(loc, TypeRange{result}, opType, name, dict, operands).getResult(0);
}

bool isTensor(Value v) { return isa<TensorType>(v.getType()); }

// The unranked tensor type of v's element type; v must be a tensor (isTensor).
Type unrankedLike(Value v) {
  return UnrankedTensorType::get(cast<TensorType>(v.getType()).getElementType());
}

// The elements of a small integer tensor, from a constant or from the evaluated shapes.
std::optional<SmallVector<int64_t>> knownInts(const SymbolicShapes &shapes, Value v) {
  if (std::optional<SmallVector<int64_t>> values = intValues(v))
    return values;
  return allConstant(shapes.elements(v));
}

// The value of an integer scalar or one-element tensor.
std::optional<int64_t> knownInt(const SymbolicShapes &shapes, Value v) {
  std::optional<SmallVector<int64_t>> values = knownInts(shapes, v);
  return values && values->size() == 1 ? std::optional<int64_t>((*values)[0]) : std::nullopt;
}

std::optional<int64_t> knownRank(const SymbolicShapes &shapes, Value v) {
  if (auto ranked = dyn_cast<RankedTensorType>(v.getType()))
    return ranked.getRank();
  if (std::optional<SymDims> dims = shapes.shape(v))
    return static_cast<int64_t>(dims->size());
  return std::nullopt;
}

std::optional<int64_t> knownDim(const SymbolicShapes &shapes, Value v, int64_t axis) {
  std::optional<SymDims> dims = shapes.shape(v);
  if (!dims || axis < 0 || axis >= static_cast<int64_t>(dims->size()) || !(*dims)[axis])
    return std::nullopt;
  return (*dims)[axis]->asConstant();
}

// One round's outcome for one node: replaced, waiting for values a later round may know (with
// the reason, for the refusal if no round does), or refused (an error was emitted).
enum class Step { Done, Waiting, Failed };

class Unroller {
public:
  Unroller(func::FuncOp func, bool refuseWhatIsLeft)
      : func_(func), refuseWhatIsLeft_(refuseWhatIsLeft) {}

  UnrollOutcome run() {
    if (refuseWhatIsLeft_)
      eraseUnread();
    while (true) {
      bool left = false, progress = false;
      firstWaiting_ = nullptr;
      {
        SymbolicShapes shapes(func_);
        SmallVector<Operation *> ops;
        for (Operation &op : func_.getBody().front())
          ops.push_back(&op);
        for (Operation *op : ops) {
          Step step;
          if (auto loop = dyn_cast<OnnxLoopOp>(op))
            step = unroll(loop, shapes);
          else if (auto node = dyn_cast<OnnxNodeOp>(op); node && touchesSequences(node))
            step = done_.contains(op) ? Step::Done : eliminate(node, shapes);
          else
            continue;
          if (step == Step::Failed)
            return UnrollOutcome::Failed;
          left |= step == Step::Waiting;
          progress |= step == Step::Done && !done_.contains(op);
          if (step == Step::Done)
            done_.insert(op);
          if (step == Step::Waiting && !firstWaiting_) {
            firstWaiting_ = op;
            firstReason_ = reason_;
          }
        }
      }
      // Erased only now: the round's evaluated shapes are keyed by values, and a new node must
      // not inherit the facts of an erased one at the same address.
      eraseReplaced();
      // A round that unrolled a loop made copies of its body for the next round to meet.
      if (!progress)
        break;
      if (!left && !newNodes_)
        break;
      newNodes_ = false;
    }
    if (firstWaiting_) {
      if (!refuseWhatIsLeft_)
        return conditionsHold() ? UnrollOutcome::Pending : UnrollOutcome::Failed;
      firstWaiting_->emitError() << firstReason_;
      return UnrollOutcome::Failed;
    }
    if (!replaced_.empty()) {
      // Every reader was replaced, so nothing should still read them.
      replaced_.front()->emitError() << "node " << describe(replaced_.front())
                                     << " is still read after the loops and sequences were "
                                        "unrolled";
      return UnrollOutcome::Failed;
    }
    if (!conditionsHold())
      return UnrollOutcome::Failed;
    return deferred_ ? UnrollOutcome::Pending : UnrollOutcome::Done;
  }

private:
  // Replaces `from` by `to` everywhere: its uses, the sequences holding it, the conditions to
  // check. A replaced value's node is erased later, and nothing may still hold it then.
  void replace(Value from, Value to) {
    from.replaceAllUsesWith(to);
    for (auto &entry : lists_)
      for (Value &element : entry.second)
        if (element == from)
          element = to;
    for (auto &condition : conditions_)
      if (condition.first == from)
        condition.first = to;
  }

  // The elements of a sequence operand met earlier, taken when the reader is the sequence's
  // only one (a chain of inserts then costs no copies), copied otherwise; nullopt when its
  // producer is not done.
  std::optional<SmallVector<Value>> takeList(Value sequence) {
    auto it = lists_.find(sequence);
    if (it == lists_.end())
      return std::nullopt;
    if (!sequence.hasOneUse())
      return it->second;
    SmallVector<Value> taken = std::move(it->second);
    lists_.erase(it);
    return taken;
  }

  // Before refusing what is left: a loop or sequence nothing live reads (dead, or in the branch
  // of an If hetc-fold-shapes did not take) is erased with what reads it, not refused.
  void eraseUnread() {
    Block &block = func_.getBody().front();
    DenseSet<Operation *> live;
    SmallVector<Operation *> worklist{block.getTerminator()};
    auto reach = [&](Value v) {
      Operation *def = v.getDefiningOp();
      while (def && def->getBlock() != &block)
        def = def->getParentOp();
      if (def && live.insert(def).second)
        worklist.push_back(def);
    };
    live.insert(block.getTerminator());
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      op->walk([&](Operation *inner) {
        for (Value operand : inner->getOperands())
          reach(operand);
      });
    }
    SmallVector<Operation *> unread;
    for (Operation &op : block)
      if (!live.contains(&op) &&
          (isa<OnnxLoopOp>(op) || (isa<OnnxNodeOp>(op) && touchesSequences(cast<OnnxNodeOp>(op)))))
        unread.push_back(&op);
    if (unread.empty())
      return;
    // Everything not live that reads them, erased readers first.
    DenseSet<Operation *> doomed(unread.begin(), unread.end());
    for (Operation &op : block)
      if (!live.contains(&op) && !doomed.contains(&op)) {
        bool readsDoomed = false;
        op.walk([&](Operation *inner) {
          for (Value operand : inner->getOperands())
            if (Operation *def = operand.getDefiningOp(); def && doomed.contains(def))
              readsDoomed = true;
        });
        if (readsDoomed)
          doomed.insert(&op);
      }
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (doomed.contains(&op)) {
        op.dropAllUses();
        op.erase();
      }
  }

  static bool touchesSequences(OnnxNodeOp node) {
    return llvm::any_of(node->getOperands(), isSequence) ||
           llvm::any_of(node->getResults(), isSequence);
  }

  Step wait(std::string reason) {
    reason_ = std::move(reason);
    return Step::Waiting;
  }

  // What cannot be unrolled: refused in the final call; before it, waiting with the reason, as
  // the node may sit in an If's branch that the rest of hetc-fold-shapes drops.
  Step refuse(Operation *op, std::string why) {
    if (!refuseWhatIsLeft_)
      return wait(std::move(why));
    op->emitError() << why;
    return Step::Failed;
  }

  // Counts nodes the unrolling is about to make; false (refused, or waiting) past the budget.
  bool withinBudget(Operation *op, int64_t nodes, Step &step) {
    if (nodes <= kMaxCreatedNodes - created_) {
      created_ += nodes;
      return true;
    }
    step = refuse(op, "node " + describe(op) + ": unrolling the model's loops and sequences "
                  "makes more than " + std::to_string(kMaxCreatedNodes) + " nodes, which hetc "
                  "does not unroll");
    return false;
  }

  Step unroll(OnnxLoopOp loop, const SymbolicShapes &shapes) {
    const std::string name = "node '" + loop.getNodeName().str() + "' (Loop)";
    Value tripCount = loop.getInputs()[0], initial = loop.getInputs()[1];
    if (isa<NoneType>(tripCount.getType()))
      return refuse(loop, name + " has no trip count: it runs until its condition turns false, "
                                 "and hetc unrolls only loops whose number of iterations the "
                                 "model's shapes fix");
    std::optional<int64_t> count = knownInt(shapes, tripCount);
    if (!count)
      return wait(name + " runs a number of iterations that does not evaluate to a constant: "
                         "hetc unrolls only loops whose number of iterations the model's shapes "
                         "fix");
    std::optional<int64_t> start =
        isa<NoneType>(initial.getType()) ? std::optional<int64_t>(1) : knownInt(shapes, initial);
    if (!start)
      return wait(name + " starts on a condition that does not evaluate to a constant");
    Block &body = loop.getBody().front();
    auto yield = cast<OnnxYieldOp>(body.getTerminator());
    const int64_t iterations = *start ? std::max<int64_t>(*count, 0) : 0;
    const int64_t bodySize = static_cast<int64_t>(body.getOperations().size()) - 1;
    const size_t carried = loop.getInputs().size() - 2;
    const size_t scanCount = yield.getValues().size() - 1 - carried;
    // Each iteration adds its body, its number and its scan outputs' Unsqueezes.
    const int64_t perIteration = bodySize + 1 + static_cast<int64_t>(scanCount);
    if (iterations > kMaxUnrolledNodes / perIteration)
      return refuse(loop, name + " runs " + std::to_string(iterations) +
                              " iterations of a body of " + std::to_string(bodySize) +
                              " nodes: unrolled, more than " + std::to_string(kMaxUnrolledNodes) +
                              " nodes, which hetc does not unroll");
    for (size_t j = 0; j < scanCount; ++j) {
      if (!isTensor(yield.getValues()[1 + carried + j]))
        return refuse(loop, name + " has a scan output " + std::to_string(j) +
                                " that is not a tensor");
      if (iterations == 0 && !loop->getResult(carried + j).use_empty())
        return refuse(loop, name + " runs no iterations, and its scan output " +
                                std::to_string(j) +
                                " is an empty tensor, which hetc does not represent");
    }
    Step overBudget = Step::Failed;
    if (!withinBudget(loop, iterations * perIteration, overBudget))
      return overBudget;

    OpBuilder b(loop);
    Location loc = loop.getLoc();
    SmallVector<Value> current(loop.getInputs().begin() + 2, loop.getInputs().end());
    std::vector<SmallVector<Value>> scans(scanCount);
    Value condition = trueConstant(b, loc);
    for (int64_t i = 0; i < iterations; ++i) {
      IRMapping map;
      map.map(body.getArgument(0), int64Constant(b, loc, {i}, {}));
      map.map(body.getArgument(1), condition);
      for (size_t k = 0; k < carried; ++k)
        map.map(body.getArgument(2 + k), current[k]);
      const std::string suffix = " (iteration " + std::to_string(i) + ")";
      for (Operation &op : body.without_terminator()) {
        Operation *copy = b.clone(op, map);
        if (auto node = dyn_cast<OnnxNodeOp>(copy))
          node.setNodeName(b.getStringAttr(node.getNodeName() + suffix));
      }
      condition = map.lookupOrDefault(yield.getValues()[0]);
      // The condition after the last iteration does not matter: the trip count ends the loop.
      if (i + 1 < iterations)
        conditions_.push_back({condition, name + ", iteration " + std::to_string(i)});
      for (size_t k = 0; k < carried; ++k)
        current[k] = map.lookupOrDefault(yield.getValues()[1 + k]);
      for (size_t j = 0; j < scanCount; ++j)
        scans[j].push_back(map.lookupOrDefault(yield.getValues()[1 + carried + j]));
    }
    for (size_t k = 0; k < carried; ++k)
      replace(loop->getResult(k), current[k]);
    for (size_t j = 0; j < scanCount; ++j) {
      Value result = loop->getResult(carried + j);
      if (result.use_empty())
        continue;
      SmallVector<Value> stacked;
      Value axis0 = int64Constant(b, loc, {0}, {1});
      for (Value v : scans[j])
        stacked.push_back(makeNode(b, loc, "Unsqueeze", loop.getNodeName().str() + "/scan",
                                   {v, axis0}, unrankedLike(v)));
      replace(result, makeNode(b, loc, "Concat", loop.getNodeName().str() + "/scan", stacked,
                               result.getType(),
                               {b.getNamedAttr("axis", b.getI64IntegerAttr(0))}));
    }
    replaced_.push_back(loop);
    newNodes_ = true;
    return Step::Done;
  }

  // An index into a list of n (negative from the end), or nullopt out of [-n, n - 1 + extra].
  static std::optional<int64_t> position(int64_t index, int64_t n, int64_t extra = 0) {
    if (index < -n || index > n - 1 + extra)
      return std::nullopt;
    return index < 0 ? index + n : index;
  }

  Step eliminate(OnnxNodeOp node, const SymbolicShapes &shapes) {
    const std::string name = "node " + describe(node);
    StringRef type = node.getOpType();
    OpBuilder b(node);
    Location loc = node.getLoc();
    auto optionalOperand = [&](unsigned i) -> Value {
      return i < node->getNumOperands() && !isa<NoneType>(node->getOperand(i).getType())
                 ? node->getOperand(i)
                 : Value();
    };
    auto fail = [&](const std::string &why) { return refuse(node, name + " " + why); };
    // The sequence operand 0's elements, when its producer is done.
    auto sequenceOperand = [&]() -> std::optional<SmallVector<Value>> {
      if (node->getNumOperands() == 0 || !isSequence(node->getOperand(0)))
        return std::nullopt;
      if (!lists_.count(node->getOperand(0)))
        return std::nullopt;
      return takeList(node->getOperand(0));
    };
    const bool readsSequence = node->getNumOperands() > 0 && isSequence(node->getOperand(0));

    if (type == "SequenceEmpty") {
      lists_[node->getResult(0)] = {};
    } else if (type == "SequenceConstruct") {
      if (!llvm::all_of(node->getOperands(), isTensor))
        return fail("holds an element that is not a tensor");
      lists_[node->getResult(0)] = SmallVector<Value>(node->getOperands());
    } else if (type == "SplitToSequence") {
      Value x = node->getOperand(0), split = optionalOperand(1);
      if (!isTensor(x))
        return fail("splits a value that is not a tensor");
      std::optional<int64_t> rank = knownRank(shapes, x);
      if (!rank)
        return wait(name + " splits a tensor of unknown rank");
      const int64_t axisAttr = intAttr(node, "axis").value_or(0);
      if (axisAttr < -*rank || axisAttr >= *rank)
        return fail("splits axis " + std::to_string(axisAttr) + " of a tensor of rank " +
                    std::to_string(*rank));
      const int64_t axis = axisAttr < 0 ? axisAttr + *rank : axisAttr;
      std::optional<int64_t> dim = knownDim(shapes, x, axis);
      const std::string tooMany = "splits into more than " + std::to_string(kMaxUnrolledNodes) +
                                  " pieces, which hetc does not unroll";
      SmallVector<int64_t> sizes;
      bool squeeze = false;
      if (dim && *dim < 0)
        return fail("splits a dimension of " + std::to_string(*dim) + " elements");
      if (!split) {
        if (!dim)
          return wait(name + " splits a dimension whose size does not evaluate to a constant");
        if (*dim > kMaxUnrolledNodes)
          return fail(tooMany);
        sizes.assign(*dim, 1);
        squeeze = intAttr(node, "keepdims").value_or(1) == 0;
      } else if (std::optional<int64_t> splitRank = knownRank(shapes, split); splitRank == 0) {
        std::optional<int64_t> piece = knownInt(shapes, split);
        if (!piece || !dim)
          return wait(name + " splits into pieces whose size or count does not evaluate to a "
                             "constant");
        if (*piece <= 0)
          return fail("splits into pieces of " + std::to_string(*piece) + " elements");
        if (*dim / *piece + (*dim % *piece != 0) > kMaxUnrolledNodes)
          return fail(tooMany);
        for (int64_t at = 0; at < *dim; at += *piece)
          sizes.push_back(std::min(*piece, *dim - at));
      } else {
        std::optional<SmallVector<int64_t>> pieces = knownInts(shapes, split);
        if (!pieces)
          return wait(name + " splits into pieces whose sizes do not evaluate to constants");
        if (static_cast<int64_t>(pieces->size()) > kMaxUnrolledNodes)
          return fail(tooMany);
        int64_t total = 0;
        for (int64_t p : *pieces)
          if (p < 0 || __builtin_add_overflow(total, p, &total))
            return fail("splits into a piece of " + std::to_string(p) + " elements");
        if (dim && total != *dim)
          return fail("splits a dimension of " + std::to_string(*dim) + " into pieces of " +
                      std::to_string(total) + " elements in all");
        sizes = std::move(*pieces);
      }
      Step overBudget = Step::Failed;
      if (!withinBudget(node, 3 * static_cast<int64_t>(sizes.size()), overBudget))
        return overBudget;
      SmallVector<Value> elements;
      Value axes = int64Constant(b, loc, {axis}, {1});
      int64_t at = 0;
      for (auto [i, size] : llvm::enumerate(sizes)) {
        const std::string piece = node.getNodeName().str() + "/" + std::to_string(i);
        Value slice = makeNode(b, loc, "Slice", piece,
                               {x, int64Constant(b, loc, {at}, {1}),
                                int64Constant(b, loc, {at + size}, {1}), axes},
                               unrankedLike(x));
        elements.push_back(squeeze ? makeNode(b, loc, "Squeeze", piece, {slice, axes},
                                              unrankedLike(x))
                                   : slice);
        at += size;
      }
      lists_[node->getResult(0)] = std::move(elements);
    } else if (readsSequence && (type == "Identity" || type == "SequenceInsert" ||
                                 type == "SequenceErase" || type == "SequenceAt" ||
                                 type == "SequenceLength" || type == "ConcatFromSequence")) {
      if (!lists_.count(node->getOperand(0)))
        return wait(name + " reads a sequence whose elements are not known");
      const bool insert = type == "SequenceInsert";
      if (insert && (node->getNumOperands() < 2 || !isTensor(node->getOperand(1))))
        return fail("inserts a value that is not a tensor");
      // Positions first, so that a wait leaves the sequence's elements where they are.
      const int64_t n = static_cast<int64_t>(lists_[node->getOperand(0)].size());
      Value indexValue = type == "Identity" ? Value() : optionalOperand(insert ? 2 : 1);
      std::optional<int64_t> index;
      if (indexValue) {
        std::optional<int64_t> given = knownInt(shapes, indexValue);
        if (!given)
          return wait(name + " reads a position that does not evaluate to a constant");
        index = position(*given, n, insert ? 1 : 0);
        if (!index)
          return fail("reads position " + std::to_string(*given) + " of a sequence of " +
                      std::to_string(n) + " elements");
      }
      if (type == "SequenceErase" && n == 0)
        return fail("erases from an empty sequence");
      if (type == "SequenceAt" && !index)
        return fail("has no position");
      if (type == "ConcatFromSequence") {
        if (n == 0)
          return fail("concatenates an empty sequence");
        if (!intAttr(node, "axis"))
          return fail("has no axis");
      }
      SmallVector<Value> list = *sequenceOperand();
      if (type == "Identity") {
        lists_[node->getResult(0)] = std::move(list);
      } else if (insert) {
        list.insert(list.begin() + index.value_or(n), node->getOperand(1));
        lists_[node->getResult(0)] = std::move(list);
      } else if (type == "SequenceErase") {
        list.erase(list.begin() + index.value_or(n - 1));
        lists_[node->getResult(0)] = std::move(list);
      } else if (type == "SequenceAt") {
        replace(node->getResult(0), list[*index]);
      } else if (type == "SequenceLength") {
        replace(node->getResult(0), int64Constant(b, loc, {n}, {}));
      } else {
        const int64_t axis = *intAttr(node, "axis");
        SmallVector<Value> parts = std::move(list);
        if (intAttr(node, "new_axis").value_or(0) != 0) {
          Value axes = int64Constant(b, loc, {axis}, {1});
          for (Value &part : parts)
            part = makeNode(b, loc, "Unsqueeze", node.getNodeName().str(), {part, axes},
                            unrankedLike(part));
        }
        replace(node->getResult(0),
                makeNode(b, loc, "Concat", node.getNodeName().str(), parts, unrankedLike(parts[0]),
                         {b.getNamedAttr("axis", b.getI64IntegerAttr(axis))}));
      }
    } else {
      return fail("reads or writes a sequence, which hetc does not evaluate");
    }
    replaced_.push_back(node);
    return Step::Done;
  }

  // Erases what was replaced and is no longer read; a sequence still read (by a copy of a loop's
  // body met in a later round) stays until its readers are gone.
  void eraseReplaced() {
    SmallVector<Operation *> kept;
    // Readers before the sequences they read: the reverse of the order they were met in.
    for (Operation *op : llvm::reverse(replaced_)) {
      if (!op->use_empty()) {
        kept.push_back(op);
        continue;
      }
      done_.erase(op);
      for (Value result : op->getResults())
        lists_.erase(result);
      op->erase();
    }
    replaced_.assign(kept.rbegin(), kept.rend());
  }

  // Each iteration's condition (but the last) evaluates to true: the loop ran its trip count.
  // A condition the first call cannot evaluate is left on its node (kPendingCondition) for the
  // final call, which checks it with the others.
  bool conditionsHold() {
    if (refuseWhatIsLeft_) {
      SmallVector<Operation *> held;
      func_.walk([&](Operation *op) {
        if (isPendingCondition(op))
          held.push_back(op);
      });
      for (Operation *op : held) {
        conditions_.push_back({op->getOperand(0), cast<OnnxNodeOp>(op).getNodeName().str()});
        op->erase();
      }
    }
    if (conditions_.empty())
      return true;
    SymbolicShapes shapes(func_);
    for (const auto &[condition, where] : conditions_) {
      std::optional<int64_t> c = knownInt(shapes, skipNoOps(condition));
      if (!c && !refuseWhatIsLeft_) {
        OpBuilder b = OpBuilder::atBlockTerminator(&func_.getBody().front());
        b.create<OnnxNodeOp>(func_.getLoc(), TypeRange{}, kPendingCondition, where,
                             DictionaryAttr(), ValueRange{condition});
        deferred_ = true;
        continue;
      }
      if (!c || *c == 0) {
        Operation *at = condition.getDefiningOp() ? condition.getDefiningOp() : func_;
        at->emitError() << where << ": the loop's condition "
                        << (c ? "is false, so it stops before its trip count"
                              : "does not evaluate to a constant, so it may stop before its "
                                "trip count")
                        << "; hetc unrolls only loops that run their trip count";
        return false;
      }
    }
    conditions_.clear();
    return true;
  }

  func::FuncOp func_;
  const bool refuseWhatIsLeft_;
  // Nodes made so far (kMaxCreatedNodes).
  int64_t created_ = 0;
  // Whether a condition was left for the final call (the outcome is then Pending).
  bool deferred_ = false;
  // Whether this round copied a loop's body: its sequence nodes wait for the next round.
  bool newNodes_ = false;
  DenseMap<Value, SmallVector<Value>> lists_;
  llvm::SmallPtrSet<Operation *, 16> done_;
  SmallVector<Operation *> replaced_;
  std::vector<std::pair<Value, std::string>> conditions_;
  Operation *firstWaiting_ = nullptr;
  std::string reason_, firstReason_;
};

} // namespace

UnrollOutcome unrollLoopsAndSequences(func::FuncOp func, bool refuseWhatIsLeft) {
  bool any = false;
  func.walk([&](Operation *op) {
    if (isa<OnnxLoopOp>(op) || isPendingCondition(op) ||
        llvm::any_of(op->getResultTypes(), [](Type t) { return isa<OnnxSequenceType>(t); }))
      any = true;
  });
  return any ? Unroller(func, refuseWhatIsLeft).run() : UnrollOutcome::Done;
}

} // namespace hetc
