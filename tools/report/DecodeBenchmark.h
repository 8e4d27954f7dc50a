// Decode throughput against the memory roofline, as `hetc bench` reports it.
//
// A decode step reads every weight once and each sequence's K and V up to its position, so its
// floor is (bytes it must read) / (read bandwidth). The benchmark fills `context` positions of
// `batch` sequences, decodes `gen` steps of one token per sequence, and compares the bytes per
// step over the time per step with the read bandwidth measured by the same threads in the same
// run. Only ratios measured in one run are meaningful on a shared machine.
#pragma once

#include "runtime/executor/Engine.h"
#include "runtime/format/Status.h"
#include "tools/report/MemoryBandwidth.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hetc {

class Plan;

// How the context positions get into the KV cache before decoding.
enum class KvFill : uint8_t {
  Auto,      // Prefill up to kAutoPrefillMaxContext positions, Synthetic beyond
  Prefill,   // real prefill steps over pseudo-random prompts
  Synthetic, // pseudo-random K and V written straight into the cache; no prefill computed
};
constexpr uint64_t kAutoPrefillMaxContext = 1024;

const char *kvFillName(KvFill fill); // "auto", "prefill", "synthetic"

struct DecodeBenchOptions {
  uint64_t context = 0; // positions of each sequence in the KV cache before the first step
  uint32_t batch = 1;   // sequences decoded together, in slots 0..batch-1
  uint32_t gen = 16;    // timed decode steps, one token per sequence each
  KvFill fill = KvFill::Auto;
  // The probe's buffer and passes; passBytes 0: as many bytes as a decode step reads (at least
  // the buffer).
  ReadBandwidthOptions bandwidth;
  // After the timed steps, run them again each between two single probe passes (the paired
  // roofline fraction).
  bool pairedSteps = true;
  uint64_t seed = 1; // prompts, first tokens and synthetic K/V
};

// Bytes one decode step of `batch` sequences reads from memory at the least.
struct DecodeStepBytes {
  uint64_t weights = 0;       // each weight byte the step reads, counted once (see below)
  uint64_t embeddingRows = 0; // part of `weights`: the embedding rows gathered
  uint64_t kvPerPosition = 0; // K and V bytes (int8: with the scales) of one position of one
                              // sequence, all layers
  double averageAttended = 0; // positions one sequence's attention reads, averaged over the steps
  uint32_t batch = 0;

  double kv() const { return static_cast<double>(kvPerPosition) * averageAttended * batch; }
  double total() const { return static_cast<double>(weights) + kv(); }
};

// Weights: the whole segment of every tensor an op reads in full (linear and lm_head weights,
// norm gammas, rope frequencies) plus `batch` rows of an embedding table, each segment counted
// once however many ops read it (a tied lm_head and embedding share one). KV: the positions a
// step at position p attends are 0..p, so over steps at context .. context+gen-1 a sequence
// reads context + (gen+1)/2 positions on average. Activations are not counted (they stay in
// cache), nor are the K/V writes of the new positions.
DecodeStepBytes decodeStepBytes(const Plan &plan, uint32_t batch, uint64_t context, uint32_t gen);

// One op's share of a decode step, from the engine's profile: milliseconds per step, averaged
// over the threads (maxThreadRunMs: the slowest thread's run time).
// One phase of the step (Engine::phases): one op, or ops that share a phase (the q, k and v
// projections), their names joined by " + ".
struct OpTime {
  size_t phase = 0;
  std::string name; // the plan ops' names ("... (kv append)" for the append half of attention)
  std::string kind;
  double runMs = 0.0;
  double waitMs = 0.0;
  double maxThreadRunMs = 0.0;
  bool attention = false; // KV append, attention chunks or their merge: grows with the context
};

struct KindTime {
  std::string kind;
  size_t ops = 0;
  double runMs = 0.0;
  double waitMs = 0.0;
};

// Where a decode step's time goes, per step and averaged over the threads. stepMs is the wall
// time of Engine::step; runMs + waitMs + dispatchMs = stepMs, dispatchMs being what is neither an
// op nor a barrier (waking the workers, validating and packing the step).
struct DecodeProfile {
  uint64_t steps = 0;
  double stepMs = 0.0;
  double runMs = 0.0;
  double waitMs = 0.0;
  double dispatchMs = 0.0;
  // (waitMs + dispatchMs) / the token time: the runtime's per-token overhead.
  double overheadFraction = 0.0;
  std::vector<KindTime> kinds; // in order of first appearance
  std::vector<OpTime> ops;     // in execution order
};

