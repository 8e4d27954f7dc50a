#include "raise/RopeTables.h"

#include "import/OnnxGraph.h"
#include "import/OnnxInterpreter.h"
#include "raise/SampleInputs.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace hetc {

namespace {

// Whether a and b are within `ulps` units in the last place of the table's element type (23, 10
// or 7 fraction bits) at the larger magnitude. Tables written by someone else's library need not
// repeat a value bit for bit: PyTorch's vectorised cos gives the two halves of one
// cat((freqs, freqs)) table values one ulp apart.
bool withinUlps(float a, float b, int ulps, int fractionBits) {
  if (a == b)
    return true;
  const double magnitude = std::max(std::fabs(a), std::fabs(b));
  // The spacing of numbers near `magnitude`, with a floor at float32's smallest normal.
  const double ulp = std::ldexp(1.0, std::max(std::ilogb(magnitude), -126) - fractionBits);
  return std::fabs(static_cast<double>(a) - b) <= ulps * ulp;
}

constexpr int kRepeatedValueUlps = 4;

} // namespace

std::optional<SmallVector<double>> RopeTables::recover(Value cos, Value sin, int64_t rotaryDim,
                                                       Width width, std::string &why) {
  auto key = std::make_tuple(cos.getAsOpaquePointer(), sin.getAsOpaquePointer(), rotaryDim, width);
  auto [it, inserted] = recovered_.try_emplace(key);
  if (inserted)
    it->second = compute(cos, sin, rotaryDim, width);
  if (!it->second.second.empty()) {
    why = it->second.second;
    return std::nullopt;
  }
  return it->second.first;
}

// A weight's or constant's elements as floats; nothing without a weight store (hetc-opt).
std::optional<RopeTables::Table> RopeTables::stored(Value v) const {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return std::nullopt;
  Table t;
  for (int64_t d : type.getShape())
    if (d != 1 || !t.shape.empty()) // leading ones are squeezed away before the rows are read
      t.shape.push_back(d);
  if (auto constant = v.getDefiningOp<ConstantOp>()) {
    auto attr = dyn_cast<DenseElementsAttr>(constant.getValue());
    std::optional<SmallVector<double>> doubles = attr ? floatValues(attr) : std::nullopt;
    if (!doubles)
      return std::nullopt;
    t.values.assign(doubles->begin(), doubles->end());
    return t;
  }
  auto weight = v.getDefiningOp<WeightOp>();
  const compiler::StoredWeight *weightData =
      weight && weights_ ? weights_->find(weight.getName().str()) : nullptr;
  if (!weightData || weight.getTransposed() || weight.getColumns())
    return std::nullopt;
  t.values = weightData->toFloats();
  if (t.values.empty())
    return std::nullopt;
  return t;
}

std::optional<RopeTables::Table> RopeTables::evaluated(Value v, int64_t rows,
                                                       std::string &why) const {
  auto func = v.getParentRegion()->getParentOfType<func::FuncOp>();
  if (!func)
    return std::nullopt;
  // The table spans the cache and the new tokens: `rows` positions in all.
  SampleEvaluator evaluator(func, {}, weights_);
  std::string error;
  std::optional<Tensor> t = evaluator.evaluate(v, Sample{2, rows - 2, 1, 0}, error);
  if (!t || !t->isFloat()) {
    why = t ? "are not floats" : "are computed by the graph, but " + error;
    return std::nullopt;
  }
  Table table;
  for (int64_t d : t->shape)
    if (d != 1 || !table.shape.empty())
      table.shape.push_back(d);
  table.values.assign(t->floats.begin(), t->floats.end());
  return table;
}

std::pair<SmallVector<double>, std::string> RopeTables::compute(Value cosTable, Value sinTable,
                                                               int64_t rotaryDim,
                                                               Width width) const {
  auto fail = [](std::string why) { return std::make_pair(SmallVector<double>{}, why); };
  auto type = dyn_cast<TensorType>(cosTable.getType());
  auto sinType = dyn_cast<TensorType>(sinTable.getType());
  if (!type || !sinType)
    return fail("have no tensor type");
  const Type element = type.getElementType();
  std::optional<Table> c = stored(cosTable), s = stored(sinTable);
  if (c && s)
    return fromTables(*c, *s, element, rotaryDim, width);
  const bool computed = !cosTable.getDefiningOp<WeightOp>() && !cosTable.getDefiningOp<ConstantOp>() &&
                        computedFromInputs(cosTable) && computedFromInputs(sinTable);
  if (!computed) {
    auto ranked = dyn_cast<RankedTensorType>(type);
    if (!ranked || !ranked.hasStaticShape() || sinType != type)
      return fail("differ in shape or have no static shape");
    return fail("have no values to read (without a weight store, as in hetc-opt, tables must be "
                "hetc.constant)");
  }
  // Evaluated for 64 and 40 positions: the same frequencies, or they depend on the length.
  SmallVector<double> first;
  for (int64_t rows : {64, 40}) {
    std::string why;
    std::optional<Table> ct = evaluated(cosTable, rows, why), st = evaluated(sinTable, rows, why);
    if (!ct || !st)
      return fail(why);
    auto [freqs, error] = fromTables(*ct, *st, element, rotaryDim, width);
    if (!error.empty())
      return fail("are computed by the graph and, evaluated for " + std::to_string(rows) +
                  " positions, " + error);
    if (first.empty()) {
      first = freqs;
      continue;
    }
    for (size_t i = 0; i < freqs.size(); ++i)
      if (std::fabs(freqs[i] - first[i]) > 1e-6 * std::max(1.0, std::fabs(first[i])))
        return fail("are computed by the graph with frequencies that depend on the length (column " +
                    std::to_string(i) + ": " + printed(first[i]) + " over 64 positions, " +
                    printed(freqs[i]) + " over 40): dynamic RoPE scaling, which hetc does not run");
  }
  return {first, std::string()};
}

