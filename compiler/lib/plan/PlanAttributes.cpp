#include "hetc/compiler/PlanAttributes.h"

#include "hetc/Dialect/HetcDialect.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/ErrorHandling.h"

#include <string>

using namespace mlir;

namespace hetc::planning {
namespace {

// A name a dictionary field may hold and the value it stands for.
template <typename T> struct Named {
  StringLiteral name;
  T value;
};

constexpr Named<Architecture> kArchitectures[] = {{"llama", Architecture::Llama},
                                                  {"opt", Architecture::Opt}};
constexpr Named<plan::DTypeDef> kKvDtypes[] = {
    {"f32", plan::DTypeDef::F32}, {"bf16", plan::DTypeDef::BF16}, {"int8", plan::DTypeDef::INT8}};
constexpr Named<plan::BufferRoleDef> kBufferRoles[] = {{"hidden", plan::BufferRoleDef::Hidden},
                                                       {"scratch", plan::BufferRoleDef::Scratch},
                                                       {"logits", plan::BufferRoleDef::Logits}};
constexpr Named<plan::SublayerKindDef> kSublayerKinds[] = {
    {"attention", plan::SublayerKindDef::Attention},
    {"feed_forward", plan::SublayerKindDef::FeedForward}};

constexpr Named<compiler::Tier> kTiers[] = {
    {"gpu", compiler::Tier::Gpu}, {"ddr", compiler::Tier::Ddr}, {"cxl", compiler::Tier::Cxl}};
constexpr Named<compiler::Timing> kTimings[] = {{"serial", compiler::Timing::Serial},
                                                {"overlapped", compiler::Timing::Overlapped}};
// As compiler::placementName writes them.
constexpr Named<compiler::Placement> kPlacements[] = {{"auto", compiler::Placement::Auto},
                                                      {"ddr", compiler::Placement::Ddr},
                                                      {"cxl", compiler::Placement::Cxl},
                                                      {"helm", compiler::Placement::Helm},
                                                      {"all-cpu", compiler::Placement::AllCpu}};

template <typename T, size_t N>
std::optional<T> valueNamed(const Named<T> (&names)[N], StringRef name) {
  for (const Named<T> &named : names)
    if (named.name == name)
      return named.value;
  return std::nullopt;
}

template <typename T, size_t N> StringRef nameOf(const Named<T> (&names)[N], T value) {
  for (const Named<T> &named : names)
    if (named.value == value)
      return named.name;
  llvm_unreachable("every value has a name");
}

// "a, b or c".
template <typename T, size_t N> std::string nameList(const Named<T> (&names)[N]) {
  std::string text;
  for (size_t i = 0; i < N; ++i)
    text += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + names[i].name.str();
  return text;
}

// The CPU bits of a policy written "(p1,p2,p3,p4,p5,p6)" with each p 0 or 1 (bit i is p_{i+1}), as
// compiler::Policy::text writes it; none for any other text.
std::optional<unsigned> parsePolicyText(StringRef text) {
  constexpr unsigned kSublayers = 6;
  if (!text.consume_front("(") || !text.consume_back(")"))
    return std::nullopt;
  SmallVector<StringRef, kSublayers> values;
  text.split(values, ',');
  if (values.size() != kSublayers)
    return std::nullopt;
  unsigned bits = 0;
  for (auto [i, value] : llvm::enumerate(values)) {
    if (value == "1")
      bits |= 1u << i;
    else if (value != "0")
      return std::nullopt;
  }
  return bits;
}

enum class Range { NonNegative, NonNegative32, Positive, Positive32 };

// The module attribute `name`; null after an error saying that `user` needs it and `producer`
// records it.
template <typename AttrT>
AttrT requireModuleAttr(ModuleOp module, StringRef name, StringRef user, StringRef producer) {
  auto attr = module->getAttrOfType<AttrT>(name);
  if (!attr)
    module.emitError() << user << " needs the module's " << name << " attribute; run " << producer
                       << " first";
  return attr;
}

// Reads the fields of a dictionary attribute of `owner`. The first field that is missing or out
// of range is an error on `owner` naming the attribute and the field; reads after it return
// default values (0, "", false, the first name) and report nothing, so one check of failed() at
// the end covers them all.
class FieldReader {
public:
  FieldReader(Operation *owner, const Twine &attr, DictionaryAttr dict)
      : owner_(owner), dict_(dict), onModule_(isa<ModuleOp>(owner)),
        subject_((onModule_ ? "the module's " + attr + " has" : "has " + attr).str()) {}

