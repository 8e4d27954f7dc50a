#include "tools/report/DecodeBenchmark.h"

#include "runtime/format/Plan.h"
#include "runtime/serving/ElasticBatch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

namespace hetc {
namespace {

using Clock = std::chrono::steady_clock;

double secondsBetween(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// splitmix64: prompts and first tokens, the same on every platform.
uint64_t nextRandom(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int32_t randomToken(uint64_t &state, uint32_t vocab) {
  return static_cast<int32_t>(nextRandom(state) % vocab);
}

DecodeProfile summariseProfile(const Engine &engine, double stepSeconds, double tokenMs) {
  DecodeProfile out;
  const PhaseProfile &profile = *engine.profile();
  out.steps = profile.runs();
  if (out.steps == 0)
    return out;
  const double steps = static_cast<double>(out.steps);
  const unsigned threads = engine.threads();
  const double perStepMs = 1e-6 / steps; // ns summed over the steps -> ms per step
  const auto &ops = engine.resolvedOps();
  const auto &phases = engine.phases();
  const auto *planOps = engine.plan().def().ops();
  for (size_t i = 0; i < phases.size() && i < profile.phases(); ++i) {
    OpTime op;
    op.phase = i;
    for (uint32_t j = phases[i].firstOp; j < phases[i].firstOp + phases[i].opCount; ++j) {
      const plan::OpDef *planOp = planOps->Get(ops[j].planOp);
      if (!op.name.empty())
        op.name += " + ";
      op.name += planOp->name() ? planOp->name()->str() : "";
      if (ops[j].kind == OpKind::KvAppend)
        op.name += " (kv append)";
    }
    // A phase's ops are of one kind (only linears share one).
    const OpKind kind = ops[phases[i].firstOp].kind;
    op.kind = opKindName(kind);
    op.attention =
        kind == OpKind::KvAppend || kind == OpKind::Attention || kind == OpKind::AttentionMerge;
    uint64_t run = 0, wait = 0, maxRun = 0;
    for (unsigned t = 0; t < threads; ++t) {
      run += profile.at(i, t).runNs;
      wait += profile.at(i, t).waitNs;
      maxRun = std::max(maxRun, profile.at(i, t).runNs);
    }
    op.runMs = static_cast<double>(run) / threads * perStepMs;
    op.waitMs = static_cast<double>(wait) / threads * perStepMs;
    op.maxThreadRunMs = static_cast<double>(maxRun) * perStepMs;
    out.runMs += op.runMs;
    out.waitMs += op.waitMs;

    auto kindTime = std::find_if(out.kinds.begin(), out.kinds.end(),
                                 [&](const KindTime &k) { return k.kind == op.kind; });
    if (kindTime == out.kinds.end())
      kindTime = out.kinds.insert(out.kinds.end(), KindTime{op.kind, 0, 0.0, 0.0});
    ++kindTime->ops;
    kindTime->runMs += op.runMs;
    kindTime->waitMs += op.waitMs;
    out.ops.push_back(std::move(op));
  }
  out.stepMs = stepSeconds * 1e3 / steps;
  out.dispatchMs = std::max(0.0, out.stepMs - out.runMs - out.waitMs);
  out.overheadFraction = tokenMs > 0 ? (out.waitMs + out.dispatchMs) / tokenMs : 0.0;
  return out;
}

DecodeTimeSplit splitDecodeTime(const DecodeProfile &profile, const DecodeStepBytes &bytes,
                                double tokenMs, double measuredGbs) {
  DecodeTimeSplit split;
  for (const OpTime &op : profile.ops)
    if (op.attention)
      split.attentionMs += op.runMs + op.waitMs;
  split.fixedMs = std::max(0.0, tokenMs - split.attentionMs);
  split.attentionShare = tokenMs > 0 ? split.attentionMs / tokenMs : 0.0;
  if (split.attentionMs > 0)
    split.attentionGbs = bytes.kv() / (split.attentionMs / 1e3) / 1e9;
  if (split.fixedMs > 0)
    split.fixedGbs = static_cast<double>(bytes.weights) / (split.fixedMs / 1e3) / 1e9;
  if (measuredGbs > 0) {
    split.attentionRooflineFraction = split.attentionGbs / measuredGbs;
    split.fixedRooflineFraction = split.fixedGbs / measuredGbs;
  }
  return split;
}

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
  return text;
}

} // namespace

const char *kvFillName(KvFill fill) {
  switch (fill) {
  case KvFill::Auto:
    return "auto";
  case KvFill::Prefill:
    return "prefill";
  case KvFill::Synthetic:
    return "synthetic";
  }
  return "unknown";
}

DecodeStepBytes decodeStepBytes(const Plan &plan, uint32_t batch, uint64_t context, uint32_t gen) {
  const plan::PlanDef &def = plan.def();
  DecodeStepBytes bytes;
  bytes.batch = batch;
  // Per segment: read in full, or only some rows (the embedding's gather).
  std::map<uint32_t, bool> fullSegments;
  std::map<uint32_t, uint64_t> gatheredRows;
  for (const plan::OpDef *op : *def.ops()) {
    if (!op->weights())
      continue;
    for (uint32_t tensorIndex : *op->weights()) {
      const plan::TensorDef *tensor = def.tensors()->Get(tensorIndex);
      const uint32_t segment = tensor->segment();
      if (op->kind() == plan::OpKindDef::Embedding && tensor->shape() &&
          tensor->shape()->size() >= 1 && tensor->shape()->Get(0) > 0) {
        const uint64_t rows = tensor->shape()->Get(0);
        const uint64_t rowBytes = def.segments()->Get(segment)->size() / rows;
        gatheredRows[segment] =
            std::max(gatheredRows[segment], std::min<uint64_t>(batch, rows) * rowBytes);
      } else {
        fullSegments[segment] = true;
      }
    }
  }
  for (const auto &[segment, full] : fullSegments)
    bytes.weights += def.segments()->Get(segment)->size();
  for (const auto &[segment, rowBytes] : gatheredRows)
    if (!fullSegments.count(segment)) {
      bytes.weights += rowBytes;
      bytes.embeddingRows += rowBytes;
    }

  if (const plan::KvCacheDef *kv = def.kv_cache())
    bytes.kvPerPosition =
        uint64_t{2} * kv->layers() * kv->kv_heads() * kvRowBytes(kv->dtype(), kv->head_dim());
  bytes.averageAttended = static_cast<double>(context) + (static_cast<double>(gen) + 1.0) / 2.0;
  return bytes;
}

Status checkDecodeBench(const Engine &engine, const DecodeBenchOptions &options) {
  const std::string maxSeq = std::to_string(engine.maxSeq());
  if (options.batch == 0)
    return Status::error("--batch must be at least 1");
  if (options.gen == 0)
    return Status::error("--gen must be at least 1");
  if (options.batch > engine.maxBatch())
    return Status::error("--batch " + std::to_string(options.batch) +
                         " exceeds the plan's --max-batch " + std::to_string(engine.maxBatch()));
  if (options.batch > engine.maxStepTokens())
    return Status::error("--batch " + std::to_string(options.batch) +
                         " exceeds the plan's --max-step-tokens " +
                         std::to_string(engine.maxStepTokens()) +
                         " (a decode step carries one token of each sequence)");
  if (options.context > engine.maxSeq() || options.gen > engine.maxSeq() - options.context)
    return Status::error("--context " + std::to_string(options.context) + " + --gen " +
                         std::to_string(options.gen) + " need " +
                         std::to_string(options.context + options.gen) +
                         " positions but the plan's --max-seq is " + maxSeq);
  return Status();
}

Result<DecodeBenchReport> runDecodeBench(Engine &engine, const DecodeBenchOptions &options) {
  if (Status s = checkDecodeBench(engine, options); !s)
    return s;
  DecodeBenchReport report;
  report.context = options.context;
  report.batch = options.batch;
  report.gen = options.gen;
  report.fill = options.fill;
  if (report.fill == KvFill::Auto)
    report.fill = options.context <= kAutoPrefillMaxContext ? KvFill::Prefill : KvFill::Synthetic;
  const uint32_t batch = options.batch;
  const uint32_t vocab = engine.vocab();
  uint64_t random = options.seed;

  // Fill: afterwards each slot holds `context` positions and `next` its first token.
  std::vector<int32_t> next(batch);
  for (int32_t &token : next)
    token = randomToken(random, vocab);
  const Clock::time_point fillStart = Clock::now();
  if (options.context > 0 && report.fill == KvFill::Prefill) {
    std::vector<std::vector<int32_t>> prompts(batch, std::vector<int32_t>(options.context));
    for (auto &prompt : prompts)
      for (int32_t &token : prompt)
        token = randomToken(random, vocab);
    Result<GenerateResult> prefilled = generateGreedy(engine, prompts, 1);
    if (!prefilled)
      return prefilled.status();
    for (uint32_t s = 0; s < batch; ++s)
      next[s] = prefilled->tokens[s][0];
  } else {
    // Synthetic, or nothing to fill: slots start at `context` whatever they held before.
    for (uint32_t s = 0; s < batch; ++s)
      if (Status st = engine.fillSyntheticKv(s, options.context, options.seed + s); !st)
        return st;
  }
  report.fillSeconds = secondsBetween(fillStart, Clock::now());

  // Probe passes as long as a decode step's reads (at least one buffer), unless asked otherwise.
  report.bytes = decodeStepBytes(engine.plan(), batch, options.context, options.gen);
  const ReadBandwidthOptions &bw = options.bandwidth;
  const uint64_t passBytes = bw.passBytes
                                 ? bw.passBytes
                                 : std::max(bw.bytes ? bw.bytes : defaultProbeBufferBytes(),
                                            static_cast<uint64_t>(report.bytes.total()));
  Result<std::unique_ptr<ReadBandwidthProbe>> createdProbe =
      ReadBandwidthProbe::create(engine.threadPool(), bw.bytes, passBytes);
  if (!createdProbe)
    return createdProbe.status();
  ReadBandwidthProbe &probe = *createdProbe.value();
  report.bandwidthBefore = probe.measure(bw.passes, bw.minSeconds);

  std::vector<StepSequence> sequences(batch);
  auto decodeStep = [&](uint64_t position, double *stepSeconds) -> Status {
    for (uint32_t s = 0; s < batch; ++s)
      sequences[s] = {s, position, &next[s], 1, true};
    // As greedy generation runs: the engine picks each next id, no logits row is written.
    const Clock::time_point start = Clock::now();
    if (Status st = engine.step(sequences.data(), batch, StepOutput::Argmax); !st)
      return st;
    if (stepSeconds)
      *stepSeconds += secondsBetween(start, Clock::now());
    for (uint32_t s = 0; s < batch; ++s)
      next[s] = engine.argmax(s);
    return Status();
  };

  // Warm-up at the first position (faults in the weight pages, wakes the threads); the timed
  // steps then start over at that position, which the cache allows.
  if (Status st = decodeStep(options.context, nullptr); !st)
    return st;
  engine.resetProfile();
  double stepSeconds = 0.0;
  const Clock::time_point decodeStart = Clock::now();
  for (uint32_t k = 0; k < options.gen; ++k)
    if (Status st = decodeStep(options.context + k, &stepSeconds); !st)
      return st;
  report.decodeSeconds = secondsBetween(decodeStart, Clock::now());
  report.msPerToken = report.decodeSeconds * 1e3 / options.gen;
  report.tokensPerS = static_cast<double>(batch) * options.gen / report.decodeSeconds;
  // Summarised now; nothing after this is recorded (the probe never is, the paired steps not).
  report.profiled = engine.profile() != nullptr;
  if (report.profiled)
    report.profile = summariseProfile(engine, stepSeconds, report.msPerToken);

  report.bandwidthAfter = probe.measure(bw.passes, bw.minSeconds);
  report.measuredGbs = std::max(report.bandwidthBefore.bestGbs, report.bandwidthAfter.bestGbs);
  report.achievedGbs = report.bytes.total() / (report.msPerToken / 1e3) / 1e9;
  report.rooflineFraction = report.measuredGbs > 0 ? report.achievedGbs / report.measuredGbs : 0.0;
  if (report.profiled)
    report.split =
        splitDecodeTime(report.profile, report.bytes, report.msPerToken, report.measuredGbs);

  if (options.pairedSteps) {
    // The same steps again, each between two single probe passes: step k's bandwidth over the
    // better of its two neighbours. Their median follows the kernels, not the drift of the
    // bandwidth a shared machine leaves to this process over the seconds of the run.
    // The profile keeps the timed steps only.
    PhaseProfile *const profile = engine.threadPool().profile();
    engine.threadPool().setProfile(nullptr);
    std::vector<double> ratios;
    double previous = probe.pass();
    for (uint32_t k = 0; k < options.gen; ++k) {
      double seconds = 0.0;
      if (Status st = decodeStep(options.context + k, &seconds); !st) {
        engine.threadPool().setProfile(profile);
        return st;
      }
      const double following = probe.pass();
      ratios.push_back(report.bytes.total() / seconds / 1e9 / std::max(previous, following));
      previous = following;
    }
    engine.threadPool().setProfile(profile);
    std::sort(ratios.begin(), ratios.end());
    report.pairedRooflineFraction = ratios[ratios.size() / 2];
    report.pairedRooflineMin = ratios.front();
    report.pairedRooflineMax = ratios.back();
  }
  report.kernels = engine.kernelSummary();
  report.threads = engine.threads();
  report.pinnedThreads = engine.pinnedThreads();
  return report;
}

uint64_t KvResidency::newBytes(uint32_t batch, uint64_t positions) const {
  uint64_t bytes = 0;
  for (uint32_t slot = 0; slot < batch && slot < touched_.size(); ++slot)
    if (positions > touched_[slot])
      bytes += (positions - touched_[slot]) * kvBytesPerPosition_;
  return bytes;
}

void KvResidency::touch(uint32_t batch, uint64_t positions) {
  for (uint32_t slot = 0; slot < batch && slot < touched_.size(); ++slot)
    touched_[slot] = std::max(touched_[slot], positions);
}

std::optional<std::string> memoryShortfall(uint64_t newKvBytes, uint64_t probeBytes,
                                           uint64_t availableBytes, uint64_t earlierBytes) {
  const uint64_t usable = availableBytes / 10 * 9;
  if (earlierBytes <= usable && newKvBytes + probeBytes <= usable - earlierBytes)
    return std::nullopt;
  return "the KV cache needs " + gib(newKvBytes) + " more memory (and the bandwidth probe " +
         gib(probeBytes) + ")" +
         (earlierBytes ? " after " + gib(earlierBytes) + " for earlier points" : "") + " but " +
         gib(availableBytes) + " is available, of which 10% is kept free";
}

Result<DecodeSweep> planDecodeSweep(const Engine &engine, std::vector<uint64_t> contexts,
                                    std::vector<uint32_t> batches, uint32_t gen,
                                    uint64_t probeBytes, std::optional<uint64_t> availableBytes) {
  if (contexts.empty())
    return Status::error("the sweep has no context");
  if (batches.empty())
    return Status::error("the sweep has no batch size");
  if (gen == 0)
    return Status::error("--gen must be at least 1");
  std::sort(contexts.begin(), contexts.end());
  contexts.erase(std::unique(contexts.begin(), contexts.end()), contexts.end());
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  if (batches.front() == 0)
    return Status::error("--batch must be at least 1");

  const uint64_t kvPerPosition = decodeStepBytes(engine.plan(), 1, 0, 1).kvPerPosition;
  KvResidency residency(kvPerPosition, engine.maxBatch());
  uint64_t planned = 0; // KV bytes the points kept so far newly touch
  DecodeSweep sweep;
  for (uint32_t batch : batches)
    for (uint64_t context : contexts) {
      const DecodeSweepPoint point{context, batch};
      DecodeBenchOptions options;
      options.context = context;
      options.batch = batch;
      options.gen = gen;
      if (Status s = checkDecodeBench(engine, options); !s) {
        sweep.skipped.push_back({point, s.message()});
        continue;
      }
      const uint64_t positions = context + gen;
      if (availableBytes) {
        const uint64_t needed = residency.newBytes(batch, positions);
        if (std::optional<std::string> why =
                memoryShortfall(needed, probeBytes, *availableBytes, planned)) {
          sweep.skipped.push_back({point, *why});
          continue;
        }
        planned += needed;
      }
      residency.touch(batch, positions);
      sweep.points.push_back(point);
    }
  if (sweep.points.empty()) {
    std::string reasons;
    for (const SkippedSweepPoint &skipped : sweep.skipped)
      if (reasons.find(skipped.reason) == std::string::npos)
        reasons += (reasons.empty() ? "" : "; ") + skipped.reason;
    return Status::error("no point of the sweep can run: " + reasons);
  }
  return sweep;
}

} // namespace hetc
