// An attention read by its values.
//
// The region is evaluated by the interpreter with the query, key and value projections and the
// past caches given, and compared with what hetc.attention computes: each query head h, rotated
// as the keys are (the keys' fit, RotationFit.h), attends to one KV head with
// softmax(scale * q . k + mask) over the cached and new keys, and the heads merge back in order.
//
// 1. The weights. The values are one-hot: KV head g's value at key j is the basis vector of
//    column j mod D (D = head_dim), over ceil(T / D) evaluations of T keys, zero in the other
//    heads. Each output column then holds one weight, p[h, s, j], and the KV head each query
//    head reads is the one whose evaluations move it; hetc groups query heads evenly, h / n.
// 2. The mask: which weights are zero. A query at position p must see keys up to p and none after
//    them, and either all before (causal) or the last W (a sliding window). At a far sample
//    (two new tokens after up to 4094 cached ones) the query is zero, so that the weights are
//    uniform over what the query sees, and the values are 1, j / T and (j / T)^2: their mean and
//    variance give the first and last key seen, so a window of thousands of keys is read too.
// 3. The scale: within a row, log p[j] - scale * (q . k[j]) is one constant. It is fitted by
//    least squares over every row and head, q rotated by the keys' fit at its position, k[j] the
//    cache the region returns (cached keys as given, new ones as the region rotated them), and
//    each log-weight must be within rounding of the line.
// 4. The check: random q, k, v and caches at three samples (one with a left-padded sequence,
//    whose padding keys the mask must hide and whose padding rows hetc never computes), the
//    region's output against softmax(scale * q . k + causal mask) v.
//
// Tolerance: 64 ulps of the region's float type relative to the magnitude compared (the
// interpreter computes in double; a float16 file rounds where its Casts say).
#include "raise/AttentionFit.h"

#include "hetc/Dialect/HetcDialect.h"
#include "import/OnnxGraph.h"
#include "import/OnnxInterpreter.h"
#include "raise/RopeTables.h"
#include "raise/SampleInputs.h"
#include "raise/ScalarFunctions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <cmath>
#include <random>

using namespace mlir;

namespace hetc {

namespace {

constexpr int64_t kFarCached[] = {4094, 1022, 254, 62};
constexpr int64_t kFarNew = 2;
constexpr double kUlps = 64.0;
// A weight below this is a hidden key: exp of a mask's -1e4 or finfo.min is 0 in double; a
// visible key's weight in these samples is above 1e-12.
constexpr double kHidden = 1e-20;

class RegionProbe {
public:
  RegionProbe(const AttentionRegion &r, const compiler::WeightStore *weights, std::string &why)
      : r_(r), evaluator_(r.out.getDefiningOp()->getParentOfType<func::FuncOp>(),
                          r.keys->positions, weights),
        why_(why), kvHeads_(r.keys->heads), headDim_(r.keys->headDim) {
    ulp_ = std::ldexp(1.0, -std::max(RopeTables::fractionBits(
                                         cast<ShapedType>(r.out.getType()).getElementType()),
                                     10));
  }

