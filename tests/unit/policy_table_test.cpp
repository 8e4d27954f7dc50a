// The policy tables a plan carries, looked up by (stage, batch, length) as a runtime switching
// policies would: at range and row boundaries, between them, outside the table, without
// allocating.
#include "AllocationCounter.h"
#include "EngineTestSupport.h"

#include "runtime/executor/PolicyTable.h"
#include "runtime/platform/Devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hetc {
namespace {

using plan::CostSublayerBits;
using plan::StageDef;
using test::addDevicePlan;
using test::buildTinyPlan;
using test::ScratchDir;
using test::TinyPlan;
using test::TinyPlanShape;

constexpr uint8_t kPartialCpu = 0x06; // (0,1,1,0,0,0)
constexpr uint8_t kAllGpu = 0x00;
constexpr uint8_t kAllCpu = 0x3f;
constexpr uint8_t kQkvCpu = 0x07; // (1,1,1,0,0,0)

// A decode table over max_batch 8 and max_seq 64 for two layer groups (one layer each):
//   L 1..3:   B 1-2 (all CPU, all CPU), B 3-8 (partial, all GPU)
//   L 4..15:  B 1-5 (qkv CPU, partial), B 6-8 (all GPU, all GPU)
//   L 16..:   B 1-8 (partial, qkv CPU)
struct TableRange {
  uint64_t firstBatch, lastBatch;
  uint8_t group0, group1;
};
struct TableRow {
  uint64_t len;
  std::vector<TableRange> ranges;
};
const std::vector<TableRow> kDecodeTable = {
    {1, {{1, 2, kAllCpu, kAllCpu}, {3, 8, kPartialCpu, kAllGpu}}},
    {4, {{1, 5, kQkvCpu, kPartialCpu}, {6, 8, kAllGpu, kAllGpu}}},
    {16, {{1, 8, kPartialCpu, kQkvCpu}}},
};

std::shared_ptr<const Plan> tablePlan(const ScratchDir &dir) {
  TinyPlanShape shape;
  shape.layers = 2;
  shape.max_batch = 8;
  shape.max_seq = 64;
  TinyPlan tiny = buildTinyPlan(shape);
  addDevicePlan(tiny, kPartialCpu, kAllGpu);
  for (auto &stage : tiny.def.stages) {
    if (stage->stage != StageDef::Decode)
      continue;
    // Two groups of one layer each, both running the ops' policy at the stage's point.
    auto second = std::make_unique<plan::LayerGroupDefT>(*stage->groups[0]);
    stage->groups[0]->layer_count = 1;
    second->first_layer = 1;
    second->layer_count = 1;
    second->name = "streamed";
    stage->groups.push_back(std::move(second));
    stage->policy_table.clear();
    for (const TableRow &row : kDecodeTable) {
      auto rowDef = std::make_unique<plan::PolicyRowDefT>();
      rowDef->len = row.len;
      for (const TableRange &range : row.ranges) {
        auto rangeDef = std::make_unique<plan::PolicyRangeDefT>();
        rangeDef->first_batch = range.firstBatch;
        rangeDef->last_batch = range.lastBatch;
        rangeDef->policies = {static_cast<CostSublayerBits>(range.group0),
                              static_cast<CostSublayerBits>(range.group1)};
        rowDef->ranges.push_back(std::move(rangeDef));
      }
      stage->policy_table.push_back(std::move(rowDef));
    }
  }
  const std::string path = dir.file("table.hplan");
  const Status written = test::writeTinyPlan(path, tiny);
  EXPECT_TRUE(written.ok()) << written.message();
  Result<std::unique_ptr<Plan>> loaded = Plan::load(path);
  EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.message());
  return loaded.ok() ? std::shared_ptr<const Plan>(std::move(loaded.value())) : nullptr;
}

// The entry the table holds for (batch, len), found by reading kDecodeTable row by row.
const TableRange &expectedRange(uint64_t batch, uint64_t len) {
  const TableRow *row = &kDecodeTable.front();
  for (const TableRow &candidate : kDecodeTable)
    if (candidate.len <= len)
      row = &candidate;
  for (const TableRange &range : row->ranges)
    if (batch <= range.lastBatch)
      return range;
  return row->ranges.back();
}

TEST(PolicyTable, LookupMatchesTheTableEverywhereInTheBounds) {
  ScratchDir dir;
  std::shared_ptr<const Plan> plan = tablePlan(dir);
  ASSERT_TRUE(plan);
  const PolicyTables tables = PolicyTables::fromPlan(*plan);
  for (uint64_t len = 1; len <= 64; ++len)
    for (uint64_t batch = 1; batch <= 8; ++batch) {
      const PolicyLookup found = tables.lookup(StageDef::Decode, batch, len);
      ASSERT_NE(found.policies, nullptr);
      ASSERT_EQ(found.groupCount, 2u);
      const TableRange &expected = expectedRange(batch, len);
      EXPECT_EQ(found.policies[0], expected.group0) << "B=" << batch << " L=" << len;
      EXPECT_EQ(found.policies[1], expected.group1) << "B=" << batch << " L=" << len;
      EXPECT_EQ(found.firstBatch, expected.firstBatch);
      EXPECT_EQ(found.lastBatch, expected.lastBatch);
    }
}

