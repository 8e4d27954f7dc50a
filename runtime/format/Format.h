// Facts of the plan format that the compiler, the loader, the executor, the kernels and the tests
// must agree on, each stated once: the schema version, alignments, element sizes, the KV cache's
// layout and the cost model's sublayers.
#pragma once

#include "hplan_generated.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace hetc {

// Schema version this runtime reads and writes: major << 16 | minor.
constexpr uint32_t kPlanSchemaMajor = 1;
// 1.1: WeightLayoutDef::LinearBf16N16K2 (BF16 weights) and LinearParamsDef.residual.
// 1.2: LinearParamsDef.swiglu (a fused SwiGlu).
// 1.3: AttentionParamsDef.rope (the attention rotates q and k).
// 1.4: DTypeDef::INT8 and KvCacheDef's scales (an INT8 KV cache).
// 1.5: the device plan: OpDef.prefill_device and cost_sublayers, TensorDef.tier, KvCacheDef.tier,
//      PlanDef.target_gpu, activation_tier, tier_reason and stages (policy tables over (B, L)).
// 1.6: a BF16 KV cache keeps each head's positions in blocks of 16 (kernels::KvCacheView), so
//      its head_stride covers max_seq rounded up to a whole block.
// 1.7: an INT8 KV cache too.
// 1.8: Attention ops carry no tasks (task_count = task_grain = 0); required_cpu_features is what
//      the plan's kernels need at minimum; buffers are F32, architecture "llama" and the KV
//      layout exactly kvLayout's, verified.
// 1.9: LinearParamsDef.bias (weights[1] is the linear's bias); RopeParamsDef.rotary_dim and
//      interleaved, AttentionParamsDef.rope_rotary_dim and rope_interleaved (partial rotary and
//      interleaved pairs); AttentionParamsDef.sliding_window.
// 1.10: OpKindDef::LayerNorm (LayerNormParamsDef) and Activation (ActivationParamsDef), learned
//      positions in Embedding (weights[1], EmbeddingParamsDef.position_offset), architecture
//      "opt".
// 1.11: PlanDef.tokenizer (TokenizerDef: tokenizer.json's text, BOS and EOS ids, chat template).
// 1.12: CpuFeatureBits::AVX512_VNNI.
// 1.13: WeightLayoutDef::LinearInt8N16K4 (int8 linear weights with a scale per output column),
//       LinearInt4N16K8 with DTypeDef::INT4 and TensorDef.group_size (4-bit group-wise weights).
// 1.14: an LmHead's weight in LinearInt8N16K4 or LinearInt4N16K8, and an Embedding's table that
//       tensor (a tied integer lm_head); LinearInt4N16K8 groups of 16.
// 1.15: an RmsNorm's gamma may be a divisor of the row (each group normalized alone: Qwen3's q
//       and k norms).
// 1.16: Gemma's: EmbeddingParamsDef.scale, ActivationFunctionDef::Silu with SwiGluParamsDef.function
//       and LinearParamsDef.swiglu_function (GeGLU), AttentionParamsDef.softcap and
//       LmHeadParamsDef.softcap, and a sliding window per attention op.
// 1.17: ActivationFunctionDef::ReluSquared (a non-gated feed-forward's squared ReLU).
// 1.18: AttentionParamsDef.alibi_slopes (ALiBi's position bias: BLOOM, MPT).
constexpr uint32_t kPlanSchemaMinor = 18;
constexpr uint32_t kPlanSchemaVersion = kPlanSchemaMajor << 16 | kPlanSchemaMinor;
constexpr uint64_t kSegmentAlignment = 4096;

// Bytes of one element of `dtype`; 0 for a value this runtime does not know.
uint64_t dtypeBytes(plan::DTypeDef dtype);

// Bytes of a KV cache scale: one float32 per row of an INT8 cache.
constexpr uint64_t kKvScaleBytes = 4;
// Whether a KV cache of `dtype` keeps a scale per (layer, slot, kv_head, position) row.
inline bool kvHasRowScales(plan::DTypeDef dtype) { return dtype == plan::DTypeDef::INT8; }
// Bytes one position of one KV head takes in K (or in V): head_dim elements and, for INT8, the
// row's scale. What a decode step reads and a context costs per position, layer and head.
inline uint64_t kvRowBytes(plan::DTypeDef dtype, uint64_t headDim) {
  return headDim * dtypeBytes(dtype) + (kvHasRowScales(dtype) ? kKvScaleBytes : 0);
}

