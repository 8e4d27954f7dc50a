// Stage planning: placement of weights, KV cache and activations, Optimization-1's resident
// layers, and the exhaustive policy search for each group of layers.
#include "hetc/compiler/DevicePlan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hetc::compiler {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kBf16Bytes = 2;
constexpr unsigned kFc1 = 4;

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", bytes / kGiB);
  return text;
}

// The working set of one sublayer in flight: its input, its widest output, and the hidden state
// the residual add keeps.
double activationBytes(const ModelShape &model, const LayerSize &size) {
  const double tokens =
      size.stage == Stage::Prefill ? double(size.batch) * double(size.len) : double(size.batch);
  const double widest = std::max({double(model.queryDim() + 2 * model.kvDim()),
                                  double(model.gatedFfn ? 2 * uint64_t{model.ffn} : model.ffn),
                                  double(model.hidden)});
  double largestInput = 0;
  for (const SublayerSize &sublayer : size.sublayers)
    largestInput = std::max(largestInput, sublayer.xBytes);
  return largestInput + kBf16Bytes * tokens * widest + size.residualBytes;
}

double embeddingBytes(const ModelShape &model) {
  return kBf16Bytes * double(model.vocab) * model.hidden * (model.tiedEmbeddings ? 1 : 2);
}

// K and V of every position of every sequence, for one layer.
double kvBytesPerLayer(const ModelShape &model, uint64_t batch, uint64_t len) {
  return 2 * kBf16Bytes * double(batch) * double(len) * double(model.kvDim());
}

LayerGroup makeGroup(const char *name, uint32_t layers, const LayerPlacement &placement,
                     const LayerSize &size, const Machine &machine, Timing timing) {
  LayerGroup group;
  group.name = name;
  group.layers = layers;
  group.placement = placement;
  group.ranking = rankPolicies(size, placement, machine, timing);
  return group;
}

// LIA section 6 keeps parameters on CXL; Gupta et al. keep host weights in the slow tier.
Tier weightHostTier(Placement placement, const Target &target) {
  switch (placement) {
  case Placement::Cxl:
    return Tier::Cxl;
  case Placement::Helm:
  case Placement::AllCpu:
    return target.cxl ? Tier::Cxl : Tier::Ddr;
  case Placement::Auto:
  case Placement::Ddr:
    break;
  }
  return Tier::Ddr;
}

bool anyGpuWeightSublayer(Policy policy) {
  for (unsigned i : {0u, 3u, 4u, 5u})
    if (!policy.onCpu(i))
      return true;
  return false;
}

} // namespace

const char *placementName(Placement placement) {
  switch (placement) {
  case Placement::Auto:
    return "auto";
  case Placement::Ddr:
    return "ddr";
  case Placement::Cxl:
    return "cxl";
  case Placement::Helm:
    return "helm";
  case Placement::AllCpu:
    return "all-cpu";
  }
  return "?";
}

bool parsePlacement(const std::string &text, Placement &placement) {
  for (Placement candidate :
       {Placement::Auto, Placement::Ddr, Placement::Cxl, Placement::Helm, Placement::AllCpu}) {
    if (text == placementName(candidate)) {
      placement = candidate;
      return true;
    }
  }
  return false;
}

double StagePlan::secondsWith(const RankedPolicy &alternative) const {
  const LayerGroup &first = groups.front();
  return seconds +
         first.layers * (alternative.time.total(timing) - first.best().time.total(timing));
}

