#include "PlanCommand.h"
#include "CommandSupport.h"
#include "../PrintfString.h"

#include "hetc/compiler/CostModel.h"
#include "hetc/compiler/DevicePlan.h"
#include "hetc/compiler/ModelShape.h"
#include "hetc/compiler/OnnxModelShape.h"
#include "hetc/compiler/OperatorSplit.h"
#include "hetc/compiler/Target.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace hetc::tool {
namespace {

using compiler::LayerGroup;
using compiler::ModelShape;
using compiler::OperatorTime;
using compiler::PlanRequest;
using compiler::Policy;
using compiler::PolicyTable;
using compiler::RankedPolicy;
using compiler::SplitSearch;
using compiler::Stage;
using compiler::StagePlan;
using compiler::Target;
using compiler::Tier;
using hetc::tools::format;
using Json = nlohmann::ordered_json;

constexpr unsigned kRunnersUp = 4;
// An ONNX export does not say what context the model was trained for; --sweep goes this far.
constexpr uint32_t kOnnxAssumedContext = 4096;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr const char *kConvention =
    "p_i = 1 runs sublayer i on the CPU, 0 on the GPU; sublayers qkv, qk, sv, out, fc1, fc2";

template <typename T> T value(Result<T> result) {
  if (!result)
    fail(result.message());
  return std::move(result.value());
}

std::string knownModelNames() {
  std::string names;
  for (const ModelShape &model : compiler::knownModels())
    names += (names.empty() ? "" : ", ") + model.name;
  return names;
}

Json policyJson(Policy policy) {
  Json values = Json::array();
  for (int v : policy.values())
    values.push_back(v);
  return values;
}

// Figure 9's letters: the three policies LIA names, then a, b, ... for any other.
class PolicyLetters {
public:
  char letter(Policy policy) {
    if (policy == Policy::allCpu())
      return 'C';
    if (policy == Policy::partialCpu())
      return 'P';
    if (policy == Policy::allGpu())
      return 'G';
    auto found = others_.find(policy.bits());
    if (found != others_.end())
      return found->second;
    const char next = static_cast<char>('a' + others_.size());
    order_.push_back(policy);
    return others_[policy.bits()] = next;
  }
  std::string legend() const {
    std::string text = "C = (1,1,1,1,1,1) all CPU, P = (0,1,1,0,0,0) partial CPU, "
                       "G = (0,0,0,0,0,0) all GPU";
    for (Policy policy : order_)
      text += std::string(", ") + others_.at(policy.bits()) + " = " + policy.text();
    return text;
  }

private:
  std::map<unsigned, char> others_;
  std::vector<Policy> order_;
};

std::string describeStage(Stage stage, uint64_t batch, uint64_t len) {
  if (stage == Stage::Prefill)
    return format("prefill: %llu prompt%s of %llu tokens", (unsigned long long)batch,
                  batch == 1 ? "" : "s", (unsigned long long)len);
  return format("decode: one token for each of %llu sequence%s attending %llu positions",
                (unsigned long long)batch, batch == 1 ? "" : "s", (unsigned long long)len);
}

std::string placementDescription(compiler::Placement placement) {
  switch (placement) {
  case compiler::Placement::Ddr:
    return "ddr (weights, KV cache and activations in DDR)";
  case compiler::Placement::Cxl:
    return "cxl (LIA: parameters on CXL, KV cache and activations in DDR)";
  case compiler::Placement::Helm:
    return "helm (Gupta et al.: FC1 weights on the GPU, the rest in the slow host tier)";
  case compiler::Placement::AllCpu:
    return "all-cpu (Gupta et al.: weights in the slow host tier, KV cache on the GPU)";
  case compiler::Placement::Auto:
    break;
  }
  return "auto";
}

// The operator split of a decode step: the model's own per-operator predictions.
struct PredictedSplit {
  std::vector<OperatorTime> ops;
  SplitSearch search;
  uint64_t batchEach = 0;
};

PredictedSplit predictSplit(const PlanRequest &request, const StagePlan &plan, uint32_t batches) {
  PredictedSplit split;
  split.batchEach = (request.batch + batches - 1) / batches;
  const LayerGroup &streamed = plan.groups.front();
  split.ops = compiler::predictOperatorTimes(*request.model, compiler::Machine::of(*request.target),
                                             split.batchEach, request.len, streamed.placement);
  split.search = compiler::searchSplits(split.ops, batches);
  return split;
}

Json splitJson(const std::vector<OperatorTime> &ops, const compiler::Split &split) {
  Json j;
  j["layout"] = compiler::describeSplit(ops, split);
  j["gpu_begin"] = split.gpuBegin;
  j["gpu_end"] = split.gpuEnd;
  j["split_points"] = split.splitPoints;
  j["cuts_operator"] = split.cutsOperator;
  j["cpu_ms"] = split.cpuMs;
  j["h2d_ms"] = split.h2dMs;
  j["latency_ms"] = split.latencyMs;
  return j;
}

Json searchJson(const std::vector<OperatorTime> &ops, const SplitSearch &search) {
  Json j;
  j["batches"] = search.batches;
  j["gpu_only"] = splitJson(ops, search.gpuOnly);
  j["prefix_only"] = splitJson(ops, search.prefixOnly);
  j["prefix_cut"] = splitJson(ops, search.prefixCut);
  j["single"] = splitJson(ops, search.single);
  j["two_points"] = splitJson(ops, search.twoPoints);
  j["best"] = splitJson(ops, search.best);
  j["cut_vs_gpu_only"] = 1 - search.best.latencyMs / search.gpuOnly.latencyMs;
  return j;
}

void printSearch(const std::vector<OperatorTime> &ops, const SplitSearch &search,
                 const char *indent) {
  const double gpuOnly = search.gpuOnly.latencyMs;
  auto line = [&](const char *label, const compiler::Split &split) {
    std::cout << format("%s%-12s %9.3f ms (%+6.1f%%)  cpu %.3f, h2d %.3f  %s\n", indent, label,
                        split.latencyMs, 100 * (split.latencyMs / gpuOnly - 1), split.cpuMs,
                        split.h2dMs, compiler::describeSplit(ops, split).c_str());
  };
  line("gpu only", search.gpuOnly);
  line("cpu prefix", search.prefixOnly);
  line("prefix, cut", search.prefixCut);
  line("one split", search.single);
  line("two splits", search.twoPoints);
  line("cut op", search.best);
}

Json memoryJson(const StagePlan &plan) {
  Json j;
  for (Tier tier : {Tier::Gpu, Tier::Ddr, Tier::Cxl}) {
    const compiler::TierUse &use = plan.memory[static_cast<int>(tier)];
    if (!use.present)
      continue;
    Json t;
    t["weights_bytes"] = use.weights;
    t["kv_bytes"] = use.kv;
    t["activation_bytes"] = use.activations;
    t["total_bytes"] = use.total();
    t["capacity_bytes"] = use.capacity;
    std::string name = compiler::tierName(tier);
    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    j[name] = t;
  }
  return j;
}

Json shapeJson(const ModelShape &model) {
  return Json{{"layers", model.layers},
              {"hidden", model.hidden},
              {"heads", model.heads},
              {"kv_heads", model.kvHeads},
              {"head_dim", model.headDim},
              {"ffn", model.ffn},
              {"gated_ffn", model.gatedFfn},
              {"vocab", model.vocab},
              {"tied_embeddings", model.tiedEmbeddings}};
}

Json stageJson(const PlanRequest &request, const StagePlan &plan, uint32_t batches) {
  Json j;
  j["stage"] = compiler::stageName(plan.stage);
  j["policy"] = policyJson(plan.policy());
  j["predicted_ms"] = plan.seconds * 1e3;
  j["model"] = request.model->name;
  j["model_shape"] = shapeJson(*request.model);
  j["target"] = request.target->name;
  j["batch"] = plan.batch;
  j["len"] = plan.len;
  j["timing"] = compiler::timingName(plan.timing);
  j["placement"] = compiler::placementName(plan.placement);
  j["serial_ms"] = plan.serialSeconds * 1e3;
  j["overlapped_ms"] = plan.overlappedSeconds * 1e3;
  j["cpu_ms"] = plan.cpuSeconds * 1e3;
  j["gpu_ms"] = plan.gpuSeconds * 1e3;
  j["pcie_ms"] = plan.pcieSeconds * 1e3;
  Json groups = Json::array();
  for (const LayerGroup &group : plan.groups) {
    Json g;
    g["name"] = group.name;
    g["layers"] = group.layers;
    g["policy"] = policyJson(group.best().policy);
    g["layer_ms"] = group.best().time.total(plan.timing) * 1e3;
    groups.push_back(g);
  }
  j["layer_groups"] = groups;
  Json runnersUp = Json::array();
  const std::vector<RankedPolicy> &ranking = plan.groups.front().ranking;
  for (size_t i = 1; i < ranking.size() && i <= kRunnersUp; ++i) {
    Json r;
    r["policy"] = policyJson(ranking[i].policy);
    r["predicted_ms"] = plan.secondsWith(ranking[i]) * 1e3;
    runnersUp.push_back(r);
  }
  j["runners_up"] = runnersUp;
  j["memory"] = memoryJson(plan);
  if (plan.stage == Stage::Decode && request.target->hasGpu()) {
    const PredictedSplit split = predictSplit(request, plan, batches);
    Json s = searchJson(split.ops, split.search);
    s["batch_each"] = split.batchEach;
    j["operator_split"] = s;
  }
  j["notes"] = plan.notes;
  return j;
}

void printStage(const PlanRequest &request, const StagePlan &plan, uint32_t batches) {
  std::cout << '\n' << describeStage(plan.stage, plan.batch, plan.len) << '\n';
  std::cout << format("  policy %s   predicted %.3f ms = CPU %.3f + GPU %.3f + PCIe %.3f ms "
                      "(%s; serial %.3f, overlapped %.3f)\n",
                      plan.policy().text().c_str(), plan.seconds * 1e3, plan.cpuSeconds * 1e3,
                      plan.gpuSeconds * 1e3, plan.pcieSeconds * 1e3,
                      compiler::timingName(plan.timing), plan.serialSeconds * 1e3,
                      plan.overlappedSeconds * 1e3);
  for (const LayerGroup &group : plan.groups)
    std::cout << format("  %3u %-13s layers: %s, %.3f ms each\n", group.layers, group.name.c_str(),
                        group.best().policy.text().c_str(),
                        group.best().time.total(plan.timing) * 1e3);

  const std::vector<RankedPolicy> &ranking = plan.groups.front().ranking;
  if (ranking.size() > 1) {
    std::cout << "  runners-up (" << plan.groups.front().name << " layers):\n";
    for (size_t i = 1; i < ranking.size() && i <= kRunnersUp; ++i) {
      const double seconds = plan.secondsWith(ranking[i]);
      std::cout << format("    %s  %.3f ms (%+.1f%%)\n", ranking[i].policy.text().c_str(),
                          seconds * 1e3, 100 * (seconds / plan.seconds - 1));
    }
  }

  std::cout << format("  memory  %12s %12s %12s %12s %12s\n", "weights", "KV", "activations",
                      "total", "capacity");
  for (Tier tier : {Tier::Gpu, Tier::Ddr, Tier::Cxl}) {
    const compiler::TierUse &use = plan.memory[static_cast<int>(tier)];
    if (use.present)
      std::cout << format("    %-5s %8.1f GiB %8.1f GiB %8.1f GiB %8.1f GiB %8.1f GiB\n",
                          compiler::tierName(tier), use.weights / kGiB, use.kv / kGiB,
                          use.activations / kGiB, use.total() / kGiB, use.capacity / kGiB);
  }

  if (plan.stage == Stage::Decode && request.target->hasGpu()) {
    const PredictedSplit split = predictSplit(request, plan, batches);
    std::cout << format("  operator split of a streamed layer (Park & Egger Eq. 5-7, 14; %u "
                        "batch%s of %llu):\n",
                        batches, batches == 1 ? "" : "es", (unsigned long long)split.batchEach);
    printSearch(split.ops, split.search, "    ");
  }
  for (const std::string &note : plan.notes)
    std::cout << "  note: " << note << '\n';
}

// Batches 1, 2, 4, ... up to the bound, and the bound itself.
std::vector<uint64_t> powersUpTo(uint64_t first, uint64_t last) {
  std::vector<uint64_t> values;
  for (uint64_t v = first; v < last; v *= 2)
    values.push_back(v);
  values.push_back(last);
  return values;
}

void printSweep(const PolicyTable &table, const std::vector<uint64_t> &batches) {
  PolicyLetters letters;
  std::cout << '\n'
            << compiler::stageName(table.stage)
            << ": optimal policy of the streamed layers (rows: len, columns: batch)\n";
  std::cout << format("  %6s ", "len");
  for (uint64_t b : batches)
    std::cout << format("%5llu", (unsigned long long)b);
  std::cout << '\n';
  for (auto row = table.rows.rbegin(); row != table.rows.rend(); ++row) {
    std::cout << format("  %6llu ", (unsigned long long)row->len);
    for (uint64_t b : batches)
      std::cout << format("%5c", letters.letter(table.lookup(b, row->len)));
    std::cout << '\n';
  }
  std::cout << "  exact ranges:\n";
  for (const compiler::PolicyRow &row : table.rows) {
    std::string text;
    for (const compiler::PolicyRange &range : row.ranges)
      text +=
          format("%s%llu-%llu %s", text.empty() ? "" : ", ", (unsigned long long)range.firstBatch,
                 (unsigned long long)range.lastBatch, range.policy.text().c_str());
    std::cout << format("    len %6llu: batch %s\n", (unsigned long long)row.len, text.c_str());
  }
  std::cout << "  " << letters.legend() << '\n';
}

Json tableJson(const PolicyTable &table) {
  Json j;
  j["stage"] = compiler::stageName(table.stage);
  j["max_batch"] = table.maxBatch;
  Json rows = Json::array();
  for (const compiler::PolicyRow &row : table.rows) {
    Json ranges = Json::array();
    for (const compiler::PolicyRange &range : row.ranges)
      ranges.push_back(Json{{"first_batch", range.firstBatch},
                            {"last_batch", range.lastBatch},
                            {"policy", policyJson(range.policy)}});
    rows.push_back(Json{{"len", row.len}, {"ranges", ranges}});
  }
  j["rows"] = rows;
  return j;
}

int operatorTimesCommand(const PlanArguments &args) {
  const std::vector<OperatorTime> ops = value(compiler::loadOperatorTimes(args.opTimes));
  const SplitSearch search = compiler::searchSplits(ops, args.batches);
  if (args.json) {
    Json j = searchJson(ops, search);
    j["op_times"] = args.opTimes;
    std::cout << j.dump(2) << '\n';
  } else {
    std::cout << format("operator split of %s (Park & Egger Eq. 5-7, 14; %u batch%s)\n",
                        args.opTimes.c_str(), args.batches, args.batches == 1 ? "" : "es");
    printSearch(ops, search, "  ");
  }
  return 0;
}

} // namespace

