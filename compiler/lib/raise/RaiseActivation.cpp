// The pointwise activation of a non-gated feed-forward, applied to an LLM value (a linear's
// result), becomes hetc.activation:
//
//   Relu(x)                                   -> relu       (OPT)
//   Gelu(x; approximate = "none" | "tanh")    -> gelu | gelu_tanh (ONNX, opset 20)
//   FastGelu(x[, bias]) (com.microsoft)       -> gelu_tanh  (ONNX Runtime's fusion of GPT-2's
//                                                gelu_new); a bias is the linear's bias when
//                                                the linear has none, and refused otherwise
//   an activation written out (nn.GELU() at opset 17: x * 0.5 * (1 + erf(x / sqrt 2)); GPT-2's
//   gelu_new: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))); a Relu as Max(x, 0); a squared
//   ReLU as Pow(Relu(x), 2) or Relu(x) * Relu(x))
//                                             -> the function whose values it has
//
// The last is raised by meaning: the elementwise nodes that compute one value from the LLM value
// and scalar constants alone are evaluated, by the ONNX interpreter, at points from -30 to 30;
// when they equal one of hetc.activation's functions everywhere (within eight ulps of the
// nodes' float type: the constants are rounded to it), they are that function, however they
// are written. An activation of anything else
// is left for CheckRaised to name.
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanAttributes.h"
#include "import/OnnxGraph.h"
#include "import/OnnxInterpreter.h"
#include "raise/ScalarFunctions.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <limits>

