// bfloat16: the one rounding hetc uses, in the compiler (packing weights), the KV cache's append,
// the activation rows the BF16 kernels read and the tests' references.
#pragma once

#include <cstdint>
#include <cstring>

namespace hetc {

// float -> bf16 rounding to nearest even, as vcvtne2ps2bf16 does: a NaN stays a (quiet) NaN and
// a denormal input becomes a zero of its sign. Inline: the KV append rounds every element it
// writes with it.
inline uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  // The hardware's definition (convert_fp32_to_bfloat16 in the SDM): NaN keeps its top half and
  // becomes quiet; a denormal is a zero; otherwise add 0x7fff plus the lowest kept bit.
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  if ((bits & 0x7f800000u) == 0)
    return static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t lsb = (bits >> 16) & 1;
  return static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

inline float bf16ToFloat(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

} // namespace hetc
