// Symbolic shapes of the ONNX-level graph: see SymbolicShapes.h.
#include "SymbolicShapes.h"

#include "OnnxGraph.h"

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>

using namespace mlir;

namespace hetc {

//===- DimExpr -------------------------------------------------------------===//

DimExpr DimExpr::constant(int64_t c) {
  DimExpr e;
  if (c != 0)
    e.terms_[{}] = c;
  return e;
}

DimExpr DimExpr::symbol(int id) {
  DimExpr e;
  e.terms_[{id}] = 1;
  return e;
}

std::optional<int64_t> DimExpr::asConstant() const {
  if (terms_.empty())
    return 0;
  if (terms_.size() == 1 && terms_.begin()->first.empty())
    return terms_.begin()->second;
  return std::nullopt;
}

std::optional<DimExpr> DimExpr::add(const DimExpr &a, const DimExpr &b) {
  DimExpr r = a;
  for (const auto &[mono, coef] : b.terms_) {
    int64_t &slot = r.terms_[mono];
    if (__builtin_add_overflow(slot, coef, &slot))
      return std::nullopt;
    if (slot == 0)
      r.terms_.erase(mono);
  }
  return r;
}

std::optional<DimExpr> DimExpr::sub(const DimExpr &a, const DimExpr &b) {
  DimExpr negB;
  for (const auto &[mono, coef] : b.terms_) {
    if (coef == std::numeric_limits<int64_t>::min())
      return std::nullopt;
    negB.terms_[mono] = -coef;
  }
  return add(a, negB);
}

std::optional<DimExpr> DimExpr::mul(const DimExpr &a, const DimExpr &b) {
  DimExpr r;
  for (const auto &[ma, ca] : a.terms_)
    for (const auto &[mb, cb] : b.terms_) {
      std::vector<int> mono = ma;
      mono.insert(mono.end(), mb.begin(), mb.end());
      std::sort(mono.begin(), mono.end());
      int64_t product;
      if (__builtin_mul_overflow(ca, cb, &product))
        return std::nullopt;
      int64_t &slot = r.terms_[mono];
      if (__builtin_add_overflow(slot, product, &slot))
        return std::nullopt;
      if (slot == 0)
        r.terms_.erase(mono);
    }
  return r;
}

std::optional<DimExpr> DimExpr::div(const DimExpr &a, const DimExpr &b) {
  std::optional<int64_t> cb = b.asConstant();
  if (!cb) {
    if (a == b)
      return constant(1);
    // A quotient of one term q: a == q * b ([B, G, n, P + S, D] reshaped to [B, -1, P + S, D]:
    // (128*B*P + 128*B*S) / (32*B*P + 32*B*S) = 4). q is a's first term over b's (the terms are
    // ordered by their symbols), then checked.
    if (b.terms_.size() != 1) {
      if (a.terms_.empty())
        return DimExpr();
      const auto &[monoA, coefA] = *a.terms_.begin();
      const auto &[monoB, coefB] = *b.terms_.begin();
      if (coefA % coefB != 0 || !std::includes(monoA.begin(), monoA.end(), monoB.begin(), monoB.end()))
        return std::nullopt;
      DimExpr q;
      std::vector<int> rest;
      std::set_difference(monoA.begin(), monoA.end(), monoB.begin(), monoB.end(),
                          std::back_inserter(rest));
      q.terms_[rest] = coefA / coefB;
      std::optional<DimExpr> back = mul(q, b);
      return back && *back == a ? std::optional<DimExpr>(q) : std::nullopt;
    }
    // By one term c * m (m a product of symbols): every term of a must hold m and a multiple of c.
    const auto &[divisorMono, divisorCoef] = *b.terms_.begin();
    DimExpr r;
    for (const auto &[mono, coef] : a.terms_) {
      if (coef % divisorCoef != 0)
        return std::nullopt;
      std::vector<int> rest;
      if (!std::includes(mono.begin(), mono.end(), divisorMono.begin(), divisorMono.end()))
        return std::nullopt;
      std::set_difference(mono.begin(), mono.end(), divisorMono.begin(), divisorMono.end(),
                          std::back_inserter(rest));
      r.terms_[rest] = coef / divisorCoef;
    }
    return r;
  }
  if (*cb == 0)
    return std::nullopt;
  if (std::optional<int64_t> ca = a.asConstant()) {
    if (*cb == -1 && *ca == std::numeric_limits<int64_t>::min())
      return std::nullopt;
    return constant(*ca / *cb);
  }
  DimExpr r;
  for (const auto &[mono, coef] : a.terms_) {
    if (coef % *cb != 0)
      return std::nullopt;
    r.terms_[mono] = coef / *cb;
  }
  return r;
}

bool DimExpr::provablyNonNegative() const {
  return std::all_of(terms_.begin(), terms_.end(), [](const auto &t) { return t.second >= 0; });
}

bool DimExpr::provablyPositive() const {
  auto c = terms_.find({});
  return provablyNonNegative() && c != terms_.end() && c->second > 0;
}

std::string DimExpr::str(ArrayRef<std::string> names) const {
  if (terms_.empty())
    return "0";
  std::string out;
  // Symbol terms first, the constant last: "past + seq - 1".
  auto term = [&](const std::vector<int> &mono, int64_t coef) {
    uint64_t magnitude = coef < 0 ? 0 - static_cast<uint64_t>(coef) : static_cast<uint64_t>(coef);
    if (!out.empty())
      out += coef < 0 ? " - " : " + ";
    else if (coef < 0)
      out += "-";
    if (mono.empty() || magnitude != 1)
      out += std::to_string(magnitude) + (mono.empty() ? "" : "*");
    for (size_t i = 0; i < mono.size(); ++i)
      out += (i ? "*" : "") + (mono[i] < static_cast<int>(names.size())
                                   ? names[mono[i]]
                                   : "s" + std::to_string(mono[i]));
  };
  for (const auto &[mono, coef] : terms_)
    if (!mono.empty())
      term(mono, coef);
  if (auto c = terms_.find({}); c != terms_.end())
    term(c->first, c->second);
  return out;
}

std::optional<bool> provablyEqual(const SymDim &a, const SymDim &b) {
  if (!a || !b)
    return std::nullopt;
  std::optional<DimExpr> diff = DimExpr::sub(*a, *b);
  if (!diff)
    return std::nullopt;
  if (std::optional<int64_t> c = diff->asConstant())
    return *c == 0;
  if (diff->provablyPositive())
    return false;
  std::optional<DimExpr> neg = DimExpr::sub(DimExpr(), *diff);
  if (neg && neg->provablyPositive())
    return false;
  return std::nullopt;
}

std::optional<bool> provablyLess(const SymDim &a, const SymDim &b) {
  if (!a || !b)
    return std::nullopt;
  std::optional<DimExpr> diff = DimExpr::sub(*b, *a); // a < b  <=>  b - a > 0
  if (!diff)
    return std::nullopt;
  if (diff->provablyPositive())
    return true;
  std::optional<DimExpr> neg = DimExpr::sub(DimExpr(), *diff);
  if (neg && neg->provablyNonNegative())
    return false;
  return std::nullopt;
}

//===- Evaluation ----------------------------------------------------------===//

namespace {

SymDim known(int64_t c) { return DimExpr::constant(c); }

std::optional<int64_t> constantOf(const SymDim &d) {
  return d ? d->asConstant() : std::nullopt;
}

SymDim addDims(const SymDim &a, const SymDim &b) {
  return a && b ? DimExpr::add(*a, *b) : std::nullopt;
}
SymDim subDims(const SymDim &a, const SymDim &b) {
  return a && b ? DimExpr::sub(*a, *b) : std::nullopt;
}
SymDim mulDims(const SymDim &a, const SymDim &b) {
  return a && b ? DimExpr::mul(*a, *b) : std::nullopt;
}
SymDim divDims(const SymDim &a, const SymDim &b) {
  return a && b ? DimExpr::div(*a, *b) : std::nullopt;
}

SymDim product(ArrayRef<SymDim> dims) {
  SymDim p = known(1);
  for (const SymDim &d : dims)
    p = mulDims(p, d);
  return p;
}

int64_t normalizedAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// numpy broadcasting of one pair of dimensions.
SymDim broadcastDim(const SymDim &a, const SymDim &b) {
  if (constantOf(a) == 1)
    return b;
  if (constantOf(b) == 1)
    return a;
  if (provablyEqual(a, b) == true)
    return a;
  // A dimension that is a constant other than 1 is what the other one must be.
  if (constantOf(a))
    return a;
  if (constantOf(b))
    return b;
  // One symbolic, one unknown: the symbolic one. The unknown one is 1 or the same dimension,
  // unless the symbolic one is 1 at run time and is broadcast up, which an LLM export never
  // does to the tensor that carries its batch, tokens or cache (scores plus a mask of unknown
  // shape have the scores' dimensions).
  if (a && !b)
    return a;
  if (b && !a)
    return b;
  return std::nullopt;
}

std::optional<SymDims> broadcastShapes(ArrayRef<std::optional<SymDims>> shapes) {
  size_t rank = 0;
  for (const auto &s : shapes) {
    if (!s)
      return std::nullopt;
    rank = std::max(rank, s->size());
  }
  SymDims out(rank, known(1));
  for (const auto &s : shapes)
    for (size_t i = 0; i < s->size(); ++i) {
      size_t o = rank - s->size() + i;
      out[o] = broadcastDim(out[o], (*s)[i]);
    }
  return out;
}

// Python slicing of a dimension of size `dim` by constant start/end/step, as ONNX Slice clamps:
// the first index and the count.
std::optional<std::pair<int64_t, int64_t>> sliceRange(int64_t dim, int64_t start, int64_t end,
                                                      int64_t step) {
  if (step == 0)
    return std::nullopt;
  // ONNX's clamping: [0, dim] going forward; [0, dim - 1] for the start and [-1, dim - 1] for
  // the end going backward.
  auto clampIndex = [&](int64_t i, bool isEnd) {
    if (i < 0)
      i = i < -dim ? -dim - 1 : i;
    if (i < 0)
      i += dim;
    if (step > 0)
      return std::clamp<int64_t>(i, 0, dim);
    return std::clamp<int64_t>(i, isEnd ? -1 : 0, dim - 1);
  };
  start = clampIndex(start, false);
  end = clampIndex(end, true);
  int64_t span = step > 0 ? end - start : start - end;
  int64_t stride = step > 0 ? step : -step;
  return std::make_pair(start, span <= 0 ? 0 : (span + stride - 1) / stride);
}

bool isIntegerTensor(Value v) {
  auto type = dyn_cast<ShapedType>(v.getType());
  return type && type.getElementType().isIntOrIndex();
}

} // namespace

SymbolicShapes::SymbolicShapes(func::FuncOp func) {
  for (BlockArgument arg : func.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue;
    auto dimNames = func.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(), "hetc.dims");
    auto argName = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "hetc.name");
    SymDims dims;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (!type.isDynamicDim(d)) {
        dims.push_back(known(type.getDimSize(d)));
        continue;
      }
      std::string name;
      if (dimNames && d < static_cast<int64_t>(dimNames.size()))
        if (auto s = dyn_cast<StringAttr>(dimNames[d]))
          name = s.str();
      if (name.empty())
        name = (argName ? argName.str() : "arg" + std::to_string(arg.getArgNumber())) + "[" +
               std::to_string(d) + "]";
      dims.push_back(DimExpr::symbol(symbolFor(name)));
    }
    facts(arg).shape = dims;
  }
  func.walk([&](Operation *op) { visit(op); });
}

