// Norms found by dataflow and read by their values, whatever their spelling.
//
// A norm is a region of elementwise nodes and reductions over the last axis that computes its
// result from one activation x and the file's constants (its gamma, beta and epsilon). Where it
// is, is found by dataflow alone: from each reduction over the last axis, back to the x whose
// computation it is (the earliest value every node of the region is computed from alone, with no
// intermediate read outside it), and forward to the region's ends (the values read outside it).
// What it computes is found by evaluating it, with the interpreter, on rows chosen to tell the
// forms apart, and fitting the catalogue of hetc's norms:
//
//   RMSNorm    y = x / sqrt(mean(x^2) + eps) * gamma
//   LayerNorm  y = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * gamma (+ beta)
//
// A shift of the input tells them apart (LayerNorm ignores it); the all-zero row gives beta;
// gamma is read from a row of scale 10 and eps from rows of scales 1e-15 to 10 (at the scale
// where eps is comparable to the mean square), then taken as the region's own constant where one
// is within 1e-3 of it. Gamma and beta are identified with the region's 1-D weights by probing:
// the weights are given distinct random values, so `gamma` equals a weight only if the region
// scales by it; a gamma computed from a weight (Gemma's x * (1 + w)) is then evaluated on the
// stored weight and the plan holds the result. The fitted form must then reproduce the region on
// every row (those above and random rows of scales 1e-2 to 1e2, centred or not) within
// 8 float32 ulps of the terms (|gamma * n| + |beta|): the interpreter computes in double, so the
// only differences are the graph's float32 constants (1/H, eps) against the form's.
//
// So `ReduceMean(Pow(x, 2))`, `ReduceSumSquare / H`, `x * x`, `rsqrt`, `1 / sqrt`,
// `pow(v, -0.5)`, a LayerNorm decomposed by an exporter at opset 11 to 16, float casts around
// any of it and gamma or beta applied in any order all read the same, and a region that computes
// something else (a softmax, a norm with eps outside the square root) is left to the check that
// names unraised regions.
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanAttributes.h"
#include "hetc/compiler/WeightStore.h"
#include "import/OnnxGraph.h"
#include "import/OnnxInterpreter.h"
#include "raise/ScalarFunctions.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <random>

namespace hetc {
#define GEN_PASS_DEF_RAISENORM
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

// A norm is a few nodes; a larger region is something else.
constexpr size_t kMaxRegionNodes = 48;
// Relative agreement between the region and the fitted form: 8 float32 ulps.
constexpr double kTolerance = 8.0 * 0x1p-23;

bool isLastAxisReduction(OnnxNodeOp node) {
  StringRef type = node.getOpType();
  if (type != "ReduceMean" && type != "ReduceSum" && type != "ReduceSumSquare" &&
      type != "ReduceL2")
    return false;
  if (intAttr(node, "keepdims").value_or(1) != 1)
    return false;
  std::optional<SmallVector<int64_t>> axes = axesOf(node);
  int64_t rank = rankOf(node->getOperand(0));
  return axes && axes->size() == 1 &&
         ((*axes)[0] == -1 || (rank > 0 && (*axes)[0] == rank - 1));
}

// The nodes a norm is made of.
bool isNormNode(OnnxNodeOp node) {
  static const llvm::StringSet<> kElementwise = {"Add",        "Sub",  "Mul",  "Div",
                                                 "Pow",        "Sqrt", "Neg",  "Cast",
                                                 "Reciprocal", "Identity"};
  return kElementwise.contains(node.getOpType()) || isLastAxisReduction(node);
}

// A value computed from the file's constants and weights alone, no larger than `maxElements`:
// a gamma, a beta, an epsilon, a reduction's axes.
bool isParam(Value v, int64_t maxElements, int depth = 0) {
  Operation *def = v.getDefiningOp();
  if (!def || depth > 8)
    return false;
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape() || type.getNumElements() > maxElements)
    return false;
  if (isa<ConstantOp>(def))
    return true;
  if (auto weight = dyn_cast<WeightOp>(def))
    return !weight.getTransposed() && !weight.getColumns();
  auto node = dyn_cast<OnnxNodeOp>(def);
  return node && !readsDimensionsOnly(node) &&
         llvm::all_of(node->getOperands(),
                      [&](Value o) { return isParam(o, maxElements, depth + 1); });
}


