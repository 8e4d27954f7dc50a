// hetc-kernel-bench: each runtime kernel on the Llama-3.2-1B shapes, reported as ratios measured
// in this run: achieved GB/s over the read bandwidth the same threads measured around it, and
// achieved TFLOP/s over oneDNN's matmul on the same shape and dtype. A program, not a test: it
// asserts nothing, and absolute times on a shared machine are noise.
//
// The timing loop is written here rather than with Google Benchmark because every figure is a
// ratio between two measurements of one run (kernel and probe, kernel and oneDNN), which that
// library's per-benchmark reports do not express.
#include "../PrintfString.h"
#include "Int8WidenBf16.h"
#include "codegen/cpu/attention/Attention.h"
#include "codegen/cpu/isa/CpuFeatures.h"
#include "codegen/cpu/linear/ActivationRows.h"
#include "codegen/cpu/linear/Linear.h"
#include "codegen/cpu/linear/LinearAmxBf16.h"
#include "codegen/cpu/linear/LinearInt4.h"
#include "codegen/cpu/linear/LinearInt8.h"
#include "codegen/cpu/vector/Kernels.h"
#include "codegen/cpu/vector/VectorKernels.h"
#include "hplan_generated.h"
#include "runtime/executor/ThreadPool.h"
#include "runtime/format/Bf16.h"
#include "runtime/format/Plan.h"
#include "runtime/platform/CpuFeatures.h"
#include "tools/report/MemoryBandwidth.h"

#ifdef HETC_WITH_DNNL
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Settings {
  bool quick = false;
  unsigned threads = 0;
  std::string only;           // "", "linear", "attention", "rmsnorm"
  double budgetSeconds = 0.5; // per measurement, after one warm-up run
  unsigned minRuns = 5;
  double maxRunSeconds = 1.0; // prefill shapes are sliced to about this long a run
  unsigned rounds = 3;        // turns the kernel and oneDNN take on each shape
};

using hetc::tools::format;

