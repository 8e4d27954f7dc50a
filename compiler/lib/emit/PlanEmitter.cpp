// Builds the plan (runtime/format/hplan.fbs) from the planning attributes and writes it with the
// weights through the runtime's PlanWriter, so the file layout is written in one place.
#include "hetc/compiler/PlanEmitter.h"

#include "hetc/Dialect/HetcDialect.h"
#include "hetc/compiler/PlanAttributes.h"
#include "runtime/format/Plan.h"
#include "runtime/format/PlanWriter.h"

#include "runtime/format/Bf16.h"
#include "runtime/format/WeightLayout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Config/llvm-config.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

using namespace mlir;
using namespace hetc;
using namespace hetc::compiler;
using namespace hetc::planning;

namespace {

// HETC_VERSION is the project's version (CMakeLists.txt), MLIR's the one the compiler linked.
#define HETC_STRINGIFY_(x) #x
#define HETC_STRINGIFY(x) HETC_STRINGIFY_(x)
constexpr const char *kProducer =
    "hetc " HETC_VERSION " (MLIR " HETC_STRINGIFY(LLVM_VERSION_MAJOR) ")";

// [rows, cols] row-major into [cols, rows] row-major, in tiles so both sides stay in cache.
void transpose(const float *src, float *dst, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 64;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
          dst[c * rows + r] = src[r * cols + c];
}

// How a segment holds its source's elements.
enum class SegmentForm {
  Stored,       // float32 in the stored order
  Transposed,   // float32, the stored 2-D matrix transposed
  Bf16FromKN,   // LinearBf16N16K2, the stored matrix being [K, N] (ONNX MatMul's B)
  Bf16FromNK,   // LinearBf16N16K2, the stored matrix being [N, K]
  Int8FromKN,   // LinearInt8N16K4 with its scales and column sums, from [K, N]
  Int8FromNK,   // the same from [N, K]
  Int4FromKN,   // LinearInt4N16K8 with its scales and zero points, from [K, N] (the plan's group)
  Int4FromNK,   // the same from [N, K]
  Int4Blocks,   // LinearInt4N16K8 repacked from an imported 4-bit weight's blocks (rows of [N, K])
  Int8Channels, // LinearInt8N16K4 repacked from an imported int8 weight's values and scales
};

// A hetc.activation or hetc.swiglu function name as the plan's enum (the verifiers checked it is
// one of these; a swiglu without one is silu).
plan::ActivationFunctionDef activationFunction(StringRef function) {
  return llvm::StringSwitch<plan::ActivationFunctionDef>(function)
      .Case("gelu", plan::ActivationFunctionDef::Gelu)
      .Case("gelu_tanh", plan::ActivationFunctionDef::GeluTanh)
      .Case("relu2", plan::ActivationFunctionDef::ReluSquared)
      .Case("silu", plan::ActivationFunctionDef::Silu)
      .Default(plan::ActivationFunctionDef::Relu);
}
plan::ActivationFunctionDef gateFunction(SwiGluOp swiglu) {
  return activationFunction(swiglu.getFunction().value_or("silu"));
}

// A weight operand traced to its bytes: an entry of the weight store or a hetc.constant.
struct WeightSource {
  const void *identity = nullptr; // the StoredWeight or the constant's attribute
  std::string name;
  SmallVector<int64_t> storedShape;
  // The IR reads the stored [a, b] matrix as [b, a].
  bool transposedView = false;
  const StoredWeight *stored = nullptr;
  DenseElementsAttr constant;
  // A column slice of the view (hetc.weight's `columns`), storedShape being the slice's: its
  // first column within the stored weight (a row of a transposed view's stored matrix, else a
  // column). A float weight's slice is read as float32 when its segment is made; an imported
  // integer weight's (stored->int4, or ->int8 per column) is repacked, never widened.
  // With a period (hetc.weight's `columns = [begin, end, period]`), columns begin .. end of each
  // group of `slicePeriod` (GPT-NeoX's q, k or v of [heads, 3, head_dim]); else one run.
  bool sliced = false;
  uint64_t sliceBegin = 0, sliceWidth = 0, slicePeriod = 0;
  // The stored index (a column, or a transposed view's stored row) of the slice's index `j`.
  uint64_t slicedIndex(uint64_t j) const {
    if (!sliced)
      return j;
    return slicePeriod ? sliceBegin + j / sliceWidth * slicePeriod + j % sliceWidth
                       : sliceBegin + j;
  }
  bool int4() const { return stored && stored->elementType == WeightElementType::Int4Blocks; }
  // An int8 weight whose scales run along the view's output columns (or are one for all): what
  // LinearInt8N16K4 holds as it is.
  bool int8PerColumn() const {
    return stored && stored->elementType == WeightElementType::Int8Channels &&
           (stored->int8->axis == -1 || stored->int8->axis == (transposedView ? 0 : 1));
  }
};

std::optional<plan::DeviceDef> deviceOf(StringAttr name) {
  if (name && name.getValue() == kCpuDevice)
    return plan::DeviceDef::CPU;
  if (name && name.getValue() == kGpuDevice)
    return plan::DeviceDef::GPU;
  return std::nullopt;
}

plan::TierDef tierDef(compiler::Tier tier) {
  switch (tier) {
  case compiler::Tier::Gpu:
    return plan::TierDef::GPU;
  case compiler::Tier::Cxl:
    return plan::TierDef::CXL;
  case compiler::Tier::Ddr:
    break;
  }
  return plan::TierDef::DDR;
}

// The form that packs a float matrix, [N, K] (`fromNK`) or [K, N], into a packed linear layout.
SegmentForm packedForm(plan::WeightLayoutDef layout, bool fromNK) {
  switch (layout) {
  case plan::WeightLayoutDef::LinearInt8N16K4:
    return fromNK ? SegmentForm::Int8FromNK : SegmentForm::Int8FromKN;
  case plan::WeightLayoutDef::LinearInt4N16K8:
    return fromNK ? SegmentForm::Int4FromNK : SegmentForm::Int4FromKN;
  default:
    return fromNK ? SegmentForm::Bf16FromNK : SegmentForm::Bf16FromKN;
  }
}

// The LinearInt4N16K8 of an imported 4-bit weight's rows: its blocks as groups, a block past 128
// k as several groups of 128 sharing its scale and zero point (exact: the same values).
LinearInt4N16K8 int4Layout(const WeightSource &source) {
  return LinearInt4N16K8{static_cast<uint64_t>(source.storedShape[0]),
                         static_cast<uint64_t>(source.storedShape[1]),
                         std::min<uint64_t>(source.stored->int4->blockSize, 128)};
}

// Rows [rowBegin, rowBegin + layout.n) of an imported 4-bit weight into `segment` as `layout`:
// the nibbles moved, the scales and zero points copied per group; the padding zero.
void packInt4Blocks(const StoredWeight &weight, uint64_t rowBegin, const LinearInt4N16K8 &layout,
                    uint8_t *segment) {
  std::memset(segment, 0, layout.segmentBytes());
  auto *scales = reinterpret_cast<float *>(segment + layout.scaleOffset());
  uint8_t *zeroPoints = segment + layout.zeroPointOffset();
  const Int4Blocks &blocks = *weight.int4;
  for (uint64_t n = 0; n < layout.n; ++n) {
    const uint64_t row = rowBegin + n;
    for (uint64_t k = 0; k < layout.k; ++k)
      segment[layout.byteIndex(n, k)] |=
          static_cast<uint8_t>(weight.int4At(row, k) << LinearInt4N16K8::nibbleShift(k));
    for (uint64_t g = 0; g < layout.groups(); ++g) {
      const uint64_t block = row * blocks.blocks + g * layout.group / blocks.blockSize;
      scales[layout.groupIndex(n, g)] = blocks.scales[block];
      zeroPoints[layout.groupIndex(n, g)] = blocks.zeroPoints[block];
    }
  }
}

// Output columns [begin, begin + layout.n) of an imported int8 weight into `segment` as `layout`:
// column n's k-th value is q[begin + n][k] of a transposed view's stored [N, K] (`rows`), else
// q[k][begin + n]; its scale and the sum of its values beside.
void packInt8Channels(const StoredWeight &weight, bool rows, uint64_t begin,
                      const LinearInt8N16K4 &layout, uint8_t *segment) {
  std::memset(segment, 0, layout.segmentBytes());
  auto *q = reinterpret_cast<int8_t *>(segment);
  auto *scales = reinterpret_cast<float *>(segment + layout.scaleOffset());
  auto *sums = reinterpret_cast<int32_t *>(segment + layout.columnSumOffset());
  for (uint64_t n = 0; n < layout.n; ++n) {
    int32_t sum = 0;
    for (uint64_t k = 0; k < layout.k; ++k) {
      const int8_t value = rows ? weight.int8At(begin + n, k) : weight.int8At(k, begin + n);
      q[layout.index(n, k)] = value;
      sum += value;
    }
    sums[n] = sum;
    scales[n] = rows ? weight.int8Scale(begin + n, 0) : weight.int8Scale(0, begin + n);
  }
}

// Forms whose segment holds the stored matrix transposed: the float32 Transposed and the packings
// of a stored [K, N].
bool readsTransposed(SegmentForm form) {
  return form == SegmentForm::Transposed || form == SegmentForm::Bf16FromKN ||
         form == SegmentForm::Int8FromKN || form == SegmentForm::Int4FromKN;
}

// What a float form writes, whichever orientation it reads: forms of one family write the same
// bytes for the same matrix. Imported integer weights (Int4Blocks, Int8Channels) have none.
std::optional<int> formFamily(SegmentForm form) {
  switch (form) {
  case SegmentForm::Stored:
  case SegmentForm::Transposed:
    return 0;
  case SegmentForm::Bf16FromKN:
  case SegmentForm::Bf16FromNK:
    return 1;
  case SegmentForm::Int8FromKN:
  case SegmentForm::Int8FromNK:
    return 2;
  case SegmentForm::Int4FromKN:
  case SegmentForm::Int4FromNK:
    return 3;
  case SegmentForm::Int4Blocks:
  case SegmentForm::Int8Channels:
    break;
  }
  return std::nullopt;
}

// A segment as the plan will hold it: made from its source when the plan is written.
struct SegmentRecipe {
  WeightSource source;
  SegmentForm form = SegmentForm::Stored;
  uint64_t size = 0;
  uint64_t int4Group = 0; // Int4FromKN / Int4FromNK: the plan's group size
  bool int4Symmetric = false;
};

// Whether two segments hold the same bytes, decided on their sources: one family's packing of
// equal matrices (a tied lm_head exported as its own, transposed copy of the embedding table packs
// to exactly the table's bytes). Unsliced stored weights of one float type only; random weights
// differ within their first bytes, so the comparison costs next to nothing.
bool sameSegment(const SegmentRecipe &a, const SegmentRecipe &b) {
  if (a.size != b.size || !formFamily(a.form) || formFamily(a.form) != formFamily(b.form))
    return false;
  const WeightSource &x = a.source, &y = b.source;
  if (!x.stored || !y.stored || x.sliced || y.sliced ||
      x.stored->elementType != y.stored->elementType)
    return false;
  const WeightElementType type = x.stored->elementType;
  if (type != WeightElementType::F32 && type != WeightElementType::F16 &&
      type != WeightElementType::BF16)
    return false;
  const bool xT = readsTransposed(a.form), yT = readsTransposed(b.form);
  SmallVector<int64_t> xShape(x.storedShape), yShape(y.storedShape);
  if (xT)
    std::reverse(xShape.begin(), xShape.end());
  if (yT)
    std::reverse(yShape.begin(), yShape.end());
  if (xShape != yShape)
    return false;
  const auto *xb = static_cast<const char *>(x.stored->data);
  const auto *yb = static_cast<const char *>(y.stored->data);
  if (xT == yT)
    return std::memcmp(xb, yb, x.stored->bytes) == 0;
  if (xShape.size() != 2)
    return false;
  // x stored as [r, c], y as [c, r] (or the other way round): element (i, j) of one is (j, i) of
  // the other.
  const size_t elementBytes = type == WeightElementType::F32 ? 4 : 2;
  const auto rows = static_cast<uint64_t>(x.storedShape[0]);
  const auto cols = static_cast<uint64_t>(x.storedShape[1]);
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t j = 0; j < cols; ++j)
      if (std::memcmp(xb + (i * cols + j) * elementBytes, yb + (j * rows + i) * elementBytes,
                      elementBytes) != 0)
        return false;
  return true;
}