namespace hetc {
#define GEN_PASS_DEF_RAISEACTIVATION
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

// The hetc.activation function `node` computes; empty when it is none of the above.
StringRef functionOf(OnnxNodeOp node) {
  StringRef type = node.getOpType();
  if (type == "Relu")
    return "relu";
  if (type == "FastGelu")
    return "gelu_tanh";
  if (type == "Gelu") {
    StringRef approximate = stringAttr(node, "approximate", "none");
    if (approximate == "none")
      return "gelu";
    if (approximate == "tanh")
      return "gelu_tanh";
  }
  return {};
}

double reference(StringRef function, double x) {
  if (function == "relu")
    return std::max(x, 0.0);
  if (function == "relu2")
    return std::max(x, 0.0) * std::max(x, 0.0);
  if (function == "gelu")
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  if (function == "silu")
    return x / (1.0 + std::exp(-x));
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

// The hetc.activation function a chain computes, by its values, and how near it and the next
// nearest came.
struct ActivationFit {
  StringRef function;
  double off = 0.0; // the largest difference, relative to max(1, |value|)
  StringRef nextNearest;
  double nextOff = 0.0;
};
constexpr int64_t kActivationPoints = 241;
// Eight ulps of the chain's narrowest float type (chainRounding): 9.5e-7 for float32, 7.8e-3 for
// float16, whose GELU and tanh-approximated GELU then both fit (they differ by 3e-4 at most, less
// than float16 resolves); the nearer is taken and --explain says by how much.
double activationTolerance(const ElementwiseChain &chain) { return 8.0 * chainRounding(chain); }

std::optional<ActivationFit> functionByValues(const ElementwiseChain &chain) {
  // -30 to 30, densest near 0 where the functions differ most.
  std::vector<double> points(kActivationPoints);
  for (int64_t k = 0; k < kActivationPoints; ++k) {
    const double u = -1.0 + 2.0 * static_cast<double>(k) / (kActivationPoints - 1);
    points[k] = static_cast<float>(30.0 * u * u * u);
  }
  std::optional<std::vector<double>> y = evaluateChain(chain, points);
  if (!y)
    return std::nullopt;
  SmallVector<std::pair<double, StringRef>> offs;
  for (StringRef function : {"relu", "gelu", "gelu_tanh", "silu", "relu2"}) {
    double off = 0.0;
    for (int64_t k = 0; k < kActivationPoints; ++k) {
      const double want = reference(function, points[k]);
      const double d = std::fabs((*y)[k] - want) / std::max(1.0, std::fabs(want));
      off = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(off, d);
    }
    offs.push_back({off, function});
  }
  llvm::stable_sort(offs, [](auto &a, auto &b) { return a.first < b.first; });
  if (!(offs[0].first <= activationTolerance(chain)))
    return std::nullopt;
  return ActivationFit{offs[0].second, offs[0].first, offs[1].second, offs[1].first};
}

// For --explain: the fit, and why not the next nearest function.
std::string describedFit(const ElementwiseChain &chain, const ActivationFit &fit) {
  OnnxNodeOp first = chain.nodes.front(), last = chain.nodes.back();
  return fittedNodes(chain.nodes.size(), first.getNodeName(), last.getNodeName()) + " " +
         fit.function.str() + " (within " + printed(fit.off, 2) + " of a tolerance of " +
         printed(activationTolerance(chain), 2) + " at " +
         std::to_string(kActivationPoints) + " points from -30 to 30; the next nearest, " +
         fit.nextNearest.str() + ", is " +
         printed(fit.nextOff, 2) + " away)";
}

// Written out: the elementwise computations of linears' results of at least `minNodes` nodes,
// each fitted by its values.
void raiseByValues(func::FuncOp func, OpBuilder &builder, size_t minNodes) {
  SmallVector<LinearOp> linears;
  func.walk([&](LinearOp linear) { linears.push_back(linear); });
  for (LinearOp linear : linears) {
    Value x = linear.getResult();
    // Computations may share nodes: one raised may erase nodes another lists.
    DenseSet<Operation *> erased;
    for (const ElementwiseChain &chain : elementwiseComputations(x)) {
      const SmallVector<OnnxNodeOp> &nodes = chain.nodes;
      Value result = chain.result;
      if (nodes.size() < minNodes ||
          llvm::any_of(nodes, [&](OnnxNodeOp n) { return erased.contains(n); }))
        continue;
      std::optional<ActivationFit> fit = functionByValues(chain);
      if (!fit)
        continue;
      builder.setInsertionPointAfter(result.getDefiningOp());
      auto activation = builder.create<ActivationOp>(result.getLoc(), x.getType(), x,
                                                     builder.getStringAttr(fit->function));
      activation->setAttr(planning::kFit, builder.getStringAttr(describedFit(chain, *fit)));
      result.replaceAllUsesWith(activation.getResult());
      for (OnnxNodeOp node : llvm::reverse(nodes))
        if (node->use_empty()) {
          erased.insert(node);
          node->erase();
        }
    }
  }
}

struct RaiseActivationPass : public hetc::impl::RaiseActivationBase<RaiseActivationPass> {
  void runOnOperation() override {
    OpBuilder builder(&getContext());
    // Computations of several nodes first: a Relu squared (Pow(Relu(x), 2)) is one function of
    // two nodes, which raising the Relu alone would hide.
    raiseByValues(getOperation(), builder, /*minNodes=*/2);
    SmallVector<OnnxNodeOp> nodes;
    getOperation().walk([&](OnnxNodeOp node) {
      if (!functionOf(node).empty() && node->getNumResults() == 1 && node->getNumOperands() >= 1)
        nodes.push_back(node);
    });
    for (OnnxNodeOp node : nodes) {
      Value x = skipNoOps(node->getOperand(0));
      std::optional<int64_t> features = featureSize(x.getType());
      if (!x.getDefiningOp<LlmOp>() || !features)
        continue;
      // FastGelu's bias: added before the activation, which is what a linear's bias is.
      if (node->getNumOperands() > 1 && !isa<NoneType>(node->getOperand(1).getType())) {
        // The linear itself, read by nothing else (no no-op between: it may have readers).
        auto linear = x.getDefiningOp<LinearOp>();
        Value bias = skipFloatCasts(node->getOperand(1));
        auto biasType = dyn_cast<RankedTensorType>(bias.getType());
        if (!linear || linear.getBias() || node->getOperand(0) != x || !x.hasOneUse() ||
            !biasType ||
            biasType.getRank() != 1 || biasType.getDimSize(0) != *features ||
            !(bias.getDefiningOp<WeightOp>() || bias.getDefiningOp<ConstantOp>())) {
          node.emitError() << "node " << describe(node)
                           << " adds a bias that hetc cannot give to the linear before it";
          return signalPassFailure();
        }
        // A bias defined after the linear (a Constant node between) moves before it: it has no
        // operands.
        if (Operation *def = bias.getDefiningOp(); def->getBlock() == linear->getBlock() &&
                                                   linear->isBeforeInBlock(def))
          def->moveBefore(linear);
        linear.getBiasMutable().assign(bias);
      }
      builder.setInsertionPoint(node);
      Type type = featureSize(node->getResult(0).getType()) == features
                      ? node->getResult(0).getType()
                      : withFeatureSize(x.getType(), *features);
      auto activation = builder.create<ActivationOp>(node->getLoc(), type, x,
                                                     builder.getStringAttr(functionOf(node)));
      node->getResult(0).replaceAllUsesWith(activation.getResult());
      node->erase();
    }
    // Then the rest written out, a single node too (a ReLU as Max(x, 0)).
    raiseByValues(getOperation(), builder, /*minNodes=*/1);
    syncResultTypes(getOperation());
  }
};

} // namespace
