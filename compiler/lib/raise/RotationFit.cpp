// The heads an attention reads, by their values.
//
// The region: every node between `heads4` and the one LLM value it reads (a projection's output,
// `flat`), through constants, weights, the positions and the shapes of other inputs. It is
// evaluated by the interpreter at positions 0..32 and at 2 far positions (after 4094 cached
// tokens, or fewer where a stored table is shorter), `flat` holding a basis vector in each head:
// head g of evaluation e holds column (e * G + g) mod D, so ceil(D / G) evaluations show where
// every column goes at every position, whatever the model's width. That per-position map is
// fitted to each catalogue entry, hetc.rope's rotate-half and interleaved pairs over the first R
// columns (R = 0: the heads split alone), their frequencies read from the map's cos and sin at
// 0..32 as RoPE tables' are (RopeTables::fromTables) and refined at the far positions, and the
// entry whose map is nearest is taken when it is within rounding at every position. Then the
// fit is checked on random inputs in every head at all those positions, so that heads that
// differ or mix, or frequencies that change with the length, are not taken for a rotation.
//
// Tolerance: 8 ulps of the region's element type (float16's at least: the interpreter computes
// in double) in each term, plus the float32 rounding of an exporter's angle p * f (4e-7 of the
// angle).
#include "raise/RotationFit.h"

#include "hetc/Dialect/HetcDialect.h"
#include "import/OnnxGraph.h"
#include "import/OnnxInterpreter.h"
#include "raise/RopeTables.h"
#include "raise/SampleInputs.h"
#include "raise/ScalarFunctions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

using namespace mlir;

