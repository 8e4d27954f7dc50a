// Attention over the KV cache, split by positions.
//
// A row (one query token) attends to positions 0..pos of its slot, or with a sliding window of W
// keys to pos-W+1..pos. The positions are cut into chunks at fixed boundaries 0, C, 2C, ...
// (C = chunkPositions, fixed by the engine for a plan); a window starts inside its first chunk.
// A chunk's partial result for the query heads of one GQA group is a state per head: the
// unnormalised output acc = sum_j exp(s_j - max) v_j, the max score and sum_j exp(s_j - max).
// A row's output is its chunks' states merged in chunk order, then acc / sum.
//
// That arithmetic is the same whether one task runs every chunk of a (row, KV head) pair in
// turn (prefill rows, one thread) or the chunks are spread over threads and merged after a
// barrier (decode rows of a long sequence): the output bits depend on neither the thread count
// nor on which rows were split.
#pragma once

#include "codegen/cpu/vector/Kernels.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace hetc::kernels {

// Positions per chunk of the engine's attention. A chunk's state (group x (head_dim + 2) floats)
// is about 1% of the bf16 K and V it summarises at head_dim 64 with 4 heads per group, so merging
// the states costs about 1% of the chunks' reads (at 256 positions the merges took 0.4 of 17 ms
// per token on Llama-3.2-1B at 32K); a row of 32K positions still has 64 chunks per KV head to
// spread over the threads.
constexpr size_t kAttentionChunkPositions = 512;

// Floats in one chunk state of `group` heads: per head [acc: headDim][max][sum].
constexpr size_t attentionStateFloats(size_t group, size_t headDim) {
  return group * (headDim + 2);
}

// Partial attention of the `group` query heads q[h * headDim ..] (h < group) over positions
// [begin, end) (begin < end) of one KV head: keys and values point at position 0 of the head's
// stream, which holds
// - float32 rows posStride elements apart;
// - or blocks of 16 positions (KvCacheView) of bf16, or of int8 with keyScales[j] and
//   valueScales[j] the scales of position j (null for the other element types).
// Over bf16 the query and the weights are rounded to bf16 (see kAttentionChunkPortable).
// Over int8 the products are integer ones, exact (vpdpwssd, or vpmaddwd without AVX-512 VNNI),
// and every rounding is named here, so that each kernel computes this and only its exp and the
// order of its float32 sums differ:
// - the query of each head is quantizeAttentionQuery's q'[i] (int16) with its factor f;
// - the score of position j is float(sum_i q'[i] * k_j[i]) * (keyScales[j] * f), k_j the int8
//   row, the integer sum exact, float() and each product rounded to nearest;
// - the online softmax moves its running max m once per block of the cache's 16 positions (the
//   part of the block in [begin, end)), from that block's scores, before their weights
//   w_j = exp(s_j - m) are taken; the output and the sum are rescaled by exp(m_old - m) then;
// - per block and head, x_j = w_j * valueScales[j], e = ilogb(max(max_j x_j, 2^-112)) and
//   u_j = min(rint(x_j * 2^(14 - e)), 32767), an int16 (x_j * 2^(14-e) < 2^15; rint to nearest
//   even); the block adds float(sum_j u_j * v_j[i]) * 2^(e - 14) to output element i (the integer
//   sum exact, |sum| < 2^26, float() rounded to nearest, the product exact: 2^(e - 14) is a normal
//   float, so a multiply-add gives the same bits), v_j the int8 row;
// - the sum that divides adds the unquantized w_j.
// A weight is thus kept to 2^-15 of its block's largest scaled weight, not to 2^-9 of itself as
// bf16 would keep it: finer for the weights that matter, and the blocks of small weights each
// have their own scale.
// A score is formed as AttentionShape says: times `scale`, soft-capped where softcap > 0, plus
// slopes[h] * j (float32 product and sum) where `slopes` (the group's, [group]) is not null.
// Writes the chunk state. Reads no row or scale outside [begin, end) but for the rest of the
// first and last blocks, whose values it ignores whatever they are.
template <typename Element>
using AttentionChunkFn = void (*)(const float *q, const Element *keys, const Element *values,
                                  const float *keyScales, const float *valueScales,
                                  size_t posStride, size_t group, size_t headDim, float scale,
                                  float softcap, const float *slopes, size_t begin, size_t end,
                                  float *state);

// Folds the state of the next chunk into `into` (the merge of every earlier chunk): the side
// holding the larger max keeps its values, the other is rescaled by exp(smaller - larger).
using AttentionMergeFn = void (*)(float *into, const float *next, size_t group, size_t headDim);

// The query of one head as the int8 kernels take it: with e = ilogb(max(max_i |q[i]|, FLT_MIN)),
// out[i] = rint(q[i] * 2^(14 - e)) (|q[i] * 2^(14 - e)| < 2^15; rint to nearest even, 2^15 kept
// as 32767), so that q[i] ~ out[i] * 2^(e - 14) to 2^-15 of the head's largest. Returns
// f = scale * 2^(e - 14), what turns an integer dot product times a key's scale into a score.
// The AVX-512 kernels compute the same bits in vectors, once per chunk and head.
float quantizeAttentionQuery(const float *q, size_t d, float scale, int16_t *out);

// One instruction set's chunk kernel for each KV element type, and its merge (split rows and
// whole rows merge with the same one, so their bits agree).
struct AttentionChunkKernel {
  AttentionChunkFn<float> f32;
  AttentionChunkFn<uint16_t> bf16;
  AttentionChunkFn<int8_t> int8;
  AttentionMergeFn merge;
  bool operator==(const AttentionChunkKernel &other) const {
    return f32 == other.f32 && bf16 == other.bf16 && int8 == other.int8 && merge == other.merge;
  }
};