struct Fit {
  bool layer = false;
  double epsilon = 0.0;
  std::string epsilonSource; // how eps was read, for --explain
  std::vector<double> gamma, beta;
  double worst = 0.0;   // the largest difference found, relative to the terms
  int64_t worstRow = 0; // where
  double rmsShiftChange = 0.0; // how much a shift moves the output, relative
};

class NormRaiser {
public:
  NormRaiser(func::FuncOp func, const compiler::WeightStore *weights, MLIRContext *ctx)
      : func_(func), weights_(weights), builder_(ctx) {}

  void run() {
    SmallVector<OnnxNodeOp> reductions;
    func_.walk([&](OnnxNodeOp node) {
      if (isLastAxisReduction(node))
        reductions.push_back(node);
    });
    for (OnnxNodeOp reduction : reductions)
      if (!done_.contains(reduction.getOperation()))
        raiseAround(reduction);
  }

private:
  // The nodes computed from `x` and parameters alone, through norm nodes; empty past the limit.
  llvm::SetVector<Operation *> computedFrom(Value x, int64_t features) {
    llvm::SetVector<Operation *> pure;
    SmallVector<Value> work{x};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      for (Operation *user : v.getUsers()) {
        auto node = dyn_cast<OnnxNodeOp>(user);
        if (!node || pure.contains(user) || !isNormNode(node))
          continue;
        if (!llvm::all_of(node->getOperands(), [&](Value o) {
              return o == x || (o.getDefiningOp() && pure.contains(o.getDefiningOp())) ||
                     isParam(o, features);
            }))
          continue;
        pure.insert(user);
        if (pure.size() > kMaxRegionNodes)
          return {};
        for (Value r : node->getResults())
          work.push_back(r);
      }
    }
    return pure;
  }

  // The nodes of `pure` that `end` is computed by, in program order.
  static SmallVector<Operation *> coneOf(Value end, const llvm::SetVector<Operation *> &pure) {
    llvm::SetVector<Operation *> cone;
    SmallVector<Value> work{end};
    while (!work.empty()) {
      Operation *def = work.pop_back_val().getDefiningOp();
      if (!def || !pure.contains(def) || !cone.insert(def))
        continue;
      for (Value o : def->getOperands())
        work.push_back(o);
    }
    SmallVector<Operation *> nodes(cone.begin(), cone.end());
    llvm::sort(nodes, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    return nodes;
  }

  // The values of `pure` read outside it (a Shape read does not count).
  static SmallVector<Value> endsOf(const llvm::SetVector<Operation *> &pure) {
    SmallVector<Value> ends;
    for (Operation *op : pure)
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *user) {
              return !pure.contains(user) && !readsDimensionsOnly(user);
            }))
          ends.push_back(r);
    return ends;
  }

  void raiseAround(OnnxNodeOp reduction) {
    std::optional<int64_t> features = featureSize(reduction->getOperand(0).getType());
    if (!features || *features < 2)
      return;
    // Candidates for x: the activations the reduction's input is computed from through norm
    // nodes, the earliest first (a Cast to float32 before the statistics is the norm's).
    llvm::SetVector<Value> candidates;
    SmallVector<Value> work{reduction->getOperand(0)};
    while (!work.empty() && candidates.size() < kMaxRegionNodes) {
      Value v = work.pop_back_val();
      if (isParam(v, *features) || !candidates.insert(v))
        continue;
      if (auto node = v.getDefiningOp<OnnxNodeOp>(); node && isNormNode(node))
        for (Value o : node->getOperands())
          work.push_back(o);
    }
    SmallVector<Value> ordered(candidates.begin(), candidates.end());
    auto position = [](Value v) -> Operation * {
      if (auto arg = dyn_cast<BlockArgument>(v))
        return &arg.getOwner()->front();
      return v.getDefiningOp();
    };
    llvm::stable_sort(ordered, [&](Value a, Value b) {
      Operation *pa = position(a), *pb = position(b);
      bool argA = isa<BlockArgument>(a), argB = isa<BlockArgument>(b);
      if (argA != argB)
        return argA;
      return pa != pb && pa->isBeforeInBlock(pb);
    });
    for (Value x : ordered) {
      if (featureSize(x.getType()) != features)
        continue;
      llvm::SetVector<Operation *> pure = computedFrom(x, *features);
      if (!pure.contains(reduction.getOperation()))
        continue;
      SmallVector<Value> ends = endsOf(pure);
      // Every end is a norm's (x may feed several, as a parallel residual's two norms): an
      // intermediate with no statistics in it read elsewhere (a scaled embedding the residual
      // also reads) means x is too early.
      if (ends.empty() || !llvm::all_of(ends, [&](Value end) {
            return llvm::any_of(coneOf(end, pure), [](Operation *op) {
              return isLastAxisReduction(cast<OnnxNodeOp>(op));
            });
          }))
        continue;
      for (Value end : ends)
        raiseEnd(x, end, pure, *features);
      // The nodes the norms replaced, latest first; those still read stay.
      SmallVector<Operation *> nodes(pure.begin(), pure.end());
      llvm::sort(nodes, [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
      for (Operation *op : nodes) {
        done_.insert(op);
        if (op->use_empty())
          op->erase();
      }
      return;
    }
  }

  // Raises `end`, or the latest value before it that fits a norm. Where none does, the end
  // carries why its region is not one (kNotANorm), for the check that names unraised regions.
  void raiseEnd(Value x, Value end, const llvm::SetVector<Operation *> &pure, int64_t features) {
    SmallVector<Operation *> cone = coneOf(end, pure);
    std::string whyNot;
    for (auto it = cone.rbegin(); it != cone.rend(); ++it) {
      Value y = (*it)->getResult(0);
      if ((*it)->getNumResults() != 1 || featureSize(y.getType()) != features)
        continue;
      std::string why;
      if (raise(x, y, coneOf(y, pure), features, why))
        return;
      if (whyNot.empty())
        whyNot = why;
    }
    if (Operation *def = end.getDefiningOp(); def && !whyNot.empty())
      def->setAttr(kNotANorm,
                   StringAttr::get(def->getContext(),
                                   regionNamed(cone) +
                                       " compute statistics over the last dimension but are not "
                                       "a norm: " + whyNot));
  }

  // The region's parameter leaves: constants and weights.
  static SmallVector<Value> leavesOf(ArrayRef<Operation *> nodes, int64_t features) {
    llvm::SetVector<Value> leaves;
    std::function<void(Value)> visit = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (!def)
        return;
      if (isa<ConstantOp, WeightOp>(def)) {
        leaves.insert(v);
        return;
      }
      if (llvm::is_contained(nodes, def) || isParam(v, features))
        for (Value o : def->getOperands())
          visit(o);
    };
    for (Operation *node : nodes)
      for (Value o : node->getOperands())
        visit(o);
    return SmallVector<Value>(leaves.begin(), leaves.end());
  }

  // A weight's values: distinct random ones when probing, else the stored ones.
  std::optional<Tensor> weightValues(WeightOp weight, bool probe) {
    auto type = cast<RankedTensorType>(weight.getType());
    Tensor t;
    t.shape.assign(type.getShape().begin(), type.getShape().end());
    t.elem = type.getElementType();
    if (!t.isFloat())
      return std::nullopt;
    t.resize(type.getNumElements());
    if (probe) {
      std::mt19937_64 rng(std::hash<std::string>()(weight.getName().str()));
      std::uniform_real_distribution<double> magnitude(0.5, 1.5);
      for (int64_t k = 0; k < t.size(); ++k)
        t.floats[k] = (rng() & 1 ? 1.0 : -1.0) * magnitude(rng);
      return t;
    }
    const compiler::StoredWeight *stored = weights_ ? weights_->find(weight.getName().str())
                                                    : nullptr;
    if (!stored || static_cast<int64_t>(stored->elementCount()) != t.size() ||
        stored->elementType == compiler::WeightElementType::I64)
      return std::nullopt;
    std::vector<float> values = stored->toFloats();
    t.floats.assign(values.begin(), values.end());
    return t;
  }

  // `y` for the rows of `x` (a [rows, features] matrix), the region's nodes evaluated in order.
  std::optional<std::vector<double>> evaluate(Value xValue, Value yValue,
                                              ArrayRef<Operation *> nodes,
                                              const std::vector<std::vector<double>> &rows,
                                              int64_t features, bool probe) {
    DenseMap<Value, Tensor> known;
    Tensor x;
    int64_t rank = std::max<int64_t>(rankOf(xValue), 2);
    x.shape.assign(rank, 1);
    x.shape[rank - 2] = static_cast<int64_t>(rows.size());
    x.shape[rank - 1] = features;
    x.elem = cast<ShapedType>(xValue.getType()).getElementType();
    if (!x.isFloat())
      return std::nullopt;
    for (const std::vector<double> &row : rows)
      x.floats.insert(x.floats.end(), row.begin(), row.end());
    known[xValue] = std::move(x);
    std::function<std::optional<Tensor>(Value)> valueOf = [&](Value v) -> std::optional<Tensor> {
      if (auto it = known.find(v); it != known.end())
        return it->second;
      Operation *def = v.getDefiningOp();
      std::optional<Tensor> t;
      if (auto constant = dyn_cast_or_null<ConstantOp>(def)) {
        t = tensorFromAttr(constantValue(v));
      } else if (auto weight = dyn_cast_or_null<WeightOp>(def)) {
        t = weightValues(weight, probe);
      } else if (auto node = dyn_cast_or_null<OnnxNodeOp>(def); node && node->getNumResults() == 1) {
        SmallVector<Tensor> inputs;
        for (Value o : node->getOperands()) {
          std::optional<Tensor> in = valueOf(o);
          if (!in)
            return std::nullopt;
          inputs.push_back(std::move(*in));
        }
        t = evaluateNode(node, inputs);
      }
      if (t)
        known[v] = *t;
      return t;
    };
    ScopedEvaluationBudget budget(static_cast<int64_t>(rows.size()) * features * 2);
    for (Operation *op : nodes)
      if (!valueOf(op->getResult(0)))
        return std::nullopt;
    std::optional<Tensor> y = valueOf(yValue);
    if (!y || !y->isFloat() || y->size() != static_cast<int64_t>(rows.size()) * features)
      return std::nullopt;
    return y->floats;
  }

  // The normalized row, without gamma and beta.
  static std::vector<double> normalized(const std::vector<double> &row, bool layer,
                                        double epsilon) {
    double mean = 0.0;
    if (layer) {
      for (double v : row)
        mean += v;
      mean /= static_cast<double>(row.size());
    }
    double square = 0.0;
    for (double v : row)
      square += (v - mean) * (v - mean);
    double inv = 1.0 / std::sqrt(square / static_cast<double>(row.size()) + epsilon);
    std::vector<double> n(row.size());
    for (size_t j = 0; j < row.size(); ++j)
      n[j] = (row[j] - mean) * inv;
    return n;
  }

  // The rows the region is evaluated on; see the file's comment. Row 0 is zeros, row 1 the unit
  // row u (mean 0, mean square 1, no element near 0) at scale 10, row 2 the same shifted by 30,
  // rows 3.. u at scales 1e-15 to 10, then random rows.
  static constexpr int kLadderFirst = 3, kLadderRows = 17;
  static std::string rowDescribed(int64_t r) {
    if (r == 0)
      return "the row of zeros";
    if (r == 1)
      return "a row of mean 0 and root mean square 10";
    if (r == 2)
      return "a row of mean 30 and root mean square 10 about it";
    if (r < kLadderFirst + kLadderRows)
      return "a row of mean 0 and root mean square 1e" + std::to_string(r - kLadderFirst - 15);
    int k = static_cast<int>(r - kLadderFirst - kLadderRows);
    return "a random row of standard deviation 1e" + std::to_string(k % 5 - 2) +
           (k % 2 ? " and mean twice that" : " and mean 0");
  }
  static std::vector<std::vector<double>> probeRows(int64_t features, std::vector<double> &u,
                                                    std::vector<double> &ladder) {
    std::mt19937_64 rng(20261128);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    u.assign(features, 0.0);
    int64_t j = 0;
    for (; j + 1 < features - (features % 2 ? 1 : 0); j += 2) {
      u[j] = 0.5 + unit(rng);
      u[j + 1] = -u[j];
    }
    if (features % 2) { // the last three sum to zero
      double a = 0.5 + unit(rng), b = 0.5 + unit(rng);
      u[features - 3] = a;
      u[features - 2] = b;
      u[features - 1] = -(a + b);
    }
    double square = 0.0;
    for (double v : u)
      square += v * v;
    double scale = 1.0 / std::sqrt(square / static_cast<double>(features));
    for (double &v : u)
      v *= scale;
    std::vector<std::vector<double>> rows;
    auto scaled = [&](double s, double shift) {
      std::vector<double> row(features);
      for (int64_t k = 0; k < features; ++k)
        row[k] = s * u[k] + shift;
      return row;
    };
    rows.push_back(std::vector<double>(features, 0.0));
    rows.push_back(scaled(10.0, 0.0));
    rows.push_back(scaled(10.0, 30.0));
    ladder.clear();
    for (int k = 0; k < kLadderRows; ++k) {
      ladder.push_back(std::pow(10.0, -15 + k));
      rows.push_back(scaled(ladder.back(), 0.0));
    }
    std::normal_distribution<double> normal(0.0, 1.0);
    for (int r = 0; r < 10; ++r) {
      double sigma = std::pow(10.0, r % 5 - 2), mean = r % 2 ? 2.0 * sigma : 0.0;
      std::vector<double> row(features);
      for (double &v : row)
        v = mean + sigma * normal(rng);
      rows.push_back(row);
    }
    return rows;
  }

  // The catalogue form that reproduces `y` (row-major over `rows`), or nullopt; `why` says how
  // close the nearest came.
  static std::optional<Fit> fitNorm(const std::vector<std::vector<double>> &rows,
                                    const std::vector<double> &y, const std::vector<double> &u,
                                    const std::vector<double> &ladder,
                                    ArrayRef<double> constants, std::string &why) {
    const size_t h = u.size();
    auto rowOf = [&](size_t r) { return ArrayRef<double>(y).slice(r * h, h); };
    Fit fit;
    ArrayRef<double> zero = rowOf(0), at10 = rowOf(1), shifted = rowOf(2);
    double scale = 0.0, shift = 0.0;
    for (size_t j = 0; j < h; ++j) {
      scale = std::max(scale, std::abs(at10[j] - zero[j]));
      shift = std::max(shift, std::abs(at10[j] - shifted[j]));
    }
    if (!(scale > 0.0)) {
      why = "its result does not change with its input";
      return std::nullopt;
    }
    fit.layer = shift <= 1e-3 * scale;
    fit.rmsShiftChange = shift / scale;
    fit.beta.assign(zero.begin(), zero.end());
    // gamma from the row at scale 10, eps from the ladder row where it matters most; twice, as
    // each reading uses the other.
    fit.gamma.assign(h, 0.0);
    for (int round = 0; round < 3; ++round) {
      std::vector<double> n = normalized(rows[1], fit.layer, fit.epsilon);
      for (size_t j = 0; j < h; ++j)
        fit.gamma[j] = (at10[j] - fit.beta[j]) / n[j];
      double best = -1.0, bestT = 0.0, bestS = 0.0;
      for (size_t k = 0; k < ladder.size(); ++k) {
        ArrayRef<double> yk = rowOf(kLadderFirst + k);
        double dot = 0.0, norm = 0.0;
        for (size_t j = 0; j < h; ++j) {
          double gu = fit.gamma[j] * u[j];
          dot += (yk[j] - fit.beta[j]) * gu;
          norm += gu * gu;
        }
        double t = dot / norm; // s / sqrt(s^2 + eps)
        if (!(t > 0.0 && t <= 1.0 + 1e-12))
          continue;
        double closeness = std::abs(t - M_SQRT1_2);
        if (best < 0.0 || closeness < best) {
          best = closeness;
          bestT = t;
          bestS = ladder[k];
        }
      }
      if (best < 0.0) {
        why = "its result is not a multiple of its input scaled to a unit mean square";
        return std::nullopt;
      }
      fit.epsilon = std::max(0.0, bestS * bestS * (1.0 / (bestT * bestT) - 1.0));
    }
    fit.epsilonSource = "fitted";
    for (double c : constants)
      if (c > 0.0 && std::abs(c - fit.epsilon) <= 1e-3 * c) {
        fit.epsilonSource = "fitted " + printed(fit.epsilon, 8) + ", the region's constant";
        fit.epsilon = c;
        break;
      }
    // gamma again at the eps taken.
    std::vector<double> n10 = normalized(rows[1], fit.layer, fit.epsilon);
    for (size_t j = 0; j < h; ++j)
      fit.gamma[j] = (at10[j] - fit.beta[j]) / n10[j];
    return fit;
  }

  // The largest difference between `y` and the fitted form over every row, relative to its
  // terms; sets fit.worst and fit.worstRow.
  static void measure(Fit &fit, const std::vector<std::vector<double>> &rows,
                      const std::vector<double> &y) {
    const size_t h = fit.gamma.size();
    fit.worst = 0.0;
    for (size_t r = 0; r < rows.size(); ++r) {
      std::vector<double> n = normalized(rows[r], fit.layer, fit.epsilon);
      for (size_t j = 0; j < h; ++j) {
        double want = fit.gamma[j] * n[j] + fit.beta[j];
        double terms = std::abs(fit.gamma[j] * n[j]) + std::abs(fit.beta[j]);
        double got = y[r * h + j];
        double off = std::isfinite(got) ? std::abs(got - want) / std::max(terms, 1e-300)
                                        : std::numeric_limits<double>::infinity();
        if (!(off <= fit.worst)) {
          fit.worst = off;
          fit.worstRow = static_cast<int64_t>(r);
        }
      }
    }
  }

  // The leaf whose (probed or constant) values are `values`, if one is.
  std::optional<Value> leafEqualTo(ArrayRef<Value> leaves, const std::vector<double> &values,
                                   int64_t features) {
    for (Value leaf : leaves) {
      auto type = dyn_cast<RankedTensorType>(leaf.getType());
      if (!type || type.getRank() != 1 || type.getDimSize(0) != features)
        continue;
      std::optional<Tensor> t;
      if (auto weight = leaf.getDefiningOp<WeightOp>())
        t = weightValues(weight, /*probe=*/true);
      else
        t = tensorFromAttr(constantValue(leaf));
      if (!t || !t->isFloat())
        continue;
      bool equal = true;
      for (int64_t j = 0; j < features && equal; ++j)
        equal = std::abs(t->floats[j] - values[j]) <=
                kTolerance * std::max(std::abs(values[j]), 1e-30);
      if (equal)
        return leaf;
    }
    return std::nullopt;
  }

  Value constantOf(const std::vector<double> &values, std::string name, Location near) {
    SmallVector<float> floats(values.begin(), values.end());
    auto type = RankedTensorType::get({static_cast<int64_t>(floats.size())},
                                      builder_.getF32Type());
    return builder_.create<ConstantOp>(NameLoc::get(builder_.getStringAttr(name), near), type,
                                       DenseElementsAttr::get(type, ArrayRef<float>(floats)));
  }

  bool raise(Value x, Value y, SmallVector<Operation *> nodes, int64_t features,
             std::string &why) {
    std::vector<double> u, ladder;
    std::vector<std::vector<double>> rows = probeRows(features, u, ladder);
    std::optional<std::vector<double>> probed =
        evaluate(x, y, nodes, rows, features, /*probe=*/true);
    if (!probed) {
      why = "the interpreter cannot evaluate them";
      return false;
    }
    SmallVector<Value> leaves = leavesOf(nodes, features);
    SmallVector<double> constants;
    for (Value leaf : leaves)
      if (std::optional<double> c = scalarValue(leaf))
        constants.push_back(*c);
    std::optional<Fit> fit = fitNorm(rows, *probed, u, ladder, constants, why);
    if (!fit)
      return false;
    measure(*fit, rows, *probed);
    if (!(fit->worst <= kTolerance)) {
      std::string form = std::string(fit->layer ? "LayerNorm" : "RMSNorm") + " with eps " +
                         printed(fit->epsilon, 3) + ", the nearest form, ";
      why = std::isfinite(fit->worst)
                ? form + "differs from them by " + printed(fit->worst, 2) + " of its terms on " +
                      rowDescribed(fit->worstRow) + " (the tolerance is " +
                      printed(kTolerance, 2) + ")"
                : "they give NaN or infinity on " + rowDescribed(fit->worstRow) + ", where " +
                      form + "does not";
      return false;
    }
    bool hasBias = llvm::any_of(fit->beta, [](double b) { return b != 0.0; });
    if (hasBias && !fit->layer) {
      why = "they are RMSNorm plus a bias, which hetc has no op for";
      return false;
    }

    Operation *last = nodes.back();
    builder_.setInsertionPoint(y.getDefiningOp());
    std::optional<Value> gammaLeaf = leafEqualTo(leaves, fit->gamma, features);
    std::optional<Value> betaLeaf =
        hasBias ? leafEqualTo(leaves, fit->beta, features) : std::optional<Value>();
    Value gamma = gammaLeaf.value_or(Value()), beta = betaLeaf.value_or(Value());
    if (!gamma || (hasBias && !beta)) {
      // Computed from the weights: evaluated on the stored ones.
      std::optional<std::vector<double>> stored =
          evaluate(x, y, nodes, rows, features, /*probe=*/false);
      if (!stored) {
        why = "their gamma or beta is computed from a weight whose values are not at hand";
        return false;
      }
      Fit real = *fit;
      std::vector<double> n10 = normalized(rows[1], real.layer, real.epsilon);
      const size_t h = static_cast<size_t>(features);
      real.beta.assign(stored->begin(), stored->begin() + h);
      for (size_t j = 0; j < h; ++j)
        real.gamma[j] = ((*stored)[h + j] - real.beta[j]) / n10[j];
      measure(real, rows, *stored);
      if (!(real.worst <= kTolerance)) {
        why = "with the stored weights, the form differs from them by " +
              printed(real.worst, 2) + " of its terms on " + rowDescribed(real.worstRow);
        return false;
      }
      std::string source = "gamma";
      for (Value leaf : leaves)
        if (auto weight = leaf.getDefiningOp<WeightOp>()) {
          source = weight.getName().str();
          break;
        }
      if (!gamma)
        gamma = constantOf(real.gamma, source + " (computed: the norm's scale)", last->getLoc());
      if (hasBias && !beta)
        beta = constantOf(real.beta, source + " (computed: the norm's bias)", last->getLoc());
    }

    Type type = y.getType();
    if (!featureSize(type))
      type = withFeatureSize(isa<RankedTensorType>(type) ? type : x.getType(), features);
    FloatAttr epsilon = builder_.getF32FloatAttr(static_cast<float>(fit->epsilon));
    Operation *norm =
        fit->layer ? builder_.create<LayerNormOp>(last->getLoc(), type, x, gamma, beta, epsilon)
                         .getOperation()
                   : builder_.create<RmsNormOp>(last->getLoc(), type, x, gamma, epsilon)
                         .getOperation();
    norm->setAttr(planning::kFit, builder_.getStringAttr(described(*fit, nodes, gamma, beta,
                                                                   rows.size(), features)));
    y.replaceAllUsesWith(norm->getResult(0));
    return true;
  }

  static std::string operandName(Value v) {
    if (!v)
      return "none";
    if (auto weight = v.getDefiningOp<WeightOp>())
      return "'" + weight.getName().str() + "'";
    return "'" + nodeName(v.getDefiningOp()) + "'";
  }

  static std::string described(const Fit &fit, ArrayRef<Operation *> nodes, Value gamma,
                               Value beta, size_t rows, int64_t features) {
    std::string text =
        fittedNodes(nodes.size(), nodeName(nodes.front()), nodeName(nodes.back())) + " ";
    text += fit.layer ? "LayerNorm (a shift of the input leaves them within " +
                            printed(fit.rmsShiftChange, 2) + " of their scale)"
                      : "RMSNorm (a shift of the input moves them by " +
                            printed(fit.rmsShiftChange, 2) + " of their scale)";
    text += ", eps " + printed(fit.epsilon, 7) + " (" + fit.epsilonSource + "), gamma " +
            operandName(gamma);
    if (fit.layer)
      text += ", beta " + operandName(beta);
    text += "; within " + printed(fit.worst, 2) + " of the terms at " + std::to_string(rows) +
            " rows of " + std::to_string(features);
    return text;
  }

  func::FuncOp func_;
  const compiler::WeightStore *weights_;
  OpBuilder builder_;
  llvm::DenseSet<Operation *> done_;
};

struct RaiseNormPass : public hetc::impl::RaiseNormBase<RaiseNormPass> {
  RaiseNormPass() = default;
  explicit RaiseNormPass(const compiler::WeightStore *weights) : weights_(weights) {}

  void runOnOperation() override {
    NormRaiser(getOperation(), weights_, &getContext()).run();
    syncResultTypes(getOperation());
  }

  const compiler::WeightStore *weights_ = nullptr;
};

} // namespace

std::unique_ptr<Pass> hetc::createRaiseNorm(const compiler::WeightStore *weights) {
  return std::make_unique<RaiseNormPass>(weights);
}