  std::optional<AttentionRegionFit> fit() {
    const std::optional<int64_t> qFeatures = featureSize(r_.q.getType());
    const std::optional<int64_t> outFeatures = featureSize(r_.out.getType());
    if (!qFeatures || !outFeatures || *qFeatures != *outFeatures || *qFeatures % headDim_ != 0)
      return fail("reads queries of " + shown(qFeatures) + " features and gives " +
                  shown(outFeatures) + ", not one number of heads of " +
                  std::to_string(headDim_) + " (the keys' head_dim)");
    heads_ = *qFeatures / headDim_;
    if (heads_ % kvHeads_ != 0)
      return fail(std::to_string(heads_) + " query heads do not group evenly over " +
                  std::to_string(kvHeads_) + " KV heads");
    if (!weights() || !mask() || !scale() || !farMask() || !check())
      return std::nullopt;
    AttentionRegionFit result;
    result.heads = heads_;
    result.scale = scale_;
    result.window = window_;
    result.described =
        fittedNodes(r_.nodes.size(), nodeName(r_.nodes.front()), nodeName(r_.nodes.back())) +
        " an attention of " + std::to_string(heads_) + " query heads over " +
        std::to_string(kvHeads_) + " KV heads of " + std::to_string(headDim_) +
        ", its weights softmax(" + printed(scale_, 6) + " x q.k" +
        (window_ ? " + a causal mask over the last " + std::to_string(*window_) + " keys"
                 : std::string(" + a causal mask")) +
        ") read at " + std::to_string(rowsFitted_) + " rows, its output within " +
        printed(largestDifference_, 2) + " of that on random inputs";
    return result;
  }

private:
  static std::string shown(std::optional<int64_t> n) {
    return n ? std::to_string(*n) : std::string("an unknown number of");
  }
  std::nullopt_t fail(std::string text) {
    if (why_.empty())
      why_ = regionNamed(r_.nodes) + " " + std::move(text);
    return std::nullopt;
  }
  bool failed(std::string text) {
    fail(std::move(text));
    return false;
  }

  Tensor zeros(Value of, SmallVector<int64_t> shape) const {
    Tensor t;
    t.elem = cast<ShapedType>(of.getType()).getElementType();
    t.shape = std::move(shape);
    t.resize(t.size());
    return t;
  }
  Tensor random(Value of, SmallVector<int64_t> shape) {
    Tensor t = zeros(of, std::move(shape));
    std::normal_distribution<double> normal(0.0, 1.0);
    for (double &x : t.floats)
      x = normal(rng_);
    return t;
  }
  // The inputs of a sample: q, k, v [batch, seq, features] and the caches [batch, kv, past, D].
  struct Inputs {
    Tensor q, k, v, pastK, pastV;
  };
  Inputs zeroInputs(const Sample &s) const {
    const int64_t kvFeatures = kvHeads_ * headDim_;
    return {zeros(r_.q, {s.batch, s.seq, heads_ * headDim_}),
            zeros(r_.k, {s.batch, s.seq, kvFeatures}), zeros(r_.v, {s.batch, s.seq, kvFeatures}),
            zeros(r_.pastK, {s.batch, kvHeads_, s.past, headDim_}),
            zeros(r_.pastV, {s.batch, kvHeads_, s.past, headDim_})};
  }
  Inputs randomInputs(const Sample &s) {
    const int64_t kvFeatures = kvHeads_ * headDim_;
    return {random(r_.q, {s.batch, s.seq, heads_ * headDim_}),
            random(r_.k, {s.batch, s.seq, kvFeatures}), random(r_.v, {s.batch, s.seq, kvFeatures}),
            random(r_.pastK, {s.batch, kvHeads_, s.past, headDim_}),
            random(r_.pastV, {s.batch, kvHeads_, s.past, headDim_})};
  }
  // `what` of the region at sample `s`, of `shape`.
  std::optional<Tensor> evaluate(Value what, const Sample &s, const Inputs &in,
                                 ArrayRef<int64_t> shape) {
    DenseMap<Value, Tensor> given{{r_.q, in.q},         {r_.k, in.k},
                                  {r_.v, in.v},         {r_.pastK, in.pastK},
                                  {r_.pastV, in.pastV}};
    std::string error;
    std::optional<Tensor> t = evaluator_.evaluate(what, s, error, given);
    if (!t) {
      fail("cannot be evaluated" + s.described() + ": the last " + error);
      return std::nullopt;
    }
    if (!t->isFloat() || SmallVector<int64_t>(shape) != t->shape) {
      fail("give a result of another shape than [" + joined(shape) + "]" + s.described());
      return std::nullopt;
    }
    return t;
  }
  static std::string joined(ArrayRef<int64_t> shape) {
    std::string text;
    for (int64_t d : shape)
      text += (text.empty() ? "" : ", ") + std::to_string(d);
    return text;
  }
  SmallVector<int64_t> outShape(const Sample &s) const {
    return {s.batch, s.seq, heads_ * headDim_};
  }
  SmallVector<int64_t> cacheShape(const Sample &s) const {
    return {s.batch, kvHeads_, s.past + s.seq, headDim_};
  }
  // Query row s of sequence b: its position as the region rotates it (the positions input counts
  // real tokens only, as SampleEvaluator writes it) and whether hetc computes it (not padding).
  int64_t positionOf(const Sample &s, int64_t b, int64_t row) const {
    return s.past + row - (r_.keys->positions && b == 0 ? s.padded : 0);
  }
  static int64_t paddingOf(const Sample &s, int64_t b) { return b == 0 ? s.padded : 0; }
  // The query head's columns, rotated as the keys are at `position`.
  SmallVector<double> rotatedQuery(const Tensor &q, int64_t b, int64_t row, int64_t h,
                                   int64_t seq, int64_t position) const {
    const RotationFit &fit = *r_.keys;
    const double *x = q.floats.data() + ((b * seq + row) * heads_ + h) * headDim_;
    SmallVector<double> y(x, x + headDim_);
    const int64_t rotary = fit.rotaryDim, half = rotary / 2;
    for (int64_t c = 0; c < rotary; ++c) {
      const int64_t partner = fit.interleaved ? (c ^ 1) : (c < half ? c + half : c - half);
      const bool first = fit.interleaved ? c % 2 == 0 : c < half;
      const double angle = static_cast<double>(position) *
                           fit.invFreq[fit.interleaved ? c / 2 : c % half];
      y[c] = x[c] * std::cos(angle) + (first ? -x[partner] : x[partner]) * std::sin(angle);
    }
    return y;
  }
  bool hides(int64_t key, int64_t position, int64_t padding) const {
    return key > position || key < padding || (window_ && key <= position - *window_);
  }

