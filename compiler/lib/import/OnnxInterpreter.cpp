#include "OnnxInterpreter.h"

#include "InterpreterSupport.h"
#include "OnnxGraph.h"

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <climits>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>

using namespace mlir;

namespace hetc {

namespace {
thread_local int64_t budget = kMaxEvaluatedElements;
} // namespace

int64_t evaluationBudget() { return budget; }
ScopedEvaluationBudget::ScopedEvaluationBudget(int64_t elements) : saved_(budget) {
  budget = elements;
}
ScopedEvaluationBudget::~ScopedEvaluationBudget() { budget = saved_; }
namespace interpreter {

SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

int64_t broadcastIndex(int64_t k, ArrayRef<int64_t> to, ArrayRef<int64_t> from) {
  SmallVector<int64_t> toStrides = stridesOf(to), fromStrides = stridesOf(from);
  int64_t offset = static_cast<int64_t>(to.size()) - static_cast<int64_t>(from.size());
  int64_t index = 0;
  for (size_t d = 0; d < to.size(); ++d) {
    int64_t coord = (k / toStrides[d]) % std::max<int64_t>(to[d], 1);
    int64_t fd = static_cast<int64_t>(d) - offset;
    if (fd >= 0 && from[fd] != 1)
      index += coord * fromStrides[fd];
  }
  return index;
}

std::optional<SmallVector<int64_t>> broadcastShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  int64_t elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    int64_t da = d + a.size() >= rank ? a[d + a.size() - rank] : 1;
    int64_t db = d + b.size() >= rank ? b[d + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[d] = da == 1 ? db : da;
    // A broadcast past the budget is not evaluated (nor allocated): [n, 1] + [1, n] of two small
    // constants would be n^2 elements.
    if (out[d] != 0 && elements > evaluationBudget() / out[d])
      return std::nullopt;
    elements *= out[d];
  }
  return out;
}

Type castTarget(MLIRContext *ctx, int64_t to) {
  switch (to) {
  case 1:
    return Float32Type::get(ctx);
  case 6:
    return IntegerType::get(ctx, 32);
  case 7:
    return IntegerType::get(ctx, 64);
  case 9:
    return IntegerType::get(ctx, 1);
  case 10:
    return Float16Type::get(ctx);
  case 11:
    return Float64Type::get(ctx);
  case 16:
    return BFloat16Type::get(ctx);
  default:
    return {};
  }
}

Tensor castTo(const Tensor &x, Type target) {
  Tensor out;
  out.shape = x.shape;
  out.elem = target;
  out.resize(x.size());
  const bool toFloat32 = target.isF32();
  for (int64_t k = 0; k < x.size(); ++k) {
    if (out.isFloat())
      // An integer to float32 rounds once, as ONNX Runtime's cast does (not through double).
      out.floats[k] = !x.isFloat() && toFloat32
                          ? static_cast<double>(static_cast<float>(x.i(k)))
                          : x.f(k);
    else if (x.isFloat() && target.isInteger(1))
      out.setInt(k, x.f(k) != 0.0); // any non-zero (or NaN) is true
    else if (x.isFloat())
      out.setInt(k, static_cast<int64_t>(std::trunc(x.f(k))));
    else
      out.setInt(k, x.i(k));
  }
  return out;
}

void scatterInto(Tensor &out, int64_t at, const Tensor &updates, int64_t from,
                 StringRef reduction) {
  if (reduction == "none") {
    out.copy(at, updates, from);
  } else if (out.isFloat()) {
    // max and min keep the update unless the data is strictly beyond it, as ONNX Runtime's
    // kernels do: a NaN update replaces, a NaN datum is replaced.
    const double x = out.f(at), u = updates.f(from);
    out.set(at, reduction == "add"   ? x + u
                : reduction == "mul" ? x * u
                : reduction == "max" ? (u < x ? x : u)
                                     : (x < u ? x : u));
  } else {
    const int64_t x = out.i(at), u = updates.i(from);
    out.setInt(at, reduction == "add"   ? x + u
                   : reduction == "mul" ? x * u
                   : reduction == "max" ? std::max(x, u)
                                        : std::min(x, u));
  }
}

} // namespace interpreter

using namespace interpreter;

namespace {

std::optional<Tensor> tensorFromAttrImpl(DenseElementsAttr attr) {
  auto type = dyn_cast<RankedTensorType>(attr.getType());
  if (!type)
    return std::nullopt;
  Tensor t;
  t.shape.assign(type.getShape().begin(), type.getShape().end());
  t.elem = type.getElementType();
  if (t.isFloat()) {
    auto values = floatValues(attr);
    if (!values)
      return std::nullopt;
    t.floats.assign(values->begin(), values->end());
    return t;
  }
  auto intType = dyn_cast<IntegerType>(t.elem);
  if (!intType)
    return std::nullopt;
  for (const APInt &v : attr.getValues<APInt>())
    t.ints.push_back(intType.isUnsigned() || intType.getWidth() == 1
                         ? static_cast<int64_t>(v.getZExtValue())
                         : v.getSExtValue());
  return t;
}

DenseElementsAttr tensorToAttrImpl(const Tensor &t) {
  auto type = RankedTensorType::get(t.shape, t.elem);
  if (auto floatType = dyn_cast<FloatType>(t.elem)) {
    SmallVector<APFloat> values;
    for (double v : t.floats) {
      APFloat f(v);
      bool lost = false;
      f.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(f);
    }
    return DenseElementsAttr::get(type, values);
  }
  unsigned width = t.elem.getIntOrFloatBitWidth();
  SmallVector<APInt> values;
  for (int64_t v : t.ints)
    values.push_back(APInt(width, static_cast<uint64_t>(v), /*isSigned=*/width > 1));
  return DenseElementsAttr::get(type, values);
}

class NodeInterpreter {
public:
  NodeInterpreter(OnnxNodeOp op, ArrayRef<Tensor> inputs)
      : op_(op), inputs_(inputs.begin(), inputs.end()) {}