// Seconds per call: the fastest of at least `minRuns` timed runs lasting `budgetSeconds`
// together, after one warm-up run, where a run is `callsPerRun` calls call(0..callsPerRun-1). A
// run slower than the whole budget is repeated once only, one slower than four budgets not at
// all. Reading cold weights, a run passes over every copy (more than 4x the last-level cache),
// so the fastest run is timed over as many bytes as a pass of the bandwidth probe, not over one
// copy a burst of spare bandwidth could flatter.
double bestSeconds(const Settings &settings, const std::function<void(size_t)> &call,
                   size_t callsPerRun = 1) {
  auto run = [&]() {
    const Clock::time_point start = Clock::now();
    for (size_t i = 0; i < callsPerRun; ++i)
      call(i);
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  const double first = run();
  if (first > 4 * settings.budgetSeconds)
    return first / callsPerRun; // far beyond the budget: the warm-up is the measurement
  const unsigned minRuns = first > settings.budgetSeconds ? 1 : settings.minRuns;
  double best = 1e30, total = 0.0;
  for (size_t i = 1; (i <= minRuns || total < settings.budgetSeconds) && i <= 10000; ++i) {
    const double seconds = run();
    best = std::min(best, seconds);
    total += seconds;
  }
  return best / callsPerRun;
}

// Pseudo-random floats in [-scale, scale), written by the pool's threads.
void fillRandom(hetc::ThreadPool &pool, float *data, size_t count, float scale, uint64_t seed) {
  struct Fill {
    float *data;
    size_t count;
    float scale;
    uint64_t seed;
  } fill{data, count, scale, seed};
  pool.run(
      1,
      [](void *context, size_t, unsigned thread, unsigned threads) {
        const Fill &f = *static_cast<const Fill *>(context);
        const size_t begin = f.count * thread / threads, end = f.count * (thread + 1) / threads;
        uint64_t state = (f.seed + begin) * 0x9e3779b97f4a7c15ull | 1;
        for (size_t i = begin; i < end; ++i) {
          state ^= state << 13;
          state ^= state >> 7;
          state ^= state << 17;
          f.data[i] = (static_cast<float>(state >> 40) * 0x1.0p-23f - 1.0f) * f.scale;
        }
      },
      &fill);
}

bool hostHas(hetc::plan::CpuFeatureBits feature) {
  return (hetc::hostCpuFeatures() & static_cast<uint64_t>(feature)) != 0;
}

// The read bandwidth the of-bw columns of a group of lines divide by: the better of the probes
// right before and right after the group. On a shared machine the bandwidth left to this
// process drifts (here by 2x within a minute), so a kernel is compared with probes of its own
// moment rather than with the best of the whole run.
class BandwidthReference {
public:
  // Passes of `passBytes`, as much as a timed run of a decode kernel reads.
  BandwidthReference(hetc::ThreadPool &pool, uint64_t passBytes) : pool_(pool) {
    options_.passBytes = passBytes;
  }
  // Probes; returns the best pass.
  double probe() {
    auto measured = hetc::measureReadBandwidth(pool_, options_);
    if (!measured) {
      std::fprintf(stderr, "hetc-kernel-bench: error: %s\n", measured.message().c_str());
      std::exit(1);
    }
    last_ = *measured;
    return last_.bestGbs;
  }
  const hetc::ReadBandwidth &last() const { return last_; }

private:
  hetc::ThreadPool &pool_;
  hetc::ReadBandwidthOptions options_;
  hetc::ReadBandwidth last_;
};

// Lines of one group, printed once the group's closing probe has run; `gbs` < 0: no of-bw.
struct PendingLine {
  std::string before; // columns up to GB/s
  double gbs = -1.0;
  std::string after; // columns after of-bw
};

// Opens a group: its first probe.
double openGroup(BandwidthReference &bandwidth) { return bandwidth.probe(); }

void closeGroup(std::vector<PendingLine> &lines, BandwidthReference &bandwidth, double opening) {
  const double closing = bandwidth.probe();
  const double reference = std::max(opening, closing);
  for (const PendingLine &line : lines)
    std::printf("%s %6s%s\n", line.before.c_str(),
                line.gbs >= 0 ? format("%.3f", line.gbs / reference).c_str() : "-",
                line.after.c_str());
  std::printf("  (of-bw against %.2f GB/s: probes before %.2f and after %.2f this group)\n",
              reference, opening, closing);
  std::fflush(stdout);
  lines.clear();
}

// Weight copies so that one pass over them all exceeds four times the last-level cache: each
// timed run reads the next copy, cold, as a decode step reads a layer the others have evicted.
size_t coldCopies(uint64_t bytes, uint64_t llc) {
  if (bytes == 0)
    return 1;
  return static_cast<size_t>(std::max<uint64_t>(1, (4 * llc + bytes - 1) / bytes));
}

// ---------------------------------------------------------------------------------------------
// Linear kernels: y[M, N] = x[M, K] W^T with W given as [N, K]. One class per kernel; the list in
// linearKernels() is all there is to change to benchmark another.

class LinearUnderTest {
public:
  virtual ~LinearUnderTest() = default;
  virtual std::string name() const = 0;
  // "f32", "bf16", "int8" or "int4": picks the oneDNN reference.
  virtual std::string weightDtype() const = 0;
  // Why the host cannot run it, or empty.
  virtual std::string unavailable() const { return {}; }
  // What the engine runs on this host (f32 weights, or bf16 weights): the only ones --quick runs.
  virtual bool chosenForHost() const { return true; }
  // Row counts it is measured at: the AMX kernel only where it runs its tiles.
  virtual bool measuresRows(size_t) const { return true; }
  // Columns a thread's share is a multiple of.
  virtual size_t columnGrain() const { return 16; }
  // Builds `copies` copies of the kernel's weights for [N, K] from f32 values (in its layout and
  // dtype) and returns the bytes one run reads.
  virtual uint64_t prepare(const float *w, size_t n, size_t k, size_t copies) = 0;
  virtual void release() = 0;
  // Takes the rows of x the following runs read, before they are timed: a kernel that reads
  // converted activations converts them here (the engine does it in an op of its own).
  virtual void setInput(const float *, size_t, size_t, size_t) {}
  // y = x W^T for columns [colBegin, colEnd), reading weight copy `copy`.
  virtual void run(const float *x, size_t xStride, size_t m, size_t k, float *y, size_t yStride,
                   size_t colBegin, size_t colEnd, size_t copy) const = 0;
};

class PortableLinear final : public LinearUnderTest {
public:
  std::string name() const override { return "LinearF32Portable"; }
  std::string weightDtype() const override { return "f32"; }
  uint64_t prepare(const float *w, size_t n, size_t k, size_t copies) override {
    copies_.assign(copies, std::vector<float>(w, w + n * k));
    return uint64_t{n} * k * sizeof(float);
  }
  void release() override { copies_.clear(); }
  void run(const float *x, size_t xStride, size_t m, size_t k, float *y, size_t yStride,
           size_t colBegin, size_t colEnd, size_t copy) const override {
    hetc::kernels::linear(x, xStride, m, copies_[copy].data(), k, y, yStride, colBegin, colEnd);
  }

private:
  std::vector<std::vector<float>> copies_;
};

// A kernel of codegen/cpu over BF16 weights packed as LinearBf16N16K2, made for each K by
// `create` as the engine makes it at plan load. `title` names it while it cannot be made.
class CodegenBf16Linear final : public LinearUnderTest {
public:
  using Create =
      std::function<hetc::Result<std::unique_ptr<hetc::codegen::LinearKernel>>(size_t k)>;
  CodegenBf16Linear(Create create, std::string title, std::string suffix = "", size_t minRows = 1)
      : create_(std::move(create)), suffix_(std::move(suffix)), label_(std::move(title)),
        minRows_(minRows) {
    auto probe = create_(64);
    if (probe.ok()) {
      label_ = probe.value()->info().label;
      kernelName_ = probe.value()->info().name;
    } else {
      why_ = probe.message();
    }
  }
  std::string name() const override { return label_ + suffix_; }
  std::string weightDtype() const override { return "bf16"; }
  std::string unavailable() const override { return why_; }
  bool chosenForHost() const override {
    if (!suffix_.empty() || !why_.empty())
      return false;
    const hetc::codegen::LinearKernelInfo chosen =
        hetc::codegen::chooseLinearBf16Kernel(hetc::codegen::linearKernelFeatures());
    // The AMX kernel runs LinearAvx512Bf16 for decode-sized steps.
    return label_ == chosen.label ||
           (chosen.tileRowsFrom != 0 && kernelName_ == "LinearAvx512Bf16");
  }
  bool measuresRows(size_t m) const override { return m >= minRows_; }
  size_t columnGrain() const override { return hetc::LinearBf16N16K2::kBlockColumns; }
  uint64_t prepare(const float *w, size_t n, size_t k, size_t copies) override {
    auto kernel = create_(k);
    if (!kernel.ok()) {
      std::fprintf(stderr, "hetc-kernel-bench: %s\n", kernel.message().c_str());
      std::exit(1);
    }
    kernel_ = std::move(kernel.value());
    const hetc::LinearBf16N16K2 layout{n, k};
    copies_.clear();
    for (size_t c = 0; c < copies; ++c) {
      copies_.emplace_back(static_cast<uint16_t *>(std::aligned_alloc(64, layout.bytes())),
                           &std::free);
      hetc::packLinearBf16(w, false, n, k, copies_.back().get());
    }
    return layout.bytes();
  }
  void release() override {
    copies_.clear();
    kernel_.reset();
  }
  // Both layouts the kernel may read: every prefix of `rows` rows is then a valid input.
  void setInput(const float *x, size_t xStride, size_t rows, size_t k) override {
    using namespace hetc::codegen;
    rows_.reset(static_cast<uint32_t *>(std::aligned_alloc(64, Bf16Rows::bytes(rows, k))));
    convertRowsToBf16Portable(x, xStride, nullptr, k, rows_.get(), 0, rows);
    rowMajor_.reset();
    if (kernel_ && kernel_->info().tileRowsFrom != 0) {
      rowMajor_.reset(
          static_cast<uint32_t *>(std::aligned_alloc(64, Bf16RowMajor::bytes(rows, k))));
      convertRowsToBf16RowMajorPortable(x, xStride, nullptr, k, rowMajor_.get(), 0, rows);
    }
  }
  void run(const float *x, size_t xStride, size_t m, size_t, float *y, size_t yStride,
           size_t colBegin, size_t colEnd, size_t copy) const override {
    hetc::codegen::LinearCall call;
    call.x = x;
    call.xStride = xStride;
    call.xBf16 =
        hetc::codegen::readsBf16RowMajor(kernel_->info(), m) ? rowMajor_.get() : rows_.get();
    call.rows = m;
    call.w = copies_[copy].get();
    call.y = y;
    call.yStride = yStride;
    call.colBegin = colBegin;
    call.colEnd = colEnd;
    kernel_->run(call);
  }

private:
  struct Free {
    void operator()(void *p) const { std::free(p); }
  };
  Create create_;
  std::string suffix_, label_, why_, kernelName_;
  size_t minRows_;
  std::unique_ptr<hetc::codegen::LinearKernel> kernel_;
  std::vector<std::unique_ptr<uint16_t, void (*)(void *)>> copies_;
  std::unique_ptr<uint32_t, Free> rows_, rowMajor_;
};

// `copies` copies of a weight quantized to int8 (LinearInt8N16K4's packed values), with its scales
// and column sums: what the int8 kernel and the widening alternative read.
struct Int8Weights {
  std::vector<std::unique_ptr<int8_t, void (*)(void *)>> copies;
  std::vector<float> scale;
  std::vector<int32_t> columnSum;
  void prepare(const float *w, size_t n, size_t k, size_t count) {
    const hetc::LinearInt8N16K4 layout{n, k};
    scale.resize(layout.paddedColumns());
    columnSum.resize(layout.paddedColumns());
    copies.clear();
    for (size_t c = 0; c < count; ++c) {
      copies.emplace_back(static_cast<int8_t *>(std::aligned_alloc(64, layout.bytes())),
                          &std::free);
      hetc::quantizeLinearInt8(w, false, n, k, copies.back().get(), scale.data(), columnSum.data());
    }
  }
};

// Int8 weights with a scale per output column and activations quantized per row (LinearInt8.h):
// decode row counts only.
class Int8Linear final : public LinearUnderTest {
public:
  Int8Linear(hetc::codegen::LinearInt8Fn kernel, std::string name, std::string why)
      : kernel_(kernel), name_(std::move(name)), why_(std::move(why)) {}
  std::string name() const override { return name_; }
  std::string weightDtype() const override { return "int8"; }
  std::string unavailable() const override { return why_; }
  bool chosenForHost() const override {
    return kernel_ == hetc::codegen::pickLinearInt8(hetc::codegen::hostCpuFeatures()).kernel;
  }
  bool measuresRows(size_t m) const override { return m <= 16; }
  uint64_t prepare(const float *w, size_t n, size_t k, size_t copies) override {
    const hetc::LinearInt8N16K4 layout{n, k};
    weights_.prepare(w, n, k, copies);
    // The scales and column sums are read too.
    return layout.bytes() + layout.paddedColumns() * (sizeof(float) + sizeof(int32_t));
  }
  void release() override { weights_.copies.clear(); }
  void setInput(const float *x, size_t xStride, size_t rows, size_t k) override {
    stride_ = 4 * ((k + 3) / 4);
    xq_.resize(rows * stride_);
    rowScale_.resize(rows);
    hetc::codegen::quantizeRowsInt8(x, xStride, rows, k, xq_.data(), stride_, rowScale_.data());
  }
  void run(const float *, size_t, size_t m, size_t k, float *y, size_t yStride, size_t colBegin,
           size_t colEnd, size_t copy) const override {
    hetc::codegen::LinearInt8Call call;
    call.x = {xq_.data(), stride_, rowScale_.data(), m};
    call.w = weights_.copies[copy].get();
    call.scale = weights_.scale.data();
    call.columnSum = weights_.columnSum.data();
    call.k = k;
    call.y = y;
    call.yStride = yStride;
    call.colBegin = colBegin;
    call.colEnd = colEnd;
    kernel_(call);
  }

private:
  hetc::codegen::LinearInt8Fn kernel_;
  std::string name_, why_;
  Int8Weights weights_;
  std::vector<float> rowScale_;
  std::vector<uint8_t> xq_;
  size_t stride_ = 0;
};

// The same int8 weights widened to bf16 in registers, against bf16 activations (Int8WidenBf16.h):
// the alternative to quantizing the rows, measured beside LinearInt8Avx512Vnni.
class Int8WidenLinear final : public LinearUnderTest {
public:
  explicit Int8WidenLinear(std::string why) : why_(std::move(why)) {}
  std::string name() const override { return "Int8WidenBf16 (alternative)"; }
  std::string weightDtype() const override { return "int8"; }
  std::string unavailable() const override { return why_; }
  bool measuresRows(size_t m) const override { return m <= 16; }
  uint64_t prepare(const float *w, size_t n, size_t k, size_t copies) override {
    const hetc::LinearInt8N16K4 layout{n, k};
    weights_.prepare(w, n, k, copies);
    return layout.bytes() + layout.paddedColumns() * sizeof(float);
  }
  void release() override { weights_.copies.clear(); }
  void setInput(const float *x, size_t xStride, size_t rows, size_t k) override {
    stride_ = 4 * ((k + 3) / 4);
    xb_.assign(rows * stride_, 0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < k; ++i)
        xb_[r * stride_ + i] = hetc::floatToBf16(x[r * xStride + i]);
  }
  void run(const float *, size_t, size_t m, size_t k, float *y, size_t yStride, size_t colBegin,
           size_t colEnd, size_t copy) const override {
    hetc::bench::linearInt8WidenBf16(xb_.data(), stride_, m, weights_.copies[copy].get(),
                                     weights_.scale.data(), k, y, yStride, colBegin, colEnd);
  }

private:
  std::string why_;
  Int8Weights weights_;
  std::vector<uint16_t> xb_;
  size_t stride_ = 0;
};

// 4-bit weights with a scale and a zero point per column and group of K (LinearInt4.h), and
// activations quantized per row with their granule sums: decode row counts only.
class Int4Linear final : public LinearUnderTest {
public:
  Int4Linear(hetc::codegen::LinearInt4Fn kernel, std::string name, size_t group, std::string why)
      : kernel_(kernel), name_(std::move(name)), group_(group), why_(std::move(why)) {}
  std::string name() const override { return name_ + " g" + std::to_string(group_); }
  std::string weightDtype() const override { return "int4"; }
  std::string unavailable() const override { return why_; }
  bool chosenForHost() const override {
    return kernel_ == hetc::codegen::pickLinearInt4(hetc::codegen::hostCpuFeatures()).kernel;
  }
  bool measuresRows(size_t m) const override { return m <= 16; }
  uint64_t prepare(const float *w, size_t n, size_t k, size_t copies) override {
    const hetc::LinearInt4N16K8 layout{n, k, group_};
    copies_.clear();
    for (size_t c = 0; c < copies; ++c) {
      copies_.emplace_back(
          static_cast<uint8_t *>(std::aligned_alloc(64, (layout.segmentBytes() + 63) / 64 * 64)),
          &std::free);
      hetc::quantizeLinearInt4Segment(w, false, n, k, group_, false, copies_.back().get());
    }
    n_ = n;
    // The scales and zero points are read too.
    return layout.segmentBytes();
  }
  void release() override { copies_.clear(); }
  void setInput(const float *x, size_t xStride, size_t rows, size_t k) override {
    stride_ = 4 * ((k + 3) / 4);
    sumsStride_ = (k + hetc::codegen::kInt4GranuleK - 1) / hetc::codegen::kInt4GranuleK;
    xq_.resize(rows * stride_);
    rowScale_.resize(rows);
    sums_.resize(rows * sumsStride_);
    hetc::codegen::quantizeRowsInt8Signed(x, xStride, rows, k, xq_.data(), stride_,
                                          rowScale_.data(), sums_.data(), sumsStride_);
  }
  void run(const float *, size_t, size_t m, size_t k, float *y, size_t yStride, size_t colBegin,
           size_t colEnd, size_t copy) const override {
    hetc::codegen::LinearInt4Call call;
    call.xq = xq_.data();
    call.stride = stride_;
    call.rowScale = rowScale_.data();
    call.granuleSums = sums_.data();
    call.sumsStride = sumsStride_;
    call.rows = m;
    call.w = copies_[copy].get();
    call.n = n_;
    call.k = k;
    call.group = group_;
    call.y = y;
    call.yStride = yStride;
    call.colBegin = colBegin;
    call.colEnd = colEnd;
    kernel_(call);
  }

private:
  hetc::codegen::LinearInt4Fn kernel_;
  std::string name_;
  size_t group_;
  std::string why_;
  std::vector<std::unique_ptr<uint8_t, void (*)(void *)>> copies_;
  std::vector<float> rowScale_;
  std::vector<int32_t> sums_;
  std::vector<int8_t> xq_;
  size_t n_ = 0, stride_ = 0, sumsStride_ = 0;
};

std::vector<std::unique_ptr<LinearUnderTest>> linearKernels() {
  using namespace hetc::codegen;
  std::vector<std::unique_ptr<LinearUnderTest>> kernels;
  kernels.push_back(std::make_unique<PortableLinear>());
  // Prefill row counts only: below kAmxMinRows it runs LinearAvx512Bf16, measured below.
  kernels.push_back(std::make_unique<CodegenBf16Linear>(
      [](size_t k) { return createLinearAmxBf16(k, false); }, "LinearAmxBf16", "", kAmxMinRows));
  kernels.push_back(std::make_unique<CodegenBf16Linear>(
      [](size_t k) { return createLinearAvx512Bf16(k, false); }, "LinearAvx512Bf16"));
  kernels.push_back(std::make_unique<CodegenBf16Linear>(
      [](size_t k) { return createLinearAvx512Bf16(k, false, 0); }, "LinearAvx512Bf16",
      " no-prefetch"));
  kernels.push_back(std::make_unique<CodegenBf16Linear>(
      [](size_t k) -> hetc::Result<std::unique_ptr<LinearKernel>> {
        return createLinearBf16Portable(k, false);
      },
      "LinearBf16Portable"));
  const bool vnni = hetc::codegen::hostHas(kCpuAvx512F | kCpuAvx512BW | kCpuAvx512Vnni);
  kernels.push_back(std::make_unique<Int8Linear>(linearInt8Avx512Vnni, "LinearInt8Avx512Vnni",
                                                 vnni ? "" : "the host has no AVX-512 VNNI"));
  kernels.push_back(std::make_unique<Int8Linear>(linearInt8Portable, "LinearInt8Portable", ""));
  kernels.push_back(std::make_unique<Int8WidenLinear>(
      hetc::codegen::hostHas(kCpuAvx512F | kCpuAvx512BW | kCpuAvx512Bf16)
          ? ""
          : "the host has no AVX-512 BF16"));
  for (size_t group : {16, 32, 128}) {
    kernels.push_back(std::make_unique<Int4Linear>(linearInt4Avx512Vnni, "LinearInt4Avx512Vnni",
                                                   group,
                                                   vnni ? "" : "the host has no AVX-512 VNNI"));
    kernels.push_back(
        std::make_unique<Int4Linear>(linearInt4Portable, "LinearInt4Portable", group, ""));
  }
  return kernels;
}

// ---------------------------------------------------------------------------------------------
// oneDNN matmul, the reference for every linear shape.

#ifdef HETC_WITH_DNNL
// oneDNN's packed weights of one shape, kept across row counts that want the same layout.
struct DnnlWeights {
  dnnl::memory::desc desc;
  bool bf16 = false;
  size_t n = 0;
  std::vector<dnnl::memory> copies;
};

class DnnlMatmul {
public:
  // `bf16`: bf16 x bf16 -> f32; otherwise f32 throughout. The weights get the layout oneDNN
  // prefers (format any, reordered once), as the compiler packs ours ahead of time; `w` holds
  // them as our [N, K] (at least n rows), `copies` cold copies are made unless `cache` has them.
  DnnlMatmul(bool bf16, size_t m, size_t n, size_t k, const float *w, size_t copies, const float *x,
             DnnlWeights &cache)
      : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dt type = bf16 ? dt::bf16 : dt::f32;
    const dnnl::memory::dim M = m, N = n, K = k;
    dnnl::memory::desc srcDesc({M, K}, type, tag::ab);
    dnnl::memory::desc weightsAny({K, N}, type, tag::any);
    dnnl::memory::desc dstDesc({M, N}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(srcDesc, weightsAny, dstDesc), engine_);
    implementation_ = pd.impl_info_str();
    matmul_ = dnnl::matmul(pd);
    src_ = dnnl::memory(srcDesc, engine_);
    dst_ = dnnl::memory(dstDesc, engine_);
    write(src_, x, m * k, bf16);
    if (!(cache.desc == pd.weights_desc()) || cache.bf16 != bf16 || cache.n != n ||
        cache.copies.size() < copies) {
      cache.copies.clear(); // frees the old copies before making new ones
      // User weights [K, N] with N-major rows = our [N, K] row-major: format ba.
      dnnl::memory user(dnnl::memory::desc({K, N}, type, tag::ba), engine_);
      write(user, w, n * k, bf16);
      for (size_t c = 0; c < copies; ++c) {
        dnnl::memory packed(pd.weights_desc(), engine_);
        dnnl::reorder(user, packed).execute(stream_, user, packed);
        cache.copies.push_back(packed);
      }
      stream_.wait();
      cache.desc = pd.weights_desc();
      cache.bf16 = bf16;
      cache.n = n;
    }
    weights_ = cache.copies;
    weights_.resize(copies);
  }
  void run(size_t copy) {
    matmul_.execute(stream_, {{DNNL_ARG_SRC, src_},
                              {DNNL_ARG_WEIGHTS, weights_[copy % weights_.size()]},
                              {DNNL_ARG_DST, dst_}});
    stream_.wait();
  }
  const std::string &implementation() const { return implementation_; }

private:
  static void write(dnnl::memory &memory, const float *values, size_t count, bool bf16) {
    if (bf16) {
      auto *out = static_cast<uint16_t *>(memory.get_data_handle());
      for (size_t i = 0; i < count; ++i)
        out[i] = hetc::floatToBf16(values[i]);
    } else {
      std::memcpy(memory.get_data_handle(), values, count * sizeof(float));
    }
  }
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::matmul matmul_;
  dnnl::memory src_, dst_;
  std::vector<dnnl::memory> weights_;
  std::string implementation_;
};
#endif

