#include "runtime/kv/KvCache.h"

#include "runtime/executor/ThreadPool.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <vector>

namespace hetc {
namespace {

struct SyntheticFill {
  const kernels::KvCacheView *cache = nullptr;
  size_t layers = 0;
  size_t kvHeads = 0;
  size_t headDim = 0;
  uint32_t slot = 0;
  uint64_t positions = 0;
  uint64_t seed = 0;
};

// splitmix64, to seed one stream per (layer, head, K or V) whatever thread writes it.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void syntheticFillPhase(void *context, size_t, unsigned thread, unsigned threadCount) {
  const SyntheticFill &fill = *static_cast<const SyntheticFill *>(context);
  const size_t streams = fill.layers * fill.kvHeads * 2;
  for (size_t stream = streams * thread / threadCount;
       stream < streams * (thread + 1) / threadCount; ++stream) {
    const size_t layer = stream / (fill.kvHeads * 2);
    const size_t head = stream / 2 % fill.kvHeads;
    const bool keys = stream % 2 == 0;
    uint64_t state = mix(fill.seed ^ mix(stream) ^ (uint64_t{fill.slot} << 48)) | 1;
    std::vector<float> row(fill.headDim);
    for (uint64_t pos = 0; pos < fill.positions; ++pos) {
      for (float &value : row) {
        // xorshift64: cheap, and its top 24 bits make a float in [-1, 1) that is never denormal.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        value = static_cast<float>(state >> 40) * 0x1.0p-23f - 1.0f;
      }
      kernels::storeKvRow(*fill.cache, keys, layer, fill.slot, head, pos, row.data(), fill.headDim);
    }
  }
}

} // namespace

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
  view_.element = kv.dtype() == plan::DTypeDef::BF16   ? kernels::KvElement::Bf16
                  : kv.dtype() == plan::DTypeDef::INT8 ? kernels::KvElement::Int8
                                                       : kernels::KvElement::F32;
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

Status KvCache::fillSynthetic(ThreadPool &pool, uint32_t slot, uint64_t positions, uint64_t seed) {
  if (slot >= slots())
    return Status::error("slot " + std::to_string(slot) + " is past the plan's --max-batch " +
                         std::to_string(slots()));
  if (positions > maxSeq())
    return Status::error(std::to_string(positions) + " positions exceed the plan's --max-seq " +
                         std::to_string(maxSeq()));
  const plan::KvCacheDef &kv = *def_;
  cachedPositions_[slot] = positions;
  if (positions == 0 || kv.layers() == 0)
    return Status();
  SyntheticFill fill;
  fill.cache = &view_;
  fill.layers = kv.layers();
  fill.kvHeads = kv.kv_heads();
  fill.headDim = kv.head_dim();
  fill.slot = slot;
  fill.positions = positions;
  fill.seed = seed;
  pool.run(1, &syntheticFillPhase, &fill);
  return Status();
}

} // namespace hetc
