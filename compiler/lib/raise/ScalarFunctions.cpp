#include "ScalarFunctions.h"

#include "import/OnnxGraph.h"
#include "import/OnnxInterpreter.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

using namespace mlir;

namespace hetc {
namespace {

bool isElementwise(OnnxNodeOp node) {
  return llvm::is_contained({StringRef("Add"), StringRef("Sub"), StringRef("Mul"),
                             StringRef("Div"), StringRef("Pow"), StringRef("Erf"),
                             StringRef("Tanh"), StringRef("Sigmoid"), StringRef("Relu"),
                             StringRef("Neg"), StringRef("Sqrt"), StringRef("Exp"),
                             StringRef("Max"), StringRef("Min")},
                            node.getOpType()) &&
         node->getNumResults() == 1;
}

// A constant of one element (a scalar as it broadcasts).
bool isScalarConstant(Value v) {
  DenseElementsAttr attr = constantValue(v);
  return attr && attr.getNumElements() == 1 && isa<FloatType>(attr.getElementType());
}

} // namespace

bool withinRounding(double got, double want) {
  return std::fabs(got - want) <= 9.5e-7 * std::fabs(want) + 1e-30;
}

double chainRounding(const ElementwiseChain &chain) {
  double rounding = std::ldexp(1.0, -23);
  auto narrow = [&](Type t) {
    auto shaped = dyn_cast<ShapedType>(t);
    auto f = shaped ? dyn_cast<FloatType>(shaped.getElementType()) : FloatType();
    if (f && f.getFPMantissaWidth() > 1)
      rounding = std::max(rounding, std::ldexp(1.0, 1 - static_cast<int>(f.getFPMantissaWidth())));
  };
  for (OnnxNodeOp node : chain.nodes) {
    for (Value r : node->getResults())
      narrow(r.getType());
    for (Value operand : node->getOperands())
      if (DenseElementsAttr constant = constantValue(operand))
        narrow(constant.getType());
  }
  return rounding;
}

SmallVector<ElementwiseChain> elementwiseComputations(Value x) {
  // Every elementwise node reached from x through such nodes, reading nothing else.
  llvm::SetVector<Value> inside;
  inside.insert(x);
  llvm::SetVector<Operation *> closure;
  for (Operation *op = x.getDefiningOp()->getNextNode(); op; op = op->getNextNode()) {
    auto node = dyn_cast<OnnxNodeOp>(op);
    if (!node || !isElementwise(node))
      continue;
    bool reads = false, closed = true;
    for (Value operand : node->getOperands()) {
      if (inside.contains(operand))
        reads = true;
      else if (!isScalarConstant(operand))
        closed = false;
    }
    if (reads && closed) {
      closure.insert(op);
      inside.insert(node->getResult(0));
    }
  }
  SmallVector<ElementwiseChain> computations;
  for (Operation *op : closure) {
    Value result = op->getResult(0);
    if (llvm::all_of(result.getUsers(), [&](Operation *u) { return closure.contains(u); }))
      continue;
    // Its cone: the nodes of the closure it is computed from.
    DenseSet<Operation *> cone;
    SmallVector<Operation *> worklist{op};
    while (!worklist.empty()) {
      Operation *at = worklist.pop_back_val();
      if (!cone.insert(at).second)
        continue;
      for (Value operand : at->getOperands())
        if (Operation *def = operand.getDefiningOp(); def && closure.contains(def))
          worklist.push_back(def);
    }
    ElementwiseChain chain{{}, x, result};
    for (Operation *member : closure)
      if (cone.contains(member))
        chain.nodes.push_back(cast<OnnxNodeOp>(member));
    computations.push_back(std::move(chain));
  }
  return computations;
}

std::optional<ElementwiseChain> chainBackTo(Value result, function_ref<bool(Value)> stop) {
  ElementwiseChain chain{{}, Value(), result};
  Value v = result;
  while (!stop(v)) {
    auto node = v.getDefiningOp<OnnxNodeOp>();
    if (!node || !(isElementwise(node) || node.getOpType() == "Cast") ||
        node->getNumResults() != 1)
      return std::nullopt;
    Value next;
    for (Value operand : node->getOperands()) {
      if (isScalarConstant(operand))
        continue;
      if (next)
        return std::nullopt; // two non-constant operands: not a function of one value
      next = operand;
    }
    if (!next)
      return std::nullopt;
    chain.nodes.insert(chain.nodes.begin(), node);
    v = next;
  }
  chain.input = v;
  return chain;
}

ElementwiseChain chainForwardFrom(Value x) {
  ElementwiseChain chain{{}, x, x};
  Value v = x;
  while (v.hasOneUse()) {
    auto node = dyn_cast<OnnxNodeOp>(*v.getUsers().begin());
    if (!node || !(isElementwise(node) || node.getOpType() == "Cast") ||
        node->getNumResults() != 1 ||
        llvm::any_of(node->getOperands(),
                     [&](Value operand) { return operand != v && !isScalarConstant(operand); }))
      break;
    chain.nodes.push_back(node);
    v = node->getResult(0);
  }
  chain.result = v;
  return chain;
}

std::optional<std::vector<double>> evaluateChain(const ElementwiseChain &chain,
                                                 ArrayRef<double> points) {
  Tensor sample;
  sample.elem = Float32Type::get(chain.result.getContext());
  sample.shape = {1, 1, static_cast<int64_t>(points.size())};
  sample.floats.assign(points.begin(), points.end());
  DenseMap<Value, Tensor> values;
  values[chain.input] = sample;
  for (OnnxNodeOp node : chain.nodes) {
    SmallVector<Tensor> inputs;
    for (Value operand : node->getOperands()) {
      if (auto it = values.find(operand); it != values.end()) {
        inputs.push_back(it->second);
      } else if (std::optional<Tensor> c = tensorFromAttr(constantValue(operand))) {
        inputs.push_back(*c);
      } else {
        return std::nullopt;
      }
    }
    std::optional<Tensor> out = evaluateNode(node, inputs);
    if (!out || !out->isFloat())
      return std::nullopt;
    values[node->getResult(0)] = *out;
  }
  const Tensor &y = values[chain.result];
  if (y.size() != static_cast<int64_t>(points.size()) || !y.isFloat())
    return std::nullopt;
  return y.floats;
}

std::optional<ScaledSoftCap> fitScaledSoftCap(const ElementwiseChain &chain) {
  // A wide range, densest near 0 where a cap bends least; then the far ends, where a cap is all
  // that is left and a scale alone keeps growing.
  std::vector<double> points;
  for (int k = -60; k <= 60; ++k) {
    const double u = k / 60.0;
    points.push_back(100.0 * u * u * u);
  }
  const size_t probes = points.size();
  points.push_back(1.0e-3);
  points.push_back(1.0e30);
  points.push_back(-1.0e30);
  points.push_back(1.0);
  std::optional<std::vector<double>> y = evaluateChain(chain, points);
  if (!y)
    return std::nullopt;
  const double slope = (*y)[probes] / 1.0e-3, far = (*y)[probes + 1];
  if (!(slope > 0) || !std::isfinite(slope))
    return std::nullopt;
  ScaledSoftCap fit;
  // Capped: the far ends are +-cap, finite.
  if (std::isfinite(far) && std::fabs(far) < 1.0e20) {
    if (!(far > 0) || !withinRounding(-(*y)[probes + 2], far))
      return std::nullopt;
    fit.cap = far;
  }
  // Uncapped, the value at 1 is the scale itself, a constant multiplier's bits exactly. Capped,
  // the slope at 1e-3 recovered through the tanh's inverse.
  fit.scale = (*y)[probes + 3];
  if (fit.cap > 0) {
    const double t = (*y)[probes] / fit.cap;
    if (!(std::fabs(t) < 1.0))
      return std::nullopt;
    fit.scale = std::atanh(t) * fit.cap / 1.0e-3;
  }
  for (size_t k = 0; k < probes; ++k) {
    const double x = points[k];
    const double want =
        fit.cap > 0 ? fit.cap * std::tanh(fit.scale * x / fit.cap) : fit.scale * x;
    if (!withinRounding((*y)[k], want))
      return std::nullopt;
  }
  return fit;
}

} // namespace hetc

std::string hetc::fittedNodes(size_t count, StringRef first, StringRef last) {
  if (count == 1)
    return "fitted by values: 1 node, '" + first.str() + "', is";
  return "fitted by values: " + std::to_string(count) + " nodes from '" + first.str() + "' to '" +
         last.str() + "' are";
}

std::string hetc::nodeName(mlir::Operation *op) {
  if (auto node = mlir::dyn_cast<OnnxNodeOp>(op))
    return node.getNodeName().str();
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(op->getLoc()))
    return name.getName().str();
  return op->getName().getStringRef().str();
}

std::string hetc::regionNamed(llvm::ArrayRef<mlir::Operation *> nodes) {
  return "the " + std::to_string(nodes.size()) + " nodes from '" + nodeName(nodes.front()) +
         "' to '" + nodeName(nodes.back()) + "'";
}
