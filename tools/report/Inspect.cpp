#include "tools/report/Inspect.h"

#include "runtime/platform/CpuFeatures.h"
#include "runtime/platform/Devices.h"
#include "runtime/executor/Engine.h"
#include "runtime/format/Plan.h"

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

// The KV layout as KvCacheDef in runtime/schema/hplan.fbs defines it for `dtype`.
const char *kvLayoutText(DTypeDef dtype) {
  return kvInBlocks(dtype)
             ? "dimension-first [layer][slot][kv_head], positions in blocks of 16 for vdpbf16ps "
               "(K [pos/16][dim/2][16][2], V [pos/16][8][dim][2])"
             : "dimension-first [layer][slot][kv_head][pos][dim]";
}

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

// The ops an op carries out besides its own: a Linear's epilogue ("add", a residual add;
// "swiglu/gate" or "swiglu/up", a swiglu whose gate or up operand it computes) or the ropes an
// Attention applies to q and k before writing K into the cache ("rope q,k"); "-" for none.
std::string fusedText(const OpDef &op) {
  if (op.kind() == OpKindDef::Attention) {
    const AttentionParamsDef *params = op.params_as_AttentionParamsDef();
    return params && params->rope() ? "rope q,k" : "-";
  }
  const LinearParamsDef *params =
      op.kind() == OpKindDef::Linear ? op.params_as_LinearParamsDef() : nullptr;
  if (!params)
    return "-";
  if (params->residual())
    return "add";
  switch (params->swiglu()) {
  case SwiGluRoleDef::Gate:
    return "swiglu/gate";
  case SwiGluRoleDef::Up:
    return "swiglu/up";
  default:
    return "-";
  }
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

// Minimal JSON emission: handles commas and string escaping; numbers are written exactly.
class JsonWriter {
public:
  explicit JsonWriter(std::ostream &os) : os_(os) {}

  void beginObject() { open('{'); }
  void endObject() { close('}'); }
  void beginArray() { open('['); }
  void endArray() { close(']'); }
  void key(const std::string &name) {
    separate();
    writeString(name);
    os_ << ':';
    afterKey_ = true;
  }
  void value(const std::string &text) {
    separate();
    writeString(text);
  }
  void value(const char *text) { value(std::string(text)); }
  void value(uint64_t number) {
    separate();
    os_ << number;
  }
  void value(int64_t number) {
    separate();
    os_ << number;
  }
  void value(uint32_t number) { value(static_cast<uint64_t>(number)); }
  void value(int32_t number) { value(static_cast<int64_t>(number)); }
  void value(bool flag) {
    separate();
    os_ << (flag ? "true" : "false");
  }
  void value(double number) {
    separate();
    if (!std::isfinite(number)) {
      os_ << "null";
      return;
    }
    char text[32];
    std::snprintf(text, sizeof(text), "%.17g", number);
    os_ << text;
  }
  void value(float number) {
    separate();
    if (!std::isfinite(number)) {
      os_ << "null";
      return;
    }
    // The shortest text that reads back as the same float: 1e-05, not 9.99999975e-06.
    char text[32];
    for (int precision = 6; precision <= 9; ++precision) {
      std::snprintf(text, sizeof(text), "%.*g", precision, static_cast<double>(number));
      if (std::strtof(text, nullptr) == number)
        break;
    }
    os_ << text;
  }
  template <typename T> void field(const std::string &name, const T &v) {
    key(name);
    value(v);
  }
  void indexArray(const std::string &name, const flatbuffers::Vector<uint32_t> *indices) {
    key(name);
    beginArray();
    for (uint32_t i = 0; i < count(indices); ++i)
      value(indices->Get(i));
    endArray();
  }

private:
  void open(char bracket) {
    separate();
    os_ << bracket;
    first_ = true;
  }
  void close(char bracket) {
    os_ << bracket;
    first_ = false;
  }
  void separate() {
    if (afterKey_) {
      afterKey_ = false;
      return;
    }
    if (!first_)
      os_ << ',';
    first_ = false;
  }
  void writeString(const std::string &text) {
    os_ << '"';
    for (unsigned char c : text) {
      switch (c) {
      case '"':
        os_ << "\\\"";
        break;
      case '\\':
        os_ << "\\\\";
        break;
      case '\n':
        os_ << "\\n";
        break;
      case '\r':
        os_ << "\\r";
        break;
      case '\t':
        os_ << "\\t";
        break;
      default:
        if (c < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          os_ << escaped;
        } else {
          os_ << c;
        }
      }
    }
    os_ << '"';
  }

  std::ostream &os_;
  bool first_ = true;
  bool afterKey_ = false;
};

void featureArray(JsonWriter &json, const std::string &name, uint64_t bits) {
  json.key(name);
  json.beginArray();
  if (bits) {
    std::istringstream names(describeCpuFeatures(bits));
    std::string feature;
    while (names >> feature)
      json.value(feature);
  }
  json.endArray();
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
                        : "this runtime has no GPU executor and runs every op on the CPU")
     << "; " << (probe.present() ? "a GPU is present (" : "no GPU (") << probe.describe() << ")\n";
}