void addPlanOptions(CLI::App &command, PlanArguments &args) {
  command.add_option("--model", args.model,
                     "Model: " + knownModelNames() + ", or a Llama-family model.onnx");
  command.add_option("--target", args.target, "Target name (see hetc targets) or a .json file");
  command.add_option("--batch", args.batch, "Batch (B)")->capture_default_str();
  command
      .add_option("--len", args.len,
                  "Prefill: prompt tokens; decode: positions each sequence attends (L)")
      ->capture_default_str();
  command.add_option("--stage", args.stage, "prefill or decode (default: both)")
      ->check(CLI::IsMember({"prefill", "decode"}));
  command
      .add_option("--timing", args.timing,
                  "serial: load + compute + store summed (LIA Eq. 2); overlapped: transfers "
                  "beside compute (Optimization-2)")
      ->check(CLI::IsMember({"serial", "overlapped"}))
      ->capture_default_str();
  command
      .add_option("--placement", args.placement,
                  "Where weights and KV live: auto, ddr, cxl (LIA), helm or all-cpu (Gupta et al.)")
      ->check(CLI::IsMember({"auto", "ddr", "cxl", "helm", "all-cpu"}))
      ->capture_default_str();
  command.add_flag("--no-resident", args.noResident,
                   "Keep no decoder layers resident in spare GPU memory (no Optimization-1)");
  command.add_flag("--json", args.json, "One JSON object instead of text");
  command.add_flag("--sweep", args.sweep,
                   "The optimal policy over batch and length (LIA Figure 9) and its exact ranges");
  command.add_option("--max-batch", args.maxBatch, "--sweep's largest batch")
      ->capture_default_str();
  command.add_option("--op-times", args.opTimes,
                     "Measured operator times (CSV: op,h2d_ms,cpu_ms,gpu_ms,cache,splittable): "
                     "run the split search on them alone");
  command
      .add_option("--batches", args.batches,
                  "Batches sharing the weights in the split search (Park & Egger Eq. 14)")
      ->capture_default_str();
}