  // Step 1: p[h][s][j] at a sample of three new tokens after two cached ones.
  bool weights() {
    const int64_t total = small_.past + small_.seq;
    const int64_t chunks = (total + headDim_ - 1) / headDim_;
    inputs_ = randomInputs(small_);
    SmallVector<SmallVector<double>> mass(heads_, SmallVector<double>(kvHeads_, 0.0));
    // byGroup[g][(h * seq + s) * total + j]
    SmallVector<std::vector<double>> byGroup(kvHeads_,
                                             std::vector<double>(heads_ * small_.seq * total));
    for (int64_t g = 0; g < kvHeads_; ++g)
      for (int64_t c = 0; c < chunks; ++c) {
        Inputs in = inputs_;
        in.v = zeros(r_.v, {1, small_.seq, kvHeads_ * headDim_});
        in.pastV = zeros(r_.pastV, {1, kvHeads_, small_.past, headDim_});
        for (int64_t j = c * headDim_; j < std::min(total, (c + 1) * headDim_); ++j) {
          const int64_t column = j - c * headDim_;
          if (j < small_.past)
            in.pastV.floats[(g * small_.past + j) * headDim_ + column] = 1.0;
          else
            in.v.floats[(j - small_.past) * kvHeads_ * headDim_ + g * headDim_ + column] = 1.0;
        }
        std::optional<Tensor> out = evaluate(r_.out, small_, in, outShape(small_));
        if (!out)
          return false;
        for (int64_t h = 0; h < heads_; ++h)
          for (int64_t s = 0; s < small_.seq; ++s)
            for (int64_t j = c * headDim_; j < std::min(total, (c + 1) * headDim_); ++j) {
              const double p = out->floats[(s * heads_ + h) * headDim_ + j - c * headDim_];
              byGroup[g][(h * small_.seq + s) * total + j] = p;
              mass[h][g] += p;
            }
      }
    const int64_t perGroup = heads_ / kvHeads_;
    const double rows = static_cast<double>(small_.seq);
    weights_.assign(heads_ * small_.seq * total, 0.0);
    for (int64_t h = 0; h < heads_; ++h) {
      int64_t read = -1;
      for (int64_t g = 0; g < kvHeads_; ++g) {
        if (std::fabs(mass[h][g] - rows) <= kUlps * ulp_ * rows) {
          read = read == -1 ? g : -2;
        } else if (std::fabs(mass[h][g]) > kUlps * ulp_ * rows) {
          return failed("weight the values of query head " + std::to_string(h) +
                        " by weights that sum to " + printed(mass[h][g] / rows, 4) +
                        " per query over KV head " + std::to_string(g) +
                        ": not a softmax over one KV head's keys");
        }
      }
      if (read < 0)
        return failed("weight the values of query head " + std::to_string(h) +
                      (read == -1 ? " by no KV head's" : " by several KV heads'") +
                      " keys: hetc's attention reads one");
      if (read != h / perGroup)
        return failed("read KV head " + std::to_string(read) + " for query head " +
                      std::to_string(h) + "; hetc's attention groups the " +
                      std::to_string(heads_) + " query heads in order, " +
                      std::to_string(perGroup) + " per KV head (head " + std::to_string(h) +
                      " reads " + std::to_string(h / perGroup) + ")");
      std::copy_n(byGroup[read].begin() + h * small_.seq * total, small_.seq * total,
                  weights_.begin() + h * small_.seq * total);
    }
    return true;
  }
  double weightAt(int64_t h, int64_t s, int64_t j) const {
    const int64_t total = small_.past + small_.seq;
    return weights_[(h * small_.seq + s) * total + j];
  }