  std::optional<SmallVector<Tensor>> run() {
    StringRef type = op_.getOpType();
    if (isNnOp(type))
      return withinBudget(evaluateNn(op_, inputs_));
    if (isAttentionOp(type))
      return withinBudget(evaluateAttention(op_, inputs_));
    if (op_->getNumResults() != 1)
      return std::nullopt;
    // Only Slice (axes, steps), Squeeze and Unsqueeze (axes), Trilu (k) and Pad (the constant,
    // the axes) have optional inputs worth evaluating.
    for (auto [i, t] : llvm::enumerate(inputs_))
      if (!t.elem && !(type == "Slice" && i >= 3) && !(type == "Pad" && i >= 2) &&
          !((type == "Squeeze" || type == "Unsqueeze" || type == "Trilu") && i == 1))
        return std::nullopt;
    std::optional<Tensor> out = evaluate(type);
    if (!out)
      return std::nullopt;
    return withinBudget(SmallVector<Tensor>{std::move(*out)});
  }

private:
  bool present(size_t i) const { return i < inputs_.size() && inputs_[i].elem; }

  static std::optional<SmallVector<Tensor>> withinBudget(std::optional<SmallVector<Tensor>> out) {
    if (out && llvm::any_of(*out, [](const Tensor &t) { return t.size() > evaluationBudget(); }))
      return std::nullopt;
    return out;
  }

  std::optional<Tensor> evaluate(StringRef type) {
    if (inputs_.empty() || !inputs_[0].elem)
      return std::nullopt;
    if (type == "Identity")
      return inputs_[0];
    if (type == "Shape" || type == "Size")
      return shapeOf(type);
    if (type == "Cast")
      return cast();
    if (type == "Neg" || type == "Sqrt" || type == "Reciprocal" || type == "Cos" || type == "Sin" ||
        type == "Exp" || type == "Log" || type == "Abs" || type == "Floor" || type == "Ceil" ||
        type == "Not" || type == "Erf" || type == "Tanh" || type == "Sigmoid" || type == "Relu")
      return unary(type);
    if ((type == "Max" || type == "Min") && inputs_.size() != 2)
      return variadic(type);
    if (type == "Add" || type == "Sub" || type == "Mul" || type == "Div" || type == "Pow" ||
        type == "Max" || type == "Min" || type == "Equal" || type == "Less" || type == "Greater" ||
        type == "LessOrEqual" || type == "GreaterOrEqual" || type == "And" || type == "Or" ||
        type == "Mod")
      return binary(type);
    if (type == "Unsqueeze")
      return unsqueeze();
    if (type == "Squeeze")
      return squeeze();
    if (type == "Reshape")
      return reshape();
    if (type == "Concat")
      return concat();
    if (type == "Gather")
      return gather();
    if (type == "Slice")
      return slice();
    if (type == "Range")
      return range();
    if (type == "ConstantOfShape")
      return constantOfShape();
    if (type == "Expand")
      return expand();
    if (type == "Tile")
      return tile();
    if (type == "Pad")
      return pad();
    if (type == "ScatterND")
      return scatterNd();
    if (type == "Einsum")
      return einsum();
    if (type == "Where")
      return where();
    if (type == "Transpose")
      return transpose();
    if (type == "Trilu")
      return trilu();
    if (type == "CumSum")
      return cumSum();
    if (type == "MatMul")
      return matMul();
    return std::nullopt;
  }

  // Shape (with opset 15's start and end) or Size of a concrete tensor.
  std::optional<Tensor> shapeOf(StringRef type) {
    const Tensor &x = inputs_[0];
    Tensor out;
    out.elem = IntegerType::get(op_->getContext(), 64);
    if (type == "Size") {
      out.ints = {x.size()};
      return out;
    }
    int64_t rank = static_cast<int64_t>(x.shape.size());
    int64_t start =
        std::clamp<int64_t>(normalizeAxis(intAttr(op_, "start").value_or(0), rank), 0, rank);
    int64_t end =
        std::clamp<int64_t>(normalizeAxis(intAttr(op_, "end").value_or(rank), rank), 0, rank);
    for (int64_t d = start; d < end; ++d)
      out.ints.push_back(x.shape[d]);
    out.shape = {static_cast<int64_t>(out.ints.size())};
    return out;
  }

  std::optional<Tensor> cast() {
    auto to = intAttr(op_, "to");
    Type target = to ? castTarget(op_->getContext(), *to) : Type();
    if (!target)
      return std::nullopt;
    return castTo(inputs_[0], target);
  }

