// The device plan of one stage: which device computes each sublayer, where weights, KV cache and
// activations live, and what that is predicted to cost, for a model on a target at (B, L).
//
// Decoder layers fall into groups that share a placement, each with its own optimal policy:
//  - "streamed": weights in host memory, brought over PCIe for the sublayers the GPU computes;
//  - "gpu-resident": whole decoder layers kept in GPU memory the streamed layers leave free
//    (LIA Optimization-1); their sublayers need no weight transfer;
//  - "fc1-on-gpu": HeLM's layers whose FC1 weights sit in GPU memory (Gupta et al. V-B).
// The plan's policy is the streamed group's, the paper's p, or the resident group's when every
// layer fits on the GPU.
#pragma once

#include "hetc/compiler/CostModel.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hetc::compiler {

// Where weights, KV cache and activations live.
enum class Placement {
  Auto,   // Ddr when it fits in DDR, else Cxl when the target has CXL
  Ddr,    // everything in DDR; spare GPU memory holds whole layers (Optimization-1)
  Cxl,    // LIA section 6: parameters on CXL, KV cache and activations in DDR; Optimization-1
  Helm,   // Gupta et al. HeLM: FC1 weights on the GPU, other weights in the slow host tier
  AllCpu, // Gupta et al. All-CPU: every weight in the slow host tier, KV cache on the GPU
};
const char *placementName(Placement placement); // "auto", "ddr", "cxl", "helm", "all-cpu"
bool parsePlacement(const std::string &text, Placement &placement);

struct PlanRequest {
  const ModelShape *model = nullptr;
  const Target *target = nullptr;
  Stage stage = Stage::Decode;
  uint64_t batch = 1;
  uint64_t len = 1; // prefill: prompt tokens; decode: positions attended
  Timing timing = Timing::Serial;
  Placement placement = Placement::Auto;
  bool residentLayers = true; // Optimization-1
  // Exactly this many resident layers (a compiled plan's fixed placement), whether or not they
  // fit beside the streamed layers' working set; unset: as many as fit. Needs residentLayers.
  std::optional<uint32_t> residentLayerCount;
};

struct LayerGroup {
  std::string name; // "streamed", "gpu-resident", "fc1-on-gpu"
  uint32_t layers = 0;
  LayerPlacement placement;
  std::vector<RankedPolicy> ranking; // every policy the machine allows, best first
  const RankedPolicy &best() const { return ranking.front(); }
};

// Bytes one tier holds for the whole model, and what it can hold.
struct TierUse {
  bool present = false;
  double weights = 0;
  double kv = 0;
  double activations = 0;
  double capacity = 0;
  double total() const { return weights + kv + activations; }
};

struct StagePlan {
  Stage stage = Stage::Decode;
  uint64_t batch = 0;
  uint64_t len = 0;
  Timing timing = Timing::Serial;
  Placement placement = Placement::Ddr; // as resolved from Auto
  std::vector<LayerGroup> groups;       // the group whose policy is the plan's comes first
  // Every decoder layer of the stage (one prefill pass, or one decode step), seconds.
  double seconds = 0;
  double cpuSeconds = 0;
  double gpuSeconds = 0;
  double pcieSeconds = 0;
  double serialSeconds = 0;      // the chosen policies' Eq. 2 time
  double overlappedSeconds = 0;  // the chosen policies' Optimization-2 time
  std::array<TierUse, 3> memory; // indexed by Tier
  std::vector<std::string> notes;

  Policy policy() const { return groups.front().best().policy; }
  // The stage time had the first group run `alternative` instead of its best policy.
  double secondsWith(const RankedPolicy &alternative) const;
};

// Plans one stage. Fails on a request the model or target cannot express (no GPU for a
// GPU placement, no CXL for Cxl, zero batch or length).
Result<StagePlan> planStage(const PlanRequest &request);

// LIA Figure 9 as a table a plan can carry: for each length, the batches cut into the ranges over
// which one policy is optimal (exact to the batch).
struct PolicyRange {
  uint64_t firstBatch = 0;
  uint64_t lastBatch = 0;
  Policy policy;
  // Every layer group's policy, in StagePlan::groups order (policy is the first's). With a fixed
  // PlanRequest::residentLayerCount the groups are the same at every point and a range ends where
  // any of them changes; otherwise only where `policy` does.
  std::vector<Policy> groupPolicies;
};

struct PolicyRow {
  uint64_t len = 0;
  std::vector<PolicyRange> ranges;
};

struct PolicyTable {
  Stage stage = Stage::Decode;
  uint64_t maxBatch = 0;
  std::vector<PolicyRow> rows; // by increasing len

  // The row of the largest len not above `len` (the first row below them all); the range holding
  // `batch` (batches past maxBatch take the last range).
  Policy lookup(uint64_t batch, uint64_t len) const;
};

// Plans every batch 1..maxBatch at each of `lens` (the request's batch and len are replaced).
Result<PolicyTable> buildPolicyTable(const PlanRequest &request, const std::vector<uint64_t> &lens,
                                     uint64_t maxBatch);

} // namespace hetc::compiler
