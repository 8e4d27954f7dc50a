// Decode throughput against the memory roofline, as `hetc bench` reports it.
//
// A decode step reads every weight once and each sequence's K and V up to its position, so its
// floor is (bytes it must read) / (read bandwidth). The benchmark fills `context` positions of
// `batch` sequences, decodes `gen` steps of one token per sequence, and compares the bytes per
// step over the time per step with the read bandwidth measured by the same threads in the same
// run. Only ratios measured in one run are meaningful on a shared machine.
#pragma once

#include "hetc/runtime/Engine.h"
#include "hetc/runtime/MemoryBandwidth.h"
#include "hetc/runtime/Status.h"

#include <cstdint>
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
  uint64_t kvPerPosition = 0; // K and V bytes of one position of one sequence, all layers
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
struct OpTime {
  size_t resolvedOp = 0;
  std::string name; // the plan op's name ("... (kv append)" for the append half of attention)
  std::string kind;
  double runMs = 0.0;
  double waitMs = 0.0;
  double maxThreadRunMs = 0.0;
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
};

// Refuses options the plan cannot run, naming the option and the plan's limit.
Status checkDecodeBench(const Engine &engine, const DecodeBenchOptions &options);

// Fills, measures the read bandwidth with the engine's threads, runs one untimed warm-up step,
// then the timed steps (greedy: each step feeds the argmax of the previous one), measures the
// bandwidth again, and runs the paired steps. The engine must
// be fresh (nothing cached in slots 0..batch-1 matters; they are overwritten).
Result<DecodeBenchReport> runDecodeBench(Engine &engine, const DecodeBenchOptions &options);

} // namespace hetc