// A BF16 or INT8 KV cache keeps each head's positions in blocks of this many (the kernels'
// KvCacheView reads them so); a head's stream holds whole blocks.
constexpr uint64_t kKvBlockPositions = 16;
inline bool kvInBlocks(plan::DTypeDef dtype) {
  return dtype == plan::DTypeDef::BF16 || dtype == plan::DTypeDef::INT8;
}
// Positions a KV head's stream has room for: max_seq, in blocks rounded up to a whole block.
inline uint64_t kvStreamPositions(plan::DTypeDef dtype, uint64_t maxSeq) {
  return kvInBlocks(dtype)
             ? (maxSeq + kKvBlockPositions - 1) / kKvBlockPositions * kKvBlockPositions
             : maxSeq;
}

// The CPU features (plan::CpuFeatureBits) the slowest kernel that reads a weight of `layout` needs:
// what a plan with such weights requires of a host at minimum. Every layout of this schema has a
// portable kernel, so each needs x86-64 only; faster kernels are the executor's choice at load.
inline uint64_t layoutCpuFeatures(plan::WeightLayoutDef layout) {
  switch (layout) {
  case plan::WeightLayoutDef::RowMajor:
  case plan::WeightLayoutDef::LinearNK:
  case plan::WeightLayoutDef::LinearBf16N16K2:
  case plan::WeightLayoutDef::LinearInt8N16K4:
  case plan::WeightLayoutDef::LinearInt4N16K8:
    return static_cast<uint64_t>(plan::CpuFeatureBits::X86_64);
  }
  return static_cast<uint64_t>(plan::CpuFeatureBits::X86_64);
}

// Whether two activation buffers share bytes of the arena (their rows' extents overlap).
inline bool buffersOverlap(const plan::BufferDef &a, const plan::BufferDef &b) {
  return a.offset() < b.offset() + b.rows() * b.row_stride() &&
         b.offset() < a.offset() + a.rows() * a.row_stride();
}

// Every activation buffer's offset and row stride, and every region of the KV arena, is a
// multiple of this: one cache line, the unit the kernels' aligned loads assume.
constexpr uint64_t kBufferAlignment = 64;

// The KV cache's layout, as the compiler plans it and the tests build it: strides in elements
// (scale strides in scales) and byte offsets in the KV arena. (layer, slot, kv_head) is the outer
// index, so each head's positions are one stream, the order long-context decode reads them in;
// a BF16 or INT8 stream holds whole blocks of kKvBlockPositions positions. Regions: K, V, then an
// INT8 cache's K and V scales (one float32 per position row, [layer][slot][kv_head][pos]), each
// starting on a kBufferAlignment boundary.
struct KvLayout {
  uint64_t posStride = 0, headStride = 0, slotStride = 0, layerStride = 0;
  uint64_t kOffset = 0, vOffset = 0;
  uint64_t scaleHeadStride = 0, scaleSlotStride = 0, scaleLayerStride = 0;
  uint64_t kScaleOffset = 0, vScaleOffset = 0;
  uint64_t arenaSize = 0;
};

// The layout of a KV cache of these dims, with position rows `posStride` elements apart (0 for
// head_dim, the plan compiler's choice; the tests pad it). None when a size overflows 64 bits.
std::optional<KvLayout> kvLayout(plan::DTypeDef dtype, uint64_t layers, uint64_t slots,
                                 uint64_t kvHeads, uint64_t headDim, uint64_t maxSeq,
                                 uint64_t posStride = 0);

// The same layout in words, for reports ("dimension-first [layer][slot][kv_head], positions in
// blocks of 16 ...").
std::string kvLayoutText(plan::DTypeDef dtype);

inline constexpr unsigned kCostSublayerCount = 6;
inline constexpr uint8_t kAllCostSublayers = (1u << kCostSublayerCount) - 1;

// "qkv", "qk", "sv", "out", "fc1", "fc2": the cost model's sublayers (CostSublayerBits) in order.
const char *costSublayerName(unsigned index);

// "qk+sv" for the bits an op names; "-" for none.
std::string costSublayersText(uint8_t bits);

// A policy as LIA writes it, p_1..p_6 with 1 on the CPU: "(0,1,1,0,0,0)".
std::string policyText(uint8_t cpuBits);

// The lowest sublayer `bits` names (kCostSublayerCount for none): an op computing sublayers a
// policy splits (an attention op's QK and SV) runs where the first of them does.
unsigned firstCostSublayer(uint8_t bits);

} // namespace hetc
