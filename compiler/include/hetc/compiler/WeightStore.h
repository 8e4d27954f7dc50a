// The bytes of a model's weights, kept outside the IR: `hetc.weight "name"` refers to an entry.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hetc::compiler {

// Element types a weight can arrive in from ONNX. Int4Blocks is a 4-bit weight as ONNX Runtime's
// MatMulNBits stores it (StoredWeight::int4); Int8Channels a symmetric int8 weight of a QDQ
// DequantizeLinear (StoredWeight::int8).
enum class WeightElementType { F32, F16, BF16, I64, Int4Blocks, Int8Channels };

// A 4-bit weight [N, K] in blocks along K: W[n][k] = scales[n * blocks + b] * (q[n][k] -
// zeroPoints[n * blocks + b]), b = k / blockSize. The StoredWeight's data holds q as MatMulNBits
// packs it: [N][blocks][blockSize / 2] bytes, element k of a block in byte k / 2, the even one in
// the low nibble. K need not fill the last block.
struct Int4Blocks {
  uint64_t blockSize = 0;
  uint64_t blocks = 0;             // per row: ceil(K / blockSize)
  std::vector<float> scales;       // [N * blocks]
  std::vector<uint8_t> zeroPoints; // [N * blocks], each 0..15 (8 when the model gives none)
};

// A 2-D int8 weight with a scale per index of `axis` (0 or 1; -1: one scale for all), zero point
// 0: W[i][j] = q[i][j] * scales[axis == 0 ? i : axis == 1 ? j : 0]. The StoredWeight's data holds
// q row-major in its shape.
struct Int8Channels {
  int64_t axis = -1;
  std::vector<float> scales;
};

struct StoredWeight {
  std::string name;
  WeightElementType elementType = WeightElementType::F32;
  std::vector<int64_t> shape; // for Int4Blocks the logical [N, K]
  const void *data = nullptr; // points into memory the store owns (or maps)
  uint64_t bytes = 0;
  std::shared_ptr<const Int4Blocks> int4;   // for Int4Blocks
  std::shared_ptr<const Int8Channels> int8; // for Int8Channels

  // The elements as float32: F16 and BF16 widened exactly, Int4Blocks dequantized (in float32,
  // scale * (q - zero point)); empty for I64.
  std::vector<float> toFloats() const;
  // Elements [begin, begin + count) of the row-major elements (of the logical [N, K] for
  // Int4Blocks) into `out` as toFloats gives them; not for I64.
  void floatsInto(uint64_t begin, uint64_t count, float *out) const;
  uint64_t elementCount() const;
  // The element of 4-bit weight row n at k, 0..15.
  uint8_t int4At(uint64_t n, uint64_t k) const;
  // An Int8Channels weight's q at (i, j) of its shape, and its scale there.
  int8_t int8At(uint64_t i, uint64_t j) const {
    return static_cast<const int8_t *>(data)[i * static_cast<uint64_t>(shape[1]) + j];
  }
  float int8Scale(uint64_t i, uint64_t j) const {
    return int8->scales[int8->axis == 0 ? i : int8->axis == 1 ? j : 0];
  }
};

// Owns the memory behind every weight: the parsed protobuf's raw data, mapped external-data
// files, or buffers materialised during import (e.g. from float_data).
class WeightStore {
public:
  WeightStore();
  ~WeightStore();
  WeightStore(const WeightStore &) = delete;
  WeightStore &operator=(const WeightStore &) = delete;

  const StoredWeight *find(const std::string &name) const;
  // Adds a weight whose bytes stay valid as long as the store lives (see keepAlive).
  void add(StoredWeight weight);
  // Keeps an owner of weight memory alive as long as the store (protobuf, mapping, buffer).
  void keepAlive(std::shared_ptr<void> owner);
  // Records [data, data + size) as a read-only file mapping, whose pages releasePages may drop.
  void addFileMapping(const void *data, uint64_t size);
  // Gives the pages behind bytes [begin, end) of `weight` back to the kernel when they are a file
  // mapping's: they are read again from the file if touched again. Memory the store owns
  // otherwise is left alone. Called as a weight is written into the plan, so compiling a model
  // larger than memory holds about one weight at a time, not all of them.
  void releasePages(const StoredWeight &weight, uint64_t begin = 0,
                    uint64_t end = UINT64_MAX) const;
  const std::map<std::string, StoredWeight> &all() const { return weights_; }

private:
  std::map<std::string, StoredWeight> weights_;
  std::vector<std::shared_ptr<void>> owners_;
  std::vector<std::pair<const char *, uint64_t>> fileMappings_;
};

} // namespace hetc::compiler
