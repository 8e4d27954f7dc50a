// LIA Eq. 1-9 over Table 1's sizes, generalised to GQA and SwiGLU.
#include "hetc/compiler/CostModel.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hetc::compiler {
namespace {

constexpr double kBf16Bytes = 2;
constexpr unsigned kQkv = 0, kQk = 1, kSv = 2, kOut = 3, kFc2 = 5;

bool isAttention(unsigned sublayer) { return sublayer == kQk || sublayer == kSv; }

// Device changes around the layer (p_0 = p_6): fewer means fewer activation copies.
unsigned deviceChanges(Policy policy) {
  unsigned changes = 0;
  for (unsigned i = 0; i < kSublayerCount; ++i)
    changes += policy.onCpu(i) != policy.onCpu((i + kSublayerCount - 1) % kSublayerCount);
  return changes;
}

} // namespace

const std::array<const char *, kSublayerCount> kSublayerNames = {"qkv", "qk",  "sv",
                                                                 "out", "fc1", "fc2"};

const char *stageName(Stage stage) { return stage == Stage::Prefill ? "prefill" : "decode"; }

const char *tierName(Tier tier) {
  switch (tier) {
  case Tier::Gpu:
    return "GPU";
  case Tier::Ddr:
    return "DDR";
  case Tier::Cxl:
    return "CXL";
  }
  return "?";
}

const char *timingName(Timing timing) { return timing == Timing::Serial ? "serial" : "overlapped"; }

std::array<int, kSublayerCount> Policy::values() const {
  std::array<int, kSublayerCount> values;
  for (unsigned i = 0; i < kSublayerCount; ++i)
    values[i] = onCpu(i) ? 1 : 0;
  return values;
}

std::string Policy::text() const {
  std::string text = "(";
  for (unsigned i = 0; i < kSublayerCount; ++i)
    text += std::string(i ? "," : "") + (onCpu(i) ? "1" : "0");
  return text + ")";
}

double LayerSize::weightBytes() const {
  double bytes = 0;
  for (const SublayerSize &sublayer : sublayers)
    if (sublayer.yIsWeight)
      bytes += sublayer.yBytes;
  return bytes;
}

LayerSize layerSize(const ModelShape &model, Stage stage, uint64_t batch, uint64_t len) {
  const double b = static_cast<double>(batch);
  const double l = static_cast<double>(len);
  const double d = model.hidden;
  const double q = static_cast<double>(model.queryDim());
  const double kv = static_cast<double>(model.kvDim());
  const double f = model.ffn;
  const double fc1Width = model.gatedFfn ? 2 * f : f; // SwiGLU: gate and up side by side
  const double tokens = stage == Stage::Prefill ? b * l : b;

  LayerSize size;
  size.stage = stage;
  size.batch = batch;
  size.len = len;
  auto &s = size.sublayers;
  s[kQkv] = {kBf16Bytes * tokens * d, kBf16Bytes * d * (q + 2 * kv), 2 * tokens * d * (q + 2 * kv),
             true};
  // Every query row meets `len` keys: in prefill all L rows of each prompt, in decode one.
  const double queryRows = stage == Stage::Prefill ? b * l : b;
  const SublayerSize scoring = {kBf16Bytes * queryRows * q, kBf16Bytes * b * l * kv,
                                2 * queryRows * l * q, false};
  s[kQk] = scoring;
  s[kSv] = scoring;
  s[kOut] = {kBf16Bytes * tokens * q, kBf16Bytes * q * d, 2 * tokens * q * d, true};
  s[4] = {kBf16Bytes * tokens * d, kBf16Bytes * d * fc1Width, 2 * tokens * d * fc1Width, true};
  s[kFc2] = {kBf16Bytes * tokens * f, kBf16Bytes * f * d, 2 * tokens * f * d, true};
  size.kvStoreBytes = 2 * kBf16Bytes * tokens * kv;
  size.residualBytes = kBf16Bytes * tokens * d;
  return size;
}

Machine Machine::of(const Target &target) {
  Machine machine;
  machine.cpuFlops = target.cpu.amxTflops * 1e12;
  machine.ddrBytesPerS = target.ddr.readGbs * 1e9;
  machine.cxlBytesPerS = target.cxl ? target.cxl->readGbs() * 1e9 : 0;
  if (target.gpu && target.pcie) {
    machine.hasGpu = true;
    machine.gpuFlops = target.gpu->tflops * 1e12;
    machine.gpuBytesPerS = target.gpu->bandwidthGbs * 1e9;
    machine.pcieBytesPerS = target.pcie->gbs * 1e9;
  }
  return machine;
}

double Machine::cpuReadBytesPerS(Tier tier) const {
  return tier == Tier::Cxl && cxlBytesPerS > 0 ? cxlBytesPerS : ddrBytesPerS;
}

