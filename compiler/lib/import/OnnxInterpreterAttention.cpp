// The interpreter's attention: ONNX Runtime's com.microsoft attention operators in the forms
// exporters write, each as ONNX Runtime's contrib operator documentation defines it:
//
//   MultiHeadAttention(query, key, value [B, S, N * H] (key and value of any length L), bias,
//                      key_padding_mask [B, L + P], attention_bias [1|B, 1|N, S, L + P],
//                      past_key, past_value [B, N, P, H]) -> output, present_key, present_value
//   GroupQueryAttention(query [B, S, N * H] (or q, k and v packed when key is absent), key,
//                       value [B, S, G * H], past_key, past_value [B, G, P, H], seqlens_k [B],
//                       total_sequence_length, cos_cache, sin_cache) -> output, present_key,
//                       present_value
//   Attention(input [B, S, D], weights [D, 3 * N * H], bias, mask_index [B, P + S],
//             past [2, B, N, P, H]) -> output, present
//
// Scores are q . k * scale (1 / sqrt(H) unless given), plus what masks them, then softmax over
// the keys and the weighted sum of the values, in double. What the raising reads them as
// (raise/RaiseContribOps.cpp, RaiseAttention.cpp) is this; tests/e2e/ort/check_interpreter.py
// holds each to ONNX Runtime on random inputs. Forms outside these (packed key/value for
// MultiHeadAttention, a shared past/present buffer, position ids or a bias for
// GroupQueryAttention, a mask_index of end positions for Attention) are not evaluated.
#include "InterpreterSupport.h"
#include "OnnxGraph.h"

#include "mlir/IR/BuiltinTypes.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace hetc::interpreter {
namespace {

using Results = SmallVector<Tensor>;

// [B, N, T, H] heads as doubles, read from or written to the layouts the operators use.
struct Heads {
  int64_t batch = 0, heads = 0, length = 0, dim = 0;
  std::vector<double> v;
  double &at(int64_t b, int64_t n, int64_t t, int64_t h) {
    return v[((b * heads + n) * length + t) * dim + h];
  }
  double at(int64_t b, int64_t n, int64_t t, int64_t h) const {
    return v[((b * heads + n) * length + t) * dim + h];
  }
};

Heads heads(int64_t batch, int64_t n, int64_t length, int64_t dim) {
  Heads x{batch, n, length, dim, {}};
  x.v.assign(static_cast<size_t>(batch * n * length * dim), 0.0);
  return x;
}

// Heads [B, N, T, H] from a [B, T, width] tensor whose columns from `offset` are N heads of H
// (q, k and v side by side in one packed tensor: offsets 0, N * H, ...).
Heads splitHeads(const Tensor &x, int64_t n, int64_t dim, int64_t offset) {
  const int64_t batch = x.shape[0], length = x.shape[1], width = x.shape[2];
  Heads out = heads(batch, n, length, dim);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < length; ++t)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t h = 0; h < dim; ++h)
          out.at(b, i, t, h) = x.f((b * length + t) * width + offset + i * dim + h);
  return out;
}

// A [B, N, T, H] tensor as heads.
Heads readHeads(const Tensor &x) {
  Heads out{x.shape[0], x.shape[1], x.shape[2], x.shape[3], x.floats};
  return out;
}

Tensor headsTensor(const Heads &x, Type elem) {
  Tensor t;
  t.elem = elem;
  t.shape = {x.batch, x.heads, x.length, x.dim};
  t.floats = x.v;
  return t;
}

// Past then new positions, per sequence: past [B, N, P, H] (P may be 0), fresh [B, N, S, H].
Heads concatPositions(const Heads &past, const Heads &fresh) {
  Heads out = heads(fresh.batch, fresh.heads, past.length + fresh.length, fresh.dim);
  for (int64_t b = 0; b < out.batch; ++b)
    for (int64_t n = 0; n < out.heads; ++n)
      for (int64_t t = 0; t < out.length; ++t)
        for (int64_t h = 0; h < out.dim; ++h)
          out.at(b, n, t, h) =
              t < past.length ? past.at(b, n, t, h) : fresh.at(b, n, t - past.length, h);
  return out;
}

