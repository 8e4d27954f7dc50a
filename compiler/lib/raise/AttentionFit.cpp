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
//    (two new tokens after 254 cached ones) the query is zero, so that the weights are
//    uniform over what the query sees, and the values are 1, j / T and (j / T)^2: their mean and
//    variance give the first and last key seen. A window wider than that is found by the
//    constant that offsets positions before a comparison and measured past it.
// 3. The scores: within a row, log p[j] - scale * (q . k[j]) is one constant. The scale is fitted
//    by least squares over every row and head, q rotated by the keys' fit at its position, k[j]
//    the cache the region returns (cached keys as given, new ones as the region rotated them),
//    and each log-weight must be within rounding of the line; else with a slope per head times
//    the key's position (ALiBi), else, or where the line fails at a loud sample (scores up to
//    32), with a soft-cap c * tanh(scale * q . k / c).
// 4. The check: random q, k, v and caches at five samples (two with a left-padded sequence,
//    whose padding keys the mask may hide or not, and whose padding rows hetc never computes)
//    and the loud one, the region's output against softmax(the fitted scores + the mask) v.
//
// Tolerance: 64 ulps of the region's float type relative to the magnitude compared. The
// interpreter computes in double, but a float16 file's stored constants and tables (its scale,
// its RoPE tables) are float16 numbers, which the fitted scale and rotation carry exactly.
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

// The far sample's cached keys (fewer where the region cannot be evaluated that far). Not
// thousands: a mask built over [keys, keys] (triu's) would cost gigabytes per layer there; a
// window wider than this is found by its constant (windowHint) and measured past it.
constexpr int64_t kFarCached[] = {254, 62};
constexpr int64_t kFarNew = 2;
constexpr double kUlps = 64.0;
// The loud sample's largest score: where a soft-cap bends the line by more than the tolerance.
constexpr double kLoudScore = 32.0;
// A weight below this is a hidden key: exp of a mask's -1e4 or finfo.min is 0 in double; a
// visible key's weight in these samples (queries drawn so that q . k is about 1) is far above.
constexpr double kHidden = 1e-20;

class RegionProbe {
public:
  RegionProbe(const AttentionRegion &r, const compiler::WeightStore *weights, std::string &why)
      : r_(r), evaluator_(r.out.getDefiningOp()->getParentOfType<func::FuncOp>(),
                          r.keys->positions, weights),
        why_(why), kvHeads_(r.keys->heads), cacheHeads_(r.keys->heads * r.keys->broadcast),
        headDim_(r.keys->headDim) {
    ulp_ = std::ldexp(1.0, -std::max(RopeTables::fractionBits(
                                         cast<ShapedType>(r.out.getType()).getElementType()),
                                     10));
  }

