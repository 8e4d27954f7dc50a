// Sessions: one sequence's KV cache kept in a file between runs, so a conversation continues
// where it stopped without recomputing its history. saveSession writes one slot of a KV cache,
// restoreSession loads a file into any slot of a KV cache on a plan of the same model.
//
// File layout (little endian), version 1:
//   [0, 8)    magic "HETCSESS"
//   [8, 12)   format version (1)
//   [12, 16)  header bytes (80)
//   [16, 24)  model fingerprint: sessionFingerprint() of the plan that wrote it
//   [24, 32)  positions: KV rows held per (layer, K or V, KV head)
//   [32, 40)  history: token ids that follow the header (at least `positions`; the ids past the
//             positions are not in the cache yet, e.g. the last generated id)
//   [40, 41)  KV dtype (plan::DTypeDef), then 3 zero bytes
//   [44, 48)  bytes per KV element
//   [48, 60)  layers, KV heads, head_dim (uint32 each), then 4 zero bytes
//   [64, 72)  XXH64 (seed 0) of every byte after the header
//   [72, 80)  zero
//   then int32 history[history], then for each layer, K then V, each KV head: `positions` rows
//   of head_dim elements, packed, followed for an INT8 cache by the rows' `positions` float32
//   scales (the plan's strides are not stored: any plan of the model with room for the positions
//   can take the file).
#pragma once

#include "runtime/format/Plan.h"
#include "runtime/format/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hetc {

class KvCache;

constexpr uint32_t kSessionFormatVersion = 1;
constexpr uint64_t kSessionHeaderBytes = 80;

// A session file's header and history, checked for consistency (size, magic, version, counts,
// checksum) but not against any plan.
struct SessionInfo {
  uint32_t formatVersion = 0;
  uint64_t fingerprint = 0;
  uint64_t positions = 0;
  plan::DTypeDef kvDtype = plan::DTypeDef::F32;
  uint32_t elementBytes = 0;
  uint32_t layers = 0;
  uint32_t kvHeads = 0;
  uint32_t headDim = 0;
  std::vector<int32_t> history;
  uint64_t fileBytes = 0;
  uint64_t kvBytes = 0; // K and V of every layer and head (with an INT8 cache's scales)
};

// What a session's KV cache depends on: XXH64 over the model definition, each attention op's
// scale, every weight's dtype, layout, shape and segment checksum, and the KV cache's dtype,
// layers, KV heads and head_dim. Plans of the same model and weights compiled with other bounds
// share it; another model or weight format (f32 or bf16) does not.
uint64_t sessionFingerprint(const Plan &plan);

// Reads and checks a whole session file without a plan (`hetc session show`).
Result<SessionInfo> readSessionInfo(const std::string &path);

// Writes positions 0..cachedPositions(slot)-1 of `slot` of `cache`, a KV cache on `plan` (every
// layer, K and V), and `history`, the sequence's token ids (at least one per position), to `path`
// atomically: a temporary file in the same directory, renamed over `path`.
Status saveSession(const std::string &path, const Plan &plan, const KvCache &cache, uint32_t slot,
                   const std::vector<int32_t> &history);

// Loads a file saved from a plan of the same model (sessionFingerprint) into `slot` of `cache`, any
// slot, and returns its header and history; the slot's cached positions become the file's. Every
// failure is one message; one found after the slot's rows were written (a checksum mismatch)
// leaves the slot with no cached positions.
Result<SessionInfo> restoreSession(const std::string &path, const Plan &plan, KvCache &cache,
                                   uint32_t slot);

} // namespace hetc
