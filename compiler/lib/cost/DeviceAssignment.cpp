// A compiled plan's device plan: both stages planned at the plan's bounds with one placement,
// decoder layers laid out in spans, the policy tables, and the reasons in words.
#include "hetc/compiler/DeviceAssignment.h"

#include <algorithm>
#include <cstdio>

namespace hetc::compiler {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// A reason lists at most this many batch ranges of its length's row; the table holds them all.
constexpr size_t kReasonRanges = 4;
constexpr const char *kResidentGroup = "gpu-resident";
constexpr const char *kStreamedGroup = "streamed";

std::string formatText(const char *format, double a, double b = 0) {
  char text[64];
  std::snprintf(text, sizeof(text), format, a, b);
  return text;
}

// Four significant digits without an exponent: "0.0006984 ms", "24360 ms".
std::string millisecondsText(double ms) {
  char text[64];
  if (ms >= 1000)
    std::snprintf(text, sizeof(text), "%.0f ms", ms);
  else
    std::snprintf(text, sizeof(text), "%.4g ms", ms);
  return text;
}

std::string layerRange(uint32_t first, uint32_t count) {
  if (count == 1)
    return "layer " + std::to_string(first);
  return "layers " + std::to_string(first) + "-" + std::to_string(first + count - 1);
}

std::string batchRange(const PolicyRange &range) {
  if (range.firstBatch == range.lastBatch)
    return "B " + std::to_string(range.firstBatch);
  return "B " + std::to_string(range.firstBatch) + "-" + std::to_string(range.lastBatch);
}

// What a span's placement means: where its weights come from.
std::string spanPhrase(const LayerSpan &span, const DeviceAssignment &assignment) {
  if (span.group == kResidentGroup)
    return "resident on the GPU";
  if (span.group == "fc1-on-gpu")
    return "with FC1 weights on the GPU";
  if (span.group == kStreamedGroup)
    return assignment.gpu.empty()
               ? "in " + std::string(tierName(assignment.weightHostTier))
               : "streamed from " + std::string(tierName(assignment.weightHostTier));
  return "on this machine's CPU";
}

std::string policiesText(const std::vector<Policy> &policies, const StageAssignment &stage) {
  if (policies.size() == 1)
    return describePolicy(policies.front());
  std::string text;
  for (size_t i = 0; i < policies.size() && i < stage.spans.size(); ++i)
    text += (i ? ", " : "") + stage.spans[i].group + " " + policies[i].text();
  return text;
}

// "at L=512: B 1-852 all CPU (1,1,1,1,1,1), B 853-900 partial CPU (0,1,1,0,0,0)"
std::string tableSummary(const StageAssignment &stage) {
  if (stage.table.rows.empty())
    return "";
  const PolicyRow *row = &stage.table.rows.front();
  for (const PolicyRow &candidate : stage.table.rows)
    if (candidate.len <= stage.len)
      row = &candidate;
  std::string text = "at L=" + std::to_string(row->len) + ": ";
  for (size_t i = 0; i < row->ranges.size() && i < kReasonRanges; ++i)
    text += (i ? ", " : "") + batchRange(row->ranges[i]) + " " +
            policiesText(row->ranges[i].groupPolicies, stage);
  if (row->ranges.size() > kReasonRanges)
    text += ", ... (" + std::to_string(row->ranges.size()) + " ranges)";
  return text;
}

std::string stageReason(const StageAssignment &stage, const DeviceAssignment &assignment,
                        bool predicted) {
  std::string text = std::string(stageName(stage.stage)) + " on " + assignment.target +
                     " at B=" + std::to_string(stage.batch) + ", L=" + std::to_string(stage.len) +
                     ": ";
  for (size_t i = 0; i < stage.spans.size(); ++i) {
    const LayerSpan &span = stage.spans[i];
    text += (i ? "; " : "") + layerRange(span.firstLayer, span.layers) + " " +
            spanPhrase(span, assignment) + " run " + describePolicy(span.policy);
  }
  if (!predicted)
    return text + " (a CPU-only target: nothing to choose, no cost model run)";
  uint32_t layers = 0;
  for (const LayerSpan &span : stage.spans)
    layers += span.layers;
  text += "; predicted " + millisecondsText(stage.seconds * 1e3) + " for the " +
          std::to_string(layers) + " layers (" + timingName(assignment.timing) +
          " timing, LIA Eq. 1-9)";
  const std::string summary = tableSummary(stage);
  return summary.empty() ? text : text + "; " + summary;
}

std::string placementPhrase(const DeviceAssignment &a) {
  const std::string host = tierName(a.weightHostTier);
  switch (a.placement) {
  case Placement::Cxl:
    return "weights on CXL (LIA section 6), KV cache and activations in DDR";
  case Placement::Helm:
    return "weights in " + host +
           " with FC1's on the GPU (Gupta et al.'s HeLM), KV cache and "
           "activations in DDR";
  case Placement::AllCpu:
    return "weights in " + host +
           ", KV cache on the GPU (Gupta et al.'s All-CPU), activations "
           "in DDR";
  case Placement::Auto:
  case Placement::Ddr:
    break;
  }
  return "weights, KV cache and activations in DDR";
}

std::string residentPhrase(const DeviceAssignment &a, uint32_t layers, bool residentAllowed) {
  if (a.gpu.empty())
    return a.target + " has no GPU";
  const char *what = a.placement == Placement::Helm ? "FC1 weights" : "weights";
  if (a.residentLayers == layers)
    return "all " + std::to_string(layers) + " layers keep their " + what +
           " in GPU memory (LIA Optimization-1)";
  if (a.residentLayers > 0)
    return layerRange(0, a.residentLayers) + " (" + std::to_string(a.residentLayers) + " of " +
           std::to_string(layers) + ") keep their " + what +
           " in GPU memory (LIA Optimization-1), the others stream theirs over PCIe";
  if (!residentAllowed || a.placement == Placement::AllCpu)
    return "no layer resident in GPU memory (Optimization-1 off); weights stream over PCIe";
  return "no layer fits in GPU memory beside a streamed layer's working set; weights stream over "
         "PCIe";
}

std::string memoryPhrase(const StagePlan &plan) {
  std::string text;
  for (Tier tier : {Tier::Gpu, Tier::Ddr, Tier::Cxl}) {
    const TierUse &use = plan.memory[static_cast<int>(tier)];
    if (use.present)
      text += std::string(text.empty() ? "" : ", ") + tierName(tier) + " " +
              formatText("%.3g of %.4g GiB", use.total() / kGiB, use.capacity / kGiB);
  }
  return text;
}

// The stage plan's groups as spans in layer order: resident layers first.
std::vector<LayerSpan> spansOf(const StagePlan &plan, std::vector<size_t> &groupOfSpan) {
  std::vector<size_t> order;
  for (size_t i = 0; i < plan.groups.size(); ++i)
    if (plan.groups[i].name != kStreamedGroup)
      order.push_back(i);
  for (size_t i = 0; i < plan.groups.size(); ++i)
    if (plan.groups[i].name == kStreamedGroup)
      order.push_back(i);
  std::vector<LayerSpan> spans;
  uint32_t next = 0;
  for (size_t index : order) {
    const LayerGroup &group = plan.groups[index];
    LayerSpan span;
    span.group = group.name;
    span.firstLayer = next;
    span.layers = group.layers;
    span.policy = group.best().policy;
    span.layerSeconds = group.best().time.total(plan.timing);
    span.weightsOnGpu = group.placement.weightsOnGpu;
    next += group.layers;
    spans.push_back(span);
  }
  groupOfSpan = order;
  return spans;
}

Result<StageAssignment> planAssignedStage(const PlanRequest &fixed, Stage stage, uint64_t batch,
                                          uint64_t len, uint64_t maxBatch, uint64_t maxSeq) {
  PlanRequest request = fixed;
  request.stage = stage;
  request.batch = batch;
  request.len = len;
  Result<StagePlan> plan = planStage(request);
  if (!plan)
    return plan.status();
  Result<PolicyTable> table = buildPolicyTable(request, policyTableLengths(maxSeq), maxBatch);
  if (!table)
    return table.status();

  StageAssignment assigned;
  assigned.stage = stage;
  assigned.batch = batch;
  assigned.len = len;
  assigned.seconds = plan->seconds;
  assigned.notes = plan->notes;
  std::vector<size_t> groupOfSpan;
  assigned.spans = spansOf(*plan, groupOfSpan);
  // The table's groups are the plan's (the placement is fixed): put them in span order.
  for (PolicyRow &row : table->rows) {
    for (PolicyRange &range : row.ranges) {
      if (range.groupPolicies.size() != groupOfSpan.size())
        return Status::error("the layer groups of " + std::string(stageName(stage)) +
                             " changed across the policy table");
      std::vector<Policy> ordered;
      for (size_t index : groupOfSpan)
        ordered.push_back(range.groupPolicies[index]);
      range.groupPolicies = std::move(ordered);
    }
  }
  assigned.table = std::move(*table);
  return assigned;
}

} // namespace

