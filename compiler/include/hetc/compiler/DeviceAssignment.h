// The device plan a compiled plan carries: the cost model (CostModel.h, DevicePlan.h) run for a
// model on a target at the plan's bounds, turned into what each decoder layer runs where, where
// weights, KV cache and activations live, the policy tables a runtime switches by, and why.
//
// Decode is planned at its heaviest point, max-batch sequences attending max-seq positions, and
// that plan fixes the memory: the weight and KV tiers and the layers kept resident in GPU memory
// (LIA Optimization-1, the first layers, so that the link fetches the first streamed layer while
// they run). Prefill is planned at one step of it, a prompt of min(max-step-tokens, max-seq)
// tokens, with the same placement. The tables give every group's policy at each (B, L) within
// the bounds under that placement.
#pragma once

#include "hetc/compiler/DevicePlan.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace hetc::compiler {

// Consecutive decoder layers that share a placement and so a policy.
struct LayerSpan {
  std::string group; // "gpu-resident", "fc1-on-gpu", "streamed" (DevicePlan.h), or "cpu-only"
  uint32_t firstLayer = 0;
  uint32_t layers = 0;
  Policy policy;
  double layerSeconds = 0; // one layer under the stage's timing; 0 when nothing was predicted
  std::array<bool, kSublayerCount> weightsOnGpu{}; // by sublayer: a resident copy in GPU memory
};

struct StageAssignment {
  Stage stage = Stage::Decode;
  uint64_t batch = 0; // the operating point the spans' policies were chosen at
  uint64_t len = 0;
  double seconds = 0;           // every decoder layer once; 0 when nothing was predicted
  std::vector<LayerSpan> spans; // in layer order, covering every layer once
  // Every span's policy over (B, L): PolicyRange::groupPolicies are in `spans` order.
  PolicyTable table;
  std::vector<std::string> notes;
  std::string reason; // one line: what runs where at the operating point, and why

  const LayerSpan &spanOf(uint32_t layer) const;
};

struct DeviceAssignment {
  std::string target;
  std::string gpu; // the target's GPU model; empty for a CPU-only target
  Timing timing = Timing::Serial;
  Placement placement = Placement::Ddr; // as resolved from Auto
  uint32_t residentLayers = 0;          // layers [0, residentLayers) keep weights on the GPU
  Tier weightHostTier = Tier::Ddr;      // where every weight's host copy lives
  Tier kvTier = Tier::Ddr;
  Tier activationTier = Tier::Ddr;
  std::string tierReason;
  StageAssignment prefill;
  StageAssignment decode;

  const StageAssignment &stage(Stage stage) const {
    return stage == Stage::Prefill ? prefill : decode;
  }
  // Where the weights of `sublayer` in `layer` are read from: the GPU for a resident copy, else
  // their host tier.
  Tier weightTier(uint32_t layer, unsigned sublayer) const;
};

struct DeviceAssignmentRequest {
  const ModelShape *model = nullptr;
  const Target *target = nullptr;
  uint64_t maxBatch = 1; // the plan's bounds
  uint64_t maxSeq = 1;
  uint64_t maxStepTokens = 1;
  Timing timing = Timing::Serial;
  Placement placement = Placement::Auto;
  bool residentLayers = true; // Optimization-1
};

// Plans both stages as described above. Fails on a request the cost model refuses (DevicePlan.h).
Result<DeviceAssignment> assignDevices(const DeviceAssignmentRequest &request);

// Every sublayer of every layer on the CPU, nothing predicted: a target that is this machine's
// CPU alone ("host"), where there is nothing to choose.
DeviceAssignment cpuOnlyAssignment(const std::string &target, uint32_t layers, uint64_t maxBatch,
                                   uint64_t maxSeq, uint64_t maxStepTokens);

// The lengths a plan's policy table has rows for: 1, 2, 4, ... below maxSeq, and maxSeq.
std::vector<uint64_t> policyTableLengths(uint64_t maxSeq);

// "all CPU (1,1,1,1,1,1)", "partial CPU (0,1,1,0,0,0)", "all GPU (0,0,0,0,0,0)", else the text.
std::string describePolicy(Policy policy);

} // namespace hetc::compiler