int planCommand(const PlanArguments &args) {
  if (args.batches == 0)
    fail("--batches must be at least 1");
  if (!args.opTimes.empty())
    return operatorTimesCommand(args);
  if (args.model.empty())
    fail("plan needs --model (one of " + knownModelNames() + ") or --op-times");
  if (args.target.empty())
    fail("plan needs --target (see hetc targets)");
  const Target target = value(compiler::findTarget(args.target));
  const bool onnx =
      args.model.size() > 5 && args.model.compare(args.model.size() - 5, 5, ".onnx") == 0;
  ModelShape onnxShape;
  if (onnx)
    onnxShape = value(compiler::readOnnxModelShape(args.model, kOnnxAssumedContext));
  const ModelShape *model = onnx ? &onnxShape : compiler::findModel(args.model);
  if (!model)
    fail("unknown model '" + args.model + "' (known models: " + knownModelNames() +
         "; or a path to a model.onnx)");
  if (args.batch == 0)
    fail("--batch must be at least 1");
  if (args.len == 0)
    fail("--len must be at least 1");
  if (args.sweep && (args.maxBatch == 0 || args.maxBatch > (1u << 20)))
    fail("--max-batch must be between 1 and 1048576");

  PlanRequest request;
  request.model = model;
  request.target = &target;
  request.batch = args.batch;
  request.len = args.len;
  request.timing =
      args.timing == "overlapped" ? compiler::Timing::Overlapped : compiler::Timing::Serial;
  compiler::parsePlacement(args.placement, request.placement);
  request.residentLayers = !args.noResident;

  std::vector<Stage> stages;
  if (args.stage != "decode")
    stages.push_back(Stage::Prefill);
  if (args.stage != "prefill")
    stages.push_back(Stage::Decode);

  if (args.sweep) {
    const std::vector<uint64_t> lens = powersUpTo(32, std::max<uint64_t>(32, model->maxContext));
    const std::vector<uint64_t> batches = powersUpTo(1, args.maxBatch);
    Json tables = Json::array();
    if (!args.json)
      std::cout << format("hetc plan --sweep: %s on %s, %s timing, placement %s\n",
                          model->name.c_str(), target.name.c_str(),
                          compiler::timingName(request.timing), args.placement.c_str());
    for (Stage stage : stages) {
      request.stage = stage;
      const PolicyTable table = value(compiler::buildPolicyTable(request, lens, args.maxBatch));
      if (args.json)
        tables.push_back(tableJson(table));
      else
        printSweep(table, batches);
    }
    if (args.json) {
      Json j{{"model", model->name},
             {"target", target.name},
             {"timing", compiler::timingName(request.timing)},
             {"placement", args.placement},
             {"tables", tables}};
      std::cout << j.dump(2) << '\n';
    }
    return 0;
  }

  std::vector<StagePlan> plans;
  for (Stage stage : stages) {
    request.stage = stage;
    plans.push_back(value(compiler::planStage(request)));
  }

  if (args.json) {
    Json j;
    if (plans.size() == 1) {
      request.stage = plans[0].stage;
      j = stageJson(request, plans[0], args.batches);
    } else {
      j["model"] = model->name;
      j["model_shape"] = shapeJson(*model);
      j["target"] = target.name;
      j["batch"] = args.batch;
      j["len"] = args.len;
      Json list = Json::array();
      for (const StagePlan &plan : plans) {
        request.stage = plan.stage;
        list.push_back(stageJson(request, plan, args.batches));
      }
      j["stages"] = list;
    }
    std::cout << j.dump(2) << '\n';
    return 0;
  }

  std::cout << format("hetc plan: %s (%u decoder layers) on %s: %s%s%s\n", model->name.c_str(),
                      model->layers, target.name.c_str(), target.cpu.model.c_str(),
                      target.gpu ? " + " : ", no GPU", target.gpu ? target.gpu->model.c_str() : "");
  std::cout << format("  model: hidden %u, %u heads (%u KV) of %u, FFN %u%s, vocab %u\n",
                      model->hidden, model->heads, model->kvHeads, model->headDim, model->ffn,
                      model->gatedFfn ? " (SwiGLU)" : "", model->vocab);
  std::cout << "  policy: " << kConvention << '\n';
  std::cout << "  timing: "
            << (request.timing == compiler::Timing::Serial
                    ? "serial (LIA Eq. 2: load + compute + store summed)"
                    : "overlapped (Optimization-2: weight and KV transfers beside compute)")
            << '\n';
  std::cout << "  placement: " << placementDescription(plans.front().placement)
            << (request.placement == compiler::Placement::Auto ? ", chosen by auto" : "") << '\n';
  for (StagePlan &plan : plans) {
    request.stage = plan.stage;
    printStage(request, plan, args.batches);
  }
  std::cout.flush();
  return 0;
}