  // Step 2: the keys each query sees at the small sample: from its first seen key to itself.
  bool mask() {
    const int64_t total = small_.past + small_.seq;
    SmallVector<std::pair<int64_t, int64_t>> firstSeen; // (position, first key seen)
    for (int64_t h = 0; h < heads_; ++h)
      for (int64_t s = 0; s < small_.seq; ++s) {
        const int64_t position = small_.past + s;
        int64_t first = -1;
        for (int64_t j = 0; j < total; ++j) {
          const double p = weightAt(h, s, j);
          if (p < -kUlps * ulp_)
            return failed("give query head " + std::to_string(h) + " a weight of " +
                          printed(p) + " on key " + std::to_string(j) + ": not a softmax");
          const bool seen = p > kHidden;
          if (seen && j > position)
            return failed("let the query at position " + std::to_string(position) +
                          " see key " + std::to_string(j) + " after it" + small_.described() +
                          ": not a causal mask");
          if (seen && first == -1)
            first = j;
          if (!seen && first != -1 && j <= position)
            return failed("hide key " + std::to_string(j) + " from the query at position " +
                          std::to_string(position) + " and show it key " +
                          std::to_string(first) + " before" + small_.described() +
                          ": not a causal mask, nor one over a window");
        }
        if (first == -1 || weightAt(h, s, position) <= kHidden)
          return failed("hide from the query at position " + std::to_string(position) +
                        " its own key" + small_.described() + ": not a causal mask");
        firstSeen.push_back({position, first});
      }
    return seenAsMasked(firstSeen, small_);
  }
  // Whether each query's first seen key is the causal mask's (0) or one window's, the window read
  // from the first query that does not see key 0.
  bool seenAsMasked(ArrayRef<std::pair<int64_t, int64_t>> firstSeen, const Sample &s) {
    for (auto [position, first] : firstSeen)
      if (first > 0 && !window_)
        window_ = position - first + 1;
    for (auto [position, first] : firstSeen) {
      const int64_t want = window_ ? std::max<int64_t>(0, position - *window_ + 1) : 0;
      if (first != want)
        return failed("let the query at position " + std::to_string(position) + s.described() +
                      " see keys from " + std::to_string(first) + " on, where " +
                      (window_ ? "a window of " + std::to_string(*window_) + " keys"
                               : std::string("a causal mask")) +
                      " shows keys from " + std::to_string(want));
    }
    return true;
  }

