// The interpreter's second half: reductions, normalizations, softmax, activations, selections
// (ArgMax, TopK, GatherElements, GatherND, ScatterElements), Split, Gemm, and the ONNX Runtime
// contrib operators exporters write (SimplifiedLayerNormalization, SkipLayerNormalization,
// SkipSimplifiedLayerNormalization, EmbedLayerNormalization, FastGelu, Gelu, RotaryEmbedding),
// each as the ONNX or ONNX Runtime documentation defines it. Floats are computed in double and rounded once where a result
// becomes a constant; ONNX Runtime computes in float32, and tests/e2e/ort/check_interpreter.py
// holds every op here to it within float32's rounding of the sums involved.
#include "InterpreterSupport.h"
#include "OnnxGraph.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;

namespace hetc::interpreter {
namespace {

using Results = SmallVector<Tensor>;

int64_t product(ArrayRef<int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
}

Tensor filled(ArrayRef<int64_t> shape, Type elem) {
  Tensor t;
  t.shape.assign(shape.begin(), shape.end());
  t.elem = elem;
  t.resize(t.size());
  return t;
}

double geluErf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double geluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

class NnInterpreter {
public:
  NnInterpreter(OnnxNodeOp op, ArrayRef<Tensor> inputs) : op_(op), in_(inputs) {}

  std::optional<Results> run() {
    if (in_.empty() || !in_[0].elem)
      return std::nullopt;
    StringRef type = op_.getOpType();
    if (type.starts_with("Reduce"))
      return reduce(type);
    if (type == "Softmax" || type == "LogSoftmax")
      return softmax(type == "LogSoftmax");
    if (type == "LayerNormalization" || type == "SimplifiedLayerNormalization" ||
        type == "SkipLayerNormalization" || type == "SkipSimplifiedLayerNormalization")
      return normalization(type);
    if (type == "Gelu" || type == "FastGelu")
      return gelu(type == "FastGelu");
    if (type == "EmbedLayerNormalization")
      return embedLayerNorm();
    if (type == "RotaryEmbedding")
      return rotaryEmbedding();
    if (type == "Clip")
      return clip();
    if (type == "Sign" || type == "IsNaN" || type == "IsInf")
      return elementwise(type);
    if (type == "Xor")
      return exclusiveOr();
    if (type == "GatherElements")
      return gatherElements();
    if (type == "GatherND")
      return gatherNd();
    if (type == "ScatterElements")
      return scatterElements();
    if (type == "ArgMax" || type == "ArgMin")
      return argExtreme(type == "ArgMax");
    if (type == "TopK")
      return topK();
    if (type == "CastLike")
      return present(1) ? std::optional<Results>(Results{castTo(in_[0], in_[1].elem)})
                        : std::nullopt;
    if (type == "Flatten")
      return flatten();
    if (type == "Dropout")
      return dropout();
    if (type == "Split")
      return split();
    if (type == "Gemm")
      return gemm();
    return std::nullopt;
  }

private:
  bool present(size_t i) const { return i < in_.size() && in_[i].elem; }
  MLIRContext *ctx() { return op_->getContext(); }
  Type i1() { return IntegerType::get(ctx(), 1); }
  Type i64() { return IntegerType::get(ctx(), 64); }
  Type f32() { return Float32Type::get(ctx()); }
  // Results beyond those the node has are dropped: a trailing optional output it omits.
  std::optional<Results> trimmed(Results all) {
    if (all.size() < op_->getNumResults())
      return std::nullopt;
    all.resize(op_->getNumResults());
    return all;
  }

  // ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceSumSquare, ReduceL1, ReduceL2
  // over `axes` (an attribute before opset 13 or 18, an input after; none: every axis, or the
  // input itself with noop_with_empty_axes), keeping the reduced dimensions as 1 unless
  // keepdims = 0. Integers exactly (wrapping as int64 does); an empty Max, Min or Mean is not
  // evaluated.
  std::optional<Results> reduce(StringRef type) {
    const Tensor &x = in_[0];
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    std::optional<SmallVector<int64_t>> axes = intsAttr(op_, "axes");
    if (!axes && present(1)) {
      if (in_[1].isFloat())
        return std::nullopt;
      axes = SmallVector<int64_t>(in_[1].ints.begin(), in_[1].ints.end());
    }
    const bool keep = intAttr(op_, "keepdims").value_or(1) != 0;
    if ((!axes || axes->empty()) && intAttr(op_, "noop_with_empty_axes").value_or(0) != 0) {
      // Nothing reduced, but each element still transformed (ONNX Runtime's reading).
      Tensor out = x;
      if (x.isFloat() && type != "ReduceSum" && type != "ReduceMean" && !type.contains("Max") &&
          !type.contains("Min") && type != "ReduceProd")
        for (int64_t k = 0; k < out.size(); ++k)
          out.set(k, type == "ReduceSumSquare" ? x.f(k) * x.f(k) : std::fabs(x.f(k)));
      return Results{out};
    }
    // An axis named twice is reduced once, as ONNX Runtime does.
    SmallVector<bool> reduced(rank, !axes || axes->empty());
    if (axes)
      for (int64_t a : *axes) {
        const int64_t d = normalizeAxis(a, rank);
        if (d < 0 || d >= rank)
          return std::nullopt;
        reduced[d] = true;
      }
    SmallVector<int64_t> kept, outShape;
    int64_t count = 1;
    for (int64_t d = 0; d < rank; ++d) {
      kept.push_back(reduced[d] ? 1 : x.shape[d]);
      if (reduced[d])
        count *= x.shape[d];
      else
        outShape.push_back(x.shape[d]);
    }
    const bool extreme = type == "ReduceMax" || type == "ReduceMin";
    if (count == 0 && (extreme || type == "ReduceMean"))
      return std::nullopt;
    const bool integers = !x.isFloat();
    if (integers && type != "ReduceSum" && type != "ReduceProd" && !extreme)
      return std::nullopt;
    Tensor out = filled(kept, x.elem);
    const int64_t n = out.size();
    std::vector<double> acc(n, type == "ReduceProd"  ? 1.0
                               : type == "ReduceMax" ? -std::numeric_limits<double>::infinity()
                               : type == "ReduceMin" ? std::numeric_limits<double>::infinity()
                                                     : 0.0);
    std::vector<uint64_t> intAcc(n, type == "ReduceProd" ? 1 : 0);
    std::vector<bool> seen(n, false);
    const SmallVector<int64_t> inStrides = stridesOf(x.shape), outStrides = stridesOf(kept);
    for (int64_t k = 0; k < x.size(); ++k) {
      int64_t o = 0;
      for (int64_t d = 0; d < rank; ++d)
        if (!reduced[d])
          o += (k / inStrides[d]) % x.shape[d] * outStrides[d];
      if (integers) {
        const int64_t v = x.i(k);
        const int64_t current = static_cast<int64_t>(intAcc[o]);
        intAcc[o] = type == "ReduceSum"    ? intAcc[o] + static_cast<uint64_t>(v)
                    : type == "ReduceProd" ? intAcc[o] * static_cast<uint64_t>(v)
                    : !seen[o]             ? static_cast<uint64_t>(v)
                    : type == "ReduceMax"  ? static_cast<uint64_t>(std::max(current, v))
                                           : static_cast<uint64_t>(std::min(current, v));
        seen[o] = true;
        continue;
      }
      const double v = x.f(k);
      double &a = acc[o];
      if (type == "ReduceProd")
        a *= v;
      else if (type == "ReduceSumSquare" || type == "ReduceL2")
        a += v * v;
      else if (type == "ReduceL1")
        a += std::fabs(v);
      else if (extreme)
        a = std::isnan(a) || std::isnan(v) ? NAN
            : type == "ReduceMax"          ? std::max(a, v)
                                           : std::min(a, v);
      else
        a += v;
    }
    for (int64_t o = 0; o < n; ++o) {
      if (integers) {
        out.setInt(o, static_cast<int64_t>(intAcc[o]));
        continue;
      }
      out.set(o, type == "ReduceMean" ? acc[o] / static_cast<double>(count)
                 : type == "ReduceL2" ? std::sqrt(acc[o])
                                      : acc[o]);
    }
    if (!keep)
      out.shape = outShape;
    return Results{out};
  }

  // Softmax or LogSoftmax along `axis` (opset 13; -1 by default), or, where the importer marked
  // a node of an earlier opset, over the input flattened to 2-D at `axis` (1 by default).
  std::optional<Results> softmax(bool log) {
    const Tensor &x = in_[0];
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    if (!x.isFloat() || rank == 0)
      return std::nullopt;
    const bool flattens = intAttr(op_, kFlattensBefore13).has_value();
    const int64_t axis = normalizeAxis(intAttr(op_, "axis").value_or(flattens ? 1 : -1), rank);
    if (axis < 0 || axis >= rank)
      return std::nullopt;
    int64_t outer = product(ArrayRef<int64_t>(x.shape).take_front(axis));
    int64_t n = x.shape[axis];
    int64_t inner = product(ArrayRef<int64_t>(x.shape).drop_front(axis + 1));
    if (flattens) {
      n *= inner;
      inner = 1;
    }
    Tensor out = x;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n; ++j)
          max = std::isnan(x.f(at(j))) ? NAN : std::max(max, x.f(at(j)));
        double sum = 0;
        for (int64_t j = 0; j < n; ++j)
          sum += std::exp(x.f(at(j)) - max);
        for (int64_t j = 0; j < n; ++j)
          out.set(at(j), log ? x.f(at(j)) - max - std::log(sum) : std::exp(x.f(at(j)) - max) / sum);
      }
    return Results{out};
  }

