#include "runtime/platform/NumaBinding.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <sched.h>
#include <sstream>

#ifdef HETC_HAVE_LIBNUMA
#include <numaif.h>
#endif

namespace hetc {
namespace {

using plan::TierDef;

// "0-3,8,10-11" as the kernel writes CPU lists.
std::vector<int> parseCpuList(const std::string &text) {
  std::vector<int> cpus;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    int first = 0, last = 0;
    if (std::sscanf(item.c_str(), "%d-%d", &first, &last) == 2) {
      for (int cpu = first; cpu <= last; ++cpu)
        cpus.push_back(cpu);
    } else if (std::sscanf(item.c_str(), "%d", &first) == 1) {
      cpus.push_back(first);
    }
  }
  return cpus;
}

std::string readFirstLine(const std::string &path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "Node 0 MemTotal:       24684092 kB" from the node's meminfo.
uint64_t nodeMemoryBytes(const std::string &path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find("MemTotal:");
    if (at == std::string::npos)
      continue;
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str() + at + 9, "%llu", &kib) == 1)
      return uint64_t{kib} * 1024;
  }
  return 0;
}

std::string nodeList(const std::vector<int> &nodes) {
  std::string text = nodes.size() == 1 ? "node " : "nodes ";
  for (size_t i = 0; i < nodes.size(); ++i)
    text += (i ? "," : "") + std::to_string(nodes[i]);
  return text;
}

std::string gibText(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", bytes / double(uint64_t{1} << 30));
  return text;
}

std::string cpuRanges(const std::vector<int> &cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    text += (text.empty() ? "" : ",") + std::to_string(cpus[i]) +
            (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return text;
}

} // namespace

NumaTopology readNumaTopology(const std::vector<int> &cpus, const std::string &root) {
  NumaTopology topology;
  const std::string base = root + "/sys/devices/system/node";
  if (DIR *dir = ::opendir(base.c_str())) {
    while (const dirent *entry = ::readdir(dir)) {
      int id = 0;
      char rest = 0;
      if (std::sscanf(entry->d_name, "node%d%c", &id, &rest) != 1)
        continue;
      NumaNode node;
      node.id = id;
      const std::string path = base + "/" + entry->d_name;
      node.cpus = parseCpuList(readFirstLine(path + "/cpulist"));
      node.hasCpus = !node.cpus.empty();
      node.memoryBytes = nodeMemoryBytes(path + "/meminfo");
      topology.nodes.push_back(std::move(node));
    }
    ::closedir(dir);
  }
  if (topology.nodes.empty()) {
    NumaNode node;
    node.hasCpus = true;
    node.cpus = cpus;
    topology.nodes.push_back(node);
  }
  std::sort(topology.nodes.begin(), topology.nodes.end(),
            [](const NumaNode &a, const NumaNode &b) { return a.id < b.id; });
  for (const NumaNode &node : topology.nodes)
    for (int cpu : cpus)
      if (std::find(node.cpus.begin(), node.cpus.end(), cpu) != node.cpus.end()) {
        topology.localNodes.push_back(node.id);
        break;
      }
  return topology;
}

std::vector<int> allowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set))
        cpus.push_back(cpu);
  return cpus;
}

TierNodes nodesForTier(const NumaTopology &topology, TierDef tier) {
  // The local nodes; without them (threads on CPUs no node lists) every node with CPUs, and
  // without those every node.
  std::vector<int> local = topology.localNodes;
  if (local.empty())
    for (const NumaNode &node : topology.nodes)
      if (node.hasCpus)
        local.push_back(node.id);
  if (local.empty())
    for (const NumaNode &node : topology.nodes)
      local.push_back(node.id);

  TierNodes mapped;
  switch (tier) {
  case TierDef::DDR:
    mapped.nodes = local;
    break;
  case TierDef::GPU:
    mapped.nodes = local;
    mapped.note = "the GPU tier in host memory (CPU engine)";
    break;
  case TierDef::CXL:
    for (const NumaNode &node : topology.nodes)
      if (!node.hasCpus && node.memoryBytes > 0)
        mapped.nodes.push_back(node.id);
    if (mapped.nodes.empty()) {
      mapped.nodes = local;
      mapped.note = "this host has no CPU-less node";
    }
    break;
  }
  return mapped;
}

