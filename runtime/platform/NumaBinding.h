// Where the plan's memory tiers live on this host: each tier mapped to NUMA nodes, and the
// engine's arenas bound to them before their first touch.
//
// DDR is the memory local to the engine's threads: the nodes of the CPUs this process may run
// on. CXL, the slow host tier, is a node without CPUs where the host has one (CXL expanders and
// Optane appear so); elsewhere it falls back to the local nodes. GPU tier data has no GPU
// executor to live in here and stays in host memory, on the local nodes. The KV arena (an
// anonymous mapping) and the activation arena are bound with mbind (libnuma) before they are
// touched; the weights are the plan file's shared mapping, which mbind does not place, so they
// are reported and left to the page cache. A binding the kernel refuses is reported, never fatal.
#pragma once

#include "runtime/format/Plan.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hetc {

struct NumaNode {
  int id = 0;
  bool hasCpus = false;
  uint64_t memoryBytes = 0; // MemTotal of the node
  std::vector<int> cpus;
};

struct NumaTopology {
  std::vector<NumaNode> nodes; // by increasing id
  std::vector<int> localNodes; // nodes of the CPUs the engine's threads may run on
};

// The nodes under <root>/sys/devices/system/node (their cpulist and meminfo), and which of them
// hold any of `cpus`. A host without that directory reads as one node 0 holding every CPU, its
// size unknown (0).
NumaTopology readNumaTopology(const std::vector<int> &cpus, const std::string &root = "");

// The CPUs this process may run on (sched_getaffinity): where the engine's threads run.
std::vector<int> allowedCpus();

// The nodes a tier maps to on `topology`, and why when it is not the tier's own kind of node.
struct TierNodes {
  std::vector<int> nodes;
  std::string note; // "this host has no CPU-less node", "the GPU tier in host memory (CPU engine)", or empty
};
TierNodes nodesForTier(const NumaTopology &topology, plan::TierDef tier);

// One arena's placement and what binding it did.
struct ArenaBinding {
  std::string what; // "KV cache", "activations", "weights"
  plan::TierDef tier = plan::TierDef::DDR;
  TierNodes target;
  bool attempted = false; // mbind was called
  bool bound = false;     // and the kernel accepted it
  std::string outcome;    // why not bound, when not
};

struct MemoryBinding {
  NumaTopology topology;
  std::string planTarget;
  std::vector<ArenaBinding> arenas;
  // "1 NUMA node (node 0: 23.5 GiB); KV cache (DDR) -> node 0, ..." for run --verbose and bench.
  std::string describe() const;
};

// Whether this build can bind memory (libnuma was found when it was configured).
bool numaBindingAvailable();

// Binds [address, address + bytes), page aligned and not yet touched, to `nodes` (MPOL_BIND, or
// MPOL_PREFERRED for the first of them when their memory would not hold `bytes`). Fills
// `binding`'s attempted, bound and outcome; never fails the caller.
void bindArena(void *address, size_t bytes, const NumaTopology &topology, ArenaBinding &binding);

// "1 NUMA node (node 0: 23.5 GiB)", "2 NUMA nodes (node 0: 64 GiB, CPUs 0-31; node 1: 128 GiB,
// no CPUs)".
std::string describeTopology(const NumaTopology &topology);

// The weights' tiers, in the order DDR, GPU, CXL, each once.
std::vector<plan::TierDef> weightTiers(const Plan &plan);

} // namespace hetc
