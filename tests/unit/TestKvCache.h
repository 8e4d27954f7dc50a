// A KV cache for kernel tests: 2 layers, `slots` slots, `kvHeads` heads of `maxSeq` positions,
// every stride padded so a kernel that assumes a dense layout reads the wrong elements, of
// float32, bf16 or int8 elements (int8 with a float32 scale per row, its strides padded too).
// Until written every float32 or bf16 element is NaN, every int8 element -128 (which quantising
// never writes) and every scale NaN. key() and value() read an element as the kernels see it,
// in double: a bf16 one widened, an int8 one times its row's scale.
#pragma once

#include "LongTailedRandom.h"

#include "codegen/cpu/linear/ActivationRows.h"
#include "codegen/cpu/vector/Kernels.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace hetc::test {

struct TestKvCache {
  static constexpr int8_t kUnwrittenInt8 = -128;

  TestKvCache(size_t kvHeads, size_t headDim, size_t maxSeq, size_t slots,
              kernels::KvElement element = kernels::KvElement::F32)
      : headDim(headDim) {
    view.element = element;
    // A bf16 or int8 cache's blocks fix its position stride at headDim and its streams at whole
    // blocks.
    const bool blocks = element != kernels::KvElement::F32;
    view.posStride = blocks ? headDim : headDim + 3;
    const size_t streamPositions =
        kvStreamPositions(blocks ? plan::DTypeDef::BF16 : plan::DTypeDef::F32, maxSeq);
    view.headStride = streamPositions * view.posStride + 7;
    view.slotStride = kvHeads * view.headStride + 11;
    view.layerStride = slots * view.slotStride;
    elements = 2 * view.layerStride;
    keyBytes.resize(elements * view.elementBytes());
    valueBytes.resize(elements * view.elementBytes());
    for (size_t at = 0; at < elements; ++at) {
      poisonElement(keyBytes, at);
      poisonElement(valueBytes, at);
    }
    view.keys = keyBytes.data();
    view.values = valueBytes.data();
    if (element == kernels::KvElement::Int8) {
      view.scaleHeadStride = maxSeq + 5;
      view.scaleSlotStride = kvHeads * view.scaleHeadStride + 3;
      view.scaleLayerStride = slots * view.scaleSlotStride;
      scaleCount = 2 * view.scaleLayerStride;
      keyScales.assign(scaleCount, kNaN);
      valueScales.assign(scaleCount, kNaN);
      view.keyScales = keyScales.data();
      view.valueScales = valueScales.data();
    }
  }
  TestKvCache(const TestKvCache &) = delete;
  TestKvCache &operator=(const TestKvCache &) = delete;

  bool int8() const { return view.element == kernels::KvElement::Int8; }

  double key(size_t layer, size_t slot, size_t head, size_t pos, size_t i) const {
    return read(true, layer, slot, head, pos, i);
  }
  double value(size_t layer, size_t slot, size_t head, size_t pos, size_t i) const {
    return read(false, layer, slot, head, pos, i);
  }
  // The raw int8 element and its row's scale (Int8 only).
  int8_t quantized(bool keys, size_t layer, size_t slot, size_t head, size_t pos, size_t i) const {
    return static_cast<int8_t>(bytes(keys)[view.elementOffset(keys, layer, slot, head, pos, i)]);
  }
  float scale(bool keys, size_t layer, size_t slot, size_t head, size_t pos) const {
    return (keys ? keyScales : valueScales)[view.scaleOffset(layer, slot, head, pos)];
  }

  // Stores the rows k and v (headDim values each) as the runtime stores them.
  void setRow(size_t layer, size_t slot, size_t head, size_t pos, const float *k, const float *v) {
    kernels::storeKvRow(view, true, layer, slot, head, pos, k, headDim);
    kernels::storeKvRow(view, false, layer, slot, head, pos, v, headDim);
  }

  // Random K (|k| up to ~4) and V (up to ~30) at positions [0, length) of (layer, slot), every
  // head.
  void fill(LongTailedRandom &random, size_t layer, size_t slot, size_t kvHeads, size_t length) {
    std::vector<float> k(headDim), v(headDim);
    for (size_t g = 0; g < kvHeads; ++g)
      for (size_t p = 0; p < length; ++p) {
        for (size_t i = 0; i < headDim; ++i) {
          k[i] = random.next(4.0f);
          v[i] = random.next(30.0f);
        }
        setRow(layer, slot, g, p, k.data(), v.data());
      }
  }

