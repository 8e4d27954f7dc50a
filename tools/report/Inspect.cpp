#include "tools/report/Inspect.h"

#include "runtime/executor/Engine.h"
#include "runtime/format/Plan.h"
#include "runtime/platform/CpuFeatures.h"
#include "runtime/platform/Devices.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

namespace hetc {
namespace {

using namespace plan;
using Json = nlohmann::ordered_json;

template <typename T> uint32_t count(const flatbuffers::Vector<T> *items) {
  return items ? items->size() : 0;
}

std::string str(const flatbuffers::String *s) { return s ? s->str() : std::string(); }

std::string versionText(uint32_t version) {
  return std::to_string(version >> 16) + "." + std::to_string(version & 0xffff);
}

std::string humanBytes(uint64_t bytes) {
  static const char *kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[64];
  if (unit == 0)
    std::snprintf(text, sizeof(text), "%llu bytes", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(text, sizeof(text), "%.2f %s (%llu bytes)", value, kUnits[unit],
                  static_cast<unsigned long long>(bytes));
  return text;
}

std::string indexList(const flatbuffers::Vector<uint32_t> *indices) {
  if (count(indices) == 0)
    return "-";
  std::string out = "[";
  for (uint32_t i = 0; i < indices->size(); ++i)
    out += (i ? "," : "") + std::to_string(indices->Get(i));
  return out + "]";
}

std::string shapeText(const flatbuffers::Vector<uint64_t> *shape) {
  std::string out = "[";
  for (uint32_t i = 0; i < count(shape); ++i)
    out += (i ? ", " : "") + std::to_string(shape->Get(i));
  return out + "]";
}

std::string layerText(int32_t index) { return index < 0 ? "-" : std::to_string(index); }

// A plan's activation function by name.
const char *functionText(ActivationFunctionDef function) {
  switch (function) {
  case ActivationFunctionDef::Relu:
    return "relu";
  case ActivationFunctionDef::Gelu:
    return "gelu";
  case ActivationFunctionDef::GeluTanh:
    return "gelu_tanh";
  case ActivationFunctionDef::ReluSquared:
    return "relu2";
  case ActivationFunctionDef::Silu:
    return "silu";
  }
  return "?";
}

// A float as short text ("11.3137", "50").
std::string number(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(value));
  return text;
}

// Joins the non-empty parts with commas; "-" when there are none.
std::string joined(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string &part : parts)
    if (!part.empty())
      out += (out.empty() ? "" : ",") + part;
  return out.empty() ? "-" : out;
}

// The ops an op carries out besides its own: a Linear's bias ("bias") and epilogue ("add", a
// residual add; "swiglu/gate" or "swiglu/up", a swiglu whose gate or up operand it computes, with
// its gate function when it is not silu), the ropes an Attention applies to q and k before
// writing K into the cache ("rope q,k", with "r16" when it rotates the first 16 columns of each
// head only and "il" for interleaved pairs), its sliding window ("window 4096") and soft-cap
// ("cap 50"), a LayerNorm's bias ("bias"), an Activation's or a SwiGlu's function ("relu",
// "gelu", "gelu_tanh", "silu"), the learned positions an Embedding adds ("positions+2", with
// their offset) and its scale ("scale 45.2548"), an LmHead's bias and soft-cap; "-" for none.
std::string fusedText(const OpDef &op) {
  if (const EmbeddingParamsDef *params = op.params_as_EmbeddingParamsDef())
    return joined({count(op.weights()) > 1
                       ? "positions+" + std::to_string(params->position_offset())
                       : "",
                   params->scale() != 1.0f ? "scale " + number(params->scale()) : ""});
  if (const LayerNormParamsDef *params = op.params_as_LayerNormParamsDef())
    return params->bias() ? "bias" : "-";
  if (const ActivationParamsDef *params = op.params_as_ActivationParamsDef())
    return functionText(params->function());
  if (const SwiGluParamsDef *params = op.params_as_SwiGluParamsDef())
    return functionText(params->function());
  if (const LmHeadParamsDef *params = op.params_as_LmHeadParamsDef())
    return joined({params->bias() ? "bias" : "",
                   params->softcap() > 0 ? "cap " + number(params->softcap()) : ""});
  if (op.kind() == OpKindDef::Attention) {
    const AttentionParamsDef *params = op.params_as_AttentionParamsDef();
    if (!params)
      return "-";
    std::string rope;
    if (params->rope()) {
      rope = "rope q,k";
      if (params->rope_rotary_dim() != 0 && params->rope_rotary_dim() != params->head_dim())
        rope += " r" + std::to_string(params->rope_rotary_dim());
      if (params->rope_interleaved())
        rope += " il";
    }
    return joined({params->sliding_window() ? "window " + std::to_string(params->sliding_window())
                                            : "",
                   params->softcap() > 0 ? "cap " + number(params->softcap()) : "",
                   params->alibi_slopes() ? "alibi" : "", rope});
  }
  const LinearParamsDef *params =
      op.kind() == OpKindDef::Linear ? op.params_as_LinearParamsDef() : nullptr;
  if (!params)
    return "-";
  std::string epilogue = params->residual()                        ? "add"
                         : params->swiglu() == SwiGluRoleDef::Gate ? "swiglu/gate"
                         : params->swiglu() == SwiGluRoleDef::Up   ? "swiglu/up"
                                                                   : "";
  if (params->swiglu() != SwiGluRoleDef::None &&
      params->swiglu_function() != ActivationFunctionDef::Silu)
    epilogue += std::string(" ") + functionText(params->swiglu_function());
  return joined({params->bias() ? "bias" : "", epilogue});
}

// Totals both printers show.
struct PlanTotals {
  uint64_t weightBytes = 0;
  uint64_t tasks = 0;
};

PlanTotals totalsOf(const PlanDef &def) {
  PlanTotals totals;
  for (uint32_t i = 0; i < count(def.segments()); ++i)
    totals.weightBytes += def.segments()->Get(i)->size();
  for (uint32_t i = 0; i < count(def.ops()); ++i)
    totals.tasks += def.ops()->Get(i)->task_count();
  return totals;
}

std::string featureLine(uint64_t required) {
  const uint64_t host = hostCpuFeatures();
  const uint64_t missing = required & ~host;
  return "required " + describeCpuFeatures(required) + "; host " + describeCpuFeatures(host) +
         (missing ? "; missing " + describeCpuFeatures(missing) : std::string("; all present"));
}

// A fixed-width column: right-aligned numbers, left-aligned words.
struct Column {
  int width;
  bool right;
};

void printRow(std::ostream &os, const std::vector<Column> &columns,
              const std::vector<std::string> &cells) {
  os << " ";
  for (size_t i = 0; i < cells.size(); ++i) {
    os << ' ' << (columns[i].right ? std::right : std::left) << std::setw(columns[i].width)
       << cells[i];
  }
  os << std::left << '\n';
}

// A float as JSON: the double its shortest text that reads back as the same float denotes, so
// that it prints as 1e-05, not 9.999999747378752e-06; null when not finite.
Json floatJson(float number) {
  if (!std::isfinite(number))
    return nullptr;
  char text[32];
  for (int precision = 6; precision <= 9; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, static_cast<double>(number));
    if (std::strtof(text, nullptr) == number)
      break;
  }
  return std::strtod(text, nullptr);
}