class PlanBuilder {
public:
  PlanBuilder(ModuleOp module, const WeightStore &weights, const WeightScheme &linearWeights)
      : module_(module), weights_(weights), linearWeights_(linearWeights) {}

  LogicalResult build(const std::string &target);
  plan::PlanDefT &plan() { return plan_; }
  // The segments' payloads, each made when the plan is written.
  std::vector<WeightPayload> payloads() const;
  uint64_t weightBytes() const {
    uint64_t bytes = 0;
    for (const SegmentRecipe &recipe : segments_)
      bytes += recipe.size;
    return bytes;
  }
  const std::string &error() const { return error_; }

private:
  LogicalResult fail(const Twine &message) {
    if (error_.empty())
      error_ = message.str();
    return failure();
  }
  LogicalResult buildModuleTables();
  uint64_t requiredCpuFeatures() const;
  LogicalResult buildDevicePlan();
  LogicalResult buildOp(Operation *op);
  LogicalResult buildSublayers(ArrayRef<Operation *> ops);
  FailureOr<WeightSource> traceWeight(Operation *op, Value weight, StringRef role);
  void sliceColumns(WeightSource &source, int64_t begin, int64_t end, int64_t period);
  FailureOr<uint32_t> addTensor(Operation *op, Value weight, plan::WeightLayoutDef layout,
                                StringRef role);
  FailureOr<uint32_t> addSegment(const WeightSource &source, SegmentForm form);
  FailureOr<uint64_t> segmentSize(const WeightSource &source, SegmentForm form);
  Status produceSegment(const SegmentRecipe &recipe, const WeightPayload::Write &write) const;
  LogicalResult tieEmbeddingToLmHead(ArrayRef<Operation *> ops);
  // A Linear's weight layout, and the lm_head's: BF16 with integer linears unless asked, since it
  // is often the tied embedding's table and its logits decide every sampled token
  // (docs/quantization.md).
  plan::WeightLayoutDef linearLayout() const { return layoutOf(linearWeights_.format); }
  plan::WeightLayoutDef lmHeadLayout() const { return layoutOf(linearWeights_.lmHead); }
  static plan::WeightLayoutDef layoutOf(WeightFormat format) {
    switch (format) {
    case WeightFormat::F32:
      return plan::WeightLayoutDef::LinearNK;
    case WeightFormat::INT8:
      return plan::WeightLayoutDef::LinearInt8N16K4;
    case WeightFormat::INT4:
      return plan::WeightLayoutDef::LinearInt4N16K8;
    case WeightFormat::BF16:
      break;
    }
    return plan::WeightLayoutDef::LinearBf16N16K2;
  }
  std::string describe(Operation *op);
  void nameOps(ArrayRef<Operation *> ops);
  std::string nameOf(Operation *op);

  ModuleOp module_;
  const WeightStore &weights_;
  WeightScheme linearWeights_;
  // The packed lm_head tensor when it is also the embedding table (tied), so it is stored once.
  std::optional<uint32_t> tiedTable_;
  plan::PlanDefT plan_;
  // Segment i of the plan, made from its source only when the plan is written.
  std::vector<SegmentRecipe> segments_;
  std::map<std::pair<const void *, SegmentForm>, uint32_t> segmentIndex_;
  // Column slices of stored weights: a token per (weight, view, begin, end, period) as their
  // identity.
  std::map<std::tuple<const StoredWeight *, bool, int64_t, int64_t, int64_t>,
           std::unique_ptr<char>>
      sliceTokens_;
  std::map<uint64_t, std::vector<uint32_t>> segmentsBySize_;
  std::map<std::tuple<const void *, SegmentForm, plan::WeightLayoutDef>, uint32_t> tensors_;
  // Ops of each kind seen so far in each layer, for readable names ("layers.3.linear.2").
  std::map<std::pair<int64_t, std::string>, unsigned> kindCounts_;
  llvm::DenseMap<Operation *, std::string> names_;
  std::string error_;
};