const LayerSpan &StageAssignment::spanOf(uint32_t layer) const {
  for (const LayerSpan &span : spans)
    if (layer >= span.firstLayer && layer - span.firstLayer < span.layers)
      return span;
  return spans.back();
}

Tier DeviceAssignment::weightTier(uint32_t layer, unsigned sublayer) const {
  if (decode.spans.empty() || sublayer >= kSublayerCount)
    return weightHostTier;
  return decode.spanOf(layer).weightsOnGpu[sublayer] ? Tier::Gpu : weightHostTier;
}

std::string describePolicy(Policy policy) {
  if (policy == Policy::allCpu())
    return "all CPU " + policy.text();
  if (policy == Policy::partialCpu())
    return "partial CPU " + policy.text();
  if (policy == Policy::allGpu())
    return "all GPU " + policy.text();
  return policy.text();
}

std::vector<uint64_t> policyTableLengths(uint64_t maxSeq) {
  std::vector<uint64_t> lens;
  for (uint64_t len = 1; len < maxSeq; len *= 2)
    lens.push_back(len);
  lens.push_back(std::max<uint64_t>(maxSeq, 1));
  return lens;
}

Result<DeviceAssignment> assignDevices(const DeviceAssignmentRequest &request) {
  if (!request.model || !request.target)
    return Status::error("a device assignment needs a model and a target");
  if (request.maxBatch == 0 || request.maxSeq == 0 || request.maxStepTokens == 0)
    return Status::error("a device assignment needs bounds of at least 1");
  const ModelShape &model = *request.model;
  const Target &target = *request.target;

  PlanRequest base;
  base.model = &model;
  base.target = &target;
  base.timing = request.timing;
  base.placement = request.placement;
  base.residentLayers = request.residentLayers;
  base.stage = Stage::Decode;
  base.batch = request.maxBatch;
  base.len = request.maxSeq;
  // Decode at its heaviest fixes the memory for the plan.
  Result<StagePlan> heaviest = planStage(base);
  if (!heaviest)
    return heaviest.status();
  uint32_t resident = 0;
  for (const LayerGroup &group : heaviest->groups)
    if (group.name != kStreamedGroup)
      resident += group.layers;
  PlanRequest fixed = base;
  fixed.placement = heaviest->placement;
  fixed.residentLayerCount = resident;

  DeviceAssignment assignment;
  assignment.target = target.name;
  assignment.gpu = target.gpu ? target.gpu->model : "";
  assignment.timing = request.timing;
  assignment.placement = heaviest->placement;
  assignment.residentLayers = resident;
  const LayerGroup &first = heaviest->groups.front();
  assignment.weightHostTier = first.placement.weightHostTier;
  assignment.kvTier = first.placement.kvTier;
  assignment.activationTier = Tier::Ddr; // the cost model's: GPU sublayers copy theirs over

  Result<StageAssignment> decode = planAssignedStage(
      fixed, Stage::Decode, request.maxBatch, request.maxSeq, request.maxBatch, request.maxSeq);
  if (!decode)
    return decode.status();
  const uint64_t prefillLen = std::min(request.maxStepTokens, request.maxSeq);
  Result<StageAssignment> prefill =
      planAssignedStage(fixed, Stage::Prefill, 1, prefillLen, request.maxBatch, request.maxSeq);
  if (!prefill)
    return prefill.status();
  assignment.decode = std::move(*decode);
  assignment.prefill = std::move(*prefill);
  assignment.decode.reason = stageReason(assignment.decode, assignment, true);
  assignment.prefill.reason = stageReason(assignment.prefill, assignment, true);

  std::string tiers = placementPhrase(assignment) +
                      (request.placement == Placement::Auto ? " (placement auto); " : "; ") +
                      residentPhrase(assignment, model.layers, request.residentLayers) +
                      "; decode at B=" + std::to_string(request.maxBatch) +
                      ", L=" + std::to_string(request.maxSeq) + " needs " + memoryPhrase(*heaviest);
  std::vector<std::string> notes = assignment.decode.notes;
  for (const std::string &note : assignment.prefill.notes)
    if (std::find(notes.begin(), notes.end(), note) == notes.end())
      notes.push_back(note);
  for (const std::string &note : notes)
    tiers += "; note: " + note;
  assignment.tierReason = std::move(tiers);
  return assignment;
}

