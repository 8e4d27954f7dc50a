// hetc calibrate: the figures the cost model reads for a CPU, measured on this machine with the
// runtime's own probe and kernels, for 1, 2, 4, ... threads up to all of them, and the
// all-thread figures written as the target "host" (CPU only: no GPU kernel of this runtime has run to
// measure). What cannot be measured without root (the DIMMs' channels and speed) is left out or
// stands in with its source saying so.
#include "CalibrateCommand.h"
#include "CommandSupport.h"
#include "../PrintfString.h"

#include "codegen/cpu/linear/ActivationRows.h"
#include "codegen/cpu/linear/Linear.h"
#include "hetc/compiler/Target.h"
#include "hplan_generated.h"
#include "runtime/executor/ThreadPool.h"
#include "runtime/platform/CpuFeatures.h"
#include "tools/report/MemoryBandwidth.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace hetc::tool {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;
using hetc::tools::format;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Decode: one row against as many BF16 weight bytes as the bandwidth probe's ring (4 times the
// last-level cache, at least 256 MiB), so they stream from memory. Prefill: 256 rows against 32
// MiB, each weight line used by 16 rows at a time: compute.
constexpr size_t kK = 4096;
constexpr size_t kDecodeRows = 1;
constexpr size_t kPrefillRows = 256, kPrefillN = 4096;
// FLOP per cycle and core: one AMX BF16 tile multiply (LIA 4.1's 90.1 TFLOPS = 40 cores x 1024 x
// 2.2 GHz), and two 512-bit vdpbf16ps (32 pairs, 64 FLOP each).
constexpr double kAmxFlopPerCycle = 1024, kAvx512Bf16FlopPerCycle = 128;

struct FreeDeleter {
  void operator()(void *p) const { std::free(p); }
};
template <typename T> using Aligned = std::unique_ptr<T, FreeDeleter>;

template <typename T> Aligned<T> alignedArray(size_t bytes) {
  void *p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p)
    fail(format("cannot allocate %zu bytes for the measurement", bytes));
  return Aligned<T>(static_cast<T *>(p));
}

