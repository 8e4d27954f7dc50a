#include "tools/report/MemoryBandwidth.h"

#include "hplan_generated.h"
#include "runtime/executor/ThreadPool.h"
#include "runtime/platform/CpuFeatures.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hetc {
namespace {

constexpr uint64_t kMinimumBufferBytes = uint64_t{256} << 20;
constexpr uint64_t kCacheMultiple = 4;
// Threads split the buffer on this boundary: whole pages, and whole 256-byte load groups.
constexpr uint64_t kShareAlignment = 4096;

// "32768K" / "1024K" / "2M" / "512" as in sysfs cache size files.
uint64_t parseCacheSize(const std::string &text) {
  uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i)
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
  if (i < text.size()) {
    if (text[i] == 'K')
      value <<= 10;
    else if (text[i] == 'M')
      value <<= 20;
    else if (text[i] == 'G')
      value <<= 30;
  }
  return value;
}

std::string readLine(const std::string &path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

uint64_t sysfsLastLevelCache() {
  int bestLevel = 0;
  uint64_t bestSize = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    const std::string level = readLine(dir + "/level");
    if (level.empty())
      break;
    const std::string type = readLine(dir + "/type");
    if (type != "Data" && type != "Unified")
      continue;
    const int levelNumber = std::atoi(level.c_str());
    const uint64_t size = parseCacheSize(readLine(dir + "/size"));
    if (levelNumber > bestLevel || (levelNumber == bestLevel && size > bestSize)) {
      bestLevel = levelNumber;
      bestSize = size;
    }
  }
  return bestSize;
}

uint64_t sysconfLastLevelCache() {
  for (int name : {_SC_LEVEL4_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long size = sysconf(name);
    if (size > 0)
      return static_cast<uint64_t>(size);
  }
  return 0;
}

// Reads [begin, end) (64-byte aligned, a multiple of 256 bytes) and folds it into one word so
// the loads cannot be dropped.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) uint64_t readAvx512(const uint8_t *begin, const uint8_t *end) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (const uint8_t *p = begin; p < end; p += 256) {
    a0 = _mm512_xor_si512(a0, _mm512_load_si512(p));
    a1 = _mm512_xor_si512(a1, _mm512_load_si512(p + 64));
    a2 = _mm512_xor_si512(a2, _mm512_load_si512(p + 128));
    a3 = _mm512_xor_si512(a3, _mm512_load_si512(p + 192));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3)));
  return lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3] ^ lanes[4] ^ lanes[5] ^ lanes[6] ^ lanes[7];
}
#endif

// Plain 64-bit loads in eight independent chains, which the compiler vectorises for the ISA the
// runtime is built for.
uint64_t readWords(const uint8_t *begin, const uint8_t *end) {
  const auto *p = reinterpret_cast<const uint64_t *>(begin);
  const size_t words = static_cast<size_t>(end - begin) / sizeof(uint64_t);
  uint64_t acc[8] = {};
  for (size_t i = 0; i < words; i += 8)
    for (size_t j = 0; j < 8; ++j)
      acc[j] ^= p[i + j];
  return acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7];
}

struct ProbeRun {
  uint8_t *buffer = nullptr;
  uint64_t units = 0;  // buffer size in kShareAlignment units
  uint64_t cursor = 0; // unit the pass starts at
  uint64_t length = 0; // units the pass reads, from the cursor on, wrapping at the end
  bool write = false;
  bool avx512 = false;
  // One slot per thread on its own cache line: the folded words, kept so the reads stay live.
  struct alignas(64) Sink {
    uint64_t value = 0;
  };
  std::vector<Sink> sinks;
};

uint64_t readRange(const ProbeRun &run, uint64_t firstUnit, uint64_t endUnit) {
  const uint8_t *begin = run.buffer + firstUnit * kShareAlignment;
  const uint8_t *end = run.buffer + endUnit * kShareAlignment;
#if defined(__x86_64__)
  if (run.avx512)
    return readAvx512(begin, end);
#endif
  return readWords(begin, end);
}

void probePhase(void *context, size_t, unsigned thread, unsigned threadCount) {
  auto &run = *static_cast<ProbeRun *>(context);
  if (run.write) {
    // A pattern that differs per page, so no page is deduplicated or left zero.
    for (uint64_t unit = run.units * thread / threadCount;
         unit < run.units * (thread + 1) / threadCount; ++unit)
      std::memset(run.buffer + unit * kShareAlignment, static_cast<int>(unit * 37 + 11),
                  kShareAlignment);
    return;
  }
  // This thread's contiguous share of the pass, as stretches that do not wrap.
  uint64_t unit = run.cursor + run.length * thread / threadCount;
  uint64_t left = run.length * (thread + 1) / threadCount - run.length * thread / threadCount;
  while (left > 0) {
    unit %= run.units;
    const uint64_t stretch = std::min(left, run.units - unit);
    run.sinks[thread].value += readRange(run, unit, unit + stretch);
    unit += stretch;
    left -= stretch;
  }
}

} // namespace

