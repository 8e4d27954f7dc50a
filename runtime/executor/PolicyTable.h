// The plan's policy tables (hplan.fbs StagePlanDef.policy_table) as plain arrays, so that the
// policy at a step's (batch, length) is a lookup: two binary searches, no FlatBuffer walk and no
// allocation. A policy is six bits in LIA's sublayer order, a set bit on the CPU (Devices.h).
#pragma once

#include "runtime/format/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hetc {

// One stage's table: rows by increasing length, each row's batch ranges in order, and for each
// range one policy per layer group.
struct StagePolicyTable {
  bool present = false;
  uint32_t groupCount = 0;
  std::vector<uint32_t> groupFirstLayer; // [groups]
  std::vector<uint32_t> groupLayerCount; // [groups]
  std::vector<std::string> groupNames;   // [groups]
  std::vector<uint64_t> rowLen;          // [rows], increasing, the first 1
  std::vector<uint32_t> rowFirstRange;   // [rows + 1]: row r's ranges are [r], [r + 1])
  std::vector<uint64_t> rangeLastBatch;  // [ranges], increasing within a row
  std::vector<uint64_t> rangeFirstBatch; // [ranges]
  std::vector<uint8_t> policies;         // [ranges * groups]
};

// Where a lookup landed: the policies of the stage's groups, and the row and range they come from.
struct PolicyLookup {
  const uint8_t *policies = nullptr; // [groupCount]; null when the plan has no table for the stage
  uint32_t groupCount = 0;
  uint64_t rowLen = 0;     // the row used
  uint64_t firstBatch = 0; // the range used
  uint64_t lastBatch = 0;
};

class PolicyTables {
public:
  // Copies both stages' tables out of a verified plan (Plan::load checked their shape). A plan
  // before schema 1.5 has none: every lookup then returns no policies.
  static PolicyTables fromPlan(const Plan &plan);

  // The policies at `batch` sequences (decode) or prompts (prefill) and length `len` (positions
  // attended in decode, prompt tokens in prefill): the row of the largest length not above `len`
  // and the range holding `batch`, as the compiler wrote them. Outside the table the nearest
  // entry is used: a length below the first row's (0) takes the first row, any length past the
  // last row the last one; a batch of 0 takes the first range, one past the row's last range
  // (beyond the plan's max_batch) the last range. Never allocates.
  PolicyLookup lookup(plan::StageDef stage, uint64_t batch, uint64_t len) const;

  const StagePolicyTable &stage(plan::StageDef stage) const {
    return stage == plan::StageDef::Decode ? decode_ : prefill_;
  }
  bool empty() const { return !prefill_.present && !decode_.present; }

private:
  StagePolicyTable prefill_;
  StagePolicyTable decode_;
};

// "decode at B=4, L=128: layers 0-1 (gpu-resident) (0,1,1,0,0,0)" with every group, for reports;
// "decode at B=4, L=128: no policy table (a plan for the host)" when the plan has none.
std::string policyLookupText(const PolicyTables &tables, plan::StageDef stage, uint64_t batch,
                             uint64_t len);

} // namespace hetc
