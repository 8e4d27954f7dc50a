// The Engine's measurement side: which kernels run, the per-phase profile, and the synthetic KV
// fill (KvCache::fillSynthetic) that lets a benchmark decode at a long context without computing
// the prefill first.
#include "runtime/executor/Engine.h"

#include "runtime/format/Plan.h"

#include <string>
#include <vector>

namespace hetc {
std::vector<KernelUse> Engine::kernelSummary() const {
  std::vector<KernelUse> uses;
  for (const ResolvedOp &op : ops_) {
    const std::string kind = opKindName(op.kind);
    const std::string kernel = op.kernel ? op.kernel : "unnamed";
    bool found = false;
    for (KernelUse &use : uses)
      if (use.opKind == kind && use.kernel == kernel) {
        ++use.count;
        found = true;
      }
    if (!found)
      uses.push_back({kind, kernel, 1});
  }
  return uses;
}

void Engine::resetProfile() {
  if (profile_)
    profile_->reset();
}

Status Engine::fillSyntheticKv(uint32_t slot, uint64_t positions, uint64_t seed) {
  pool_->setProfile(nullptr); // not an op: the profile goes without it
  Status filled = kv_.fillSynthetic(*pool_, slot, positions, seed);
  pool_->setProfile(profile_.get());
  return filled;
}

} // namespace hetc
