#include "runtime/kv/KvCache.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <vector>

namespace hetc {
KvCache::~KvCache() {
  if (data_)
    munmap(data_, bytes_);
}

Status KvCache::map(const plan::KvCacheDef &kv, const NumaTopology &topology,
                    ArenaBinding &binding) {
  // Plan::load verified the dtype (F32, BF16 or INT8, each of which the kernels read) and that the
  // layout is the format's and fits the arena.
  def_ = &kv;
  cachedPositions_.reset(new uint64_t[kv.slots()]());
  bytes_ = kv.arena_size();
  if (bytes_ == 0)
    return Status();
  void *mapping = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED)
    return Status::error("cannot reserve " + std::to_string(bytes_) +
                         " bytes of address space for the KV cache: " + std::strerror(errno));
  data_ = mapping;
  // Before any position is written: the pages land where the binding says.
  bindArena(data_, bytes_, topology, binding);
  auto *base = static_cast<uint8_t *>(data_);
  view_.keys = base + kv.k_offset();
  view_.values = base + kv.v_offset();
  view_.element = kvElementOf(kv.dtype());
  view_.layerStride = kv.layer_stride();
  view_.slotStride = kv.slot_stride();
  view_.headStride = kv.head_stride();
  view_.posStride = kv.pos_stride();
  if (kvHasRowScales(kv.dtype())) {
    view_.keyScales = reinterpret_cast<float *>(base + kv.k_scale_offset());
    view_.valueScales = reinterpret_cast<float *>(base + kv.v_scale_offset());
    view_.scaleLayerStride = kv.scale_layer_stride();
    view_.scaleSlotStride = kv.scale_slot_stride();
    view_.scaleHeadStride = kv.scale_head_stride();
  }
  return Status();
}

uint8_t *KvCache::scale(bool values, uint64_t layer, uint64_t slot, uint64_t head,
                        uint64_t position) const {
  return reinterpret_cast<uint8_t *>(view_.scales(!values) +
                                     view_.scaleOffset(layer, slot, head, position));
}


} // namespace hetc
