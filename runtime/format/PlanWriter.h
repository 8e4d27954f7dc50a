// Writes plan files. The compiler's plan emitter and the tests build plans through this one
// function, so the file layout (see runtime/format/hplan.fbs) is written in one place.
#pragma once

#include "hplan_generated.h"
#include "runtime/format/Format.h"
#include "runtime/format/Status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hetc {

// The bytes of one weight segment: `data` when they exist already (kept alive by the caller
// until writePlanFile returns), else made by `produce` when the segment is written, piece by
// piece, so that a plan larger than memory is written without holding any segment whole.
struct WeightPayload {
  using Write = std::function<Status(const void *bytes, uint64_t size)>;
  const void *data = nullptr;
  uint64_t size = 0;
  // Makes exactly `size` bytes, in order, handing each piece to `write`.
  std::function<Status(const Write &write)> produce;
};

// Writes `plan` and its weights to `path`. Payload i becomes segment i: this fills
// plan.segments (offset, size, XXH64 with seed 0) and sets plan.schema_version to
// kPlanSchemaVersion when the caller left it 0. Payloads are made and written one at a time, in
// order; the FlatBuffer, which holds their checksums, is written last at the file's start. Nothing else is checked here; Plan::load is the
// checker. The file is written to `path + ".tmp"` and renamed, so `path` never holds half a plan.
Status writePlanFile(const std::string &path, plan::PlanDefT &plan,
                     const std::vector<WeightPayload> &payloads);

// Sets the strides, offsets and arena size of `kv` to `layout` (kvLayout of its dimensions): the
// fields the verifier holds a 1.8 plan's KV cache to.
void setKvLayout(plan::KvCacheDefT &kv, const KvLayout &layout);

} // namespace hetc