  // Step 3: the scale, by least squares over every visible key of every row.
  bool scale() {
    const int64_t total = small_.past + small_.seq;
    std::optional<Tensor> keys = evaluate(r_.presentK, small_, inputs_, cacheShape(small_));
    if (!keys)
      return false;
    const int64_t perGroup = heads_ / kvHeads_;
    struct Row {
      SmallVector<double> dots, logs;
    };
    SmallVector<Row> rows;
    double covariance = 0.0, variance = 0.0;
    for (int64_t h = 0; h < heads_; ++h)
      for (int64_t s = 0; s < small_.seq; ++s) {
        const int64_t position = small_.past + s;
        SmallVector<double> q = rotatedQuery(inputs_.q, 0, s, h, small_.seq, position);
        double largest = 0.0;
        for (int64_t j = 0; j < total; ++j)
          largest = std::max(largest, weightAt(h, s, j));
        Row row;
        for (int64_t j = 0; j < total; ++j) {
          // Weights far below the row's largest carry their float type's rounding in their log.
          if (weightAt(h, s, j) <= 1e-6 * largest)
            continue;
          const double *k =
              keys->floats.data() + ((h / perGroup) * total + j) * headDim_;
          double dot = 0.0;
          for (int64_t d = 0; d < headDim_; ++d)
            dot += q[d] * k[d];
          row.dots.push_back(dot);
          row.logs.push_back(std::log(weightAt(h, s, j)));
        }
        if (row.dots.size() < 2)
          continue;
        const double n = static_cast<double>(row.dots.size());
        double meanDot = 0.0, meanLog = 0.0;
        for (size_t i = 0; i < row.dots.size(); ++i) {
          meanDot += row.dots[i] / n;
          meanLog += row.logs[i] / n;
        }
        for (size_t i = 0; i < row.dots.size(); ++i) {
          row.dots[i] -= meanDot;
          row.logs[i] -= meanLog;
          covariance += row.dots[i] * row.logs[i];
          variance += row.dots[i] * row.dots[i];
        }
        rows.push_back(std::move(row));
      }
    if (rows.empty() || variance <= 0.0)
      return failed("let no query see two keys" + small_.described() +
                    ", so that its scale cannot be read");
    scale_ = covariance / variance;
    rowsFitted_ = static_cast<int64_t>(rows.size());
    if (!(scale_ > 0.0))
      return failed("weight keys by a softmax of " + printed(scale_) +
                    " x q.k: a scale that is not positive");
    for (const Row &row : rows)
      for (size_t i = 0; i < row.dots.size(); ++i) {
        const double want = scale_ * row.dots[i];
        if (std::fabs(row.logs[i] - want) > kUlps * ulp_ * (4.0 + std::fabs(want)))
          return failed("weight keys by a softmax of scores that are not a scale of q.k: "
                        "with the scale " + printed(scale_, 6) + " fitted over " +
                        std::to_string(rows.size()) + " rows, a log-weight relative to its "
                        "row's mean is " + printed(row.logs[i], 6) + " where the scale gives " +
                        printed(want, 6) +
                        " (a soft-cap, a position bias or queries rotated otherwise than the "
                        "keys are not read by values)");
      }
    return true;
  }

