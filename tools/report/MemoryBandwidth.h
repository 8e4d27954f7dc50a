// The memory read bandwidth of this machine, measured with the threads that run the kernels.
//
// Decode is bandwidth-bound, so its figure of merit is the bytes it must read divided by the time
// it took, as a fraction of what the memory system delivers. That reference is measured here, in
// the same process and run as what it is compared with, never taken from a data sheet.
#pragma once

#include "runtime/format/Status.h"

#include <cstdint>
#include <memory>

namespace hetc {

class ThreadPool;

// Size in bytes of the largest cache one core sees (cpu0's highest-level data or unified cache
// in sysfs; sysconf as a fallback); 0 when neither says. sysfs is preferred: under a hypervisor
// sysconf may report the whole host's L3 rather than the slice this core can use.
uint64_t lastLevelCacheBytes();

// The probe's default buffer: 4 times the last-level cache, at least 256 MiB.
uint64_t defaultProbeBufferBytes();

struct ReadBandwidthOptions {
  // Buffer size; 0 chooses defaultProbeBufferBytes().
  uint64_t bytes = 0;
  // Bytes one timed pass reads (0: the buffer's size). Passes stream through the buffer as a
  // ring, each going on where the last one stopped, so every byte read was last read a whole
  // buffer ago and comes from memory, whatever the pass size. A benchmark sizes its passes like
  // the work it compares with them (a decode step, a kernel's run), so that on a shared machine
  // neither meets quiet moments the other is too long to fit in.
  uint64_t passBytes = 0;
  // Timed passes, the best one reported: at least `passes`, and more until they took
  // `minSeconds` together (at most kMaxPasses).
  unsigned passes = 5;
  double minSeconds = 0.25;
};
constexpr unsigned kMaxPasses = 200;

struct ReadBandwidth {
  double bestGbs = 0.0;             // 1e9 bytes per second, fastest pass
  double medianGbs = 0.0;           // median pass, to show the spread
  uint64_t bufferBytes = 0;         // the buffer
  uint64_t passBytes = 0;           // read by one pass
  unsigned passes = 0;              // passes timed
  unsigned threads = 0;             // pool threads that read, each a contiguous share of a pass
  uint64_t lastLevelCacheBytes = 0; // as detected; 0 when unknown
  const char *loads = "";           // "avx512" (64-byte loads) or "64-bit"
};

// A probe kept between passes, for benchmarks that interleave single passes with what they
// measure. create() maps and writes the ring buffer (every page backed by its own memory, not the
// shared zero page); pass() times one pass with every thread of the pool, never recorded in a
// profile set on it. The pool must outlive the probe.
class ReadBandwidthProbe {
public:
  // `bufferBytes` 0: defaultProbeBufferBytes(); `passBytes` 0: the buffer's size.
  static Result<std::unique_ptr<ReadBandwidthProbe>>
  create(ThreadPool &pool, uint64_t bufferBytes = 0, uint64_t passBytes = 0);
  ~ReadBandwidthProbe();
  ReadBandwidthProbe(const ReadBandwidthProbe &) = delete;
  ReadBandwidthProbe &operator=(const ReadBandwidthProbe &) = delete;

  double pass(); // GB/s (1e9 bytes per second) of one pass, which goes on where the last stopped
  // The best and median of at least `passes` passes lasting `minSeconds` together.
  ReadBandwidth measure(unsigned passes, double minSeconds);
  uint64_t bufferBytes() const;
  uint64_t passBytes() const;
  const char *loads() const;

private:
  struct State;
  explicit ReadBandwidthProbe(ThreadPool &pool);
  void runUnprofiled();
  ThreadPool &pool_;
  std::unique_ptr<State> state_;
};

// Writes the buffer once (so every page is backed by its own memory, not the shared zero page),
// then times passes through it with every thread of `pool`, each thread streaming its own
// contiguous share of a pass with the widest loads the host has. The pool runs one phase per pass
// (never recorded in a profile set on it); the buffer is freed before returning. Fails only when
// the buffer cannot be mapped.
Result<ReadBandwidth> measureReadBandwidth(ThreadPool &pool,
                                           const ReadBandwidthOptions &options = {});

} // namespace hetc
