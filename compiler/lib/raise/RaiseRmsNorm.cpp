// RMSNorm as exported from `x * rsqrt(mean(x^2, -1, keepdim) + eps) * gamma`:
//   gamma * (xf * inv)   with xf = x (possibly upcast to float32),
//   inv  = Reciprocal(Sqrt(v)) | Div(1, Sqrt(v)) | Pow(v, -0.5),  or  xf / Sqrt(v),
//   v    = ReduceMean(Pow(xf, 2) | Mul(xf, xf), axes = [last], keepdims) + eps.
// Every Mul and Add is matched in either operand order; float casts around the core are allowed.
// gamma is a 1-D weight or constant, or computed from one and scalar constants alone (Gemma's
// x * (1 + w), w stored zero-centred): that computation is evaluated on the stored weight and
// the norm reads the result, a constant.
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/WeightStore.h"
#include "import/OnnxGraph.h"
#include "raise/ScalarFunctions.h"

#include "mlir/IR/Builders.h"

namespace hetc {
#define GEN_PASS_DEF_RAISERMSNORM
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

// The squared input of `mean(x^2)`: returns x, or null.
Value matchSquare(Value v) {
  if (OnnxNodeOp pow = producer(v, "Pow")) {
    std::optional<double> exponent = scalarValue(pow->getOperand(1));
    if (exponent && *exponent == 2.0)
      return skipFloatCasts(pow->getOperand(0));
    return {};
  }
  if (OnnxNodeOp mul = producer(v, "Mul")) {
    Value a = skipFloatCasts(mul->getOperand(0)), b = skipFloatCasts(mul->getOperand(1));
    if (a == b)
      return a;
  }
  return {};
}

struct Variance {
  Value x;
  float epsilon;
};

// `mean(x^2, last axis, keepdims) + eps`.
std::optional<Variance> matchVarianceEps(Value v) {
  OnnxNodeOp add = producer(v, "Add");
  if (!add)
    return std::nullopt;
  std::optional<Variance> result;
  matchCommutative(add, [&](Value meanValue, Value epsValue) {
    std::optional<double> eps = scalarValue(epsValue);
    OnnxNodeOp mean = producer(meanValue, "ReduceMean");
    if (!eps || !(*eps > 0.0) || !mean || intAttr(mean, "keepdims").value_or(1) != 1)
      return false;
    auto axes = axesOf(mean);
    Value x = matchSquare(mean->getOperand(0));
    if (!axes || axes->size() != 1 || !x)
      return false;
    int64_t axis = axes->front();
    if (axis != -1) {
      auto type = dyn_cast<RankedTensorType>(mean->getOperand(0).getType());
      if (!type || axis != type.getRank() - 1)
        return false;
    }
    result = Variance{x, static_cast<float>(*eps)};
    return true;
  });
  return result;
}

// `x / sqrt(v)` in one of its spellings, given the two factors of the Mul (or the Div operands).
std::optional<Variance> matchInverseRms(Value inv) {
  inv = skipFloatCasts(inv);
  if (OnnxNodeOp recip = producer(inv, "Reciprocal")) {
    if (OnnxNodeOp sqrt = producer(recip->getOperand(0), "Sqrt"))
      return matchVarianceEps(sqrt->getOperand(0));
    return std::nullopt;
  }
  if (OnnxNodeOp div = producer(inv, "Div")) {
    std::optional<double> one = scalarValue(div->getOperand(0));
    OnnxNodeOp sqrt = producer(div->getOperand(1), "Sqrt");
    if (one && *one == 1.0 && sqrt)
      return matchVarianceEps(sqrt->getOperand(0));
    return std::nullopt;
  }
  if (OnnxNodeOp pow = producer(inv, "Pow")) {
    std::optional<double> exponent = scalarValue(pow->getOperand(1));
    if (exponent && *exponent == -0.5)
      return matchVarianceEps(pow->getOperand(0));
  }
  return std::nullopt;
}

// The normalised value `x * rsqrt(mean(x^2) + eps)`; returns x and eps.
std::optional<Variance> matchNormalized(Value v) {
  v = skipFloatCasts(v);
  if (OnnxNodeOp div = producer(v, "Div")) {
    OnnxNodeOp sqrt = producer(div->getOperand(1), "Sqrt");
    if (!sqrt)
      return std::nullopt;
    std::optional<Variance> var = matchVarianceEps(sqrt->getOperand(0));
    if (var && skipFloatCasts(div->getOperand(0)) == var->x)
      return var;
    return std::nullopt;
  }
  OnnxNodeOp mul = producer(v, "Mul");
  if (!mul)
    return std::nullopt;
  std::optional<Variance> result;
  matchCommutative(mul, [&](Value x, Value inv) {
    std::optional<Variance> var = matchInverseRms(inv);
    if (!var || skipFloatCasts(x) != var->x)
      return false;
    result = var;
    return true;
  });
  return result;
}

bool isGammaSource(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getRank() == 1 && type.hasStaticShape() &&
         (v.getDefiningOp<ConstantOp>() ||
          (v.getDefiningOp<WeightOp>() && !v.getDefiningOp<WeightOp>().getTransposed() &&
           !v.getDefiningOp<WeightOp>().getColumns()));
}

struct RaiseRmsNormPass : public hetc::impl::RaiseRmsNormBase<RaiseRmsNormPass> {
  RaiseRmsNormPass() = default;
  explicit RaiseRmsNormPass(const compiler::WeightStore *weights) : weights_(weights) {}

