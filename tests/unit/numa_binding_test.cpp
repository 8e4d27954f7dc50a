// The plan's memory tiers mapped onto NUMA nodes: on topologies given as data (with and without
// CPU-less nodes), read from a made-up sysfs, and on this host, where the engine binds its arenas
// and says what went where.
#include "EngineTestSupport.h"

#include "runtime/platform/NumaBinding.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sys/mman.h>

#ifdef HETC_HAVE_LIBNUMA
#include <numaif.h>
#endif

namespace hetc {
namespace {

using plan::TierDef;
using test::buildTinyPlan;
using test::ScratchDir;
using test::TinyPlan;
using test::TinyPlanShape;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kGiB = uint64_t{1} << 30;

NumaNode node(int id, std::vector<int> cpus, uint64_t gib) {
  NumaNode n;
  n.id = id;
  n.cpus = std::move(cpus);
  n.hasCpus = !n.cpus.empty();
  n.memoryBytes = gib * kGiB;
  return n;
}

TEST(NumaBinding, OneNodeTakesEveryTier) {
  NumaTopology one;
  one.nodes = {node(0, {0, 1}, 24)};
  one.localNodes = {0};
  EXPECT_THAT(nodesForTier(one, TierDef::DDR).nodes, ElementsAre(0));
  EXPECT_EQ(nodesForTier(one, TierDef::DDR).note, "");
  const TierNodes cxl = nodesForTier(one, TierDef::CXL);
  EXPECT_THAT(cxl.nodes, ElementsAre(0));
  EXPECT_EQ(cxl.note, "this host has no CPU-less node");
  const TierNodes gpu = nodesForTier(one, TierDef::GPU);
  EXPECT_THAT(gpu.nodes, ElementsAre(0));
  EXPECT_EQ(gpu.note, "the GPU tier in host memory (CPU engine)");
  EXPECT_EQ(describeTopology(one), "1 NUMA node (node 0: 24.0 GiB)");
}

TEST(NumaBinding, CxlGoesToTheCpuLessNodesAndDdrStaysLocal) {
  // Two sockets and two CXL expanders (memory, no CPUs); the threads run on socket 1.
  NumaTopology host;
  host.nodes = {node(0, {0, 1, 2, 3}, 64), node(1, {4, 5, 6, 7}, 64), node(2, {}, 128),
                node(3, {}, 256)};
  host.localNodes = {1};
  EXPECT_THAT(nodesForTier(host, TierDef::DDR).nodes, ElementsAre(1));
  const TierNodes cxl = nodesForTier(host, TierDef::CXL);
  EXPECT_THAT(cxl.nodes, ElementsAre(2, 3));
  EXPECT_EQ(cxl.note, "");
  EXPECT_THAT(nodesForTier(host, TierDef::GPU).nodes, ElementsAre(1));
  EXPECT_EQ(describeTopology(host),
            "4 NUMA nodes (node 0: 64.0 GiB, CPUs 0-3; node 1: 64.0 GiB, CPUs 4-7; node 2: "
            "128.0 GiB, no CPUs; node 3: 256.0 GiB, no CPUs)");

  // A node with neither CPUs nor memory holds nothing, so it is no CXL tier.
  NumaTopology empty = host;
  empty.nodes[2].memoryBytes = 0;
  empty.nodes[3].memoryBytes = 0;
  EXPECT_THAT(nodesForTier(empty, TierDef::CXL).nodes, ElementsAre(1));
  EXPECT_EQ(nodesForTier(empty, TierDef::CXL).note, "this host has no CPU-less node");

  // Threads spanning both sockets: DDR is both.
  host.localNodes = {0, 1};
  EXPECT_THAT(nodesForTier(host, TierDef::DDR).nodes, ElementsAre(0, 1));
  // No local node known: every node with CPUs.
  host.localNodes = {};
  EXPECT_THAT(nodesForTier(host, TierDef::DDR).nodes, ElementsAre(0, 1));
}

void write(const std::string &path, const std::string &text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(NumaBinding, ReadsTheTopologyFromSysfs) {
  ScratchDir root;
  write(root.file("sys/devices/system/node/node0/cpulist"), "0-3,8\n");
  write(root.file("sys/devices/system/node/node0/meminfo"),
        "Node 0 MemTotal:       33554432 kB\nNode 0 MemFree:  100 kB\n");
  write(root.file("sys/devices/system/node/node1/cpulist"), "\n");
  write(root.file("sys/devices/system/node/node1/meminfo"), "Node 1 MemTotal:  67108864 kB\n");
  write(root.file("sys/devices/system/node/online"), "0-1\n");
  const NumaTopology topology = readNumaTopology({2, 3}, root.path());
  ASSERT_EQ(topology.nodes.size(), 2u);
  EXPECT_THAT(topology.nodes[0].cpus, ElementsAre(0, 1, 2, 3, 8));
  EXPECT_TRUE(topology.nodes[0].hasCpus);
  EXPECT_EQ(topology.nodes[0].memoryBytes, 32 * kGiB);
  EXPECT_FALSE(topology.nodes[1].hasCpus);
  EXPECT_EQ(topology.nodes[1].memoryBytes, 64 * kGiB);
  EXPECT_THAT(topology.localNodes, ElementsAre(0));
  EXPECT_THAT(nodesForTier(topology, TierDef::CXL).nodes, ElementsAre(1));

  // No sysfs at all: one node holding the threads' CPUs, its size unknown.
  ScratchDir bare;
  const NumaTopology none = readNumaTopology({0, 1}, bare.path());
  ASSERT_EQ(none.nodes.size(), 1u);
  EXPECT_THAT(none.localNodes, ElementsAre(0));
  EXPECT_EQ(describeTopology(none), "1 NUMA node (node 0: size unknown)");
}

TEST(NumaBinding, ARefusedBindingIsReportedNotFatal) {
  // Node 62 is within the mask but on no machine this runs on: the kernel refuses it.
  const NumaTopology host = readNumaTopology(allowedCpus());
  ASSERT_TRUE(std::none_of(host.nodes.begin(), host.nodes.end(),
                           [](const NumaNode &n) { return n.id == 62; }));
  const size_t bytes = 1 << 16;
  void *region = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(region, MAP_FAILED);
  ArenaBinding arena;
  arena.what = "KV cache";
  arena.target.nodes = {62};
  bindArena(region, bytes, host, arena);
  EXPECT_FALSE(arena.bound);
#ifdef HETC_HAVE_LIBNUMA
  EXPECT_TRUE(arena.attempted);
  EXPECT_THAT(arena.outcome, HasSubstr("not bound: mbind refused: "));
#else
  EXPECT_EQ(arena.outcome, "not bound");
#endif
  std::memset(region, 1, bytes); // the memory is still usable
  munmap(region, bytes);
}

TEST(NumaBinding, EngineBindsItsArenasOnThisHost) {
  TinyPlan tiny = buildTinyPlan(TinyPlanShape{});
  // The target's slow tier for the weights and the KV cache, as a CXL placement plans them.
  tiny.def.target = "spr-a100";
  for (auto &tensor : tiny.def.tensors)
    tensor->tier = TierDef::CXL;
  tiny.def.kv_cache->tier = TierDef::CXL;
  ScratchDir dir;
  const std::string path = dir.file("cxl.hplan");
  ASSERT_TRUE(test::writeTinyPlan(path, tiny).ok());
  Result<std::unique_ptr<Plan>> loaded = Plan::load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  std::unique_ptr<Engine> engine =
      test::createEngine(std::shared_ptr<const Plan>(std::move(loaded.value())), EngineOptions{});
  ASSERT_TRUE(engine);
  const MemoryBinding &binding = engine->memoryBinding();
  const NumaTopology host = readNumaTopology(allowedCpus());
  ASSERT_EQ(binding.topology.nodes.size(), host.nodes.size());
  ASSERT_EQ(binding.arenas.size(), 3u);
  EXPECT_EQ(binding.arenas[0].what, "activations");
  EXPECT_EQ(binding.arenas[0].tier, TierDef::DDR);
  EXPECT_EQ(binding.arenas[1].what, "KV cache");
  EXPECT_EQ(binding.arenas[1].tier, TierDef::CXL);
  EXPECT_EQ(binding.arenas[2].what, "weights");
  EXPECT_FALSE(binding.arenas[2].attempted);
  EXPECT_EQ(binding.arenas[1].target.nodes, nodesForTier(host, TierDef::CXL).nodes);
  const std::string text = binding.describe();
  EXPECT_THAT(text, HasSubstr(describeTopology(host) + "; tiers of target spr-a100: "));
  EXPECT_THAT(text, HasSubstr("weights (CXL) -> "));
  EXPECT_THAT(text, HasSubstr("(not bound: pages of the plan file)"));

  const bool cpuLessNode = std::any_of(host.nodes.begin(), host.nodes.end(),
                                       [](const NumaNode &n) { return !n.hasCpus; });
  if (host.nodes.size() == 1) {
    EXPECT_THAT(text, HasSubstr("KV cache (CXL) -> node " + std::to_string(host.nodes[0].id)));
  }
  if (!cpuLessNode) {
    EXPECT_THAT(text, HasSubstr("; this host has no CPU-less node"));
  }

#ifdef HETC_HAVE_LIBNUMA
  EXPECT_TRUE(binding.arenas[0].attempted);
  // Where the kernel accepted the binding, the arena's policy is the one asked for.
  for (const ArenaBinding *arena : {&binding.arenas[0], &binding.arenas[1]}) {
    if (!arena->bound) {
      EXPECT_THAT(arena->outcome, HasSubstr("not bound: mbind refused: "));
      continue;
    }
    const void *address =
        arena == &binding.arenas[0] ? engine->activationArena() : engine->kvArena();
    int mode = -1;
    unsigned long mask[16] = {};
    ASSERT_EQ(get_mempolicy(&mode, mask, 16 * 8 * sizeof(unsigned long),
                            const_cast<void *>(address), MPOL_F_ADDR),
              0);
    EXPECT_EQ(mode, MPOL_BIND) << arena->what;
    for (int n : arena->target.nodes)
      EXPECT_TRUE(mask[n / 64] >> (n % 64) & 1) << arena->what << " node " << n;
  }
  EXPECT_THAT(text, Not(HasSubstr("not available in this build")));
#else
  EXPECT_THAT(text, HasSubstr("; NUMA binding not available in this build"));
#endif
}

} // namespace
} // namespace hetc