bool numaBindingAvailable() {
#ifdef HETC_HAVE_LIBNUMA
  return true;
#else
  return false;
#endif
}

void bindArena(void *address, size_t bytes, const NumaTopology &topology, ArenaBinding &binding) {
#ifdef HETC_HAVE_LIBNUMA
  // One bit per node id; mbind reads maxnode - 1 bits.
  constexpr size_t kMaskWords = 16;
  constexpr int kBits = static_cast<int>(kMaskWords * 8 * sizeof(unsigned long));
  unsigned long mask[kMaskWords] = {};
  uint64_t capacity = 0;
  for (int node : binding.target.nodes) {
    if (node < 0 || node >= kBits - 1) {
      binding.outcome = "not bound: node " + std::to_string(node) + " is past the node mask";
      return;
    }
    mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
    for (const NumaNode &n : topology.nodes)
      if (n.id == node)
        capacity += n.memoryBytes;
  }
  if (binding.target.nodes.empty() || bytes == 0) {
    binding.outcome = "not bound: nothing to bind";
    return;
  }
  // A strict binding the nodes could not hold would end in the OOM killer, not an error: prefer
  // the first node then, and let the kernel spill.
  const bool strict = capacity == 0 || bytes <= capacity;
  int mode = MPOL_BIND;
  if (!strict) {
    std::fill(std::begin(mask), std::end(mask), 0ul);
    const int first = binding.target.nodes.front();
    mask[first / (8 * sizeof(unsigned long))] |= 1ul << (first % (8 * sizeof(unsigned long)));
    mode = MPOL_PREFERRED;
  }
  binding.attempted = true;
  if (mbind(address, bytes, mode, mask, kBits, 0) != 0) {
    binding.outcome = std::string("not bound: mbind refused: ") + std::strerror(errno);
    return;
  }
  binding.bound = true;
  binding.outcome = strict ? "bound" : "preferred (larger than the nodes' memory)";
#else
  (void)address;
  (void)bytes;
  (void)topology;
  binding.outcome = "not bound";
#endif
}

std::string describeTopology(const NumaTopology &topology) {
  const size_t count = topology.nodes.size();
  std::string text = std::to_string(count) + (count == 1 ? " NUMA node (" : " NUMA nodes (");
  for (size_t i = 0; i < count; ++i) {
    const NumaNode &node = topology.nodes[i];
    text += (i ? "; " : "") + std::string("node ") + std::to_string(node.id) + ": " +
            (node.memoryBytes ? gibText(node.memoryBytes) : std::string("size unknown"));
    if (count > 1)
      text += node.hasCpus ? ", CPUs " + cpuRanges(node.cpus) : std::string(", no CPUs");
  }
  return text + ")";
}

std::vector<TierDef> weightTiers(const Plan &plan) {
  bool seen[3] = {};
  if (const auto *tensors = plan.def().tensors())
    for (const plan::TensorDef *tensor : *tensors)
      if (static_cast<unsigned>(tensor->tier()) < 3)
        seen[static_cast<unsigned>(tensor->tier())] = true;
  std::vector<TierDef> tiers;
  for (TierDef tier : {TierDef::DDR, TierDef::GPU, TierDef::CXL})
    if (seen[static_cast<unsigned>(tier)])
      tiers.push_back(tier);
  return tiers;
}

std::string MemoryBinding::describe() const {
  std::string text = describeTopology(topology) + "; ";
  if (!planTarget.empty())
    text += "tiers of target " + planTarget + ": ";
  std::vector<std::string> notes;
  for (size_t i = 0; i < arenas.size(); ++i) {
    const ArenaBinding &arena = arenas[i];
    text += (i ? ", " : "") + arena.what + " (" + plan::EnumNameTierDef(arena.tier) + ") -> " +
            nodeList(arena.target.nodes) + " (" + arena.outcome + ")";
    if (!arena.target.note.empty() &&
        std::find(notes.begin(), notes.end(), arena.target.note) == notes.end())
      notes.push_back(arena.target.note);
  }
  for (const std::string &note : notes)
    text += "; " + note;
  if (!numaBindingAvailable())
    text += "; NUMA binding not available in this build";
  return text;
}

} // namespace hetc