// softmax(q . k * scale [soft-capped] + bias) . v per query head, query head n reading KV head
// n / (N / G). `bias(b, n, i, j)` is what is added to a score (-inf: not attended). Returns
// [B, S, N * Hv] rows; a row that attends to nothing is 0.
template <typename Bias>
Tensor attend(const Heads &q, const Heads &k, const Heads &v, double scale, double softcap,
              Bias &&bias, Type elem) {
  const int64_t batch = q.batch, n = q.heads, s = q.length, t = k.length, group = n / k.heads;
  Tensor out;
  out.elem = elem;
  out.shape = {batch, s, n * v.dim};
  out.floats.assign(static_cast<size_t>(batch * s * n * v.dim), 0.0);
  std::vector<double> scores(static_cast<size_t>(t));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t r = 0; r < s; ++r) {
        double highest = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < t; ++j) {
          double dot = 0.0;
          for (int64_t h = 0; h < q.dim; ++h)
            dot += q.at(b, i, r, h) * k.at(b, i / group, j, h);
          double score = dot * scale;
          if (softcap > 0.0)
            score = softcap * std::tanh(score / softcap);
          scores[j] = score + bias(b, i, r, j);
          highest = std::max(highest, scores[j]);
        }
        if (!std::isfinite(highest))
          continue;
        double sum = 0.0;
        for (int64_t j = 0; j < t; ++j) {
          scores[j] = std::exp(scores[j] - highest);
          sum += scores[j];
        }
        for (int64_t h = 0; h < v.dim; ++h) {
          double acc = 0.0;
          for (int64_t j = 0; j < t; ++j)
            acc += scores[j] * v.at(b, i / group, j, h);
          out.floats[(b * s + r) * n * v.dim + i * v.dim + h] = acc / sum;
        }
      }
  return out;
}

// RotaryEmbedding's rotation of each head at position `position(b, t)` by cos/sin caches
// [positions, R / 2]: halves (rotate_half) or interleaved pairs, over the first R columns.
template <typename Position>
bool rotate(Heads &x, const Tensor &cosT, const Tensor &sinT, bool interleaved,
            Position &&position) {
  const int64_t positions = cosT.shape[0], half = cosT.shape[1], rotary = 2 * half;
  if (rotary > x.dim)
    return false;
  for (int64_t b = 0; b < x.batch; ++b)
    for (int64_t t = 0; t < x.length; ++t) {
      const int64_t p = position(b, t);
      if (p < 0 || p >= positions)
        return false;
      for (int64_t n = 0; n < x.heads; ++n)
        for (int64_t i = 0; i < half; ++i) {
          const double c = cosT.f(p * half + i), s = sinT.f(p * half + i);
          const int64_t a = interleaved ? 2 * i : i, z = interleaved ? 2 * i + 1 : i + half;
          const double x1 = x.at(b, n, t, a), x2 = x.at(b, n, t, z);
          x.at(b, n, t, a) = x1 * c - x2 * s;
          x.at(b, n, t, z) = x2 * c + x1 * s;
        }
    }
  return true;
}

class AttentionInterpreter {
public:
  AttentionInterpreter(OnnxNodeOp op, ArrayRef<Tensor> inputs) : op_(op), in_(inputs) {}

  std::optional<Results> run() {
    StringRef type = op_.getOpType();
    if (!present(0) || !in_[0].isFloat())
      return std::nullopt;
    for (const Tensor &t : in_)
      if (t.elem && t.size() > evaluationBudget())
        return std::nullopt;
    std::optional<Results> out;
    if (type == "MultiHeadAttention")
      out = multiHeadAttention();
    else if (type == "GroupQueryAttention")
      out = groupQueryAttention();
    else if (type == "Attention")
      out = attention();
    if (!out || out->size() < op_->getNumResults())
      return std::nullopt;
    out->resize(op_->getNumResults());
    return out;
  }

private:
  bool present(size_t i) const { return i < in_.size() && in_[i].elem; }
  bool floatOfRank(size_t i, size_t rank) const {
    return present(i) && in_[i].isFloat() && in_[i].shape.size() == rank;
  }
  double scaleOr(int64_t dim) const {
    const double given = floatAttr(op_, "scale").value_or(0.0);
    return given != 0.0 ? given : 1.0 / std::sqrt(static_cast<double>(dim));
  }