struct LinearShape {
  const char *name;
  size_t k;
  size_t n;
};

// The Llama-3.2-1B projections: hidden 2048, 32 query heads and 8 KV heads of 64, intermediate
// 8192, vocabulary 128256.
constexpr LinearShape kLinearShapes[] = {
    {"q_proj/o_proj", 2048, 2048}, {"k_proj/v_proj", 2048, 512}, {"gate/up_proj", 2048, 8192},
    {"down_proj", 8192, 2048},     {"lm_head", 2048, 128256},
};

struct LinearPhase {
  const LinearUnderTest *kernel;
  const float *x;
  size_t m, k, n; // columns [0, n) of the prepared weights
  float *y;       // [m, n]
  size_t copy;
};

void linearPhase(void *context, size_t, unsigned thread, unsigned threads) {
  const LinearPhase &p = *static_cast<const LinearPhase *>(context);
  const size_t grain = p.kernel->columnGrain();
  const size_t units = (p.n + grain - 1) / grain;
  const size_t begin = units * thread / threads * grain;
  const size_t end = std::min(p.n, units * (thread + 1) / threads * grain);
  if (begin < end)
    p.kernel->run(p.x, p.k, p.m, p.k, p.y, p.n, begin, end, p.copy);
}

// Columns a run at M rows computes: all of them for decode, where the weight stream is what is
// measured; for prefill as many as the kernel computes in about maxRunSeconds (a multiple of 64,
// estimated from one run over 256 columns), so a slow kernel still finishes. oneDNN then runs the
// same sliced shape.
size_t columnsFor(const Settings &settings, hetc::ThreadPool &pool, LinearPhase phase,
                  size_t fullColumns, std::vector<float> &y) {
  if (phase.m < 128)
    return fullColumns;
  phase.n = std::min<size_t>(fullColumns, 256);
  y.resize(std::max(y.size(), phase.m * phase.n));
  phase.y = y.data();
  const Clock::time_point start = Clock::now();
  pool.run(1, &linearPhase, &phase);
  const double perColumn =
      std::chrono::duration<double>(Clock::now() - start).count() / static_cast<double>(phase.n);
  const double fit = settings.maxRunSeconds / perColumn / 64.0;
  return fit >= static_cast<double>(fullColumns) / 64.0
             ? fullColumns
             : std::max<size_t>(64, static_cast<size_t>(fit) * 64);
}

