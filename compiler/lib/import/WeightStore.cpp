// The weight store: a name -> bytes table whose memory is owned by the objects kept alive here.
#include "hetc/compiler/WeightStore.h"

#include "runtime/format/Bf16.h"

#include <algorithm>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
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

uint64_t StoredWeight::elementCount() const {
  // Plain types count their bytes (a view of raw bytes may carry no shape); the packed ones
  // their logical shape.
  switch (elementType) {
  case WeightElementType::F32:
    return bytes / 4;
  case WeightElementType::F16:
  case WeightElementType::BF16:
    return bytes / 2;
  case WeightElementType::I64:
    return bytes / 8;
  default:
    break;
  }
  uint64_t count = 1;
  for (int64_t dim : shape)
    count *= static_cast<uint64_t>(dim);
  return count;
}

std::vector<float> StoredWeight::toFloats() const {
  if (elementType == WeightElementType::I64)
    return {};
  std::vector<float> out(elementCount());
  floatsInto(0, out.size(), out.data());
  return out;
}

void StoredWeight::floatsInto(uint64_t begin, uint64_t count, float *out) const {
  switch (elementType) {
  case WeightElementType::F32:
    std::memcpy(out, static_cast<const float *>(data) + begin, count * sizeof(float));
    return;
  case WeightElementType::F16:
  case WeightElementType::BF16: {
    const auto *half = static_cast<const uint16_t *>(data) + begin;
    for (uint64_t i = 0; i < count; ++i)
      out[i] = elementType == WeightElementType::F16 ? halfToFloat(half[i]) : bf16ToFloat(half[i]);
    return;
  }
  case WeightElementType::Int4Blocks: {
    const auto k = static_cast<uint64_t>(shape[1]);
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t row = (begin + i) / k, col = (begin + i) % k;
      const uint64_t block = row * int4->blocks + col / int4->blockSize;
      out[i] = int4->scales[block] *
               (static_cast<float>(int4At(row, col)) - static_cast<float>(int4->zeroPoints[block]));
    }
    return;
  }
  case WeightElementType::Int8Channels: {
    const auto cols = static_cast<uint64_t>(shape[1]);
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t row = (begin + i) / cols, col = (begin + i) % cols;
      out[i] = static_cast<float>(int8At(row, col)) * int8Scale(row, col);
    }
    return;
  }
  case WeightElementType::I64:
    break;
  }
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

void WeightStore::addFileMapping(const void *data, uint64_t size) {
  if (data && size > 0)
    fileMappings_.emplace_back(static_cast<const char *>(data), size);
}

void WeightStore::releasePages(const StoredWeight &weight, uint64_t begin, uint64_t end) const {
  end = std::min(end, weight.bytes);
  if (begin >= end)
    return;
  const auto *data = static_cast<const char *>(weight.data);
  for (const auto &[mapping, size] : fileMappings_) {
    if (data < mapping || data + weight.bytes > mapping + size)
      continue;
    // Whole pages: outwards at the weight's own ends (the mapping is private and read-only, so a
    // page shared with a neighbouring weight is simply read again from the file if that weight
    // is touched), inwards inside it, where the next rows may still be read.
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t from = static_cast<uint64_t>(data - mapping) + begin;
    const uint64_t to = static_cast<uint64_t>(data - mapping) + end;
    const uint64_t first = begin == 0 ? from / page * page : (from + page - 1) / page * page;
    const uint64_t last = end == weight.bytes ? std::min((to + page - 1) / page * page, size)
                                              : to / page * page;
    if (first < last)
      ::madvise(const_cast<char *>(mapping) + first, last - first, MADV_DONTNEED);
    return;
  }
}

} // namespace hetc::compiler