std::optional<SmallVector<int64_t>> allConstant(const std::optional<SymDims> &dims) {
  if (!dims)
    return std::nullopt;
  SmallVector<int64_t> out;
  for (const SymDim &d : *dims) {
    std::optional<int64_t> c = d ? d->asConstant() : std::nullopt;
    if (!c)
      return std::nullopt;
    out.push_back(*c);
  }
  return out;
}

int SymbolicShapes::symbolFor(const std::string &name) {
  auto [it, inserted] = symbols_.try_emplace(name, static_cast<int>(names_.size()));
  if (inserted)
    names_.push_back(name);
  return it->second;
}

std::optional<SymDims> SymbolicShapes::shapeOrType(Value v) const {
  auto it = facts_.find(v);
  auto type = dyn_cast<RankedTensorType>(v.getType());
  std::optional<SymDims> evaluated = it != facts_.end() ? it->second.shape : std::nullopt;
  if (!type)
    return evaluated;
  if (evaluated && static_cast<int64_t>(evaluated->size()) != type.getRank())
    evaluated.reset(); // the two disagree: trust the type's rank
  SymDims dims = evaluated ? *evaluated : SymDims(type.getRank());
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!type.isDynamicDim(d) && !dims[d])
      dims[d] = known(type.getDimSize(d));
  return dims;
}