uint64_t lastLevelCacheBytes() {
  const uint64_t sysfs = sysfsLastLevelCache();
  return sysfs ? sysfs : sysconfLastLevelCache();
}

uint64_t defaultProbeBufferBytes() {
  return std::max(kMinimumBufferBytes, kCacheMultiple * lastLevelCacheBytes());
}

struct ReadBandwidthProbe::State {
  ProbeRun run;
  uint64_t passBytes = 0;
};

Result<std::unique_ptr<ReadBandwidthProbe>>
ReadBandwidthProbe::create(ThreadPool &pool, uint64_t bufferBytes, uint64_t passBytes) {
  uint64_t bytes = bufferBytes ? bufferBytes : defaultProbeBufferBytes();
  bytes =
      std::max(kShareAlignment, (bytes + kShareAlignment - 1) / kShareAlignment * kShareAlignment);
  passBytes = passBytes == 0
                  ? bytes
                  : (passBytes + kShareAlignment - 1) / kShareAlignment * kShareAlignment;
  void *mapping = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED)
    return Status::error("cannot map " + std::to_string(bytes) +
                         " bytes for the read-bandwidth probe: " + std::strerror(errno));
  std::unique_ptr<ReadBandwidthProbe> probe(new ReadBandwidthProbe(pool));
  probe->state_ = std::make_unique<State>();
  ProbeRun &run = probe->state_->run;
  run.buffer = static_cast<uint8_t *>(mapping);
  run.units = bytes / kShareAlignment;
  run.length = passBytes / kShareAlignment;
  run.avx512 = (hostCpuFeatures() & static_cast<uint64_t>(plan::CpuFeatureBits::AVX512F)) != 0;
  run.sinks.resize(pool.threadCount());
  probe->state_->passBytes = passBytes;
  run.write = true;
  probe->runUnprofiled();
  run.write = false;
  return Result<std::unique_ptr<ReadBandwidthProbe>>(std::move(probe));
}

ReadBandwidthProbe::ReadBandwidthProbe(ThreadPool &pool) : pool_(pool) {}

ReadBandwidthProbe::~ReadBandwidthProbe() {
  if (!state_)
    return;
  ProbeRun &run = state_->run;
  // Keeps the folded words observable; the value itself means nothing.
  uint64_t folded = 0;
  for (const ProbeRun::Sink &sink : run.sinks)
    folded ^= sink.value;
  asm volatile("" : : "r"(folded));
  munmap(run.buffer, run.units * kShareAlignment);
}

void ReadBandwidthProbe::runUnprofiled() {
  // The probe is not an op of a plan: a profile the pool records goes without it.
  PhaseProfile *const profile = pool_.profile();
  pool_.setProfile(nullptr);
  pool_.run(1, &probePhase, &state_->run);
  pool_.setProfile(profile);
}

double ReadBandwidthProbe::pass() {
  ProbeRun &run = state_->run;
  const auto start = std::chrono::steady_clock::now();
  runUnprofiled();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.cursor = (run.cursor + run.length) % run.units; // the next pass goes on from here
  return static_cast<double>(state_->passBytes) / seconds / 1e9;
}

uint64_t ReadBandwidthProbe::bufferBytes() const { return state_->run.units * kShareAlignment; }
uint64_t ReadBandwidthProbe::passBytes() const { return state_->passBytes; }
const char *ReadBandwidthProbe::loads() const { return state_->run.avx512 ? "avx512" : "64-bit"; }

ReadBandwidth ReadBandwidthProbe::measure(unsigned passes, double minSeconds) {
  passes = std::min(kMaxPasses, std::max(1u, passes));
  std::vector<double> gbs;
  gbs.reserve(kMaxPasses);
  double total = 0.0;
  while (gbs.size() < kMaxPasses && (gbs.size() < passes || total < minSeconds)) {
    gbs.push_back(pass());
    total += static_cast<double>(passBytes()) / gbs.back() / 1e9;
  }
  std::sort(gbs.begin(), gbs.end());
  ReadBandwidth result;
  result.bestGbs = gbs.back();
  result.medianGbs = gbs[gbs.size() / 2];
  result.bufferBytes = bufferBytes();
  result.passBytes = passBytes();
  result.passes = static_cast<unsigned>(gbs.size());
  result.threads = pool_.threadCount();
  result.lastLevelCacheBytes = lastLevelCacheBytes();
  result.loads = loads();
  return result;
}

Result<ReadBandwidth> measureReadBandwidth(ThreadPool &pool, const ReadBandwidthOptions &options) {
  Result<std::unique_ptr<ReadBandwidthProbe>> probe =
      ReadBandwidthProbe::create(pool, options.bytes, options.passBytes);
  if (!probe)
    return probe.status();
  return probe.value()->measure(options.passes, options.minSeconds);
}

} // namespace hetc
