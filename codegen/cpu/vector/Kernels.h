// Portable float32 kernels, one per op kind of the plan.
//
// Every kernel works on a half-open range of its op's split axis (rows, columns or attention work
// items) so the thread pool can hand disjoint ranges to threads. The arithmetic that produces one
// output element never depends on where a range starts or ends, nor on how many rows a step has:
// results are bit-identical for any thread count and any batching of the same tokens.
//
// Activations are rows of floats: element (row, col) lives at data[row * stride + col], with the
// stride in elements.
#pragma once

#include "runtime/format/Format.h"

#include <cstddef>
#include <cstdint>

namespace hetc::kernels {

// Dot products accumulate in this many interleaved float partial sums, combined in a fixed tree.
// The compiler can vectorise the lanes without reassociating anything, so the order is the
// source's on every ISA.
constexpr size_t kDotLanes = 8;

// sum_i a[i] * b[i] in the fixed lane order above.
float dot(const float *a, const float *b, size_t n);

// What the KV cache holds: float32; bf16 (the upper 16 bits of a float32, rounded to nearest
// even when written), which halves the bytes a decode step reads and the memory a context takes;
// or int8 with a float32 scale per row of head_dim elements (x ~ scale * q, scale = max|x| / 127),
// which halves them again, less the scale.
enum class KvElement : uint8_t { F32, Bf16, Int8 };

// Positions per block of a bf16 or int8 cache's streams (KvCacheView): the plan format's.
using ::hetc::kKvBlockPositions;

// Where element (pos, d) of a bf16 or int8 cache's stream lies, in elements from the stream's
// start, for an even headDim. The positions are kept in blocks of 16, headDim * 16 elements each,
// laid out for vdpbf16ps, which multiplies pairs of bf16 and adds both products to one float32 lane
// (int8 elements are sign-extended to int16 a line at a time, for vpdpwssd's pairs likewise):
// - K: pairs of dims, one line (64 bytes of bf16) per pair of dims for the block's 16 positions
//   ([d/2][p%16][d%2]); against a broadcast pair of query dims it adds to the 16 scores at once.
// - V: pairs of positions ([p%16/2][d][p%2]); against a broadcast pair of weights it adds to 16
//   output dims at once.
constexpr size_t kvBlockKeyIndex(size_t pos, size_t d, size_t headDim) {
  return pos / kKvBlockPositions * kKvBlockPositions * headDim + d / 2 * (2 * kKvBlockPositions) +
         pos % kKvBlockPositions * 2 + d % 2;
}
constexpr size_t kvBlockValueIndex(size_t pos, size_t d, size_t headDim) {
  return pos / 2 * (2 * headDim) + d * 2 + pos % 2;
}

// The KV cache of the plan. Each (layer, slot, head) has one stream of positions for K and one
// for V, starting at element layer*layerStride + slot*slotStride + head*headStride of keys and
// values. A float32 stream is rows: element (pos, d) at pos*posStride + d. A bf16 or int8 stream
// is blocks of 16 positions (kvBlockKeyIndex, kvBlockValueIndex; posStride = headDim, even; a
// head's stream holds whole blocks). keys and values point at float (F32), uint16_t
// (Bf16) or int8_t (Int8) elements. An Int8 cache has the scale of row (layer, slot, head, pos)
// at keyScales[scaleOffset(...)], V's likewise; a head's scales are consecutive floats, one per
// position.
struct KvCacheView {
  void *keys = nullptr;
  void *values = nullptr;
  KvElement element = KvElement::F32;
  size_t layerStride = 0;
  size_t slotStride = 0;
  size_t headStride = 0;
  size_t posStride = 0;
  float *keyScales = nullptr; // Int8 only
  float *valueScales = nullptr;
  size_t scaleLayerStride = 0;
  size_t scaleSlotStride = 0;
  size_t scaleHeadStride = 0;