void addTargetsOptions(CLI::App &command, TargetsArguments &args) {
  command.add_option("name", args.name, "Show one target's every figure with its source");
  command.add_flag("--json", args.json, "One JSON object instead of text");
}

int targetsCommand(const TargetsArguments &args) {
  std::vector<Target> targets;
  if (args.name.empty())
    targets = value(compiler::listTargets());
  else
    targets.push_back(value(compiler::findTarget(args.name)));

  if (args.json) {
    Json list = Json::array();
    for (const Target &target : targets) {
      Json figures;
      for (const compiler::TargetFigure &figure : target.figures)
        figures[figure.key] = Json{{"value", figure.value}, {"source", figure.source}};
      list.push_back(Json{{"name", target.name},
                          {"description", target.description},
                          {"path", target.path},
                          {"gpu", target.hasGpu()},
                          {"figures", figures}});
    }
    std::cout << Json{{"targets", list}}.dump(2) << '\n';
    return 0;
  }

  if (!args.name.empty()) {
    const Target &target = targets.front();
    std::cout << target.name << ": " << target.description << "\n  file: " << target.path << '\n';
    for (const compiler::TargetFigure &figure : target.figures)
      std::cout << format("  %-28s %-12s ", figure.key.c_str(), figure.value.c_str())
                << figure.source << '\n';
    return 0;
  }

  std::cout << format("%-9s %-44s %5s %7s %8s  %-22s %6s %6s %7s\n", "target", "cpu", "cores",
                      "AMX TF", "DDR GB/s", "gpu", "GPU TF", "HBM GB", "PCIe GB/s");
  for (const Target &target : targets) {
    std::cout << format("%-9s %-44s %5u %7.1f %8.0f  ", target.name.c_str(),
                        target.cpu.model.c_str(), target.cpu.cores, target.cpu.amxTflops,
                        target.ddr.readGbs);
    if (target.gpu)
      std::cout << format("%-22s %6.0f %6.0f %7.1f", target.gpu->model.c_str(), target.gpu->tflops,
                          target.gpu->memoryBytes / kGiB, target.pcie->gbs);
    else
      std::cout << format("%-22s %6s %6s %7s", "none (CPU only)", "-", "-", "-");
    if (target.cxl)
      std::cout << format("   CXL %ux%.0f GiB", target.cxl->expanders,
                          target.cxl->capacityBytesEach / kGiB);
    std::cout << '\n';
  }
  std::cout << "Achieved figures (the ones the cost model uses); `hetc targets NAME` shows every "
               "figure with its source.\n";
  return 0;
}

} // namespace hetc::tool
