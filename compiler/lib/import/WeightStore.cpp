// The weight store: a name -> bytes table whose memory is owned by the objects kept alive here.
#include "hetc/compiler/WeightStore.h"

#include "runtime/format/Bf16.h"

#include <cstring>
#include <utility>

namespace hetc::compiler {

namespace {

// IEEE half -> float, exactly (every half is a float).
float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13); // inf or nan
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else { // subnormal: normalise
    int shift = 0;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | ((mantissa & 0x3ff) << 13);
  }
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

} // namespace

std::vector<float> StoredWeight::toFloats() const {
  switch (elementType) {
  case WeightElementType::F32: {
    std::vector<float> out(bytes / sizeof(float));
    std::memcpy(out.data(), data, out.size() * sizeof(float));
    return out;
  }
  case WeightElementType::F16:
  case WeightElementType::BF16: {
    std::vector<float> out(bytes / sizeof(uint16_t));
    const auto *half = static_cast<const uint16_t *>(data);
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = elementType == WeightElementType::F16 ? halfToFloat(half[i]) : bf16ToFloat(half[i]);
    return out;
  }
  case WeightElementType::Int4Blocks: {
    const auto n = static_cast<uint64_t>(shape[0]), k = static_cast<uint64_t>(shape[1]);
    std::vector<float> out(n * k);
    for (uint64_t row = 0; row < n; ++row)
      for (uint64_t col = 0; col < k; ++col) {
        const uint64_t block = row * int4->blocks + col / int4->blockSize;
        out[row * k + col] = int4->scales[block] * (static_cast<float>(int4At(row, col)) -
                                                    static_cast<float>(int4->zeroPoints[block]));
      }
    return out;
  }
  case WeightElementType::Int8Channels: {
    const auto rows = static_cast<uint64_t>(shape[0]), cols = static_cast<uint64_t>(shape[1]);
    std::vector<float> out(rows * cols);
    for (uint64_t i = 0; i < rows; ++i)
      for (uint64_t j = 0; j < cols; ++j)
        out[i * cols + j] = static_cast<float>(int8At(i, j)) * int8Scale(i, j);
    return out;
  }
  case WeightElementType::I64:
    break;
  }
  return {};
}

uint8_t StoredWeight::int4At(uint64_t n, uint64_t k) const {
  const uint64_t blockBytes = int4->blockSize / 2;
  const uint8_t byte = static_cast<const uint8_t *>(
      data)[(n * int4->blocks + k / int4->blockSize) * blockBytes + (k % int4->blockSize) / 2];
  return k % 2 == 0 ? byte & 0x0f : byte >> 4;
}

WeightStore::WeightStore() = default;
WeightStore::~WeightStore() {
  // Entries point into the owners; drop them first so no pointer outlives its memory.
  weights_.clear();
  owners_.clear();
}

const StoredWeight *WeightStore::find(const std::string &name) const {
  auto it = weights_.find(name);
  return it == weights_.end() ? nullptr : &it->second;
}

void WeightStore::add(StoredWeight weight) {
  std::string name = weight.name;
  weights_[name] = std::move(weight);
}

void WeightStore::keepAlive(std::shared_ptr<void> owner) {
  if (owner)
    owners_.push_back(std::move(owner));
}

} // namespace hetc::compiler