  bool failed() const { return failed_; }

  int64_t integer(StringRef field, Range range) {
    auto value = get<IntegerAttr>(field);
    // getInt() is for signless integers of up to 64 bits; any other is malformed here.
    if (value &&
        (!value.getType().isSignlessInteger() || value.getType().getIntOrFloatBitWidth() > 64))
      value = IntegerAttr();
    const bool nonNegative = range == Range::NonNegative || range == Range::NonNegative32;
    const bool within32 = range == Range::NonNegative32 || range == Range::Positive32;
    const int64_t min = nonNegative ? 0 : 1;
    const int64_t max = within32 ? UINT32_MAX : INT64_MAX;
    if (value && value.getInt() >= min && value.getInt() <= max)
      return value.getInt();
    missing(field,
            (Twine(nonNegative ? "non-negative" : "positive") + (within32 ? " 32-bit" : "")).str());
    return 0;
  }

  double real(StringRef field) {
    if (auto value = get<FloatAttr>(field))
      return value.getValueAsDouble();
    missing(field, "float");
    return 0;
  }

  float f32(StringRef field) { return static_cast<float>(real(field)); }

  bool flag(StringRef field) {
    if (auto value = get<BoolAttr>(field))
      return value.getValue();
    missing(field, "bool");
    return false;
  }

  StringRef text(StringRef field) {
    if (auto value = get<StringAttr>(field))
      return value.getValue();
    missing(field, "string");
    return "";
  }

  // The array's entries must be dictionaries or strings, as `field` holds them: `each` reads them.
  ArrayAttr array(StringRef field) {
    if (auto value = get<ArrayAttr>(field))
      return value;
    missing(field, "array");
    return ArrayAttr();
  }

  DictionaryAttr dictionary(StringRef field) {
    if (auto value = get<DictionaryAttr>(field))
      return value;
    missing(field, "dictionary");
    return DictionaryAttr();
  }

  // A policy "(p1,...,p6)" of zeros and ones: the field, or an entry of the array it holds.
  compiler::Policy policy(StringRef field) { return policyOf(field, get<Attribute>(field)); }
  compiler::Policy policyOf(StringRef field, Attribute entry) {
    auto text = dyn_cast_or_null<StringAttr>(entry);
    if (std::optional<unsigned> bits = text ? parsePolicyText(text.getValue()) : std::nullopt)
      return compiler::Policy::fromBits(*bits);
    if (!failed_)
      report() << " " << field << " " << (text ? "'" + text.getValue().str() + "'" : "missing")
               << ", not a policy \"(p1,...,p6)\" of zeros and ones";
    return compiler::Policy();
  }

  template <typename T, size_t N> T oneOf(StringRef field, const Named<T> (&names)[N]) {
    StringRef name = text(field);
    if (std::optional<T> value = valueNamed(names, name))
      return *value;
    if (!failed_)
      report() << " " << field << " '" << name << "'; expected " << nameList(names);
    return names[0].value;
  }

private:
  template <typename AttrT> AttrT get(StringRef field) const {
    return dict_ ? dict_.getAs<AttrT>(field) : AttrT();
  }

  void missing(StringRef field, const Twine &what) {
    if (!failed_)
      report() << (onModule_ ? " no " : " with no ") << what << " '" << field << "'";
  }

  // "the module's hetc.model has ..." or "'hetc.add' op has hetc.sublayer ...".
  InFlightDiagnostic report() {
    failed_ = true;
    return (onModule_ ? owner_->emitError() : owner_->emitOpError()) << subject_;
  }