Result<StagePlan> planStage(const PlanRequest &request) {
  if (!request.model || !request.target)
    return Status::error("a plan needs a model and a target");
  if (request.batch == 0)
    return Status::error("batch must be at least 1");
  if (request.len == 0)
    return Status::error("len must be at least 1");
  const ModelShape &model = *request.model;
  const Target &target = *request.target;
  const Machine machine = Machine::of(target);
  const bool hasGpu = target.hasGpu();
  Placement placement = request.placement;
  if (!hasGpu && (placement == Placement::Helm || placement == Placement::AllCpu))
    return Status::error(std::string("placement ") + placementName(placement) + " needs a GPU; " +
                         target.name + " has none");
  if (!target.cxl && placement == Placement::Cxl)
    return Status::error("placement cxl needs a CXL tier; " + target.name + " has none");

  const LayerSize size = layerSize(model, request.stage, request.batch, request.len);
  const double layerWeights = size.weightBytes();
  const double allWeights = layerWeights * model.layers + embeddingBytes(model);
  const double kvPerLayer = kvBytesPerLayer(model, request.batch, request.len);
  const double allKv = kvPerLayer * model.layers;
  const double activations = activationBytes(model, size);

  StagePlan plan;
  plan.stage = request.stage;
  plan.batch = request.batch;
  plan.len = request.len;
  plan.timing = request.timing;

  if (placement == Placement::Auto) {
    const bool fitsDdr = allWeights + allKv + activations <= target.ddr.capacityBytes;
    const bool fitsWithCxl = target.cxl && allWeights <= target.cxl->capacityBytes() &&
                             allKv + activations <= target.ddr.capacityBytes;
    placement = !fitsDdr && fitsWithCxl ? Placement::Cxl : Placement::Ddr;
  }
  plan.placement = placement;

  LayerPlacement host;
  host.weightHostTier = weightHostTier(placement, target);
  host.kvTier = placement == Placement::AllCpu ? Tier::Gpu : Tier::Ddr;

  // GPU memory a streamed layer needs while it runs: its weights and the next layer's (prefetched),
  // one layer's KV cache for attention on the GPU, and a sublayer's activations.
  double gpuFree = 0;
  if (hasGpu) {
    const double workingSet = 2 * layerWeights + kvPerLayer + activations;
    gpuFree = target.gpu->memoryBytes - target.gpu->reservedBytes - workingSet;
    if (placement == Placement::AllCpu)
      gpuFree -= allKv;
    if (gpuFree < 0) {
      plan.notes.push_back("one streamed layer's working set (" + gib(workingSet) +
                           ") exceeds the GPU's free memory; GPU sublayers would run in "
                           "mini-batches");
      gpuFree = 0;
    }
  }

  // As many layers as the free memory holds, or the count a compiled plan fixed.
  auto layersFitting = [&](double bytesPerLayer) {
    if (request.residentLayerCount)
      return std::min(model.layers, *request.residentLayerCount);
    return static_cast<uint32_t>(
        std::min<double>(model.layers, std::floor(gpuFree / bytesPerLayer)));
  };
  uint32_t onGpuLayers = 0;
  LayerPlacement onGpu = host;
  const char *onGpuName = nullptr;
  if (hasGpu && placement == Placement::Helm) {
    onGpuLayers = layersFitting(size.sublayers[kFc1].yBytes);
    onGpu.weightsOnGpu[kFc1] = true;
    onGpuName = "fc1-on-gpu";
  } else if (hasGpu && request.residentLayers && placement != Placement::AllCpu) {
    onGpuLayers = layersFitting(layerWeights);
    onGpu.weightsOnGpu.fill(true);
    onGpuName = "gpu-resident";
  }
  const uint32_t streamedLayers = model.layers - onGpuLayers;
  if (streamedLayers > 0)
    plan.groups.push_back(
        makeGroup("streamed", streamedLayers, host, size, machine, request.timing));
  if (onGpuLayers > 0)
    plan.groups.push_back(makeGroup(onGpuName, onGpuLayers, onGpu, size, machine, request.timing));

  bool anyGpuCompute = false, streamsWeights = false, gpuAttentionFromHost = false;
  for (const LayerGroup &group : plan.groups) {
    const RankedPolicy &best = group.best();
    plan.seconds += group.layers * best.time.total(request.timing);
    plan.cpuSeconds += group.layers * best.time.cpu;
    plan.gpuSeconds += group.layers * best.time.gpu;
    plan.pcieSeconds += group.layers * best.time.pcie;
    plan.serialSeconds += group.layers * best.time.serial;
    plan.overlappedSeconds += group.layers * best.time.overlapped;
    anyGpuCompute |= best.policy != Policy::allCpu();
    streamsWeights |= group.name == "streamed" && anyGpuWeightSublayer(best.policy);
    gpuAttentionFromHost |=
        (!best.policy.onCpu(1) || !best.policy.onCpu(2)) && group.placement.kvTier != Tier::Gpu;
  }

  // Memory per tier for the whole model: the host keeps every parameter; the GPU holds the
  // resident copies and the working set of what it computes.
  TierUse &gpu = plan.memory[static_cast<int>(Tier::Gpu)];
  TierUse &ddr = plan.memory[static_cast<int>(Tier::Ddr)];
  TierUse &cxl = plan.memory[static_cast<int>(Tier::Cxl)];
  ddr.present = true;
  ddr.capacity = target.ddr.capacityBytes;
  if (target.cxl) {
    cxl.present = true;
    cxl.capacity = target.cxl->capacityBytes();
  }
  if (hasGpu) {
    gpu.present = true;
    gpu.capacity = target.gpu->memoryBytes - target.gpu->reservedBytes;
  }
  plan.memory[static_cast<int>(host.weightHostTier)].weights += allWeights;
  plan.memory[static_cast<int>(host.kvTier)].kv += allKv;
  ddr.activations += activations;
  if (onGpuLayers > 0)
    gpu.weights +=
        onGpuLayers * (placement == Placement::Helm ? size.sublayers[kFc1].yBytes : layerWeights);
  if (streamsWeights)
    gpu.weights += 2 * layerWeights;
  if (gpuAttentionFromHost)
    gpu.kv += kvPerLayer;
  if (anyGpuCompute)
    gpu.activations += activations;

  for (Tier tier : {Tier::Gpu, Tier::Ddr, Tier::Cxl}) {
    const TierUse &use = plan.memory[static_cast<int>(tier)];
    if (use.present && use.total() > use.capacity)
      plan.notes.push_back(std::string(tierName(tier)) + " needs " + gib(use.total()) +
                           ", more than its " + gib(use.capacity) +
                           " (the prediction stands, as LIA's latency model does beyond its "
                           "machine's capacity)");
  }
  return plan;
}