Json indexArray(const flatbuffers::Vector<uint32_t> *indices) {
  Json array = Json::array();
  for (uint32_t i = 0; i < count(indices); ++i)
    array.push_back(indices->Get(i));
  return array;
}

Json featureArray(uint64_t bits) {
  Json array = Json::array();
  if (bits) {
    std::istringstream names(describeCpuFeatures(bits));
    std::string feature;
    while (names >> feature)
      array.push_back(feature);
  }
  return array;
}

// The kernels an engine on this host runs for the plan: the engine's own choice, found by
// creating one (one thread, unpinned; JIT kernels are generated as a run would).
struct HostKernels {
  std::vector<KernelUse> uses;
  std::string error;
  size_t ops = 0;    // resolved ops a step runs
  size_t phases = 0; // barriers a step waits at: one per phase
};

HostKernels hostKernels(const Plan &plan) {
  const std::shared_ptr<const Plan> borrowed(&plan, [](const Plan *) {});
  EngineOptions options;
  options.threads = 1;
  options.pin = false;
  Result<std::unique_ptr<Engine>> engine = Engine::create(borrowed, options);
  if (!engine)
    return {{}, engine.message()};
  return {engine.value()->kernelSummary(), "", engine.value()->resolvedOps().size(),
          engine.value()->phases().size()};
}

std::string tierText(TierDef tier) { return EnumNameTierDef(tier); }