  // LayerNormalization(X, Scale[, B]; axis = -1, epsilon = 1e-5) -> Y, Mean, InvStdDev;
  // SimplifiedLayerNormalization(X, scale; axis = -1, epsilon = 1e-5) -> Y, inv_std_var (RMS);
  // SkipLayerNormalization(input, skip, gamma[, beta][, bias]; epsilon = 1e-12) and
  // EmbedLayerNormalization(input_ids, segment_ids, word_embedding, position_embedding,
  // segment_embedding, gamma, beta, mask, position_ids; epsilon) -> output, mask_index,
  // embedding_sum: the word, position (position_ids, [B, S] or [1, S], or 0..S-1) and segment
  // rows of each token summed (embedding_sum), its LayerNorm times gamma plus beta (output; beta
  // is required, as ONNX Runtime requires it), and each sequence's count of mask ones
  // (mask_index, int32; not evaluated without a mask).
  std::optional<Results> embedLayerNorm() {
    auto ints2 = [&](size_t i) { return present(i) && !in_[i].isFloat() && in_[i].shape.size() == 2; };
    auto floats = [&](size_t i, size_t rank) {
      return present(i) && in_[i].isFloat() && in_[i].shape.size() == rank;
    };
    std::optional<double> eps = floatAttr(op_, "epsilon");
    if (!eps || !ints2(0) || !floats(2, 2) || !floats(3, 2) || !floats(5, 1) ||
        present(1) != present(4) || (present(1) && (!ints2(1) || !floats(4, 2))) ||
        !floats(6, 1) || (present(7) && !ints2(7)) ||
        (present(8) && !ints2(8)) || (op_->getNumResults() > 1 && !present(7)))
      return std::nullopt;
    const Tensor &ids = in_[0], &word = in_[2], &pos = in_[3], &gamma = in_[5];
    const int64_t batch = ids.shape[0], seq = ids.shape[1], hidden = word.shape[1];
    if (pos.shape[1] != hidden || gamma.shape[0] != hidden ||
        (present(1) && (in_[1].shape != ids.shape || in_[4].shape[1] != hidden)) ||
        in_[6].shape[0] != hidden || (present(7) && in_[7].shape != ids.shape) ||
        (present(8) && (in_[8].shape[1] != seq || (in_[8].shape[0] != 1 && in_[8].shape[0] != batch))))
      return std::nullopt;
    Tensor sum = filled({batch, seq, hidden}, word.elem), out = sum;
    // A row of `table` by index `id`, or nothing when it is out of range.
    auto row = [](const Tensor &table, int64_t id) -> std::optional<int64_t> {
      if (id < 0 || id >= table.shape[0])
        return std::nullopt;
      return id * table.shape[1];
    };
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t t = b * seq + s;
        const int64_t p = present(8) ? in_[8].i((in_[8].shape[0] == 1 ? 0 : b) * seq + s) : s;
        std::optional<int64_t> w = row(word, ids.i(t)), q = row(pos, p);
        std::optional<int64_t> g = present(1) ? row(in_[4], in_[1].i(t)) : std::optional<int64_t>(0);
        if (!w || !q || !g)
          return std::nullopt;
        double mean = 0.0;
        for (int64_t h = 0; h < hidden; ++h) {
          double v = word.floats[*w + h] + pos.floats[*q + h];
          if (present(1))
            v += in_[4].floats[*g + h];
          sum.floats[t * hidden + h] = v;
          mean += v;
        }
        mean /= static_cast<double>(hidden);
        double var = 0.0;
        for (int64_t h = 0; h < hidden; ++h) {
          const double d = sum.floats[t * hidden + h] - mean;
          var += d * d;
        }
        const double inv = 1.0 / std::sqrt(var / static_cast<double>(hidden) + *eps);
        for (int64_t h = 0; h < hidden; ++h)
          out.floats[t * hidden + h] =
              (sum.floats[t * hidden + h] - mean) * inv * gamma.floats[h] + in_[6].floats[h];
      }
    Tensor maskIndex = filled({batch}, IntegerType::get(ctx(), 32));
    if (present(7))
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t s = 0; s < seq; ++s)
          maskIndex.ints[b] += in_[7].i(b * seq + s) != 0;
    return trimmed(Results{out, maskIndex, sum});
  }

  // SkipSimplifiedLayerNormalization(input, skip, gamma[, bias]; epsilon = 1e-12) -> output,
  // mean, inv_std_var, input_skip_bias_sum: the norm of input + skip (+ bias) over the last
  // dimension. Mean and inverse deviation are float32, with the normalized dimensions as 1.
  std::optional<Results> normalization(StringRef type) {
    const bool skip = type.starts_with("Skip");
    const bool rms = type.contains("Simplified");
    Tensor x = in_[0];
    if (!x.isFloat() || x.shape.empty())
      return std::nullopt;
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    const size_t gammaAt = skip ? 2 : 1;
    const size_t betaAt = skip ? (rms ? SIZE_MAX : 3) : (rms ? SIZE_MAX : 2);
    const size_t biasAt = skip ? (rms ? 3 : 4) : SIZE_MAX;
    if (!present(gammaAt))
      return std::nullopt;
    if (skip) { // input + skip (+ bias): the fourth output, and what is normalized
      if (!present(1) || !in_[1].isFloat())
        return std::nullopt;
      const Tensor &s = in_[1];
      if (!broadcastShape(x.shape, s.shape) || *broadcastShape(x.shape, s.shape) != x.shape)
        return std::nullopt;
      for (int64_t k = 0; k < x.size(); ++k)
        x.set(k, x.f(k) + s.f(broadcastIndex(k, x.shape, s.shape)));
      if (present(biasAt)) {
        const Tensor &b = in_[biasAt];
        if (b.shape.size() != 1 || b.shape[0] != x.shape.back())
          return std::nullopt;
        for (int64_t k = 0; k < x.size(); ++k)
          x.set(k, x.f(k) + b.f(k % x.shape.back()));
      }
    }
    const int64_t axis = skip ? rank - 1 : normalizeAxis(intAttr(op_, "axis").value_or(-1), rank);
    if (axis < 0 || axis >= rank)
      return std::nullopt;
    const double eps = floatAttr(op_, "epsilon").value_or(skip ? 1e-12 : 1e-5);
    const ArrayRef<int64_t> normalized = ArrayRef<int64_t>(x.shape).drop_front(axis);
    const int64_t n = product(normalized), rows = product(ArrayRef<int64_t>(x.shape).take_front(axis));
    auto fits = [&](size_t i) {
      if (!present(i))
        return true;
      auto b = broadcastShape(normalized, in_[i].shape);
      return b && ArrayRef<int64_t>(*b) == normalized;
    };
    if (n == 0 || !fits(gammaAt) || !fits(betaAt))
      return std::nullopt;
    SmallVector<int64_t> statShape(x.shape.begin(), x.shape.end());
    for (int64_t d = axis; d < rank; ++d)
      statShape[d] = 1;
    Tensor y = filled(x.shape, x.elem), mean = filled(statShape, f32()),
           invStd = filled(statShape, f32());
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0;
      if (!rms) {
        for (int64_t j = 0; j < n; ++j)
          m += x.f(r * n + j);
        m /= static_cast<double>(n);
      }
      double var = 0;
      for (int64_t j = 0; j < n; ++j)
        var += (x.f(r * n + j) - m) * (x.f(r * n + j) - m);
      const double inv = 1.0 / std::sqrt(var / static_cast<double>(n) + eps);
      mean.set(r, m);
      invStd.set(r, inv);
      for (int64_t j = 0; j < n; ++j) {
        double v = (x.f(r * n + j) - m) * inv *
                   in_[gammaAt].f(broadcastIndex(j, normalized, in_[gammaAt].shape));
        if (present(betaAt))
          v += in_[betaAt].f(broadcastIndex(j, normalized, in_[betaAt].shape));
        y.set(r * n + j, v);
      }
    }
    if (skip)
      return trimmed({y, mean, invStd, x});
    if (rms)
      return trimmed({y, invStd});
    return trimmed({y, mean, invStd});
  }

  // Gelu (ONNX opset 20: approximate "none" or "tanh"; com.microsoft: the erf form) and
  // com.microsoft FastGelu(X[, bias]), the tanh form of X + bias.
  std::optional<Results> gelu(bool fast) {
    Tensor x = in_[0];
    if (!x.isFloat())
      return std::nullopt;
    if (fast && present(1)) {
      const Tensor &b = in_[1];
      auto shape = broadcastShape(x.shape, b.shape);
      if (!shape || *shape != x.shape)
        return std::nullopt;
      for (int64_t k = 0; k < x.size(); ++k)
        x.set(k, x.f(k) + b.f(broadcastIndex(k, x.shape, b.shape)));
    }
    StringRef approximate = stringAttr(op_, "approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      return std::nullopt;
    const bool tanhForm = fast || approximate == "tanh";
    for (int64_t k = 0; k < x.size(); ++k)
      x.set(k, tanhForm ? geluTanh(x.f(k)) : geluErf(x.f(k)));
    return Results{x};
  }

  // com.microsoft RotaryEmbedding(input, position_ids, cos_cache, sin_cache; interleaved,
  // num_heads, rotary_embedding_dim, scale = 1): input [B, S, N * H] or [B, N, S, H]; caches
  // [positions, R / 2]; position_ids [B, S], or [1] holding the first token's position. The
  // first R columns of each head are rotated, in halves or in interleaved pairs; the rest pass.
  std::optional<Results> rotaryEmbedding() {
    if (in_.size() != 4 || !present(1) || !present(2) || !present(3))
      return std::nullopt;
    const Tensor &x = in_[0], &ids = in_[1], &cosT = in_[2], &sinT = in_[3];
    if (!x.isFloat() || ids.isFloat() || cosT.shape.size() != 2 || sinT.shape != cosT.shape ||
        floatAttr(op_, "scale").value_or(1.0) != 1.0 ||
        intAttr(op_, "is_packed_batching").value_or(0) != 0)
      return std::nullopt;
    const int64_t positions = cosT.shape[0], half = cosT.shape[1], rotary = 2 * half;
    const int64_t declared = intAttr(op_, "rotary_embedding_dim").value_or(0);
    const int64_t heads = intAttr(op_, "num_heads").value_or(0);
    if (declared != 0 && declared != rotary)
      return std::nullopt;
    int64_t batch, seq, n, h;
    const bool fourD = x.shape.size() == 4;
    if (fourD) {
      batch = x.shape[0], n = x.shape[1], seq = x.shape[2], h = x.shape[3];
    } else if (x.shape.size() == 3) {
      batch = x.shape[0], seq = x.shape[1];
      h = heads > 0 ? x.shape[2] / heads : rotary;
      if (h <= 0 || x.shape[2] % h != 0)
        return std::nullopt;
      n = x.shape[2] / h;
    } else {
      return std::nullopt;
    }
    if (rotary > h || half == 0)
      return std::nullopt;
    const bool offset = ids.size() == 1;
    if (!offset && (ids.shape.size() != 2 || ids.shape[0] != batch || ids.shape[1] != seq))
      return std::nullopt;
    const bool interleaved = intAttr(op_, "interleaved").value_or(0) != 0;
    Tensor out = x;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t pos = offset ? ids.i(0) + s : ids.i(b * seq + s);
        if (pos < 0 || pos >= positions)
          return std::nullopt;
        for (int64_t head = 0; head < n; ++head) {
          const int64_t base = fourD ? ((b * n + head) * seq + s) * h : ((b * seq + s) * n + head) * h;
          for (int64_t i = 0; i < half; ++i) {
            const int64_t first = base + (interleaved ? 2 * i : i);
            const int64_t second = base + (interleaved ? 2 * i + 1 : i + half);
            const double c = cosT.f(pos * half + i), sn = sinT.f(pos * half + i);
            const double a = x.f(first), z = x.f(second);
            out.set(first, a * c - z * sn);
            out.set(second, z * c + a * sn);
          }
        }
      }
    return Results{out};
  }

  // Clip(x[, min][, max]): max(x, min), then min(that, max); NaN passes.
  std::optional<Results> clip() {
    Tensor out = in_[0];
    for (size_t i : {1, 2})
      if (present(i) && (in_[i].size() != 1 || in_[i].elem != out.elem))
        return std::nullopt;
    for (int64_t k = 0; k < out.size(); ++k) {
      if (out.isFloat()) {
        double v = out.f(k);
        if (present(1) && v < in_[1].f(0))
          v = in_[1].f(0);
        if (present(2) && v > in_[2].f(0))
          v = in_[2].f(0);
        out.set(k, v);
      } else {
        int64_t v = out.i(k);
        if (present(1))
          v = std::max(v, in_[1].i(0));
        if (present(2))
          v = std::min(v, in_[2].i(0));
        out.setInt(k, v);
      }
    }
    return Results{out};
  }

  // Sign (float or integer), IsNaN and IsInf (detect_positive, detect_negative) to bools.
  std::optional<Results> elementwise(StringRef type) {
    const Tensor &x = in_[0];
    if (type != "Sign" && !x.isFloat())
      return std::nullopt;
    Tensor out = filled(x.shape, type == "Sign" ? x.elem : i1());
    const bool positive = intAttr(op_, "detect_positive").value_or(1) != 0;
    const bool negative = intAttr(op_, "detect_negative").value_or(1) != 0;
    for (int64_t k = 0; k < x.size(); ++k) {
      if (type == "Sign") {
        if (x.isFloat())
          out.set(k, std::isnan(x.f(k)) ? NAN : (x.f(k) > 0) - (x.f(k) < 0));
        else
          out.setInt(k, (x.i(k) > 0) - (x.i(k) < 0));
      } else if (type == "IsNaN") {
        out.setInt(k, std::isnan(x.f(k)));
      } else {
        const double v = x.f(k);
        out.setInt(k, std::isinf(v) && ((v > 0 && positive) || (v < 0 && negative)));
      }
    }
    return Results{out};
  }

  std::optional<Results> exclusiveOr() {
    if (!present(1) || !in_[0].elem.isInteger(1) || !in_[1].elem.isInteger(1))
      return std::nullopt;
    auto shape = broadcastShape(in_[0].shape, in_[1].shape);
    if (!shape)
      return std::nullopt;
    Tensor out = filled(*shape, i1());
    for (int64_t k = 0; k < out.size(); ++k)
      out.setInt(k, (in_[0].i(broadcastIndex(k, *shape, in_[0].shape)) != 0) !=
                        (in_[1].i(broadcastIndex(k, *shape, in_[1].shape)) != 0));
    return Results{out};
  }

  // An index along `n` elements, negative from the end; nullopt out of range.
  static std::optional<int64_t> index(int64_t i, int64_t n) {
    if (i < 0)
      i += n;
    if (i < 0 || i >= n)
      return std::nullopt;
    return i;
  }

  // GatherElements' and ScatterElements' position in `data` of element k of `ind`: k's own
  // coordinates, but along `axis` the index ind[k] (negative from the end). Nullopt out of range.
  static std::optional<int64_t> elementPosition(int64_t k, const Tensor &ind, const Tensor &data,
                                                int64_t axis, ArrayRef<int64_t> indStrides,
                                                ArrayRef<int64_t> dataStrides) {
    std::optional<int64_t> i = index(ind.i(k), data.shape[axis]);
    if (!i)
      return std::nullopt;
    int64_t at = 0;
    for (size_t d = 0; d < data.shape.size(); ++d) {
      const int64_t c = static_cast<int64_t>(d) == axis ? *i : (k / indStrides[d]) % ind.shape[d];
      if (c >= data.shape[d])
        return std::nullopt;
      at += c * dataStrides[d];
    }
    return at;
  }

  // GatherElements(data, indices; axis): out[i] = data[i with its `axis` coordinate replaced by
  // indices[i]], out shaped as indices.
  std::optional<Results> gatherElements() {
    if (!present(1) || in_[1].isFloat())
      return std::nullopt;
    const Tensor &data = in_[0], &ind = in_[1];
    const int64_t rank = static_cast<int64_t>(data.shape.size());
    const int64_t axis = normalizeAxis(intAttr(op_, "axis").value_or(0), rank);
    if (axis < 0 || axis >= rank || static_cast<int64_t>(ind.shape.size()) != rank)
      return std::nullopt;
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && ind.shape[d] > data.shape[d])
        return std::nullopt;
    Tensor out = filled(ind.shape, data.elem);
    const SmallVector<int64_t> is = stridesOf(ind.shape), ds = stridesOf(data.shape);
    for (int64_t k = 0; k < ind.size(); ++k) {
      std::optional<int64_t> from = elementPosition(k, ind, data, axis, is, ds);
      if (!from)
        return std::nullopt;
      out.copy(k, data, *from);
    }
    return Results{out};
  }

  // ScatterElements(data, indices, updates; axis, reduction none|add|mul|max|min): GatherElements'
  // positions written, in index order.
  std::optional<Results> scatterElements() {
    if (in_.size() != 3 || !present(1) || !present(2) || in_[1].isFloat() ||
        in_[1].shape != in_[2].shape || in_[2].elem != in_[0].elem)
      return std::nullopt;
    const Tensor &data = in_[0], &ind = in_[1], &upd = in_[2];
    const int64_t rank = static_cast<int64_t>(data.shape.size());
    const int64_t axis = normalizeAxis(intAttr(op_, "axis").value_or(0), rank);
    StringRef reduction = stringAttr(op_, "reduction", "none");
    if (axis < 0 || axis >= rank || static_cast<int64_t>(ind.shape.size()) != rank ||
        (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
         reduction != "min"))
      return std::nullopt;
    Tensor out = data;
    const SmallVector<int64_t> is = stridesOf(ind.shape), ds = stridesOf(data.shape);
    for (int64_t k = 0; k < ind.size(); ++k) {
      std::optional<int64_t> position = elementPosition(k, ind, data, axis, is, ds);
      if (!position)
        return std::nullopt;
      const int64_t at = *position;
      scatterInto(out, at, upd, k, reduction);
    }
    return Results{out};
  }

  // GatherND(data, indices [.., k]; batch_dims b): slices of data at each index tuple, the first
  // b dimensions shared by data and indices.
  std::optional<Results> gatherNd() {
    if (!present(1) || in_[1].isFloat() || in_[1].shape.empty())
      return std::nullopt;
    const Tensor &data = in_[0], &ind = in_[1];
    const int64_t b = intAttr(op_, "batch_dims").value_or(0);
    const int64_t rank = static_cast<int64_t>(data.shape.size());
    const int64_t k = ind.shape.back();
    if (b < 0 || b >= static_cast<int64_t>(ind.shape.size()) || b + k > rank || k < 1)
      return std::nullopt;
    for (int64_t d = 0; d < b; ++d)
      if (data.shape[d] != ind.shape[d])
        return std::nullopt;
    SmallVector<int64_t> shape(ind.shape.begin(), ind.shape.end() - 1);
    shape.append(data.shape.begin() + b + k, data.shape.end());
    const int64_t batches = product(ArrayRef<int64_t>(data.shape).take_front(b));
    const int64_t tuples = product(ArrayRef<int64_t>(ind.shape).drop_front(b).drop_back());
    const int64_t slice = product(ArrayRef<int64_t>(data.shape).drop_front(b + k));
    // Each factor is at most an input's size; their product is checked before it is allocated.
    if (slice != 0 && batches * tuples > evaluationBudget() / slice)
      return std::nullopt;
    Tensor out = filled(shape, data.elem);
    const int64_t perBatch = product(ArrayRef<int64_t>(data.shape).drop_front(b));
    const SmallVector<int64_t> ds = stridesOf(data.shape);
    int64_t o = 0;
    for (int64_t batch = 0; batch < batches; ++batch)
      for (int64_t t = 0; t < tuples; ++t) {
        int64_t from = batch * perBatch;
        for (int64_t d = 0; d < k; ++d) {
          auto i = index(ind.i((batch * tuples + t) * k + d), data.shape[b + d]);
          if (!i)
            return std::nullopt;
          from += *i * ds[b + d];
        }
        for (int64_t e = 0; e < slice; ++e)
          out.copy(o++, data, from + e);
      }
    return Results{out};
  }

  // ArgMax or ArgMin along `axis` (keepdims, select_last_index): the first (or last) index of the
  // extreme value, int64.
  std::optional<Results> argExtreme(bool max) {
    const Tensor &x = in_[0];
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    const int64_t axis = normalizeAxis(intAttr(op_, "axis").value_or(0), rank);
    if (axis < 0 || axis >= rank || x.shape[axis] == 0)
      return std::nullopt;
    const bool last = intAttr(op_, "select_last_index").value_or(0) != 0;
    const int64_t n = x.shape[axis], inner = product(ArrayRef<int64_t>(x.shape).drop_front(axis + 1));
    const int64_t outer = product(ArrayRef<int64_t>(x.shape).take_front(axis));
    SmallVector<int64_t> shape(x.shape.begin(), x.shape.end());
    shape[axis] = 1;
    Tensor out = filled(shape, i64());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t best = 0;
        for (int64_t j = 1; j < n; ++j) {
          const double v = x.f((o * n + j) * inner + i), w = x.f((o * n + best) * inner + i);
          if (max ? (v > w || (last && v == w)) : (v < w || (last && v == w)))
            best = j;
        }
        out.setInt(o * inner + i, best);
      }
    if (intAttr(op_, "keepdims").value_or(1) == 0)
      out.shape.erase(out.shape.begin() + axis);
    return Results{out};
  }

  // TopK(x, K; axis = -1, largest = 1, sorted): the K largest (or smallest) values along `axis`
  // in order, equal values by index, and their int64 indices.
  std::optional<Results> topK() {
    if (!present(1) || in_[1].isFloat() || in_[1].size() != 1)
      return std::nullopt;
    const Tensor &x = in_[0];
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    const int64_t axis = normalizeAxis(intAttr(op_, "axis").value_or(-1), rank);
    const int64_t k = in_[1].i(0);
    if (axis < 0 || axis >= rank || k < 0 || k > x.shape[axis])
      return std::nullopt;
    const bool largest = intAttr(op_, "largest").value_or(1) != 0;
    const int64_t n = x.shape[axis], inner = product(ArrayRef<int64_t>(x.shape).drop_front(axis + 1));
    const int64_t outer = product(ArrayRef<int64_t>(x.shape).take_front(axis));
    SmallVector<int64_t> shape(x.shape.begin(), x.shape.end());
    shape[axis] = k;
    Tensor values = filled(shape, x.elem), indices = filled(shape, i64());
    SmallVector<int64_t> order(n);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return largest ? x.f(at(a)) > x.f(at(b)) : x.f(at(a)) < x.f(at(b));
        });
        for (int64_t j = 0; j < k; ++j) {
          values.copy((o * k + j) * inner + i, x, at(order[j]));
          indices.setInt((o * k + j) * inner + i, order[j]);
        }
      }
    return trimmed({values, indices});
  }

  // Flatten(x; axis = 1): [product of the dimensions before axis, product of the rest].
  std::optional<Results> flatten() {
    Tensor out = in_[0];
    const int64_t rank = static_cast<int64_t>(out.shape.size());
    const int64_t axis = normalizeAxis(intAttr(op_, "axis").value_or(1), rank);
    if (axis < 0 || axis > rank)
      return std::nullopt;
    ArrayRef<int64_t> dims(in_[0].shape);
    out.shape = {product(dims.take_front(axis)), product(dims.drop_front(axis))};
    return Results{out};
  }

  // Dropout at inference: the input, and a mask of trues.
  std::optional<Results> dropout() {
    if (present(2) && in_[2].size() == 1 && in_[2].i(0) != 0)
      return std::nullopt; // training mode
    Tensor mask = filled(in_[0].shape, i1());
    for (int64_t k = 0; k < mask.size(); ++k)
      mask.setInt(k, 1);
    return trimmed({in_[0], mask});
  }

  // Split(x[, split]; axis = 0, split before opset 13, num_outputs at 18): pieces of the sizes
  // given, else num_outputs pieces of ceil(n / num_outputs) (the last what is left), else as
  // many equal pieces as the node has results.
  std::optional<Results> split() {
    const Tensor &x = in_[0];
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    const int64_t axis = normalizeAxis(intAttr(op_, "axis").value_or(0), rank);
    if (axis < 0 || axis >= rank)
      return std::nullopt;
    const int64_t n = x.shape[axis];
    const int64_t pieces = static_cast<int64_t>(op_->getNumResults());
    if (pieces < 1)
      return std::nullopt;
    SmallVector<int64_t> sizes;
    if (present(1))
      sizes.assign(in_[1].ints.begin(), in_[1].ints.end());
    else if (auto attr = intsAttr(op_, "split"))
      sizes = *attr;
    else if (auto count = intAttr(op_, "num_outputs")) {
      if (*count != pieces || *count <= 0)
        return std::nullopt;
      const int64_t each = (n + *count - 1) / *count;
      for (int64_t p = 0; p < *count; ++p)
        sizes.push_back(std::max<int64_t>(std::min(each, n - p * each), 0));
    } else {
      if (n % pieces != 0)
        return std::nullopt;
      sizes.assign(pieces, n / pieces);
    }
    if (static_cast<int64_t>(sizes.size()) != pieces)
      return std::nullopt;
    int64_t total = 0; // each size in [0, n], so the running sum cannot overflow
    for (int64_t size : sizes) {
      if (size < 0 || size > n)
        return std::nullopt;
      total += size;
    }
    if (total != n)
      return std::nullopt;
    const int64_t outer = product(ArrayRef<int64_t>(x.shape).take_front(axis));
    const int64_t inner = product(ArrayRef<int64_t>(x.shape).drop_front(axis + 1));
    Results out;
    int64_t begin = 0;
    for (int64_t size : sizes) {
      SmallVector<int64_t> shape(x.shape.begin(), x.shape.end());
      shape[axis] = size;
      Tensor piece = filled(shape, x.elem);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < size; ++j)
          for (int64_t i = 0; i < inner; ++i)
            piece.copy((o * size + j) * inner + i, x, (o * n + begin + j) * inner + i);
      out.push_back(std::move(piece));
      begin += size;
    }
    return out;
  }

  // Gemm(A, B[, C]; alpha, beta, transA, transB): alpha A' B' + beta C, C broadcast to [M, N].
  std::optional<Results> gemm() {
    if (!present(1) || in_[0].shape.size() != 2 || in_[1].shape.size() != 2 ||
        !in_[0].isFloat() || in_[1].elem != in_[0].elem)
      return std::nullopt;
    const Tensor &a = in_[0], &b = in_[1];
    const bool ta = intAttr(op_, "transA").value_or(0) != 0;
    const bool tb = intAttr(op_, "transB").value_or(0) != 0;
    const double alpha = floatAttr(op_, "alpha").value_or(1.0);
    const double beta = floatAttr(op_, "beta").value_or(1.0);
    const int64_t m = a.shape[ta ? 1 : 0], k = a.shape[ta ? 0 : 1];
    const int64_t n = b.shape[tb ? 0 : 1];
    if (b.shape[tb ? 1 : 0] != k || (n != 0 && m > evaluationBudget() / n))
      return std::nullopt;
    Tensor out = filled({m, n}, a.elem);
    if (present(2)) {
      auto shape = broadcastShape({m, n}, in_[2].shape);
      if (!shape || *shape != SmallVector<int64_t>{m, n} || in_[2].elem != a.elem)
        return std::nullopt;
    }
    if (out.size() * std::max<int64_t>(k, 1) > evaluationBudget() * 64)
      return std::nullopt;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t q = 0; q < k; ++q)
          sum += a.f(ta ? q * m + i : i * k + q) * b.f(tb ? j * k + q : q * n + j);
        double v = alpha * sum;
        if (present(2))
          v += beta * in_[2].f(broadcastIndex(i * n + j, out.shape, in_[2].shape));
        out.set(i * n + j, v);
      }
    return Results{out};
  }

  OnnxNodeOp op_;
  ArrayRef<Tensor> in_;
};

} // namespace

bool isNnOp(StringRef type) {
  static const llvm::StringSet<> ops = {
      "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
      "ReduceL1", "ReduceL2", "Softmax", "LogSoftmax", "LayerNormalization",
      "SimplifiedLayerNormalization", "SkipLayerNormalization",
      "SkipSimplifiedLayerNormalization", "Gelu", "FastGelu", "RotaryEmbedding",
      "EmbedLayerNormalization", "Clip", "Sign",
      "IsNaN", "IsInf", "Xor", "GatherElements", "GatherND", "ScatterElements", "ArgMax",
      "ArgMin", "TopK", "CastLike", "Flatten", "Dropout", "Split", "Gemm"};
  return ops.contains(type);
}

std::optional<SmallVector<Tensor>> evaluateNn(OnnxNodeOp op, ArrayRef<Tensor> inputs) {
  return NnInterpreter(op, inputs).run();
}

} // namespace hetc::interpreter