  // Makes row (layer, slot, head, pos) of K and V read as NaN (an int8 row through its scales),
  // keeping what it held for restorePoisoned().
  void poison(size_t layer, size_t slot, size_t head, size_t pos) {
    Saved saved;
    const size_t elementBytes = view.elementBytes();
    for (size_t i = 0; i < headDim; ++i)
      for (bool keys : {true, false}) {
        const size_t at = view.elementOffset(keys, layer, slot, head, pos, i);
        std::vector<uint8_t> &storage = keys ? keyBytes : valueBytes;
        saved.elements.push_back({keys, at,
                                  std::vector<uint8_t>(storage.begin() + at * elementBytes,
                                                       storage.begin() + (at + 1) * elementBytes)});
        poisonElement(storage, at);
      }
    if (int8()) {
      saved.scaleAt = view.scaleOffset(layer, slot, head, pos);
      saved.keyScale = keyScales[saved.scaleAt];
      saved.valueScale = valueScales[saved.scaleAt];
      keyScales[saved.scaleAt] = valueScales[saved.scaleAt] = kNaN;
    }
    poisoned.push_back(std::move(saved));
  }
  void restorePoisoned() {
    for (const Saved &saved : poisoned) {
      for (const SavedElement &element : saved.elements)
        std::memcpy((element.keys ? keyBytes : valueBytes).data() +
                        element.at * view.elementBytes(),
                    element.bytes.data(), element.bytes.size());
      if (int8()) {
        keyScales[saved.scaleAt] = saved.keyScale;
        valueScales[saved.scaleAt] = saved.valueScale;
      }
    }
    poisoned.clear();
  }

  // K and V elements, and scales, that no longer hold the unwritten value.
  size_t writtenElements() const {
    size_t written = 0;
    for (size_t at = 0; at < elements; ++at)
      written += !unwritten(keyBytes, at) + !unwritten(valueBytes, at);
    return written;
  }
  size_t writtenScales() const {
    size_t written = 0;
    for (size_t at = 0; at < scaleCount; ++at)
      written += !std::isnan(keyScales[at]) + !std::isnan(valueScales[at]);
    return written;
  }

  size_t headDim = 0;
  size_t elements = 0;
  size_t scaleCount = 0;
  kernels::KvCacheView view;

private:
  static constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  struct SavedElement {
    bool keys;
    size_t at;
    std::vector<uint8_t> bytes;
  };
  struct Saved {
    std::vector<SavedElement> elements;
    size_t scaleAt = 0;
    float keyScale = 0, valueScale = 0;
  };

  const std::vector<uint8_t> &bytes(bool keys) const { return keys ? keyBytes : valueBytes; }

  double read(bool keys, size_t layer, size_t slot, size_t head, size_t pos, size_t i) const {
    const size_t at = view.elementOffset(keys, layer, slot, head, pos, i);
    const uint8_t *p = bytes(keys).data() + at * view.elementBytes();
    switch (view.element) {
    case kernels::KvElement::F32: {
      float x;
      std::memcpy(&x, p, sizeof(x));
      return x;
    }
    case kernels::KvElement::Bf16: {
      uint16_t x;
      std::memcpy(&x, p, sizeof(x));
      return bf16ToFloat(x);
    }
    case kernels::KvElement::Int8:
      return double(static_cast<int8_t>(*p)) * scale(keys, layer, slot, head, pos);
    }
    return kNaN;
  }

  void poisonElement(std::vector<uint8_t> &storage, size_t at) const {
    uint8_t *p = storage.data() + at * view.elementBytes();
    if (view.element == kernels::KvElement::F32) {
      std::memcpy(p, &kNaN, sizeof(kNaN));
    } else if (view.element == kernels::KvElement::Bf16) {
      const uint16_t nan = floatToBf16(kNaN);
      std::memcpy(p, &nan, sizeof(nan));
    } else {
      *p = static_cast<uint8_t>(kUnwrittenInt8);
    }
  }

  bool unwritten(const std::vector<uint8_t> &storage, size_t at) const {
    const uint8_t *p = storage.data() + at * view.elementBytes();
    if (view.element == kernels::KvElement::F32) {
      float x;
      std::memcpy(&x, p, sizeof(x));
      return std::isnan(x);
    }
    if (view.element == kernels::KvElement::Bf16) {
      uint16_t x;
      std::memcpy(&x, p, sizeof(x));
      return std::isnan(bf16ToFloat(x));
    }
    return static_cast<int8_t>(*p) == kUnwrittenInt8;
  }

  std::vector<uint8_t> keyBytes, valueBytes;
  std::vector<float> keyScales, valueScales;
  std::vector<Saved> poisoned;
};

} // namespace hetc::test