  std::optional<Results> multiHeadAttention() {
    const int64_t n = intAttr(op_, "num_heads").value_or(0);
    // Separate q, k, v of rank 3; no bias, past_sequence_length or cache_indirection.
    if (n <= 0 || !floatOfRank(0, 3) || !floatOfRank(1, 3) || !floatOfRank(2, 3) || present(3) ||
        present(8) || present(9) || in_[1].shape[0] != in_[0].shape[0] ||
        in_[2].shape[0] != in_[0].shape[0] || in_[1].shape[1] != in_[2].shape[1])
      return std::nullopt;
    const Tensor &query = in_[0], &key = in_[1], &value = in_[2];
    const int64_t batch = query.shape[0], s = query.shape[1];
    if (query.shape[2] % n || key.shape[2] != query.shape[2] || value.shape[2] % n)
      return std::nullopt;
    const int64_t dim = query.shape[2] / n, vdim = value.shape[2] / n;
    Heads q = splitHeads(query, n, dim, 0), k = splitHeads(key, n, dim, 0),
          v = splitHeads(value, n, vdim, 0);
    if (present(6) != present(7))
      return std::nullopt;
    if (present(6)) {
      if (!floatOfRank(6, 4) || !floatOfRank(7, 4))
        return std::nullopt;
      Heads pk = readHeads(in_[6]), pv = readHeads(in_[7]);
      if (pk.batch != batch || pk.heads != n || pk.dim != dim || pv.batch != batch ||
          pv.heads != n || pv.dim != vdim || pv.length != pk.length)
        return std::nullopt;
      k = concatPositions(pk, k);
      v = concatPositions(pv, v);
    }
    const int64_t total = k.length, past = total - key.shape[1];
    // key_padding_mask [B, total]: a key whose entry is 0 gets mask_filter_value.
    const Tensor *padding = nullptr;
    if (present(4)) {
      if (in_[4].isFloat() || in_[4].shape.size() != 2 || in_[4].shape[0] != batch ||
          in_[4].shape[1] != total)
        return std::nullopt;
      padding = &in_[4];
    }
    const Tensor *bias = nullptr;
    if (present(5)) {
      const Tensor &ab = in_[5];
      if (!ab.isFloat() || ab.shape.size() != 4 || (ab.shape[0] != 1 && ab.shape[0] != batch) ||
          (ab.shape[1] != 1 && ab.shape[1] != n) || ab.shape[2] != s || ab.shape[3] != total)
        return std::nullopt;
      bias = &ab;
    }
    const bool causal = intAttr(op_, "unidirectional").value_or(0) != 0;
    const double filter = floatAttr(op_, "mask_filter_value").value_or(-10000.0);
    auto added = [&](int64_t b, int64_t i, int64_t r, int64_t j) {
      double x = 0.0;
      if (bias)
        x += bias->f(((bias->shape[0] == 1 ? 0 : b) * bias->shape[1] +
                      (bias->shape[1] == 1 ? 0 : i)) * s * total + r * total + j);
      if (padding && padding->i(b * total + j) == 0)
        x += filter;
      if (causal && j > past + r)
        return -std::numeric_limits<double>::infinity(); // a future key is not a score
      return x;
    };
    Tensor out = attend(q, k, v, scaleOr(dim), 0.0, added, query.elem);
    return Results{out, headsTensor(k, key.elem), headsTensor(v, value.elem)};
  }