// splitmix64: numbers for the operands; their values do not matter, only that they are not NaN,
// infinite or subnormal.
uint64_t nextRandom(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float uniform(uint64_t &state) {
  return static_cast<float>(static_cast<double>(nextRandom(state) >> 11) * 0x1.0p-53) - 0.5f;
}

// One linear shape ready to run on a pool: packed weights, converted rows, the output.
class LinearShape {
public:
  LinearShape(size_t rows, size_t n) : rows_(rows), n_(n) {
    Result<std::unique_ptr<codegen::LinearKernel>> kernel =
        codegen::createLinearBf16Kernel(kK, false, codegen::linearKernelFeatures());
    if (!kernel)
      fail(kernel.message());
    kernel_ = std::move(kernel.value());
    uint64_t state = 2025;
    const size_t weightElements = LinearBf16N16K2{n, kK}.bytes() / sizeof(uint16_t);
    weights_ = alignedArray<uint16_t>(weightElements * sizeof(uint16_t));
    for (size_t i = 0; i < weightElements; ++i) {
      const float value = uniform(state);
      uint32_t bits;
      std::memcpy(&bits, &value, sizeof(bits));
      weights_.get()[i] = static_cast<uint16_t>(bits >> 16);
    }
    x_.resize(rows * kK);
    for (float &v : x_)
      v = uniform(state);
    // In the layout the kernel reads for this row count (AMX tiles read row-major bf16 rows).
    rowsBf16_ = alignedArray<uint32_t>(codegen::convertedRowsBytes(kernel_->info(), rows, kK));
    codegen::convertRowsForLinear(kernel_->info(), rows, x_.data(), kK, nullptr, kK,
                                  rowsBf16_.get(), 0, rows);
    y_ = alignedArray<float>(rows * n * sizeof(float));
  }

  // Every thread computes its share of the columns, in whole 16-column blocks.
  static void phase(void *context, size_t, unsigned thread, unsigned threads) {
    const LinearShape &s = *static_cast<const LinearShape *>(context);
    const size_t blocks = s.n_ / LinearBf16N16K2::kBlockColumns;
    codegen::LinearCall call;
    call.x = s.x_.data();
    call.xStride = kK;
    call.xBf16 = s.rowsBf16_.get();
    call.rows = s.rows_;
    call.w = s.weights_.get();
    call.y = s.y_.get();
    call.yStride = s.n_;
    call.colBegin = blocks * thread / threads * LinearBf16N16K2::kBlockColumns;
    call.colEnd = blocks * (thread + 1) / threads * LinearBf16N16K2::kBlockColumns;
    if (call.colBegin < call.colEnd)
      s.kernel_->run(call);
  }

  void run(ThreadPool &pool) { pool.run(1, &LinearShape::phase, this); }
  double flops() const { return 2.0 * rows_ * n_ * kK; }
  double weightBytes() const { return static_cast<double>(LinearBf16N16K2{n_, kK}.bytes()); }
  const char *kernelLabel() const { return kernel_->info().label; }

private:
  size_t rows_, n_;
  std::unique_ptr<codegen::LinearKernel> kernel_;
  Aligned<uint16_t> weights_;
  std::vector<float> x_;
  Aligned<uint32_t> rowsBf16_;
  Aligned<float> y_;
};

// The fastest of at least `minRuns` runs lasting `budget` seconds together, after a warm-up.
double bestSeconds(const std::function<void()> &run, double budget, unsigned minRuns) {
  run();
  double best = 1e30, total = 0;
  for (unsigned i = 0; i < minRuns || (total < budget && i < 10000); ++i) {
    const Clock::time_point start = Clock::now();
    run();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::min(best, seconds);
    total += seconds;
  }
  return best;
}

struct ThreadPoint {
  unsigned threads = 0;
  ReadBandwidth read;
  double decodeSeconds = 0, decodeGbs = 0;
  double prefillSeconds = 0, prefillTflops = 0;
};

std::string fileText(const std::string &path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text;
}

// The value after "key" and a colon on the first line of `text` that starts with it.
std::string fieldOf(const std::string &text, const std::string &key) {
  size_t line = 0;
  while (line < text.size()) {
    const size_t end = text.find('\n', line);
    const std::string row = text.substr(line, end == std::string::npos ? end : end - line);
    if (row.compare(0, key.size(), key) == 0) {
      const size_t colon = row.find(':');
      if (colon != std::string::npos) {
        const size_t first = row.find_first_not_of(" \t", colon + 1);
        return first == std::string::npos ? "" : row.substr(first);
      }
    }
    if (end == std::string::npos)
      break;
    line = end + 1;
  }
  return "";
}

struct Clock_ {
  double ghz = 0;
  std::string source;
};

// The base clock, as the best source this machine offers says it.
Clock_ baseClock() {
  const char *base = "/sys/devices/system/cpu/cpu0/cpufreq/base_frequency";
  const char *max = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq";
  for (const auto &[path, what] :
       {std::make_pair(base, "sysfs cpufreq base_frequency"),
        std::make_pair(max, "sysfs cpufreq cpuinfo_max_freq (the highest clock, not the base)")}) {
    const double khz = std::atof(fileText(path).c_str());
    if (khz > 0)
      return {khz / 1e6, what};
  }
  const double mhz = std::atof(fieldOf(fileText("/proc/cpuinfo"), "cpu MHz").c_str());
  if (mhz > 0)
    return {mhz / 1e3, "/proc/cpuinfo cpu MHz of cpu0 at the time of the run"};
  return {1.0, "not reported by this host (no cpufreq in sysfs, no cpu MHz in /proc/cpuinfo); "
               "the cost model does not read it"};
}

Json figure(const Json &value, const std::string &source) {
  return Json{{"value", value}, {"source", source}};
}

// Rounded to `digits` decimals for the file (dividing, so 0.6646 is written as such); a figure
// rounded to zero would be refused, so the smallest is one unit of the last digit.
double rounded(double value, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::max(1.0, std::round(value * scale)) / scale;
}

void writeFileAtomically(const std::string &path, const std::string &text) {
  std::error_code error;
  const std::filesystem::path target(path);
  if (target.has_parent_path())
    std::filesystem::create_directories(target.parent_path(), error);
  if (error)
    fail("cannot create the directory of " + path + ": " + error.message());
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    out.flush();
    if (!out)
      fail("cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    fail("cannot write " + path + ": " + std::strerror(errno));
  }
}

} // namespace

void addCalibrateOptions(CLI::App &command, CalibrateArguments &args) {
  command.add_option("--out", args.out,
                     "Target file to write (default: " +
                         (compiler::calibratedHostTargetPath().empty()
                              ? std::string("$HOME/.cache/hetc/host.json")
                              : compiler::calibratedHostTargetPath()) +
                         ", the target 'host' of hetc plan)");
  command.add_option("--threads", args.threads, "Most threads to measure with (0 = every core)")
      ->capture_default_str();
  command.add_flag("--quick", args.quick,
                   "Short measurements and a 64 MiB bandwidth probe (a first look, tests)");
  command.add_flag("--json", args.json, "One JSON object instead of text");
}

