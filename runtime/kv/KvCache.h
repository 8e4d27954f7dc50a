// The KV cache: the arena the plan's KV cache lives in, reserved as address space (a page costs
// memory once a position on it is written) and bound to its tier's NUMA nodes before the first
// touch; the view the kernels read it through (the plan's layout, runtime/format); and how many
// positions each slot holds. Session files (Session.h) save and restore a slot of it.
#pragma once

#include "runtime/format/Plan.h"
#include "runtime/format/Status.h"
#include "runtime/platform/NumaBinding.h"

#include "codegen/cpu/vector/Kernels.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace hetc {


// The kernels' element type of a KV cache dtype (the loader admits F32, BF16 and INT8).
inline kernels::KvElement kvElementOf(plan::DTypeDef dtype) {
  return dtype == plan::DTypeDef::BF16   ? kernels::KvElement::Bf16
         : dtype == plan::DTypeDef::INT8 ? kernels::KvElement::Int8
                                         : kernels::KvElement::F32;
}

class KvCache {
public:
  KvCache() = default;
  ~KvCache();
  KvCache(const KvCache &) = delete;
  KvCache &operator=(const KvCache &) = delete;

  // Reserves the arena of `kv` (nothing for an empty one), binds it as `binding` says, and
  // starts its slots with no position cached. `kv` (a verified plan's) must outlive this.
  Status map(const plan::KvCacheDef &kv, const NumaTopology &topology, ArenaBinding &binding);

  const plan::KvCacheDef &def() const { return *def_; }
  uint32_t slots() const { return def_->slots(); }    // the plan's max_batch (verified)
  uint64_t maxSeq() const { return def_->max_seq(); } // the plan's max_seq (verified)
  // Positions 0..cachedPositions(slot)-1 of `slot` hold keys and values (every layer).
  uint64_t cachedPositions(uint32_t slot) const { return cachedPositions_[slot]; }
  void setCachedPositions(uint32_t slot, uint64_t positions) { cachedPositions_[slot] = positions; }

  const kernels::KvCacheView &view() const { return view_; }
  const void *data() const { return data_; } // null for a plan without a KV cache
  size_t bytes() const { return bytes_; }

  // Byte address of that row's scale in an INT8 cache (the head's next positions' follow it).
  uint8_t *scale(bool values, uint64_t layer, uint64_t slot, uint64_t head,
                 uint64_t position) const;

private:
  const plan::KvCacheDef *def_ = nullptr;
  void *data_ = nullptr;
  size_t bytes_ = 0;
  kernels::KvCacheView view_;
  std::unique_ptr<uint64_t[]> cachedPositions_; // [slots]
};

} // namespace hetc