double Machine::pcieFromBytesPerS(Tier tier) const {
  if (tier == Tier::Cxl && cxlBytesPerS > 0)
    return std::min(pcieBytesPerS, cxlBytesPerS);
  return pcieBytesPerS;
}

LayerTime evaluate(const LayerSize &size, Policy policy, const LayerPlacement &placement,
                   const Machine &machine) {
  LayerTime time;
  const double infinity = std::numeric_limits<double>::infinity();
  if (!machine.hasGpu && policy != Policy::allCpu()) {
    time.serial = time.overlapped = time.gpu = infinity;
    return time;
  }
  const bool prefill = size.stage == Stage::Prefill;
  const double link = machine.pcieBytesPerS;
  double chain = 0; // compute plus the transfers the next sublayer waits for

  for (unsigned i = 0; i < kSublayerCount; ++i) {
    const SublayerSize &s = size.sublayers[i];
    SublayerTime &t = time.sublayers[i];
    const bool cpu = policy.onCpu(i);
    // p_0 = p_6: the layer's input is where the previous layer's FC2 ran.
    const bool previousCpu = policy.onCpu((i + kSublayerCount - 1) % kSublayerCount);

    // Eq. 4: the activation follows the result of the sublayer before.
    if (cpu != previousCpu)
      t.loadOnPath += s.xBytes / link;

    // Eq. 6: the residual adds read the layer input (where QKV ran) and the attention output.
    if (i == kOut && cpu != policy.onCpu(kQkv))
      t.loadOnPath += size.residualBytes / link;
    if (i == kFc2 && cpu != policy.onCpu(kOut))
      t.loadOnPath += size.residualBytes / link;

    // Eq. 5 and 7: the second operand; the CPU reads it at the rate of the tier it is in.
    double yReadBytesPerS = machine.ddrBytesPerS;
    double yLoadOffPath = 0;
    if (isAttention(i) && prefill) {
      // Eq. 7: the prompt's K and V come straight from QKV mapping.
      if (cpu != policy.onCpu(kQkv))
        t.loadOnPath += s.yBytes / link;
    } else if (isAttention(i)) {
      if (!cpu && placement.kvTier != Tier::Gpu)
        yLoadOffPath = s.yBytes / machine.pcieFromBytesPerS(placement.kvTier);
      else if (cpu && placement.kvTier == Tier::Gpu)
        yLoadOffPath = s.yBytes / link;
      else if (cpu)
        yReadBytesPerS = machine.cpuReadBytesPerS(placement.kvTier);
    } else {
      if (!cpu && !placement.weightsOnGpu[i])
        yLoadOffPath = s.yBytes / machine.pcieFromBytesPerS(placement.weightHostTier);
      else if (cpu)
        yReadBytesPerS = machine.cpuReadBytesPerS(placement.weightHostTier);
    }
    t.load = t.loadOnPath + yLoadOffPath;

    // Eq. 8: streaming the operands plus the arithmetic, on the sublayer's device.
    if (cpu)
      t.compute =
          s.xBytes / machine.ddrBytesPerS + s.yBytes / yReadBytesPerS + s.flops / machine.cpuFlops;
    else
      t.compute = (s.xBytes + s.yBytes) / machine.gpuBytesPerS + s.flops / machine.gpuFlops;

    // Eq. 9: the new K and V go to the cache's tier.
    const bool kvOnHost = placement.kvTier != Tier::Gpu;
    if (i == kQkv && (cpu ? !kvOnHost : kvOnHost))
      t.store = size.kvStoreBytes / link;

    (cpu ? time.cpu : time.gpu) += t.compute;
    time.pcie += t.load + t.store;
    time.serial += t.load + t.compute + t.store;
    chain += t.compute + t.loadOnPath;
  }
  time.overlapped = std::max(chain, time.pcie);
  return time;
}

std::vector<RankedPolicy> rankPolicies(const LayerSize &size, const LayerPlacement &placement,
                                       const Machine &machine, Timing timing) {
  std::vector<RankedPolicy> ranked;
  if (!machine.hasGpu) {
    ranked.push_back({Policy::allCpu(), evaluate(size, Policy::allCpu(), placement, machine)});
    return ranked;
  }
  for (unsigned bits = 0; bits < (1u << kSublayerCount); ++bits) {
    const Policy policy = Policy::fromBits(bits);
    ranked.push_back({policy, evaluate(size, policy, placement, machine)});
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [timing](const RankedPolicy &a, const RankedPolicy &b) {
                     const double ta = a.time.total(timing), tb = b.time.total(timing);
                     if (ta != tb)
                       return ta < tb;
                     return deviceChanges(a.policy) < deviceChanges(b.policy);
                   });
  return ranked;
}

} // namespace hetc::compiler