std::optional<SymDims> SymbolicShapes::shape(Value v) const { return shapeOrType(v); }

std::optional<SymDims> SymbolicShapes::elements(Value v) const {
  auto it = facts_.find(v);
  return it != facts_.end() ? it->second.elements : std::nullopt;
}

std::string SymbolicShapes::str(const SymDims &dims) const {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    out += (i ? ", " : "") + (dims[i] ? str(*dims[i]) : std::string("?"));
  return out + "]";
}

void SymbolicShapes::visit(Operation *op) {
  if (auto node = dyn_cast<OnnxNodeOp>(op)) {
    visitNode(node);
    return;
  }
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    auto attr = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!attr || !attr.getElementType().isIntOrIndex() ||
        attr.getNumElements() > kMaxElements)
      return;
    SymDims values;
    for (const APInt &v : attr.getValues<APInt>())
      values.push_back(known(attr.getElementType().isInteger(1) ? v.getZExtValue()
                                                                 : v.getSExtValue()));
    facts(constant.getResult()).elements = values;
  }
}

// Operand i's shape, where the node has that operand.
std::optional<SymDims> SymbolicShapes::operandShape(OnnxNodeOp node, unsigned i) const {
  return i < node->getNumOperands() && !isa<NoneType>(node->getOperand(i).getType())
             ? shapeOrType(node->getOperand(i))
             : std::nullopt;
}

