#include "runtime/format/Format.h"

namespace hetc {

uint64_t dtypeBytes(plan::DTypeDef dtype) {
  switch (dtype) {
  case plan::DTypeDef::F32:
    return 4;
  case plan::DTypeDef::BF16:
    return 2;
  case plan::DTypeDef::INT8:
    return 1;
  case plan::DTypeDef::INT4: // two to a byte, in packed layouts only (which size themselves)
    return 1;
  }
  return 0;
}

namespace {

// a * b + c rounded up to `align`, or none on overflow.
std::optional<uint64_t> alignedProduct(uint64_t a, uint64_t b, uint64_t align) {
  uint64_t bytes, padded;
  if (__builtin_mul_overflow(a, b, &bytes) || __builtin_add_overflow(bytes, align - 1, &padded))
    return std::nullopt;
  return padded / align * align;
}

} // namespace

std::string kvLayoutText(plan::DTypeDef dtype) {
  if (!kvInBlocks(dtype))
    return "dimension-first [layer][slot][kv_head][pos][dim]";
  const std::string block = std::to_string(kKvBlockPositions);
  return "dimension-first [layer][slot][kv_head], positions in blocks of " + block +
         " for vdpbf16ps (K [pos/" + block + "][dim/2][" + block + "][2], V [pos/" + block + "][" +
         std::to_string(kKvBlockPositions / 2) + "][dim][2])";
}

std::optional<KvLayout> kvLayout(plan::DTypeDef dtype, uint64_t layers, uint64_t slots,
                                 uint64_t kvHeads, uint64_t headDim, uint64_t maxSeq,
                                 uint64_t posStride) {
  KvLayout kv;
  kv.posStride = posStride ? posStride : headDim;
  uint64_t elements;
  if (__builtin_mul_overflow(kvStreamPositions(dtype, maxSeq), kv.posStride, &kv.headStride) ||
      __builtin_mul_overflow(kvHeads, kv.headStride, &kv.slotStride) ||
      __builtin_mul_overflow(slots, kv.slotStride, &kv.layerStride) ||
      __builtin_mul_overflow(layers, kv.layerStride, &elements))
    return std::nullopt;
  std::optional<uint64_t> regionBytes =
      alignedProduct(elements, dtypeBytes(dtype), kBufferAlignment);
  if (!regionBytes || __builtin_mul_overflow(*regionBytes, uint64_t{2}, &kv.arenaSize))
    return std::nullopt;
  kv.vOffset = *regionBytes;
  if (!kvHasRowScales(dtype))
    return kv;
  uint64_t scales;
  kv.scaleHeadStride = maxSeq;
  if (__builtin_mul_overflow(kvHeads, kv.scaleHeadStride, &kv.scaleSlotStride) ||
      __builtin_mul_overflow(slots, kv.scaleSlotStride, &kv.scaleLayerStride) ||
      __builtin_mul_overflow(layers, kv.scaleLayerStride, &scales))
    return std::nullopt;
  std::optional<uint64_t> scaleBytes = alignedProduct(scales, kKvScaleBytes, kBufferAlignment);
  if (!scaleBytes)
    return std::nullopt;
  kv.kScaleOffset = kv.arenaSize;
  if (__builtin_add_overflow(kv.kScaleOffset, *scaleBytes, &kv.vScaleOffset) ||
      __builtin_add_overflow(kv.vScaleOffset, *scaleBytes, &kv.arenaSize))
    return std::nullopt;
  return kv;
}

const char *costSublayerName(unsigned index) {
  static const char *const kNames[kCostSublayerCount] = {"qkv", "qk", "sv", "out", "fc1", "fc2"};
  return index < kCostSublayerCount ? kNames[index] : "?";
}

std::string costSublayersText(uint8_t bits) {
  std::string text;
  for (unsigned i = 0; i < kCostSublayerCount; ++i)
    if (bits >> i & 1)
      text += (text.empty() ? "" : "+") + std::string(costSublayerName(i));
  return text.empty() ? "-" : text;
}

std::string policyText(uint8_t cpuBits) {
  std::string text = "(";
  for (unsigned i = 0; i < kCostSublayerCount; ++i)
    text += std::string(i ? "," : "") + ((cpuBits >> i & 1) ? "1" : "0");
  return text + ")";
}

unsigned firstCostSublayer(uint8_t bits) {
  for (unsigned i = 0; i < kCostSublayerCount; ++i)
    if (bits >> i & 1)
      return i;
  return kCostSublayerCount;
}

} // namespace hetc