// A readable description of an op in the plan's terms: "layers.3.linear.2", "lm_head", ...
std::string PlanBuilder::describe(Operation *op) {
  std::string kind = op->getName().stripDialect().str();
  auto layer = op->getAttrOfType<IntegerAttr>(kLayer);
  if (!layer) {
    if (isa<RmsNormOp, LayerNormOp>(op))
      return "final_norm";
    return kind;
  }
  unsigned ordinal = kindCounts_[{layer.getInt(), kind}]++;
  return "layers." + std::to_string(layer.getInt()) + "." + kind + "." + std::to_string(ordinal);
}

// The source node a location names, when it names one.
std::optional<std::string> nodeName(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : fused.getLocations())
      if (isa<NameLoc>(part)) {
        loc = part;
        break;
      }
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  return std::nullopt;
}

// The source node an op was raised from, when the IR kept one.
std::optional<std::string> sourceName(Operation *op) {
  if (auto source = op->getAttrOfType<StringAttr>("hetc.source"))
    return source.str();
  return nodeName(op->getLoc());
}

// Names every op once: its source node, or its description when the IR kept no source. Ops
// raised from the same node (q and k rope from one subgraph) add their description, so every
// name in the plan is unique.
void PlanBuilder::nameOps(ArrayRef<Operation *> ops) {
  llvm::StringMap<unsigned> uses;
  SmallVector<std::pair<std::optional<std::string>, std::string>> named;
  for (Operation *op : ops) {
    named.emplace_back(sourceName(op), describe(op));
    if (named.back().first)
      ++uses[*named.back().first];
  }
  for (auto [op, name] : llvm::zip(ops, named)) {
    auto &[source, description] = name;
    if (!source)
      names_[op] = description;
    else if (uses[*source] > 1)
      names_[op] = *source + " (" + description + ")";
    else
      names_[op] = *source;
  }
}

std::string PlanBuilder::nameOf(Operation *op) {
  auto it = names_.find(op);
  return it != names_.end() ? it->second : op->getName().getStringRef().str();
}

LogicalResult PlanBuilder::buildModuleTables() {
  const StringRef user = "the plan emitter";
  FailureOr<ModelAttrs> model = ModelAttrs::read(module_, user);
  FailureOr<BoundsAttrs> bounds = BoundsAttrs::read(module_, user);
  FailureOr<KvCacheAttrs> kv = KvCacheAttrs::read(module_, user);
  FailureOr<SmallVector<PlannedBuffer>> buffers = readPlannedBuffers(module_, user);
  if (failed(model) || failed(bounds) || failed(kv) || failed(buffers))
    return failure();
  auto arenaSize = module_->getAttrOfType<IntegerAttr>(kActivationArenaSize);
  if (!arenaSize || arenaSize.getInt() < 0)
    return fail("the module has no non-negative hetc.activation_arena_size; run hetc-plan-memory "
                "first");

  // The readers checked the ranges of the plan's fields.
  auto u32 = [](int64_t value) { return static_cast<uint32_t>(value); };
  auto u64 = [](int64_t value) { return static_cast<uint64_t>(value); };
  plan_.model = std::make_unique<plan::ModelDefT>();
  plan::ModelDefT &m = *plan_.model;
  m.architecture = architectureName(model->architecture).str();
  m.vocab = u32(model->vocab);
  m.hidden = u32(model->hidden);
  m.layers = u32(model->layers);
  m.heads = u32(model->heads);
  m.kv_heads = u32(model->kvHeads);
  m.head_dim = u32(model->headDim);
  m.intermediate = u32(model->intermediate);
  m.rms_eps = model->rmsEps;
  m.tied_embeddings = model->tiedEmbeddings;

  plan_.bounds = std::make_unique<plan::BoundsDefT>();
  plan_.bounds->max_batch = u32(bounds->maxBatch);
  plan_.bounds->max_seq = u64(bounds->maxSeq);
  plan_.bounds->max_step_tokens = u32(bounds->maxStepTokens);

  plan_.kv_cache = std::make_unique<plan::KvCacheDefT>();
  plan::KvCacheDefT &k = *plan_.kv_cache;
  k.dtype = kv->dtype;
  k.layers = u32(kv->layers);
  k.slots = u32(kv->slots);
  k.kv_heads = u32(kv->kvHeads);
  k.max_seq = u64(kv->maxSeq);
  k.head_dim = u32(kv->headDim);
  setKvLayout(k, kv->layout);

  for (const PlannedBuffer &planned : *buffers) {
    auto buffer = std::make_unique<plan::BufferDefT>();
    buffer->name = planned.name;
    buffer->role = planned.role;
    buffer->dtype = plan::DTypeDef::F32;
    buffer->offset = u64(planned.offset);
    buffer->rows = u64(planned.rows);
    buffer->cols = u64(planned.cols);
    buffer->row_stride = u64(planned.rowStride);
    plan_.buffers.push_back(std::move(buffer));
  }
  plan_.activation_arena_size = u64(arenaSize.getInt());
  return success();
}

// `role` names a constant the source model gave no name ("inv_freq").
FailureOr<WeightSource> PlanBuilder::traceWeight(Operation *op, Value weight, StringRef role) {
  WeightSource source;
  auto irType = cast<RankedTensorType>(weight.getType());
  if (auto constant = weight.getDefiningOp<ConstantOp>()) {
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!dense || !isa<FloatType>(dense.getElementType()))
      return fail(nameOf(op) + ": its weight is a non-float or non-dense constant");
    source.identity = dense.getAsOpaquePointer();
    auto nameLoc = dyn_cast<NameLoc>(constant.getLoc());
    source.name = nameLoc ? nameLoc.getName().str() : role.str();
    source.storedShape.assign(irType.getShape().begin(), irType.getShape().end());
    source.constant = dense;
    return source;
  }
  auto weightOp = weight.getDefiningOp<WeightOp>();
  if (!weightOp)
    return fail(nameOf(op) + ": its weight must be a hetc.weight or hetc.constant");
  source.name = weightOp.getName().str();
  source.stored = weights_.find(source.name);
  if (!source.stored)
    return fail("weight '" + source.name + "' is not in the weight store");
  source.identity = source.stored;
  source.storedShape.assign(source.stored->shape.begin(), source.stored->shape.end());
  ArrayRef<int64_t> irShape = irType.getShape();
  source.transposedView = weightOp.getTransposed();
  SmallVector<int64_t> expected(source.storedShape);
  if (source.transposedView)
    std::reverse(expected.begin(), expected.end());
  std::optional<std::pair<int64_t, int64_t>> columns = weightOp.getColumnRange();
  const int64_t period = weightOp.getColumnPeriod().value_or(0);
  const int64_t span = period ? period : (expected.empty() ? 0 : expected.back());
  if (columns && !expected.empty() && columns->second <= span && expected.back() % span == 0)
    expected.back() = expected.back() / span * (columns->second - columns->first);
  else if (columns)
    return fail("weight '" + source.name + "' is sliced at columns " + Twine(columns->first) +
                ".." + Twine(columns->second) +
                (period ? " of every " + Twine(period) : Twine()) +
                ", past its last dimension or not dividing it");
  if (ArrayRef<int64_t>(expected) != irShape) {
    std::string stored;
    llvm::raw_string_ostream os(stored);
    llvm::interleaveComma(source.storedShape, os);
    return fail("weight '" + source.name + "' is read as " + Twine(irShape.size()) + "-D type" +
                (source.transposedView ? " (transposed)" : "") +
                " that does not match its stored shape [" + stored + "]");
  }
  if (source.int4() || source.stored->elementType == WeightElementType::Int8Channels) {
    // The importer checked its values against its shape.
    if (columns && source.int4() && !source.transposedView)
      return fail("weight '" + source.name +
                  "' is 4-bit and sliced along K; hetc slices 4-bit weights by output columns "
                  "only");
    if (period)
      return fail("weight '" + source.name + "' is " +
                  (source.int4() ? "4-bit" : "int8") +
                  " and read in groups of columns (a per-head fused projection); hetc slices "
                  "integer weights in one run of columns only");
    if (columns)
      sliceColumns(source, columns->first, columns->second, period);
    return source;
  }
  uint64_t elementBytes = source.stored->elementType == WeightElementType::F32 ? 4 : 2;
  if (source.stored->elementType == WeightElementType::I64)
    return fail("weight '" + source.name + "' is int64; weights must be float");
  uint64_t elements = 1;
  for (int64_t dim : source.storedShape)
    elements *= static_cast<uint64_t>(dim);
  if (!source.stored->data || source.stored->bytes != elements * elementBytes)
    return fail("weight '" + source.name + "' holds " + Twine(source.stored->bytes) +
                " bytes, expected " + Twine(elements * elementBytes));
  if (columns)
    sliceColumns(source, columns->first, columns->second, period);
  return source;
}

