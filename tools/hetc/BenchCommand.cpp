#include "BenchCommand.h"
#include "../PrintfString.h"

#include "hetc/runtime/DecodeBenchmark.h"
#include "hetc/runtime/Engine.h"
#include "hetc/runtime/Plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace hetc::tool {
namespace {

constexpr const char *kSyntheticNote = "synthetic KV fill (no prefill computed)";
constexpr size_t kTopOps = 12;

[[noreturn]] void fail(const std::string &message) { throw std::runtime_error(message); }

using hetc::tools::format;

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

nlohmann::ordered_json reportJson(const BenchArguments &args, const Engine &engine,
                                  const DecodeBenchReport &r) {
  using Json = nlohmann::ordered_json;
  Json j;
  j["plan"] = args.planPath;
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
  Json kernels = Json::array();
  for (const KernelUse &use : r.kernels)
    kernels.push_back({{"op", use.opKind}, {"kernel", use.kernel}, {"count", use.count}});
  j["kernels"] = kernels;
  j["weight_dtypes"] = weightDtypes(engine.plan());
  j["bounds"] = {{"max_batch", engine.maxBatch()},
                 {"max_seq", engine.maxSeq()},
                 {"max_step_tokens", engine.maxStepTokens()}};
  j["threads"] = r.threads;
  j["pinned_threads"] = r.pinnedThreads;
  if (r.profiled) {
    const DecodeProfile &p = r.profile;
    Json kinds = Json::array();
    for (const KindTime &k : p.kinds)
      kinds.push_back(
          {{"kind", k.kind}, {"ops", k.ops}, {"run_ms", k.runMs}, {"wait_ms", k.waitMs}});
    Json ops = Json::array();
    for (const OpTime &op : p.ops)
      ops.push_back({{"index", op.resolvedOp},
                     {"name", op.name},
                     {"kind", op.kind},
                     {"run_ms", op.runMs},
                     {"wait_ms", op.waitMs},
                     {"max_thread_run_ms", op.maxThreadRunMs}});
    j["profile"] = {{"steps", p.steps},
                    {"step_ms", p.stepMs},
                    {"run_ms", p.runMs},
                    {"wait_ms", p.waitMs},
                    {"dispatch_ms", p.dispatchMs},
                    {"overhead_fraction", p.overheadFraction},
                    {"by_kind", kinds},
                    {"ops", ops}};
  }
  return j;
}

void printText(const BenchArguments &args, const Engine &engine, const DecodeBenchReport &r) {
  std::string out;
  auto line = [&out](const std::string &label, const std::string &text) {
    out += format("  %-16s ", label.c_str()) + text + "\n";
  };
  const char *seqs = r.batch == 1 ? "sequence" : "sequences";
  out += "hetc bench " + args.planPath + "\n";
  line("plan bounds",
       format("max-batch %u, max-seq %llu, max-step-tokens %u", engine.maxBatch(),
              static_cast<unsigned long long>(engine.maxSeq()), engine.maxStepTokens()));
  std::string dtypes;
  for (const std::string &d : weightDtypes(engine.plan()))
    dtypes += (dtypes.empty() ? "" : ", ") + d;
  line("weights", dtypes);
  line("threads", format("%u (%u pinned)", r.threads, r.pinnedThreads));
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
  std::string kernels;
  for (const KernelUse &use : r.kernels)
    kernels += format("%s%s %s x%zu", kernels.empty() ? "" : ", ", use.opKind.c_str(),
                      use.kernel.c_str(), use.count);
  line("kernels", kernels);

  if (r.profiled) {
    const DecodeProfile &p = r.profile;
    out += format("profile: %llu steps; per step, mean over threads (ms)\n",
                  static_cast<unsigned long long>(p.steps));
    out += format("  token %.4f = step %.4f + outside the engine %.4f\n", r.msPerToken, p.stepMs,
                  std::max(0.0, r.msPerToken - p.stepMs));
    out += format("  step  %.4f = run %.4f + barrier wait %.4f + dispatch %.4f\n", p.stepMs,
                  p.runMs, p.waitMs, p.dispatchMs);
    out += format("  overhead (wait + dispatch) = %.2f%% of the token time\n",
                  100.0 * p.overheadFraction);
    out += format("  %-16s %5s %10s %10s %7s\n", "kind", "ops", "run", "wait", "share");
    for (const KindTime &k : p.kinds)
      out += format("  %-16s %5zu %10.4f %10.4f %6.1f%%\n", k.kind.c_str(), k.ops, k.runMs,
                    k.waitMs, p.stepMs > 0 ? 100.0 * (k.runMs + k.waitMs) / p.stepMs : 0.0);
    out += format("  top ops by run + wait:\n  %5s %-16s %10s %10s %10s  %s\n", "#", "kind", "run",
                  "wait", "max run", "name");
    for (const OpTime *op : topOps(p, kTopOps))
      out += format("  %5zu %-16s %10.4f %10.4f %10.4f  ", op->resolvedOp, op->kind.c_str(),
                    op->runMs, op->waitMs, op->maxThreadRunMs) +
             op->name + "\n";
  }
  std::cout << out;
}

} // namespace