  std::optional<Results> groupQueryAttention() {
    const int64_t n = intAttr(op_, "num_heads").value_or(0);
    const int64_t g = intAttr(op_, "kv_num_heads").value_or(0);
    // Past and present not sharing one buffer; no position ids, attention bias or head sink;
    // no smooth softmax.
    if (n <= 0 || g <= 0 || n % g || !floatOfRank(0, 3) || present(9) || present(10) ||
        present(11) || intAttr(op_, "smooth_softmax").value_or(0) != 0 || !present(5) ||
        in_[5].isFloat() || !present(6) || in_[6].isFloat() || in_[6].size() != 1)
      return std::nullopt;
    const Tensor &query = in_[0], &seqlens = in_[5];
    const int64_t batch = query.shape[0], s = query.shape[1], total = in_[6].i(0);
    if (seqlens.size() != batch)
      return std::nullopt;
    Heads q, k, v;
    int64_t dim;
    if (present(1) || present(2)) {
      if (!floatOfRank(1, 3) || !floatOfRank(2, 3) || query.shape[2] % n ||
          in_[1].shape[0] != batch || in_[1].shape[1] != s || in_[2].shape != in_[1].shape)
        return std::nullopt;
      dim = query.shape[2] / n;
      if (in_[1].shape[2] != g * dim)
        return std::nullopt;
      q = splitHeads(query, n, dim, 0);
      k = splitHeads(in_[1], g, dim, 0);
      v = splitHeads(in_[2], g, dim, 0);
    } else {
      if (query.shape[2] % (n + 2 * g))
        return std::nullopt;
      dim = query.shape[2] / (n + 2 * g);
      q = splitHeads(query, n, dim, 0);
      k = splitHeads(query, g, dim, n * dim);
      v = splitHeads(query, g, dim, (n + g) * dim);
    }
    Heads pk = heads(batch, g, 0, dim), pv = pk;
    if (present(3) != present(4))
      return std::nullopt;
    if (present(3)) {
      if (!floatOfRank(3, 4) || !floatOfRank(4, 4))
        return std::nullopt;
      pk = readHeads(in_[3]);
      pv = readHeads(in_[4]);
      if (pk.batch != batch || pk.heads != g || pk.dim != dim || pv.batch != batch ||
          pv.heads != g || pv.dim != dim || pv.length != pk.length)
        return std::nullopt;
    }
    // Every sequence holds seqlens_k + 1 positions after this step, its past the rest; the
    // tensors are as long as the longest (total_sequence_length), and past and present are
    // separate buffers of past and total positions (sequences padded on the right).
    if (total != pk.length + s)
      return std::nullopt;
    // ONNX Runtime's limits, kept so that nothing is given a value it would refuse: one
    // sequence when a chunk of several tokens follows a past; a rotation over heads of a
    // multiple of 16.
    if (batch > 1 && s > 1 && pk.length > 0)
      return std::nullopt;
    SmallVector<int64_t> pastOf(batch);
    for (int64_t b = 0; b < batch; ++b) {
      pastOf[b] = seqlens.i(b) + 1 - s;
      if (pastOf[b] < 0 || pastOf[b] > pk.length)
        return std::nullopt;
    }
    if (intAttr(op_, "do_rotary").value_or(0) != 0) {
      if (dim % 16 || !present(7) || !present(8) || !in_[7].isFloat() || in_[7].shape.size() != 2 ||
          in_[8].shape != in_[7].shape)
        return std::nullopt;
      const bool interleaved = intAttr(op_, "rotary_interleaved").value_or(0) != 0;
      auto position = [&](int64_t b, int64_t t) { return pastOf[b] + t; };
      if (!rotate(q, in_[7], in_[8], interleaved, position) ||
          !rotate(k, in_[7], in_[8], interleaved, position))
        return std::nullopt;
    }
    // Each sequence's past, then its new positions, then zeros to the common length.
    Heads presentK = heads(batch, g, total, dim), presentV = presentK;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < g; ++i)
        for (int64_t t = 0; t < pastOf[b] + s; ++t)
          for (int64_t h = 0; h < dim; ++h) {
            const bool old = t < pastOf[b];
            presentK.at(b, i, t, h) = old ? pk.at(b, i, t, h) : k.at(b, i, t - pastOf[b], h);
            presentV.at(b, i, t, h) = old ? pv.at(b, i, t, h) : v.at(b, i, t - pastOf[b], h);
          }
    const int64_t window = intAttr(op_, "local_window_size").value_or(-1);
    const double softcap = floatAttr(op_, "softcap").value_or(0.0);
    const double inf = std::numeric_limits<double>::infinity();
    auto added = [&](int64_t b, int64_t, int64_t r, int64_t j) {
      const int64_t p = pastOf[b] + r;
      return j > p || (window > 0 && j <= p - window) ? -inf : 0.0;
    };
    Tensor out = attend(q, presentK, presentV, scaleOr(dim), softcap, added, query.elem);
    return Results{out, headsTensor(presentK, query.elem), headsTensor(presentV, query.elem)};
  }

  std::optional<Results> attention() {
    const int64_t n = intAttr(op_, "num_heads").value_or(0);
    // The packed projection and its bias, a raw [B, total] mask or none, a stacked past; no
    // attention bias, past_sequence_length, rotary or shared buffer.
    if (n <= 0 || !floatOfRank(0, 3) || !floatOfRank(1, 2) || present(5) || present(6) ||
        intAttr(op_, "do_rotary").value_or(0) != 0 ||
        intAttr(op_, "past_present_share_buffer").value_or(0) != 0 ||
        intsAttr(op_, "qkv_hidden_sizes"))
      return std::nullopt;
    const Tensor &x = in_[0], &w = in_[1];
    const int64_t batch = x.shape[0], s = x.shape[1], d = x.shape[2];
    if (w.shape[0] != d || w.shape[1] % 3 || (w.shape[1] / 3) % n)
      return std::nullopt;
    const int64_t width = w.shape[1], dim = width / 3 / n;
    if (present(2) && (!in_[2].isFloat() || in_[2].size() != width))
      return std::nullopt;
    // x . W + bias, [B, S, 3 * N * H]: q, k and v side by side.
    Tensor qkv;
    qkv.elem = x.elem;
    qkv.shape = {batch, s, width};
    qkv.floats.assign(static_cast<size_t>(batch * s * width), 0.0);
    for (int64_t r = 0; r < batch * s; ++r)
      for (int64_t c = 0; c < width; ++c) {
        double acc = present(2) ? in_[2].f(c) : 0.0;
        for (int64_t i = 0; i < d; ++i)
          acc += x.f(r * d + i) * w.f(i * width + c);
        qkv.floats[r * width + c] = acc;
      }
    Heads q = splitHeads(qkv, n, dim, 0), k = splitHeads(qkv, n, dim, n * dim),
          v = splitHeads(qkv, n, dim, 2 * n * dim);
    if (present(4)) {
      // past [2, B, N, P, H]: keys then values.
      const Tensor &past = in_[4];
      if (!past.isFloat() || past.shape.size() != 5 || past.shape[0] != 2 ||
          past.shape[1] != batch || past.shape[2] != n || past.shape[4] != dim)
        return std::nullopt;
      const int64_t half = past.size() / 2;
      Heads pk{batch, n, past.shape[3], dim, {past.floats.begin(), past.floats.begin() + half}};
      Heads pv{batch, n, past.shape[3], dim, {past.floats.begin() + half, past.floats.end()}};
      k = concatPositions(pk, k);
      v = concatPositions(pv, v);
    }
    const int64_t total = k.length, past = total - s;
    const Tensor *mask = nullptr;
    if (present(3)) {
      if (in_[3].isFloat() || in_[3].shape.size() != 2 || in_[3].shape[0] != batch ||
          in_[3].shape[1] != total)
        return std::nullopt;
      mask = &in_[3];
    }
    const bool causal = intAttr(op_, "unidirectional").value_or(0) != 0;
    const double filter = floatAttr(op_, "mask_filter_value").value_or(-10000.0);
    auto added = [&](int64_t b, int64_t, int64_t r, int64_t j) {
      double a = 0.0;
      if (mask && mask->i(b * total + j) == 0)
        a += filter;
      if (causal && j > past + r)
        return -std::numeric_limits<double>::infinity();
      return a;
    };
    Tensor out = attend(q, k, v, scaleOr(dim), 0.0, added, x.elem);
    Tensor presentKv;
    presentKv.elem = x.elem;
    presentKv.shape = {2, batch, n, total, dim};
    presentKv.floats = k.v;
    presentKv.floats.insert(presentKv.floats.end(), v.v.begin(), v.v.end());
    return Results{out, presentKv};
  }

  OnnxNodeOp op_;
  ArrayRef<Tensor> in_;
};

} // namespace

bool isAttentionOp(StringRef type) {
  return type == "MultiHeadAttention" || type == "GroupQueryAttention" || type == "Attention";
}

std::optional<SmallVector<Tensor>> evaluateAttention(OnnxNodeOp op, ArrayRef<Tensor> inputs) {
  return AttentionInterpreter(op, inputs).run();
}

} // namespace hetc::interpreter