DeviceAssignment cpuOnlyAssignment(const std::string &target, uint32_t layers, uint64_t maxBatch,
                                   uint64_t maxSeq, uint64_t maxStepTokens) {
  DeviceAssignment assignment;
  assignment.target = target;
  auto stage = [&](Stage which, uint64_t batch, uint64_t len) {
    StageAssignment assigned;
    assigned.stage = which;
    assigned.batch = batch;
    assigned.len = len;
    LayerSpan span;
    span.group = "cpu-only";
    span.layers = layers;
    span.policy = Policy::allCpu();
    if (layers > 0)
      assigned.spans.push_back(span);
    assigned.table.stage = which;
    assigned.table.maxBatch = maxBatch;
    assigned.table.rows.push_back({1, {{1, maxBatch, Policy::allCpu(), {Policy::allCpu()}}}});
    assigned.reason = stageReason(assigned, assignment, false);
    return assigned;
  };
  assignment.decode = stage(Stage::Decode, maxBatch, maxSeq);
  assignment.prefill = stage(Stage::Prefill, 1, std::min(maxStepTokens, maxSeq));
  assignment.tierReason =
      "weights, KV cache and activations in this machine's memory (DDR); " + target + " has no GPU";
  return assignment;
}

} // namespace hetc::compiler