  // Step 2, far: a uniform query over thousands of keys, its first and last key seen from the
  // mean and variance of the values 1, j / T, (j / T)^2. Past a window the region names by a
  // constant (windowHint) too, so that a window wider than thousands of keys is measured.
  bool farMask() {
    if (headDim_ < 3)
      return failed("have heads of " + std::to_string(headDim_) +
                    " columns, too few to read the mask at far positions by values");
    if (r_.windowHint) {
      const Sample s{kFarNew, *r_.windowHint + 2, 1, 0};
      std::optional<bool> seen = farSample(s);
      if (!seen)
        return failed("offset positions by " + std::to_string(*r_.windowHint) +
                      " (a sliding window) but cannot be evaluated" + s.described());
      if (!*seen)
        return false;
      if (!window_)
        return failed("offset positions by " + std::to_string(*r_.windowHint) +
                      " but hide no key" + s.described());
    }
    for (int64_t cached : kFarCached)
      if (std::optional<bool> seen = farSample(Sample{kFarNew, cached, 1, 0}))
        return *seen;
    return true; // no far sample evaluates: the small one's mask stands, as the mask probe's
  }
  // Whether the keys seen at far sample `s` are the mask's; nothing when the region cannot be
  // evaluated there (a stored buffer may hold fewer positions: the caller tries fewer).
  std::optional<bool> farSample(const Sample &s) {
    const int64_t total = s.past + s.seq;
    // The caches repeated over the query heads, or a [keys, keys] mask (triu's): bounded at
    // 2^25 elements (a Llama-3-8B's 32 heads of 128 at 8192 keys).
    ScopedEvaluationBudget budget(std::min<int64_t>(
        std::max<int64_t>(4 * heads_ * total * headDim_, 4 * total * total), int64_t{1} << 25));
    Inputs in = zeroInputs(s);
    auto valueAt = [&](int64_t j, int64_t d) {
      const double x = static_cast<double>(j) / static_cast<double>(total);
      return d == 0 ? 1.0 : d == 1 ? x : x * x;
    };
    for (int64_t g = 0; g < kvHeads_; ++g)
      for (int64_t d = 0; d < 3; ++d) {
        for (int64_t j = 0; j < s.past; ++j)
          in.pastV.floats[(g * s.past + j) * headDim_ + d] = valueAt(j, d);
        for (int64_t j = 0; j < s.seq; ++j)
          in.v.floats[j * kvHeads_ * headDim_ + g * headDim_ + d] = valueAt(s.past + j, d);
      }
    const std::string before = why_;
    std::optional<Tensor> out = evaluate(r_.out, s, in, outShape(s));
    if (!out) {
      why_ = before;
      return std::nullopt;
    }
    const double t = static_cast<double>(total);
    SmallVector<std::pair<int64_t, int64_t>> firstSeen;
    for (int64_t h = 0; h < heads_; ++h)
      for (int64_t row = 0; row < s.seq; ++row) {
        const double *o = out->floats.data() + (row * heads_ + h) * headDim_;
        const int64_t position = s.past + row;
        const double mean = o[1] / o[0], spread = o[2] / o[0] - mean * mean;
        const double seen = std::sqrt(std::max(0.0, 12.0 * spread * t * t + 1.0));
        const double first = mean * t - (seen - 1.0) / 2.0, last = first + seen - 1.0;
        // Uniform weights over keys first..last give these moments; others give ends that are
        // not whole keys, or the wrong last one.
        if (std::fabs(o[0] - 1.0) > kUlps * ulp_ || std::fabs(last - position) > 0.25 ||
            std::fabs(first - std::round(first)) > 0.25)
          return failed("give a query that is zero, at position " + std::to_string(position) +
                        s.described() + ", weights that are not uniform over the keys up to " +
                        "its own (their moments give keys " + printed(first, 6) + " to " +
                        printed(last, 6) + ")");
        firstSeen.push_back({position, static_cast<int64_t>(std::round(first))});
      }
    return seenAsMasked(firstSeen, s);
  }