// Narrows `source` to columns [begin, end) of its view, or of each group of `period` columns:
// rows of a transposed view's stored [N, K], the last dimension's elements otherwise. Nothing is
// read until the segment is made.
void PlanBuilder::sliceColumns(WeightSource &source, int64_t begin, int64_t end, int64_t period) {
  std::unique_ptr<char> &token =
      sliceTokens_[std::make_tuple(source.stored, source.transposedView, begin, end, period)];
  if (!token)
    token = std::make_unique<char>();
  source.sliced = true;
  source.sliceBegin = static_cast<uint64_t>(begin);
  source.sliceWidth = static_cast<uint64_t>(end - begin);
  source.slicePeriod = static_cast<uint64_t>(period);
  int64_t &dim = source.storedShape[source.transposedView ? 0 : source.storedShape.size() - 1];
  dim = period ? dim / period * (end - begin) : end - begin;
  source.identity = token.get();
  source.name += "[" + std::to_string(begin) + ":" + std::to_string(end) +
                 (period ? " of " + std::to_string(period) : "") + "]";
}

// The bytes `form` makes of `source`, checking that it can make them.
FailureOr<uint64_t> PlanBuilder::segmentSize(const WeightSource &source, SegmentForm form) {
  uint64_t elements = 1;
  for (int64_t dim : source.storedShape)
    elements *= static_cast<uint64_t>(dim);
  if (form == SegmentForm::Int8Channels) {
    const bool rows = source.transposedView;
    return LinearInt8N16K4{static_cast<uint64_t>(source.storedShape[rows ? 0 : 1]),
                           static_cast<uint64_t>(source.storedShape[rows ? 1 : 0])}
        .segmentBytes();
  }
  if (form == SegmentForm::Int4Blocks)
    return int4Layout(source).segmentBytes();
  if ((source.int4() || source.int8PerColumn()) && source.sliced)
    return fail("weight '" + source.name + "' is a slice of a 4-bit weight read as float");
  if (source.stored && source.stored->elementType == WeightElementType::I64)
    return fail("weight '" + source.name + "' is int64; weights must be float");
  if (form == SegmentForm::Stored || form == SegmentForm::Transposed)
    return elements * sizeof(float);
  if (source.storedShape.size() != 2)
    return fail("weight '" + source.name + "' is packed as a linear weight but is not 2-D");
  const bool fromKN = readsTransposed(form);
  const auto n = static_cast<uint64_t>(source.storedShape[fromKN ? 1 : 0]);
  const auto k = static_cast<uint64_t>(source.storedShape[fromKN ? 0 : 1]);
  if (form == SegmentForm::Int8FromKN || form == SegmentForm::Int8FromNK)
    return LinearInt8N16K4{n, k}.segmentBytes();
  if (form == SegmentForm::Int4FromKN || form == SegmentForm::Int4FromNK)
    return LinearInt4N16K8{n, k, linearWeights_.groupSize}.segmentBytes();
  return LinearBf16N16K2{n, k}.bytes();
}

// One segment per (source, form): a weight packed the same way twice (the embedding table and a
// tied lm_head) is stored once, and so are two sources that would pack to the same bytes.
FailureOr<uint32_t> PlanBuilder::addSegment(const WeightSource &source, SegmentForm form) {
  auto key = std::make_pair(source.identity, form);
  if (auto it = segmentIndex_.find(key); it != segmentIndex_.end())
    return it->second;
  FailureOr<uint64_t> size = segmentSize(source, form);
  if (failed(size))
    return failure();
  SegmentRecipe recipe{source, form, *size, linearWeights_.groupSize, linearWeights_.symmetric};
  std::vector<uint32_t> &sameSize = segmentsBySize_[recipe.size];
  auto same = llvm::find_if(sameSize, [&](uint32_t other) {
    return sameSegment(segments_[other], recipe);
  });
  uint32_t index;
  if (same != sameSize.end()) {
    index = *same;
    // Finding them equal read both whole: give the pages back until the segment is written.
    if (recipe.source.stored)
      weights_.releasePages(*recipe.source.stored);
    if (segments_[index].source.stored)
      weights_.releasePages(*segments_[index].source.stored);
  } else {
    index = static_cast<uint32_t>(segments_.size());
    segments_.push_back(std::move(recipe));
    sameSize.push_back(index);
  }
  segmentIndex_[key] = index;
  return index;
}

// A weight source's stored matrix (its slice, for a sliced one) read as float32 a block of rows
// or of columns at a time, so that a segment is made without widening the whole weight. A source
// of rank other than 2 reads as [product of the leading dimensions, last dimension].
class SourceReader {
public:
  SourceReader(const WeightSource &source, const WeightStore &weights)
      : source_(source), weights_(weights) {
    cols_ = source.storedShape.empty() ? 1 : static_cast<uint64_t>(source.storedShape.back());
    uint64_t elements = 1;
    for (int64_t dim : source.storedShape)
      elements *= static_cast<uint64_t>(dim);
    rows_ = cols_ == 0 ? 0 : elements / cols_;
    if (!source.stored) {
      // A hetc.constant: small, so widened whole.
      constant_.reserve(elements);
      for (APFloat value : source.constant.getValues<APFloat>()) {
        bool lost = false;
        value.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
        constant_.push_back(value.convertToFloat());
      }
      width_ = cols_;
      return;
    }
    width_ = static_cast<uint64_t>(source.stored->shape.back());
  }
  uint64_t rows() const { return rows_; }
  uint64_t cols() const { return cols_; }

  // Rows [r0, r0 + count) as [count, cols()].
  void readRows(uint64_t r0, uint64_t count, float *out) const {
    for (uint64_t r = 0; r < count; ++r)
      read(r0 + r, 0, cols_, out + r * cols_);
  }
  // Columns [c0, c0 + count) as [count, rows()]: the transpose's rows.
  void readColumns(uint64_t c0, uint64_t count, float *out) const {
    std::vector<float> row(count);
    for (uint64_t r = 0; r < rows_; ++r) {
      read(r, c0, count, row.data());
      for (uint64_t c = 0; c < count; ++c)
        out[c * rows_ + r] = row[c];
    }
  }
  // Gives back the mapped pages of the rows before `r` (all rows by default), once read.
  void release(uint64_t r = UINT64_MAX) const {
    if (!source_.stored)
      return;
    const uint64_t rowBytes = source_.stored->bytes / std::max<uint64_t>(
                                                         1, source_.stored->elementCount() / width_);
    // A stored row read again later (another group's, of a strided slice) comes back from the
    // file.
    const uint64_t end = r >= rows_ ? source_.stored->bytes : storedRow(r) * rowBytes;
    weights_.releasePages(*source_.stored, 0, end);
  }

private:
  // The stored row of the slice's row r: a transposed view's slice runs along the stored rows.
  uint64_t storedRow(uint64_t r) const {
    return source_.transposedView ? source_.slicedIndex(r) : r;
  }
  void read(uint64_t r, uint64_t c0, uint64_t count, float *out) const {
    const uint64_t row = storedRow(r) * width_;
    // Columns in runs that are contiguous in the stored row (one run unless strided).
    for (uint64_t c = c0; c < c0 + count;) {
      const uint64_t at = source_.transposedView ? c : source_.slicedIndex(c);
      uint64_t run = c0 + count - c;
      if (!source_.transposedView && source_.sliced && source_.slicePeriod)
        run = std::min(run, source_.sliceWidth - c % source_.sliceWidth);
      if (source_.stored)
        source_.stored->floatsInto(row + at, run, out + (c - c0));
      else
        std::memcpy(out + (c - c0), constant_.data() + row + at, run * sizeof(float));
      c += run;
    }
  }

