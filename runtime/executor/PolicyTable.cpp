#include "runtime/executor/PolicyTable.h"

#include "runtime/platform/Devices.h"

#include <algorithm>

namespace hetc {
namespace {

using namespace plan;

StagePolicyTable copyStage(const StagePlanDef &stage) {
  StagePolicyTable table;
  table.present = true;
  if (stage.groups())
    for (const LayerGroupDef *group : *stage.groups()) {
      table.groupFirstLayer.push_back(group->first_layer());
      table.groupLayerCount.push_back(group->layer_count());
      table.groupNames.push_back(group->name() ? group->name()->str() : "");
    }
  table.groupCount = static_cast<uint32_t>(table.groupNames.size());
  table.rowFirstRange.push_back(0);
  if (stage.policy_table())
    for (const PolicyRowDef *row : *stage.policy_table()) {
      table.rowLen.push_back(row->len());
      if (row->ranges())
        for (const PolicyRangeDef *range : *row->ranges()) {
          table.rangeFirstBatch.push_back(range->first_batch());
          table.rangeLastBatch.push_back(range->last_batch());
          // Plan::load checked one policy per group in every range.
          for (uint32_t g = 0; g < table.groupCount; ++g)
            table.policies.push_back(static_cast<uint8_t>(range->policies()->Get(g)) &
                                     kAllCostSublayers);
        }
      table.rowFirstRange.push_back(static_cast<uint32_t>(table.rangeLastBatch.size()));
    }
  if (table.rowLen.empty())
    table.present = false;
  return table;
}

} // namespace

PolicyTables PolicyTables::fromPlan(const Plan &plan) {
  PolicyTables tables;
  if (const auto *stages = plan.def().stages())
    for (const StagePlanDef *stage : *stages)
      (stage->stage() == StageDef::Decode ? tables.decode_ : tables.prefill_) = copyStage(*stage);
  return tables;
}

PolicyLookup PolicyTables::lookup(StageDef stageKind, uint64_t batch, uint64_t len) const {
  const StagePolicyTable &table = stage(stageKind);
  PolicyLookup found;
  if (!table.present)
    return found;
  // The last row whose length is not above `len`; the first row for a length below it.
  const auto lenEnd = std::upper_bound(table.rowLen.begin(), table.rowLen.end(), len);
  const size_t row = lenEnd == table.rowLen.begin() ? 0 : (lenEnd - table.rowLen.begin()) - 1;
  // The first range of the row ending at or after `batch`; the row's last one past them all.
  const auto first = table.rangeLastBatch.begin() + table.rowFirstRange[row];
  const auto last = table.rangeLastBatch.begin() + table.rowFirstRange[row + 1];
  auto holding = std::lower_bound(first, last, batch);
  if (holding == last)
    --holding;
  const size_t range = holding - table.rangeLastBatch.begin();
  found.policies = table.policies.data() + range * table.groupCount;
  found.groupCount = table.groupCount;
  found.rowLen = table.rowLen[row];
  found.firstBatch = table.rangeFirstBatch[range];
  found.lastBatch = table.rangeLastBatch[range];
  return found;
}

std::string policyLookupText(const PolicyTables &tables, StageDef stage, uint64_t batch,
                             uint64_t len) {
  std::string text = std::string(stage == StageDef::Decode ? "decode" : "prefill") +
                     " at B=" + std::to_string(batch) + ", L=" + std::to_string(len) + ": ";
  const PolicyLookup found = tables.lookup(stage, batch, len);
  if (!found.policies)
    return text + "no policy table (every op on the CPU)";
  const StagePolicyTable &table = tables.stage(stage);
  for (uint32_t g = 0; g < found.groupCount; ++g) {
    const uint32_t firstLayer = table.groupFirstLayer[g];
    const uint32_t lastLayer = firstLayer + table.groupLayerCount[g] - 1;
    text += (g ? ", " : "") +
            (firstLayer == lastLayer
                 ? "layer " + std::to_string(firstLayer)
                 : "layers " + std::to_string(firstLayer) + "-" + std::to_string(lastLayer)) +
            (table.groupNames[g].empty() ? "" : " (" + table.groupNames[g] + ")") + " " +
            policyText(found.policies[g]);
  }
  return text + " (table row L=" + std::to_string(found.rowLen) + ", B " +
         std::to_string(found.firstBatch) + "-" + std::to_string(found.lastBatch) + ")";
}

} // namespace hetc