  std::optional<Tensor> unary(StringRef type) {
    Tensor out = inputs_[0];
    if (!out.isFloat() && type != "Neg" && type != "Abs" && type != "Not" && type != "Relu")
      return std::nullopt;
    for (int64_t k = 0; k < out.size(); ++k) {
      if (!out.isFloat()) {
        int64_t v = out.ints[k];
        out.ints[k] = type == "Neg"    ? -v
                      : type == "Abs"  ? std::abs(v)
                      : type == "Relu" ? std::max<int64_t>(v, 0)
                                       : (v == 0);
        continue;
      }
      double v = out.floats[k];
      double r = type == "Neg"          ? -v
                 : type == "Sqrt"       ? std::sqrt(v)
                 : type == "Reciprocal" ? 1.0 / v
                 : type == "Cos"        ? std::cos(v)
                 : type == "Sin"        ? std::sin(v)
                 : type == "Exp"        ? std::exp(v)
                 : type == "Log"        ? std::log(v)
                 : type == "Abs"        ? std::fabs(v)
                 : type == "Floor"      ? std::floor(v)
                 : type == "Erf"        ? std::erf(v)
                 : type == "Tanh"       ? std::tanh(v)
                 : type == "Sigmoid"    ? 1.0 / (1.0 + std::exp(-v))
                 : type == "Relu"       ? std::max(v, 0.0)
                                        : std::ceil(v);
      out.floats[k] = r;
    }
    return out;
  }

  // Max and Min of one or more inputs broadcast together: the binary op folded left to right (of
  // one input, that input).
  std::optional<Tensor> variadic(StringRef type) {
    const SmallVector<Tensor> all = inputs_;
    if (llvm::any_of(all, [&](const Tensor &t) { return t.elem != all[0].elem; }))
      return std::nullopt;
    Tensor acc = all[0];
    for (size_t i = 1; i < all.size(); ++i) {
      inputs_ = {acc, all[i]};
      std::optional<Tensor> next = binary(type);
      if (!next) {
        inputs_ = all;
        return std::nullopt;
      }
      acc = std::move(*next);
    }
    inputs_ = all;
    return acc;
  }