  std::optional<AttentionRegionFit> fit() {
    // The output's width may be unknown to the types (an Einsum's): the evaluations check it.
    const std::optional<int64_t> qFeatures = featureSize(r_.q.getType());
    const std::optional<int64_t> outFeatures = featureSize(r_.out.getType());
    if (!qFeatures || (outFeatures && *qFeatures != *outFeatures) || *qFeatures % headDim_ != 0)
      return fail("reads queries of " + shown(qFeatures) + " features and gives " +
                  shown(outFeatures) + ", not one number of heads of " +
                  std::to_string(headDim_) + " (the keys' head_dim)");
    heads_ = *qFeatures / headDim_;
    if (heads_ % kvHeads_ != 0)
      return fail(std::to_string(heads_) + " query heads do not group evenly over " +
                  std::to_string(kvHeads_) + " KV heads");
    if (cacheHeads_ != kvHeads_ && cacheHeads_ != heads_)
      return fail("cache each of " + std::to_string(kvHeads_) + " KV heads " +
                  std::to_string(cacheHeads_ / kvHeads_) + " times for " +
                  std::to_string(heads_) + " query heads: once, or once per query head");
    // The samples' tensors: caches repeated over the query heads for a batch of two and a few
    // keys, which a 70B model's 64 heads of 128 take past the interpreter's default.
    ScopedEvaluationBudget budget(
        std::max<int64_t>(evaluationBudget(), 2 * 8 * heads_ * headDim_ * 4));
    if (!weights() || !mask() || !scale() || !farMask() || !check())
      return std::nullopt;
    AttentionRegionFit result;
    result.heads = heads_;
    result.scale = scale_;
    result.window = window_;
    result.alibiSlopes.assign(slopes_.begin(), slopes_.end());
    result.softcap = softcap_;
    result.described =
        fittedNodes(r_.nodes.size(), nodeName(r_.nodes.front()), nodeName(r_.nodes.back())) +
        " an attention of " + std::to_string(heads_) + " query heads over " +
        std::to_string(kvHeads_) + " KV heads of " + std::to_string(headDim_) +
        ", its weights softmax(" +
        (softcap_ ? printed(*softcap_, 6) + " tanh(" + printed(scale_, 6) + " x q.k / " +
                        printed(*softcap_, 6) + ")"
                  : printed(scale_, 6) + " x q.k") +
        (slopes_.empty() ? std::string()
                         : " + ALiBi's slope x key position, slopes " + printed(slopes_.front(), 4) +
                               " to " + printed(slopes_.back(), 4)) +
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
  Tensor random(Value of, SmallVector<int64_t> shape, double deviation = 1.0) {
    Tensor t = zeros(of, std::move(shape));
    std::normal_distribution<double> normal(0.0, deviation);
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
            zeros(r_.pastK, {s.batch, cacheHeads_, s.past, headDim_}),
            zeros(r_.pastV, {s.batch, cacheHeads_, s.past, headDim_})};
  }
  Inputs randomInputs(const Sample &s) {
    const int64_t kvFeatures = kvHeads_ * headDim_;
    // Queries of deviation 1 / sqrt(head_dim): q . k about 1, whatever the width.
    return {random(r_.q, {s.batch, s.seq, heads_ * headDim_},
                   1.0 / std::sqrt(static_cast<double>(headDim_))),
            random(r_.k, {s.batch, s.seq, kvFeatures}), random(r_.v, {s.batch, s.seq, kvFeatures}),
            random(r_.pastK, {s.batch, cacheHeads_, s.past, headDim_}),
            random(r_.pastV, {s.batch, cacheHeads_, s.past, headDim_})};
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
    return {s.batch, cacheHeads_, s.past + s.seq, headDim_};
  }
  // The cache head query head h reads: its KV head's, or its own where the region caches each KV
  // head once per query head of its group (Falcon's new decoder architecture).
  int64_t cacheHeadOf(int64_t h) const {
    return cacheHeads_ == kvHeads_ ? h / (heads_ / kvHeads_) : h;
  }
  // Query row s of sequence b: its position as the region rotates it (the positions input counts
  // real tokens only, as SampleEvaluator writes it).
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
    inputs_ = randomInputs(small_);
    return weightsFor(inputs_, weights_);
  }
  // The weights for these q, k and caches (the values are the probe's), in `weights`.
  bool weightsFor(const Inputs &given, std::vector<double> &weights) {
    const int64_t total = small_.past + small_.seq;
    const int64_t chunks = (total + headDim_ - 1) / headDim_;
    SmallVector<SmallVector<double>> mass(heads_, SmallVector<double>(kvHeads_, 0.0));
    // byGroup[g][(h * seq + s) * total + j]
    SmallVector<std::vector<double>> byGroup(kvHeads_,
                                             std::vector<double>(heads_ * small_.seq * total));
    for (int64_t g = 0; g < kvHeads_; ++g)
      for (int64_t c = 0; c < chunks; ++c) {
        Inputs in = given;
        in.v = zeros(r_.v, {1, small_.seq, kvHeads_ * headDim_});
        in.pastV = zeros(r_.pastV, {1, cacheHeads_, small_.past, headDim_});
        const int64_t copies = cacheHeads_ / kvHeads_;
        for (int64_t j = c * headDim_; j < std::min(total, (c + 1) * headDim_); ++j) {
          const int64_t column = j - c * headDim_;
          if (j < small_.past)
            for (int64_t head = g * copies; head < (g + 1) * copies; ++head)
              in.pastV.floats[(head * small_.past + j) * headDim_ + column] = 1.0;
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
    weights.assign(heads_ * small_.seq * total, 0.0);
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
                  weights.begin() + h * small_.seq * total);
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

  // Per row of the small sample: q . k[j], log p[j] and j for each key it sees.
  struct Row {
    int64_t head;
    SmallVector<double> dots, logs, keys;
  };
  SmallVector<Row> rowsFor(const std::vector<double> &weights, const Tensor &q) const {
    const int64_t total = small_.past + small_.seq;
    auto weightOf = [&](int64_t h, int64_t s, int64_t j) {
      return weights[(h * small_.seq + s) * total + j];
    };
    SmallVector<Row> rows;
    for (int64_t h = 0; h < heads_; ++h)
      for (int64_t s = 0; s < small_.seq; ++s) {
        SmallVector<double> rotated = rotatedQuery(q, 0, s, h, small_.seq, small_.past + s);
        double largest = 0.0;
        for (int64_t j = 0; j < total; ++j)
          largest = std::max(largest, weightOf(h, s, j));
        Row row{h, {}, {}, {}};
        for (int64_t j = 0; j < total; ++j) {
          // Weights far below the row's largest carry their float type's rounding in their log.
          if (weightOf(h, s, j) <= 1e-6 * largest)
            continue;
          const double *k = keys_.floats.data() + (cacheHeadOf(h) * total + j) * headDim_;
          double dot = 0.0;
          for (int64_t d = 0; d < headDim_; ++d)
            dot += rotated[d] * k[d];
          row.dots.push_back(dot);
          row.logs.push_back(std::log(weightOf(h, s, j)));
          row.keys.push_back(static_cast<double>(j));
        }
        if (row.dots.size() >= 2)
          rows.push_back(std::move(row));
      }
    return rows;
  }
  // A row's logits as the fit computes them, less their mean (a softmax ignores a row's constant).
  SmallVector<double> fittedLogits(const Row &row) const {
    SmallVector<double> logits;
    double mean = 0.0;
    for (size_t i = 0; i < row.dots.size(); ++i) {
      double x = scale_ * row.dots[i];
      if (softcap_)
        x = *softcap_ * std::tanh(x / *softcap_);
      logits.push_back(x + (slopes_.empty() ? 0.0 : slopes_[row.head] * row.keys[i]));
      mean += logits.back() / static_cast<double>(row.dots.size());
    }
    for (double &x : logits)
      x -= mean;
    return logits;
  }
  // The largest distance of a log-weight (less its row's mean) from the fit, past the tolerance.
  struct Miss {
    double excess = 0.0, got = 0.0, want = 0.0, sumOfSquares = 0.0;
  };
  Miss worst(ArrayRef<Row> rows) const {
    Miss miss;
    for (const Row &row : rows) {
      SmallVector<double> want = fittedLogits(row);
      double meanLog = 0.0;
      for (double l : row.logs)
        meanLog += l / static_cast<double>(row.logs.size());
      for (size_t i = 0; i < want.size(); ++i) {
        const double got = row.logs[i] - meanLog;
        miss.sumOfSquares += (got - want[i]) * (got - want[i]);
        double excess = std::fabs(got - want[i]) - kUlps * ulp_ * (4.0 + std::fabs(want[i]));
        if (std::isnan(excess))
          excess = INFINITY;
        if (excess > miss.excess) {
          miss.excess = excess;
          miss.got = got;
          miss.want = want[i];
        }
      }
    }
    return miss;
  }

  // Step 3: the scale, by least squares over every visible key of every row; where that line
  // does not hold, with a slope per query head times the key's position (ALiBi).
  bool scale() {
    std::optional<Tensor> keys = evaluate(r_.presentK, small_, inputs_, cacheShape(small_));
    if (!keys)
      return false;
    keys_ = std::move(*keys);
    SmallVector<Row> rows = rowsFor(weights_, inputs_.q);
    rowsFitted_ = static_cast<int64_t>(rows.size());
    if (rows.empty())
      return failed("let no query see two keys" + small_.described() +
                    ", so that its scale cannot be read");
    // Sums over every row of products of d, l and j less their row's means.
    double dl = 0.0, dd = 0.0;
    SmallVector<double> jl(heads_, 0.0), jd(heads_, 0.0), jj(heads_, 0.0);
    for (const Row &row : rows) {
      const double n = static_cast<double>(row.dots.size());
      double md = 0.0, ml = 0.0, mj = 0.0;
      for (size_t i = 0; i < row.dots.size(); ++i) {
        md += row.dots[i] / n;
        ml += row.logs[i] / n;
        mj += row.keys[i] / n;
      }
      for (size_t i = 0; i < row.dots.size(); ++i) {
        const double d = row.dots[i] - md, l = row.logs[i] - ml, j = row.keys[i] - mj;
        dl += d * l;
        dd += d * d;
        jl[row.head] += j * l;
        jd[row.head] += j * d;
        jj[row.head] += j * j;
      }
    }
    if (!(dd > 0.0))
      return failed("give keys that q . k does not tell apart" + small_.described());
    scale_ = dl / dd;
    const Miss alone = worst(rows);
    if (alone.excess > 0.0) {
      // With a slope per head: minimise sum (l - scale d - slope[h] j)^2. Each slope follows from
      // the scale (slope[h] = (sum_h j l - scale sum_h j d) / sum_h j^2); the scale from the rest.
      double numerator = dl, denominator = dd;
      for (int64_t h = 0; h < heads_; ++h)
        if (jj[h] > 0.0) {
          numerator -= jd[h] * jl[h] / jj[h];
          denominator -= jd[h] * jd[h] / jj[h];
        }
      const double scaleAlone = scale_;
      scale_ = denominator > 0.0 ? numerator / denominator : 0.0;
      slopes_.assign(heads_, 0.0);
      for (int64_t h = 0; h < heads_; ++h)
        slopes_[h] = jj[h] > 0.0 ? (jl[h] - scale_ * jd[h]) / jj[h] : 0.0;
      const Miss withSlopes = worst(rows);
      if (withSlopes.excess > 0.0 ||
          llvm::all_of(slopes_, [](double slope) { return slope == 0.0; })) {
        // Neither: perhaps a soft-cap, which the scores at this sample barely reach.
        slopes_.clear();
        scale_ = scaleAlone;
        if (softCap(rows))
          return true;
        return failed(
            "weight keys by a softmax of scores that are not a scale of q.k: with the scale " +
            printed(scaleAlone, 6) + " fitted over " + std::to_string(rows.size()) +
            " rows, a log-weight relative to its row's mean is " + printed(alone.got, 6) +
            " where the scale gives " + printed(alone.want, 6) +
            ", with a slope per head times the key's position (ALiBi) " +
            printed(withSlopes.got, 6) + " where that fit gives " + printed(withSlopes.want, 6) +
            softCapWhy_ + " (queries rotated otherwise than the keys are not read by values)");
      }
    }
    if (!(scale_ > 0.0))
      return failed("weight keys by a softmax of " + printed(scale_) +
                    " x q.k: a scale that is not positive");
    // The scores reach 32 at the loud sample: a soft-cap the small one could not tell from a
    // line shows there (Gemma 2's 50 gives 28.3).
    if (!softcap_ && !loudRows().empty()) {
      SmallVector<Row> loud = loudRows();
      if (worst(loud).excess > 0.0) {
        if (!slopes_.empty())
          return failed("weight keys by a softmax of ALiBi's scores where they are small, but "
                        "not where they reach " + printed(kLoudScore) +
                        " (a soft-cap with ALiBi is not read by values)");
        if (!softCap(loud))
          return failed("weight keys by a softmax of scores that are a scale of q.k where they "
                        "are small, but not where they reach " + printed(kLoudScore) +
                        softCapWhy_);
      }
    }
    return true;
  }
  // The rows at the loud sample: q scaled so that the largest score is kLoudScore (memoised).
  SmallVector<Row> loudRows() {
    if (loudDone_)
      return loud_;
    loudDone_ = true;
    double largest = 0.0;
    for (const Row &row : rowsFor(weights_, inputs_.q))
      for (double d : row.dots)
        largest = std::max(largest, std::fabs(scale_ * d));
    if (!(largest > 0.0))
      return loud_;
    loudInputs_ = inputs_;
    for (double &x : loudInputs_.q.floats)
      x *= kLoudScore / largest;
    std::vector<double> weights;
    const std::string before = why_;
    if (!weightsFor(loudInputs_, weights)) {
      why_ = before;
      return loud_;
    }
    loud_ = rowsFor(weights, loudInputs_.q);
    return loud_;
  }
  // A soft-cap c * tanh(scale * q.k / c) (Gemma 2) fitted to the loud sample's rows (or these,
  // where the small sample's scores already reach it): the scale and the cap by least squares,
  // from a grid of caps, then refined; the fit must hold at both samples.
  bool softCap(ArrayRef<Row> seen) {
    SmallVector<Row> loud = loudRows();
    ArrayRef<Row> rows = loud.empty() ? seen : ArrayRef<Row>(loud);
    const double scale0 = scale_;
    double bestScale = scale0, bestCap = 0.0, bestError = INFINITY;
    auto error = [&](double scale, double cap) {
      scale_ = scale;
      softcap_ = cap;
      return worst(rows).sumOfSquares;
    };
    for (double cap = 0.5; cap < 2e4; cap *= 1.25)
      for (double f = 0.8; f <= 1.25; f *= 1.01)
        if (double e = error(scale0 * f, cap); e < bestError) {
          bestError = e;
          bestScale = scale0 * f;
          bestCap = cap;
        }
    // Refine by coordinate steps that halve when neither direction improves.
    double stepScale = 0.01 * bestScale, stepCap = 0.125 * bestCap;
    for (int i = 0; i < 200 && (stepScale > 1e-12 * bestScale || stepCap > 1e-12 * bestCap); ++i) {
      bool improved = false;
      for (auto [ds, dc] : {std::pair{stepScale, 0.0}, std::pair{-stepScale, 0.0},
                            std::pair{0.0, stepCap}, std::pair{0.0, -stepCap}})
        if (bestCap + dc > 0.0)
          if (double e = error(bestScale + ds, bestCap + dc); e < bestError) {
            bestError = e;
            bestScale += ds;
            bestCap += dc;
            improved = true;
          }
      if (!improved) {
        stepScale /= 2.0;
        stepCap /= 2.0;
      }
    }
    scale_ = bestScale;
    softcap_ = bestCap;
    const Miss atLoud = worst(rows), atSmall = worst(seen);
    if (atLoud.excess > 0.0 || atSmall.excess > 0.0) {
      const Miss &miss = atLoud.excess > 0.0 ? atLoud : atSmall;
      softCapWhy_ = ", and with a soft-cap (the nearest, " + printed(bestCap, 6) + " * tanh(" +
                    printed(bestScale, 6) + " q.k / " + printed(bestCap, 6) + ")) " +
                    printed(miss.got, 6) + " where that gives " + printed(miss.want, 6);
      scale_ = scale0;
      softcap_.reset();
      return false;
    }
    return true;
  }

  // What a key adds to a query head's logit beside the scaled product: ALiBi's slope x position.
  double positionBias(int64_t h, int64_t key) const {
    return slopes_.empty() ? 0.0 : slopes_[h] * static_cast<double>(key);
  }

  // Step 2, far: a uniform query over hundreds of keys, its first and last key seen from the
  // mean and variance of the values 1, j / T, (j / T)^2. Past a window the region names by a
  // constant (windowHint) too, so that a window of any width is measured.
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
    // The caches repeated over the query heads, or a [keys, keys] mask (triu's), with room for
    // the few such tensors a node reads at once; at most 2^25 elements, never below the default.
    ScopedEvaluationBudget budget(std::max<int64_t>(
        evaluationBudget(),
        std::min<int64_t>(std::max<int64_t>(4 * heads_ * total * headDim_, 4 * total * total),
                          int64_t{1} << 25)));
    Inputs in = zeroInputs(s);
    auto valueAt = [&](int64_t j, int64_t d) {
      const double x = static_cast<double>(j) / static_cast<double>(total);
      return d == 0 ? 1.0 : d == 1 ? x : x * x;
    };
    for (int64_t d = 0; d < 3; ++d) {
      for (int64_t c = 0; c < cacheHeads_; ++c)
        for (int64_t j = 0; j < s.past; ++j)
          in.pastV.floats[(c * s.past + j) * headDim_ + d] = valueAt(j, d);
      for (int64_t g = 0; g < kvHeads_; ++g)
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
        if (!slopes_.empty()) {
          // Weights exp(slope x j) over the keys the mask shows: the moments they give.
          double sum = 0.0, want[3] = {0.0, 0.0, 0.0};
          for (int64_t j = 0; j <= position; ++j) {
            if (hides(j, position, 0))
              continue;
            const double w = std::exp(positionBias(h, j) - positionBias(h, position));
            sum += w;
            for (int64_t d = 0; d < 3; ++d)
              want[d] += w * valueAt(j, d);
          }
          for (int64_t d = 0; d < 3; ++d)
            if (!(std::fabs(o[d] - want[d] / sum) <=
                  kUlps * ulp_ * (1.0 + std::fabs(want[d] / sum))))
              return failed("give a query that is zero, at position " +
                            std::to_string(position) + s.described() + ", " + printed(o[d], 6) +
                            " in column " + std::to_string(d) + " where ALiBi's slope " +
                            printed(slopes_[h], 6) + " of head " + std::to_string(h) + " gives " +
                            printed(want[d] / sum, 6));
          continue;
        }
        const double mean = o[1] / o[0], spread = o[2] / o[0] - mean * mean;
        const double seen = std::sqrt(std::max(0.0, 12.0 * spread * t * t + 1.0));
        const double first = mean * t - (seen - 1.0) / 2.0, last = first + seen - 1.0;
        // Uniform weights over keys first..last give these moments; others give ends that are
        // not whole keys, or the wrong last one.
        if (!(std::fabs(o[0] - 1.0) <= kUlps * ulp_ && std::fabs(last - position) <= 0.25 &&
              std::fabs(first - std::round(first)) <= 0.25))
          return failed("give a query that is zero, at position " + std::to_string(position) +
                        s.described() + ", weights that are not uniform over the keys up to " +
                        "its own (their moments give keys " + printed(first, 6) + " to " +
                        printed(last, 6) + ")");
        firstSeen.push_back({position, static_cast<int64_t>(std::round(first))});
      }
    return slopes_.empty() ? seenAsMasked(firstSeen, s) : true;
  }

  // Step 4: the whole attention on random inputs.
  bool check() {
    // Chunks after cached tokens, one token, a prefill; left padding of a cached key and of a new
    // one (its row is padding, which hetc never computes).
    SmallVector<Sample> samples{{3, 2, 1, 0}, {1, 4, 1, 0}, {3, 0, 1, 0}};
    if (!evaluator_.fixedBatchOfOne()) {
      samples.push_back({3, 2, 2, 1});
      samples.push_back({3, 0, 2, 1});
    }
    // The loud sample too: scores up to kLoudScore, where a soft-cap shows.
    std::optional<Inputs> loud = loudInputs_.q.floats.empty()
                                     ? std::optional<Inputs>()
                                     : std::optional<Inputs>(loudInputs_);
    if (loud)
      samples.push_back(small_);
    for (auto [index, s] : llvm::enumerate(samples)) {
      const int64_t total = s.past + s.seq;
      const bool isLoud = loud && index + 1 == samples.size();
      Inputs in = isLoud ? *loud : randomInputs(s);
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
            const int64_t c = cacheHeadOf(h);
            SmallVector<double> q =
                rotatedQuery(in.q, b, row, h, s.seq, positionOf(s, b, row));
            // The row softmax(scores + mask) v gives, the padding keys hidden or not: hetc never
            // pads, so a mask may leave them visible (as the mask probe allows).
            auto expected = [&](bool hidePadding) {
              SmallVector<double> logits(total, -INFINITY);
              double largest = -INFINITY;
              for (int64_t j = 0; j < total; ++j) {
                if (hides(j, key, hidePadding ? padding : 0))
                  continue;
                const double *k =
                    keys->floats.data() + ((b * cacheHeads_ + c) * total + j) * headDim_;
                double dot = 0.0;
                for (int64_t d = 0; d < headDim_; ++d)
                  dot += q[d] * k[d];
                double score = scale_ * dot;
                if (softcap_)
                  score = *softcap_ * std::tanh(score / *softcap_);
                logits[j] = score + positionBias(h, j);
                largest = std::max(largest, logits[j]);
              }
              double sum = 0.0;
              for (double &x : logits) {
                x = std::isinf(x) ? 0.0 : std::exp(x - largest);
                sum += x;
              }
              SmallVector<double> want(headDim_, 0.0);
              for (int64_t d = 0; d < headDim_; ++d)
                for (int64_t j = 0; j < total; ++j)
                  want[d] += logits[j] / sum *
                             values->floats[((b * cacheHeads_ + c) * total + j) * headDim_ + d];
              return want;
            };
            const double *got = out->floats.data() + ((b * s.seq + row) * heads_ + h) * headDim_;
            // The first column past the tolerance (or -1) and the largest difference.
            auto compare = [&](ArrayRef<double> want) {
              std::pair<int64_t, double> result{-1, 0.0};
              for (int64_t d = 0; d < headDim_; ++d) {
                const double difference = std::fabs(got[d] - want[d]);
                result.second = std::max(result.second, difference);
                if (result.first == -1 &&
                    !(difference <= kUlps * ulp_ * (1.0 + std::fabs(want[d]))))
                  result.first = d;
              }
              return result;
            };
            const SmallVector<double> want = expected(/*hidePadding=*/true);
            auto [column, difference] = compare(want);
            if (column != -1 && padding > 0) {
              auto [visibleColumn, visibleDifference] = compare(expected(false));
              if (visibleColumn == -1) {
                column = -1;
                difference = visibleDifference;
              }
            }
            largestDifference_ = std::max(largestDifference_, difference);
            if (column != -1)
              return failed("give " + printed(got[column], 6) + " at query head " +
                            std::to_string(h) + ", column " + std::to_string(column) +
                            " of the query at position " + std::to_string(key) + s.described() +
                            (isLoud ? " (q scaled so that the scores reach " +
                                          printed(kLoudScore) + ")"
                                    : std::string()) +
                            " where softmax(" + printed(scale_, 6) + " x q.k" +
                            (softcap_ ? " soft-capped at " + printed(*softcap_, 6) : "") +
                            " + the mask" + (slopes_.empty() ? "" : " + ALiBi") + ") v gives " +
                            printed(want[column], 6));
          }
        }
    }
    return true;
  }

  const AttentionRegion &r_;
  SampleEvaluator evaluator_;
  std::string &why_;
  int64_t heads_ = 0, kvHeads_, cacheHeads_, headDim_;
  double ulp_ = 0.0;
  std::mt19937 rng_{20261129};
  const Sample small_{3, 2, 1, 0};
  Inputs inputs_;
  std::vector<double> weights_; // p[h][s][j] at small_
  std::optional<int64_t> window_;
  double scale_ = 0.0;
  SmallVector<double> slopes_; // ALiBi's, per query head; empty: none
  std::optional<double> softcap_;
  std::string softCapWhy_; // why no soft-cap fits, for the refusal
  Tensor keys_;            // the keys' cache at the small sample
  bool loudDone_ = false;
  Inputs loudInputs_;      // the small sample's inputs, q scaled so that scores reach kLoudScore
  SmallVector<Row> loud_;
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
      region.keys->heads != region.values->heads ||
      region.keys->broadcast != region.values->broadcast || region.values->rotaryDim != 0 ||
      region.values->scale != 1.0) {
    why = "the keys and values are not heads of one head_dim, cached alike, the values unscaled";
    return std::nullopt;
  }
  return RegionProbe(region, weights, why).fit();
}

} // namespace hetc
