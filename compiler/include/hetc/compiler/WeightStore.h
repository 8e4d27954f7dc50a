// The bytes of a model's weights, kept outside the IR: `hetc.weight "name"` refers to an entry.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hetc::compiler {

// Element types a weight can arrive in from ONNX.
enum class WeightElementType { F32, F16, BF16, I64 };

struct StoredWeight {
  std::string name;
  WeightElementType elementType = WeightElementType::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr; // points into memory the store owns (or maps)
  uint64_t bytes = 0;

  // The elements as float32, F16 and BF16 widened exactly; empty for I64.
  std::vector<float> toFloats() const;
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
  const std::map<std::string, StoredWeight> &all() const { return weights_; }

private:
  std::map<std::string, StoredWeight> weights_;
  std::vector<std::shared_ptr<void>> owners_;
};

} // namespace hetc::compiler