  const WeightSource &source_;
  const WeightStore &weights_;
  std::vector<float> constant_;
  uint64_t rows_ = 0, cols_ = 0, width_ = 0;
};

// Rows of a block a segment is made in: about 4 MiB of float32, whole blocks of 16 rows.
uint64_t blockRows(uint64_t rowElements) {
  constexpr uint64_t kBytes = 4 << 20;
  const uint64_t rows = kBytes / (std::max<uint64_t>(rowElements, 1) * sizeof(float));
  return std::max<uint64_t>(16, rows / 16 * 16);
}

template <typename T>
Status writeVector(const WeightPayload::Write &write, const std::vector<T> &values) {
  return write(values.data(), values.size() * sizeof(T));
}


// Makes a segment's bytes in order, a block of rows at a time, giving back the mapped pages of
// what it has read as it goes: a float32 weight stored as it is comes straight from the store (a
// mapped external-data file, often); packed weights are made block by block with the layouts'
// *Rows functions and their scale tables written after.
Status PlanBuilder::produceSegment(const SegmentRecipe &recipe,
                                   const WeightPayload::Write &write) const {
  const WeightSource &source = recipe.source;
  // Imported integer weights are repacked whole: they are a quarter of float32 or less.
  if (recipe.form == SegmentForm::Int8Channels || recipe.form == SegmentForm::Int4Blocks) {
    std::vector<uint8_t> bytes(recipe.size);
    if (recipe.form == SegmentForm::Int8Channels) {
      const bool rows = source.transposedView;
      packInt8Channels(*source.stored, rows, source.sliceBegin,
                       LinearInt8N16K4{static_cast<uint64_t>(source.storedShape[rows ? 0 : 1]),
                                       static_cast<uint64_t>(source.storedShape[rows ? 1 : 0])},
                       bytes.data());
    } else {
      packInt4Blocks(*source.stored, source.sliceBegin, int4Layout(source), bytes.data());
    }
    weights_.releasePages(*source.stored);
    return writeVector(write, bytes);
  }

  SourceReader reader(source, weights_);
  if (recipe.form == SegmentForm::Stored && source.stored && !source.sliced &&
      source.stored->elementType == WeightElementType::F32) {
    constexpr uint64_t kChunk = 64 << 20;
    const auto *bytes = static_cast<const uint8_t *>(source.stored->data);
    for (uint64_t at = 0; at < recipe.size; at += kChunk) {
      const uint64_t size = std::min(kChunk, recipe.size - at);
      if (Status status = write(bytes + at, size); !status)
        return status;
      weights_.releasePages(*source.stored, 0, at + size);
    }
    return Status();
  }
  if (recipe.form == SegmentForm::Stored || recipe.form == SegmentForm::Transposed) {
    const bool transposed = recipe.form == SegmentForm::Transposed;
    const uint64_t outRows = transposed ? reader.cols() : reader.rows();
    const uint64_t outCols = transposed ? reader.rows() : reader.cols();
    const uint64_t block = blockRows(outCols);
    std::vector<float> buffer(std::min(block, outRows) * outCols);
    for (uint64_t r0 = 0; r0 < outRows; r0 += block) {
      const uint64_t count = std::min(block, outRows - r0);
      if (transposed) {
        reader.readColumns(r0, count, buffer.data());
      } else {
        reader.readRows(r0, count, buffer.data());
        reader.release(r0 + count);
      }
      if (Status status = write(buffer.data(), count * outCols * sizeof(float)); !status)
        return status;
    }
    reader.release();
    return Status();
  }

  // Packed linear layouts: W as [N, K], the stored matrix's rows (from [N, K]) or columns (from
  // [K, N]).
  const bool fromKN = readsTransposed(recipe.form);
  const uint64_t n = fromKN ? reader.cols() : reader.rows();
  const uint64_t k = fromKN ? reader.rows() : reader.cols();
  const uint64_t block = blockRows(k);
  std::vector<float> rows(std::min(block, n) * k);
  std::vector<uint8_t> panels;
  std::vector<float> scales;
  std::vector<int32_t> sums;
  std::vector<uint8_t> zeroPoints;
  const bool int8 = recipe.form == SegmentForm::Int8FromKN || recipe.form == SegmentForm::Int8FromNK;
  const bool int4 = recipe.form == SegmentForm::Int4FromKN || recipe.form == SegmentForm::Int4FromNK;
  const LinearBf16N16K2 bf16Layout{n, k};
  const LinearInt8N16K4 int8Layout{n, k};
  const LinearInt4N16K8 int4Layout{n, k, recipe.int4Group};
  if (int8) {
    scales.resize(int8Layout.paddedColumns());
    sums.resize(int8Layout.paddedColumns());
  } else if (int4) {
    scales.resize(int4Layout.paddedColumns() * int4Layout.groups());
    zeroPoints.resize(scales.size());
  }
  for (uint64_t row0 = 0; row0 < n; row0 += block) {
    const uint64_t count = std::min(block, n - row0);
    if (fromKN) {
      reader.readColumns(row0, count, rows.data());
    } else {
      reader.readRows(row0, count, rows.data());
      reader.release(row0 + count);
    }
    const uint64_t blocks = (count + 15) / 16;
    if (int8) {
      panels.resize(blocks * int8Layout.blockBytes());
      quantizeLinearInt8Rows(rows.data(), n, k, row0, count,
                             reinterpret_cast<int8_t *>(panels.data()), scales.data() + row0,
                             sums.data() + row0);
    } else if (int4) {
      panels.resize(blocks * int4Layout.blockBytes());
      const uint64_t table = int4Layout.groupIndex(row0, 0);
      quantizeLinearInt4Rows(rows.data(), n, k, recipe.int4Group, recipe.int4Symmetric, row0,
                             count, panels.data(), scales.data() + table,
                             zeroPoints.data() + table);
    } else {
      panels.resize(blocks * bf16Layout.blockBytes());
      packLinearBf16Rows(rows.data(), n, k, row0, count,
                         reinterpret_cast<uint16_t *>(panels.data()));
    }
    if (Status status = writeVector(write, panels); !status)
      return status;
  }
  reader.release();
  Status status;
  if (int8 || int4)
    status = writeVector(write, scales);
  if (status && int8)
    status = writeVector(write, sums);
  if (status && int4)
    status = writeVector(write, zeroPoints);
  return status;
}

std::vector<WeightPayload> PlanBuilder::payloads() const {
  std::vector<WeightPayload> payloads;
  payloads.reserve(segments_.size());
  for (const SegmentRecipe &recipe : segments_) {
    WeightPayload payload;
    payload.size = recipe.size;
    payload.produce = [this, &recipe](const WeightPayload::Write &write) {
      return produceSegment(recipe, write);
    };
    payloads.push_back(std::move(payload));
  }
  return payloads;
}

// With a packed lm_head (BF16, INT8 or INT4), a tied lm_head's weight is also the embedding's
// table: the embedding gathers its rows from it (dequantized), and the table is not stored a
// second time in float32. Tied means the same stored matrix read transposed, or a copy that packs
// to the same bytes.
LogicalResult PlanBuilder::tieEmbeddingToLmHead(ArrayRef<Operation *> ops) {
  EmbeddingOp embedding;
  LmHeadOp lmHead;
  for (Operation *op : ops) {
    if (auto e = dyn_cast<EmbeddingOp>(op); e && !embedding)
      embedding = e;
    if (auto h = dyn_cast<LmHeadOp>(op); h && !lmHead)
      lmHead = h;
  }
  if (!embedding || !lmHead)
    return success();
  FailureOr<WeightSource> table = traceWeight(embedding, embedding.getTable(), "embedding");
  FailureOr<WeightSource> head = traceWeight(lmHead, lmHead.getW(), "lm_head.weight");
  if (failed(table) || failed(head))
    return failure();
  if (table->transposedView || table->storedShape.size() != 2)
    return success();
  FailureOr<uint32_t> headTensor =
      addTensor(lmHead, lmHead.getW(), lmHeadLayout(), "lm_head.weight");
  if (failed(headTensor))
    return failure();
  if (table->identity == head->identity && head->transposedView) {
    tiedTable_ = *headTensor;
    return success();
  }
  // A separate copy: the table [vocab, hidden] packed as [N, K] the lm_head's way, and whether
  // that is lm_head's segment. (An imported integer lm_head is its own: a float table never
  // repacks to it.)
  if (head->int4() || head->int8PerColumn())
    return success();
  const SegmentForm form = packedForm(plan_.tensors[*headTensor]->layout, /*fromNK=*/true);
  const size_t segmentsBefore = segments_.size();
  FailureOr<uint32_t> segment = addSegment(*table, form);
  if (failed(segment))
    return failure();
  if (*segment == plan_.tensors[*headTensor]->segment) {
    tiedTable_ = *headTensor;
    return success();
  }
  // Not tied: forget the trial segment.
  segmentIndex_.erase(std::make_pair(table->identity, form));
  if (segments_.size() > segmentsBefore) {
    llvm::erase(segmentsBySize_[segments_.back().size], *segment);
    segments_.pop_back();
  }
  return success();
}