TEST(PolicyTable, BoundariesOfRowsAndRanges) {
  ScratchDir dir;
  std::shared_ptr<const Plan> plan = tablePlan(dir);
  ASSERT_TRUE(plan);
  const PolicyTables tables = PolicyTables::fromPlan(*plan);
  auto at = [&](uint64_t batch, uint64_t len, uint32_t group) {
    return tables.lookup(StageDef::Decode, batch, len).policies[group];
  };
  // Row L=1: the range edge between B=2 and B=3.
  EXPECT_EQ(at(2, 1, 0), kAllCpu);
  EXPECT_EQ(at(3, 1, 0), kPartialCpu);
  EXPECT_EQ(at(3, 1, 1), kAllGpu);
  // The row edge: L=3 is still row 1, L=4 row 4, L=15 row 4, L=16 row 16.
  EXPECT_EQ(at(1, 3, 0), kAllCpu);
  EXPECT_EQ(at(1, 4, 0), kQkvCpu);
  EXPECT_EQ(at(5, 15, 1), kPartialCpu);
  EXPECT_EQ(at(6, 15, 1), kAllGpu);
  EXPECT_EQ(at(6, 16, 1), kQkvCpu);
  EXPECT_EQ(tables.lookup(StageDef::Decode, 6, 15).rowLen, 4u);
  EXPECT_EQ(tables.lookup(StageDef::Decode, 6, 16).rowLen, 16u);

  // Outside the table: L=0 takes the first row, L past max_seq the last, B=0 the first range,
  // B past max_batch the row's last range.
  EXPECT_EQ(tables.lookup(StageDef::Decode, 1, 0).rowLen, 1u);
  EXPECT_EQ(at(1, 0, 0), kAllCpu);
  EXPECT_EQ(tables.lookup(StageDef::Decode, 1, 1u << 20).rowLen, 16u);
  EXPECT_EQ(at(0, 4, 0), kQkvCpu);
  EXPECT_EQ(at(100, 4, 0), kAllGpu);
  EXPECT_EQ(tables.lookup(StageDef::Decode, 100, 4).lastBatch, 8u);

  // The prefill table addDevicePlan writes: one row, one range, all on the GPU.
  const PolicyLookup prefill = tables.lookup(StageDef::Prefill, 3, 40);
  ASSERT_NE(prefill.policies, nullptr);
  EXPECT_EQ(prefill.groupCount, 1u);
  EXPECT_EQ(prefill.policies[0], kAllGpu);

  EXPECT_EQ(policyLookupText(tables, StageDef::Decode, 6, 20),
            "decode at B=6, L=20: layer 0 (gpu-resident) (0,1,1,0,0,0), layer 1 (streamed) "
            "(1,1,1,0,0,0) (table row L=16, B 1-8)");
}

TEST(PolicyTable, LookupDoesNotAllocate) {
  ScratchDir dir;
  std::shared_ptr<const Plan> plan = tablePlan(dir);
  ASSERT_TRUE(plan);
  const PolicyTables tables = PolicyTables::fromPlan(*plan);
  unsigned sum = 0;
  const size_t before = test::allocationCount();
  for (uint64_t len = 0; len <= 70; ++len)
    for (uint64_t batch = 0; batch <= 10; ++batch)
      sum += tables.lookup(StageDef::Decode, batch, len).policies[1];
  EXPECT_EQ(test::allocationCount() - before, 0u);
  EXPECT_GT(sum, 0u);
}

TEST(PolicyTable, HostPlanHasNoTable) {
  ScratchDir dir;
  TinyPlan tiny = buildTinyPlan(TinyPlanShape{});
  const std::string path = dir.file("host.hplan");
  ASSERT_TRUE(test::writeTinyPlan(path, tiny).ok());
  Result<std::unique_ptr<Plan>> loaded = Plan::load(path);
  ASSERT_TRUE(loaded.ok());
  const PolicyTables tables = PolicyTables::fromPlan(*loaded.value());
  EXPECT_TRUE(tables.empty());
  EXPECT_EQ(tables.lookup(StageDef::Decode, 1, 1).policies, nullptr);
  EXPECT_EQ(policyLookupText(tables, StageDef::Decode, 1, 1),
            "decode at B=1, L=1: no policy table (every op on the CPU)");
}

} // namespace
} // namespace hetc
