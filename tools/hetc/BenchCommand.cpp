#include "BenchCommand.h"
#include "CommandSupport.h"
#include "../PrintfString.h"
#include "SweepPlot.h"
#include "TorchReference.h"

#include "runtime/executor/Engine.h"
#include "runtime/executor/PolicyTable.h"
#include "runtime/format/Plan.h"
#include "runtime/platform/Devices.h"
#include "runtime/platform/HostMemory.h"
#include "tools/report/DecodeBenchmark.h"
#include "tools/report/LatencyModel.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace hetc::tool {
namespace {

using Json = nlohmann::ordered_json;
using hetc::tools::format;

constexpr const char *kSyntheticNote = "synthetic KV fill (no prefill computed)";
constexpr size_t kTopOps = 12;
constexpr const char *kLatencyFormula = "t = e + (p+1)/2 * a";
constexpr const char *kPConvention =
    "p = 2 * average_context - 1 = 2 * context + gen: the length of a sequence decoded from "
    "empty whose tokens attend as many positions on average as this point's steps (a step at "
    "0-based position q attends q + 1 positions; token k of a p-token sequence attends k, "
    "(p+1)/2 on average)";
constexpr const char *kResidualConvention = "(measured - fitted) / measured";

std::string describeFill(const DecodeBenchReport &r) {
  if (r.context == 0)
    return "none (context 0)";
  if (r.fill == KvFill::Synthetic)
    return kSyntheticNote;
  return "prefill computed";
}

// "F32", "BF16": the dtypes of the weights the plan's ops read.
std::vector<std::string> weightDtypes(const Plan &plan) {
  std::set<std::string> names;
  const plan::PlanDef &def = plan.def();
  for (const plan::OpDef *op : *def.ops())
    if (op->weights())
      for (uint32_t tensor : *op->weights())
        names.insert(plan::EnumNameDTypeDef(def.tensors()->Get(tensor)->dtype()));
  return {names.begin(), names.end()};
}

std::string kvDtype(const Plan &plan) {
  const plan::KvCacheDef *kv = plan.def().kv_cache();
  return kv ? plan::EnumNameDTypeDef(kv->dtype()) : "none";
}

std::string joined(const std::vector<std::string> &items) {
  std::string text;
  for (const std::string &item : items)
    text += (text.empty() ? "" : ", ") + item;
  return text;
}

std::vector<const OpTime *> topOps(const DecodeProfile &profile, size_t count) {
  std::vector<const OpTime *> ops;
  for (const OpTime &op : profile.ops)
    ops.push_back(&op);
  std::stable_sort(ops.begin(), ops.end(), [](const OpTime *a, const OpTime *b) {
    return a->runMs + a->waitMs > b->runMs + b->waitMs;
  });
  if (ops.size() > count)
    ops.resize(count);
  return ops;
}

// "0,4096, 16384" -> {0, 4096, 16384}; anything else is refused naming the option.
template <typename T> std::vector<T> parseList(const std::string &text, const char *option) {
  std::vector<T> values;
  size_t itemStart = 0;
  while (true) {
    const size_t comma = text.find(',', itemStart);
    std::string item =
        text.substr(itemStart, comma == std::string::npos ? comma : comma - itemStart);
    const size_t first = item.find_first_not_of(' '), last = item.find_last_not_of(' ');
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    if (item.empty())
      fail(std::string(option) + " '" + text + "': an empty item");
    uint64_t value = 0;
    for (char c : item) {
      if (c < '0' || c > '9')
        fail(std::string(option) + " '" + text + "': '" + item + "' is not a non-negative integer");
      if (value > (UINT64_MAX - 9) / 10)
        fail(std::string(option) + " '" + text + "': '" + item + "' is too large");
      value = value * 10 + static_cast<uint64_t>(c - '0');
    }
    if (value > static_cast<uint64_t>(std::numeric_limits<T>::max()))
      fail(std::string(option) + " '" + text + "': '" + item + "' is too large");
    values.push_back(static_cast<T>(value));
    if (comma == std::string::npos)
      return values;
    itemStart = comma + 1;
  }
}

Json splitJson(const DecodeTimeSplit &s) {
  return {{"fixed_ms", s.fixedMs},
          {"attention_ms", s.attentionMs},
          {"attention_share", s.attentionShare},
          {"attention_kv_gbs", s.attentionGbs},
          {"attention_roofline_fraction", s.attentionRooflineFraction},
          {"fixed_weight_gbs", s.fixedGbs},
          {"fixed_roofline_fraction", s.fixedRooflineFraction}};
}

Json profileJson(const DecodeProfile &p) {
  Json kinds = Json::array();
  for (const KindTime &k : p.kinds)
    kinds.push_back({{"kind", k.kind}, {"ops", k.ops}, {"run_ms", k.runMs}, {"wait_ms", k.waitMs}});
  Json ops = Json::array();
  for (const OpTime &op : p.ops)
    ops.push_back({{"phase", op.phase},
                   {"name", op.name},
                   {"kind", op.kind},
                   {"attention", op.attention},
                   {"run_ms", op.runMs},
                   {"wait_ms", op.waitMs},
                   {"max_thread_run_ms", op.maxThreadRunMs}});
  return {{"steps", p.steps},
          {"step_ms", p.stepMs},
          {"run_ms", p.runMs},
          {"wait_ms", p.waitMs},
          {"dispatch_ms", p.dispatchMs},
          {"overhead_fraction", p.overheadFraction},
          {"by_kind", kinds},
          {"ops", ops}};
}

// One measured point: what it ran, its times and bytes, its bandwidth and split.
Json pointJson(const BenchArguments &args, const DecodeBenchReport &r) {
  Json j;
  j["context"] = r.context;
  j["batch"] = r.batch;
  j["gen"] = r.gen;
  j["fill"] = kvFillName(r.fill);
  j["fill_description"] = describeFill(r);
  j["fill_seconds"] = r.fillSeconds;
  j["decode_seconds"] = r.decodeSeconds;
  j["tokens_per_s"] = r.tokensPerS;
  j["ms_per_token"] = r.msPerToken;
  j["bytes_per_token"] = r.bytes.total();
  j["weight_bytes_per_token"] = r.bytes.weights;
  j["kv_bytes_per_token"] = r.bytes.kv();
  j["average_context"] = r.bytes.averageAttended;
  j["p"] = ellmSequenceLength(r.bytes.averageAttended);
  j["measured_read_gbs"] = r.measuredGbs;
  j["achieved_read_gbs"] = r.achievedGbs;
  j["roofline_fraction"] = r.rooflineFraction;
  if (r.pairedRooflineFraction > 0) {
    j["paired_roofline_fraction"] = r.pairedRooflineFraction;
    j["paired_roofline_min"] = r.pairedRooflineMin;
    j["paired_roofline_max"] = r.pairedRooflineMax;
  }
  j["bandwidth_probe"] = {{"buffer_bytes", r.bandwidthBefore.bufferBytes},
                          {"pass_bytes", r.bandwidthBefore.passBytes},
                          {"before_passes", r.bandwidthBefore.passes},
                          {"after_passes", r.bandwidthAfter.passes},
                          {"before_best_gbs", r.bandwidthBefore.bestGbs},
                          {"before_median_gbs", r.bandwidthBefore.medianGbs},
                          {"after_best_gbs", r.bandwidthAfter.bestGbs},
                          {"after_median_gbs", r.bandwidthAfter.medianGbs},
                          {"threads", r.bandwidthBefore.threads},
                          {"loads", r.bandwidthBefore.loads},
                          {"last_level_cache_bytes", r.bandwidthBefore.lastLevelCacheBytes}};
  if (r.profiled)
    j["split"] = splitJson(r.split);
  if (r.profiled && args.profile)
    j["profile"] = profileJson(r.profile);
  return j;
}

// What the whole run shares: the plan, its kernels and bounds, the threads.
// Where the plan puts its ops on its target, and where they ran (ranOn).
Json devicesJson(const Engine &engine) {
  const Plan &plan = engine.plan();
  const GpuProbe probe = probeGpu();
  const PlanDevices devices = countPlanDevices(plan);
  return Json{{"target", devices.target},
              {"target_gpu", devices.gpu},
              {"ops", devices.ops},
              {"gpu_ops_decode", devices.decode.gpuOps},
              {"gpu_ops_prefill", devices.prefill.gpuOps},
              {"gpu_sublayers_decode", devices.decode.gpuSublayers},
              {"gpu_sublayers_prefill", devices.prefill.gpuSublayers},
              {"sublayers", devices.decode.sublayers},
              {"ran_on", ranOn(engine)},
              {"host_gpu_present", probe.present()},
              {"host_gpu", probe.describe()},
              {"description", describeEngineDevices(engine, probe)}};
}

// The positions the last timed decode step of a point attends: the length its policy is looked
// up at.
uint64_t decodeLen(const DecodeBenchReport &r) { return r.context + r.gen; }

// The policy the plan's decode table gives a point, and where it ran.
Json policyJson(const Engine &engine, const DecodeBenchReport &r) {
  const PolicyLookup found =
      engine.policyTables().lookup(plan::StageDef::Decode, r.batch, decodeLen(r));
  Json policies = Json::array();
  for (uint32_t g = 0; g < found.groupCount; ++g)
    policies.push_back(policyText(found.policies[g]));
  return Json{{"stage", "decode"},
              {"batch", r.batch},
              {"len", decodeLen(r)},
              {"table", found.policies != nullptr},
              {"group_policies", policies},
              {"ran_on", ranOn(engine)},
              {"description", policyLookupText(engine.policyTables(), plan::StageDef::Decode,
                                               r.batch, decodeLen(r))}};
}

// "...; run on the CPU here (no split execution)" for a plan with a table.
std::string policyLine(const Engine &engine, const DecodeBenchReport &r) {
  return policyLookupText(engine.policyTables(), plan::StageDef::Decode, r.batch, decodeLen(r)) +
         (engine.policyTables().empty() ? "" : policyRanOn(engine));
}

// The host's NUMA nodes and where each arena's tier went on them.
Json memoryBindingJson(const Engine &engine) {
  const MemoryBinding &binding = engine.memoryBinding();
  Json nodes = Json::array();
  for (const NumaNode &node : binding.topology.nodes)
    nodes.push_back(
        {{"node", node.id}, {"has_cpus", node.hasCpus}, {"memory_bytes", node.memoryBytes}});
  Json arenas = Json::array();
  for (const ArenaBinding &arena : binding.arenas)
    arenas.push_back({{"arena", arena.what},
                      {"tier", plan::EnumNameTierDef(arena.tier)},
                      {"nodes", arena.target.nodes},
                      {"note", arena.target.note},
                      {"bound", arena.bound},
                      {"outcome", arena.outcome}});
  return Json{{"available", numaBindingAvailable()},
              {"nodes", nodes},
              {"arenas", arenas},
              {"description", binding.describe()}};
}

void addRunJson(Json &j, const Engine &engine, const DecodeBenchReport &r) {
  Json kernels = Json::array();
  for (const KernelUse &use : r.kernels)
    kernels.push_back({{"op", use.opKind}, {"kernel", use.kernel}, {"count", use.count}});
  j["kernels"] = kernels;
  j["weight_dtypes"] = weightDtypes(engine.plan());
  j["kv_dtype"] = kvDtype(engine.plan());
  j["bounds"] = {{"max_batch", engine.maxBatch()},
                 {"max_seq", engine.maxSeq()},
                 {"max_step_tokens", engine.maxStepTokens()}};
  j["threads"] = r.threads;
  j["pinned_threads"] = r.pinnedThreads;
  j["devices"] = devicesJson(engine);
  j["memory_binding"] = memoryBindingJson(engine);
}

std::string splitText(const DecodeTimeSplit &s) {
  return format("fixed %.4g ms (weights at %.2f GB/s = %.3f of the bandwidth), attention %.4g ms "
                "= %.1f%% of the token (KV at %.2f GB/s = %.3f of the bandwidth)",
                s.fixedMs, s.fixedGbs, s.fixedRooflineFraction, s.attentionMs,
                100.0 * s.attentionShare, s.attentionGbs, s.attentionRooflineFraction);
}

std::string profileText(const DecodeBenchReport &r) {
  const DecodeProfile &p = r.profile;
  std::string out = format("profile: %llu steps; per step, mean over threads (ms)\n",
                           static_cast<unsigned long long>(p.steps));
  out += format("  token %.4f = step %.4f + outside the engine %.4f\n", r.msPerToken, p.stepMs,
                std::max(0.0, r.msPerToken - p.stepMs));
  out += format("  step  %.4f = run %.4f + barrier wait %.4f + dispatch %.4f\n", p.stepMs, p.runMs,
                p.waitMs, p.dispatchMs);
  out += format("  overhead (wait + dispatch) = %.2f%% of the token time\n",
                100.0 * p.overheadFraction);
  out += format("  %-16s %5s %10s %10s %7s\n", "kind", "ops", "run", "wait", "share");
  for (const KindTime &k : p.kinds)
    out += format("  %-16s %5zu %10.4f %10.4f %6.1f%%\n", k.kind.c_str(), k.ops, k.runMs, k.waitMs,
                  p.stepMs > 0 ? 100.0 * (k.runMs + k.waitMs) / p.stepMs : 0.0);
  out += format("  top ops by run + wait:\n  %5s %-16s %10s %10s %10s  %s\n", "#", "kind", "run",
                "wait", "max run", "name");
  for (const OpTime *op : topOps(p, kTopOps))
    out += format("  %5zu %-16s %10.4f %10.4f %10.4f  ", op->phase, op->kind.c_str(), op->runMs,
                  op->waitMs, op->maxThreadRunMs) +
           op->name + "\n";
  return out;
}

void printPointText(const BenchArguments &args, const Engine &engine, const DecodeBenchReport &r) {
  std::string out;
  auto line = [&out](const std::string &label, const std::string &text) {
    out += format("  %-16s ", label.c_str()) + text + "\n";
  };
  const char *seqs = r.batch == 1 ? "sequence" : "sequences";
  out += "hetc bench " + args.planPath + "\n";
  line("plan bounds",
       format("max-batch %u, max-seq %llu, max-step-tokens %u", engine.maxBatch(),
              static_cast<unsigned long long>(engine.maxSeq()), engine.maxStepTokens()));
  line("weights", joined(weightDtypes(engine.plan())) + "; KV cache " + kvDtype(engine.plan()));
  line("threads", format("%u (%u pinned)", r.threads, r.pinnedThreads));
  line("devices", describeEngineDevices(engine, probeGpu()));
  line("policy", policyLine(engine, r));
  line("memory", engine.memoryBinding().describe());
  line("fill", format("%llu positions x %u %s: ", static_cast<unsigned long long>(r.context),
                      r.batch, seqs) +
                   describeFill(r) + format(", %.2f s", r.fillSeconds));
  line("decode", format("%u steps x %u %s: %.2f tokens/s, %.3f ms per step (ms_per_token)", r.gen,
                        r.batch, seqs, r.tokensPerS, r.msPerToken));
  line("bytes per step", format("%.4g GB (weights %.4g GB, KV %.4g GB at %.1f positions average)",
                                r.bytes.total() / 1e9, r.bytes.weights / 1e9, r.bytes.kv() / 1e9,
                                r.bytes.averageAttended));
  const ReadBandwidth &b = r.bandwidthBefore, &a = r.bandwidthAfter;
  line("read bandwidth",
       format("%.2f GB/s measured: best pass before %.2f (median %.2f, %u passes), after %.2f "
              "(median %.2f, %u passes); passes of %.0f MiB through a %.0f MiB ring, %s loads, %u "
              "threads",
              r.measuredGbs, b.bestGbs, b.medianGbs, b.passes, a.bestGbs, a.medianGbs, a.passes,
              b.passBytes / 1048576.0, b.bufferBytes / 1048576.0, b.loads, b.threads));
  line("roofline", format("%.2f GB/s achieved = %.3f of the measured bandwidth", r.achievedGbs,
                          r.rooflineFraction));
  if (r.pairedRooflineFraction > 0)
    line("paired",
         format("%.3f of the bandwidth probed around each step (median of %u steps "
                "run again, %.3f .. %.3f)",
                r.pairedRooflineFraction, r.gen, r.pairedRooflineMin, r.pairedRooflineMax));
  if (r.profiled)
    line("split", splitText(r.split));
  std::string kernels;
  for (const KernelUse &use : r.kernels)
    kernels += format("%s%s %s x%zu", kernels.empty() ? "" : ", ", use.opKind.c_str(),
                      use.kernel.c_str(), use.count);
  line("kernels", kernels);
  if (r.profiled && args.profile)
    out += profileText(r);
  std::cout << out;
}

DecodeBenchOptions pointOptions(const BenchArguments &args, uint64_t context, uint32_t batch) {
  DecodeBenchOptions options;
  options.context = context;
  options.batch = batch;
  options.gen = args.gen;
  options.fill = args.fill == "prefill"     ? KvFill::Prefill
                 : args.fill == "synthetic" ? KvFill::Synthetic
                                            : KvFill::Auto;
  options.bandwidth.bytes = args.probeMiB << 20;
  options.pairedSteps = !args.noPaired;
  return options;
}

int singlePoint(const BenchArguments &args, Engine &engine) {
  const DecodeBenchOptions options = pointOptions(args, args.context, args.batch);
  if (Status s = checkDecodeBench(engine, options); !s)
    fail(s.message());
  Result<DecodeBenchReport> report = runDecodeBench(engine, options);
  if (!report)
    fail(report.message());
  if (args.json) {
    Json j;
    j["plan"] = args.planPath;
    j.update(pointJson(args, *report));
    addRunJson(j, engine, *report);
    j["policy"] = policyJson(engine, *report);
    std::cout << j.dump(2) << '\n';
  } else {
    printPointText(args, engine, *report);
  }
  return 0;
}

// ---- The sweep ----

struct SweepResult {
  DecodeBenchReport report;    // the fastest of the point's rounds
  Json torch;                  // the reference's answer; null without --compare-torch
  std::vector<double> roundMs; // ms_per_token of every round, in order
};

struct BatchFit {
  uint32_t batch = 0;
  std::vector<const SweepResult *> points;
  std::optional<LatencyFit> fit;
  std::string error; // why there is no fit
};

std::vector<BatchFit> fitPerBatch(const std::vector<SweepResult> &results) {
  std::map<uint32_t, BatchFit> byBatch;
  for (const SweepResult &result : results) {
    BatchFit &entry = byBatch[result.report.batch];
    entry.batch = result.report.batch;
    entry.points.push_back(&result);
  }
  std::vector<BatchFit> fits;
  for (auto &[batch, entry] : byBatch) {
    std::vector<LatencySample> samples;
    for (const SweepResult *point : entry.points)
      samples.push_back(
          {ellmSequenceLength(point->report.bytes.averageAttended), point->report.msPerToken});
    Result<LatencyFit> fit = fitLatencyModel(samples);
    if (fit)
      entry.fit = *fit;
    else
      entry.error = fit.message();
    fits.push_back(std::move(entry));
  }
  return fits;
}

double torchMs(const Json &torch) {
  return torch.is_object() && torch.contains("ms_per_token") ? torch["ms_per_token"].get<double>()
                                                             : 0.0;
}

// ms per microsecond-scale position costs: "0.0123 ms" reads worse than "12.3 us".
std::string perPositionText(double ms) { return format("%.4g us", ms * 1e3); }

struct BandwidthRange {
  double min = 0, max = 0, median = 0;
};

BandwidthRange bandwidthRange(const std::vector<SweepResult> &results) {
  std::vector<double> gbs;
  for (const SweepResult &r : results)
    gbs.push_back(r.report.measuredGbs);
  std::sort(gbs.begin(), gbs.end());
  return {gbs.front(), gbs.back(), gbs[gbs.size() / 2]};
}

std::string baseName(const std::string &path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string plotSvg(const BenchArguments &args, const Engine &engine,
                    const std::vector<SweepResult> &results, const std::vector<BatchFit> &fits) {
  const BandwidthRange bw = bandwidthRange(results);
  SweepPlot plot;
  plot.title = "hetc bench " + baseName(args.planPath) + ": decode time per token";
  plot.subtitle =
      format("read bandwidth measured %.1f GB/s (%.1f .. %.1f around the points), %u threads; "
             "weights %s, KV %s",
             bw.max, bw.min, bw.max, results.front().report.threads,
             joined(weightDtypes(engine.plan())).c_str(), kvDtype(engine.plan()).c_str());
  plot.xLabel = "context (positions in each sequence's KV cache before the timed steps)";
  plot.yLabel = "ms per token (one decode step of the batch)";
  uint64_t maxContext = 0;
  for (const SweepResult &r : results)
    maxContext = std::max(maxContext, r.report.context);
  const double halfGen = (args.gen + 1.0) / 2.0;
  for (const BatchFit &batch : fits) {
    PlotSeries series;
    series.name = format("batch %u", batch.batch);
    for (const SweepResult *point : batch.points) {
      series.measured.push_back(
          {static_cast<double>(point->report.context), point->report.msPerToken});
      if (double ms = torchMs(point->torch); ms > 0)
        series.reference.push_back({static_cast<double>(point->report.context), ms});
    }
    if (batch.fit) {
      // At context c the steps attend c + (gen + 1) / 2 positions on average: p = 2c + gen.
      for (double c : {0.0, static_cast<double>(maxContext)})
        series.fit.push_back({c, batch.fit->at(ellmSequenceLength(c + halfGen))});
      series.label = series.name +
                     format(": e %.4g ms, a %s per position\nmax |residual| %.1f%% over %zu points",
                            batch.fit->e, perPositionText(batch.fit->a).c_str(),
                            100.0 * batch.fit->maxAbsRelativeResidual, batch.points.size());
    } else {
      series.label =
          series.name + "\nno fit: " + (batch.points.size() < 2 ? "one point" : "one context");
    }
    plot.series.push_back(std::move(series));
  }
  return renderSweepPlotSvg(plot);
}

Json sweepJson(const BenchArguments &args, const Engine &engine,
               const std::vector<SweepResult> &results,
               const std::vector<SkippedSweepPoint> &skipped, const std::vector<BatchFit> &fits,
               const TorchReference *torch) {
  Json j;
  j["plan"] = args.planPath;
  j["devices"] = devicesJson(engine);
  j["gen"] = args.gen;
  j["rounds"] = {{"count", args.rounds},
                 {"kept", "each point the fastest of its rounds (round_ms_per_token in order)"}};
  j["fill"] = args.fill;
  j["fill_descriptions"] = {{"prefill", "prefill computed"}, {"synthetic", kSyntheticNote}};
  addRunJson(j, engine, results.front().report);
  const BandwidthRange bw = bandwidthRange(results);
  j["bandwidth"] = {{"max_gbs", bw.max},
                    {"min_gbs", bw.min},
                    {"median_gbs", bw.median},
                    {"reference", "each point's fractions divide by the bandwidth measured right "
                                  "before and after that point (its measured_read_gbs)"}};
  j["latency_model"] = {{"formula", kLatencyFormula},
                        {"p", kPConvention},
                        {"fit",
                         "least squares of the relative residuals (weights 1/t^2) of ms_per_token "
                         "on (p+1)/2, per batch"},
                        {"relative_residual", kResidualConvention}};
  if (torch)
    j["torch"] = {{"model_dir", args.compareTorch},
                  {"script", args.torchScript},
                  {"setup", torch->setup()},
                  {"speedup", "torch ms_per_token / hetc ms_per_token at the same point"}};
  Json points = Json::array();
  for (const SweepResult &result : results) {
    Json point = pointJson(args, result.report);
    point["policy"] = policyJson(engine, result.report);
    point["round_ms_per_token"] = result.roundMs;
    if (torch) {
      Json t = result.torch;
      if (double ms = torchMs(t); ms > 0)
        t["speedup"] = ms / result.report.msPerToken;
      point["torch"] = t;
    }
    points.push_back(point);
  }
  j["points"] = points;
  Json skippedJson = Json::array();
  for (const SkippedSweepPoint &s : skipped)
    skippedJson.push_back(
        {{"context", s.point.context}, {"batch", s.point.batch}, {"reason", s.reason}});
  j["skipped"] = skippedJson;
  Json fitsJson = Json::array();
  for (const BatchFit &batch : fits) {
    Json fit = {{"batch", batch.batch}, {"points", batch.points.size()}};
    if (!batch.fit) {
      fit["error"] = batch.error;
    } else {
      fit["e_ms"] = batch.fit->e;
      fit["a_ms_per_position"] = batch.fit->a;
      fit["max_abs_relative_residual"] = batch.fit->maxAbsRelativeResidual;
      Json residuals = Json::array();
      for (size_t i = 0; i < batch.points.size(); ++i) {
        const DecodeBenchReport &r = batch.points[i]->report;
        residuals.push_back({{"context", r.context},
                             {"p", ellmSequenceLength(r.bytes.averageAttended)},
                             {"measured_ms", r.msPerToken},
                             {"fitted_ms", batch.fit->fittedMs[i]},
                             {"relative_residual", batch.fit->relativeResiduals[i]}});
      }
      fit["residuals"] = residuals;
    }
    fitsJson.push_back(fit);
  }
  j["fits"] = fitsJson;
  return j;
}

void printSweepText(const BenchArguments &args, const Engine &engine,
                    const std::vector<SweepResult> &results,
                    const std::vector<SkippedSweepPoint> &skipped,
                    const std::vector<BatchFit> &fits, const TorchReference *torch) {
  const DecodeBenchReport &first = results.front().report;
  const BandwidthRange bw = bandwidthRange(results);
  std::string out = "hetc bench " + args.planPath +
                    format(": %zu points (%zu skipped), gen %u, fill %s, %u threads (%u pinned)\n",
                           results.size(), skipped.size(), args.gen, args.fill.c_str(),
                           first.threads, first.pinnedThreads);
  out += "  weights " + joined(weightDtypes(engine.plan())) + "; KV cache " +
         kvDtype(engine.plan()) + "\n";
  out += "  devices: " + describeEngineDevices(engine, probeGpu()) + "\n";
  out += "  memory: " + engine.memoryBinding().describe() + "\n";
  if (args.rounds > 1)
    out += format("  rounds: %u, interleaved; each point is its fastest run\n", args.rounds);
  out += format("  read bandwidth measured around each point: %.2f .. %.2f GB/s (median %.2f); "
                "each point's fractions use its own\n",
                bw.min, bw.max, bw.median);
  if (torch)
    out += "  PyTorch " + torch->setup().value("torch", std::string("?")) + ", " +
           torch->setup().value("dtype", std::string("?")) + ", " +
           std::to_string(torch->setup().value("threads", 0)) +
           " threads; speedup = PyTorch ms / hetc ms\n";
  out += format("%6s %8s %-9s %9s %9s %7s %6s | %9s %9s %6s %9s %6s", "batch", "context", "fill",
                "ms/token", "tokens/s", "GB/s", "of-bw", "fixed-ms", "attn-ms", "attn%",
                "attn-GB/s", "of-bw");
  out += torch ? format(" | %9s %7s\n", "torch-ms", "speedup") : "\n";
  for (const SweepResult &result : results) {
    const DecodeBenchReport &r = result.report;
    out += format("%6u %8llu %-9s %9.4g %9.1f %7.2f %6.3f | %9.4g %9.4g %5.1f%% %9.2f %6.3f",
                  r.batch, static_cast<unsigned long long>(r.context),
                  r.context == 0 ? "none" : kvFillName(r.fill), r.msPerToken, r.tokensPerS,
                  r.achievedGbs, r.rooflineFraction, r.split.fixedMs, r.split.attentionMs,
                  100.0 * r.split.attentionShare, r.split.attentionGbs,
                  r.split.attentionRooflineFraction);
    if (torch) {
      const double ms = torchMs(result.torch);
      out += ms > 0 ? format(" | %9.4g %6.2fx", ms, ms / r.msPerToken)
                    : format(" | %9s %7s", "-", result.torch.contains("skipped") ? "skipped" : "-");
    }
    out += "\n";
  }
  out += std::string("latency model ") + kLatencyFormula +
         ", p = 2 * context + gen, least squares per batch; residual = " + kResidualConvention +
         "\n";
  for (const BatchFit &batch : fits) {
    if (!batch.fit) {
      out += format("  batch %u: no fit: ", batch.batch) + batch.error + "\n";
      continue;
    }
    out += format("  batch %u: e %.4g ms, a %s per position; max |residual| %.2f%% over %zu "
                  "points (target 5%%)\n    ",
                  batch.batch, batch.fit->e, perPositionText(batch.fit->a).c_str(),
                  100.0 * batch.fit->maxAbsRelativeResidual, batch.points.size());
    for (size_t i = 0; i < batch.points.size(); ++i)
      out += format("%scontext %llu %+.2f%%", i ? ", " : "",
                    static_cast<unsigned long long>(batch.points[i]->report.context),
                    100.0 * batch.fit->relativeResiduals[i]);
    out += "\n";
  }
  for (const SkippedSweepPoint &s : skipped)
    out += format("skipped: batch %u, context %llu: ", s.point.batch,
                  static_cast<unsigned long long>(s.point.context)) +
           s.reason + "\n";
  if (args.profile)
    for (const SweepResult &result : results)
      out += format("batch %u, context %llu: ", result.report.batch,
                    static_cast<unsigned long long>(result.report.context)) +
             profileText(result.report);
  std::cout << out;
}

std::string progressLine(size_t index, size_t count, const SweepResult &result) {
  const DecodeBenchReport &r = result.report;
  std::string line =
      format("hetc: bench [%zu/%zu] batch %u, context %llu (%s): %.4g ms/token, %.4g tokens/s, "
             "%.3f of %.2f GB/s; attention %.1f%% of the token at %.3f of the bandwidth",
             index, count, r.batch, static_cast<unsigned long long>(r.context),
             r.context == 0 ? "no fill" : kvFillName(r.fill), r.msPerToken, r.tokensPerS,
             r.rooflineFraction, r.measuredGbs, 100.0 * r.split.attentionShare,
             r.split.attentionRooflineFraction);
  if (double ms = torchMs(result.torch); ms > 0)
    line += format("; PyTorch %.4g ms/token, speedup %.2f", ms, ms / r.msPerToken);
  else if (result.torch.is_object() && result.torch.contains("skipped"))
    line += "; PyTorch skipped: " + result.torch["skipped"].get<std::string>();
  else if (result.torch.is_object() && result.torch.contains("error"))
    line += "; PyTorch failed: " + result.torch["error"].get<std::string>();
  return line;
}

std::string skipLine(const SkippedSweepPoint &s) {
  return format("hetc: bench: skipping batch %u, context %llu: ", s.point.batch,
                static_cast<unsigned long long>(s.point.context)) +
         s.reason;
}

int sweep(const BenchArguments &args, Engine &engine) {
  if (!args.contexts.empty() && args.contextGiven)
    fail("--context and --contexts: give one of them");
  if (!args.batches.empty() && args.batchGiven)
    fail("--batch and --batches: give one of them");
  const std::vector<uint64_t> contexts = args.contexts.empty()
                                             ? std::vector<uint64_t>{args.context}
                                             : parseList<uint64_t>(args.contexts, "--contexts");
  const std::vector<uint32_t> batches = args.batches.empty()
                                            ? std::vector<uint32_t>{args.batch}
                                            : parseList<uint32_t>(args.batches, "--batches");
  const uint64_t probeBytes = args.probeMiB ? args.probeMiB << 20 : defaultProbeBufferBytes();
  Result<DecodeSweep> planned =
      planDecodeSweep(engine, contexts, batches, args.gen, probeBytes, availableMemoryBytes());
  if (!planned)
    fail(planned.message());
  std::vector<SkippedSweepPoint> skipped = planned->skipped;
  for (const SkippedSweepPoint &s : skipped)
    std::cerr << skipLine(s) << '\n';

  // A plot path that cannot be written fails now, not after the sweep; a sweep that fails
  // afterwards removes the file rather than leave an empty plot.
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> plotFile(nullptr, &std::fclose);
  struct UnfinishedPlot {
    std::string path;
    ~UnfinishedPlot() {
      if (!path.empty())
        std::remove(path.c_str());
    }
  } unfinishedPlot;
  if (!args.plotPath.empty()) {
    plotFile.reset(std::fopen(args.plotPath.c_str(), "w"));
    if (!plotFile)
      fail("cannot write --plot " + args.plotPath + ": " + std::strerror(errno));
    unfinishedPlot.path = args.plotPath;
  }

  std::unique_ptr<TorchReference> torch;
  if (!args.compareTorch.empty()) {
    const plan::KvCacheDef *kv = engine.plan().def().kv_cache();
    TorchReferenceOptions options;
    options.python = args.python;
    options.script = args.torchScript;
    options.modelDir = args.compareTorch;
    options.threads = engine.threads();
    const std::vector<std::string> dtypes = weightDtypes(engine.plan());
    options.dtype = std::count(dtypes.begin(), dtypes.end(), "BF16") ? "bf16" : "f32";
    options.expect = format("vocab=%u", engine.vocab());
    if (kv)
      options.expect += format(",layers=%u,kv_heads=%u,head_dim=%u", kv->layers(), kv->kv_heads(),
                               kv->head_dim());
    torch = TorchReference::start(options);
  }

  const uint64_t kvPerPosition = decodeStepBytes(engine.plan(), 1, 0, 1).kvPerPosition;
  KvResidency residency(kvPerPosition, engine.maxBatch());
  std::vector<SweepResult> results;
  // The points that run (the first round decides which fit in memory), as indices into results.
  std::vector<std::optional<size_t>> resultOf(planned->points.size());
  const size_t count = planned->points.size();
  for (uint32_t round = 0; round < args.rounds; ++round)
    for (size_t i = 0; i < count; ++i) {
      const DecodeSweepPoint point = planned->points[i];
      if (round == 0) {
        const uint64_t positions = point.context + args.gen;
        // What is free now, after earlier points and whatever else runs on the machine.
        if (std::optional<uint64_t> available = availableMemoryBytes())
          if (std::optional<std::string> why = memoryShortfall(
                  residency.newBytes(point.batch, positions), probeBytes, *available)) {
            skipped.push_back({point, *why});
            std::cerr << skipLine(skipped.back()) << '\n';
            continue;
          }
        residency.touch(point.batch, positions);
      } else if (!resultOf[i]) {
        continue;
      }
      Result<DecodeBenchReport> report =
          runDecodeBench(engine, pointOptions(args, point.context, point.batch));
      if (!report)
        fail(format("batch %u, context %llu: ", point.batch,
                    static_cast<unsigned long long>(point.context)) +
             report.message());
      SweepResult run{std::move(*report), nullptr, {}};
      if (round == 0 && torch)
        run.torch = torch->measure(point.context, point.batch, args.gen);
      std::cerr << progressLine(round * count + i + 1, args.rounds * count, run) << '\n';
      if (round == 0) {
        resultOf[i] = results.size();
        results.push_back(std::move(run));
        results.back().roundMs.push_back(results.back().report.msPerToken);
        continue;
      }
      // A shared machine slows a run, never speeds it up: the fastest run is the one least
      // disturbed.
      SweepResult &kept = results[*resultOf[i]];
      kept.roundMs.push_back(run.report.msPerToken);
      if (run.report.msPerToken < kept.report.msPerToken)
        kept.report = std::move(run.report);
    }
  if (results.empty())
    fail("no point of the sweep could run (see the lines above)");

  const std::vector<BatchFit> fits = fitPerBatch(results);
  if (args.json)
    std::cout << sweepJson(args, engine, results, skipped, fits, torch.get()).dump(2) << '\n';
  else
    printSweepText(args, engine, results, skipped, fits, torch.get());
  if (plotFile) {
    const std::string svg = plotSvg(args, engine, results, fits);
    if (std::fwrite(svg.data(), 1, svg.size(), plotFile.get()) != svg.size() ||
        std::fflush(plotFile.get()) != 0)
      fail("cannot write --plot " + args.plotPath + ": " + std::strerror(errno));
    unfinishedPlot.path.clear();
  }
  return 0;
}

} // namespace

void addBenchOptions(CLI::App &command, BenchArguments &args) {
  args.python = HETC_DEFAULT_PYTHON;
  args.torchScript = HETC_DEFAULT_TORCH_SCRIPT;
  command.add_option("plan", args.planPath, "Plan file")->required();
  command.add_option("--context", args.context, "Positions in each sequence's KV cache first")
      ->capture_default_str();
  command.add_option("--batch", args.batch, "Sequences decoded together")->capture_default_str();
  command.add_option("--contexts", args.contexts,
                     "A sweep: comma-separated contexts, each run with every --batches size");
  command.add_option("--batches", args.batches, "A sweep: comma-separated batch sizes");
  command.add_option("--gen", args.gen, "Timed decode steps (one token per sequence each)")
      ->capture_default_str();
  command
      .add_option("--rounds", args.rounds,
                  "A sweep: run every point this many times in interleaved rounds and keep each "
                  "point's fastest run (a shared machine only ever slows a run)")
      ->check(CLI::Range(1u, 100u))
      ->capture_default_str();
  command
      .add_option("--fill", args.fill,
                  "How the context gets into the KV cache: prefill (computed), synthetic "
                  "(pseudo-random K/V, no prefill), auto (prefill up to " +
                      std::to_string(kAutoPrefillMaxContext) + " positions)")
      ->check(CLI::IsMember({"auto", "prefill", "synthetic"}))
      ->capture_default_str();
  addEngineOptions(command, args.threads, args.noPin, args.device);
  command.add_flag("--json", args.json, "One JSON object on stdout instead of text");
  command.add_flag("--profile", args.profile,
                   "Report the per-op run and barrier wait times over the decode steps");
  command.add_flag("--no-paired", args.noPaired,
                   "Skip the steps run again between probe passes (paired_roofline_fraction)");
  command.add_option("--probe-mib", args.probeMiB,
                     "Read-bandwidth probe buffer in MiB (0 = 4x the last-level cache, at least "
                     "256)");
  command.add_option("--plot", args.plotPath,
                     "Write an SVG of ms per token against context, one series per batch");
  command.add_option("--compare-torch", args.compareTorch,
                     "Time PyTorch's decode at each point too: the model directory "
                     "models/export.py wrote");
  command.add_option("--python", args.python, "Python with torch, for --compare-torch")
      ->capture_default_str();
  command.add_option("--torch-script", args.torchScript, "The PyTorch benchmark script")
      ->capture_default_str();
  command.callback([&command, &args]() {
    args.contextGiven = command.count("--context") > 0;
    args.batchGiven = command.count("--batch") > 0;
  });
}

int benchCommand(const BenchArguments &args) {
  const bool isSweep = !args.contexts.empty() || !args.batches.empty() || !args.plotPath.empty() ||
                       !args.compareTorch.empty() || args.rounds > 1;
  const std::shared_ptr<const Plan> plan = loadPlan(args.planPath);
  EngineOptions options = engineOptions(args.threads, args.noPin);
  // The split of each token into fixed and attention time comes from the profile, so it is
  // always recorded (two clock reads per op and thread); --profile only reports it in full.
  options.profile = true;
  // Before any measurement: a plan for a GPU target is measured on the CPU here, said once.
  const std::unique_ptr<Engine> created = createEngine(plan, options, probeGpu(), args.device);
  Engine &engine = *created;

  const int status = isSweep ? sweep(args, engine) : singlePoint(args, engine);
  std::cout.flush();
  if (!std::cout)
    fail("cannot write the report to standard output");
  return status;
}

} // namespace hetc::tool