// The portable chunk kernel: scores in blocks of positions, std::exp, the fixed-order dot(); over
// bf16 blocks, with the query and each weight exp(score - max) rounded to bf16 as vdpbf16ps takes
// them, the sum of weights adding the rounded ones; over int8 blocks, the integer arithmetic above
// (64-bit dots past 256 dims), the running max moved per block of 16 positions as the AVX-512
// kernel moves it.
extern const AttentionChunkKernel kAttentionChunkPortable;

// out[h * headDim + i] = acc_h[i] / sum_h for h < group.
void attentionFinish(const float *state, size_t group, size_t headDim, float *out);

// How one step's attention is cut into units of work, for any number of threads.
//
// Units are ordered (row, KV head, chunk). A split row has one unit per (KV head, chunk) whose
// state goes to the partial-state scratch; the merge phase then folds each (row, KV head)'s
// states in chunk order. Any other row has one unit per KV head, which runs its chunks in turn
// and writes the output. reserve() allocates once; cut() only overwrites.
class AttentionSplit {
public:
  // maxRows rows per step; stateCapacity chunk states in the scratch (0: no row is split).
  void reserve(size_t maxRows, size_t kvHeads, size_t chunkPositions, size_t stateCapacity);

  // Cuts a step whose row t attends positions 0..rowPositions[t], or only the last `window` of
  // them (0: all). With `splitRows`, rows of more than one chunk are split, in row order, while
  // scratch states last.
  void cut(const uint32_t *rowPositions, size_t rows, bool splitRows, size_t window = 0);

  size_t rows() const { return rows_; }
  size_t kvHeads() const { return kvHeads_; }
  size_t chunkPositions() const { return chunkPositions_; }
  size_t unitCount() const { return unitsBefore_[rows_]; }
  // (split row, KV head) pairs the merge phase folds.
  size_t mergeItemCount() const { return splitRowCount_ * kvHeads_; }
  size_t statesUsed() const { return statesUsed_; }

  // Row t attends positions [first(t), positions(t)) in chunks(t) chunks, the first of them chunk
  // number firstChunk(t); and its first state (split rows only).
  uint64_t positions(size_t row) const { return positions_[row]; }
  uint64_t first(size_t row) const { return first_[row]; }
  size_t firstChunk(size_t row) const { return static_cast<size_t>(first_[row] / chunkPositions_); }
  size_t chunks(size_t row) const { return chunks_[row]; }
  bool split(size_t row) const { return stateFirst_[row] != kWhole; }
  size_t stateFirst(size_t row) const { return stateFirst_[row]; }
  size_t unitsBefore(size_t row) const { return unitsBefore_[row]; }
  size_t splitRow(size_t index) const { return splitRows_[index]; }
  // Row holding unit `unit` (< unitCount()).
  size_t rowOfUnit(size_t unit) const;

private:
  static constexpr size_t kWhole = SIZE_MAX;
  size_t maxRows_ = 0;
  size_t kvHeads_ = 0;
  size_t chunkPositions_ = 1;
  size_t stateCapacity_ = 0;
  size_t rows_ = 0;
  size_t splitRowCount_ = 0;
  size_t statesUsed_ = 0;
  std::unique_ptr<uint64_t[]> positions_; // [maxRows]
  std::unique_ptr<uint64_t[]> first_;     // [maxRows]
  std::unique_ptr<size_t[]> chunks_;      // [maxRows]
  std::unique_ptr<size_t[]> stateFirst_;  // [maxRows], kWhole for a row run whole
  std::unique_ptr<size_t[]> unitsBefore_; // [maxRows + 1]
  std::unique_ptr<uint32_t[]> splitRows_; // [maxRows]
};

// What the attention units of one op read and write.
struct AttentionOperands {
  const float *q = nullptr; // [rows, heads * headDim]
  size_t qStride = 0;
  float *out = nullptr; // [rows, heads * headDim]
  size_t outStride = 0;
  KvCacheView cache;
  AttentionShape shape;
  const uint32_t *rowSlots = nullptr;
};

// Runs units [unitBegin, unitEnd) of the cut, with `chunk`'s kernel for the cache's element type.
// `partials` holds split.statesUsed() states of attentionStateFloats(group, headDim) floats; `work`
// holds two states for this caller alone.
void attentionUnits(const AttentionChunkKernel &chunk, const AttentionSplit &split,
                    const AttentionOperands &op, size_t unitBegin, size_t unitEnd, float *partials,
                    float *work);

// Runs units of the cut while any are left, claiming them from `claimed` (0 when the phase
// starts, shared by the threads running it) in guided runs: each claim takes half of what is left
// per thread, so a thread the machine slows (a busy core, a smaller share of the memory
// bandwidth) takes less and the threads finish together. Each unit writes its own state or rows,
// so the bits do not depend on which thread ran which unit.
void attentionClaimedUnits(const AttentionChunkKernel &chunk, const AttentionSplit &split,
                           const AttentionOperands &op, std::atomic<size_t> &claimed,
                           unsigned threads, float *partials, float *work);

// Folds and finishes merge items [itemBegin, itemEnd) once every unit has run.
void attentionMergeItems(const AttentionChunkKernel &chunk, const AttentionSplit &split,
                         const AttentionOperands &op, size_t itemBegin, size_t itemEnd,
                         float *partials);

} // namespace hetc::kernels