void benchLinear(const Settings &settings, hetc::ThreadPool &pool, BandwidthReference &bandwidth,
                 uint64_t llc) {
  const size_t rowCounts[] = {1, 4, 16, 128, 512, 2048};
  const size_t maxRows = 2048;
  auto kernels = linearKernels();
  std::set<std::string> implementations; // oneDNN's, as "dtype implementation"
  std::printf("\nlinear: y[M, N] = x[M, K] W^T; weights cold (rotated over copies totalling > "
              "4x LLC) at M < 128; at M >= 128 the columns a kernel computes in about %.2f s "
              "(N shows them; oneDNN runs the same N)\n",
              settings.maxRunSeconds);
  std::printf("%-32s %-14s %5s %6s %7s %10s %8s %6s %8s %8s %6s\n", "kernel", "shape", "M", "K",
              "N", "ms", "GB/s", "of-bw", "TFLOP/s", "oneDNN", "ratio");
  std::vector<PendingLine> lines;
  for (const LinearShape &shape : kLinearShapes) {
    const double opening = openGroup(bandwidth);
    std::vector<float> w(shape.n * shape.k), x(maxRows * shape.k), y;
    fillRandom(pool, w.data(), w.size(), 1.0f / std::sqrt(float(shape.k)), shape.n);
    fillRandom(pool, x.data(), x.size(), 1.0f, shape.k);

    // oneDNN's best seconds per call by (weight dtype, M, N) so far in this shape's group.
    std::map<std::tuple<std::string, size_t, size_t>, double> referenceSeconds;
#ifdef HETC_WITH_DNNL
    DnnlWeights dnnlWeights;
#endif

    for (const auto &kernel : kernels) {
      // A kernel the host cannot run says so, --quick or not.
      const std::string why = kernel->unavailable();
      if (!why.empty()) {
        lines.push_back(
            {format("%-32s %-14s  skipped: %s", kernel->name().c_str(), shape.name, why.c_str()),
             -1.0, ""});
        continue;
      }
      if (settings.quick && !kernel->chosenForHost())
        continue;
      const uint64_t bytes = kernel->prepare(w.data(), shape.n, shape.k, 1);
      const size_t copies = coldCopies(bytes, llc);
      if (copies > 1)
        kernel->prepare(w.data(), shape.n, shape.k, copies);
      kernel->setInput(x.data(), shape.k, maxRows, shape.k);
      const std::string dtype = kernel->weightDtype();
      for (size_t m : rowCounts) {
        if (!kernel->measuresRows(m))
          continue;
        LinearPhase phase{kernel.get(), x.data(), m, shape.k, shape.n, nullptr, 0};
        phase.n = columnsFor(settings, pool, phase, shape.n, y);
        const size_t n = phase.n;
        y.resize(std::max(y.size(), m * n));
        phase.y = y.data();
        const size_t calls = m >= 128 ? 1 : copies;
        auto ours = [&]() {
          return bestSeconds(
              settings,
              [&](size_t i) {
                phase.copy = i;
                pool.run(1, &linearPhase, &phase);
              },
              calls);
        };
        // The kernel and oneDNN take turns, so each meets the machine's quiet and busy moments
        // alike; each keeps its fastest.
        double seconds = 1e30;
        double &reference =
            referenceSeconds.emplace(std::make_tuple(dtype, m, n), 0.0).first->second;
#ifdef HETC_WITH_DNNL
        // Int8 and int4 weights are compared with oneDNN's bf16 matmul, the engine's other decode
        // path.
        const bool dnnlBf16 = dtype != "f32";
        const uint64_t dnnlBytes = uint64_t{n} * shape.k * (dnnlBf16 ? 2 : 4);
        const size_t dnnlCopies = m >= 128 ? 1 : coldCopies(dnnlBytes, llc);
        DnnlMatmul matmul(dnnlBf16, m, n, shape.k, w.data(), dnnlCopies, x.data(),
                          dnnlWeights);
        implementations.insert((dnnlBf16 ? "bf16 " : "f32 ") + matmul.implementation());
        for (unsigned round = 0; round < settings.rounds; ++round) {
          seconds = std::min(seconds, ours());
          const double theirs = bestSeconds(
              settings, [&](size_t i) { matmul.run(i); }, dnnlCopies);
          reference = reference > 0 ? std::min(reference, theirs) : theirs;
          // OpenMP's workers spin for a while after a parallel region; let them sleep before
          // the pool's threads run again.
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
#else
        seconds = ours();
#endif
        const double flop = 2.0 * m * n * shape.k;
        const double gbs = static_cast<double>(bytes) * n / shape.n / seconds / 1e9;
        const double tflops = flop / seconds / 1e12;
        const double ref = reference > 0 ? flop / reference / 1e12 : 0.0;
        lines.push_back(
            {format("%-32s %-14s %5zu %6zu %7zu %10.4f %8.2f", kernel->name().c_str(), shape.name,
                    m, shape.k, n, seconds * 1e3, gbs),
             gbs,
             format(" %8.4f %8s %6s", tflops, ref > 0 ? format("%.4f", ref).c_str() : "-",
                    ref > 0 ? format("%.3f", tflops / ref).c_str() : "-")});
      }
      kernel->release(); // before the next kernel builds its own copies
    }
    closeGroup(lines, bandwidth, opening);
  }
  std::string used;
  for (const std::string &implementation : implementations)
    used += (used.empty() ? "" : ", ") + implementation;
  if (!used.empty())
    std::printf("oneDNN implementations: %s\n", used.c_str());
}

// The row-wise and attention kernel sets: the portable one, and the host's fastest if another.
std::vector<const hetc::kernels::VectorKernels *> vectorKernelSets() {
  std::vector<const hetc::kernels::VectorKernels *> sets = {
      &hetc::kernels::portableVectorKernels()};
  const hetc::kernels::VectorKernels *best =
      &hetc::kernels::vectorKernelsFor(hetc::hostCpuFeatures());
  // On an AVX-512 BF16 host the plain AVX-512 set too: its bf16 attention is what hosts without
  // AVX-512 BF16 run.
  if (best == hetc::kernels::avx512Bf16VectorKernels())
    sets.push_back(hetc::kernels::avx512VectorKernels());
  if (best != sets[0])
    sets.push_back(best);
  return sets;
}

// ---------------------------------------------------------------------------------------------
// Attention: one decode row (batch 1) of Llama-3.2-1B's 32 query heads over 8 KV heads of 64, at
// several contexts, with each KV element type (int8 with its row scales); K and V rotated over
// layers totalling > 4x LLC.

struct AttentionPhase {
  hetc::kernels::AttentionChunkKernel chunk;
  const hetc::kernels::AttentionSplit *split;
  hetc::kernels::AttentionOperands operands;
  float *states; // the split row's chunk states
  float *work;   // two states per thread
  size_t stateFloats;
  std::atomic<size_t> *claimed; // units claimed in phase 0, as the engine claims them
};

// Phase 0: the row's chunks of positions, spread over the threads; phase 1: their merge.
void attentionPhase(void *context, size_t phase, unsigned thread, unsigned threads) {
  const AttentionPhase &p = *static_cast<const AttentionPhase *>(context);
  if (phase == 0) {
    hetc::kernels::attentionClaimedUnits(p.chunk, *p.split, p.operands, *p.claimed, threads,
                                         p.states, p.work + thread * 2 * p.stateFloats);
  } else {
    const size_t items = p.split->mergeItemCount();
    hetc::kernels::attentionMergeItems(p.chunk, *p.split, p.operands, items * thread / threads,
                                       items * (thread + 1) / threads, p.states);
  }
}

// A dense KV cache of `layers` layers of one slot in `element`, filled with pseudo-random rows
// in [-1, 1) stored as the engine stores them.
struct BenchKvCache {
  BenchKvCache(hetc::kernels::KvElement element, size_t layers, size_t kvHeads, size_t context,
               size_t headDim) {
    hetc::kernels::KvCacheView &c = view;
    c.element = element;
    c.posStride = headDim;
    c.headStride = context * headDim;
    c.slotStride = kvHeads * c.headStride;
    c.layerStride = c.slotStride;
    const size_t elements = layers * c.layerStride;
    keys.resize(elements * c.elementBytes());
    values.resize(elements * c.elementBytes());
    c.keys = keys.data();
    c.values = values.data();
    if (element == hetc::kernels::KvElement::Int8) {
      c.scaleHeadStride = context;
      c.scaleSlotStride = kvHeads * context;
      c.scaleLayerStride = c.scaleSlotStride;
      keyScales.resize(layers * c.scaleLayerStride);
      valueScales.resize(layers * c.scaleLayerStride);
      c.keyScales = keyScales.data();
      c.valueScales = valueScales.data();
    }
    std::vector<float> row(headDim);
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (size_t layer = 0; layer < layers; ++layer)
      for (size_t head = 0; head < kvHeads; ++head)
        for (size_t pos = 0; pos < context; ++pos)
          for (bool isKey : {true, false}) {
            for (float &x : row) {
              state ^= state << 13;
              state ^= state >> 7;
              state ^= state << 17;
              x = static_cast<float>(state >> 40) * 0x1.0p-23f - 1.0f;
            }
            hetc::kernels::storeKvRow(c, isKey, layer, 0, head, pos, row.data(), headDim);
          }
  }
  hetc::kernels::KvCacheView view;
  std::vector<uint8_t> keys, values;
  std::vector<float> keyScales, valueScales;
};

void benchAttention(const Settings &settings, hetc::ThreadPool &pool, BandwidthReference &bandwidth,
                    uint64_t llc) {
  using hetc::kernels::KvElement;
  const size_t heads = 32, kvHeads = 8, headDim = 64;
  const std::vector<size_t> contexts =
      settings.quick ? std::vector<size_t>{4096, 32768} : std::vector<size_t>{512, 4096, 32768};
  const struct {
    KvElement element;
    const char *name;
    hetc::plan::DTypeDef dtype;
  } elements[] = {{KvElement::F32, "f32", hetc::plan::DTypeDef::F32},
                  {KvElement::Bf16, "bf16", hetc::plan::DTypeDef::BF16},
                  {KvElement::Int8, "int8", hetc::plan::DTypeDef::INT8}};
  std::printf("\nattention (decode, 1 row, %zu heads over %zu KV heads of %zu; int8 KV with its "
              "row scales): K and V rotated over layers totalling > 4x LLC\n",
              heads, kvHeads, headDim);
  std::printf("%-14s %4s %8s %7s %10s %8s %6s\n", "kernel", "kv", "context", "layers", "ms", "GB/s",
              "of-bw");
  std::vector<PendingLine> lines;
  const double opening = openGroup(bandwidth);
  for (size_t context : contexts)
    for (const auto &kv : elements) {
      // What the row reads: K and V rows of every KV head, and an int8 cache's scales.
      const uint64_t layerBytes =
          uint64_t{2} * kvHeads * context * hetc::kvRowBytes(kv.dtype, headDim);
      const size_t layers = coldCopies(layerBytes, llc);
      BenchKvCache cache(kv.element, layers, kvHeads, context, headDim);
      std::vector<float> q(heads * headDim), out(heads * headDim);
      fillRandom(pool, q.data(), q.size(), 1.0f, 3);
      const uint32_t slot = 0, position = static_cast<uint32_t>(context - 1);
      // The engine's split of one row: chunks of positions over the threads, then the merge.
      const size_t chunks = (context + hetc::kernels::kAttentionChunkPositions - 1) /
                            hetc::kernels::kAttentionChunkPositions;
      hetc::kernels::AttentionSplit split;
      split.reserve(1, kvHeads, hetc::kernels::kAttentionChunkPositions, kvHeads * chunks);
      split.cut(&position, 1, pool.threadCount() > 1);
      const size_t stateFloats = hetc::kernels::attentionStateFloats(heads / kvHeads, headDim);
      std::vector<float> states(kvHeads * chunks * stateFloats),
          work(2 * pool.threadCount() * stateFloats);
      AttentionPhase phase;
      phase.split = &split;
      phase.states = states.data();
      phase.work = work.data();
      phase.stateFloats = stateFloats;
      std::atomic<size_t> claimed{0};
      phase.claimed = &claimed;
      hetc::kernels::AttentionOperands &op = phase.operands;
      op.q = q.data();
      op.qStride = heads * headDim;
      op.out = out.data();
      op.outStride = heads * headDim;
      op.cache = cache.view;
      op.shape.heads = heads;
      op.shape.kvHeads = kvHeads;
      op.shape.headDim = headDim;
      op.shape.scale = 1.0f / std::sqrt(float(headDim));
      op.rowSlots = &slot;
      for (const hetc::kernels::VectorKernels *set : vectorKernelSets()) {
        phase.chunk = set->attentionChunk;
        const double seconds = bestSeconds(
            settings,
            [&](size_t i) {
              op.shape.layer = i;
              claimed.store(0);
              pool.run(2, &attentionPhase, &phase);
            },
            layers);
        const double gbs = layerBytes / seconds / 1e9;
        lines.push_back({format("%-14s %4s %8zu %7zu %10.4f %8.2f", set->name, kv.name, context,
                                layers, seconds * 1e3, gbs),
                         gbs, ""});
      }
    }
  closeGroup(lines, bandwidth, opening);
}

// ---------------------------------------------------------------------------------------------
// RMSNorm over hidden 2048 at decode and prefill row counts. Its data fits in cache, so it is
// reported in microseconds and in-cache GB/s, not against the memory bandwidth.

struct RmsNormPhase {
  hetc::kernels::RmsNormKernel kernel;
  const float *x;
  const float *gamma;
  size_t cols, rows;
  float *y;
};

void rmsNormPhase(void *context, size_t, unsigned thread, unsigned threads) {
  const RmsNormPhase &p = *static_cast<const RmsNormPhase *>(context);
  const size_t begin = p.rows * thread / threads, end = p.rows * (thread + 1) / threads;
  if (begin < end)
    p.kernel(p.x, p.cols, p.gamma, p.cols, 1e-5f, p.y, p.cols, begin, end);
}

void benchRmsNorm(const Settings &settings, hetc::ThreadPool &pool) {
  const size_t hidden = 2048;
  std::printf("\nrms_norm (hidden %zu, in cache):\n%-14s %6s %10s %10s\n", hidden, "kernel", "rows",
              "us", "GB/s");
  for (size_t rows : {size_t{1}, size_t{16}, size_t{512}}) {
    std::vector<float> x(rows * hidden), y(rows * hidden), gamma(hidden);
    fillRandom(pool, x.data(), x.size(), 1.0f, 4);
    fillRandom(pool, gamma.data(), gamma.size(), 1.0f, 5);
    for (const hetc::kernels::VectorKernels *set : vectorKernelSets()) {
      RmsNormPhase phase{set->rmsNorm, x.data(), gamma.data(), hidden, rows, y.data()};
      const double seconds =
          bestSeconds(settings, [&](size_t) { pool.run(1, &rmsNormPhase, &phase); });
      const double bytes = (2.0 * rows + 1) * hidden * sizeof(float);
      std::printf("%-14s %6zu %10.2f %10.2f\n", set->name, rows, seconds * 1e6,
                  bytes / seconds / 1e9);
    }
  }
}

int run(const Settings &settings) {
  auto created = hetc::ThreadPool::create(settings.threads, true, true);
  if (!created) {
    std::fprintf(stderr, "hetc-kernel-bench: error: %s\n", created.message().c_str());
    return 1;
  }
  hetc::ThreadPool &pool = *created.value();
#ifdef HETC_WITH_DNNL
  // OpenMP's threads inherit the affinity of the thread that starts them: start them now, before
  // the pool's first run binds this thread to one core, or oneDNN's team would share that core.
  omp_set_num_threads(static_cast<int>(pool.threadCount()));
#pragma omp parallel
  { asm volatile(""); }
#endif

  // Probe passes as long as a decode kernel's timed run: over copies of about 4x the LLC.
  BandwidthReference bandwidth(
      pool, 4 * (hetc::lastLevelCacheBytes() ? hetc::lastLevelCacheBytes() : uint64_t{32} << 20));
  bandwidth.probe();
  const hetc::ReadBandwidth &bw = bandwidth.last();
  const uint64_t llc = bw.lastLevelCacheBytes ? bw.lastLevelCacheBytes : uint64_t{32} << 20;
  std::printf("hetc-kernel-bench%s: %u threads (%u pinned), host: %s\n",
              settings.quick ? " --quick" : "", pool.threadCount(), pool.pinnedThreads(),
              hetc::describeCpuFeatures(hetc::hostCpuFeatures()).c_str());
  std::printf("read bandwidth %.2f GB/s at start (best of %u passes of %.0f MiB through a "
              "%.0f MiB ring, median %.2f; %s loads; last-level cache %.0f MiB); probed again "
              "before and after each group\n",
              bw.bestGbs, bw.passes, bw.passBytes / 1048576.0, bw.bufferBytes / 1048576.0,
              bw.medianGbs, bw.loads, llc / 1048576.0);
#ifdef HETC_WITH_DNNL
  const dnnl::version_t *version = dnnl::version();
  std::printf("oneDNN %d.%d.%d matmul reference, same shape and weight dtype (bf16 x bf16 -> f32 "
              "%s; f32 otherwise), %d OpenMP threads\n",
              version->major, version->minor, version->patch,
              hostHas(hetc::plan::CpuFeatureBits::AVX512_BF16) ? "on this host"
                                                               : "needs avx512-bf16",
              omp_get_max_threads());
#else
  std::printf("oneDNN not found at build time: no matmul reference\n");
#endif
  std::printf("times: fastest of >= %u runs after a warm-up, >= %.2f s per measurement; a "
              "kernel and oneDNN take %u turns each on a shape\n",
              settings.minRuns, settings.budgetSeconds, settings.rounds);

  if (settings.only.empty() || settings.only == "linear")
    benchLinear(settings, pool, bandwidth, llc);
  if (settings.only.empty() || settings.only == "attention")
    benchAttention(settings, pool, bandwidth, llc);
  if (settings.only.empty() || settings.only == "rmsnorm")
    benchRmsNorm(settings, pool);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"hetc-kernel-bench: runtime kernels against the measured read bandwidth and "
               "oneDNN's matmul, in one run"};
  app.name("hetc-kernel-bench");
  Settings settings;
  app.add_flag("--quick", settings.quick, "Shorter runs and fewer shapes (a few seconds a group)");
  app.add_option("--threads", settings.threads, "Threads (0 = every core)")->capture_default_str();
  app.add_option("--only", settings.only, "One group: linear, attention or rmsnorm")
      ->check(CLI::IsMember({"linear", "attention", "rmsnorm"}));
  CLI11_PARSE(app, argc, argv);
  if (settings.quick) {
    settings.budgetSeconds = 0.1;
    settings.minRuns = 2;
    settings.maxRunSeconds = 0.1;
    settings.rounds = 2;
  }
  return run(settings);
}
