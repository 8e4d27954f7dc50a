// The argument blocks of the attention's device kernels (see rows/RowArgs.h for the conventions):
// the KV append and the attention over the cache, in the CPU's dimension-first cache layout
// (kernels::KvCacheView) so a session or a split plan moves the same bytes.
#pragma once

#include <cstdint>

namespace hetc::codegen::cuda {

// The plan's KV cache in device memory: kernels::KvCacheView's fields, with device addresses.
struct KvCacheArgs {
  uint8_t *arena = nullptr; // the whole cache, `bytes` long: every address below lies in it
  uint64_t bytes = 0;
  void *keys = nullptr;
  void *values = nullptr;
  float *keyScales = nullptr; // int8 caches only
  float *valueScales = nullptr;
  uint8_t element = 0; // kernels::KvElement
  uint64_t layerStride = 0, slotStride = 0, headStride = 0, posStride = 0;
  uint64_t scaleLayerStride = 0, scaleSlotStride = 0, scaleHeadStride = 0;
};

struct AttentionShapeArgs {
  uint64_t layer = 0, heads = 0, kvHeads = 0, headDim = 0;
  float scale = 1.0f, softcap = 0.0f;
  uint64_t window = 0; // the last `window` positions only; 0: all
};

// Writes each row's k and v heads into the cache at (layer, slots[t], head, positions[t]); with
// invFreq set, first rotates q and k in place (the plan's fused ropes).
struct KvAppendArgs {
  float *q = nullptr;
  float *k = nullptr;
  const float *v = nullptr;
  uint64_t qStride = 0, kStride = 0, vStride = 0;
  const float *invFreq = nullptr;
  uint64_t rotaryDim = 0;
  bool interleaved = false;
  AttentionShapeArgs shape;
  KvCacheArgs cache;
  const uint32_t *positions = nullptr;
  const uint32_t *slots = nullptr;
  const uint32_t *rows = nullptr;
};

// Causal attention of each row over positions 0..positions[t] (or its window) of its slot, in
// chunks of `chunkPositions` merged in order (codegen/cpu/attention's arithmetic); `work` holds
// two chunk states (group * (headDim + 2) floats each) per row and KV head the kernel may run at
// once: the software device runs one at a time.
struct AttentionArgs {
  const float *q = nullptr;
  uint64_t qStride = 0;
  float *out = nullptr;
  uint64_t outStride = 0;
  AttentionShapeArgs shape;
  KvCacheArgs cache;
  const float *slopes = nullptr; // ALiBi's, one per query head; null: none
  uint64_t chunkPositions = 0;
  float *work = nullptr;
  uint64_t workFloats = 0;
  const uint32_t *positions = nullptr;
  const uint32_t *slots = nullptr;
  const uint32_t *rows = nullptr;
};

} // namespace hetc::codegen::cuda
