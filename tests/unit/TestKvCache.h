// A KV cache for kernel tests: 2 layers, `slots` slots, `kvHeads` heads of `maxSeq` positions,
// every stride padded so a kernel that assumes a dense layout reads the wrong elements, of
// float32 or bf16 elements, every element NaN until written. key() and value() read an element
// as the kernels see it (a bf16 one widened).
#pragma once

#include "LongTailedRandom.h"

#include "codegen/cpu/WeightLayout.h"
#include "hetc/runtime/Kernels.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace hetc::test {

struct TestKvCache {
  TestKvCache(size_t kvHeads, size_t headDim, size_t maxSeq, size_t slots,
              kernels::KvElement element = kernels::KvElement::F32) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    view.element = element;
    view.posStride = headDim + 3;
    view.headStride = maxSeq * view.posStride + 7;
    view.slotStride = kvHeads * view.headStride + 11;
    view.layerStride = slots * view.slotStride;
    elements = 2 * view.layerStride;
    if (bf16()) {
      keys16.assign(elements, codegen::floatToBf16(nan));
      values16.assign(elements, codegen::floatToBf16(nan));
      view.keys = keys16.data();
      view.values = values16.data();
    } else {
      keys.assign(elements, nan);
      values.assign(elements, nan);
      view.keys = keys.data();
      view.values = values.data();
    }
  }
  bool bf16() const { return view.element == kernels::KvElement::Bf16; }
  float key(size_t at) const { return bf16() ? codegen::bf16ToFloat(keys16[at]) : keys[at]; }
  float value(size_t at) const { return bf16() ? codegen::bf16ToFloat(values16[at]) : values[at]; }
  // Stores k and v at element `at`, rounded to bf16 in a bf16 cache.
  void set(size_t at, float k, float v) {
    if (bf16()) {
      keys16[at] = codegen::floatToBf16(k);
      values16[at] = codegen::floatToBf16(v);
    } else {
      keys[at] = k;
      values[at] = v;
    }
  }
  // Random K and V at positions [0, length) of (layer, slot), every head.
  void fill(LongTailedRandom &random, size_t layer, size_t slot, size_t kvHeads, size_t headDim,
            size_t length) {
    for (size_t g = 0; g < kvHeads; ++g)
      for (size_t p = 0; p < length; ++p)
        for (size_t i = 0; i < headDim; ++i) {
          const float k = random.next(4.0f);
          set(view.offset(layer, slot, g, p) + i, k, random.next(30.0f));
        }
  }

  size_t elements = 0;
  std::vector<float> keys, values;
  std::vector<uint16_t> keys16, values16;
  kernels::KvCacheView view;
};

} // namespace hetc::test