const char *deviceText(DeviceDef device) { return EnumNameDeviceDef(device); }

// "CPU" or "GPU" for sublayer `index` under a policy's CPU bits.
const char *sublayerDevice(uint8_t policy, unsigned index) {
  return (policy >> index & 1) ? "CPU" : "GPU";
}

std::string layersText(const LayerGroupDef &group) {
  if (group.layer_count() == 1)
    return std::to_string(group.first_layer());
  return std::to_string(group.first_layer()) + "-" +
         std::to_string(uint64_t{group.first_layer()} + group.layer_count() - 1);
}

std::string millisecondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g ms", seconds * 1e3);
  return text;
}

std::string rangePolicies(const PolicyRangeDef &range) {
  std::string text;
  for (uint32_t g = 0; g < count(range.policies()); ++g)
    text += (g ? " | " : "") + policyText(static_cast<uint8_t>(range.policies()->Get(g)));
  return text;
}

// How a weight's values are stored: its number format and, for an integer one, its scales.
std::string weightScheme(const TensorDef &t) {
  switch (t.layout()) {
  case WeightLayoutDef::LinearInt8N16K4:
    return "int8, a scale per output column";
  case WeightLayoutDef::LinearInt4N16K8:
    return "int4, a scale and zero point per output column and " + std::to_string(t.group_size()) +
           " k";
  case WeightLayoutDef::LinearBf16N16K2:
    return "bf16";
  case WeightLayoutDef::RowMajor:
  case WeightLayoutDef::LinearNK:
    break;
  }
  return t.dtype() == DTypeDef::BF16 ? "bf16" : "f32";
}

// How many tensors each tier holds, "14 in GPU, 4 in DDR".
std::string tensorTiers(const PlanDef &def) {
  uint32_t counts[3] = {0, 0, 0};
  for (uint32_t i = 0; i < count(def.tensors()); ++i) {
    const auto tier = static_cast<unsigned>(def.tensors()->Get(i)->tier());
    if (tier < 3)
      ++counts[tier];
  }
  std::string text;
  for (TierDef tier : {TierDef::GPU, TierDef::DDR, TierDef::CXL})
    if (counts[static_cast<unsigned>(tier)])
      text += (text.empty() ? "" : ", ") + std::to_string(counts[static_cast<unsigned>(tier)]) +
              " in " + EnumNameTierDef(tier);
  return text;
}

// The ops outside the decoder layers and where they run: "Embedding CPU/CPU, RmsNorm CPU/CPU".
std::string outsideOps(const PlanDef &def) {
  std::string text;
  for (uint32_t i = 0; i < count(def.ops()); ++i) {
    const OpDef &op = *def.ops()->Get(i);
    if (op.layer() >= 0)
      continue;
    text += (text.empty() ? "" : ", ") + std::string(EnumNameOpKindDef(op.kind())) + " " +
            deviceText(op.prefill_device()) + "/" + deviceText(op.device());
  }
  return text;
}

