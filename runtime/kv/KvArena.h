// The KV cache's memory: the arena the plan's KV cache lives in, reserved as address space (a page
// costs memory once a position on it is written) and bound to its tier's NUMA nodes before the
// first touch, and the view the kernels read it through (the plan's layout, runtime/format).
#pragma once

#include "runtime/format/Plan.h"
#include "runtime/format/Status.h"
#include "runtime/platform/NumaBinding.h"

#include "codegen/cpu/vector/Kernels.h"

#include <cstddef>
#include <cstdint>

namespace hetc {

class ThreadPool;

class KvArena {
public:
  KvArena() = default;
  ~KvArena();
  KvArena(const KvArena &) = delete;
  KvArena &operator=(const KvArena &) = delete;

  // Reserves the arena of `kv` (nothing for an empty one) and binds it as `binding` says.
  Status map(const plan::KvCacheDef &kv, const NumaTopology &topology, ArenaBinding &binding);

  const kernels::KvCacheView &view() const { return view_; }
  const void *data() const { return data_; } // null for a plan without a KV cache
  size_t bytes() const { return bytes_; }

  // Byte address of that row's scale in an INT8 cache (the head's next positions' follow it).
  uint8_t *scale(bool values, uint64_t layer, uint64_t slot, uint64_t head,
                 uint64_t position) const;

  // Benchmarks only: writes positions 0..positions-1 of `slot` in every layer's K and V with
  // deterministic pseudo-random values in [-1, 1), as a prefill would have, on `pool`'s threads.
  void fillSynthetic(ThreadPool &pool, const plan::KvCacheDef &kv, uint32_t slot,
                     uint64_t positions, uint64_t seed) const;

private:
  void *data_ = nullptr;
  size_t bytes_ = 0;
  kernels::KvCacheView view_;
};

} // namespace hetc