  // Step 4: the whole attention on random inputs.
  bool check() {
    SmallVector<Sample> samples{{3, 2, 1, 0}, {1, 4, 1, 0}};
    if (!evaluator_.fixedBatchOfOne())
      samples.push_back({3, 2, 2, 1});
    const int64_t perGroup = heads_ / kvHeads_;
    for (const Sample &s : samples) {
      const int64_t total = s.past + s.seq;
      Inputs in = randomInputs(s);
      std::optional<Tensor> out = evaluate(r_.out, s, in, outShape(s));
      std::optional<Tensor> keys =
          out ? evaluate(r_.presentK, s, in, cacheShape(s)) : std::nullopt;
      std::optional<Tensor> values =
          keys ? evaluate(r_.presentV, s, in, cacheShape(s)) : std::nullopt;
      if (!values)
        return false;
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t row = 0; row < s.seq; ++row) {
          const int64_t key = s.past + row, padding = paddingOf(s, b);
          if (key < padding)
            continue; // a padding row: hetc never computes one
          for (int64_t h = 0; h < heads_; ++h) {
            const int64_t g = h / perGroup;
            SmallVector<double> q =
                rotatedQuery(in.q, b, row, h, s.seq, positionOf(s, b, row));
            SmallVector<double> logits(total, -INFINITY);
            double largest = -INFINITY;
            for (int64_t j = 0; j < total; ++j) {
              if (hides(j, key, padding))
                continue;
              const double *k = keys->floats.data() + ((b * kvHeads_ + g) * total + j) * headDim_;
              double dot = 0.0;
              for (int64_t d = 0; d < headDim_; ++d)
                dot += q[d] * k[d];
              logits[j] = scale_ * dot;
              largest = std::max(largest, logits[j]);
            }
            double sum = 0.0;
            for (double &x : logits) {
              x = std::isinf(x) ? 0.0 : std::exp(x - largest);
              sum += x;
            }
            for (int64_t d = 0; d < headDim_; ++d) {
              double want = 0.0;
              for (int64_t j = 0; j < total; ++j)
                want += logits[j] / sum *
                        values->floats[((b * kvHeads_ + g) * total + j) * headDim_ + d];
              const double got =
                  out->floats[((b * s.seq + row) * heads_ + h) * headDim_ + d];
              const double difference = std::fabs(got - want);
              largestDifference_ = std::max(largestDifference_, difference);
              if (difference > kUlps * ulp_ * (1.0 + std::fabs(want)))
                return failed("give " + printed(got, 6) + " at query head " + std::to_string(h) +
                              ", column " + std::to_string(d) + " of the query at position " +
                              std::to_string(key) + s.described() + " where softmax(" +
                              printed(scale_, 6) + " x q.k + the mask) v gives " +
                              printed(want, 6));
            }
          }
        }
    }
    return true;
  }

  const AttentionRegion &r_;
  SampleEvaluator evaluator_;
  std::string &why_;
  int64_t heads_ = 0, kvHeads_, headDim_;
  double ulp_ = 0.0;
  std::mt19937 rng_{20261129};
  const Sample small_{3, 2, 1, 0};
  Inputs inputs_;
  std::vector<double> weights_; // p[h][s][j] at small_
  std::optional<int64_t> window_;
  double scale_ = 0.0;
  int64_t rowsFitted_ = 0;
  double largestDifference_ = 0.0;
};

} // namespace

std::optional<AttentionRegionFit> fitAttentionRegion(const AttentionRegion &region,
                                                     const compiler::WeightStore *weights,
                                                     std::string &why) {
  why.clear();
  if (region.nodes.empty() || !region.keys || !region.values ||
      region.keys->headDim != region.values->headDim ||
      region.keys->heads != region.values->heads || region.keys->broadcast != 1 ||
      region.values->broadcast != 1 || region.values->rotaryDim != 0) {
    why = "the keys and values are not heads of one head_dim, each cached once";
    return std::nullopt;
  }
  return RegionProbe(region, weights, why).fit();
}

} // namespace hetc