void printDevicePlan(const Plan &plan, std::ostream &os) {
  const PlanDef &def = plan.def();
  const std::string gpu = str(def.target_gpu());
  os << "\ndevices: target '" << str(def.target()) << "' ("
     << (gpu.empty() ? std::string("CPU only") : "GPU " + gpu) << ")\n";
  if (count(def.stages()) == 0) {
    os << "  no stage plans (a plan before schema 1.4): every op as its device column says\n";
  } else {
    const std::vector<Column> columns = {{8, false}, {7, false}, {13, false}, {14, false},
                                         {4, false}, {4, false}, {4, false},  {4, false},
                                         {4, false}, {4, false}, {0, false}};
    printRow(os, columns,
             {"stage", "layers", "group", "policy", "qkv", "qk", "sv", "out", "fc1", "fc2",
              "per layer"});
    for (const StagePlanDef *stage : *def.stages())
      for (const LayerGroupDef *group : *stage->groups()) {
        const auto policy = static_cast<uint8_t>(group->policy());
        std::vector<std::string> cells = {EnumNameStageDef(stage->stage()), layersText(*group),
                                          str(group->name()), policyText(policy)};
        for (unsigned i = 0; i < kCostSublayerCount; ++i)
          cells.push_back(sublayerDevice(policy, i));
        cells.push_back(millisecondsText(group->layer_seconds()));
        printRow(os, columns, cells);
      }
    os << "  policy: p_i = 1 runs sublayer i on the CPU (LIA); outside the layers "
          "(prefill/decode): "
       << outsideOps(def) << "\n";
    for (const StagePlanDef *stage : *def.stages())
      os << "  " << EnumNameStageDef(stage->stage()) << ": " << str(stage->reason()) << "\n";
  }
  os << "  memory tiers: weights " << tensorTiers(def) << "; KV cache "
     << tierText(def.kv_cache()->tier()) << "; activations " << tierText(def.activation_tier())
     << "\n";
  if (!str(def.tier_reason()).empty())
    os << "    why: " << str(def.tier_reason()) << "\n";
  for (uint32_t k = 0; k < count(def.stages()); ++k) {
    const StagePlanDef &stage = *def.stages()->Get(k);
    std::string groups;
    for (const LayerGroupDef *group : *stage.groups())
      groups += (groups.empty() ? "" : " | ") + str(group->name());
    os << "  policy table, " << EnumNameStageDef(stage.stage())
       << " (the row of the largest len <= L, the range holding B; policies of " << groups
       << "):\n";
    for (uint32_t r = 0; r < count(stage.policy_table()); ++r) {
      const PolicyRowDef &row = *stage.policy_table()->Get(r);
      os << "    len " << std::setw(8) << std::right << row.len() << std::left << ":";
      for (uint32_t i = 0; i < count(row.ranges()); ++i) {
        const PolicyRangeDef &range = *row.ranges()->Get(i);
        os << (i ? "," : "") << " B " << range.first_batch();
        if (range.last_batch() != range.first_batch())
          os << "-" << range.last_batch();
        os << " " << rangePolicies(range);
      }
      os << "\n";
    }
  }
  const GpuProbe probe = probeGpu();
  const std::string notice = gpuFallbackNotice(plan, probe);
  os << "  on this host: "
     << (notice.empty() ? "every op is assigned to the CPU"
                        : "this runtime does not split a plan between the CPU and the GPU and runs every op on the CPU (hetc run --device sim or cuda runs them all on one device)")
     << "; " << (probe.present() ? "a GPU is present (" : "no GPU (") << probe.describe() << ")\n";
}

Json policyArray(uint8_t policy) {
  Json array = Json::array();
  for (unsigned i = 0; i < kCostSublayerCount; ++i)
    array.push_back(uint32_t{(policy >> i & 1u)});
  return array;
}

// Doubles go in as they are: nlohmann::json writes a non-finite one as null.
void devicePlanJson(const Plan &plan, Json &json) {
  const PlanDef &def = plan.def();
  Json stages = Json::array();
  for (uint32_t k = 0; k < count(def.stages()); ++k) {
    const StagePlanDef &stage = *def.stages()->Get(k);
    Json groups = Json::array();
    for (const LayerGroupDef *group : *stage.groups()) {
      const auto policy = static_cast<uint8_t>(group->policy());
      Json devices = Json::object();
      for (unsigned i = 0; i < kCostSublayerCount; ++i)
        devices[costSublayerName(i)] = sublayerDevice(policy, i);
      groups.push_back({{"name", str(group->name())},
                        {"first_layer", group->first_layer()},
                        {"layers", group->layer_count()},
                        {"policy", policyArray(policy)},
                        {"devices", std::move(devices)},
                        {"layer_ms", group->layer_seconds() * 1e3}});
    }
    Json table = Json::array();
    for (uint32_t r = 0; r < count(stage.policy_table()); ++r) {
      const PolicyRowDef &row = *stage.policy_table()->Get(r);
      Json ranges = Json::array();
      for (uint32_t i = 0; i < count(row.ranges()); ++i) {
        const PolicyRangeDef &range = *row.ranges()->Get(i);
        Json policies = Json::array();
        for (uint32_t g = 0; g < count(range.policies()); ++g)
          policies.push_back(policyArray(static_cast<uint8_t>(range.policies()->Get(g))));
        ranges.push_back({{"first_batch", range.first_batch()},
                          {"last_batch", range.last_batch()},
                          {"policies", std::move(policies)}});
      }
      table.push_back({{"len", row.len()}, {"ranges", std::move(ranges)}});
    }
    stages.push_back({{"stage", EnumNameStageDef(stage.stage())},
                      {"batch", stage.batch()},
                      {"len", stage.len()},
                      {"predicted_ms", stage.predicted_seconds() * 1e3},
                      {"reason", str(stage.reason())},
                      {"groups", std::move(groups)},
                      {"policy_table", std::move(table)}});
  }
  json["stages"] = std::move(stages);
  json["activation_tier"] = tierText(def.activation_tier());
  json["tier_reason"] = str(def.tier_reason());
  const GpuProbe probe = probeGpu();
  json["host_gpu"] = {{"present", probe.present()},
                      {"device_node", probe.deviceNode},
                      {"driver_library", probe.driverPath},
                      {"notice", gpuFallbackNotice(plan, probe)}};
}

} // namespace

