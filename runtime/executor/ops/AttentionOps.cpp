// Attention: a plan op resolved to three ops with the pool's barriers between them.
//   KvAppend        writes the step's k and v rows into the cache (rotating q and k first when
//                   the plan fused the ropes), by rows or, for a step of fewer rows than threads,
//                   by heads; label from the cache's element type (the append is portable).
//   Attention       the units of the step's cut (chunks of positions, codegen/cpu/attention),
//                   claimed by the threads while any are left; label from the vector set and the
//                   cache's element type.
//   AttentionMerge  folds the chunk states of rows split across threads, in chunk order.
#include "runtime/executor/ops/AttentionOps.h"

#include "runtime/executor/OpResolver.h"
#include "runtime/executor/ops/Split.h"

#include <cstdlib>

namespace hetc {
namespace {

using plan::WeightLayoutDef;

struct KvAppendArgs : OpArgs {
  Rows k, v, q;
  kernels::AttentionShape shape;
  kernels::KvCacheView cache;
  AttentionScratch *scratch = nullptr;
  const float *invFreq = nullptr; // non-null: rotate q and k first (the fused ropes)
  kernels::RopeForm ropeForm;
  kernels::RopeKernel rope = nullptr;
};

struct AttentionArgs : OpArgs {
  kernels::AttentionOperands operands; // q, output, cache, shape and the step's row slots
  AttentionScratch *scratch = nullptr;
  const kernels::AttentionSplit *split = nullptr; // the cut of this op's sliding window
  kernels::AttentionChunkKernel chunk{};
};

void runKvAppend(const OpArgs &base, const StepRows &step, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const KvAppendArgs &>(base);
  // The attention phase after this append claims its units from the first.
  if (thread == 0)
    a.scratch->claimed.store(0, std::memory_order_relaxed);
  const size_t T = step.count;
  // Shares of the rows; a step of fewer rows than threads (decode of a few sequences) gives each
  // thread a share of every row's heads instead.
  size_t rowBegin = 0, rowEnd = T, headBegin = 0, headEnd = a.shape.kvHeads;
  size_t queryBegin = 0, queryEnd = a.shape.heads;
  if (T >= threads) {
    ops::shareOf(T, thread, threads, rowBegin, rowEnd);
  } else {
    ops::shareOf(a.shape.kvHeads, thread, threads, headBegin, headEnd);
    ops::shareOf(a.shape.heads, thread, threads, queryBegin, queryEnd);
  }
  if (rowBegin >= rowEnd)
    return;
  // The fused ropes: the same kernel on the same rows and heads as the Rope ops would run.
  const size_t headDim = a.shape.headDim;
  if (a.invFreq) {
    a.rope(a.q.data + queryBegin * headDim, a.q.stride, queryEnd - queryBegin, a.ropeForm,
           a.invFreq, step.positions, rowBegin, rowEnd);
    a.rope(a.k.data + headBegin * headDim, a.k.stride, headEnd - headBegin, a.ropeForm,
           a.invFreq, step.positions, rowBegin, rowEnd);
  }
  kernels::kvAppend(a.k.data, a.k.stride, a.v.data, a.v.stride, a.cache, a.shape, step.slots,
                    step.positions, rowBegin, rowEnd, headBegin, headEnd);
}

void runAttention(const OpArgs &base, const StepRows &, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const AttentionArgs &>(base);
  AttentionScratch &s = *a.scratch;
  kernels::attentionClaimedUnits(a.chunk, *a.split, a.operands, s.claimed, threads, s.states,
                                 s.work + thread * 2 * s.stateFloats);
}

void runAttentionMerge(const OpArgs &base, const StepRows &, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const AttentionArgs &>(base);
  size_t begin, end;
  ops::shareOf(a.split->mergeItemCount(), thread, threads, begin, end);
  if (begin < end)
    kernels::attentionMergeItems(a.chunk, *a.split, a.operands, begin, end,
                                 a.scratch->states);
}

} // namespace

AttentionScratch::~AttentionScratch() {
  std::free(states);
  std::free(work);
}

Status resolveAttention(OpResolver &resolver, std::vector<ResolvedOp> &ops) {
  const OpResolver::Setup &setup = resolver.setup();
  const auto *params = resolver.op().params_as_AttentionParamsDef();
  const size_t T = setup.maxStepTokens;
  // The loader checked heads, kv_heads and head_dim against the KV cache and the buffers' widths.
  // ALiBi's slopes are read where the plan holds them (the loader checked one per head).
  const kernels::AttentionShape shape{params->layer(),    params->heads(), params->kv_heads(),
                                      params->head_dim(), params->scale(), params->softcap(),
                                      params->alibi_slopes() ? params->alibi_slopes()->data()
                                                             : nullptr};
  const kernels::KvCacheView &cache = *setup.kvCache;
  const kernels::VectorKernels &vector = *setup.vector;

  AttentionArgs &attention = resolver.make<AttentionArgs>();
  attention.scratch = setup.attention;
  attention.split = &setup.attention->splitFor(params->sliding_window());
  attention.chunk = vector.attentionChunk;
  Rows q, out;
  if (Status s = resolver.buffer(0, true, T, q); !s)
    return s;
  if (Status s = resolver.buffer(0, false, T, out); !s)
    return s;
  if (resolver.overlaps(resolver.op().inputs()->Get(0), resolver.op().outputs()->Get(0)))
    return resolver.fail("output overlaps q");
  kernels::AttentionOperands &operands = attention.operands;
  operands.q = q.data;
  operands.qStride = q.stride;
  operands.out = out.data;
  operands.outStride = out.stride;
  operands.cache = cache;
  operands.shape = shape;
  operands.rowSlots = setup.rowSlots;

  KvAppendArgs &append = resolver.make<KvAppendArgs>();
  append.shape = shape;
  append.cache = cache;
  append.scratch = setup.attention;
  append.q = q;
  if (Status s = resolver.buffer(1, true, T, append.k); !s)
    return s;
  if (Status s = resolver.buffer(2, true, T, append.v); !s)
    return s;
  if (params->rope()) {
    // The append rotates q and k in place first, so K enters the cache rotated and the attention
    // units read rotated q.
    const flatbuffers::Vector<uint64_t> *freqShape = nullptr;
    if (Status s = resolver.weight(0, WeightLayoutDef::RowMajor, 1, append.invFreq, freqShape); !s)
      return s;
    append.rope = vector.rope;
    append.ropeForm = ropeForm(params->head_dim(), params->rope_rotary_dim(),
                               params->rope_interleaved());
  }

  const bool bf16 = cache.element == kernels::KvElement::Bf16;
  const bool int8 = cache.element == kernels::KvElement::Int8;
  ResolvedOp appendOp = resolver.resolved(OpKind::KvAppend, runKvAppend, append,
                                          bf16   ? "portable, to bf16"
                                          : int8 ? "portable, to int8 blocks with row scales"
                                                 : "portable-f32");
  const char *label = bf16 ? vector.bf16KvName : int8 ? vector.int8KvName : vector.name;
  // The append writes q and k in place (rotating them) and the cache; reads q, k and v.
  appendOp.writes = params->rope() ? appendOp.reads[0] : -1;
  ops.push_back(appendOp);
  ops.push_back(resolver.resolved(OpKind::Attention, runAttention, attention, label));
  ops.push_back(
      resolver.resolved(OpKind::AttentionMerge, runAttentionMerge, attention, vector.name));
  return Status();
}

} // namespace hetc