void addBenchOptions(CLI::App &command, BenchArguments &args) {
  command.add_option("plan", args.planPath, "Plan file")->required();
  command.add_option("--context", args.context, "Positions in each sequence's KV cache first")
      ->capture_default_str();
  command.add_option("--batch", args.batch, "Sequences decoded together")->capture_default_str();
  command.add_option("--gen", args.gen, "Timed decode steps (one token per sequence each)")
      ->capture_default_str();
  command
      .add_option("--fill", args.fill,
                  "How the context gets into the KV cache: prefill (computed), synthetic "
                  "(pseudo-random K/V, no prefill), auto (prefill up to " +
                      std::to_string(kAutoPrefillMaxContext) + " positions)")
      ->check(CLI::IsMember({"auto", "prefill", "synthetic"}))
      ->capture_default_str();
  command.add_option("--threads", args.threads, "Threads (0 = every core)")->capture_default_str();
  command.add_flag("--no-pin", args.noPin, "Do not bind threads to cores");
  command.add_flag("--json", args.json, "One JSON object on stdout instead of text");
  command.add_flag("--profile", args.profile,
                   "Per-op run and barrier wait times over the decode steps");
  command.add_flag("--no-paired", args.noPaired,
                   "Skip the steps run again between probe passes (paired_roofline_fraction)");
  command.add_option("--probe-mib", args.probeMiB,
                     "Read-bandwidth probe buffer in MiB (0 = 4x the last-level cache, at least "
                     "256)");
}

int benchCommand(const BenchArguments &args) {
  Result<std::unique_ptr<Plan>> loaded = Plan::load(args.planPath);
  if (!loaded)
    fail(loaded.message());
  std::shared_ptr<const Plan> plan(std::move(loaded.value()));

  EngineOptions engineOptions;
  engineOptions.threads = args.threads;
  engineOptions.pin = !args.noPin;
  engineOptions.profile = args.profile;
  Result<std::unique_ptr<Engine>> created = Engine::create(plan, engineOptions);
  if (!created)
    fail(created.message());
  Engine &engine = *created.value();

  DecodeBenchOptions options;
  options.context = args.context;
  options.batch = args.batch;
  options.gen = args.gen;
  options.fill = args.fill == "prefill"     ? KvFill::Prefill
                 : args.fill == "synthetic" ? KvFill::Synthetic
                                            : KvFill::Auto;
  options.bandwidth.bytes = args.probeMiB << 20;
  options.pairedSteps = !args.noPaired;
  if (Status s = checkDecodeBench(engine, options); !s)
    fail(s.message());

  Result<DecodeBenchReport> report = runDecodeBench(engine, options);
  if (!report)
    fail(report.message());
  if (args.json)
    std::cout << reportJson(args, engine, *report).dump(2) << '\n';
  else
    printText(args, engine, *report);
  std::cout.flush();
  return 0;
}

} // namespace hetc::tool