void SymbolicShapes::visitNode(OnnxNodeOp node) {
  if (node->getNumResults() == 0)
    return; // nothing to know (the unroller's pending loop conditions)
  StringRef type = node.getOpType();
  const unsigned n = node->getNumOperands();
  auto shapeOf = [&](unsigned i) { return operandShape(node, i); };
  auto valuesOf = [&](unsigned i) -> std::optional<SymDims> {
    return i < n && !isa<NoneType>(node->getOperand(i).getType()) ? elements(node->getOperand(i))
                                                                   : std::nullopt;
  };
  // The constant integers of operand i (every element known and constant).
  auto intsOf = [&](unsigned i) -> std::optional<SmallVector<int64_t>> {
    std::optional<SymDims> v = valuesOf(i);
    if (!v)
      return std::nullopt;
    SmallVector<int64_t> out;
    for (const SymDim &d : *v) {
      std::optional<int64_t> c = constantOf(d);
      if (!c)
        return std::nullopt;
      out.push_back(*c);
    }
    return out;
  };
  std::optional<SymDims> outShape, outValues;
  auto in0 = shapeOf(0);

  // A flattened If (cond, then outputs, else outputs): the branch its known condition picks.
  if (type == "If") {
    const unsigned results = node->getNumResults();
    std::optional<SymDims> cond = valuesOf(0);
    std::optional<int64_t> c = cond && cond->size() == 1 ? constantOf((*cond)[0]) : std::nullopt;
    if (c && n == 1 + 2 * results)
      for (unsigned r = 0; r < results; ++r) {
        Value picked = node->getOperand(1 + r + (*c ? 0 : results));
        facts(node->getResult(r)).shape = shapeOrType(picked);
        facts(node->getResult(r)).elements = elements(picked);
      }
    return;
  }

  // Shapes.
  if (type == "Identity" || type == "Cast" || type == "CastLike" || type == "Neg" ||
      type == "Sqrt" || type == "Reciprocal" || type == "Exp" || type == "Log" || type == "Abs" ||
      type == "Floor" || type == "Ceil" || type == "Not" || type == "Erf" || type == "Tanh" ||
      type == "Sigmoid" || type == "Relu" || type == "Cos" || type == "Sin" || type == "Softmax" ||
      type == "LogSoftmax" || type == "CumSum" || type == "Trilu" || type == "IsNaN" ||
      type == "IsInf" || type == "Gelu" || type == "FastGelu" || type == "RotaryEmbedding" ||
      type == "Round" ||
      type == "Sign" || type == "LayerNormalization" || type == "SimplifiedLayerNormalization" ||
      type == "Dropout" || type == "Softplus" || type == "HardSigmoid" || type == "Clip") {
    outShape = in0;
  } else if (type == "Add" || type == "Sub" || type == "Mul" || type == "Div" || type == "Pow" ||
             type == "Max" || type == "Min" || type == "Equal" || type == "Less" ||
             type == "Greater" || type == "LessOrEqual" || type == "GreaterOrEqual" ||
             type == "And" || type == "Or" || type == "Xor" || type == "Mod" || type == "Where" ||
             type == "BitwiseAnd" || type == "BitwiseOr") {
    SmallVector<std::optional<SymDims>> all;
    for (unsigned i = 0; i < n; ++i)
      all.push_back(shapeOf(i));
    outShape = broadcastShapes(all);
  } else if (type == "Shape") {
    if (in0) {
      int64_t rank = in0->size();
      int64_t start = std::clamp<int64_t>(
          normalizedAxis(intAttr(node, "start").value_or(0), rank), 0, rank);
      int64_t end = std::clamp<int64_t>(
          normalizedAxis(intAttr(node, "end").value_or(rank), rank), 0, rank);
      SymDims dims;
      for (int64_t d = start; d < end; ++d)
        dims.push_back((*in0)[d]);
      outShape = SymDims{known(static_cast<int64_t>(dims.size()))};
      outValues = dims;
    }
  } else if (type == "Size") {
    outShape = SymDims{};
    if (in0)
      outValues = SymDims{product(*in0)};
  } else if (type == "Reshape") {
    std::optional<SymDims> target = valuesOf(1);
    if (auto t = shapeOf(1); !target && t && t->size() == 1)
      if (std::optional<int64_t> rank = constantOf((*t)[0]))
        outShape = SymDims(*rank); // rank known, dimensions not
    if (target) {
      bool allowZero = intAttr(node, "allowzero").value_or(0) != 0;
      SymDims dims;
      int inferred = -1;
      for (auto [i, entry] : llvm::enumerate(*target)) {
        std::optional<int64_t> c = constantOf(entry);
        if (c == -1) {
          inferred = static_cast<int>(i);
          dims.push_back(std::nullopt);
        } else if (c == 0 && !allowZero) {
          dims.push_back(in0 && i < in0->size() ? (*in0)[i] : std::nullopt);
        } else {
          dims.push_back(entry);
        }
      }
      if (inferred >= 0 && in0) {
        SymDims others;
        for (auto [i, d] : llvm::enumerate(dims))
          if (static_cast<int>(i) != inferred)
            others.push_back(d);
        dims[inferred] = divDims(product(*in0), product(others));
      }
      outShape = dims;
    }
    outValues = valuesOf(0);
  } else if (type == "Flatten") {
    if (in0) {
      int64_t axis = normalizedAxis(intAttr(node, "axis").value_or(1), in0->size());
      if (axis >= 0 && axis <= static_cast<int64_t>(in0->size()))
        outShape = SymDims{product(ArrayRef<SymDim>(*in0).take_front(axis)),
                           product(ArrayRef<SymDim>(*in0).drop_front(axis))};
    }
    outValues = valuesOf(0);
  } else if (type == "Unsqueeze" || type == "Squeeze") {
    std::optional<SmallVector<int64_t>> axes = intsAttr(node, "axes");
    if (!axes && n >= 2)
      axes = intsOf(1);
    if (type == "Squeeze" && axes && axes->empty())
      axes.reset(); // every dimension of 1, as ONNX Runtime reads an empty axes tensor
    if (in0 && type == "Unsqueeze" && axes) {
      int64_t rank = in0->size() + axes->size();
      SmallVector<bool> inserted(rank, false);
      bool ok = true;
      for (int64_t a : *axes) {
        a = normalizedAxis(a, rank);
        ok = ok && a >= 0 && a < rank && !inserted[a];
        if (ok)
          inserted[a] = true;
      }
      if (ok) {
        SymDims dims;
        size_t next = 0;
        for (int64_t d = 0; d < rank; ++d)
          dims.push_back(inserted[d] ? known(1) : (*in0)[next++]);
        outShape = dims;
      }
    } else if (in0 && type == "Squeeze") {
      int64_t rank = in0->size();
      SmallVector<bool> removed(rank, false);
      bool ok = true;
      if (axes) {
        for (int64_t a : *axes) {
          a = normalizedAxis(a, rank);
          ok = ok && a >= 0 && a < rank;
          if (ok)
            removed[a] = true;
        }
      } else {
        for (int64_t d = 0; d < rank; ++d) {
          ok = ok && constantOf((*in0)[d]).has_value();
          removed[d] = constantOf((*in0)[d]) == 1;
        }
      }
      if (ok) {
        SymDims dims;
        for (int64_t d = 0; d < rank; ++d)
          if (!removed[d])
            dims.push_back((*in0)[d]);
        outShape = dims;
      }
    }
    outValues = valuesOf(0);
  } else if (type == "Transpose") {
    if (in0) {
      SmallVector<int64_t> perm;
      if (auto attr = intsAttr(node, "perm"))
        perm = *attr;
      else
        for (int64_t d = static_cast<int64_t>(in0->size()) - 1; d >= 0; --d)
          perm.push_back(d);
      if (perm.size() == in0->size()) {
        SymDims dims;
        for (int64_t p : perm)
          dims.push_back(p >= 0 && p < static_cast<int64_t>(in0->size()) ? (*in0)[p]
                                                                          : std::nullopt);
        outShape = dims;
      }
    }
  } else if (type == "Concat") {
    int64_t axis = intAttr(node, "axis").value_or(0);
    SmallVector<SymDims> shapes;
    for (unsigned i = 0; i < n; ++i) {
      std::optional<SymDims> s = shapeOf(i);
      if (!s)
        break;
      shapes.push_back(*s);
    }
    if (shapes.size() == n && n > 0) {
      SymDims dims = shapes[0];
      axis = normalizedAxis(axis, dims.size());
      if (axis >= 0 && axis < static_cast<int64_t>(dims.size())) {
        for (unsigned i = 1; i < n; ++i)
          dims[axis] = addDims(dims[axis], shapes[i].size() == dims.size() ? shapes[i][axis]
                                                                            : SymDim());
        for (size_t d = 0; d < dims.size(); ++d)
          if (static_cast<int64_t>(d) != axis)
            for (unsigned i = 1; i < n && !dims[d]; ++i)
              if (shapes[i].size() == dims.size())
                dims[d] = shapes[i][d];
        outShape = dims;
      }
      // Values of 1-D pieces.
      if (dims.size() == 1) {
        SymDims values;
        bool all = true;
        for (unsigned i = 0; i < n && all; ++i) {
          std::optional<SymDims> v = valuesOf(i);
          all = v.has_value();
          if (all)
            values.append(v->begin(), v->end());
        }
        if (all && static_cast<int64_t>(values.size()) <= kMaxElements)
          outValues = values;
      }
    }
  } else if (type == "Gather") {
    auto indices = shapeOf(1);
    int64_t axis = intAttr(node, "axis").value_or(0);
    if (in0 && indices) {
      axis = normalizedAxis(axis, in0->size());
      if (axis >= 0 && axis < static_cast<int64_t>(in0->size())) {
        SymDims dims(in0->begin(), in0->begin() + axis);
        dims.append(indices->begin(), indices->end());
        dims.append(in0->begin() + axis + 1, in0->end());
        outShape = dims;
      }
    }
    std::optional<SymDims> data = valuesOf(0);
    std::optional<SmallVector<int64_t>> picks = intsOf(1);
    if (data && picks && in0 && in0->size() == 1) {
      SymDims values;
      int64_t size = data->size();
      for (int64_t p : *picks) {
        p = p < 0 ? p + size : p;
        if (p < 0 || p >= size)
          break;
        values.push_back((*data)[p]);
      }
      if (values.size() == picks->size())
        outValues = values;
    }
  } else if (type == "GatherElements") {
    outShape = shapeOf(1); // the indices' shape
  } else if (type == "Slice" && in0) {
    // starts, ends, axes, steps as inputs (opset 10+) or attributes (opset 1).
    std::optional<SymDims> starts = n >= 2 ? valuesOf(1) : std::nullopt;
    std::optional<SymDims> ends = n >= 3 ? valuesOf(2) : std::nullopt;
    std::optional<SmallVector<int64_t>> axes = n >= 4 ? intsOf(3) : intsAttr(node, "axes");
    std::optional<SmallVector<int64_t>> steps = n >= 5 ? intsOf(4) : std::nullopt;
    if (n == 1) {
      if (auto s = intsAttr(node, "starts")) {
        starts = SymDims();
        for (int64_t v : *s)
          starts->push_back(known(v));
      }
      if (auto e = intsAttr(node, "ends")) {
        ends = SymDims();
        for (int64_t v : *e)
          ends->push_back(known(v));
      }
    }
    const bool noAxes = n >= 4 ? isa<NoneType>(node->getOperand(3).getType()) : !axes;
    const bool noSteps = n < 5 || isa<NoneType>(node->getOperand(4).getType());
    if (starts && ends && starts->size() == ends->size()) {
      if (noAxes) {
        axes = SmallVector<int64_t>();
        for (size_t i = 0; i < starts->size(); ++i)
          axes->push_back(i);
      }
      if (noSteps)
        steps = SmallVector<int64_t>(starts->size(), 1);
    }
    if (starts && ends && axes && steps && starts->size() == ends->size() &&
        axes->size() == starts->size() && steps->size() == starts->size()) {
      SymDims dims = *in0;
      bool ok = true;
      SmallVector<int64_t> picked; // the indices of a 1-D value's slice
      for (size_t i = 0; i < axes->size() && ok; ++i) {
        int64_t axis = normalizedAxis((*axes)[i], dims.size());
        ok = axis >= 0 && axis < static_cast<int64_t>(dims.size());
        if (!ok)
          break;
        const SymDim &dim = (*in0)[axis];
        std::optional<int64_t> s = constantOf((*starts)[i]), e = constantOf((*ends)[i]);
        int64_t step = (*steps)[i];
        std::optional<int64_t> d = constantOf(dim);
        if (d && s && e) {
          auto range = step != 0 && step != std::numeric_limits<int64_t>::min()
                           ? sliceRange(*d, *s, *e, step)
                           : std::nullopt;
          dims[axis] = range ? SymDim(known(range->second)) : std::nullopt;
          if (range && in0->size() == 1 && range->second <= kMaxElements)
            for (int64_t k = 0; k < range->second; ++k)
              picked.push_back(range->first + k * step);
          continue;
        }
        if (step != 1) {
          dims[axis] = std::nullopt;
          continue;
        }
        // Symbolic bounds with step 1: start and end each resolved against the dimension where
        // that is provable (x[..., :x.shape[-1]], x[past:past + seq], a Python end of INT64_MAX).
        auto resolve = [&](const SymDim &bound) -> SymDim {
          std::optional<int64_t> c = constantOf(bound);
          if (c && *c < 0)
            return addDims(dim, bound);
          if (provablyLess(bound, dim) == false) // bound >= dim
            return dim;
          if (bound && bound->provablyNonNegative() && provablyLess(dim, bound) == false)
            return bound; // 0 <= bound <= dim
          if (c && *c >= std::numeric_limits<int32_t>::max())
            return dim; // an end of "to the end"
          // dim - k, k a constant: the last k positions (a dimension the trace saw >= k).
          if (std::optional<int64_t> k = constantOf(subDims(dim, bound)); k && *k >= 0)
            return bound;
          return std::nullopt;
        };
        SymDim from = resolve((*starts)[i]), to = resolve((*ends)[i]);
        dims[axis] = subDims(to, from);
      }
      if (ok)
        outShape = dims;
      std::optional<SymDims> data = valuesOf(0);
      if (ok && data && in0->size() == 1 && !picked.empty()) {
        SymDims values;
        for (int64_t p : picked)
          values.push_back((*data)[p]);
        outValues = values;
      } else if (ok && data && in0->size() == 1 && constantOf(dims[0]) == 0) {
        outValues = SymDims();
      }
    }
  } else if (type == "Expand") {
    std::optional<SymDims> target = valuesOf(1);
    if (in0 && target)
      outShape = broadcastShapes({in0, target});
    if (std::optional<SymDims> v = valuesOf(0); v && v->size() == 1 && outShape) {
      std::optional<int64_t> count = constantOf(product(*outShape));
      if (count && *count <= kMaxElements)
        outValues = SymDims(*count, (*v)[0]);
    }
  } else if (type == "Tile") {
    std::optional<SymDims> repeats = valuesOf(1);
    if (in0 && repeats && repeats->size() == in0->size()) {
      SymDims dims;
      for (size_t d = 0; d < in0->size(); ++d)
        dims.push_back(mulDims((*in0)[d], (*repeats)[d]));
      outShape = dims;
    }
  } else if (type == "Pad" && in0) {
    // pads (input 1, opset 11) are [begins..., ends...] over every axis, or over input 3's axes
    // (opset 18); a negative pad crops.
    std::optional<SymDims> pads = valuesOf(1);
    const int64_t rank = static_cast<int64_t>(in0->size());
    SmallVector<int64_t> axes;
    if (std::optional<SmallVector<int64_t>> given = intsOf(3)) {
      for (int64_t a : *given)
        axes.push_back(normalizedAxis(a, rank));
    } else if (!shapeOf(3)) {
      for (int64_t a = 0; a < rank; ++a)
        axes.push_back(a);
    }
    const size_t count = axes.size();
    if (pads && count > 0 && pads->size() == 2 * count &&
        llvm::all_of(axes, [&](int64_t a) { return a >= 0 && a < rank; })) {
      SymDims dims = *in0;
      for (size_t i = 0; i < count; ++i)
        dims[axes[i]] = addDims(addDims(dims[axes[i]], (*pads)[i]), (*pads)[count + i]);
      outShape = dims;
    }
  } else if (type == "ConstantOfShape") {
    std::optional<SymDims> target = valuesOf(0);
    outShape = target;
    if (target) {
      std::optional<int64_t> count = constantOf(product(*target));
      auto result = dyn_cast<ShapedType>(node->getResult(0).getType());
      if (count && *count <= kMaxElements && result && result.getElementType().isIntOrIndex()) {
        int64_t fill = 0;
        if (node.getOnnxAttrs())
          if (auto value = node.getOnnxAttrs()->getAs<DenseElementsAttr>("value");
              value && value.getElementType().isIntOrIndex() && value.getNumElements() == 1)
            fill = (*value.getValues<APInt>().begin()).getSExtValue();
        outValues = SymDims(*count, known(fill));
      }
    }
  } else if (type == "Range") {
    std::optional<SymDims> start = valuesOf(0), limit = valuesOf(1), delta = valuesOf(2);
    if (start && limit && delta && start->size() == 1 && limit->size() == 1 &&
        delta->size() == 1 && constantOf((*delta)[0]) == 1)
      outShape = SymDims{subDims((*limit)[0], (*start)[0])};
  } else if (type == "MatMul") {
    auto b = shapeOf(1);
    if (in0 && b && !in0->empty() && !b->empty()) {
      SymDims a = *in0, bb = *b;
      bool aVector = a.size() == 1, bVector = bb.size() == 1;
      if (aVector)
        a.insert(a.begin(), known(1));
      if (bVector)
        bb.push_back(known(1));
      std::optional<SymDims> batch = broadcastShapes(
          {SymDims(a.begin(), a.end() - 2), SymDims(bb.begin(), bb.end() - 2)});
      if (batch) {
        SymDims dims = *batch;
        if (!aVector)
          dims.push_back(a[a.size() - 2]);
        if (!bVector)
          dims.push_back(bb.back());
        outShape = dims;
      }
    }
  } else if (type == "Einsum") {
    // No ellipsis (the interpreter evaluates none either): each output letter's dimension from
    // the first operand whose dimension for it is not a broadcast 1; an implicit output is the
    // letters that occur once, in alphabetical order.
    std::string equation = stringAttr(node, "equation", "").str();
    equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
    const size_t arrow = equation.find("->");
    const std::string inputs = equation.substr(0, arrow);
    SmallVector<std::string> terms;
    for (size_t start = 0;;) {
      const size_t comma = inputs.find(',', start);
      terms.push_back(inputs.substr(start, comma == std::string::npos ? comma : comma - start));
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
    std::map<char, SymDim> dims;
    std::map<char, int> count;
    bool known = equation.find('.') == std::string::npos && terms.size() == n;
    for (unsigned i = 0; known && i < n; ++i) {
      std::optional<SymDims> in = shapeOf(i);
      if (!in || in->size() != terms[i].size()) {
        known = false;
        break;
      }
      for (auto [letter, dim] : llvm::zip(terms[i], *in)) {
        ++count[letter];
        auto [it, inserted] = dims.try_emplace(letter, dim);
        if (!inserted && constantOf(it->second) == 1)
          it->second = dim;
      }
    }
    std::string output;
    if (arrow != std::string::npos) {
      output = equation.substr(arrow + 2);
    } else {
      for (auto [letter, times] : count)
        if (times == 1)
          output.push_back(letter);
    }
    if (known) {
      SymDims out;
      for (char letter : output) {
        auto it = dims.find(letter);
        if (it == dims.end()) {
          known = false;
          break;
        }
        out.push_back(it->second);
      }
      if (known)
        outShape = out;
    }
  } else if (type == "Gemm") {
    auto b = shapeOf(1);
    if (in0 && b && in0->size() == 2 && b->size() == 2) {
      bool ta = intAttr(node, "transA").value_or(0), tb = intAttr(node, "transB").value_or(0);
      outShape = SymDims{(*in0)[ta ? 1 : 0], (*b)[tb ? 0 : 1]};
    }
  } else if (type == "ReduceMean" || type == "ReduceSum" || type == "ReduceMax" ||
             type == "ReduceMin" || type == "ReduceProd" || type == "ReduceL2" ||
             type == "ReduceSumSquare") {
    std::optional<SmallVector<int64_t>> axes = intsAttr(node, "axes");
    if (!axes && n >= 2)
      axes = intsOf(1);
    bool keep = intAttr(node, "keepdims").value_or(1) != 0;
    if (in0 && axes) {
      SmallVector<bool> reduced(in0->size(), false);
      for (int64_t a : *axes)
        if (int64_t axis = normalizedAxis(a, in0->size());
            axis >= 0 && axis < static_cast<int64_t>(in0->size()))
          reduced[axis] = true;
      SymDims dims;
      for (size_t d = 0; d < in0->size(); ++d)
        if (!reduced[d])
          dims.push_back((*in0)[d]);
        else if (keep)
          dims.push_back(known(1));
      outShape = dims;
    }
  }

  // Values of small integer tensors.
  if (!outValues && isIntegerTensor(node->getResult(0))) {
    auto elementwise = [&](auto fn) -> std::optional<SymDims> {
      SmallVector<SymDims> ins;
      size_t count = 1;
      for (unsigned i = 0; i < n; ++i) {
        std::optional<SymDims> v = valuesOf(i);
        if (!v)
          return std::nullopt;
        if (v->size() != 1 && count != 1 && v->size() != count)
          return std::nullopt;
        count = std::max(count, v->size());
        ins.push_back(*v);
      }
      if (ins.empty())
        return std::nullopt;
      SymDims out;
      for (size_t k = 0; k < count; ++k) {
        SmallVector<SymDim> args;
        for (const SymDims &v : ins)
          args.push_back(v.size() == 1 ? v[0] : v[k]);
        out.push_back(fn(args));
      }
      return out;
    };
    auto boolOf = [](std::optional<bool> b) -> SymDim {
      return b ? SymDim(known(*b ? 1 : 0)) : std::nullopt;
    };
    if (type == "Add")
      outValues = elementwise([](ArrayRef<SymDim> a) { return addDims(a[0], a[1]); });
    else if (type == "Sub")
      outValues = elementwise([](ArrayRef<SymDim> a) { return subDims(a[0], a[1]); });
    else if (type == "Mul")
      outValues = elementwise([](ArrayRef<SymDim> a) { return mulDims(a[0], a[1]); });
    else if (type == "Div")
      outValues = elementwise([](ArrayRef<SymDim> a) { return divDims(a[0], a[1]); });
    else if (type == "Neg")
      outValues = elementwise([](ArrayRef<SymDim> a) { return subDims(known(0), a[0]); });
    else if (type == "Cast" || type == "Identity")
      outValues = valuesOf(0);
    else if (type == "Equal")
      outValues = elementwise([&](ArrayRef<SymDim> a) { return boolOf(provablyEqual(a[0], a[1])); });
    else if (type == "Less")
      outValues = elementwise([&](ArrayRef<SymDim> a) { return boolOf(provablyLess(a[0], a[1])); });
    else if (type == "Greater")
      outValues = elementwise([&](ArrayRef<SymDim> a) { return boolOf(provablyLess(a[1], a[0])); });
    else if (type == "LessOrEqual")
      outValues = elementwise([&](ArrayRef<SymDim> a) {
        std::optional<bool> gt = provablyLess(a[1], a[0]);
        return boolOf(gt ? std::optional<bool>(!*gt) : std::nullopt);
      });
    else if (type == "GreaterOrEqual")
      outValues = elementwise([&](ArrayRef<SymDim> a) {
        std::optional<bool> lt = provablyLess(a[0], a[1]);
        return boolOf(lt ? std::optional<bool>(!*lt) : std::nullopt);
      });
    else if (type == "Not")
      outValues = elementwise([](ArrayRef<SymDim> a) -> SymDim {
        std::optional<int64_t> c = constantOf(a[0]);
        return c ? SymDim(known(*c == 0)) : std::nullopt;
      });
    else if (type == "Max" || type == "Min")
      outValues = elementwise([&](ArrayRef<SymDim> a) -> SymDim {
        SymDim best = a[0];
        for (const SymDim &x : a.drop_front()) {
          std::optional<bool> less = provablyLess(best, x);
          std::optional<bool> equal = provablyEqual(best, x);
          if (equal == true)
            continue;
          if (!less)
            return std::nullopt;
          if (*less == (type == "Max"))
            best = x;
        }
        return best;
      });
    else if (type == "Where")
      outValues = elementwise([](ArrayRef<SymDim> a) -> SymDim {
        std::optional<int64_t> c = constantOf(a[0]);
        return c ? (*c ? a[1] : a[2]) : std::nullopt;
      });
  }
  // A value's elements must agree with its shape's element count.
  if (outValues && outShape) {
    std::optional<int64_t> count = constantOf(product(*outShape));
    if (count && *count != static_cast<int64_t>(outValues->size()))
      outValues.reset();
  }
  if (outValues && static_cast<int64_t>(outValues->size()) > kMaxElements)
    outValues.reset();
  if (node->getNumResults() >= 1) {
    Facts &f = facts(node->getResult(0));
    f.shape = outShape;
    f.elements = outValues;
  }
  // Split: each piece's dimension along the axis.
  if (type == "Split" && in0) {
    int64_t axis = normalizedAxis(intAttr(node, "axis").value_or(0), in0->size());
    std::optional<SmallVector<int64_t>> sizes = intsAttr(node, "split");
    if (!sizes && n >= 2)
      sizes = intsOf(1);
    if (axis >= 0 && axis < static_cast<int64_t>(in0->size()))
      for (unsigned r = 0; r < node->getNumResults(); ++r) {
        SymDims dims = *in0;
        if (sizes && sizes->size() == node->getNumResults())
          dims[axis] = known((*sizes)[r]);
        else
          dims[axis] = divDims((*in0)[axis], known(node->getNumResults()));
        facts(node->getResult(r)).shape = dims;
      }
  }
  contribShapes(node);
}

// ONNX Runtime's contrib operators have no ONNX schema, so ONNX's inference leaves their outputs
// unshaped: the shapes their documentation gives, from their inputs' (what raising them needs
// to see the residual stream and the cache through them).
void SymbolicShapes::contribShapes(OnnxNodeOp node) {
  StringRef type = node.getOpType();
  const unsigned results = node->getNumResults();
  auto shapeOf = [&](unsigned i) { return operandShape(node, i); };
  auto setShape = [&](unsigned r, SymDims dims) {
    if (r < results && !isa<NoneType>(node->getResult(r).getType()))
      facts(node->getResult(r)).shape = std::move(dims);
  };
  if (type == "EmbedLayerNormalization") {
    // (input_ids [B, S], .., word_embedding [V, H], ..) -> output [B, S, H], mask_index [B],
    // embedding_sum [B, S, H].
    std::optional<SymDims> ids = shapeOf(0), table = shapeOf(2);
    if (ids && table && ids->size() == 2 && table->size() == 2) {
      SymDims rows{(*ids)[0], (*ids)[1], (*table)[1]};
      setShape(0, rows);
      setShape(1, SymDims{(*ids)[0]});
      setShape(2, rows);
    }
  } else if (type == "SkipLayerNormalization" || type == "SkipSimplifiedLayerNormalization") {
    // output and input_skip_bias_sum (the last output) have the input's shape.
    if (std::optional<SymDims> in = shapeOf(0)) {
      setShape(0, *in);
      if (results == 4)
        setShape(3, *in);
    }
  } else if (type == "Attention") {
    // (input [B, S, in], weights [in, q + k + v], .., past [2, B, heads, P, head_dim]) ->
    // output [B, S, v], present [2, B, heads, P + S, head_dim].
    std::optional<SymDims> in = shapeOf(0), weights = shapeOf(1), past = shapeOf(4);
    std::optional<int64_t> heads = intAttr(node, "num_heads");
    if (!in || !weights || in->size() != 3 || weights->size() != 2 || !heads || *heads <= 0)
      return;
    SymDim v = divDims((*weights)[1], known(3)), k = v;
    if (std::optional<SmallVector<int64_t>> sizes = intsAttr(node, "qkv_hidden_sizes");
        sizes && sizes->size() == 3) {
      k = known((*sizes)[1]);
      v = known((*sizes)[2]);
    }
    setShape(0, SymDims{(*in)[0], (*in)[1], v});
    SymDim total = (*in)[1];
    if (past && past->size() == 5)
      total = addDims((*past)[3], (*in)[1]);
    else if (past)
      return;
    setShape(1, SymDims{known(2), (*in)[0], known(*heads), total, divDims(k, known(*heads))});
  }
}

} // namespace hetc