  // gamma computed from a 1-D weight or constant and scalar constants, evaluated: a constant named
  // after its source; null when it is not so computed (or there is no store to read).
  Value evaluatedGamma(Value gamma, OpBuilder &builder) {
    std::optional<ElementwiseChain> chain = chainBackTo(gamma, isGammaSource);
    if (!chain || chain->nodes.empty())
      return {};
    std::vector<double> source;
    std::string name;
    if (auto weight = chain->input.getDefiningOp<WeightOp>()) {
      const compiler::StoredWeight *stored = weights_ ? weights_->find(weight.getName().str())
                                                      : nullptr;
      if (!stored)
        return {};
      std::vector<float> values = stored->toFloats();
      source.assign(values.begin(), values.end());
      name = weight.getName().str();
    } else {
      std::optional<SmallVector<double>> values =
          floatValues(constantValue(chain->input));
      if (!values)
        return {};
      source.assign(values->begin(), values->end());
      name = "gamma";
    }
    std::optional<std::vector<double>> y = evaluateChain(*chain, source);
    if (!y || y->size() != source.size())
      return {};
    SmallVector<float> values(y->begin(), y->end());
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      Float32Type::get(&getContext()));
    std::string how;
    for (OnnxNodeOp node : chain->nodes)
      how += (how.empty() ? "" : ", ") + node.getOpType().str();
    return builder.create<ConstantOp>(
        NameLoc::get(builder.getStringAttr(name + " (computed: " + how + ")")), type,
        DenseElementsAttr::get(type, ArrayRef<float>(values)));
  }

  void runOnOperation() override {
    SmallVector<OnnxNodeOp> muls;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.getOpType() == "Mul" && op->getNumOperands() == 2)
        muls.push_back(op);
    });
    OpBuilder builder(&getContext());
    for (OnnxNodeOp mul : muls) {
      Value gamma;
      std::optional<Variance> var;
      matchCommutative(mul, [&](Value g, Value normalized) {
        Value gv = skipNoOps(g);
        auto type = dyn_cast<RankedTensorType>(gv.getType());
        if (!type || type.getRank() != 1 || !type.hasStaticShape() ||
            !(isGammaSource(gv) || chainBackTo(gv, isGammaSource)))
          return false;
        var = matchNormalized(normalized);
        if (!var)
          return false;
        gamma = gv;
        return true;
      });
      if (!var)
        continue;
      if (!isGammaSource(gamma)) {
        builder.setInsertionPoint(mul);
        gamma = evaluatedGamma(gamma, builder);
        if (!gamma)
          continue;
      }
      int64_t hidden = cast<RankedTensorType>(gamma.getType()).getDimSize(0);
      std::optional<int64_t> xFeatures = featureSize(var->x.getType());
      if (xFeatures && *xFeatures != hidden)
        continue;
      Type resultType = mul->getResult(0).getType();
      if (std::optional<int64_t> f = featureSize(resultType); f && *f != hidden)
        continue;
      if (!featureSize(resultType))
        resultType = withFeatureSize(
            isa<RankedTensorType>(resultType) ? resultType : var->x.getType(), hidden);
      builder.setInsertionPoint(mul);
      auto norm = builder.create<RmsNormOp>(mul->getLoc(), resultType, var->x, gamma,
                                            builder.getF32FloatAttr(var->epsilon));
      mul->getResult(0).replaceAllUsesWith(norm.getResult());
      mul->erase();
    }
    syncResultTypes(getOperation());
  }

  const compiler::WeightStore *weights_ = nullptr;
};

} // namespace

std::unique_ptr<Pass> hetc::createRaiseRmsNorm(const compiler::WeightStore *weights) {
  return std::make_unique<RaiseRmsNormPass>(weights);
}