std::pair<SmallVector<double>, std::string>
RopeTables::fromTables(const Table &cTable, const Table &sTable, Type element, int64_t rotaryDim,
                       Width width) {
  auto fail = [](std::string why) { return std::make_pair(SmallVector<double>{}, why); };
  if (cTable.shape != sTable.shape)
    return fail("differ in shape");
  const SmallVector<int64_t> &shape = cTable.shape;
  if (shape.size() != 2)
    return fail("are not [positions, columns] tables");
  const int64_t rows = shape[0], cols = shape[1], half = rotaryDim / 2;
  const int64_t expected = width == Width::Half ? half : rotaryDim;
  if (cols != expected)
    return fail("have " + std::to_string(cols) + " columns where a rotation of " +
                std::to_string(rotaryDim) + " columns has " + std::to_string(expected));
  if (rows < 2)
    return fail("have fewer than 2 positions");
  const std::vector<float> *c = &cTable.values, *s = &sTable.values;
  // Column i of frequency i: in the first half (Duplicated), at 2i (Pairs), or i (Half).
  const double valueTolerance = element.isBF16() ? 8e-3 : element.isF16() ? 1e-3 : 1e-4;
  auto same = [&](float a, float b) {
    return withinUlps(a, b, kRepeatedValueUlps, fractionBits(element));
  };
  auto at = [&](const std::vector<float> &t, int64_t p, int64_t i) {
    return t[p * cols + (width == Width::Pairs ? 2 * i : i)];
  };
  auto raw = [&](const std::vector<float> &t, int64_t p, int64_t i) { return t[p * cols + i]; };
  if (width == Width::Pairs)
    for (int64_t p = 0; p < rows; ++p)
      for (int64_t i = 0; i < half; ++i)
        if (!same(raw(*c, p, 2 * i), raw(*c, p, 2 * i + 1)) ||
            !same(raw(*s, p, 2 * i), raw(*s, p, 2 * i + 1)))
          return fail("differ within the pair of columns " + std::to_string(2 * i) + " and " +
                      std::to_string(2 * i + 1) + " at position " + std::to_string(p) +
                      ": not each frequency twice (within " + std::to_string(kRepeatedValueUlps) +
                      " ulps), as interleaved RoPE repeats them");
  if (width == Width::Duplicated)
    for (int64_t p = 0; p < rows; ++p)
      for (int64_t i = 0; i < half; ++i)
        if (!same(raw(*c, p, i), raw(*c, p, i + half)) || !same(raw(*s, p, i), raw(*s, p, i + half)))
          return fail("differ between their two halves at position " + std::to_string(p) +
                      ", column " + std::to_string(i) + " by more than " +
                      std::to_string(kRepeatedValueUlps) +
                      " ulps: not Concat(f, f) of rotate-half RoPE");
  SmallVector<double> freqs(half);
  const int64_t last = rows - 1;
  for (int64_t i = 0; i < half; ++i) {
    if (std::fabs(at(*c, 0, i) - 1.0) > valueTolerance || std::fabs(at(*s, 0, i)) > valueTolerance)
      return fail("hold cos " + printed(at(*c, 0, i)) + " and sin " + printed(at(*s, 0, i)) +
                  " at position 0, column " + std::to_string(i) +
                  "; a RoPE table holds 1 and 0 there (a scaled table is not supported)");
    // Row 1 gives the angle; rows 2, 4, 8, ... and the last refine it, each multiple few enough
    // times the previous estimate's error to count its turns right, even from a float16 table.
    double f = std::atan2(at(*s, 1, i), at(*c, 1, i));
    for (int64_t row = 2;; row = std::min(2 * row, last)) {
      if (row > last)
        break;
      const double wrapped = std::atan2(at(*s, row, i), at(*c, row, i));
      const double turns = std::round((row * f - wrapped) / (2 * M_PI));
      f = (wrapped + 2 * M_PI * turns) / static_cast<double>(row);
      if (row == last)
        break;
    }
    freqs[i] = f;
    if (!(freqs[i] > 0.0))
      return fail("have no positive frequency in column " + std::to_string(i));
  }
  for (int64_t p = 0; p < rows; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * freqs[i];
      // The tables' own float32 angle p * f rounds by up to half an ulp of itself; a float16
      // table's values round to 2^-11 of their magnitude, a bfloat16 table's to 2^-8.
      const double tolerance = valueTolerance + 4e-7 * angle;
      if (std::fabs(at(*c, p, i) - std::cos(angle)) > tolerance ||
          std::fabs(at(*s, p, i) - std::sin(angle)) > tolerance)
        return fail("hold cos " + printed(at(*c, p, i)) + ", sin " + printed(at(*s, p, i)) +
                    " at position " + std::to_string(p) + ", column " + std::to_string(i) +
                    " where frequency " + printed(freqs[i]) + " gives " +
                    printed(std::cos(angle)) + ", " + printed(std::sin(angle)) +
                    ": not cos and sin of position x frequency");
    }
  return {freqs, std::string()};
}

} // namespace hetc