  Operation *owner_;
  DictionaryAttr dict_;
  bool onModule_;
  std::string subject_;
  bool failed_ = false;
};

} // namespace

StringRef tierAttrName(compiler::Tier tier) { return nameOf(kTiers, tier); }

std::optional<compiler::Tier> tierNamed(StringRef name) { return valueNamed(kTiers, name); }

std::optional<plan::DTypeDef> kvDtypeFromName(StringRef name) {
  return valueNamed(kKvDtypes, name);
}

StringRef bufferRoleName(plan::BufferRoleDef role) { return nameOf(kBufferRoles, role); }

StringRef architectureName(Architecture architecture) {
  return nameOf(kArchitectures, architecture);
}

DictionaryAttr ModelAttrs::toAttr(Builder &b) const {
  return b.getDictionaryAttr({
      b.getNamedAttr("architecture", b.getStringAttr(architectureName(architecture))),
      b.getNamedAttr("vocab", b.getI64IntegerAttr(vocab)),
      b.getNamedAttr("hidden", b.getI64IntegerAttr(hidden)),
      b.getNamedAttr("layers", b.getI64IntegerAttr(layers)),
      b.getNamedAttr("heads", b.getI64IntegerAttr(heads)),
      b.getNamedAttr("kv_heads", b.getI64IntegerAttr(kvHeads)),
      b.getNamedAttr("head_dim", b.getI64IntegerAttr(headDim)),
      b.getNamedAttr("intermediate", b.getI64IntegerAttr(intermediate)),
      b.getNamedAttr("rms_eps", b.getF32FloatAttr(rmsEps)),
      b.getNamedAttr("tied_embeddings", b.getBoolAttr(tiedEmbeddings)),
  });
}

FailureOr<ModelAttrs> ModelAttrs::read(ModuleOp module, StringRef user) {
  auto dict = requireModuleAttr<DictionaryAttr>(module, kModel, user, "hetc-group-sublayers");
  if (!dict)
    return failure();
  FieldReader in(module, kModel, dict);
  ModelAttrs model;
  model.architecture = in.oneOf("architecture", kArchitectures);
  model.vocab = in.integer("vocab", Range::Positive32);
  model.hidden = in.integer("hidden", Range::Positive32);
  model.layers = in.integer("layers", Range::Positive32);
  model.heads = in.integer("heads", Range::Positive32);
  model.kvHeads = in.integer("kv_heads", Range::Positive32);
  model.headDim = in.integer("head_dim", Range::Positive32);
  model.intermediate = in.integer("intermediate", Range::Positive32);
  model.rmsEps = in.f32("rms_eps");
  model.tiedEmbeddings = in.flag("tied_embeddings");
  if (in.failed())
    return failure();
  return model;
}

compiler::ModelShape ModelAttrs::shape() const {
  compiler::ModelShape shape;
  shape.layers = static_cast<uint32_t>(layers);
  shape.hidden = static_cast<uint32_t>(hidden);
  shape.heads = static_cast<uint32_t>(heads);
  shape.kvHeads = static_cast<uint32_t>(kvHeads);
  shape.headDim = static_cast<uint32_t>(headDim);
  shape.ffn = static_cast<uint32_t>(intermediate);
  shape.vocab = static_cast<uint32_t>(vocab);
  shape.gatedFfn = architecture == Architecture::Llama;
  shape.tiedEmbeddings = tiedEmbeddings;
  return shape;
}

DictionaryAttr BoundsAttrs::toAttr(Builder &b) const {
  return b.getDictionaryAttr({
      b.getNamedAttr("max_batch", b.getI64IntegerAttr(maxBatch)),
      b.getNamedAttr("max_seq", b.getI64IntegerAttr(maxSeq)),
      b.getNamedAttr("max_step_tokens", b.getI64IntegerAttr(maxStepTokens)),
  });
}

FailureOr<BoundsAttrs> BoundsAttrs::read(ModuleOp module, StringRef user) {
  auto dict = requireModuleAttr<DictionaryAttr>(module, kBounds, user, "hetc-plan-memory");
  if (!dict)
    return failure();
  FieldReader in(module, kBounds, dict);
  BoundsAttrs bounds;
  bounds.maxBatch = in.integer("max_batch", Range::Positive32);
  bounds.maxSeq = in.integer("max_seq", Range::Positive);
  bounds.maxStepTokens = in.integer("max_step_tokens", Range::Positive32);
  if (in.failed())
    return failure();
  return bounds;
}

DictionaryAttr KvCacheAttrs::toAttr(Builder &b) const {
  auto size = [&](uint64_t value) { return b.getI64IntegerAttr(static_cast<int64_t>(value)); };
  SmallVector<NamedAttribute> fields = {
      b.getNamedAttr("dtype", b.getStringAttr(nameOf(kKvDtypes, dtype))),
      b.getNamedAttr("layers", b.getI64IntegerAttr(layers)),
      b.getNamedAttr("slots", b.getI64IntegerAttr(slots)),
      b.getNamedAttr("kv_heads", b.getI64IntegerAttr(kvHeads)),
      b.getNamedAttr("max_seq", b.getI64IntegerAttr(maxSeq)),
      b.getNamedAttr("head_dim", b.getI64IntegerAttr(headDim)),
      b.getNamedAttr("pos_stride", size(layout.posStride)),
      b.getNamedAttr("head_stride", size(layout.headStride)),
      b.getNamedAttr("slot_stride", size(layout.slotStride)),
      b.getNamedAttr("layer_stride", size(layout.layerStride)),
      b.getNamedAttr("k_offset", size(layout.kOffset)),
      b.getNamedAttr("v_offset", size(layout.vOffset)),
      b.getNamedAttr("arena_size", size(layout.arenaSize)),
  };
  if (kvHasRowScales(dtype))
    fields.append({
        b.getNamedAttr("k_scale_offset", size(layout.kScaleOffset)),
        b.getNamedAttr("v_scale_offset", size(layout.vScaleOffset)),
        b.getNamedAttr("scale_head_stride", size(layout.scaleHeadStride)),
        b.getNamedAttr("scale_slot_stride", size(layout.scaleSlotStride)),
        b.getNamedAttr("scale_layer_stride", size(layout.scaleLayerStride)),
    });
  return b.getDictionaryAttr(fields);
}

FailureOr<KvCacheAttrs> KvCacheAttrs::read(ModuleOp module, StringRef user) {
  auto dict = requireModuleAttr<DictionaryAttr>(module, kKvCache, user, "hetc-plan-memory");
  if (!dict)
    return failure();
  FieldReader in(module, kKvCache, dict);
  auto size = [&](StringRef field) {
    return static_cast<uint64_t>(in.integer(field, Range::NonNegative));
  };
  KvCacheAttrs kv;
  kv.dtype = in.oneOf("dtype", kKvDtypes);
  kv.layers = in.integer("layers", Range::Positive32);
  kv.slots = in.integer("slots", Range::Positive32);
  kv.kvHeads = in.integer("kv_heads", Range::Positive32);
  kv.maxSeq = in.integer("max_seq", Range::Positive);
  kv.headDim = in.integer("head_dim", Range::Positive32);
  kv.layout.posStride = size("pos_stride");
  kv.layout.headStride = size("head_stride");
  kv.layout.slotStride = size("slot_stride");
  kv.layout.layerStride = size("layer_stride");
  kv.layout.kOffset = size("k_offset");
  kv.layout.vOffset = size("v_offset");
  kv.layout.arenaSize = size("arena_size");
  if (kvHasRowScales(kv.dtype)) {
    kv.layout.kScaleOffset = size("k_scale_offset");
    kv.layout.vScaleOffset = size("v_scale_offset");
    kv.layout.scaleHeadStride = size("scale_head_stride");
    kv.layout.scaleSlotStride = size("scale_slot_stride");
    kv.layout.scaleLayerStride = size("scale_layer_stride");
  }
  if (in.failed())
    return failure();
  return kv;
}

DictionaryAttr PlannedBuffer::toAttr(Builder &b) const {
  return b.getDictionaryAttr({
      b.getNamedAttr("name", b.getStringAttr(name)),
      b.getNamedAttr("role", b.getStringAttr(bufferRoleName(role))),
      b.getNamedAttr("offset", b.getI64IntegerAttr(offset)),
      b.getNamedAttr("rows", b.getI64IntegerAttr(rows)),
      b.getNamedAttr("cols", b.getI64IntegerAttr(cols)),
      b.getNamedAttr("row_stride", b.getI64IntegerAttr(rowStride)),
  });
}

FailureOr<SmallVector<PlannedBuffer>> readPlannedBuffers(ModuleOp module, StringRef user) {
  auto entries = requireModuleAttr<ArrayAttr>(module, kBuffers, user, "hetc-plan-memory");
  if (!entries)
    return failure();
  SmallVector<PlannedBuffer> buffers;
  for (auto [index, entry] : llvm::enumerate(entries)) {
    FieldReader in(module, Twine(kBuffers) + "[" + Twine(index) + "]",
                   dyn_cast<DictionaryAttr>(entry));
    PlannedBuffer buffer;
    buffer.name = in.text("name").str();
    buffer.role = in.oneOf("role", kBufferRoles);
    buffer.offset = in.integer("offset", Range::NonNegative);
    buffer.rows = in.integer("rows", Range::NonNegative);
    buffer.cols = in.integer("cols", Range::NonNegative);
    buffer.rowStride = in.integer("row_stride", Range::NonNegative);
    if (in.failed())
      return failure();
    buffers.push_back(std::move(buffer));
  }
  return buffers;
}

DictionaryAttr TaskAttrs::toAttr(Builder &b) const {
  return b.getDictionaryAttr({
      b.getNamedAttr("count", b.getI64IntegerAttr(count)),
      b.getNamedAttr("grain", b.getI64IntegerAttr(grain)),
  });
}

FailureOr<TaskAttrs> TaskAttrs::read(Operation *op) {
  auto dict = op->getAttrOfType<DictionaryAttr>(kTasks);
  if (!dict)
    return op->emitOpError("has no hetc.tasks; run hetc-partition-tasks first");
  FieldReader in(op, kTasks, dict);
  TaskAttrs tasks;
  tasks.count = in.integer("count", Range::Positive32);
  tasks.grain = in.integer("grain", Range::Positive);
  if (in.failed())
    return failure();
  return tasks;
}

DictionaryAttr SublayerAttrs::toAttr(Builder &b) const {
  return b.getDictionaryAttr({
      b.getNamedAttr("index", b.getI64IntegerAttr(index)),
      b.getNamedAttr("kind", b.getStringAttr(nameOf(kSublayerKinds, kind))),
  });
}

FailureOr<SublayerAttrs> SublayerAttrs::read(Operation *op) {
  auto dict = op->getAttrOfType<DictionaryAttr>(kSublayer);
  if (!dict)
    return op->emitOpError("has no hetc.sublayer; run hetc-group-sublayers first");
  FieldReader in(op, kSublayer, dict);
  SublayerAttrs sublayer;
  sublayer.index = in.integer("index", Range::NonNegative);
  sublayer.kind = in.oneOf("kind", kSublayerKinds);
  if (in.failed())
    return failure();
  return sublayer;
}

namespace {

DictionaryAttr stageAttr(Builder &b, const compiler::StageAssignment &stage) {
  SmallVector<Attribute> groups;
  for (const compiler::LayerSpan &span : stage.spans)
    groups.push_back(b.getDictionaryAttr({
        b.getNamedAttr("name", b.getStringAttr(span.group)),
        b.getNamedAttr("first_layer", b.getI64IntegerAttr(span.firstLayer)),
        b.getNamedAttr("layers", b.getI64IntegerAttr(span.layers)),
        b.getNamedAttr("policy", b.getStringAttr(span.policy.text())),
        b.getNamedAttr("layer_ms", b.getF64FloatAttr(span.layerSeconds * 1e3)),
    }));
  SmallVector<Attribute> rows;
  for (const compiler::PolicyRow &row : stage.table.rows) {
    SmallVector<Attribute> ranges;
    for (const compiler::PolicyRange &range : row.ranges) {
      SmallVector<Attribute> policies;
      for (compiler::Policy policy : range.groupPolicies)
        policies.push_back(b.getStringAttr(policy.text()));
      ranges.push_back(b.getDictionaryAttr({
          b.getNamedAttr("first_batch", b.getI64IntegerAttr(range.firstBatch)),
          b.getNamedAttr("last_batch", b.getI64IntegerAttr(range.lastBatch)),
          b.getNamedAttr("policies", b.getArrayAttr(policies)),
      }));
    }
    rows.push_back(b.getDictionaryAttr({
        b.getNamedAttr("len", b.getI64IntegerAttr(row.len)),
        b.getNamedAttr("ranges", b.getArrayAttr(ranges)),
    }));
  }
  return b.getDictionaryAttr({
      b.getNamedAttr("batch", b.getI64IntegerAttr(stage.batch)),
      b.getNamedAttr("len", b.getI64IntegerAttr(stage.len)),
      b.getNamedAttr("predicted_ms", b.getF64FloatAttr(stage.seconds * 1e3)),
      b.getNamedAttr("reason", b.getStringAttr(stage.reason)),
      b.getNamedAttr("groups", b.getArrayAttr(groups)),
      b.getNamedAttr("table", b.getArrayAttr(rows)),
  });
}

// hetc.device_plan.<name> into `stage`; the first error names the entry, as
// "hetc.device_plan.decode.table[0].ranges[1]".
LogicalResult readStage(ModuleOp module, DictionaryAttr dict, StringRef name,
                        compiler::StageAssignment &stage) {
  const std::string where = (Twine(kDevicePlan) + "." + name).str();
  auto path = [&](const Twine &entry) { return (where + entry).str(); };
  FieldReader in(module, where, dict);
  stage.stage = name == kPrefillStage ? compiler::Stage::Prefill : compiler::Stage::Decode;
  stage.table.stage = stage.stage;
  stage.batch = static_cast<uint64_t>(in.integer("batch", Range::Positive32));
  stage.len = static_cast<uint64_t>(in.integer("len", Range::Positive));
  stage.seconds = in.real("predicted_ms") / 1e3;
  stage.reason = in.text("reason").str();
  ArrayAttr groups = in.array("groups");
  ArrayAttr table = in.array("table");
  if (in.failed())
    return failure();
  for (auto [index, attr] : llvm::enumerate(groups)) {
    FieldReader group(module, path(".groups[" + Twine(index) + "]"),
                      dyn_cast<DictionaryAttr>(attr));
    compiler::LayerSpan span;
    span.group = group.text("name").str();
    span.firstLayer = static_cast<uint32_t>(group.integer("first_layer", Range::NonNegative32));
    span.layers = static_cast<uint32_t>(group.integer("layers", Range::Positive32));
    span.policy = group.policy("policy");
    span.layerSeconds = group.real("layer_ms") / 1e3;
    if (group.failed())
      return failure();
    stage.spans.push_back(std::move(span));
  }
  for (auto [rowIndex, rowAttr] : llvm::enumerate(table)) {
    const std::string rowWhere = path(".table[" + Twine(rowIndex) + "]");
    FieldReader rowIn(module, rowWhere, dyn_cast<DictionaryAttr>(rowAttr));
    compiler::PolicyRow row;
    row.len = static_cast<uint64_t>(rowIn.integer("len", Range::Positive));
    ArrayAttr ranges = rowIn.array("ranges");
    if (rowIn.failed())
      return failure();
    for (auto [rangeIndex, rangeAttr] : llvm::enumerate(ranges)) {
      FieldReader rangeIn(module, rowWhere + ".ranges[" + std::to_string(rangeIndex) + "]",
                          dyn_cast<DictionaryAttr>(rangeAttr));
      compiler::PolicyRange range;
      range.firstBatch = static_cast<uint64_t>(rangeIn.integer("first_batch", Range::Positive32));
      range.lastBatch = static_cast<uint64_t>(rangeIn.integer("last_batch", Range::Positive32));
      ArrayAttr policies = rangeIn.array("policies");
      for (Attribute policy : policies ? policies.getValue() : ArrayRef<Attribute>())
        range.groupPolicies.push_back(rangeIn.policyOf("policies", policy));
      if (rangeIn.failed())
        return failure();
      row.ranges.push_back(std::move(range));
    }
    stage.table.rows.push_back(std::move(row));
  }
  return success();
}

} // namespace

DictionaryAttr devicePlanAttr(Builder &b, const compiler::DeviceAssignment &a) {
  return b.getDictionaryAttr({
      b.getNamedAttr("target", b.getStringAttr(a.target)),
      b.getNamedAttr("gpu", b.getStringAttr(a.gpu)),
      b.getNamedAttr("timing", b.getStringAttr(nameOf(kTimings, a.timing))),
      b.getNamedAttr("placement", b.getStringAttr(nameOf(kPlacements, a.placement))),
      b.getNamedAttr("resident_layers", b.getI64IntegerAttr(a.residentLayers)),
      b.getNamedAttr("weight_tier", b.getStringAttr(tierAttrName(a.weightHostTier))),
      b.getNamedAttr("kv_tier", b.getStringAttr(tierAttrName(a.kvTier))),
      b.getNamedAttr("activation_tier", b.getStringAttr(tierAttrName(a.activationTier))),
      b.getNamedAttr("tier_reason", b.getStringAttr(a.tierReason)),
      b.getNamedAttr(kPrefillStage, stageAttr(b, a.prefill)),
      b.getNamedAttr(kDecodeStage, stageAttr(b, a.decode)),
  });
}

FailureOr<compiler::DeviceAssignment> readDevicePlan(ModuleOp module, StringRef user) {
  auto dict = requireModuleAttr<DictionaryAttr>(module, kDevicePlan, user, "hetc-assign-devices");
  if (!dict)
    return failure();
  FieldReader in(module, kDevicePlan, dict);
  compiler::DeviceAssignment a;
  a.target = in.text("target").str();
  a.gpu = in.text("gpu").str();
  a.timing = in.oneOf("timing", kTimings);
  a.placement = in.oneOf("placement", kPlacements);
  a.residentLayers = static_cast<uint32_t>(in.integer("resident_layers", Range::NonNegative32));
  a.weightHostTier = in.oneOf("weight_tier", kTiers);
  a.kvTier = in.oneOf("kv_tier", kTiers);
  a.activationTier = in.oneOf("activation_tier", kTiers);
  a.tierReason = in.text("tier_reason").str();
  DictionaryAttr prefill = in.dictionary(kPrefillStage);
  DictionaryAttr decode = in.dictionary(kDecodeStage);
  if (in.failed() || failed(readStage(module, prefill, kPrefillStage, a.prefill)) ||
      failed(readStage(module, decode, kDecodeStage, a.decode)))
    return failure();
  return a;
}

func::FuncOp findModelFunction(ModuleOp module) {
  if (auto main = module.lookupSymbol<func::FuncOp>("main"))
    return main;
  auto funcs = module.getOps<func::FuncOp>();
  if (!funcs.empty() && std::next(funcs.begin()) == funcs.end())
    return *funcs.begin();
  module.emitError("expected a function @main holding the model");
  return nullptr;
}

SmallVector<Operation *> collectLlmOps(func::FuncOp func) {
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (isa<LlmOp>(op))
      ops.push_back(op);
  });
  return ops;
}