// A tensor for `weight` in `layout`. The linear layouts store the IR's [K, N] as [N, K]:
// LinearNK in float32, LinearBf16N16K2 packed in BF16 blocks, LinearInt8N16K4 and
// LinearInt4N16K8 quantized (or repacked, for a weight imported in int8 or 4 bits, which a
// Linear or LmHead keeps in its precision whatever `layout` says).
FailureOr<uint32_t> PlanBuilder::addTensor(Operation *op, Value weight,
                                           plan::WeightLayoutDef layout, StringRef role) {
  FailureOr<WeightSource> source = traceWeight(op, weight, role);
  if (failed(source))
    return failure();
  // A Linear's or lm_head's weight imported in 4 bits stays in 4 bits, and one in int8 with a
  // scale per output column in int8, whatever the plan's layout for it.
  if (source->int4() && isa<LinearOp, LmHeadOp>(op))
    layout = plan::WeightLayoutDef::LinearInt4N16K8;
  if (source->int8PerColumn() && isa<LinearOp, LmHeadOp>(op))
    layout = plan::WeightLayoutDef::LinearInt8N16K4;
  const bool packedBf16 = layout == plan::WeightLayoutDef::LinearBf16N16K2;
  const bool packedInt8 = layout == plan::WeightLayoutDef::LinearInt8N16K4;
  const bool packedInt4 = layout == plan::WeightLayoutDef::LinearInt4N16K8;
  const bool linear =
      layout == plan::WeightLayoutDef::LinearNK || packedBf16 || packedInt8 || packedInt4;
  auto irShape = cast<RankedTensorType>(weight.getType()).getShape();
  if (linear && irShape.size() != 2)
    return fail(nameOf(op) + ": a linear weight must be 2-D");
  // A float32 segment holds the stored matrix transposed exactly when the IR's view and the
  // layout disagree about which dimension is contiguous; packing reads either orientation.
  SegmentForm form =
      source->transposedView != linear ? SegmentForm::Transposed : SegmentForm::Stored;
  if (packedBf16 || packedInt8 || packedInt4)
    form = packedInt8 && source->int8PerColumn() ? SegmentForm::Int8Channels
           : packedInt4 && source->int4()        ? SegmentForm::Int4Blocks
                                                 : packedForm(layout, source->transposedView);
  if (form == SegmentForm::Int4Blocks && !source->transposedView)
    return fail(nameOf(op) + ": its 4-bit weight is read as [N, K]; a linear reads [K, N]");
  auto key = std::make_tuple(source->identity, form, layout);
  if (auto it = tensors_.find(key); it != tensors_.end())
    return it->second;
  FailureOr<uint32_t> segment = addSegment(*source, form);
  if (failed(segment))
    return failure();

  Operation *producer = weight.getDefiningOp();
  auto tierAttr = producer ? producer->getAttrOfType<StringAttr>(kTier) : StringAttr();
  std::optional<compiler::Tier> tier = tierAttr ? tierNamed(tierAttr.getValue()) : std::nullopt;
  if (!tier)
    return fail("weight '" + source->name +
                "' has no hetc.tier \"gpu\", \"ddr\" or \"cxl\"; run hetc-assign-devices first");
  auto tensor = std::make_unique<plan::TensorDefT>();
  tensor->name = source->name;
  tensor->segment = *segment;
  tensor->tier = tierDef(*tier);
  tensor->dtype = packedBf16   ? plan::DTypeDef::BF16
                  : packedInt8 ? plan::DTypeDef::INT8
                  : packedInt4 ? plan::DTypeDef::INT4
                               : plan::DTypeDef::F32;
  if (packedInt4)
    tensor->group_size = static_cast<uint32_t>(
        form == SegmentForm::Int4Blocks ? int4Layout(*source).group : linearWeights_.groupSize);
  tensor->layout = layout;
  if (linear)
    tensor->shape = {static_cast<uint64_t>(irShape[1]), static_cast<uint64_t>(irShape[0])};
  else
    for (int64_t dim : irShape)
      tensor->shape.push_back(static_cast<uint64_t>(dim));
  plan_.tensors.push_back(std::move(tensor));
  uint32_t index = static_cast<uint32_t>(plan_.tensors.size() - 1);
  tensors_[key] = index;
  return index;
}

LogicalResult readIndices(Operation *op, StringRef attrName, std::vector<uint32_t> &out,
                          size_t bufferCount, const std::string &opName, std::string &error) {
  auto indices = op->getAttrOfType<DenseI64ArrayAttr>(attrName);
  if (!indices) {
    error = opName + " has no " + attrName.str() + "; run hetc-plan-memory first";
    return failure();
  }
  for (int64_t index : indices.asArrayRef()) {
    if (index < 0 || static_cast<uint64_t>(index) >= bufferCount) {
      error = opName + ": " + attrName.str() + " names buffer " + std::to_string(index) +
              " but there are " + std::to_string(bufferCount);
      return failure();
    }
    out.push_back(static_cast<uint32_t>(index));
  }
  return success();
}

