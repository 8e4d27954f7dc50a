#include "raise/RopeTables.h"

#include "import/OnnxGraph.h"

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
std::optional<std::vector<float>> RopeTables::values(Value v) const {
  if (auto constant = v.getDefiningOp<ConstantOp>()) {
    auto attr = dyn_cast<DenseElementsAttr>(constant.getValue());
    std::optional<SmallVector<double>> doubles = attr ? floatValues(attr) : std::nullopt;
    if (!doubles)
      return std::nullopt;
    return std::vector<float>(doubles->begin(), doubles->end());
  }
  auto weight = v.getDefiningOp<WeightOp>();
  const compiler::StoredWeight *stored =
      weight && weights_ ? weights_->find(weight.getName().str()) : nullptr;
  if (!stored || weight.getTransposed() || weight.getColumns())
    return std::nullopt;
  std::vector<float> out = stored->toFloats();
  if (out.empty())
    return std::nullopt;
  return out;
}

std::pair<SmallVector<double>, std::string> RopeTables::compute(Value cosTable, Value sinTable,
                                                               int64_t rotaryDim,
                                                               Width width) const {
  auto fail = [](std::string why) { return std::make_pair(SmallVector<double>{}, why); };
  auto type = dyn_cast<RankedTensorType>(cosTable.getType());
  auto sinType = dyn_cast<RankedTensorType>(sinTable.getType());
  if (!type || !sinType || !type.hasStaticShape() || sinType.getShape() != type.getShape())
    return fail("differ in shape or have no static shape");
  SmallVector<int64_t> shape;
  for (int64_t d : type.getShape())
    if (d != 1 || !shape.empty()) // leading ones are squeezed away before the rows are read
      shape.push_back(d);
  if (shape.size() != 2)
    return fail("are not [positions, columns] tables");
  const int64_t rows = shape[0], cols = shape[1], half = rotaryDim / 2;
  const int64_t expected = width == Width::Half ? half : rotaryDim;
  if (cols != expected)
    return fail("have " + std::to_string(cols) + " columns where a rotation of " +
                std::to_string(rotaryDim) + " columns has " + std::to_string(expected));
  if (rows < 2)
    return fail("have fewer than 2 positions");
  std::optional<std::vector<float>> c = values(cosTable), s = values(sinTable);
  if (!c || !s)
    return fail("have no values to read (without a weight store, as in hetc-opt, tables must be "
                "hetc.constant)");
  // Column i of frequency i: in the first half (Duplicated), at 2i (Pairs), or i (Half).
  const Type element = type.getElementType();
  const double valueTolerance = element.isBF16() ? 8e-3 : element.isF16() ? 1e-3 : 1e-4;
  const int fractionBits = element.isBF16() ? 7 : element.isF16() ? 10 : 23;
  auto same = [&](float a, float b) { return withinUlps(a, b, kRepeatedValueUlps, fractionBits); };
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