void policyArray(JsonWriter &json, uint8_t policy) {
  json.beginArray();
  for (unsigned i = 0; i < kCostSublayerCount; ++i)
    json.value(uint32_t{(policy >> i & 1u)});
  json.endArray();
}

void devicePlanJson(const Plan &plan, JsonWriter &json) {
  const PlanDef &def = plan.def();
  json.key("stages");
  json.beginArray();
  for (uint32_t k = 0; k < count(def.stages()); ++k) {
    const StagePlanDef &stage = *def.stages()->Get(k);
    json.beginObject();
    json.field("stage", EnumNameStageDef(stage.stage()));
    json.field("batch", stage.batch());
    json.field("len", stage.len());
    json.field("predicted_ms", stage.predicted_seconds() * 1e3);
    json.field("reason", str(stage.reason()));
    json.key("groups");
    json.beginArray();
    for (const LayerGroupDef *group : *stage.groups()) {
      const auto policy = static_cast<uint8_t>(group->policy());
      json.beginObject();
      json.field("name", str(group->name()));
      json.field("first_layer", group->first_layer());
      json.field("layers", group->layer_count());
      json.key("policy");
      policyArray(json, policy);
      json.key("devices");
      json.beginObject();
      for (unsigned i = 0; i < kCostSublayerCount; ++i)
        json.field(costSublayerName(i), sublayerDevice(policy, i));
      json.endObject();
      json.field("layer_ms", group->layer_seconds() * 1e3);
      json.endObject();
    }
    json.endArray();
    json.key("policy_table");
    json.beginArray();
    for (uint32_t r = 0; r < count(stage.policy_table()); ++r) {
      const PolicyRowDef &row = *stage.policy_table()->Get(r);
      json.beginObject();
      json.field("len", row.len());
      json.key("ranges");
      json.beginArray();
      for (uint32_t i = 0; i < count(row.ranges()); ++i) {
        const PolicyRangeDef &range = *row.ranges()->Get(i);
        json.beginObject();
        json.field("first_batch", range.first_batch());
        json.field("last_batch", range.last_batch());
        json.key("policies");
        json.beginArray();
        for (uint32_t g = 0; g < count(range.policies()); ++g)
          policyArray(json, static_cast<uint8_t>(range.policies()->Get(g)));
        json.endArray();
        json.endObject();
      }
      json.endArray();
      json.endObject();
    }
    json.endArray();
    json.endObject();
  }
  json.endArray();
  json.field("activation_tier", tierText(def.activation_tier()));
  json.field("tier_reason", str(def.tier_reason()));
  const GpuProbe probe = probeGpu();
  json.key("host_gpu");
  json.beginObject();
  json.field("present", probe.present());
  json.field("device_node", probe.deviceNode);
  json.field("driver_library", probe.driverPath);
  json.field("notice", gpuFallbackNotice(plan, probe));
  json.endObject();
}

} // namespace

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
     << b.max_step_tokens() << "\n\n";

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
  const std::vector<Column> opColumns = {{4, true},  {9, false}, {11, false}, {5, true},
                                         {8, true},  {7, false}, {6, false},  {10, false},
                                         {7, false}, {7, false}, {12, false}, {0, false}};
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
  const std::vector<Column> tensorColumns = {{4, true}, {5, false}, {8, false}, {16, false},
                                             {7, true}, {12, true}, {4, false}, {0, false}};
  printRow(os, tensorColumns,
           {"#", "dtype", "layout", "shape", "segment", "bytes", "tier", "name"});
  for (uint32_t i = 0; i < count(def.tensors()); ++i) {
    const TensorDef &t = *def.tensors()->Get(i);
    printRow(os, tensorColumns,
             {std::to_string(i), EnumNameDTypeDef(t.dtype()), EnumNameWeightLayoutDef(t.layout()),
              shapeText(t.shape()), std::to_string(t.segment()),
              std::to_string(def.segments()->Get(t.segment())->size()), tierText(t.tier()),
              str(t.name())});
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
  JsonWriter json(os);

  json.beginObject();
  json.field("schema_version", versionText(def.schema_version()));
  json.field("runtime_schema_version", versionText(kPlanSchemaVersion));
  json.field("producer", str(def.producer()));
  json.field("target", str(def.target()));
  json.field("target_gpu", str(def.target_gpu()));
  json.field("file_size", uint64_t{plan.fileSize()});
  featureArray(json, "required_cpu_features", def.required_cpu_features());
  featureArray(json, "host_cpu_features", hostCpuFeatures());
  featureArray(json, "missing_cpu_features", def.required_cpu_features() & ~hostCpuFeatures());

  json.key("model");
  json.beginObject();
  json.field("architecture", str(m.architecture()));
  json.field("vocab", m.vocab());
  json.field("hidden", m.hidden());
  json.field("layers", m.layers());
  json.field("heads", m.heads());
  json.field("kv_heads", m.kv_heads());
  json.field("head_dim", m.head_dim());
  json.field("intermediate", m.intermediate());
  json.field("rms_eps", m.rms_eps());
  json.field("tied_embeddings", m.tied_embeddings());
  json.endObject();

  json.key("bounds");
  json.beginObject();
  json.field("max_batch", b.max_batch());
  json.field("max_seq", b.max_seq());
  json.field("max_step_tokens", b.max_step_tokens());
  json.endObject();

  json.key("sublayers");
  json.beginArray();
  for (uint32_t i = 0; i < count(def.sublayers()); ++i) {
    const SublayerDef &s = *def.sublayers()->Get(i);
    json.beginObject();
    json.field("index", i);
    json.field("layer", s.layer());
    json.field("kind", EnumNameSublayerKindDef(s.kind()));
    json.field("device", EnumNameDeviceDef(s.device()));
    json.field("first_op", s.first_op());
    json.field("op_count", s.op_count());
    json.endObject();
  }
  json.endArray();

  json.key("ops");
  json.beginArray();
  for (uint32_t i = 0; i < count(def.ops()); ++i) {
    const OpDef &op = *def.ops()->Get(i);
    json.beginObject();
    json.field("index", i);
    json.field("kind", EnumNameOpKindDef(op.kind()));
    json.field("fuses", fusedText(op));
    json.field("name", str(op.name()));
    json.field("layer", op.layer());
    json.field("sublayer", op.sublayer());
    json.field("device", EnumNameDeviceDef(op.device()));
    json.field("prefill_device", EnumNameDeviceDef(op.prefill_device()));
    json.field("cost_sublayers", costSublayersText(static_cast<uint8_t>(op.cost_sublayers())));
    json.indexArray("inputs", op.inputs());
    json.indexArray("outputs", op.outputs());
    json.indexArray("weights", op.weights());
    json.field("task_count", op.task_count());
    json.field("task_grain", op.task_grain());
    json.endObject();
  }
  json.endArray();

  json.key("buffers");
  json.beginArray();
  for (uint32_t i = 0; i < count(def.buffers()); ++i) {
    const BufferDef &buf = *def.buffers()->Get(i);
    json.beginObject();
    json.field("index", i);
    json.field("name", str(buf.name()));
    json.field("role", EnumNameBufferRoleDef(buf.role()));
    json.field("dtype", EnumNameDTypeDef(buf.dtype()));
    json.field("rows", buf.rows());
    json.field("cols", buf.cols());
    json.field("row_stride", buf.row_stride());
    json.field("size", buf.rows() * buf.row_stride());
    json.field("offset", buf.offset());
    json.endObject();
  }
  json.endArray();
  json.field("activation_arena_size", def.activation_arena_size());
  json.field("logits_buffer", def.logits_buffer());

  json.key("tensors");
  json.beginArray();
  for (uint32_t i = 0; i < count(def.tensors()); ++i) {
    const TensorDef &t = *def.tensors()->Get(i);
    json.beginObject();
    json.field("index", i);
    json.field("name", str(t.name()));
    json.field("dtype", EnumNameDTypeDef(t.dtype()));
    json.field("layout", EnumNameWeightLayoutDef(t.layout()));
    json.key("shape");
    json.beginArray();
    for (uint32_t d = 0; d < count(t.shape()); ++d)
      json.value(t.shape()->Get(d));
    json.endArray();
    json.field("segment", t.segment());
    json.field("size", def.segments()->Get(t.segment())->size());
    json.field("tier", tierText(t.tier()));
    json.endObject();
  }
  json.endArray();

  json.key("kv_cache");
  json.beginObject();
  json.field("layout", kvLayoutText(kv.dtype()));
  json.field("dtype", EnumNameDTypeDef(kv.dtype()));
  json.field("layers", kv.layers());
  json.field("slots", kv.slots());
  json.field("kv_heads", kv.kv_heads());
  json.field("max_seq", kv.max_seq());
  json.field("head_dim", kv.head_dim());
  json.field("pos_stride", kv.pos_stride());
  json.field("head_stride", kv.head_stride());
  json.field("slot_stride", kv.slot_stride());
  json.field("layer_stride", kv.layer_stride());
  json.field("k_offset", kv.k_offset());
  json.field("v_offset", kv.v_offset());
  json.field("arena_size", kv.arena_size());
  if (kvHasRowScales(kv.dtype())) {
    json.field("k_scale_offset", kv.k_scale_offset());
    json.field("v_scale_offset", kv.v_scale_offset());
    json.field("scale_head_stride", kv.scale_head_stride());
    json.field("scale_slot_stride", kv.scale_slot_stride());
    json.field("scale_layer_stride", kv.scale_layer_stride());
  }
  json.field("bytes_per_position",
             uint64_t{2} * kv.layers() * kv.kv_heads() * kvRowBytes(kv.dtype(), kv.head_dim()));
  json.field("tier", tierText(kv.tier()));
  json.endObject();

  devicePlanJson(plan, json);

  json.key("segments");
  json.beginObject();
  json.field("count", count(def.segments()));
  json.field("total_bytes", totals.weightBytes);
  json.endObject();
  json.field("total_tasks", totals.tasks);

  // KV arena bytes are reserved address space, touched only as positions are written.
  json.key("memory");
  json.beginObject();
  json.field("weight_bytes", totals.weightBytes);
  json.field("kv_arena_bytes", kv.arena_size());
  json.field("activation_arena_bytes", def.activation_arena_size());
  json.field("total_bytes", totals.weightBytes + kv.arena_size() + def.activation_arena_size());
  json.endObject();

  const HostKernels kernels = hostKernels(plan);
  json.key("kernels");
  json.beginArray();
  for (const KernelUse &use : kernels.uses) {
    json.beginObject();
    json.field("op", use.opKind);
    json.field("kernel", use.kernel);
    json.field("count", uint64_t{use.count});
    json.endObject();
  }
  json.endArray();
  if (!kernels.error.empty())
    json.field("kernels_error", kernels.error);
  json.field("step_ops", uint64_t{kernels.ops});
  json.field("step_phases", uint64_t{kernels.phases});
  json.endObject();
  os << '\n';
}

} // namespace hetc