LogicalResult PlanBuilder::buildOp(Operation *op) {
  auto def = std::make_unique<plan::OpDefT>();
  def->name = nameOf(op);
  auto devices = op->getAttrOfType<DictionaryAttr>(kDevice);
  std::optional<plan::DeviceDef> decode =
      deviceOf(devices ? devices.getAs<StringAttr>(kDecodeStage) : StringAttr());
  std::optional<plan::DeviceDef> prefill =
      deviceOf(devices ? devices.getAs<StringAttr>(kPrefillStage) : StringAttr());
  if (!decode || !prefill)
    return fail(def->name + " has no hetc.device {decode, prefill} of \"cpu\" or \"gpu\"; run "
                            "hetc-assign-devices first");
  def->device = *decode;
  def->prefill_device = *prefill;
  if (auto name = op->getAttrOfType<StringAttr>(kCostSublayer)) {
    std::optional<unsigned> bits = costSublayerBits(name.getValue());
    if (!bits)
      return fail(def->name + " has hetc.cost_sublayer \"" + name.getValue() +
                  "\"; expected qkv, qk_sv, out, fc1 or fc2");
    def->cost_sublayers = static_cast<plan::CostSublayerBits>(*bits);
  }
  if (auto layer = op->getAttrOfType<IntegerAttr>(kLayer))
    def->layer = static_cast<int32_t>(layer.getInt());

  std::string error;
  if (failed(readIndices(op, kBuffersIn, def->inputs, plan_.buffers.size(), def->name, error)) ||
      failed(readIndices(op, kBuffersOut, def->outputs, plan_.buffers.size(), def->name, error)))
    return fail(error);

  // Attention carries no tasks (schema 1.8): the executor splits it by cached positions.
  if (!isa<AttentionOp>(op)) {
    FailureOr<TaskAttrs> tasks = TaskAttrs::read(op);
    if (failed(tasks))
      return failure();
    def->task_count = static_cast<uint32_t>(tasks->count);
    def->task_grain = static_cast<uint64_t>(tasks->grain);
  }

  auto addWeight = [&](Value weight, plan::WeightLayoutDef layout,
                       StringRef role) -> LogicalResult {
    FailureOr<uint32_t> tensor = addTensor(op, weight, layout, role);
    if (failed(tensor))
      return failure();
    def->weights.push_back(*tensor);
    return success();
  };
  constexpr auto rowMajor = plan::WeightLayoutDef::RowMajor;
  const auto linearWeight = linearLayout();
  LogicalResult result =
      llvm::TypeSwitch<Operation *, LogicalResult>(op)
          .Case([&](EmbeddingOp embedding) {
            def->kind = plan::OpKindDef::Embedding;
            plan::EmbeddingParamsDefT params;
            params.position_offset =
                static_cast<uint32_t>(embedding.getPositionOffset().value_or(0));
            if (std::optional<APFloat> scale = embedding.getScale())
              params.scale = scale->convertToFloat();
            def->params.Set(std::move(params));
            if (tiedTable_)
              def->weights.push_back(*tiedTable_);
            else if (failed(addWeight(embedding.getTable(), rowMajor, "embedding")))
              return failure();
            // Learned positions are weights[1], their own f32 [max_positions, hidden] tensor
            // whatever the table's form (1.10).
            Value positions = embedding.getPositions();
            return positions ? addWeight(positions, rowMajor, "positions") : success();
          })
          .Case([&](RmsNormOp norm) {
            def->kind = plan::OpKindDef::RmsNorm;
            plan::RmsNormParamsDefT params;
            params.eps = norm.getEpsilon().convertToFloat();
            def->params.Set(std::move(params));
            return addWeight(norm.getGamma(), rowMajor, def->name + ".gamma");
          })
          .Case([&](LayerNormOp norm) {
            def->kind = plan::OpKindDef::LayerNorm;
            plan::LayerNormParamsDefT params;
            params.eps = norm.getEpsilon().convertToFloat();
            params.bias = static_cast<bool>(norm.getBeta());
            def->params.Set(std::move(params));
            if (failed(addWeight(norm.getGamma(), rowMajor, def->name + ".gamma")))
              return failure();
            return norm.getBeta() ? addWeight(norm.getBeta(), rowMajor, def->name + ".beta")
                                  : success();
          })
          .Case([&](LinearOp linear) {
            def->kind = plan::OpKindDef::Linear;
            plan::LinearParamsDefT params;
            // Fused with the add after it: reads [x, residual] (hetc-fuse-residual-add).
            params.residual = linear->hasAttr(kResidual);
            if (params.residual && def->inputs.size() != 2)
              return fail(def->name + " is fused with a residual add but reads " +
                          Twine(def->inputs.size()) + " buffers, not 2");
            // Fused with the swiglu after it: reads [x, other operand] (hetc-fuse-swiglu).
            if (auto role = linear->getAttrOfType<StringAttr>(kSwiGlu)) {
              if (role.getValue() != kSwiGluGate && role.getValue() != kSwiGluUp)
                return fail(def->name + " has hetc.swiglu \"" + role.getValue() +
                            "\"; expected \"gate\" or \"up\"");
              if (params.residual || def->inputs.size() != 2)
                return fail(def->name + " is fused with a swiglu but reads " +
                            Twine(def->inputs.size()) + " buffers, not 2, or also a residual");
              params.swiglu = role.getValue() == kSwiGluGate ? plan::SwiGluRoleDef::Gate
                                                             : plan::SwiGluRoleDef::Up;
              // The swiglu it carries out reads its result, and nothing else does.
              auto swiglu = dyn_cast<SwiGluOp>(*linear->getUsers().begin());
              if (!swiglu)
                return fail(def->name + " is fused with a swiglu that does not read it");
              params.swiglu_function = gateFunction(swiglu);
            }
            params.bias = static_cast<bool>(linear.getBias());
            def->params.Set(std::move(params));
            if (failed(addWeight(linear.getW(), linearWeight, def->name + ".weight")))
              return failure();
            // A bias is weights[1], f32 [N] (1.9).
            return linear.getBias() ? addWeight(linear.getBias(), rowMajor, def->name + ".bias")
                                    : success();
          })
          .Case([&](RopeOp rope) {
            def->kind = plan::OpKindDef::Rope;
            plan::RopeParamsDefT params;
            params.heads = static_cast<uint32_t>(rope.getHeads());
            params.head_dim = static_cast<uint32_t>(rope.getHeadDim());
            params.rotary_dim = static_cast<uint32_t>(rope.getRotaryDim().value_or(0));
            params.interleaved = rope.getInterleaved();
            def->params.Set(std::move(params));
            return addWeight(rope.getInvFreq(), rowMajor, "inv_freq");
          })
          .Case([&](AttentionOp attention) {
            def->kind = plan::OpKindDef::Attention;
            if (def->layer < 0)
              return fail(def->name + " has no hetc.layer, so no KV cache layer to use");
            plan::AttentionParamsDefT params;
            params.layer = static_cast<uint32_t>(def->layer);
            params.heads = static_cast<uint32_t>(attention.getHeads());
            params.kv_heads = static_cast<uint32_t>(attention.getKvHeads());
            params.head_dim = static_cast<uint32_t>(attention.getHeadDim());
            params.scale = attention.getScale().convertToFloat();
            params.sliding_window =
                static_cast<uint32_t>(attention.getSlidingWindow().value_or(0));
            if (std::optional<APFloat> cap = attention.getSoftcap())
              params.softcap = cap->convertToFloat();
            if (std::optional<ArrayRef<float>> slopes = attention.getAlibiSlopes())
              params.alibi_slopes.assign(slopes->begin(), slopes->end());
            // Rotates q and k itself (hetc-fuse-rope-into-attention), with the q rope's
            // frequencies and form, which the pass checked the k rope shares.
            const bool rotates = params.rope = attention->hasAttr(kRope);
            auto rope = attention.getQ().getDefiningOp<RopeOp>();
            if (rotates && !rope)
              return fail(def->name + " has hetc.rope but its q does not come from a hetc.rope");
            if (rotates) {
              params.rope_rotary_dim = static_cast<uint32_t>(rope.getRotaryDim().value_or(0));
              params.rope_interleaved = rope.getInterleaved();
            }
            def->params.Set(std::move(params));
            if (!rotates)
              return success();
            return addWeight(rope.getInvFreq(), rowMajor, "inv_freq");
          })
          .Case([&](SwiGluOp swiglu) {
            def->kind = plan::OpKindDef::SwiGlu;
            plan::SwiGluParamsDefT params;
            params.function = gateFunction(swiglu);
            def->params.Set(std::move(params));
            return success();
          })
          .Case([&](ActivationOp activation) {
            def->kind = plan::OpKindDef::Activation;
            plan::ActivationParamsDefT params;
            // The verifier checked the name is one of these.
            params.function = activationFunction(activation.getFunction());
            def->params.Set(std::move(params));
            return success();
          })
          .Case([&](AddOp) {
            def->kind = plan::OpKindDef::Add;
            def->params.Set(plan::AddParamsDefT());
            return success();
          })
          .Case([&](LmHeadOp lmHead) {
            def->kind = plan::OpKindDef::LmHead;
            plan::LmHeadParamsDefT params;
            if (std::optional<APFloat> cap = lmHead.getSoftcap())
              params.softcap = cap->convertToFloat();
            params.bias = static_cast<bool>(lmHead.getBias());
            def->params.Set(std::move(params));
            if (def->outputs.size() == 1)
              plan_.logits_buffer = def->outputs[0];
            if (failed(addWeight(lmHead.getW(), lmHeadLayout(), "lm_head.weight")))
              return failure();
            // A bias is weights[1], f32 [vocab] (1.16).
            return lmHead.getBias() ? addWeight(lmHead.getBias(), rowMajor, "lm_head.bias")
                                    : success();
          })
          .Default([&](Operation *) { return fail(def->name + " is not an LLM op"); });
  if (failed(result))
    return failure();
  plan_.ops.push_back(std::move(def));
  return success();
}

