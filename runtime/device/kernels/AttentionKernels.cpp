// The software device's attention: the KV append and the attention over the cache with the CPU's
// portable kernels (codegen/cpu/vector, codegen/cpu/attention) over host views of its memory. A
// row's chunks and merges are the CPU's for a row run whole, so the output has the CPU engine's
// bits with EngineOptions::portableKernels.
#include "runtime/device/kernels/DeviceKernels.h"

#include "codegen/cpu/attention/Attention.h"
#include "codegen/cpu/vector/Kernels.h"

#include <algorithm>

namespace hetc::device {
namespace {

using namespace codegen::cuda;

// The cache's view with host addresses; false when refused.
bool cacheView(KernelContext &context, const KvCacheArgs &a, kernels::KvCacheView &view) {
  uint8_t *base = viewOf(context, a.arena, a.bytes);
  if (!base)
    return false;
  auto host = [&](const void *device) {
    return base + (reinterpret_cast<uint64_t>(device) - reinterpret_cast<uint64_t>(a.arena));
  };
  view.keys = host(a.keys);
  view.values = host(a.values);
  view.element = static_cast<kernels::KvElement>(a.element);
  view.layerStride = a.layerStride;
  view.slotStride = a.slotStride;
  view.headStride = a.headStride;
  view.posStride = a.posStride;
  if (a.keyScales) {
    view.keyScales = reinterpret_cast<float *>(host(a.keyScales));
    view.valueScales = reinterpret_cast<float *>(host(a.valueScales));
    view.scaleLayerStride = a.scaleLayerStride;
    view.scaleSlotStride = a.scaleSlotStride;
    view.scaleHeadStride = a.scaleHeadStride;
  }
  return true;
}

kernels::AttentionShape shapeOf(const AttentionShapeArgs &a) {
  return kernels::AttentionShape{a.layer, a.heads, a.kvHeads, a.headDim, a.scale, a.softcap};
}

void kvAppendSim(KernelContext &context, const void *raw) {
  const auto &a = *static_cast<const KvAppendArgs *>(raw);
  const uint32_t rows = countAt(context, a.rows);
  if (rows == 0)
    return;
  const uint64_t d = a.shape.headDim;
  float *k = viewOf(context, a.k, rowFloats(rows, a.kStride, a.shape.kvHeads * d));
  const float *v = viewOf(context, a.v, rowFloats(rows, a.vStride, a.shape.kvHeads * d));
  const uint32_t *positions = viewOf(context, a.positions, rows);
  const uint32_t *slots = viewOf(context, a.slots, rows);
  kernels::KvCacheView cache;
  if (!k || !v || !positions || !slots || !cacheView(context, a.cache, cache))
    return;
  if (a.invFreq) {
    float *q = viewOf(context, a.q, rowFloats(rows, a.qStride, a.shape.heads * d));
    const float *invFreq = viewOf(context, a.invFreq, a.rotaryDim / 2);
    if (!q || !invFreq)
      return;
    const kernels::RopeForm form{d, a.rotaryDim, a.interleaved};
    kernels::rope(q, a.qStride, a.shape.heads, form, invFreq, positions, 0, rows);
    kernels::rope(k, a.kStride, a.shape.kvHeads, form, invFreq, positions, 0, rows);
  }
  kernels::kvAppend(k, a.kStride, v, a.vStride, cache, shapeOf(a.shape), slots, positions, 0,
                    rows, 0, a.shape.kvHeads);
}

void attentionSim(KernelContext &context, const void *raw) {
  const auto &a = *static_cast<const AttentionArgs *>(raw);
  const uint32_t rows = countAt(context, a.rows);
  if (rows == 0)
    return;
  const uint64_t d = a.shape.headDim;
  const uint64_t group = a.shape.heads / a.shape.kvHeads;
  const uint64_t stateFloats = kernels::attentionStateFloats(group, d);
  const float *q = viewOf(context, a.q, rowFloats(rows, a.qStride, a.shape.heads * d));
  float *out = viewOf(context, a.out, rowFloats(rows, a.outStride, a.shape.heads * d));
  const uint32_t *positions = viewOf(context, a.positions, rows);
  const uint32_t *slots = viewOf(context, a.slots, rows);
  float *work = viewOf(context, a.work, 2 * stateFloats);
  const float *slopes = a.slopes ? viewOf(context, a.slopes, a.shape.heads) : nullptr;
  kernels::KvCacheView cache;
  if (!q || !out || !positions || !slots || !work || a.workFloats < 2 * stateFloats ||
      (a.slopes && !slopes) || !cacheView(context, a.cache, cache))
    return;
  const kernels::AttentionChunkKernel &chunk = kernels::kAttentionChunkPortable;
  const uint64_t C = a.chunkPositions;
  for (uint32_t t = 0; t < rows; ++t) {
    const uint64_t end = uint64_t{positions[t]} + 1;
    const uint64_t first = a.shape.window != 0 && end > a.shape.window ? end - a.shape.window : 0;
    for (uint64_t head = 0; head < a.shape.kvHeads; ++head) {
      const uint64_t base = cache.streamOffset(a.shape.layer, slots[t], head);
      const void *keys = cache.at(true, base);
      const void *values = cache.at(false, base);
      const float *qHead = q + t * a.qStride + head * group * d;
      const float *headSlopes = slopes ? slopes + head * group : nullptr;
      float *merged = work, *next = work + stateFloats;
      for (uint64_t start = first / C * C; start < end; start += C) {
        const uint64_t begin = std::max(first, start), stop = std::min(end, start + C);
        float *state = start <= first ? merged : next;
        switch (cache.element) {
        case kernels::KvElement::F32:
          chunk.f32(qHead, static_cast<const float *>(keys), static_cast<const float *>(values),
                    nullptr, nullptr, cache.posStride, group, d, a.shape.scale, a.shape.softcap,
                    headSlopes, begin, stop, state);
          break;
        case kernels::KvElement::Bf16:
          chunk.bf16(qHead, static_cast<const uint16_t *>(keys),
                     static_cast<const uint16_t *>(values), nullptr, nullptr, cache.posStride,
                     group, d, a.shape.scale, a.shape.softcap, headSlopes, begin, stop,
                     state);
          break;
        case kernels::KvElement::Int8: {
          const uint64_t scales = cache.scaleOffset(a.shape.layer, slots[t], head, 0);
          chunk.int8(qHead, static_cast<const int8_t *>(keys), static_cast<const int8_t *>(values),
                     cache.keyScales + scales, cache.valueScales + scales, cache.posStride, group,
                     d, a.shape.scale, a.shape.softcap, headSlopes, begin, stop, state);
          break;
        }
        }
        if (state == next)
          chunk.merge(merged, next, group, d);
      }
      kernels::attentionFinish(merged, group, d, out + t * a.outStride + head * group * d);
    }
  }
}

} // namespace

const Kernel kKvAppend{"KvAppend", kvAppendSim};
const Kernel kAttention{"Attention", attentionSim};

} // namespace hetc::device