Policy PolicyTable::lookup(uint64_t batch, uint64_t len) const {
  const PolicyRow *row = &rows.front();
  for (const PolicyRow &candidate : rows)
    if (candidate.len <= len)
      row = &candidate;
  for (const PolicyRange &range : row->ranges)
    if (batch <= range.lastBatch)
      return range.policy;
  return row->ranges.back().policy;
}

Result<PolicyTable> buildPolicyTable(const PlanRequest &request, const std::vector<uint64_t> &lens,
                                     uint64_t maxBatch) {
  if (lens.empty())
    return Status::error("a policy table needs at least one length");
  if (maxBatch == 0)
    return Status::error("a policy table needs a batch bound of at least 1");
  std::vector<uint64_t> sorted = lens;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());

  PolicyTable table;
  table.stage = request.stage;
  table.maxBatch = maxBatch;
  for (uint64_t len : sorted) {
    PolicyRow row;
    row.len = len;
    for (uint64_t batch = 1; batch <= maxBatch; ++batch) {
      PlanRequest point = request;
      point.batch = batch;
      point.len = len;
      Result<StagePlan> plan = planStage(point);
      if (!plan)
        return plan.status();
      const Policy policy = plan->policy();
      std::vector<Policy> groupPolicies;
      for (const LayerGroup &group : plan->groups)
        groupPolicies.push_back(group.best().policy);
      const bool same =
          !row.ranges.empty() && row.ranges.back().policy == policy &&
          (!request.residentLayerCount || row.ranges.back().groupPolicies == groupPolicies);
      if (same)
        row.ranges.back().lastBatch = batch;
      else
        row.ranges.push_back({batch, batch, policy, std::move(groupPolicies)});
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

} // namespace hetc::compiler