int calibrateCommand(const CalibrateArguments &args) {
  const std::string path = args.out.empty() ? compiler::calibratedHostTargetPath() : args.out;
  if (path.empty())
    fail("calibrate: neither XDG_CACHE_HOME nor HOME is set; give --out PATH");
  if (path.size() < 5 || path.compare(path.size() - 5, 5, ".json") != 0 ||
      std::filesystem::path(path).stem() != compiler::kHostTarget)
    fail("calibrate: --out must name a file host.json (a target's file is named after it), got " +
         path);

  Result<std::unique_ptr<ThreadPool>> all = ThreadPool::create(args.threads, true);
  if (!all)
    fail(all.message());
  const unsigned most = all.value()->threadCount();
  all.value().reset();

  const double budget = args.quick ? 0.05 : 0.5;
  const unsigned minRuns = args.quick ? 2 : 5;
  ReadBandwidthOptions probe;
  probe.bytes = args.quick ? uint64_t{64} << 20 : 0;
  probe.passes = args.quick ? 3 : 5;
  probe.minSeconds = args.quick ? 0.05 : 0.25;

  const uint64_t streamBytes = probe.bytes ? probe.bytes : defaultProbeBufferBytes();
  const size_t decodeN = (streamBytes / (kK * sizeof(uint16_t)) + 15) / 16 * 16;
  LinearShape decode(kDecodeRows, decodeN);
  LinearShape prefill(kPrefillRows, kPrefillN);
  std::vector<ThreadPoint> points;
  for (unsigned threads = 1;; threads = std::min(most, threads * 2)) {
    Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::create(threads, true);
    if (!pool)
      fail(pool.message());
    ThreadPool &p = *pool.value();
    ThreadPoint point;
    point.threads = threads;
    Result<ReadBandwidth> read = measureReadBandwidth(p, probe);
    if (!read)
      fail(read.message());
    point.read = *read;
    point.decodeSeconds = bestSeconds([&] { decode.run(p); }, budget, minRuns);
    point.decodeGbs = decode.weightBytes() / point.decodeSeconds / 1e9;
    point.prefillSeconds = bestSeconds([&] { prefill.run(p); }, budget, minRuns);
    point.prefillTflops = prefill.flops() / point.prefillSeconds / 1e12;
    points.push_back(point);
    if (!args.json)
      std::cerr << format("hetc: calibrate: %u thread%s measured\n", threads,
                          threads == 1 ? "" : "s");
    if (threads == most)
      break;
  }
  const ThreadPoint &best = points.back();

  // The target file: this machine's CPU with its all-thread figures.
  std::string model = fieldOf(fileText("/proc/cpuinfo"), "model name");
  if (model.empty())
    model = "this machine's CPU (no model name in /proc/cpuinfo)";
  const Clock_ clock = baseClock();
  const double memTotalKb = std::atof(fieldOf(fileText("/proc/meminfo"), "MemTotal").c_str());
  if (memTotalKb <= 0)
    fail("calibrate: /proc/meminfo states no MemTotal");
  const bool hasAmx = hostCpuFeatures() & static_cast<uint64_t>(plan::CpuFeatureBits::AMX_BF16);
  const double measuredTflops = rounded(best.prefillTflops, 4);
  const double avxPeak = most * clock.ghz * kAvx512Bf16FlopPerCycle / 1e3;
  const double amxPeak = hasAmx ? most * clock.ghz * kAmxFlopPerCycle / 1e3 : avxPeak;
  auto peakSource = [&](double peak, const std::string &formula) {
    return peak >= measuredTflops
               ? formula
               : formula + ", raised to the measured figure (the clock ran above base_ghz)";
  };
  const std::string measurement =
      format("measured by hetc calibrate: %s at %zu x %zu x %zu (a prefill step), %u threads, "
             "best of at least %u runs",
             prefill.kernelLabel(), kPrefillRows, kK, kPrefillN, best.threads, minRuns);
  const double readGbs = rounded(best.read.bestGbs, 2);

  Json target;
  target["name"] = compiler::kHostTarget;
  target["description"] =
      "This machine (" + model + ", " + std::to_string(most) +
      " threads) as hetc calibrate measured it: CPU only (no GPU measured)";
  Json cpu;
  cpu["model"] = figure(model, "/proc/cpuinfo model name");
  cpu["cores"] = figure(most, "threads this process may run on, every one measured");
  cpu["base_ghz"] = figure(rounded(clock.ghz, 3), clock.source);
  cpu["amx_bf16_peak_tflops"] =
      figure(std::max(rounded(amxPeak, 4), measuredTflops),
             hasAmx ? peakSource(amxPeak, "cores x base_ghz x 1024 BF16 FLOP per cycle (LIA 4.1)")
                    : peakSource(amxPeak, "this CPU has no AMX: the AVX-512 BF16 peak below"));
  // The prefill shape runs the kernel the engine would: AMX tiles where the host grants them.
  const bool ranAmx = std::string(prefill.kernelLabel()).find("Amx") != std::string::npos;
  cpu["amx_bf16_tflops"] =
      figure(measuredTflops,
             measurement + (ranAmx ? "; with AMX tiles: the cost model's TH_AMX"
                                   : "; no AMX here, so this is hetc's BF16 GEMM throughput "
                                     "without it: the cost model's TH_AMX"));
  cpu["avx512_bf16_peak_tflops"] =
      figure(std::max(rounded(avxPeak, 4), measuredTflops),
             peakSource(avxPeak, "assumption: cores x base_ghz x two 512-bit vdpbf16ps (128 "
                                 "FLOP) per cycle"));
  cpu["avx512_bf16_tflops"] = figure(measuredTflops, measurement);
  target["cpu"] = cpu;
  Json ddr;
  ddr["capacity_gib"] = figure(rounded(memTotalKb * 1024 / kGiB, 3), "/proc/meminfo MemTotal");
  ddr["peak_gbs"] = figure(readGbs, "not measurable here (the DIMMs' channels and speed need "
                                    "root to read): the measured read bandwidth stands in");
  ddr["read_gbs"] = figure(
      readGbs, format("measured by hetc calibrate: best of %u passes of %.0f MiB through a "
                      "%.0f MiB ring, %u threads, %s loads (runtime MemoryBandwidth); the "
                      "cost model's BW_CPU",
                      best.read.passes, best.read.passBytes / 1048576.0,
                      best.read.bufferBytes / 1048576.0, best.read.threads, best.read.loads));
  target["ddr"] = ddr;
  writeFileAtomically(path, target.dump(2) + "\n");
  // What was written must load as `hetc plan --target host` will load it.
  Result<compiler::Target> loaded = compiler::loadTarget(path);
  if (!loaded)
    fail("calibrate wrote a target file that does not load: " + loaded.message());

  if (args.json) {
    Json list = Json::array();
    for (const ThreadPoint &p : points)
      list.push_back(Json{{"threads", p.threads},
                          {"read_gbs", p.read.bestGbs},
                          {"read_median_gbs", p.read.medianGbs},
                          {"decode_ms", p.decodeSeconds * 1e3},
                          {"decode_weight_gbs", p.decodeGbs},
                          {"decode_of_read", p.decodeGbs / p.read.bestGbs},
                          {"prefill_ms", p.prefillSeconds * 1e3},
                          {"prefill_tflops", p.prefillTflops}});
    std::cout << Json{{"path", path},
                      {"kernel", prefill.kernelLabel()},
                      {"decode_shape", {kDecodeRows, kK, decodeN}},
                      {"prefill_shape", {kPrefillRows, kK, kPrefillN}},
                      {"points", list},
                      {"target", target}}
                     .dump(2)
              << '\n';
    return 0;
  }
  std::cout << format("hetc calibrate: %s, %u threads; BF16 linear kernel %s\n", model.c_str(),
                      most, prefill.kernelLabel());
  std::cout << format("%7s %10s | %-28s | %-22s\n", "threads", "read GB/s",
                      format("decode %zux%zux%zu (weights)", kDecodeRows, kK, decodeN).c_str(),
                      format("prefill %zux%zux%zu", kPrefillRows, kK, kPrefillN).c_str());
  for (const ThreadPoint &p : points)
    std::cout << format("%7u %10.2f | %8.3f ms %7.2f GB/s %5.2f | %8.3f ms %7.3f TFLOPS\n",
                        p.threads, p.read.bestGbs, p.decodeSeconds * 1e3, p.decodeGbs,
                        p.decodeGbs / p.read.bestGbs, p.prefillSeconds * 1e3, p.prefillTflops);
  std::cout << format("wrote %s: TH_AMX (cpu.amx_bf16_tflops) %.4g TFLOPS, BW_CPU (ddr.read_gbs) "
                      "%.2f GB/s; `hetc plan --target host` and `hetc targets host` read it\n",
                      path.c_str(), measuredTflops, readGbs);
  return 0;
}

} // namespace hetc::tool
