// A plan file mapped into memory and verified: the loader's output, the executor's input.
#pragma once

#include "hetc/runtime/Status.h"
#include "hplan_generated.h"

#include <cstddef>
#include <cstdint>
#include <memory>
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
constexpr uint32_t kPlanSchemaMinor = 7;
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

// A BF16 or INT8 KV cache keeps each head's positions in blocks of this many
// (kernels::KvCacheView, whose kKvBlockPositions is the same number); a head's stream holds whole
// blocks.
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

// A verified, read-only plan. Weights are read in place from the mapping.
class Plan {
public:
  // Maps `path` and verifies structure (FlatBuffers verifier), version, CPU features, segment
  // bounds and checksums, and meaning (indices, sizes, arity). Any failure is one clear message.
  static Result<std::unique_ptr<Plan>> load(const std::string &path);
  // Verifies a plan already in memory (used by tests and fuzzing); `bytes` must outlive the Plan.
  static Result<std::unique_ptr<Plan>> fromBytes(const uint8_t *bytes, size_t size);
  ~Plan();
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;

  const plan::PlanDef &def() const { return *def_; }
  // Start of tensor `index`'s payload (its segment) in the mapping.
  const void *tensorData(uint32_t index) const;
  size_t fileSize() const { return size_; }

private:
  Plan() = default;
  const uint8_t *bytes_ = nullptr;
  size_t size_ = 0;
  void *mapping_ = nullptr; // owned mmap, or null when the bytes belong to the caller
  const plan::PlanDef *def_ = nullptr;
};

} // namespace hetc