// "tokenizer.json from DIR/tokenizer.json, 1.71 MiB (1795303 bytes), bos 1, eos 2, chat template",
// or none.
std::string tokenizerText(const TokenizerDef *t) {
  if (!t)
    return "none (the plan runs with token ids)";
  std::string text = "tokenizer.json from " + str(t->source()) + ", " +
                     humanBytes(t->tokenizer_json() ? t->tokenizer_json()->size() : 0) + ", bos ";
  text += t->bos_token_id() < 0 ? "none" : std::to_string(t->bos_token_id());
  text += ", eos";
  if (!t->eos_token_ids() || t->eos_token_ids()->size() == 0)
    text += " none";
  else
    for (int32_t id : *t->eos_token_ids())
      text += " " + std::to_string(id);
  if (t->chat_template() && t->chat_template()->size() > 0)
    text += ", chat template";
  return text;
}

void printPlanSummary(const Plan &plan, std::ostream &os) {
  const PlanDef &def = plan.def();
  const ModelDef &m = *def.model();
  const BoundsDef &b = *def.bounds();
  const KvCacheDef &kv = *def.kv_cache();
  const PlanTotals totals = totalsOf(def);

  os << "plan: schema " << versionText(def.schema_version()) << " (this runtime reads "
     << versionText(kPlanSchemaVersion) << "), producer '" << str(def.producer()) << "', target '"
     << str(def.target()) << "'\n";
  os << "file: " << humanBytes(plan.fileSize()) << ", " << count(def.segments())
     << " weight segments holding " << humanBytes(totals.weightBytes) << "\n";
  os << "cpu features: " << featureLine(def.required_cpu_features()) << "\n\n";

  os << "model: " << str(m.architecture()) << ", vocab " << m.vocab() << ", hidden " << m.hidden()
     << ", layers " << m.layers() << ", heads " << m.heads() << ", kv_heads " << m.kv_heads()
     << ", head_dim " << m.head_dim() << ", intermediate " << m.intermediate() << ", rms_eps "
     << m.rms_eps() << ", tied embeddings " << (m.tied_embeddings() ? "yes" : "no") << "\n";
  os << "bounds: max_batch " << b.max_batch() << ", max_seq " << b.max_seq() << ", max_step_tokens "
     << b.max_step_tokens() << "\n";
  os << "tokenizer: " << tokenizerText(def.tokenizer()) << "\n\n";

  os << "sublayers (" << count(def.sublayers()) << "):\n";
  const std::vector<Column> sublayerColumns = {
      {4, true}, {5, true}, {12, false}, {6, false}, {0, false}};
  printRow(os, sublayerColumns, {"#", "layer", "kind", "device", "ops"});
  for (uint32_t i = 0; i < count(def.sublayers()); ++i) {
    const SublayerDef &s = *def.sublayers()->Get(i);
    printRow(os, sublayerColumns,
             {std::to_string(i), std::to_string(s.layer()), EnumNameSublayerKindDef(s.kind()),
              EnumNameDeviceDef(s.device()),
              "[" + std::to_string(s.first_op()) + ", " +
                  std::to_string(uint64_t{s.first_op()} + s.op_count()) + ")"});
  }

  os << "\nops (" << count(def.ops()) << ", " << totals.tasks
     << " tasks in total; devices prefill/decode, cost sublayers):\n";
  // Devices per stage: prefill/decode; cost: the cost model's sublayers the op computes.
  const std::vector<Column> opColumns = {{4, true},  {10, false}, {11, false}, {5, true},
                                         {8, true},  {7, false},  {6, false},  {10, false},
                                         {7, false}, {7, false},  {12, false}, {0, false}};
  printRow(os, opColumns,
           {"#", "kind", "fuses", "layer", "sublayer", "devices", "cost", "inputs", "outputs",
            "weights", "tasks x grain", "name"});
  for (uint32_t i = 0; i < count(def.ops()); ++i) {
    const OpDef &op = *def.ops()->Get(i);
    printRow(os, opColumns,
             {std::to_string(i), EnumNameOpKindDef(op.kind()), fusedText(op), layerText(op.layer()),
              layerText(op.sublayer()),
              std::string(deviceText(op.prefill_device())) + "/" + deviceText(op.device()),
              costSublayersText(static_cast<uint8_t>(op.cost_sublayers())), indexList(op.inputs()),
              indexList(op.outputs()), indexList(op.weights()),
              std::to_string(op.task_count()) + " x " + std::to_string(op.task_grain()),
              str(op.name())});
  }

  os << "\nbuffers (" << count(def.buffers()) << "), activation arena "
     << humanBytes(def.activation_arena_size()) << ", logits in buffer " << def.logits_buffer()
     << ":\n";
  const std::vector<Column> bufferColumns = {{4, true},  {7, false}, {5, false}, {14, true},
                                             {10, true}, {12, true}, {12, true}, {0, false}};
  printRow(os, bufferColumns,
           {"#", "role", "dtype", "rows x cols", "row stride", "bytes", "offset", "name"});
  for (uint32_t i = 0; i < count(def.buffers()); ++i) {
    const BufferDef &buf = *def.buffers()->Get(i);
    printRow(os, bufferColumns,
             {std::to_string(i), EnumNameBufferRoleDef(buf.role()), EnumNameDTypeDef(buf.dtype()),
              std::to_string(buf.rows()) + " x " + std::to_string(buf.cols()),
              std::to_string(buf.row_stride()), std::to_string(buf.rows() * buf.row_stride()),
              std::to_string(buf.offset()), str(buf.name())});
  }

  os << "\ntensors (" << count(def.tensors()) << "):\n";
  const std::vector<Column> tensorColumns = {{4, true},   {5, false}, {16, false},
                                             {16, false}, {7, true},  {12, true},
                                             {4, false},  {0, false}, {0, false}};
  printRow(os, tensorColumns,
           {"#", "dtype", "layout", "shape", "segment", "bytes", "tier", "name", "scheme"});
  for (uint32_t i = 0; i < count(def.tensors()); ++i) {
    const TensorDef &t = *def.tensors()->Get(i);
    printRow(os, tensorColumns,
             {std::to_string(i), EnumNameDTypeDef(t.dtype()), EnumNameWeightLayoutDef(t.layout()),
              shapeText(t.shape()), std::to_string(t.segment()),
              std::to_string(def.segments()->Get(t.segment())->size()), tierText(t.tier()),
              str(t.name()), "(" + weightScheme(t) + ")"});
  }

  os << "\nkv cache: " << EnumNameDTypeDef(kv.dtype()) << ", " << kvLayoutText(kv.dtype())
     << ", in " << tierText(kv.tier()) << "\n";
  os << "  dims: layers " << kv.layers() << ", slots " << kv.slots() << ", kv_heads "
     << kv.kv_heads() << ", max_seq " << kv.max_seq() << ", head_dim " << kv.head_dim() << "\n";
  os << "  strides (elements of " << dtypeBytes(kv.dtype()) << " bytes): pos " << kv.pos_stride()
     << ", head " << kv.head_stride() << ", slot " << kv.slot_stride() << ", layer "
     << kv.layer_stride() << "\n";
  os << "  K at byte " << kv.k_offset() << ", V at byte " << kv.v_offset() << ", arena "
     << humanBytes(kv.arena_size()) << "\n";
  if (kvHasRowScales(kv.dtype()))
    os << "  row scales (float32, max|x| / 127, [layer][slot][kv_head][pos]): K at byte "
       << kv.k_scale_offset() << ", V at byte " << kv.v_scale_offset() << ", strides head "
       << kv.scale_head_stride() << ", slot " << kv.scale_slot_stride() << ", layer "
       << kv.scale_layer_stride() << "\n";
  os << "  per position of one sequence: "
     << humanBytes(uint64_t{2} * kv.layers() * kv.kv_heads() *
                   kvRowBytes(kv.dtype(), kv.head_dim()))
     << " (K and V of every layer)\n";

  printDevicePlan(plan, os);

  os << "\nmemory: "
     << humanBytes(totals.weightBytes + kv.arena_size() + def.activation_arena_size())
     << " in total\n";
  os << "  weights " << humanBytes(totals.weightBytes) << "\n";
  os << "  kv cache " << humanBytes(kv.arena_size())
     << " (reserved; touched only as positions are written)\n";
  os << "  activation arena " << humanBytes(def.activation_arena_size()) << "\n";

  const HostKernels kernels = hostKernels(plan);
  os << "\nkernels on this host (" << describeCpuFeatures(hostCpuFeatures()) << "):\n";
  if (!kernels.error.empty())
    os << "  none: " << kernels.error << "\n";
  for (const KernelUse &use : kernels.uses)
    os << "  " << use.opKind << ": " << use.kernel << ", " << use.count
       << (use.count == 1 ? " op" : " ops") << "\n";
  if (kernels.error.empty())
    os << "  a step runs " << kernels.ops << " ops in " << kernels.phases
       << " phases (a barrier after each; independent linears share one)\n";
}