  std::optional<Tensor> binary(StringRef type) {
    if (inputs_.size() != 2)
      return std::nullopt;
    const Tensor &a = inputs_[0], &b = inputs_[1];
    auto shape = broadcastShape(a.shape, b.shape);
    if (!shape)
      return std::nullopt;
    bool compare = type == "Equal" || type == "Less" || type == "Greater" ||
                   type == "LessOrEqual" || type == "GreaterOrEqual";
    Tensor out;
    out.shape = *shape;
    out.elem = compare ? IntegerType::get(op_->getContext(), 1) : a.elem;
    if (type == "Pow")
      out.elem = a.elem;
    out.resize(out.size());
    bool floating = a.isFloat() || b.isFloat();
    // Integer Mod: the sign of the divisor (Python's %), or with fmod = 1 of the dividend (C's).
    const bool fmod = intAttr(op_, "fmod").value_or(0) != 0;
    for (int64_t k = 0; k < out.size(); ++k) {
      int64_t ia = broadcastIndex(k, out.shape, a.shape),
              ib = broadcastIndex(k, out.shape, b.shape);
      if (floating) {
        double x = a.f(ia), y = b.f(ib);
        double r = type == "Add"              ? x + y
                   : type == "Sub"            ? x - y
                   : type == "Mul"            ? x * y
                   : type == "Div"            ? x / y
                   : type == "Pow"            ? std::pow(x, y)
                   : type == "Max"            ? (std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y))
                   : type == "Min"            ? (std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y))
                   : type == "Equal"          ? double(x == y)
                   : type == "Less"           ? double(x < y)
                   : type == "Greater"        ? double(x > y)
                   : type == "LessOrEqual"    ? double(x <= y)
                   : type == "GreaterOrEqual" ? double(x >= y)
                   : type == "Mod"            ? std::fmod(x, y)
                                              : std::nan("");
        if (std::isnan(r) && (type == "And" || type == "Or"))
          return std::nullopt;
        out.set(k, r);
      } else {
        int64_t x = a.i(ia), y = b.i(ib);
        if ((type == "Div" || type == "Mod") && (y == 0 || (y == -1 && x == INT64_MIN)))
          return std::nullopt;
        int64_t r = type == "Add"              ? x + y
                    : type == "Sub"            ? x - y
                    : type == "Mul"            ? x * y
                    : type == "Div"            ? x / y
                    : type == "Mod"            ? (fmod ? x % y : ((x % y) + y) % y)
                    : type == "Pow"            ? static_cast<int64_t>(std::pow(x, y))
                    : type == "Max"            ? std::max(x, y)
                    : type == "Min"            ? std::min(x, y)
                    : type == "Equal"          ? x == y
                    : type == "Less"           ? x < y
                    : type == "Greater"        ? x > y
                    : type == "LessOrEqual"    ? x <= y
                    : type == "GreaterOrEqual" ? x >= y
                    : type == "And"            ? (x && y)
                                               : (x || y);
        out.setInt(k, r);
      }
    }
    return out;
  }

  std::optional<SmallVector<int64_t>> axesInput(size_t index) {
    if (auto attr = intsAttr(op_, "axes"))
      return attr;
    if (present(index))
      return SmallVector<int64_t>(inputs_[index].ints.begin(), inputs_[index].ints.end());
    return std::nullopt;
  }

  std::optional<Tensor> unsqueeze() {
    auto axes = axesInput(1);
    if (!axes)
      return std::nullopt;
    Tensor out = inputs_[0];
    int64_t rank = static_cast<int64_t>(out.shape.size() + axes->size());
    SmallVector<int64_t> sorted;
    for (int64_t a : *axes)
      sorted.push_back(normalizeAxis(a, rank));
    llvm::sort(sorted);
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return std::nullopt; // an axis named twice
    for (int64_t a : sorted) {
      if (a < 0 || a > static_cast<int64_t>(out.shape.size()))
        return std::nullopt;
      out.shape.insert(out.shape.begin() + a, 1);
    }
    return out;
  }

  std::optional<Tensor> squeeze() {
    Tensor out = inputs_[0];
    auto axes = axesInput(1);
    // An empty axes tensor squeezes every dimension of 1, as no axes do (ONNX Runtime's reading).
    if (axes && axes->empty())
      axes.reset();
    int64_t rank = static_cast<int64_t>(out.shape.size());
    SmallVector<int64_t> keep;
    for (int64_t d = 0; d < rank; ++d) {
      bool drop = false;
      if (axes) {
        for (int64_t a : *axes)
          drop |= normalizeAxis(a, rank) == d;
        if (drop && out.shape[d] != 1)
          return std::nullopt;
      } else {
        drop = out.shape[d] == 1;
      }
      if (!drop)
        keep.push_back(out.shape[d]);
    }
    out.shape = keep;
    return out;
  }

  std::optional<Tensor> reshape() {
    if (!present(1))
      return std::nullopt;
    Tensor out = inputs_[0];
    bool allowZero = intAttr(op_, "allowzero").value_or(0) != 0;
    SmallVector<int64_t> shape;
    int64_t inferred = -1, known = 1;
    for (auto [d, v] : llvm::enumerate(inputs_[1].ints)) {
      int64_t dim = v;
      if (dim == 0 && !allowZero) {
        if (d >= out.shape.size())
          return std::nullopt;
        dim = inputs_[0].shape[d];
      }
      if (dim < -1)
        return std::nullopt;
      if (dim == -1) {
        if (inferred >= 0)
          return std::nullopt;
        inferred = static_cast<int64_t>(d);
      } else {
        known *= dim;
      }
      shape.push_back(dim);
    }
    if (inferred >= 0) {
      if (known == 0 || out.size() % known != 0)
        return std::nullopt;
      shape[inferred] = out.size() / known;
    } else if (known != out.size()) {
      return std::nullopt;
    }
    out.shape = shape;
    return out;
  }

  std::optional<Tensor> concat() {
    auto axisAttr = intAttr(op_, "axis");
    if (!axisAttr || inputs_.empty())
      return std::nullopt;
    int64_t rank = static_cast<int64_t>(inputs_[0].shape.size());
    int64_t axis = normalizeAxis(*axisAttr, rank);
    if (axis < 0 || axis >= rank)
      return std::nullopt;
    Tensor out;
    out.shape = inputs_[0].shape;
    out.elem = inputs_[0].elem;
    out.shape[axis] = 0;
    for (const Tensor &t : inputs_) {
      if (static_cast<int64_t>(t.shape.size()) != rank || t.elem != out.elem)
        return std::nullopt;
      // Every other dimension the same: the chunks below are then each input's share of a row.
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && t.shape[d] != out.shape[d])
          return std::nullopt;
      out.shape[axis] += t.shape[axis];
    }
    out.resize(out.size());
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= out.shape[d];
    int64_t k = 0;
    for (int64_t o = 0; o < outer; ++o) {
      for (const Tensor &t : inputs_) {
        int64_t chunk = t.size() / std::max<int64_t>(outer, 1);
        for (int64_t c = 0; c < chunk; ++c)
          out.copy(k++, t, o * chunk + c);
      }
    }
    return out;
  }

  std::optional<Tensor> gather() {
    if (inputs_.size() != 2)
      return std::nullopt;
    const Tensor &data = inputs_[0];
    const Tensor &indices = inputs_[1];
    int64_t rank = static_cast<int64_t>(data.shape.size());
    int64_t axis = normalizeAxis(intAttr(op_, "axis").value_or(0), rank);
    if (axis < 0 || axis >= rank || indices.isFloat())
      return std::nullopt;
    Tensor out;
    out.elem = data.elem;
    out.shape.assign(data.shape.begin(), data.shape.begin() + axis);
    out.shape.append(indices.shape.begin(), indices.shape.end());
    out.shape.append(data.shape.begin() + axis + 1, data.shape.end());
    out.resize(out.size());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= data.shape[d];
    for (int64_t d = axis + 1; d < rank; ++d)
      inner *= data.shape[d];
    int64_t n = data.shape[axis];
    int64_t k = 0;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < indices.size(); ++j) {
        int64_t idx = indices.ints[j] < 0 ? indices.ints[j] + n : indices.ints[j];
        if (idx < 0 || idx >= n)
          return std::nullopt;
        for (int64_t c = 0; c < inner; ++c)
          out.copy(k++, data, (o * n + idx) * inner + c);
      }
    }
    return out;
  }

  std::optional<Tensor> slice() {
    const Tensor &data = inputs_[0];
    if (!present(1) || !present(2))
      return std::nullopt;
    int64_t rank = static_cast<int64_t>(data.shape.size());
    const auto &starts = inputs_[1].ints, &ends = inputs_[2].ints;
    if (ends.size() != starts.size() || (present(3) && inputs_[3].ints.size() != starts.size()) ||
        (present(4) && inputs_[4].ints.size() != starts.size()))
      return std::nullopt;
    SmallVector<int64_t> axes, steps;
    for (size_t j = 0; j < starts.size(); ++j) {
      axes.push_back(present(3) ? normalizeAxis(inputs_[3].ints[j], rank)
                                : static_cast<int64_t>(j));
      steps.push_back(present(4) ? inputs_[4].ints[j] : 1);
    }
    SmallVector<int64_t> begin(rank, 0), step(rank, 1), count(data.shape);
    for (size_t j = 0; j < axes.size(); ++j) {
      const int64_t a = axes[j], s = steps[j];
      // An axis out of range or named twice is an invalid node, as ONNX Runtime says.
      if (a < 0 || a >= rank || s == 0 || llvm::count(axes, a) > 1)
        return std::nullopt;
      const int64_t n = data.shape[a];
      int64_t b = starts[j] < 0 ? starts[j] + n : starts[j];
      int64_t e = ends[j] < 0 ? ends[j] + n : ends[j];
      if (s > 0) {
        b = std::clamp<int64_t>(b, 0, n);
        e = std::clamp<int64_t>(e, 0, n);
        count[a] = e > b ? (e - b + s - 1) / s : 0;
      } else if (n == 0) {
        count[a] = 0;
      } else {
        b = std::clamp<int64_t>(b, 0, n - 1);
        e = std::clamp<int64_t>(e, -1, n - 1);
        count[a] = b > e ? (b - e - s - 1) / -s : 0;
      }
      begin[a] = b;
      step[a] = s;
    }
    Tensor out;
    out.elem = data.elem;
    out.shape = count;
    out.resize(out.size());
    SmallVector<int64_t> outStrides = stridesOf(count), inStrides = stridesOf(data.shape);
    for (int64_t k = 0; k < out.size(); ++k) {
      int64_t from = 0;
      for (int64_t d = 0; d < rank; ++d)
        from += (begin[d] + ((k / outStrides[d]) % count[d]) * step[d]) * inStrides[d];
      out.copy(k, data, from);
    }
    return out;
  }

  std::optional<Tensor> range() {
    if (inputs_.size() != 3 || inputs_[0].size() != 1 || inputs_[1].size() != 1 ||
        inputs_[2].size() != 1)
      return std::nullopt;
    Tensor out;
    out.elem = inputs_[0].elem;
    double start = inputs_[0].f(0), limit = inputs_[1].f(0), delta = inputs_[2].f(0);
    if (delta == 0)
      return std::nullopt;
    int64_t n = std::max<int64_t>(static_cast<int64_t>(std::ceil((limit - start) / delta)), 0);
    if (!out.isFloat()) { // the count in integers: exact past 2^53
      const int64_t diff = inputs_[1].i(0) - inputs_[0].i(0), step = inputs_[2].i(0);
      n = step > 0 ? (diff > 0 ? (diff + step - 1) / step : 0)
                   : (diff < 0 ? (diff + step + 1) / step : 0);
    }
    if (n > evaluationBudget())
      return std::nullopt;
    out.shape = {n};
    out.resize(n);
    for (int64_t k = 0; k < n; ++k) {
      if (out.isFloat())
        out.set(k, start + k * delta);
      else // integers exactly: start + k * delta in int64
        out.setInt(k, inputs_[0].i(0) + k * inputs_[2].i(0));
    }
    return out;
  }

  std::optional<Tensor> constantOfShape() {
    Tensor out;
    out.shape.assign(inputs_[0].ints.begin(), inputs_[0].ints.end());
    for (int64_t d : out.shape)
      if (d < 0)
        return std::nullopt;
    if (out.size() > evaluationBudget())
      return std::nullopt;
    std::optional<Tensor> fill;
    if (op_.getOnnxAttrs())
      if (auto value = op_.getOnnxAttrs()->getAs<DenseElementsAttr>("value"))
        fill = tensorFromAttrImpl(value);
    if (fill && fill->size() < 1)
      return std::nullopt;
    out.elem = fill ? fill->elem : Type(Float32Type::get(op_->getContext()));
    out.resize(out.size());
    for (int64_t k = 0; k < out.size(); ++k) {
      if (fill)
        out.copy(k, *fill, 0);
    }
    return out;
  }

  std::optional<Tensor> expand() {
    if (inputs_.size() != 2)
      return std::nullopt;
    const Tensor &x = inputs_[0];
    SmallVector<int64_t> target(inputs_[1].ints.begin(), inputs_[1].ints.end());
    auto shape = broadcastShape(x.shape, target);
    if (!shape)
      return std::nullopt;
    Tensor out;
    out.elem = x.elem;
    out.shape = *shape;
    if (out.size() > evaluationBudget())
      return std::nullopt;
    out.resize(out.size());
    for (int64_t k = 0; k < out.size(); ++k)
      out.copy(k, x, broadcastIndex(k, out.shape, x.shape));
    return out;
  }

  // Tile(x, repeats): each dimension repeated, element k of the result reading x at k mod dim.
  std::optional<Tensor> tile() {
    if (inputs_.size() != 2)
      return std::nullopt;
    const Tensor &x = inputs_[0], &repeats = inputs_[1];
    if (repeats.shape.size() != 1 || repeats.size() != static_cast<int64_t>(x.shape.size()))
      return std::nullopt;
    Tensor out;
    out.elem = x.elem;
    for (size_t d = 0; d < x.shape.size(); ++d) {
      if (repeats.i(d) < 0)
        return std::nullopt;
      out.shape.push_back(x.shape[d] * repeats.i(d));
    }
    if (out.size() > evaluationBudget())
      return std::nullopt;
    out.resize(out.size());
    SmallVector<int64_t> outStrides = stridesOf(out.shape), inStrides = stridesOf(x.shape);
    for (int64_t k = 0; k < out.size(); ++k) {
      int64_t from = 0;
      for (size_t d = 0; d < out.shape.size(); ++d)
        from += ((k / outStrides[d]) % out.shape[d] % x.shape[d]) * inStrides[d];
      out.copy(k, x, from);
    }
    return out;
  }

  // Pad(data, pads [, constant_value [, axes]]; mode): pads = [begins..., ends...] over every
  // axis or over the axes given (opset 18). Mode constant fills with the value (0 without it),
  // and there a negative pad crops; edge repeats the border element, reflect mirrors about it
  // (no more than the axis holds beyond it), wrap continues from the other end (opset 19; one
  // wrap at most).
  std::optional<Tensor> pad() {
    if (inputs_.size() < 2 || !inputs_[1].elem || inputs_[1].isFloat() ||
        inputs_[1].shape.size() != 1)
      return std::nullopt;
    const Tensor &x = inputs_[0], &pads = inputs_[1];
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    SmallVector<int64_t> axes;
    if (present(3)) {
      if (inputs_[3].isFloat())
        return std::nullopt;
      for (int64_t k = 0; k < inputs_[3].size(); ++k) {
        int64_t a = normalizeAxis(inputs_[3].i(k), rank);
        if (a < 0 || a >= rank || llvm::is_contained(axes, a))
          return std::nullopt;
        axes.push_back(a);
      }
    } else {
      for (int64_t a = 0; a < rank; ++a)
        axes.push_back(a);
    }
    const int64_t count = static_cast<int64_t>(axes.size());
    if (pads.size() != 2 * count)
      return std::nullopt;
    StringRef mode = stringAttr(op_, "mode", "constant");
    if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap")
      return std::nullopt;
    double fill = 0.0;
    if (present(2)) {
      if (inputs_[2].size() != 1 || inputs_[2].isFloat() != x.isFloat())
        return std::nullopt;
      fill = inputs_[2].f(0);
    }
    SmallVector<int64_t> begin(rank, 0);
    Tensor out;
    out.elem = x.elem;
    out.shape = x.shape;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t a = axes[i], before = pads.i(i), after = pads.i(count + i);
      const int64_t n = x.shape[a];
      // Only constant padding crops; the other modes need elements to copy, reflect at most
      // n - 1 on a side, wrap at most n (ONNX Runtime reads past its buffer beyond that: such a
      // node is left unevaluated rather than given a value the runtime would not compute).
      const int64_t most = mode == "reflect" ? n - 1 : mode == "wrap" ? n : INT64_MAX;
      if (mode != "constant" &&
          (before < 0 || after < 0 || n == 0 || before > most || after > most))
        return std::nullopt;
      begin[a] = before;
      out.shape[a] = n + before + after;
      if (out.shape[a] < 0)
        return std::nullopt;
    }
    if (out.size() > evaluationBudget())
      return std::nullopt;
    out.resize(out.size());
    SmallVector<int64_t> outStrides = stridesOf(out.shape), inStrides = stridesOf(x.shape);
    for (int64_t k = 0; k < out.size(); ++k) {
      int64_t from = 0;
      bool inside = true;
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t n = x.shape[d];
        int64_t c = (k / outStrides[d]) % out.shape[d] - begin[d];
        if (c < 0 || c >= n) {
          if (mode == "constant")
            inside = false;
          else if (mode == "edge")
            c = std::clamp<int64_t>(c, 0, n - 1);
          else if (mode == "reflect")
            c = c < 0 ? -c : 2 * (n - 1) - c;
          else
            c = ((c % n) + n) % n;
        }
        from += c * inStrides[d];
      }
      if (inside)
        out.copy(k, x, from);
      else
        out.set(k, fill);
    }
    return out;
  }

  // ScatterND(data, indices [.., k], updates): a copy of data where each index tuple's slice is
  // replaced (reduction none: slice assignment, as transformers 4.38-4.47 write the padding into
  // the causal mask) or combined with the update (add, mul, max, min), tuple after tuple.
  std::optional<Tensor> scatterNd() {
    if (inputs_.size() != 3 || !inputs_[1].elem || inputs_[1].isFloat())
      return std::nullopt;
    StringRef reduction = stringAttr(op_, "reduction", "none");
    if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
        reduction != "min")
      return std::nullopt;
    const Tensor &data = inputs_[0], &indices = inputs_[1], &updates = inputs_[2];
    if (indices.shape.empty() || data.elem != updates.elem)
      return std::nullopt;
    const int64_t k = indices.shape.back();
    const int64_t rank = static_cast<int64_t>(data.shape.size());
    if (k < 1 || k > rank)
      return std::nullopt;
    // updates: indices.shape[:-1] + data.shape[k:]
    SmallVector<int64_t> expected(indices.shape.begin(), indices.shape.end() - 1);
    expected.append(data.shape.begin() + k, data.shape.end());
    if (SmallVector<int64_t>(updates.shape.begin(), updates.shape.end()) != expected)
      return std::nullopt;
    Tensor out = data;
    if (out.size() > evaluationBudget())
      return std::nullopt;
    SmallVector<int64_t> strides = stridesOf(data.shape);
    int64_t slice = 1;
    for (int64_t d = k; d < rank; ++d)
      slice *= data.shape[d];
    const int64_t tuples = k ? indices.size() / k : 0;
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (int64_t d = 0; d < k; ++d) {
        int64_t i = indices.i(t * k + d);
        if (i < 0)
          i += data.shape[d];
        if (i < 0 || i >= data.shape[d])
          return std::nullopt;
        offset += i * strides[d];
      }
      for (int64_t e = 0; e < slice; ++e) {
        const int64_t at = offset + e, from = t * slice + e;
        scatterInto(out, at, updates, from, reduction);
      }
    }
    return out;
  }

  // Einsum with an explicit or implicit output, letters only (no ellipsis): every combination of
  // the letters' values, products summed over the letters the output lacks.
  std::optional<Tensor> einsum() {
    if (!op_.getOnnxAttrs() || inputs_.empty())
      return std::nullopt;
    auto equation = op_.getOnnxAttrs()->getAs<StringAttr>("equation");
    if (!equation)
      return std::nullopt;
    std::string eq;
    for (char ch : equation.getValue())
      if (ch != ' ')
        eq += ch;
    if (eq.find('.') != std::string::npos)
      return std::nullopt;
    const size_t arrow = eq.find("->");
    std::string lhs = eq.substr(0, arrow), rhs;
    SmallVector<std::string> terms;
    for (size_t start = 0;;) {
      size_t comma = lhs.find(',', start);
      terms.push_back(lhs.substr(start, comma == std::string::npos ? comma : comma - start));
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
    if (terms.size() != inputs_.size())
      return std::nullopt;
    std::map<char, int64_t> size, count;
    for (size_t t = 0; t < terms.size(); ++t) {
      const Tensor &x = inputs_[t];
      if (!x.isFloat() || terms[t].size() != x.shape.size())
        return std::nullopt;
      for (size_t d = 0; d < terms[t].size(); ++d) {
        char letter = terms[t][d];
        if (!std::isalpha(static_cast<unsigned char>(letter)))
          return std::nullopt;
        auto [it, inserted] = size.try_emplace(letter, x.shape[d]);
        if (!inserted && it->second != x.shape[d])
          return std::nullopt;
        ++count[letter];
      }
    }
    if (arrow != std::string::npos) {
      rhs = eq.substr(arrow + 2);
    } else {
      for (auto [letter, n] : count) // implicit: the letters seen once, in alphabetical order
        if (n == 1)
          rhs += letter;
    }
    Tensor out;
    out.elem = inputs_[0].elem;
    for (char letter : rhs) {
      auto it = size.find(letter);
      if (it == size.end())
        return std::nullopt;
      out.shape.push_back(it->second);
    }
    if (out.size() > evaluationBudget())
      return std::nullopt;
    std::string letters; // output letters first, then the summed ones
    letters = rhs;
    for (auto [letter, n] : size)
      if (rhs.find(letter) == std::string::npos)
        letters += letter;
    int64_t combinations = 1;
    for (char letter : letters)
      combinations *= size[letter];
    if (combinations > evaluationBudget() * 64)
      return std::nullopt;
    out.resize(out.size());
    std::map<char, int64_t> at;
    for (int64_t k = 0; k < combinations; ++k) {
      int64_t rest = k;
      for (size_t l = letters.size(); l-- > 0;) {
        at[letters[l]] = rest % size[letters[l]];
        rest /= size[letters[l]];
      }
      double product = 1.0;
      for (size_t t = 0; t < terms.size(); ++t) {
        int64_t index = 0;
        for (char letter : terms[t])
          index = index * size[letter] + at[letter];
        product *= inputs_[t].floats[index];
      }
      int64_t o = 0;
      for (char letter : rhs)
        o = o * size[letter] + at[letter];
      out.floats[o] += product;
    }
    return out;
  }

  std::optional<Tensor> where() {
    if (inputs_.size() != 3)
      return std::nullopt;
    const Tensor &c = inputs_[0], &a = inputs_[1], &b = inputs_[2];
    auto ab = broadcastShape(a.shape, b.shape);
    auto shape = ab ? broadcastShape(c.shape, *ab) : std::nullopt;
    if (!shape || a.elem != b.elem)
      return std::nullopt;
    Tensor out;
    out.elem = a.elem;
    out.shape = *shape;
    out.resize(out.size());
    for (int64_t k = 0; k < out.size(); ++k) {
      bool pick = c.i(broadcastIndex(k, out.shape, c.shape)) != 0;
      if (pick)
        out.copy(k, a, broadcastIndex(k, out.shape, a.shape));
      else
        out.copy(k, b, broadcastIndex(k, out.shape, b.shape));
    }
    return out;
  }

  std::optional<Tensor> transpose() {
    const Tensor &x = inputs_[0];
    int64_t rank = static_cast<int64_t>(x.shape.size());
    SmallVector<int64_t> perm;
    if (auto attr = intsAttr(op_, "perm"))
      perm = *attr;
    else
      for (int64_t d = rank - 1; d >= 0; --d)
        perm.push_back(d);
    SmallVector<int64_t> sorted(perm);
    llvm::sort(sorted);
    for (int64_t d = 0; d < static_cast<int64_t>(sorted.size()); ++d)
      if (sorted[d] != d)
        return std::nullopt;
    if (static_cast<int64_t>(perm.size()) != rank)
      return std::nullopt;
    Tensor out;
    out.elem = x.elem;
    for (int64_t p : perm)
      out.shape.push_back(x.shape[p]);
    out.resize(out.size());
    SmallVector<int64_t> outStrides = stridesOf(out.shape), inStrides = stridesOf(x.shape);
    for (int64_t k = 0; k < out.size(); ++k) {
      int64_t from = 0;
      for (int64_t d = 0; d < rank; ++d)
        from += ((k / outStrides[d]) % out.shape[d]) * inStrides[perm[d]];
      out.copy(k, x, from);
    }
    return out;
  }

  // The upper (upper = 1, the default) or lower triangle of each matrix of the last two
  // dimensions, from diagonal k (input 1, default 0); the rest zero.
  std::optional<Tensor> trilu() {
    const Tensor &x = inputs_[0];
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    if (rank < 2 || (present(1) && inputs_[1].size() != 1))
      return std::nullopt;
    const int64_t k = present(1) ? inputs_[1].i(0) : 0;
    const bool upper = intAttr(op_, "upper").value_or(1) != 0;
    const int64_t rows = x.shape[rank - 2], cols = x.shape[rank - 1];
    Tensor out = x;
    for (int64_t e = 0; e < out.size(); ++e) {
      const int64_t i = e / std::max<int64_t>(cols, 1) % std::max<int64_t>(rows, 1);
      const int64_t j = e % std::max<int64_t>(cols, 1);
      if (upper ? j - i < k : j - i > k)
        out.set(e, 0.0);
    }
    return out;
  }

  // Running sums along the axis (input 1), exclusive and reverse as the attributes say.
  std::optional<Tensor> cumSum() {
    const Tensor &x = inputs_[0];
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    if (inputs_.size() != 2 || inputs_[1].size() != 1 || rank == 0)
      return std::nullopt;
    const int64_t axis = normalizeAxis(inputs_[1].i(0), rank);
    if (axis < 0 || axis >= rank)
      return std::nullopt;
    const bool exclusive = intAttr(op_, "exclusive").value_or(0) != 0;
    const bool reverse = intAttr(op_, "reverse").value_or(0) != 0;
    const int64_t n = x.shape[axis], stride = stridesOf(x.shape)[axis];
    Tensor out = x;
    for (int64_t e = 0; e < x.size(); ++e) {
      if ((e / stride) % std::max<int64_t>(n, 1) != 0)
        continue; // e starts a line along the axis
      double sum = 0;
      uint64_t intSum = 0; // integers exactly, wrapping as int64 does
      for (int64_t step = 0; step < n; ++step) {
        const int64_t at = e + (reverse ? n - 1 - step : step) * stride;
        if (!x.isFloat()) {
          const uint64_t value = static_cast<uint64_t>(x.i(at));
          if (!exclusive)
            intSum += value;
          out.setInt(at, static_cast<int64_t>(intSum));
          if (exclusive)
            intSum += value;
          continue;
        }
        const double value = x.f(at);
        if (!exclusive)
          sum += value;
        out.set(at, sum);
        if (exclusive)
          sum += value;
      }
    }
    return out;
  }

  // numpy's matmul: the last two dimensions multiply, the others broadcast; a 1-D operand is a
  // row (a) or a column (b) whose dimension leaves the result.
  std::optional<Tensor> matMul() {
    if (inputs_.size() != 2 || inputs_[0].elem != inputs_[1].elem)
      return std::nullopt;
    Tensor a = inputs_[0], b = inputs_[1];
    const bool rowA = a.shape.size() == 1, columnB = b.shape.size() == 1;
    if (a.shape.empty() || b.shape.empty())
      return std::nullopt;
    if (rowA)
      a.shape.insert(a.shape.begin(), 1);
    if (columnB)
      b.shape.push_back(1);
    const size_t ra = a.shape.size(), rb = b.shape.size();
    const int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
    if (b.shape[rb - 2] != k)
      return std::nullopt;
    SmallVector<int64_t> batchA(a.shape.begin(), a.shape.end() - 2);
    SmallVector<int64_t> batchB(b.shape.begin(), b.shape.end() - 2);
    auto batch = broadcastShape(batchA, batchB);
    if (!batch)
      return std::nullopt;
    Tensor out;
    out.elem = a.elem;
    out.shape = *batch;
    out.shape.append({m, n});
    if (out.size() > evaluationBudget() || out.size() * k > evaluationBudget() * 64)
      return std::nullopt;
    out.resize(out.size());
    int64_t batches = 1;
    for (int64_t d : *batch)
      batches *= d;
    for (int64_t p = 0; p < batches; ++p) {
      const int64_t baseA = broadcastIndex(p, *batch, batchA) * m * k;
      const int64_t baseB = broadcastIndex(p, *batch, batchB) * k * n;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          // Integers exactly (wrapping as int64 does), floats in double.
          if (!a.isFloat()) {
            uint64_t sum = 0;
            for (int64_t q = 0; q < k; ++q)
              sum += static_cast<uint64_t>(a.i(baseA + i * k + q)) *
                     static_cast<uint64_t>(b.i(baseB + q * n + j));
            out.setInt((p * m + i) * n + j, static_cast<int64_t>(sum));
            continue;
          }
          double sum = 0;
          for (int64_t q = 0; q < k; ++q)
            sum += a.f(baseA + i * k + q) * b.f(baseB + q * n + j);
          out.set((p * m + i) * n + j, sum);
        }
    }
    if (rowA)
      out.shape.erase(out.shape.end() - 2);
    if (columnB)
      out.shape.pop_back();
    return out;
  }

  OnnxNodeOp op_;
  SmallVector<Tensor> inputs_;
};

} // namespace

std::optional<Tensor> tensorFromAttr(DenseElementsAttr attr) { return tensorFromAttrImpl(attr); }

DenseElementsAttr tensorToAttr(const Tensor &t) { return tensorToAttrImpl(t); }

std::optional<SmallVector<Tensor>> evaluateNodeResults(OnnxNodeOp op, ArrayRef<Tensor> inputs) {
  if (inputs.size() != op->getNumOperands())
    return std::nullopt;
  std::optional<SmallVector<Tensor>> out = NodeInterpreter(op, inputs).run();
  if (!out || out->size() != op->getNumResults())
    return std::nullopt;
  return out;
}

std::optional<Tensor> evaluateNode(OnnxNodeOp op, ArrayRef<Tensor> inputs) {
  if (op->getNumResults() != 1)
    return std::nullopt;
  std::optional<SmallVector<Tensor>> out = evaluateNodeResults(op, inputs);
  return out ? std::optional<Tensor>(std::move(out->front())) : std::nullopt;
}

} // namespace hetc