  // Whether the streams are blocks of positions (bf16, int8) rather than rows (float32).
  bool blocks() const { return element != KvElement::F32; }
  size_t streamOffset(size_t layer, size_t slot, size_t head) const {
    return layer * layerStride + slot * slotStride + head * headStride;
  }
  // Element (pos, d) of K (keys = true) or V of (layer, slot, head), from the start of keys or
  // values.
  size_t elementOffset(bool keys, size_t layer, size_t slot, size_t head, size_t pos,
                       size_t d) const {
    const size_t stream = streamOffset(layer, slot, head);
    if (!blocks())
      return stream + pos * posStride + d;
    return stream +
           (keys ? kvBlockKeyIndex(pos, d, posStride) : kvBlockValueIndex(pos, d, posStride));
  }
  size_t scaleOffset(size_t layer, size_t slot, size_t head, size_t pos) const {
    return layer * scaleLayerStride + slot * scaleSlotStride + head * scaleHeadStride + pos;
  }
  size_t elementBytes() const {
    return element == KvElement::F32 ? 4 : element == KvElement::Bf16 ? 2 : 1;
  }
  // The address of element `offset` of K (keys = true) or V.
  void *at(bool keys, size_t offset) const {
    return static_cast<char *>(keys ? this->keys : values) + offset * elementBytes();
  }
  // The scales of K (keys = true) or V; null but for an Int8 cache.
  float *scales(bool keys) const { return keys ? keyScales : valueScales; }
};

// Quantises n values to int8: returns scale = max|x| / 127 and writes q[i] = x[i] / scale rounded
// to nearest even (|q| <= 127); a row of zeros gets scale 0 and zeros. x ~ scale * q to scale / 2.
float quantizeInt8(const float *x, size_t n, int8_t *q);

// Stores one row of headDim values as K (keys = true) or V of (layer, slot, head, pos) in the
// cache's element type: copied, rounded to bf16, or quantised to int8 with its row's scale.
void storeKvRow(const KvCacheView &cache, bool keys, size_t layer, size_t slot, size_t head,
                size_t pos, const float *row, size_t headDim);

// Copies the stored elements of positions [pos, pos + count) of K (keys = true) or V of
// (layer, slot, head) to `rows` as rows of headDim elements, or back: the cache's own bytes in
// row order whatever its layout (what a session file holds), int8 scales not included.
void copyKvRowsOut(const KvCacheView &cache, bool keys, size_t layer, size_t slot, size_t head,
                   size_t pos, size_t count, size_t headDim, void *rows);
void copyKvRowsIn(const KvCacheView &cache, bool keys, size_t layer, size_t slot, size_t head,
                  size_t pos, size_t count, size_t headDim, const void *rows);

// Shape of one attention op: `heads` query heads share `kvHeads` KV heads in groups of
// heads / kvHeads consecutive query heads.
struct AttentionShape {
  size_t layer = 0;
  size_t heads = 0;
  size_t kvHeads = 0;
  size_t headDim = 0;
  float scale = 1.0f;
  float softcap = 0.0f; // scores soft-capped, cap * tanh(score / cap), after the scale; 0: none
  // ALiBi (BLOOM, MPT): each score of query head h plus slopes[h] * the key's position, after the
  // scale and the soft-cap; [heads], or null for none.
  const float *slopes = nullptr;
};

// out[t] = table[tokens[t]] for rows [rowBegin, rowEnd); table is [vocab, hidden] row-major.
void embedding(const int32_t *tokens, const float *table, size_t hidden, float *out,
               size_t outStride, size_t rowBegin, size_t rowEnd);

// y = gamma * (x * 1/sqrt(mean(x^2) + eps)) per row; the sum of squares is taken in double.
// y may be x.
void rmsNorm(const float *x, size_t xStride, const float *gamma, size_t cols, float eps, float *y,
             size_t yStride, size_t rowBegin, size_t rowEnd);

// y = (x - mean) * 1/sqrt(var + eps) * gamma (+ beta) per row, var the biased variance. Two
// passes in double: the sum of x, then of (x - mean)^2, each in kDotLanes lanes combined in the
// fixed tree; mean and the inverse deviation are then rounded to float and the row is formed in
// float. beta may be null (no bias); y may be x.
void layerNorm(const float *x, size_t xStride, const float *gamma, const float *beta, size_t cols,
               float eps, float *y, size_t yStride, size_t rowBegin, size_t rowEnd);

// y[t, n] = sum_k x[t, k] * w[n, k] for all `rows` rows of x and columns [colBegin, colEnd);
// w is [N, K] with each output column's K inputs contiguous. y must not overlap x.
void linear(const float *x, size_t xStride, size_t rows, const float *w, size_t k, float *y,
            size_t yStride, size_t colBegin, size_t colEnd);

// Like linear, for a gathered set of rows: logits[outputRows[i], n] = x[sourceRows[i]] . w[n]
// for i < count and columns [colBegin, colEnd).
void lmHead(const float *x, size_t xStride, const uint32_t *sourceRows, const uint32_t *outputRows,
            size_t count, const float *w, size_t k, float *logits, size_t logitsStride,
            size_t colBegin, size_t colEnd);

// Which columns of a head RoPE rotates and how they pair: the first rotaryDim (even, <= headDim),
// column i with i + rotaryDim/2 (rotate-half, Llama) or column 2i with 2i + 1 (interleaved,
// GPT-J), both at angle i; the rest of the head passes through unchanged (partial rotary).
struct RopeForm {
  size_t headDim = 0;
  size_t rotaryDim = 0;
  bool interleaved = false;
};

// Rotary embedding in place on rows [rowBegin, rowEnd) of x ([T, heads*headDim]), row t at
// position positions[t]: angle_i = float(pos) * invFreq[i] for i < rotaryDim/2, as PyTorch
// computes it in float32.
void rope(float *x, size_t xStride, size_t heads, const RopeForm &form, const float *invFreq,
          const uint32_t *positions, size_t rowBegin, size_t rowEnd);

// Writes KV heads [headBegin, headEnd) of the k and v rows [rowBegin, rowEnd)
// ([T, kvHeads*headDim]) into the cache at (layer, rowSlots[t], head, rowPositions[t]) with
// storeKvRow.
void kvAppend(const float *k, size_t kStride, const float *v, size_t vStride,
              const KvCacheView &cache, const AttentionShape &shape, const uint32_t *rowSlots,
              const uint32_t *rowPositions, size_t rowBegin, size_t rowEnd, size_t headBegin,
              size_t headEnd);

// Causal attention over the cache lives in Attention.h: split by positions, merged in a fixed
// order.

// The pointwise function of a feed-forward, or of its gate (plan::ActivationFunctionDef's
// values).
enum class ActivationFunction : uint8_t {
  Relu,     // max(x, 0); NaN gives 0
  Gelu,     // 0.5 x (1 + erf(x / sqrt(2))), std::erf in float
  GeluTanh, // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), std::tanh in float
  Silu,     // x / (1 + exp(-x)), the form PyTorch's CPU kernel evaluates
  ReluSquared, // max(x, 0) * max(x, 0); NaN gives 0
};

// y = f(gate) * up per element (f silu: SwiGLU; a GELU: GeGLU); y may be gate or up.
void gated(ActivationFunction function, const float *gate, size_t gateStride, const float *up,
           size_t upStride, size_t cols, float *y, size_t yStride, size_t rowBegin, size_t rowEnd);

// y = f(x) per element; y may be x.
void activation(ActivationFunction function, const float *x, size_t xStride, size_t cols, float *y,
                size_t yStride, size_t rowBegin, size_t rowEnd);

// y *= scale per element (one float multiply each: the same bits on every instruction set).
void scaleRows(float scale, float *y, size_t yStride, size_t cols, size_t rowBegin, size_t rowEnd);

// y = cap * tanh(y / cap) per element (soft-capping: Gemma 2's logits), std::tanh in float.
void softCap(float cap, float *y, size_t count);

// Index of the largest value; the first one on ties, as torch.argmax.
size_t argmaxFirst(const float *values, size_t count);

// y = a + b per element; y may be a or b. bStride 0 adds one row b to every row (a bias).
void add(const float *a, size_t aStride, const float *b, size_t bStride, size_t cols, float *y,
         size_t yStride, size_t rowBegin, size_t rowEnd);

} // namespace hetc::kernels