// Sublayers are the contiguous runs of ops that name them.
LogicalResult PlanBuilder::buildSublayers(ArrayRef<Operation *> ops) {
  for (auto [index, op] : llvm::enumerate(ops)) {
    if (!op->hasAttr(kSublayer))
      continue;
    FailureOr<SublayerAttrs> sublayer = SublayerAttrs::read(op);
    if (failed(sublayer))
      return failure();
    auto layer = op->getAttrOfType<IntegerAttr>(kLayer);
    if (!layer)
      return fail(plan_.ops[index]->name + " has a hetc.sublayer but no hetc.layer");
    size_t s = static_cast<size_t>(sublayer->index);
    if (s > plan_.sublayers.size())
      return fail(plan_.ops[index]->name + " starts sublayer " + Twine(s) + " before sublayer " +
                  Twine(plan_.sublayers.size()));
    plan_.ops[index]->sublayer = static_cast<int32_t>(s);
    if (s == plan_.sublayers.size()) {
      auto def = std::make_unique<plan::SublayerDefT>();
      def->layer = static_cast<uint32_t>(layer.getInt());
      def->kind = sublayer->kind;
      def->device = plan::DeviceDef::CPU;
      def->first_op = static_cast<uint32_t>(index);
      plan_.sublayers.push_back(std::move(def));
    }
    plan::SublayerDefT &def = *plan_.sublayers[s];
    if (def.first_op + def.op_count != index)
      return fail(plan_.ops[index]->name + " belongs to sublayer " + Twine(s) +
                  ", whose ops are not contiguous");
    ++def.op_count;
    // On the GPU when any of its ops runs there in decode.
    if (plan_.ops[index]->device == plan::DeviceDef::GPU)
      def.device = plan::DeviceDef::GPU;
  }
  return success();
}

// One stage of the device plan, as the plan format holds it.
std::unique_ptr<plan::StagePlanDefT> stagePlanDef(const compiler::StageAssignment &stage) {
  auto def = std::make_unique<plan::StagePlanDefT>();
  def->stage =
      stage.stage == compiler::Stage::Prefill ? plan::StageDef::Prefill : plan::StageDef::Decode;
  def->batch = stage.batch;
  def->len = stage.len;
  def->predicted_seconds = stage.seconds;
  def->reason = stage.reason;
  auto bits = [](compiler::Policy policy) {
    return static_cast<plan::CostSublayerBits>(policy.bits());
  };
  for (const compiler::LayerSpan &span : stage.spans) {
    auto group = std::make_unique<plan::LayerGroupDefT>();
    group->name = span.group;
    group->first_layer = span.firstLayer;
    group->layer_count = span.layers;
    group->policy = bits(span.policy);
    group->layer_seconds = span.layerSeconds;
    def->groups.push_back(std::move(group));
  }
  for (const compiler::PolicyRow &row : stage.table.rows) {
    auto rowDef = std::make_unique<plan::PolicyRowDefT>();
    rowDef->len = row.len;
    for (const compiler::PolicyRange &range : row.ranges) {
      auto rangeDef = std::make_unique<plan::PolicyRangeDefT>();
      rangeDef->first_batch = range.firstBatch;
      rangeDef->last_batch = range.lastBatch;
      for (compiler::Policy policy : range.groupPolicies)
        rangeDef->policies.push_back(bits(policy));
      rowDef->ranges.push_back(std::move(rangeDef));
    }
    def->policy_table.push_back(std::move(rowDef));
  }
  return def;
}

// The target, tiers, reasons and stage plans hetc-assign-devices recorded on the module.
LogicalResult PlanBuilder::buildDevicePlan() {
  FailureOr<compiler::DeviceAssignment> assignment = readDevicePlan(module_, "the plan emitter");
  if (failed(assignment))
    return failure();
  plan_.target = assignment->target;
  plan_.target_gpu = assignment->gpu;
  plan_.tier_reason = assignment->tierReason;
  plan_.activation_tier = tierDef(assignment->activationTier);
  plan_.kv_cache->tier = tierDef(assignment->kvTier);
  plan_.stages.push_back(stagePlanDef(assignment->prefill));
  plan_.stages.push_back(stagePlanDef(assignment->decode));
  return success();
}

// What the plan's kernels need of a host at minimum: the union over its weights' layouts.
uint64_t PlanBuilder::requiredCpuFeatures() const {
  uint64_t features = static_cast<uint64_t>(plan::CpuFeatureBits::X86_64);
  for (const auto &tensor : plan_.tensors)
    features |= layoutCpuFeatures(tensor->layout);
  return features;
}

LogicalResult PlanBuilder::build(const std::string &target) {
  // The attribute readers report errors as diagnostics; the first is the plan's error.
  ScopedDiagnosticHandler readerErrors(module_.getContext(), [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error) {
      std::optional<std::string> node = nodeName(diag.getLocation());
      (void)fail(node ? *node + ": " + diag.str() : diag.str());
    }
    return success();
  });
  plan_.schema_version = kPlanSchemaVersion;
  plan_.required_cpu_features = requiredCpuFeatures();
  plan_.target = target;
  plan_.producer = kProducer;
  if (failed(buildModuleTables()) || failed(buildDevicePlan()))
    return failure();

  func::FuncOp func = module_.lookupSymbol<func::FuncOp>("main");
  if (!func) {
    auto funcs = module_.getOps<func::FuncOp>();
    if (funcs.empty() || std::next(funcs.begin()) != funcs.end())
      return fail("the module has no function @main holding the model");
    func = *funcs.begin();
  }
  SmallVector<Operation *> ops = collectLlmOps(func);
  // An add fused into the linear before it runs as that linear's epilogue: no op of its own.
  llvm::erase_if(ops, [](Operation *op) { return op->hasAttr(kFused); });
  if (ops.empty())
    return fail("@main has no LLM ops to emit");
  nameOps(ops);
  if (lmHeadLayout() != plan::WeightLayoutDef::LinearNK && failed(tieEmbeddingToLmHead(ops)))
    return failure();
  for (Operation *op : ops)
    if (failed(buildOp(op)))
      return failure();
  if (!llvm::any_of(ops, [](Operation *op) { return isa<LmHeadOp>(op); }))
    return fail("the model has no hetc.lm_head, so the plan would produce no logits");
  // Tied also when the export stored the table's transpose as its own initializer: the packed
  // lm_head is then the table's segment.
  auto segmentOf = [&](plan::OpKindDef kind) -> std::optional<uint32_t> {
    for (const auto &op : plan_.ops)
      if (op->kind == kind && !op->weights.empty())
        return plan_.tensors[op->weights[0]]->segment;
    return std::nullopt;
  };
  std::optional<uint32_t> table = segmentOf(plan::OpKindDef::Embedding);
  if (table && table == segmentOf(plan::OpKindDef::LmHead))
    plan_.model->tied_embeddings = true;
  return buildSublayers(ops);
}

} // namespace

namespace {

PlanMemory memoryOf(PlanBuilder &builder) {
  PlanMemory memory;
  memory.weightBytes = builder.weightBytes();
  const plan::PlanDefT &plan = builder.plan();
  memory.activationBytes = plan.activation_arena_size;
  if (const plan::KvCacheDefT *kv = plan.kv_cache.get()) {
    memory.kvArenaBytes = kv->arena_size;
    memory.kvBytesPerPosition =
        static_cast<uint64_t>(kv->layers) * kv->kv_heads * 2 * kvRowBytes(kv->dtype, kv->head_dim);
    memory.maxBatch = kv->slots;
    memory.maxSeq = kv->max_seq;
    memory.kvPositionGranule = kvStreamPositions(kv->dtype, 1);
  }
  return memory;
}

} // namespace

LogicalResult hetc::compiler::measurePlan(ModuleOp module, const WeightStore &weights,
                                          const std::string &target,
                                          const WeightScheme &linearWeights, PlanMemory &memory,
                                          std::string &error) {
  PlanBuilder builder(module, weights, linearWeights);
  if (failed(builder.build(target))) {
    error = builder.error();
    return failure();
  }
  memory = memoryOf(builder);
  return success();
}

LogicalResult hetc::compiler::emitPlan(ModuleOp module, const WeightStore &weights,
                                       const std::string &target, const WeightScheme &linearWeights,
                                       const std::string &path, std::string &error,
                                       const PlanMemoryCheck &check,
                                       const plan::TokenizerDefT *tokenizer) {
  PlanBuilder builder(module, weights, linearWeights);
  if (failed(builder.build(target))) {
    error = builder.error();
    return failure();
  }
  if (check) {
    if (Status status = check(memoryOf(builder)); !status) {
      error = status.message();
      return failure();
    }
  }
  if (tokenizer)
    builder.plan().tokenizer = std::make_unique<plan::TokenizerDefT>(*tokenizer);
  Status status = writePlanFile(path, builder.plan(), builder.payloads());
  if (!status) {
    error = status.message();
    return failure();
  }
  return success();
}