namespace hetc {

namespace {

// Positions 0..32: the frequencies are refined at 1, 2, 4, ..., 32 (RopeTables::fromTables).
constexpr int64_t kPositions = 33;
// The far positions: kFarNew new tokens after the first of these many cached ones the region
// evaluates (a stored table may hold fewer positions than the largest).
constexpr int64_t kFarCached[] = {4094, 1022, 254, 62};
constexpr int64_t kFarNew = 2;
constexpr size_t kMaxRegionNodes = 256;
constexpr double kTermUlps = 8.0, kAngleRounding = 4e-7;

struct Region {
  SmallVector<Operation *> nodes; // in program order
  SmallVector<Value> read;        // the LLM values it reads
  Value positions;
  std::string positionsName;      // its name, for --explain
};

// The projection `read` are column pieces of, each piece's columns of it, and its width: the
// value itself when it is one; the pieces when they are linears of one input over views of one
// weight (hetc.weight `columns`, RaiseLinear's split of a head's columns into the rotated and
// the passed ones: GPT-J), which together take each of its columns once.
struct Projection {
  SmallVector<Value> pieces;
  SmallVector<SmallVector<int64_t>> columns; // per piece, the projection's column of each
  int64_t features = 0;
};

std::optional<Projection> projectionOf(ArrayRef<Value> read) {
  Projection projection;
  auto width = [](Value v) -> int64_t {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.getRank() == 3 && !type.isDynamicDim(2) &&
                   isa<FloatType>(type.getElementType())
               ? type.getDimSize(2)
               : -1;
  };
  if (read.size() == 1) {
    const int64_t n = width(read.front());
    if (n < 1)
      return std::nullopt;
    projection.pieces.push_back(read.front());
    projection.columns.emplace_back();
    for (int64_t j = 0; j < n; ++j)
      projection.columns.back().push_back(j);
    projection.features = n;
    return projection;
  }
  LinearOp first;
  for (Value v : read) {
    auto linear = v.getDefiningOp<LinearOp>();
    auto weight = linear ? linear.getW().getDefiningOp<WeightOp>() : WeightOp();
    std::optional<ArrayRef<int64_t>> columns = weight ? weight.getColumns() : std::nullopt;
    const int64_t n = width(v);
    if (!columns || linear.getBias() || n < 1)
      return std::nullopt;
    if (!first) {
      first = linear;
    } else {
      auto firstWeight = first.getW().getDefiningOp<WeightOp>();
      if (linear.getX() != first.getX() || weight.getName() != firstWeight.getName() ||
          weight.getTransposed() != firstWeight.getTransposed())
        return std::nullopt;
    }
    const int64_t begin = (*columns)[0], end = (*columns)[1];
    const int64_t period = columns->size() == 3 ? (*columns)[2] : 0;
    if (end <= begin || n % (end - begin) != 0)
      return std::nullopt;
    SmallVector<int64_t> taken;
    for (int64_t j = 0; j < n; ++j)
      taken.push_back(period ? (j / (end - begin)) * period + begin + j % (end - begin)
                             : begin + j);
    projection.pieces.push_back(v);
    projection.columns.push_back(std::move(taken));
    projection.features += n;
  }
  std::vector<bool> covered(projection.features, false);
  for (const SmallVector<int64_t> &taken : projection.columns)
    for (int64_t c : taken) {
      if (c < 0 || c >= projection.features || covered[c])
        return std::nullopt;
      covered[c] = true;
    }
  return projection;
}

// The region behind `heads4`, or nothing when it is not one to fit.
std::optional<Region> regionOf(Value heads4) {
  Operation *root = heads4.getDefiningOp();
  if (!root || !isa<OnnxNodeOp>(root))
    return std::nullopt;
  auto func = root->getParentOfType<func::FuncOp>();
  // Nodes whose values the region reads, and nodes only their shapes are read of: the LLM
  // values and inputs behind the latter (another head's projection, whose Shape bounds a
  // slice) do not count as read.
  DenseSet<Operation *> seen, shapeOnly;
  llvm::SetVector<Value> llmRead;
  llvm::SetVector<BlockArgument> inputsRead;
  SmallVector<std::pair<Value, bool>> work{{heads4, false}};
  while (!work.empty()) {
    auto [value, forShape] = work.pop_back_val();
    Operation *def = value.getDefiningOp();
    if (!def || isa<ConstantOp, WeightOp, OnnxNoneOp>(def))
      continue;
    if (!isa<OnnxNodeOp>(def) || def->getBlock() != root->getBlock())
      return std::nullopt;
    if (!(forShape ? shapeOnly : seen).insert(def).second)
      continue;
    if (seen.size() + shapeOnly.size() > kMaxRegionNodes)
      return std::nullopt;
    const bool dimensionsOnly = forShape || readsDimensionsOnly(def);
    for (Value operand : def->getOperands()) {
      if (auto arg = dyn_cast<BlockArgument>(operand)) {
        if (!dimensionsOnly)
          inputsRead.insert(arg);
      } else if (isa<LlmOp>(operand.getDefiningOp())) {
        if (!dimensionsOnly)
          llmRead.insert(operand);
      } else {
        work.push_back({operand, dimensionsOnly});
      }
    }
  }
  if (llmRead.empty())
    return std::nullopt;
  Region region;
  region.read.assign(llmRead.begin(), llmRead.end());
  for (BlockArgument arg : inputsRead) {
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "hetc.name");
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    // The positions, or what they may be computed from (the attention mask, the ids' length):
    // integer [batch, columns] inputs. A float input read by value (a past key) is not.
    if (!type || type.getRank() != 2 || !isa<IntegerType>(type.getElementType()))
      return std::nullopt;
    if (name && name.getValue() == "position_ids")
      region.positions = arg;
  }
  // One such input, not named as the mask or the ids, is taken for the positions: evaluated as
  // anything else, the fit would fail rather than read wrong ones.
  if (!region.positions && inputsRead.size() == 1) {
    auto name =
        func.getArgAttrOfType<StringAttr>(inputsRead.front().getArgNumber(), "hetc.name");
    if (!name || (name.getValue() != "attention_mask" && name.getValue() != "input_ids"))
      region.positions = inputsRead.front();
  }
  if (region.positions) {
    auto name = func.getArgAttrOfType<StringAttr>(
        cast<BlockArgument>(region.positions).getArgNumber(), "hetc.name");
    region.positionsName = name ? name.getValue().str()
                                : "graph input #" + std::to_string(cast<BlockArgument>(
                                                          region.positions).getArgNumber());
  }
  region.nodes.assign(seen.begin(), seen.end());
  llvm::sort(region.nodes, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return region;
}

// A catalogue entry: the first `rotary` columns of each head rotated in rotate-half or
// interleaved pairs (rotary 0: none).
struct Form {
  int64_t rotary = 0;
  bool interleaved = false;
  SmallVector<double> freqs;
  std::string why; // why it has no frequencies
  // The largest difference from the region over the tolerance, and where.
  double excess = std::numeric_limits<double>::infinity();
  double difference = 0.0;
  int64_t position = 0, column = 0, component = 0;

