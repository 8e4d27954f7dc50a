// The Engine's measurement side: which kernels run, the per-phase profile, and the synthetic KV
// fill that lets a benchmark decode at a long context without computing the prefill first (kept
// here, out of the KV cache, which serving uses).
#include "runtime/executor/Engine.h"
#include "runtime/executor/DeviceSteps.h"

#include "runtime/format/Plan.h"

#include <string>
#include <vector>

namespace hetc {
namespace {

struct SyntheticFill {
  const kernels::KvCacheView *cache = nullptr;
  size_t layers = 0;
  size_t kvHeads = 0;
  size_t headDim = 0;
  uint32_t slot = 0;
  uint64_t positions = 0;
  uint64_t seed = 0;
};

// splitmix64, to seed one stream per (layer, head, K or V) whatever thread writes it.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void syntheticFillPhase(void *context, size_t, unsigned thread, unsigned threadCount) {
  const SyntheticFill &fill = *static_cast<const SyntheticFill *>(context);
  const size_t streams = fill.layers * fill.kvHeads * 2;
  for (size_t stream = streams * thread / threadCount;
       stream < streams * (thread + 1) / threadCount; ++stream) {
    const size_t layer = stream / (fill.kvHeads * 2);
    const size_t head = stream / 2 % fill.kvHeads;
    const bool keys = stream % 2 == 0;
    uint64_t state = mix(fill.seed ^ mix(stream) ^ (uint64_t{fill.slot} << 48)) | 1;
    std::vector<float> row(fill.headDim);
    for (uint64_t pos = 0; pos < fill.positions; ++pos) {
      for (float &value : row) {
        // xorshift64: cheap, and its top 24 bits make a float in [-1, 1) that is never denormal.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        value = static_cast<float>(state >> 40) * 0x1.0p-23f - 1.0f;
      }
      kernels::storeKvRow(*fill.cache, keys, layer, fill.slot, head, pos, row.data(), fill.headDim);
    }
  }
}

} // namespace

std::vector<KernelUse> Engine::kernelSummary() const {
  // With a device: its prefill step's launches.
  std::vector<std::pair<OpKind, const char *>> kernels;
  if (device_)
    for (const DeviceSteps::LaunchInfo &launch : device_->launches(false))
      kernels.emplace_back(launch.kind, launch.kernel);
  else
    for (const ResolvedOp &op : ops_)
      kernels.emplace_back(op.kind, op.kernel);
  std::vector<KernelUse> uses;
  for (const auto &[opKind, name] : kernels) {
    const std::string kind = opKindName(opKind);
    const std::string kernel = name ? name : "unnamed";
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
  if (slot >= kv_.slots())
    return Status::error("slot " + std::to_string(slot) + " is past the plan's --max-batch " +
                         std::to_string(kv_.slots()));
  if (positions > kv_.maxSeq())
    return Status::error(std::to_string(positions) + " positions exceed the plan's --max-seq " +
                         std::to_string(kv_.maxSeq()));
  kv_.setCachedPositions(slot, positions);
  const plan::KvCacheDef *kv = plan_->def().kv_cache();
  if (positions == 0 || !kv || kv->layers() == 0)
    return Status();
  SyntheticFill fill;
  fill.cache = &kv_.view();
  fill.layers = kv->layers();
  fill.kvHeads = kv->kv_heads();
  fill.headDim = kv->head_dim();
  fill.slot = slot;
  fill.positions = positions;
  fill.seed = seed;
  pool_->setProfile(nullptr); // not an op: the profile goes without it
  pool_->run(1, &syntheticFillPhase, &fill);
  pool_->setProfile(profile_.get());
  return device_ ? uploadSyntheticKv(slot, positions) : Status();
}

// With a device: the slot's streams as written on the host, copied to the device's KV arena at
// the same offsets (whole blocks of positions; an int8 cache's scales too).
Status Engine::uploadSyntheticKv(uint32_t slot, uint64_t positions) {
  const kernels::KvCacheView &view = kv_.view();
  const plan::KvCacheDef &kv = *plan_->def().kv_cache();
  const auto *base = static_cast<const uint8_t *>(kv_.data());
  const uint64_t rows = view.blocks() ? (positions + kKvBlockPositions - 1) / kKvBlockPositions *
                                            kKvBlockPositions
                                      : positions;
  for (uint32_t layer = 0; layer < kv.layers(); ++layer)
    for (uint32_t head = 0; head < kv.kv_heads(); ++head)
      for (bool keys : {true, false}) {
        const auto *stream =
            static_cast<const uint8_t *>(view.at(keys, view.streamOffset(layer, slot, head)));
        if (Status s = device_->copyToKv(static_cast<uint64_t>(stream - base), stream,
                                         rows * view.posStride * view.elementBytes());
            !s)
          return s;
        if (const float *scales = view.scales(keys)) {
          const auto *first =
              reinterpret_cast<const uint8_t *>(scales + view.scaleOffset(layer, slot, head, 0));
          if (Status s = device_->copyToKv(static_cast<uint64_t>(first - base), first,
                                           positions * sizeof(float));
              !s)
            return s;
        }
      }
  return device_->finishCopies();
}

} // namespace hetc
