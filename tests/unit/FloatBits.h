// A float's bits and back, for tests that compare results bit for bit or build special values.
#pragma once

#include <cstdint>
#include <cstring>

namespace hetc::test {

inline uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

} // namespace hetc::test