std::optional<LearnedPositions> learnedPositions(func::FuncOp func) {
  std::optional<LearnedPositions> positions;
  func.walk([&](EmbeddingOp embedding) {
    Value table = embedding.getPositions();
    if (!table)
      return;
    // The verifier checked a static [max_positions, hidden] table and the offset within it.
    const int64_t offset = embedding.getPositionOffset().value_or(0);
    const int64_t tokens = cast<RankedTensorType>(table.getType()).getDimSize(0) - offset;
    if (!positions || tokens < positions->tokens)
      positions = LearnedPositions{tokens, offset};
  });
  return positions;
}

bool isActivation(Value value) {
  auto result = dyn_cast<OpResult>(value);
  if (!result || !isa<LlmOp>(result.getOwner()))
    return false;
  // present_key and present_value are the KV cache, which lives in its own arena.
  return !isa<AttentionOp>(result.getOwner()) || result.getResultNumber() == 0;
}

std::optional<std::pair<int64_t, int64_t>> bufferByteRange(ArrayRef<PlannedBuffer> buffers,
                                                           int64_t index) {
  if (index < 0 || static_cast<size_t>(index) >= buffers.size())
    return std::nullopt;
  const PlannedBuffer &buffer = buffers[index];
  std::optional<int64_t> end =
      llvm::checkedMulAdd<int64_t>(buffer.rows, buffer.rowStride, buffer.offset);
  if (!end)
    return std::nullopt;
  return std::make_pair(buffer.offset, *end);
}

std::optional<unsigned> costSublayerBits(StringRef name) {
  return llvm::StringSwitch<std::optional<unsigned>>(name)
      .Case("qkv", 1u << 0)
      .Case(kAttentionCostSublayers, 1u << 1 | 1u << 2)
      .Case("out", 1u << 3)
      .Case("fc1", 1u << 4)
      .Case("fc2", 1u << 5)
      .Default(std::nullopt);
}

} // namespace hetc::planning
