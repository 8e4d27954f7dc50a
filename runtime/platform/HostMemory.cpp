#include "runtime/platform/HostMemory.h"

#include <cstdio>
#include <fstream>
#include <string>

namespace hetc {

std::optional<uint64_t> availableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1)
      return static_cast<uint64_t>(kib) * 1024;
  }
  return std::nullopt;
}

} // namespace hetc
