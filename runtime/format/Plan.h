// A plan file mapped into memory and verified: the loader's output, the executor's input.
#pragma once

#include "hplan_generated.h"
#include "runtime/format/Format.h"
#include "runtime/format/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace hetc {

// A verified, read-only plan. Weights are read in place from the mapping.
class Plan {
public:
  // Maps `path` and verifies structure (FlatBuffers verifier), version, segment
  // bounds and checksums, and meaning (indices, sizes, arity). Any failure is one clear message.
  static Result<std::unique_ptr<Plan>> load(const std::string &path);
  // Verifies a plan already in memory (used by tests and fuzzing); `bytes` must outlive the Plan.
  static Result<std::unique_ptr<Plan>> fromBytes(const uint8_t *bytes, size_t size);
  ~Plan();
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;

  const plan::PlanDef &def() const { return *def_; }
  // Start of tensor `index`'s payload (its segment) in the mapping.
  const void *tensorData(uint32_t index) const;
  size_t fileSize() const { return size_; }

private:
  Plan() = default;
  const uint8_t *bytes_ = nullptr;
  size_t size_ = 0;
  void *mapping_ = nullptr; // owned mmap, or null when the bytes belong to the caller
  const plan::PlanDef *def_ = nullptr;
};

} // namespace hetc