void printPlanJson(const Plan &plan, std::ostream &os) {
  const PlanDef &def = plan.def();
  const ModelDef &m = *def.model();
  const BoundsDef &b = *def.bounds();
  const KvCacheDef &kv = *def.kv_cache();
  const PlanTotals totals = totalsOf(def);

  Json json = {
      {"schema_version", versionText(def.schema_version())},
      {"runtime_schema_version", versionText(kPlanSchemaVersion)},
      {"producer", str(def.producer())},
      {"target", str(def.target())},
      {"target_gpu", str(def.target_gpu())},
      {"file_size", uint64_t{plan.fileSize()}},
      {"required_cpu_features", featureArray(def.required_cpu_features())},
      {"host_cpu_features", featureArray(hostCpuFeatures())},
      {"missing_cpu_features", featureArray(def.required_cpu_features() & ~hostCpuFeatures())}};

  if (const TokenizerDef *t = def.tokenizer()) {
    Json eos = Json::array();
    if (t->eos_token_ids())
      for (int32_t id : *t->eos_token_ids())
        eos.push_back(id);
    json["tokenizer"] = {{"source", str(t->source())},
                         {"bytes", uint64_t{t->tokenizer_json() ? t->tokenizer_json()->size() : 0}},
                         {"bos_token_id", t->bos_token_id()},
                         {"eos_token_ids", eos},
                         {"chat_template", str(t->chat_template())}};
  } else {
    json["tokenizer"] = nullptr;
  }
  json["model"] = {{"architecture", str(m.architecture())},
                   {"vocab", m.vocab()},
                   {"hidden", m.hidden()},
                   {"layers", m.layers()},
                   {"heads", m.heads()},
                   {"kv_heads", m.kv_heads()},
                   {"head_dim", m.head_dim()},
                   {"intermediate", m.intermediate()},
                   {"rms_eps", floatJson(m.rms_eps())},
                   {"tied_embeddings", m.tied_embeddings()}};

  json["bounds"] = {{"max_batch", b.max_batch()},
                    {"max_seq", b.max_seq()},
                    {"max_step_tokens", b.max_step_tokens()}};

  Json &sublayers = json["sublayers"] = Json::array();
  for (uint32_t i = 0; i < count(def.sublayers()); ++i) {
    const SublayerDef &s = *def.sublayers()->Get(i);
    sublayers.push_back({{"index", i},
                         {"layer", s.layer()},
                         {"kind", EnumNameSublayerKindDef(s.kind())},
                         {"device", EnumNameDeviceDef(s.device())},
                         {"first_op", s.first_op()},
                         {"op_count", s.op_count()}});
  }

  Json &ops = json["ops"] = Json::array();
  for (uint32_t i = 0; i < count(def.ops()); ++i) {
    const OpDef &op = *def.ops()->Get(i);
    ops.push_back({{"index", i},
                   {"kind", EnumNameOpKindDef(op.kind())},
                   {"fuses", fusedText(op)},
                   {"name", str(op.name())},
                   {"layer", op.layer()},
                   {"sublayer", op.sublayer()},
                   {"device", EnumNameDeviceDef(op.device())},
                   {"prefill_device", EnumNameDeviceDef(op.prefill_device())},
                   {"cost_sublayers", costSublayersText(static_cast<uint8_t>(op.cost_sublayers()))},
                   {"inputs", indexArray(op.inputs())},
                   {"outputs", indexArray(op.outputs())},
                   {"weights", indexArray(op.weights())},
                   {"task_count", op.task_count()},
                   {"task_grain", op.task_grain()}});
  }

  Json &buffers = json["buffers"] = Json::array();
  for (uint32_t i = 0; i < count(def.buffers()); ++i) {
    const BufferDef &buf = *def.buffers()->Get(i);
    buffers.push_back({{"index", i},
                       {"name", str(buf.name())},
                       {"role", EnumNameBufferRoleDef(buf.role())},
                       {"dtype", EnumNameDTypeDef(buf.dtype())},
                       {"rows", buf.rows()},
                       {"cols", buf.cols()},
                       {"row_stride", buf.row_stride()},
                       {"size", buf.rows() * buf.row_stride()},
                       {"offset", buf.offset()}});
  }
  json["activation_arena_size"] = def.activation_arena_size();
  json["logits_buffer"] = def.logits_buffer();

  Json &tensors = json["tensors"] = Json::array();
  for (uint32_t i = 0; i < count(def.tensors()); ++i) {
    const TensorDef &t = *def.tensors()->Get(i);
    Json shape = Json::array();
    for (uint32_t d = 0; d < count(t.shape()); ++d)
      shape.push_back(t.shape()->Get(d));
    tensors.push_back({{"index", i},
                       {"name", str(t.name())},
                       {"dtype", EnumNameDTypeDef(t.dtype())},
                       {"layout", EnumNameWeightLayoutDef(t.layout())},
                       {"shape", std::move(shape)},
                       {"segment", t.segment()},
                       {"size", def.segments()->Get(t.segment())->size()},
                       {"tier", tierText(t.tier())},
                       {"scheme", weightScheme(t)}});
  }

  Json &kvJson = json["kv_cache"] = {{"layout", kvLayoutText(kv.dtype())},
                                     {"dtype", EnumNameDTypeDef(kv.dtype())},
                                     {"layers", kv.layers()},
                                     {"slots", kv.slots()},
                                     {"kv_heads", kv.kv_heads()},
                                     {"max_seq", kv.max_seq()},
                                     {"head_dim", kv.head_dim()},
                                     {"pos_stride", kv.pos_stride()},
                                     {"head_stride", kv.head_stride()},
                                     {"slot_stride", kv.slot_stride()},
                                     {"layer_stride", kv.layer_stride()},
                                     {"k_offset", kv.k_offset()},
                                     {"v_offset", kv.v_offset()},
                                     {"arena_size", kv.arena_size()}};
  if (kvHasRowScales(kv.dtype())) {
    kvJson["k_scale_offset"] = kv.k_scale_offset();
    kvJson["v_scale_offset"] = kv.v_scale_offset();
    kvJson["scale_head_stride"] = kv.scale_head_stride();
    kvJson["scale_slot_stride"] = kv.scale_slot_stride();
    kvJson["scale_layer_stride"] = kv.scale_layer_stride();
  }
  kvJson["bytes_per_position"] =
      uint64_t{2} * kv.layers() * kv.kv_heads() * kvRowBytes(kv.dtype(), kv.head_dim());
  kvJson["tier"] = tierText(kv.tier());

  devicePlanJson(plan, json);

  json["segments"] = {{"count", count(def.segments())}, {"total_bytes", totals.weightBytes}};
  json["total_tasks"] = totals.tasks;

  // KV arena bytes are reserved address space, touched only as positions are written.
  json["memory"] = {
      {"weight_bytes", totals.weightBytes},
      {"kv_arena_bytes", kv.arena_size()},
      {"activation_arena_bytes", def.activation_arena_size()},
      {"total_bytes", totals.weightBytes + kv.arena_size() + def.activation_arena_size()}};

  const HostKernels kernels = hostKernels(plan);
  Json &kernelsJson = json["kernels"] = Json::array();
  for (const KernelUse &use : kernels.uses)
    kernelsJson.push_back(
        {{"op", use.opKind}, {"kernel", use.kernel}, {"count", uint64_t{use.count}}});
  if (!kernels.error.empty())
    json["kernels_error"] = kernels.error;
  json["step_ops"] = uint64_t{kernels.ops};
  json["step_phases"] = uint64_t{kernels.phases};

  // Compact, on one line. Names come from the model file: bytes that are not UTF-8 become U+FFFD
  // rather than an exception.
  os << json.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
}

} // namespace hetc