// A decode step's time split into what grows with the context and what does not, from the
// profile. Each thread runs an op's phase and then waits at the barrier after it, so a phase's run
// + wait, averaged over the threads, is its wall time.
struct DecodeTimeSplit {
  // Run + wait of the attention ops (KV append, attention chunks, merge) per step.
  double attentionMs = 0.0;
  // The rest of the token time: every weight read once (linears, norms, lm_head, embedding), the
  // dispatch, and reading the next ids out of the engine.
  double fixedMs = 0.0;
  double attentionShare = 0.0;            // attentionMs / msPerToken
  double attentionGbs = 0.0;              // bytes.kv() / attentionMs
  double attentionRooflineFraction = 0.0; // attentionGbs / measuredGbs
  double fixedGbs = 0.0;                  // bytes.weights / fixedMs
  double fixedRooflineFraction = 0.0;     // fixedGbs / measuredGbs
};

struct DecodeBenchReport {
  uint64_t context = 0;
  uint32_t batch = 0;
  uint32_t gen = 0;
  KvFill fill = KvFill::Prefill; // as resolved: never Auto
  double fillSeconds = 0.0;

  double decodeSeconds = 0.0; // the gen timed steps, token selection included
  double tokensPerS = 0.0;    // batch * gen / decodeSeconds
  double msPerToken = 0.0;    // per decode step (one token for each of the batch sequences)
  DecodeStepBytes bytes;
  // The probe right before the warm-up step and right after the timed steps. On a shared
  // machine the bandwidth left to this process drifts; the larger of the two is the reference.
  ReadBandwidth bandwidthBefore;
  ReadBandwidth bandwidthAfter;
  double measuredGbs = 0.0;      // max of the two probes' best passes
  double achievedGbs = 0.0;      // bytes.total() per step over the time per step
  double rooflineFraction = 0.0; // achievedGbs / measuredGbs
  // With DecodeBenchOptions::pairedSteps: over the gen steps run again, each step's bandwidth
  // (bytes.total() over its time) divided by the better of the probe passes right before and
  // right after it; the median, and the extremes. 0 when not run.
  double pairedRooflineFraction = 0.0;
  double pairedRooflineMin = 0.0;
  double pairedRooflineMax = 0.0;

  std::vector<KernelUse> kernels;
  unsigned threads = 0;
  unsigned pinnedThreads = 0;
  bool profiled = false; // the engine was created with EngineOptions::profile
  DecodeProfile profile;
  DecodeTimeSplit split; // with the profile only
};

// Refuses options the plan cannot run, naming the option and the plan's limit.
Status checkDecodeBench(const Engine &engine, const DecodeBenchOptions &options);

// Fills, measures the read bandwidth with the engine's threads, runs one untimed warm-up step,
// then the timed steps (greedy: each step feeds the argmax of the previous one), measures the
// bandwidth again, and runs the paired steps. Whatever slots 0..batch-1 held before is
// overwritten, so one engine serves any number of runs.
Result<DecodeBenchReport> runDecodeBench(Engine &engine, const DecodeBenchOptions &options);

// A sweep over contexts x batches, in that order: for each batch (ascending), each context
// (ascending). A point the engine cannot run is skipped with the reason, never refused alone.
struct DecodeSweepPoint {
  uint64_t context = 0;
  uint32_t batch = 0;
};
struct SkippedSweepPoint {
  DecodeSweepPoint point;
  std::string reason;
};
struct DecodeSweep {
  std::vector<DecodeSweepPoint> points;
  std::vector<SkippedSweepPoint> skipped;
};

// The KV positions a sweep has written stay resident (the arena is never given back): a point
// only needs memory for the positions of its slots beyond those earlier points touched.
class KvResidency {
public:
  KvResidency(uint64_t kvBytesPerPosition, uint32_t slots)
      : kvBytesPerPosition_(kvBytesPerPosition), touched_(slots, 0) {}
  // Bytes slots 0..batch-1 would newly touch holding `positions` positions each.
  uint64_t newBytes(uint32_t batch, uint64_t positions) const;
  void touch(uint32_t batch, uint64_t positions);

private:
  uint64_t kvBytesPerPosition_;
  std::vector<uint64_t> touched_;
};

// Why a point needing `newKvBytes` of KV cache (plus the bandwidth probe's buffer) cannot run
// with `availableBytes` free once earlier points not yet run took `earlierBytes`, or nothing when
// it fits; 10% of the available memory is kept free.
std::optional<std::string> memoryShortfall(uint64_t newKvBytes, uint64_t probeBytes,
                                           uint64_t availableBytes, uint64_t earlierBytes = 0);

// Sorts and deduplicates the contexts and batches, and keeps the points the engine can run with
// `gen` steps. A point past the plan's bounds is skipped with checkDecodeBench's reason; with
// `availableBytes`, so is a point whose new KV positions and probe buffer (counting what earlier
// points took) would not fit in it. Fails on an empty list, a batch of 0, --gen 0, or when no
// point is left (naming why).
Result<DecodeSweep> planDecodeSweep(const Engine &engine, std::vector<uint64_t> contexts,
                                    std::vector<uint32_t> batches, uint32_t gen,
                                    uint64_t probeBytes, std::optional<uint64_t> availableBytes);

} // namespace hetc