  std::string described(int64_t headDim) const {
    if (rotary == 0)
      return "no rotation";
    return std::string(interleaved ? "interleaved pairs" : "rotate-half") + " over " +
           (rotary == headDim ? "all " + std::to_string(headDim)
                              : std::to_string(rotary) + " of " + std::to_string(headDim)) +
           " columns";
  }
  // Column `c`'s partner and whether `c` is the pair's first (cos, then +sin at the partner).
  std::pair<int64_t, bool> pair(int64_t c) const {
    if (interleaved)
      return {c ^ 1, c % 2 == 0};
    const int64_t half = rotary / 2;
    return c < half ? std::make_pair(c + half, true) : std::make_pair(c - half, false);
  }
  int64_t frequencyOf(int64_t c) const { return interleaved ? c / 2 : c % (rotary / 2); }
  // The element `j` of head column `c`'s image at position p.
  double image(int64_t c, int64_t p, int64_t j) const {
    if (c >= rotary)
      return j == c ? 1.0 : 0.0;
    const double angle = static_cast<double>(p) * freqs[frequencyOf(c)];
    auto [partner, first] = pair(c);
    if (j == c)
      return std::cos(angle);
    if (j == partner)
      return first ? std::sin(angle) : -std::sin(angle);
    return 0.0;
  }
  double angleOf(int64_t c, int64_t p) const {
    return c < rotary ? static_cast<double>(p) * freqs[frequencyOf(c)] : 0.0;
  }
};

} // namespace

std::optional<RotationFit> fitRotation(Value heads4, const compiler::WeightStore *weights,
                                       std::string &why) {
  why.clear();
  std::optional<Region> region = regionOf(heads4);
  std::optional<Projection> projection =
      region ? projectionOf(region->read) : std::optional<Projection>();
  if (!projection)
    return std::nullopt;
  const int64_t features = projection->features;
  const Type element = cast<ShapedType>(heads4.getType()).getElementType();
  // The interpreter computes in double: a bf16 region's tables still round no worse than a
  // float16's, and a head that differs by more than that is not taken for a rotation.
  const double ulp = std::ldexp(1.0, -std::max(RopeTables::fractionBits(element), 10));
  const std::string nodes = fittedNodes(region->nodes.size(), nodeName(region->nodes.front()),
                                        nodeName(region->nodes.back()));
  const std::string regionText = regionNamed(region->nodes);

  auto func = heads4.getDefiningOp()->getParentOfType<func::FuncOp>();
  SampleEvaluator evaluator(func, region->positions, weights);
  ScopedEvaluationBudget budget(16 * kPositions * features);
  // The region for `x`, [1, s.seq, features] values of the projection.
  auto evaluate = [&](const Sample &s, const std::vector<double> &x) -> std::optional<Tensor> {
    DenseMap<Value, Tensor> given;
    for (auto [piece, columns] : llvm::zip(projection->pieces, projection->columns)) {
      Tensor t;
      t.elem = cast<ShapedType>(piece.getType()).getElementType();
      const int64_t n = static_cast<int64_t>(columns.size());
      t.shape = {s.batch, s.seq, n};
      t.resize(t.size());
      for (int64_t row = 0; row < s.batch * s.seq; ++row)
        for (int64_t j = 0; j < n; ++j)
          t.floats[row * n + j] = x[row * features + columns[j]];
      given[piece] = std::move(t);
    }
    std::string error;
    std::optional<Tensor> y = evaluator.evaluate(heads4, s, error, given);
    if (!y)
      why = regionText + " cannot be evaluated: the last " + error;
    else if (!y->isFloat())
      return std::nullopt;
    return y;
  };

  // The layout, from zeros: [1, heads, positions, head_dim], and nothing added.
  const Sample basisSample{kPositions, 0, 1, 0};
  std::optional<Tensor> zeros = evaluate(basisSample, std::vector<double>(kPositions * features));
  if (!zeros)
    return std::nullopt;
  if (zeros->shape.size() != 4 || zeros->shape[0] != 1 || zeros->shape[2] != kPositions) {
    why = regionText + " do not give [batch, heads, sequence, head_dim] for " +
          std::to_string(kPositions) + " tokens";
    return std::nullopt;
  }
  const int64_t outHeads = zeros->shape[1], headDim = zeros->shape[3];
  if (headDim < 1 || features % headDim != 0 || outHeads % (features / headDim) != 0) {
    why = regionText + " make " + std::to_string(outHeads) + " heads of " +
          std::to_string(headDim) + " from " + std::to_string(features) +
          " features, not each of a whole number of heads repeated alike";
    return std::nullopt;
  }
  const int64_t heads = features / headDim, broadcast = outHeads / heads;
  for (double v : zeros->floats)
    if (v != 0.0) {
      why = regionText + " add " + printed(v) + " to a zero input: not a rotation, which is linear";
      return std::nullopt;
    }

  // The far positions: a few new tokens after as many cached ones as the region evaluates (a
  // stored table may hold fewer positions than the largest candidate), so that the frequencies
  // are read and checked over thousands of positions, and frequencies that change with the
  // length are seen.
  std::optional<Sample> farSample;
  for (int64_t cached : kFarCached) {
    const Sample s{kFarNew, cached, 1, 0};
    why.clear();
    std::optional<Tensor> far = evaluate(s, std::vector<double>(kFarNew * features));
    if (far && far->shape == SmallVector<int64_t>{1, outHeads, kFarNew, headDim}) {
      farSample = s;
      break;
    }
  }
  why.clear();

  // Where each column of a head goes at each position: images[(c * P + k) * D + j] for the k-th
  // of `positions`, 0..32 then the far ones.
  SmallVector<int64_t> positions;
  for (int64_t p = 0; p < kPositions; ++p)
    positions.push_back(p);
  if (farSample)
    for (int64_t k = 0; k < farSample->seq; ++k)
      positions.push_back(farSample->past + k);
  const int64_t P = static_cast<int64_t>(positions.size()), D = headDim;
  std::vector<double> images(D * P * D, 0.0);
  SmallVector<Sample, 2> basisSamples{basisSample};
  if (farSample)
    basisSamples.push_back(*farSample);
  int64_t firstRow = 0;
  for (const Sample &s : basisSamples) {
    std::vector<bool> seenColumn(D, false);
    for (int64_t e = 0; e * heads < D; ++e) {
      std::vector<double> x(s.seq * features, 0.0);
      for (int64_t k = 0; k < s.seq; ++k)
        for (int64_t g = 0; g < heads; ++g)
          x[k * features + g * D + (e * heads + g) % D] = 1.0;
      std::optional<Tensor> y = evaluate(s, x);
      if (!y)
        return std::nullopt;
      for (int64_t h = 0; h < outHeads; ++h) {
        const int64_t c = (e * heads + h / broadcast) % D;
        if (seenColumn[c])
          continue;
        seenColumn[c] = true;
        for (int64_t k = 0; k < s.seq; ++k)
          for (int64_t j = 0; j < D; ++j)
            images[(c * P + firstRow + k) * D + j] = y->floats[(h * s.seq + k) * D + j];
      }
    }
    firstRow += s.seq;
  }
  auto at = [&](int64_t c, int64_t k, int64_t j) { return images[(c * P + k) * D + j]; };

  // A uniform scale, from position 0, where a rotation is the identity.
  const double scale = at(0, 0, 0);
  if (!(scale > 0.0)) {
    why = regionText + " give " + printed(scale) + " for column 0 of a head at position 0, " +
          "where a rotation keeps it (1, or a positive scale)";
    return std::nullopt;
  }
  for (double &v : images)
    v /= scale;
  // The two largest elements of each image off its own column, and where: what any pairing
  // leaves over is the largest not at the partner.
  struct OffDiagonal {
    double first = 0.0, second = 0.0;
    int64_t firstAt = -1, secondAt = -1;
  };
  std::vector<OffDiagonal> off(D * P);
  for (int64_t c = 0; c < D; ++c)
    for (int64_t k = 0; k < P; ++k) {
      OffDiagonal &o = off[c * P + k];
      for (int64_t j = 0; j < D; ++j) {
        const double v = std::fabs(at(c, k, j));
        if (j == c || !(v > o.second))
          continue;
        if (v > o.first) {
          o.second = o.first, o.secondAt = o.firstAt;
          o.first = v, o.firstAt = j;
        } else {
          o.second = v, o.secondAt = j;
        }
      }
    }

  // Each entry of the catalogue, nearest first.
  std::vector<Form> forms;
  forms.push_back(Form{});
  for (int64_t r = 2; r <= D; r += 2)
    for (bool interleaved : {false, true})
      if (!(interleaved && r == 2))
        forms.push_back(Form{r, interleaved});
  for (Form &form : forms) {
    if (form.rotary) {
      RopeTables::Table cosTable, sinTable;
      cosTable.shape = sinTable.shape = {kPositions, form.rotary / 2};
      for (int64_t k = 0; k < kPositions; ++k)
        for (int64_t i = 0; i < form.rotary / 2; ++i) {
          const int64_t a = form.interleaved ? 2 * i : i;
          cosTable.values.push_back(static_cast<float>(at(a, k, a)));
          sinTable.values.push_back(static_cast<float>(at(a, k, form.pair(a).first)));
        }
      auto [freqs, error] = RopeTables::fromTables(cosTable, sinTable, element, form.rotary,
                                                   RopeTables::Width::Half);
      if (!error.empty()) {
        form.why = error;
        continue;
      }
      // Refined at the far positions, each few enough turns from the estimate to count right.
      for (int64_t k = kPositions; k < P; ++k)
        for (int64_t i = 0; i < form.rotary / 2; ++i) {
          const int64_t a = form.interleaved ? 2 * i : i;
          const double p = static_cast<double>(positions[k]);
          const double wrapped = std::atan2(at(a, k, form.pair(a).first), at(a, k, a));
          const double turns = std::round((p * freqs[i] - wrapped) / (2 * M_PI));
          freqs[i] = (wrapped + 2 * M_PI * turns) / p;
        }
      form.freqs = freqs;
    }
    form.excess = 0.0;
    auto compare = [&](int64_t c, int64_t k, int64_t j, double got, double want,
                       double tolerance) {
      const double difference = std::fabs(got - want);
      if (!(difference <= form.excess * tolerance)) {
        form.excess = difference / tolerance;
        form.difference = difference;
        form.position = positions[k];
        form.column = c;
        form.component = j;
      }
    };
    for (int64_t c = 0; c < D; ++c)
      for (int64_t k = 0; k < P; ++k) {
        const int64_t p = positions[k];
        const double tolerance = kTermUlps * ulp + kAngleRounding * form.angleOf(c, p);
        compare(c, k, c, at(c, k, c), form.image(c, p, c), tolerance);
        int64_t partner = -1;
        if (c < form.rotary) {
          partner = form.pair(c).first;
          compare(c, k, partner, at(c, k, partner), form.image(c, p, partner), tolerance);
        }
        const OffDiagonal &o = off[c * P + k];
        const bool firstIsPartner = o.firstAt == partner;
        const int64_t j = firstIsPartner ? o.secondAt : o.firstAt;
        if (j >= 0)
          compare(c, k, j, at(c, k, j), 0.0, tolerance);
      }
  }
  std::stable_sort(forms.begin(), forms.end(),
                   [](const Form &a, const Form &b) { return a.excess < b.excess; });
  const Form &best = forms.front();
  if (!(best.excess <= 1.0)) {
    const bool noRotationReads = llvm::all_of(
        forms, [](const Form &f) { return f.rotary == 0 || std::isinf(f.excess); });
    if (noRotationReads && best.rotary == 0 && D >= 2) {
      // No pairing gave frequencies: say why for the whole head in rotate-half pairs.
      const Form &full = *llvm::find_if(forms, [&](const Form &f) {
        return f.rotary == D && !f.interleaved;
      });
      why = regionText + " are not a rotation of each head: no rotation differs from them by " +
            printed(best.difference) + " at position " + std::to_string(best.position) +
            ", and read as " + full.described(D) + ", their cos and sin " + full.why;
    } else {
      why = regionText + " are not a rotation of each head: the nearest, " + best.described(D) +
            ", differs from them by " + printed(best.difference) + " at position " +
            std::to_string(best.position) + ", where column " + std::to_string(best.column) +
            " of a head gives " +
            printed(at(best.column,
                       llvm::find(positions, best.position) - positions.begin(),
                       best.component) ) +
            " in column " + std::to_string(best.component) + " where the rotation gives " +
            printed(best.image(best.column, best.position, best.component));
    }
    return std::nullopt;
  }

  // The fit on random inputs in every head, at positions 0..32 and after cached tokens.
  std::mt19937_64 rng(0x5eed);
  std::uniform_real_distribution<double> magnitude(0.5, 1.5);
  double worst = 0.0;
  for (const Sample &s : basisSamples) {
    std::vector<double> x(s.seq * features);
    for (double &v : x)
      v = (rng() & 1 ? 1.0 : -1.0) * magnitude(rng);
    std::optional<Tensor> y = evaluate(s, x);
    if (!y)
      return std::nullopt;
    if (y->shape != SmallVector<int64_t>{1, outHeads, s.seq, D}) {
      why = regionText + " give another shape after " + std::to_string(s.past) + " cached tokens";
      return std::nullopt;
    }
    for (int64_t h = 0; h < outHeads; ++h)
      for (int64_t k = 0; k < s.seq; ++k) {
        const int64_t p = s.past + k;
        const double *in = &x[k * features + (h / broadcast) * D];
        for (int64_t j = 0; j < D; ++j) {
          double want = in[j] * best.image(j, p, j), terms = std::fabs(want);
          if (j < best.rotary) {
            // Column j receives its partner's sin term, with the sign the partner's image has.
            const int64_t partner = best.pair(j).first;
            const double fromPartner = in[partner] * best.image(partner, p, j);
            want += fromPartner;
            terms += std::fabs(fromPartner);
          }
          want *= scale;
          const double got = y->floats[(h * s.seq + k) * D + j];
          const double tolerance =
              scale * (kTermUlps * ulp * terms +
                       kAngleRounding * best.angleOf(j, p) * (std::fabs(in[j]) + terms)) +
              1e-30;
          const double excess = std::fabs(got - want) / tolerance;
          worst = std::max(worst, std::fabs(got - want) / std::max(scale * terms, 1e-30));
          if (!(excess <= 1.0)) {
            why = regionText + " are not " + best.described(D) +
                  " in every head: on a random input, head " + std::to_string(h) +
                  " gives " + printed(got) + " in column " + std::to_string(j) +
                  " at position " + std::to_string(p) + " where the rotation read from basis " +
                  "inputs gives " + printed(want);
            return std::nullopt;
          }
        }
      }
  }

  RotationFit fit;
  if (projection->pieces.size() == 1)
    fit.flat = projection->pieces.front();
  else
    fit.pieces = projection->pieces;
  fit.positions = region->positions;
  fit.heads = heads;
  fit.headDim = headDim;
  fit.broadcast = broadcast;
  fit.rotaryDim = best.rotary;
  fit.interleaved = best.interleaved;
  fit.scale = scale;
  fit.invFreq = best.freqs;
  std::string text = nodes + " " + std::to_string(heads) + (heads == 1 ? " head of " : " heads of ") +
                     std::to_string(D);
  if (broadcast > 1)
    text += " (each repeated " + std::to_string(broadcast) + " times)";
  text += best.rotary ? " rotated in " + best.described(D) + ", frequencies " +
                            printed(best.freqs.front()) + " to " + printed(best.freqs.back()) +
                            (region->positions ? " of '" + region->positionsName + "'"
                                               : std::string(" of the cache's positions"))
                      : ", not rotated";
  if (scale != 1.0)
    text += ", scaled by " + printed(scale, 6);
  text += "; within " + printed(worst) + " of the terms on random inputs at positions 0 to " +
          std::to_string(kPositions - 1);
  if (farSample)
    text += " and " + std::to_string(farSample->past) + " to " +
            std::to_string(farSample->past + farSample->seq - 1);
  if (forms.size() > 1) {
    const Form &next = forms[1];
    text += "; the next nearest, " + next.described(D) + ", " +
            (std::isinf(next.excess) ? std::string("has no frequencies")
                                     : "differs by " + printed(next.difference));
  }
  fit.described = text;
  return fit;
}

Value projectionValue(RotationFit &fit, OpBuilder &builder) {
  if (fit.flat)
    return fit.flat;
  Operation *earliest = fit.pieces.front().getDefiningOp();
  for (Value piece : fit.pieces)
    if (piece.getDefiningOp()->isBeforeInBlock(earliest))
      earliest = piece.getDefiningOp();
  auto piece = cast<LinearOp>(earliest);
  auto view = piece.getW().getDefiningOp<WeightOp>();
  auto viewType = cast<RankedTensorType>(view.getType());
  const int64_t features = fit.heads * fit.headDim;
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(earliest);
  auto whole = builder.create<WeightOp>(
      view.getLoc(),
      RankedTensorType::get({viewType.getDimSize(0), features}, viewType.getElementType()),
      view.getName());
  whole.setTransposed(view.getTransposed());
  fit.flat = builder.create<LinearOp>(piece->getLoc(),
                                      withFeatureSize(piece.getResult().getType(), features),
                                      piece.getX(), whole, Value());
  return fit.flat;
}

} // namespace hetc
