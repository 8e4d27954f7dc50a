// The plan loader: identify, verify structure, then check meaning, so that after load() the
// executor can trust every index, size and offset without checking again.
#include "runtime/format/Plan.h"

#include "runtime/format/WeightLayout.h"

#include <flatbuffers/flatbuffers.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <iterator>
#include <optional>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace hetc {

namespace {

using namespace plan;

// Ops.def lists every OpKindDef once, in order, each with a params type of its own: a kind added
// to hplan.fbs and not to Ops.def, or the other way, breaks the build here.
constexpr OpKindDef kOpsDefKinds[] = {
#define HETC_PLAN_OP(Kind, ...) OpKindDef::Kind,
#include "runtime/format/Ops.def"
};
constexpr bool opsDefInOrder() {
  for (size_t i = 0; i < std::size(kOpsDefKinds); ++i)
    if (static_cast<size_t>(kOpsDefKinds[i]) != i)
      return false;
  return true;
}
static_assert(opsDefInOrder(), "runtime/format/Ops.def lists the kinds out of OpKindDef's order");
static_assert(std::size(kOpsDefKinds) == static_cast<size_t>(OpKindDef::MAX) + 1,
              "runtime/format/Ops.def and hplan.fbs's OpKindDef list different kinds");
static_assert(static_cast<size_t>(OpParamsDef::MAX) == std::size(kOpsDefKinds),
              "every OpParamsDef member is the params of one kind in runtime/format/Ops.def");

// Size prefix (4) + root offset (4) + file identifier (4).
constexpr size_t kPlanHeaderBytes = 12;
constexpr size_t kIdentifierOffset = 8;

template <typename... Parts> std::string concat(const Parts &...parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

std::string versionText(uint32_t version) { return concat(version >> 16, ".", version & 0xffff); }

// The identifier as text, with bytes that are not printable shown as \xNN.
std::string identifierText(const uint8_t *id) {
  std::string out;
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 4; ++i) {
    const uint8_t c = id[i];
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string quoted(const flatbuffers::String *s) {
  return s ? "'" + s->str() + "'" : std::string("''");
}

template <typename Enum> bool inRange(Enum value) {
  return value >= Enum::MIN && value <= Enum::MAX;
}

template <typename Enum> std::string enumText(Enum value, const char *name) {
  if (name && *name)
    return name;
  return concat("unknown(", static_cast<int>(value), ")");
}

std::string kindText(OpKindDef kind) { return enumText(kind, EnumNameOpKindDef(kind)); }
std::string dtypeText(DTypeDef dtype) { return enumText(dtype, EnumNameDTypeDef(dtype)); }

std::string shapeText(const flatbuffers::Vector<uint64_t> *shape) {
  std::string out = "[";
  for (flatbuffers::uoffset_t i = 0; shape && i < shape->size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape->Get(i));
  return out + "]";
}

uint32_t count(const flatbuffers::Vector<uint32_t> *indices) {
  return indices ? indices->size() : 0;
}

template <typename T> uint32_t count(const flatbuffers::Vector<flatbuffers::Offset<T>> *items) {
  return items ? items->size() : 0;
}

// The verifier of meaning. Every method returns the first failure as one message; `subject_`
// ("plan 'x.hplan'") starts each message.
class PlanChecker {
public:
  PlanChecker(const uint8_t *bytes, uint64_t size, uint64_t flatbufferEnd, const PlanDef &def,
              std::string subject)
      : bytes_(bytes), size_(size), flatbufferEnd_(flatbufferEnd), def_(def),
        subject_(std::move(subject)) {}

  Status check() {
    Status status = checkRequiredTables();
    if (status)
      status = checkModelAndBounds();
    if (status)
      status = checkSegments();
    if (status)
      status = checkTensors();
    if (status)
      status = checkBuffers();
    if (status)
      status = checkKvCache();
    if (status)
      status = checkOps();
    if (status)
      status = checkSublayers();
    if (status)
      status = checkDevicePlan();
    if (status)
      status = checkTokenizer();
    // Last, because it reads every weight byte: cheap mistakes are reported without that wait.
    if (status)
      status = checkChecksums();
    return status;
  }

private:
  template <typename... Parts> Status fail(const Parts &...parts) const {
    return Status::error(concat(subject_, ": ", parts...));
  }

  std::string opText(uint32_t index) const {
    const OpDef *op = def_.ops()->Get(index);
    return concat("op ", index, " (", kindText(op->kind()), " ", quoted(op->name()), ")");
  }
  std::string tensorText(uint32_t index) const {
    return concat("tensor ", index, " (", quoted(def_.tensors()->Get(index)->name()), ")");
  }
  std::string bufferText(uint32_t index) const {
    return concat("buffer ", index, " (", quoted(def_.buffers()->Get(index)->name()), ")");
  }

  Status checkRequiredTables() {
    if (!def_.model())
      return fail("the model table is missing");
    if (!def_.bounds())
      return fail("the bounds table is missing");
    if (!def_.kv_cache())
      return fail("the kv_cache table is missing");
    if (count(def_.segments()) == 0)
      return fail("the plan has no weight segments");
    if (count(def_.tensors()) == 0)
      return fail("the plan has no tensors");
    if (count(def_.buffers()) == 0)
      return fail("the plan has no activation buffers");
    if (count(def_.ops()) == 0)
      return fail("the plan has no ops");
    return Status();
  }

  Status checkModelAndBounds() {
    const ModelDef &m = *def_.model();
    const struct {
      const char *name;
      uint32_t value;
    } positive[] = {{"vocab", m.vocab()},
                    {"hidden", m.hidden()},
                    {"layers", m.layers()},
                    {"heads", m.heads()},
                    {"kv_heads", m.kv_heads()},
                    {"head_dim", m.head_dim()},
                    {"intermediate", m.intermediate()}};
    for (const auto &field : positive)
      if (field.value == 0)
        return fail("model ", field.name, " is 0; it must be positive");
    if (m.heads() % m.kv_heads() != 0)
      return fail("model heads ", m.heads(), " is not a multiple of kv_heads ", m.kv_heads());
    // The op set of this schema describes two families, "llama" (RmsNorm, SwiGlu) and, from
    // 1.10, "opt" (LayerNorm, Activation); a plan naming another was not written for these ops.
    // Plans from before 1.8 may name none.
    const uint32_t minor = def_.schema_version() & 0xffff;
    const std::string architecture = m.architecture() ? m.architecture()->str() : "";
    const bool known = architecture == "llama" || (architecture == "opt" && minor >= 10) ||
                       (architecture.empty() && minor < 8);
    if (!known)
      return fail("model architecture ", quoted(m.architecture()),
                  " is not one this runtime runs (llama, opt)");
    if (!std::isfinite(m.rms_eps()) || m.rms_eps() < 0)
      return fail("model rms_eps ", m.rms_eps(), " is not a finite non-negative number");

    const BoundsDef &b = *def_.bounds();
    if (b.max_batch() == 0)
      return fail("bounds max_batch is 0; it must be positive");
    if (b.max_seq() == 0)
      return fail("bounds max_seq is 0; it must be positive");
    if (b.max_step_tokens() == 0)
      return fail("bounds max_step_tokens is 0; it must be positive");
    return Status();
  }

  Status checkSegments() {
    const auto &segments = *def_.segments();
    struct Extent {
      uint64_t begin, end;
      uint32_t index;
    };
    std::vector<Extent> extents;
    extents.reserve(segments.size());
    for (uint32_t i = 0; i < segments.size(); ++i) {
      const SegmentDef *s = segments.Get(i);
      uint64_t end;
      if (__builtin_add_overflow(s->offset(), s->size(), &end))
        return fail("segment ", i, " offset ", s->offset(), " + size ", s->size(),
                    " overflows 64 bits");
      if (s->offset() % kSegmentAlignment != 0)
        return fail("segment ", i, " offset ", s->offset(), " is not a multiple of ",
                    kSegmentAlignment);
      if (s->offset() < flatbufferEnd_)
        return fail("segment ", i, " at offset ", s->offset(),
                    " overlaps the FlatBuffer, which ends at ", flatbufferEnd_);
      if (end > size_)
        return fail("segment ", i, " [", s->offset(), ", ", end, ") lies outside the ", size_,
                    "-byte file: the plan is truncated or its segment table corrupted");
      extents.push_back({s->offset(), end, i});
    }
    std::sort(extents.begin(), extents.end(),
              [](const Extent &a, const Extent &b) { return a.begin < b.begin; });
    for (size_t i = 1; i < extents.size(); ++i)
      if (extents[i - 1].end > extents[i].begin)
        return fail("segments ", extents[i - 1].index, " [", extents[i - 1].begin, ", ",
                    extents[i - 1].end, ") and ", extents[i].index, " [", extents[i].begin, ", ",
                    extents[i].end, ") overlap");
    return Status();
  }

  Status checkTensors() {
    const auto &tensors = *def_.tensors();
    const uint32_t segmentCount = def_.segments()->size();
    for (uint32_t i = 0; i < tensors.size(); ++i) {
      const TensorDef *t = tensors.Get(i);
      if (t->segment() >= segmentCount)
        return fail(tensorText(i), " uses segment ", t->segment(), " but the plan has ",
                    segmentCount, " segments");
      if (!inRange(t->dtype()))
        return fail(tensorText(i), " has unknown dtype ", static_cast<int>(t->dtype()));
      if (!inRange(t->layout()))
        return fail(tensorText(i), " has unknown layout ", static_cast<int>(t->layout()));
      const auto *shape = t->shape();
      if (!shape || shape->size() == 0)
        return fail(tensorText(i), " has no shape");
      // The FlatBuffers verifier aligns a vector's 4-byte length, not its 8-byte elements.
      if (reinterpret_cast<uintptr_t>(shape->data()) % alignof(uint64_t) != 0)
        return fail(tensorText(i), "'s shape is not 8-byte aligned");
      const bool packedBf16 = t->layout() == WeightLayoutDef::LinearBf16N16K2;
      const bool packedInt8 = t->layout() == WeightLayoutDef::LinearInt8N16K4;
      const bool packedInt4 = t->layout() == WeightLayoutDef::LinearInt4N16K8;
      if ((t->layout() == WeightLayoutDef::LinearNK || packedBf16 || packedInt8 || packedInt4) &&
          shape->size() != 2)
        return fail(tensorText(i), " has layout ", EnumNameWeightLayoutDef(t->layout()),
                    " but shape ", shapeText(shape), "; the layout is [N, K]");
      if (packedBf16 && t->dtype() != DTypeDef::BF16)
        return fail(tensorText(i), " has layout LinearBf16N16K2 but dtype ", dtypeText(t->dtype()),
                    "; the layout holds BF16");
      if (packedInt8 && t->dtype() != DTypeDef::INT8)
        return fail(tensorText(i), " has layout LinearInt8N16K4 but dtype ", dtypeText(t->dtype()),
                    "; the layout holds INT8");
      if (packedInt4 && t->dtype() != DTypeDef::INT4)
        return fail(tensorText(i), " has layout LinearInt4N16K8 but dtype ", dtypeText(t->dtype()),
                    "; the layout holds INT4");
      if (const uint32_t minor = def_.schema_version() & 0xffff;
          (packedInt8 || packedInt4) && minor < 13)
        return fail(tensorText(i), " has layout ", EnumNameWeightLayoutDef(t->layout()),
                    ", which schema 1.", minor, " does not have (added in 1.13)");
      if (t->dtype() == DTypeDef::INT8 && !packedInt8)
        return fail(tensorText(i), " is INT8 in layout ", EnumNameWeightLayoutDef(t->layout()),
                    "; an INT8 weight is LinearInt8N16K4");
      if (t->dtype() == DTypeDef::INT4 && !packedInt4)
        return fail(tensorText(i), " is INT4 in layout ", EnumNameWeightLayoutDef(t->layout()),
                    "; an INT4 weight is LinearInt4N16K8");
      if (packedInt4 && !LinearInt4N16K8::validGroup(t->group_size()))
        return fail(tensorText(i), " has group_size ", t->group_size(),
                    "; LinearInt4N16K8 takes groups of 16, 32, 64 or 128");
      if (const uint32_t minor = def_.schema_version() & 0xffff;
          packedInt4 && t->group_size() == 16 && minor < 14)
        return fail(tensorText(i), " has group_size 16, which schema 1.", minor,
                    " does not have (added in 1.14)");
      uint64_t bytes = dtypeBytes(t->dtype());
      for (uint64_t dim : *shape) {
        if (dim == 0)
          return fail(tensorText(i), " shape ", shapeText(shape), " has an empty dimension");
        if (__builtin_mul_overflow(bytes, dim, &bytes))
          return fail(tensorText(i), " shape ", shapeText(shape), " overflows 64 bits");
      }
      // The packed layout pads N to 16 and K to 2 (codegen/cpu/WeightLayout.h).
      if (packedBf16 && !LinearBf16N16K2::sizeChecked(shape->Get(0), shape->Get(1), bytes))
        return fail(tensorText(i), " shape ", shapeText(shape), " overflows 64 bits");
      // The integer layouts pad N to 16 and K to 4 (int8) or a whole group (int4), and hold their
      // scales (and column sums or zero points) after the packed values.
      if (packedInt8 && !LinearInt8N16K4::segmentSizeChecked(shape->Get(0), shape->Get(1), bytes))
        return fail(tensorText(i), " shape ", shapeText(shape), " overflows 64 bits");
      if (packedInt4 && !LinearInt4N16K8::segmentSizeChecked(shape->Get(0), shape->Get(1),
                                                             t->group_size(), bytes))
        return fail(tensorText(i), " shape ", shapeText(shape), " overflows 64 bits");
      const uint64_t segmentSize = def_.segments()->Get(t->segment())->size();
      if (bytes != segmentSize)
        return fail(tensorText(i), " of shape ", shapeText(shape), " ", dtypeText(t->dtype()),
                    " in layout ", EnumNameWeightLayoutDef(t->layout()), " needs ", bytes,
                    " bytes but segment ", t->segment(), " holds ", segmentSize);
    }
    return Status();
  }

  Status checkBuffers() {
    const auto &buffers = *def_.buffers();
    const uint64_t arena = def_.activation_arena_size();
    for (uint32_t i = 0; i < buffers.size(); ++i) {
      const BufferDef *b = buffers.Get(i);
      if (!inRange(b->dtype()))
        return fail(bufferText(i), " has unknown dtype ", static_cast<int>(b->dtype()));
      // Activations are float32 in this schema: every op's kernels read and write f32 rows.
      if (b->dtype() != DTypeDef::F32)
        return fail(bufferText(i), " is ", EnumNameDTypeDef(b->dtype()),
                    "; activation buffers are F32 in plan schema 1");
      if (!inRange(b->role()))
        return fail(bufferText(i), " has unknown role ", static_cast<int>(b->role()));
      if (b->rows() == 0 || b->cols() == 0)
        return fail(bufferText(i), " is empty: ", b->rows(), " x ", b->cols());
      const uint64_t elementSize = dtypeBytes(b->dtype());
      uint64_t rowBytes;
      if (__builtin_mul_overflow(b->cols(), elementSize, &rowBytes))
        return fail(bufferText(i), " row of ", b->cols(), " columns overflows 64 bits");
      if (b->row_stride() < rowBytes)
        return fail(bufferText(i), " row stride ", b->row_stride(), " is less than its ", b->cols(),
                    " ", dtypeText(b->dtype()), " columns (", rowBytes, " bytes)");
      if (b->row_stride() % elementSize != 0)
        return fail(bufferText(i), " row stride ", b->row_stride(),
                    " is not a multiple of the element size ", elementSize);
      if (b->offset() % kBufferAlignment != 0)
        return fail(bufferText(i), " offset ", b->offset(), " is not ", kBufferAlignment,
                    "-byte aligned");
      uint64_t bytes, end;
      if (__builtin_mul_overflow(b->rows(), b->row_stride(), &bytes) ||
          __builtin_add_overflow(b->offset(), bytes, &end) || end > arena)
        return fail(bufferText(i), " at offset ", b->offset(), " with ", b->rows(),
                    " rows of stride ", b->row_stride(), " lies outside the ", arena,
                    "-byte activation arena");
      if (b->role() == BufferRoleDef::Hidden && b->cols() != def_.model()->hidden())
        return fail(bufferText(i), " is a Hidden buffer of ", b->cols(),
                    " columns but the model hidden size is ", def_.model()->hidden());
      // Rows are tokens of a step, or sequences for the logits: the capacity the bounds promise.
      const bool isLogits = b->role() == BufferRoleDef::Logits;
      const uint64_t neededRows =
          isLogits ? def_.bounds()->max_batch() : def_.bounds()->max_step_tokens();
      if (b->rows() < neededRows)
        return fail(bufferText(i), " has ", b->rows(), " rows but ",
                    isLogits ? "bounds max_batch is " : "bounds max_step_tokens is ", neededRows);
    }
    if (def_.logits_buffer() >= buffers.size())
      return fail("logits_buffer ", def_.logits_buffer(), " is out of range: the plan has ",
                  buffers.size(), " buffers");
    if (buffers.Get(def_.logits_buffer())->role() != BufferRoleDef::Logits)
      return fail("logits_buffer ", def_.logits_buffer(), " is ", bufferText(def_.logits_buffer()),
                  ", whose role is not Logits");
    return Status();
  }

  // The general checks keep every address inside the arena, whatever the strides; from 1.8 the
  // layout must also be exactly the format's (kvLayout), as the compiler plans it.
  Status checkKvCache() {
    if (Status s = checkKvCacheBounds(); !s)
      return s;
    if ((def_.schema_version() & 0xffff) < 8)
      return Status();
    const KvCacheDef &kv = *def_.kv_cache();
    const std::optional<KvLayout> layout =
        kvLayout(kv.dtype(), kv.layers(), kv.slots(), kv.kv_heads(), kv.head_dim(), kv.max_seq(),
                 kv.pos_stride());
    if (!layout)
      return fail("kv_cache's layout overflows 64 bits");
    const struct {
      const char *name;
      uint64_t value, expected;
    } fields[] = {{"head_stride", kv.head_stride(), layout->headStride},
                  {"slot_stride", kv.slot_stride(), layout->slotStride},
                  {"layer_stride", kv.layer_stride(), layout->layerStride},
                  {"k_offset", kv.k_offset(), layout->kOffset},
                  {"v_offset", kv.v_offset(), layout->vOffset},
                  {"scale_head_stride", kv.scale_head_stride(), layout->scaleHeadStride},
                  {"scale_slot_stride", kv.scale_slot_stride(), layout->scaleSlotStride},
                  {"scale_layer_stride", kv.scale_layer_stride(), layout->scaleLayerStride},
                  {"k_scale_offset", kv.k_scale_offset(), layout->kScaleOffset},
                  {"v_scale_offset", kv.v_scale_offset(), layout->vScaleOffset},
                  {"arena_size", kv.arena_size(), layout->arenaSize}};
    for (const auto &field : fields)
      if (field.value != field.expected)
        return fail("kv_cache ", field.name, " is ", field.value,
                    " but the format's layout of its ", "dims gives ", field.expected);
    return Status();
  }

  Status checkKvCacheBounds() {
    const KvCacheDef &kv = *def_.kv_cache();
    const ModelDef &m = *def_.model();
    if (!inRange(kv.dtype()))
      return fail("kv_cache has unknown dtype ", static_cast<int>(kv.dtype()));
    if (kv.dtype() == DTypeDef::INT4)
      return fail("kv_cache is INT4; a KV cache is F32, BF16 or INT8");
    if (kv.layers() == 0)
      return fail("kv_cache layers is 0; it must be positive");
    if (kv.layers() > m.layers())
      return fail("kv_cache has ", kv.layers(), " layers but the model has ", m.layers());
    if (kv.slots() != def_.bounds()->max_batch())
      return fail("kv_cache slots ", kv.slots(), " differs from bounds max_batch ",
                  def_.bounds()->max_batch());
    if (kv.max_seq() != def_.bounds()->max_seq())
      return fail("kv_cache max_seq ", kv.max_seq(), " differs from bounds max_seq ",
                  def_.bounds()->max_seq());
    if (kv.kv_heads() != m.kv_heads())
      return fail("kv_cache kv_heads ", kv.kv_heads(), " differs from model kv_heads ",
                  m.kv_heads());
    if (kv.head_dim() != m.head_dim())
      return fail("kv_cache head_dim ", kv.head_dim(), " differs from model head_dim ",
                  m.head_dim());

    // A BF16 or INT8 stream's blocks pair dims and positions: rows exactly head_dim apart, pairs
    // whole, room for whole blocks.
    const bool blocks = kvInBlocks(kv.dtype());
    const char *dtypeName = EnumNameDTypeDef(kv.dtype());
    const uint64_t streamPositions = kvStreamPositions(kv.dtype(), kv.max_seq());
    const bool pairsWhole = kv.head_dim() % 2 == 0 && kv.pos_stride() == kv.head_dim();
    // Before 1.6 (BF16) and 1.7 (INT8) these caches were sized as rows. The layout is this
    // runtime's own, so such a plan still runs when its strides happen to hold the blocks.
    const uint32_t blocksSince = kv.dtype() == DTypeDef::BF16 ? 6 : 7;
    if (blocks && (def_.schema_version() & 0xffff) < blocksSince &&
        (!pairsWhole || kv.head_stride() / streamPositions < kv.pos_stride()))
      return fail("kv_cache is ", dtypeName, " sized as rows (schema before 1.", blocksSince,
                  ") that do not hold this runtime's blocks of 16 positions: recompile the plan");
    if (blocks && !pairsWhole)
      return fail("kv_cache is ", dtypeName, " with head_dim ", kv.head_dim(), " and pos_stride ",
                  kv.pos_stride(), "; its blocks need an even head_dim and pos_stride = head_dim");
    // Each stride must step over the whole extent of the dimensions inside it.
    const Nesting nesting[] = {
        {"pos_stride", kv.pos_stride(), "head_dim", kv.head_dim(), 1},
        {"head_stride", kv.head_stride(),
         blocks ? "max_seq rounded up to 16 (whole blocks) * pos_stride" : "max_seq * pos_stride",
         streamPositions, kv.pos_stride()},
        {"slot_stride", kv.slot_stride(), "kv_heads * head_stride", kv.kv_heads(),
         kv.head_stride()},
        {"layer_stride", kv.layer_stride(), "slots * slot_stride", kv.slots(), kv.slot_stride()},
    };
    if (Status s = checkNesting(nesting); !s)
      return s;
    // Elements from the first to the last addressed one, inclusive.
    const uint64_t elementTerms[][2] = {{kv.layers() - uint64_t{1}, kv.layer_stride()},
                                        {kv.slots() - uint64_t{1}, kv.slot_stride()},
                                        {kv.kv_heads() - uint64_t{1}, kv.head_stride()},
                                        {streamPositions - 1, kv.pos_stride()}};
    const Region regions[] = {{"K", kv.k_offset()}, {"V", kv.v_offset()}};
    if (Status s = checkRegions(kv.head_dim(), elementTerms, dtypeBytes(kv.dtype()), regions); !s)
      return s;

    const uint64_t scaleFields[] = {kv.k_scale_offset(), kv.v_scale_offset(),
                                    kv.scale_head_stride(), kv.scale_slot_stride(),
                                    kv.scale_layer_stride()};
    if (!kvHasRowScales(kv.dtype())) {
      for (uint64_t field : scaleFields)
        if (field != 0)
          return fail("kv_cache of dtype ", dtypeText(kv.dtype()),
                      " has scale offsets or strides; only an INT8 cache has scales");
      return Status();
    }
    // One scale per row; a head's positions are consecutive scales.
    const Nesting scaleNesting[] = {
        {"scale_head_stride", kv.scale_head_stride(), "max_seq", kv.max_seq(), 1},
        {"scale_slot_stride", kv.scale_slot_stride(), "kv_heads * scale_head_stride", kv.kv_heads(),
         kv.scale_head_stride()},
        {"scale_layer_stride", kv.scale_layer_stride(), "slots * scale_slot_stride", kv.slots(),
         kv.scale_slot_stride()},
    };
    if (Status s = checkNesting(scaleNesting); !s)
      return s;
    const uint64_t scaleTerms[][2] = {{kv.layers() - uint64_t{1}, kv.scale_layer_stride()},
                                      {kv.slots() - uint64_t{1}, kv.scale_slot_stride()},
                                      {kv.kv_heads() - uint64_t{1}, kv.scale_head_stride()},
                                      {kv.max_seq() - 1, 1}};
    const Region scaleRegions[] = {{"K scale", kv.k_scale_offset()},
                                   {"V scale", kv.v_scale_offset()}};
    return checkRegions(1, scaleTerms, kKvScaleBytes, scaleRegions);
  }

  struct Nesting {
    const char *stride;
    uint64_t value;
    const char *inner;
    uint64_t innerCount;
    uint64_t innerStride;
  };
  template <size_t N> Status checkNesting(const Nesting (&nesting)[N]) const {
    for (const Nesting &n : nesting) {
      uint64_t innerExtent;
      if (__builtin_mul_overflow(n.innerCount, n.innerStride, &innerExtent))
        return fail("kv_cache ", n.inner, " overflows 64 bits");
      if (n.value < innerExtent)
        return fail("kv_cache ", n.stride, " ", n.value, " is less than ", n.inner, " = ",
                    innerExtent);
    }
    return Status();
  }

  struct Region {
    const char *name;
    uint64_t offset;
  };
  // Each region holds `innermost` items plus sum(index * stride) over `terms`, of `itemBytes`
  // each, from its offset: aligned, inside the KV arena, without overflow.
  template <size_t N>
  Status checkRegions(uint64_t innermost, const uint64_t (&terms)[4][2], uint64_t itemBytes,
                      const Region (&regions)[N]) const {
    const KvCacheDef &kv = *def_.kv_cache();
    uint64_t span = innermost;
    for (const auto &term : terms) {
      uint64_t product;
      if (__builtin_mul_overflow(term[0], term[1], &product) ||
          __builtin_add_overflow(span, product, &span))
        return fail("kv_cache extent overflows 64 bits");
    }
    uint64_t spanBytes;
    if (__builtin_mul_overflow(span, itemBytes, &spanBytes))
      return fail("kv_cache extent overflows 64 bits");
    for (const Region &region : regions) {
      if (region.offset % kBufferAlignment != 0)
        return fail("kv_cache ", region.name, " offset ", region.offset, " is not ",
                    kBufferAlignment, "-byte aligned");
      uint64_t end;
      if (__builtin_add_overflow(region.offset, spanBytes, &end) || end > kv.arena_size())
        return fail("kv_cache ", region.name, " region at offset ", region.offset, " spans ",
                    spanBytes, " bytes, outside the ", kv.arena_size(), "-byte KV arena");
    }
    return Status();
  }

  // Base arity, params type and schema minor of each kind (Ops.def).
  struct KindRule {
    uint32_t inputs, weights, outputs;
    OpParamsDef params;
    uint32_t since;
  };
  static KindRule ruleFor(OpKindDef kind) {
    switch (kind) {
#define HETC_PLAN_OP(Kind, Params, Inputs, Weights, Outputs, Since)                                \
  case OpKindDef::Kind:                                                                            \
    return {Inputs, Weights, Outputs, OpParamsDef::Params, Since};
#include "runtime/format/Ops.def"
    }
    return {0, 0, 0, OpParamsDef::NONE, 0};
  }

  Status checkOps() {
    const auto &ops = *def_.ops();
    const uint32_t bufferCount = def_.buffers()->size();
    const uint32_t tensorCount = def_.tensors()->size();
    const uint32_t sublayerCount = count(def_.sublayers());
    bool hasLmHead = false;
    std::optional<uint32_t> window;
    for (uint32_t i = 0; i < ops.size(); ++i) {
      const OpDef *op = ops.Get(i);
      if (!inRange(op->kind()))
        return fail("op ", i, " (", quoted(op->name()), ") has unknown kind ",
                    static_cast<int>(op->kind()));
      if (!inRange(op->device()))
        return fail(opText(i), " has unknown device ", static_cast<int>(op->device()));
      if (op->layer() < -1 ||
          (op->layer() >= 0 && static_cast<uint32_t>(op->layer()) >= def_.model()->layers()))
        return fail(opText(i), " is in layer ", op->layer(), " but the model has ",
                    def_.model()->layers(), " layers");
      if (op->sublayer() < -1 ||
          (op->sublayer() >= 0 && static_cast<uint32_t>(op->sublayer()) >= sublayerCount))
        return fail(opText(i), " is in sublayer ", op->sublayer(), " but the plan has ",
                    sublayerCount, " sublayers");
      for (uint32_t b = 0; b < count(op->inputs()); ++b)
        if (op->inputs()->Get(b) >= bufferCount)
          return fail(opText(i), " reads buffer ", op->inputs()->Get(b), " but the plan has ",
                      bufferCount, " buffers");
      for (uint32_t b = 0; b < count(op->outputs()); ++b)
        if (op->outputs()->Get(b) >= bufferCount)
          return fail(opText(i), " writes buffer ", op->outputs()->Get(b), " but the plan has ",
                      bufferCount, " buffers");
      for (uint32_t w = 0; w < count(op->weights()); ++w)
        if (op->weights()->Get(w) >= tensorCount)
          return fail(opText(i), " uses tensor ", op->weights()->Get(w), " but the plan has ",
                      tensorCount, " tensors");

      KindRule rule = ruleFor(op->kind());
      const std::string kind = kindText(op->kind());
      // A Linear with a fused residual add reads the residual as a second input, one with a
      // fused SwiGlu the swiglu's other operand.
      const LinearParamsDef *linear =
          op->kind() == OpKindDef::Linear ? op->params_as_LinearParamsDef() : nullptr;
      const bool residual = linear && linear->residual();
      const bool swiglu = linear && linear->swiglu() != SwiGluRoleDef::None;
      if (residual || swiglu)
        rule.inputs = 2;
      const LayerNormParamsDef *layerNorm =
          op->kind() == OpKindDef::LayerNorm ? op->params_as_LayerNormParamsDef() : nullptr;
      const LmHeadParamsDef *lmHead =
          op->kind() == OpKindDef::LmHead ? op->params_as_LmHeadParamsDef() : nullptr;
      const bool bias = (linear && linear->bias()) || (layerNorm && layerNorm->bias()) ||
                        (lmHead && lmHead->bias());
      if (bias)
        rule.weights = 2;
      // An Embedding with learned positions reads them as a second weight (1.10).
      const bool positions = op->kind() == OpKindDef::Embedding && count(op->weights()) == 2;
      if (positions)
        rule.weights = 2;
      const uint32_t minor = def_.schema_version() & 0xffff;
      if (minor < rule.since)
        return fail(opText(i), " is of kind ", kind, ", which schema 1.", minor,
                    " does not have (added in 1.", rule.since, ")");
      if (positions && minor < 10)
        return fail(opText(i), " adds learned positions, which schema 1.", minor,
                    " does not have (added in 1.10)");
      // An Attention that rotates q and k reads the frequencies as a weight.
      if (op->kind() == OpKindDef::Attention && op->params_as_AttentionParamsDef() &&
          op->params_as_AttentionParamsDef()->rope())
        rule.weights = 1;
      if (count(op->inputs()) != rule.inputs)
        return fail(opText(i), " has ", count(op->inputs()), " inputs; a ", kind, " op",
                    residual ? " with a residual"
                    : swiglu ? " with a fused swiglu"
                             : "",
                    " takes ", rule.inputs);
      if (count(op->weights()) != rule.weights)
        return fail(opText(i), " has ", count(op->weights()), " weights; a ", kind, " op",
                    rule.weights == 1 && op->kind() == OpKindDef::Attention ? " with rope"
                    : bias                                                  ? " with a bias"
                    : positions ? " with learned positions"
                                : "",
                    " takes ", rule.weights);
      if (count(op->outputs()) != rule.outputs)
        return fail(opText(i), " has ", count(op->outputs()), " outputs; a ", kind, " op takes ",
                    rule.outputs);
      if (op->params_type() != rule.params || !op->params())
        return fail(opText(i), " carries ",
                    enumText(op->params_type(), EnumNameOpParamsDef(op->params_type())),
                    " params; a ", kind, " op needs ", EnumNameOpParamsDef(rule.params));
      // From 1.8 attention carries no tasks (the executor splits it by positions); before, it
      // carried a count nothing read.
      const bool attention = op->kind() == OpKindDef::Attention;
      if (!attention && op->task_count() == 0)
        return fail(opText(i), " has task_count 0; every op runs at least one task");
      if (attention && (def_.schema_version() & 0xffff) >= 8 &&
          (op->task_count() != 0 || op->task_grain() != 0))
        return fail(opText(i), " carries tasks ", op->task_count(), " x ", op->task_grain(),
                    "; attention is split by positions at run time and carries none");

      Status status = checkOpShapes(i, *op);
      if (!status)
        return status;
      if (status = checkNewerParams(i, *op); !status)
        return status;
      hasLmHead |= op->kind() == OpKindDef::LmHead;
      // Before 1.16 the attention ops of a plan shared one window.
      if (const AttentionParamsDef *p = op->params_as_AttentionParamsDef(); p && minor < 16) {
        if (!window)
          window = p->sliding_window();
        else if (*window != p->sliding_window())
          return fail(opText(i), " has sliding window ", p->sliding_window(), " but an earlier "
                      "attention op has ", *window, "; the attention ops of a plan share one "
                      "before schema 1.16");
      }
    }
    if (!hasLmHead)
      return fail("the plan has no LmHead op, so it produces no logits");
    return Status();
  }

  const BufferDef &buffer(uint32_t index) const { return *def_.buffers()->Get(index); }
  const TensorDef &tensor(uint32_t index) const { return *def_.tensors()->Get(index); }

  // A linear weight [N, K] for an op reading `in` columns and writing `out` columns; the integer
  // layouts for an LmHead only from schema 1.14 (`lmHead`).
  Status checkLinearWeight(uint32_t opIndex, uint32_t weight, uint64_t in, uint64_t out,
                           bool lmHead) const {
    const TensorDef &w = tensor(weight);
    const bool integer = w.layout() == WeightLayoutDef::LinearInt8N16K4 ||
                         w.layout() == WeightLayoutDef::LinearInt4N16K8;
    if (const uint32_t minor = def_.schema_version() & 0xffff; integer && lmHead && minor < 14)
      return fail(opText(opIndex), " weight ", tensorText(weight), " is ",
                  EnumNameWeightLayoutDef(w.layout()), ", which schema 1.", minor,
                  " does not allow for an lm_head (added in 1.14)");
    if (w.layout() != WeightLayoutDef::LinearNK && w.layout() != WeightLayoutDef::LinearBf16N16K2 &&
        !integer)
      return fail(opText(opIndex), " weight ", tensorText(weight), " is in the ",
                  EnumNameWeightLayoutDef(w.layout()),
                  " layout; a linear weight is LinearNK, LinearBf16N16K2, LinearInt8N16K4 or "
                  "LinearInt4N16K8");
    const uint64_t n = w.shape()->Get(0), k = w.shape()->Get(1);
    if (k != in)
      return fail(opText(opIndex), " weight ", tensorText(weight),
                  " [N, K] = ", shapeText(w.shape()), " has K ", k, " but the input has ", in,
                  " columns");
    if (n != out)
      return fail(opText(opIndex), " weight ", tensorText(weight),
                  " [N, K] = ", shapeText(w.shape()), " has N ", n, " but the output has ", out,
                  " columns");
    return Status();
  }

  Status checkVectorWeight(uint32_t opIndex, uint32_t weight, uint64_t length,
                           const char *what) const {
    const TensorDef &w = tensor(weight);
    if (w.shape()->size() != 1 || w.shape()->Get(0) != length)
      return fail(opText(opIndex), " weight ", tensorText(weight), " has shape ",
                  shapeText(w.shape()), " but ", what, " needs [", length, "]");
    return Status();
  }

  // A weight the row kernels read as float32 elements in order: F32 RowMajor.
  Status checkF32RowMajor(uint32_t opIndex, uint32_t weight, const char *what) const {
    const TensorDef &w = tensor(weight);
    if (w.dtype() != DTypeDef::F32 || w.layout() != WeightLayoutDef::RowMajor)
      return fail(opText(opIndex), " ", what, " ", tensorText(weight), " is ",
                  EnumNameDTypeDef(w.dtype()), " ", EnumNameWeightLayoutDef(w.layout()), "; a ",
                  what, " is F32 RowMajor");
    return Status();
  }

  // A bias, gamma or beta: F32 RowMajor [length].
  Status checkF32Vector(uint32_t opIndex, uint32_t weight, uint64_t length,
                        const char *what) const {
    Status status = checkF32RowMajor(opIndex, weight, what);
    return status ? checkVectorWeight(opIndex, weight, length, (std::string("the ") + what).c_str())
                  : status;
  }

  // Learned positions: F32 RowMajor [max_positions, hidden] with a row for every position a
  // sequence of the bounds reaches, offset included, so the executor never reads past them.
  Status checkPositions(uint32_t opIndex, const OpDef &op, uint32_t weight, uint64_t hidden) const {
    if (Status status = checkF32RowMajor(opIndex, weight, "positions table"); !status)
      return status;
    const TensorDef &w = tensor(weight);
    if (w.shape()->size() != 2 || w.shape()->Get(1) != hidden)
      return fail(opText(opIndex), " positions table ", tensorText(weight), " has shape ",
                  shapeText(w.shape()), " but needs [max_positions, ", hidden, "]");
    const uint64_t offset = op.params_as_EmbeddingParamsDef()->position_offset();
    const uint64_t maxSeq = def_.bounds()->max_seq();
    if (maxSeq > w.shape()->Get(0) || offset > w.shape()->Get(0) - maxSeq)
      return fail(opText(opIndex), " positions table ", tensorText(weight), " has ",
                  w.shape()->Get(0), " rows but bounds max_seq ", maxSeq, " + position_offset ",
                  offset, " needs ", maxSeq + offset);
    return Status();
  }

  // A rotation of the first rotary_dim (0: all) columns of each head, by inv_freq [rotary_dim/2].
  Status checkRotation(uint32_t opIndex, uint32_t headDim, uint32_t rotaryDim,
                       uint32_t invFreq) const {
    const uint32_t rotated = rotaryDim == 0 ? headDim : rotaryDim;
    if (rotated > headDim || rotated % 2 != 0)
      return fail(opText(opIndex), " rotates ", rotated, " columns of heads of ", headDim,
                  "; rotary_dim must be even and at most head_dim");
    return checkVectorWeight(opIndex, invFreq, rotated / 2, "inv_freq [rotary_dim / 2]");
  }

  Status checkSameColumns(uint32_t opIndex, const char *what, uint32_t a, uint32_t b) const {
    if (buffer(a).cols() != buffer(b).cols())
      return fail(opText(opIndex), " ", what, ": ", bufferText(a), " has ", buffer(a).cols(),
                  " columns but ", bufferText(b), " has ", buffer(b).cols());
    return Status();
  }

  // The op parameters added since 1.16: Gemma's (an embedding scale, a swiglu's gate function,
  // soft-capped scores and logits), the squared ReLU (1.17), ALiBi's slopes (1.18). Each finite,
  // and absent from plans older than the minor that added it.
  Status checkNewerParams(uint32_t i, const OpDef &op) const {
    const uint32_t minor = def_.schema_version() & 0xffff;
    auto newer = [&](const char *what, uint32_t added = 16) {
      return fail(opText(i), " has ", what, ", which schema 1.", minor, " does not have (added in 1.",
                  added, ")");
    };
    auto function = [&](ActivationFunctionDef f, bool gate) -> Status {
      if (f > ActivationFunctionDef::MAX)
        return fail(opText(i), " has unknown activation function ", static_cast<unsigned>(f),
                    "; this runtime runs Relu, Gelu, GeluTanh, Silu and ReluSquared");
      if ((f == ActivationFunctionDef::Silu) != gate && minor < 16)
        return newer(gate ? "a gate function other than silu" : "the Silu activation");
      if (f == ActivationFunctionDef::ReluSquared && minor < 17)
        return newer("the ReluSquared activation", 17);
      return Status();
    };
    auto softcap = [&](float cap) -> Status {
      if (!std::isfinite(cap) || cap < 0)
        return fail(opText(i), " softcap ", cap, " is not a finite number >= 0");
      return cap > 0 && minor < 16 ? newer("a softcap") : Status();
    };
    switch (op.kind()) {
    case OpKindDef::Embedding: {
      const float scale = op.params_as_EmbeddingParamsDef()->scale();
      if (!std::isfinite(scale) || scale == 0)
        return fail(opText(i), " scale ", scale, " is not a finite non-zero number");
      return scale != 1.0f && minor < 16 ? newer("an embedding scale") : Status();
    }
    case OpKindDef::Linear: {
      const LinearParamsDef *p = op.params_as_LinearParamsDef();
      return p ? function(p->swiglu_function(), true) : Status();
    }
    case OpKindDef::SwiGlu: {
      const SwiGluParamsDef *p = op.params_as_SwiGluParamsDef();
      return p ? function(p->function(), true) : Status();
    }
    case OpKindDef::Activation:
      return function(op.params_as_ActivationParamsDef()->function(), false);
    case OpKindDef::Attention: {
      const AttentionParamsDef *p = op.params_as_AttentionParamsDef();
      if (const auto *slopes = p->alibi_slopes()) {
        if (minor < 18)
          return newer("ALiBi slopes", 18);
        if (slopes->size() != p->heads())
          return fail(opText(i), " has ", slopes->size(), " ALiBi slopes for ", p->heads(),
                      " heads");
        for (float slope : *slopes)
          if (!std::isfinite(slope))
            return fail(opText(i), " has an ALiBi slope ", slope, " that is not finite");
      }
      return softcap(p->softcap());
    }
    case OpKindDef::LmHead:
      if (op.params_as_LmHeadParamsDef()->bias() && minor < 16)
        return newer("a bias");
      return softcap(op.params_as_LmHeadParamsDef()->softcap());
    default:
      return Status();
    }
  }

  // Sizes of each kind's operands agree, so kernels may index by the buffer shapes alone.
  Status checkOpShapes(uint32_t i, const OpDef &op) const {
    const auto in = [&](uint32_t k) { return op.inputs()->Get(k); };
    const auto out = op.outputs()->Get(0);
    const auto weight = [&](uint32_t k) { return op.weights()->Get(k); };
    switch (op.kind()) {
    case OpKindDef::Embedding: {
      const TensorDef &table = tensor(weight(0));
      if (table.layout() != WeightLayoutDef::RowMajor &&
          table.layout() != WeightLayoutDef::LinearBf16N16K2 &&
          table.layout() != WeightLayoutDef::LinearInt8N16K4 &&
          table.layout() != WeightLayoutDef::LinearInt4N16K8)
        return fail(opText(i), " table ", tensorText(weight(0)), " is in the ",
                    EnumNameWeightLayoutDef(table.layout()),
                    " layout; a table is RowMajor or a tied lm_head's LinearBf16N16K2, "
                    "LinearInt8N16K4 or LinearInt4N16K8 weight");
      if (const uint32_t minor = def_.schema_version() & 0xffff;
          table.layout() != WeightLayoutDef::RowMajor &&
          table.layout() != WeightLayoutDef::LinearBf16N16K2 && minor < 14)
        return fail(opText(i), " table ", tensorText(weight(0)), " is ",
                    EnumNameWeightLayoutDef(table.layout()), ", which schema 1.", minor,
                    " does not allow for a table (added in 1.14)");
      if (table.shape()->size() != 2 || table.shape()->Get(0) != def_.model()->vocab() ||
          table.shape()->Get(1) != buffer(out).cols())
        return fail(opText(i), " table ", tensorText(weight(0)), " has shape ",
                    shapeText(table.shape()), " but needs [vocab, output columns] = [",
                    def_.model()->vocab(), ", ", buffer(out).cols(), "]");
      if (count(op.weights()) == 2)
        return checkPositions(i, op, weight(1), buffer(out).cols());
      return Status();
    }
    case OpKindDef::RmsNorm: {
      const float eps = op.params_as_RmsNormParamsDef()->eps();
      if (!std::isfinite(eps) || eps < 0)
        return fail(opText(i), " eps ", eps, " is not a finite non-negative number");
      Status status = checkSameColumns(i, "input and output differ", in(0), out);
      if (!status)
        return status;
      // From 1.15 a gamma shorter than the row normalizes each group of its length on its own
      // (Qwen3's q and k norms, a head at a time).
      const uint64_t cols = buffer(in(0)).cols();
      const TensorDef &gamma = tensor(weight(0));
      const uint32_t minor = def_.schema_version() & 0xffff;
      if (gamma.shape()->size() == 1 && gamma.shape()->Get(0) != cols && minor >= 15 &&
          gamma.shape()->Get(0) > 0 && cols % gamma.shape()->Get(0) == 0)
        return Status();
      return checkVectorWeight(i, weight(0), cols, "the norm");
    }
    case OpKindDef::Linear: {
      const LinearParamsDef &p = *op.params_as_LinearParamsDef();
      if (p.swiglu() > SwiGluRoleDef::MAX)
        return fail(opText(i), " has unknown swiglu role ", static_cast<unsigned>(p.swiglu()));
      if (p.residual() && p.swiglu() != SwiGluRoleDef::None)
        return fail(opText(i), " fuses both a residual add and a swiglu; a linear fuses one");
      // The BF16 kernels add the residual in their epilogue, before any bias could be added:
      // the sum would round unlike the unfused (x W^T + b) + r.
      if (p.residual() && p.bias())
        return fail(opText(i), " fuses a residual add and has a bias; a linear with a bias "
                               "does not fuse one");
      if (p.residual())
        if (Status status = checkSameColumns(i, "residual and output differ", in(1), out); !status)
          return status;
      if (p.swiglu() != SwiGluRoleDef::None)
        if (Status status = checkSameColumns(i, "swiglu operand and output differ", in(1), out);
            !status)
          return status;
      if (Status status =
              checkLinearWeight(i, weight(0), buffer(in(0)).cols(), buffer(out).cols(), false);
          !status || !p.bias())
        return status;
      return checkF32Vector(i, weight(1), buffer(out).cols(), "bias");
    }
    case OpKindDef::Rope: {
      const RopeParamsDef &p = *op.params_as_RopeParamsDef();
      if (out != in(0))
        return fail(opText(i), " writes buffer ", out, " but Rope works in place on buffer ",
                    in(0));
      if (p.heads() == 0 || p.head_dim() == 0 || p.head_dim() % 2 != 0)
        return fail(opText(i), " has ", p.heads(), " heads of head_dim ", p.head_dim(),
                    "; both must be positive and head_dim even");
      if (uint64_t{p.heads()} * p.head_dim() != buffer(out).cols())
        return fail(opText(i), " heads * head_dim = ", uint64_t{p.heads()} * p.head_dim(), " but ",
                    bufferText(out), " has ", buffer(out).cols(), " columns");
      return checkRotation(i, p.head_dim(), p.rotary_dim(), weight(0));
    }
    case OpKindDef::Attention: {
      const AttentionParamsDef &p = *op.params_as_AttentionParamsDef();
      const KvCacheDef &kv = *def_.kv_cache();
      if (p.layer() >= kv.layers())
        return fail(opText(i), " uses KV cache layer ", p.layer(), " but the cache has ",
                    kv.layers(), " layers");
      if (p.heads() == 0 || p.kv_heads() == 0 || p.heads() % p.kv_heads() != 0)
        return fail(opText(i), " has ", p.heads(), " heads and ", p.kv_heads(),
                    " kv_heads; heads must be a positive multiple of kv_heads");
      if (p.kv_heads() != kv.kv_heads() || p.head_dim() != kv.head_dim())
        return fail(opText(i), " has ", p.kv_heads(), " kv_heads of head_dim ", p.head_dim(),
                    " but the KV cache has ", kv.kv_heads(), " of ", kv.head_dim());
      if (!std::isfinite(p.scale()))
        return fail(opText(i), " scale ", p.scale(), " is not finite");
      const uint64_t qCols = uint64_t{p.heads()} * p.head_dim();
      const uint64_t kvCols = uint64_t{p.kv_heads()} * p.head_dim();
      const struct {
        const char *role;
        uint32_t index;
        const char *formula;
        uint64_t cols;
      } operands[] = {{"q", in(0), "heads", qCols},
                      {"k", in(1), "kv_heads", kvCols},
                      {"v", in(2), "kv_heads", kvCols},
                      {"output", out, "heads", qCols}};
      for (const auto &operand : operands)
        if (buffer(operand.index).cols() != operand.cols)
          return fail(opText(i), " ", operand.role, " ", bufferText(operand.index), " has ",
                      buffer(operand.index).cols(), " columns but ", operand.formula,
                      " * head_dim = ", operand.cols);
      if (p.rope()) {
        if (p.head_dim() % 2 != 0)
          return fail(opText(i), " rotates heads of odd head_dim ", p.head_dim());
        return checkRotation(i, p.head_dim(), p.rope_rotary_dim(), weight(0));
      }
      return Status();
    }
    case OpKindDef::SwiGlu:
    case OpKindDef::Add: {
      Status status = checkSameColumns(i, "inputs differ", in(0), in(1));
      return status ? checkSameColumns(i, "input and output differ", in(0), out) : status;
    }
    case OpKindDef::LayerNorm: {
      const LayerNormParamsDef &p = *op.params_as_LayerNormParamsDef();
      if (!std::isfinite(p.eps()) || !(p.eps() > 0))
        return fail(opText(i), " eps ", p.eps(), " is not a finite positive number");
      if (Status status = checkSameColumns(i, "input and output differ", in(0), out); !status)
        return status;
      if (Status status = checkF32Vector(i, weight(0), buffer(out).cols(), "gamma"); !status)
        return status;
      return p.bias() ? checkF32Vector(i, weight(1), buffer(out).cols(), "beta") : Status();
    }
    case OpKindDef::Activation:
      return checkSameColumns(i, "input and output differ", in(0), out);
    case OpKindDef::LmHead:
      if (out != def_.logits_buffer())
        return fail(opText(i), " writes buffer ", out, " but logits_buffer is ",
                    def_.logits_buffer());
      if (buffer(out).cols() != def_.model()->vocab())
        return fail(opText(i), " writes ", buffer(out).cols(), " columns but the model vocab is ",
                    def_.model()->vocab());
      if (op.params_as_LmHeadParamsDef()->bias())
        if (Status status = checkF32Vector(i, weight(1), def_.model()->vocab(), "bias"); !status)
          return status;
      return checkLinearWeight(i, weight(0), buffer(in(0)).cols(), buffer(out).cols(), true);
    }
    return Status();
  }

  Status checkSublayers() {
    const uint32_t sublayerCount = count(def_.sublayers());
    const uint32_t opCount = def_.ops()->size();
    for (uint32_t s = 0; s < sublayerCount; ++s) {
      const SublayerDef *sub = def_.sublayers()->Get(s);
      if (!inRange(sub->kind()))
        return fail("sublayer ", s, " has unknown kind ", static_cast<int>(sub->kind()));
      if (!inRange(sub->device()))
        return fail("sublayer ", s, " has unknown device ", static_cast<int>(sub->device()));
      if (sub->layer() >= def_.model()->layers())
        return fail("sublayer ", s, " is in layer ", sub->layer(), " but the model has ",
                    def_.model()->layers(), " layers");
      if (uint64_t{sub->first_op()} + sub->op_count() > opCount)
        return fail("sublayer ", s, " ops [", sub->first_op(), ", ",
                    uint64_t{sub->first_op()} + sub->op_count(), ") lie outside the ", opCount,
                    " ops");
      for (uint32_t i = sub->first_op(); i < sub->first_op() + sub->op_count(); ++i) {
        const OpDef *op = def_.ops()->Get(i);
        if (op->sublayer() != static_cast<int64_t>(s) ||
            op->layer() != static_cast<int64_t>(sub->layer()))
          return fail(opText(i), " lies in sublayer ", s, " (layer ", sub->layer(),
                      ") but names sublayer ", op->sublayer(), " and layer ", op->layer());
      }
    }
    // The other direction: an op naming a sublayer lies in that sublayer's range.
    for (uint32_t i = 0; i < opCount; ++i) {
      const int32_t s = def_.ops()->Get(i)->sublayer();
      if (s < 0)
        continue;
      const SublayerDef *sub = def_.sublayers()->Get(static_cast<uint32_t>(s));
      if (i < sub->first_op() || i - sub->first_op() >= sub->op_count())
        return fail(opText(i), " names sublayer ", s, " but lies outside its ops [",
                    sub->first_op(), ", ", uint64_t{sub->first_op()} + sub->op_count(), ")");
    }
    return Status();
  }

  bool targetHasGpu() const { return def_.target_gpu() && def_.target_gpu()->size() > 0; }
  std::string targetText() const {
    return concat("the plan's target ", quoted(def_.target()), " has no GPU");
  }

  Status checkTier(TierDef tier, const std::string &what) const {
    if (!inRange(tier))
      return fail(what, " has unknown tier ", static_cast<int>(tier));
    if (tier == TierDef::GPU && !targetHasGpu())
      return fail(what, " is kept in GPU memory but ", targetText());
    return Status();
  }

  Status checkPolicy(uint8_t policy, const std::string &what) const {
    if (policy & ~kAllCostSublayers)
      return fail(what, " has policy bits 0x", std::hex, unsigned{policy}, std::dec,
                  " beyond the 6 sublayers");
    if (policy != kAllCostSublayers && !targetHasGpu())
      return fail(what, " runs sublayers on the GPU (policy ", policyText(policy), ") but ",
                  targetText());
    return Status();
  }

  // The packed tokenizer (schema 1.11): present with text; its ids are ids. The text itself is
  // parsed by runtime/tokenizer when a command needs it, so a plan without it loads as before.
  Status checkTokenizer() {
    const TokenizerDef *t = def_.tokenizer();
    if (!t)
      return Status();
    const uint32_t minor = def_.schema_version() & 0xffff;
    if (minor < 11)
      return fail("the plan packs a tokenizer, which schema 1.", minor,
                  " does not have (added in 1.11)");
    if (!t->tokenizer_json() || t->tokenizer_json()->size() == 0)
      return fail("the tokenizer has no tokenizer.json text");
    if (t->bos_token_id() < -1)
      return fail("tokenizer bos_token_id ", t->bos_token_id(), " is not an id (or -1)");
    if (t->eos_token_ids())
      for (int32_t id : *t->eos_token_ids())
        if (id < 0)
          return fail("tokenizer eos_token_ids holds ", id, ", which is not an id");
    return Status();
  }

  // The device plan (schema 1.5): tiers, each op's devices and cost sublayers, sublayer devices,
  // and the stage plans the op devices must follow.
  Status checkDevicePlan() {
    for (uint32_t i = 0; i < def_.tensors()->size(); ++i)
      if (Status s = checkTier(def_.tensors()->Get(i)->tier(), tensorText(i)); !s)
        return s;
    if (Status s = checkTier(def_.kv_cache()->tier(), "kv_cache"); !s)
      return s;
    if (Status s = checkTier(def_.activation_tier(), "the activation arena"); !s)
      return s;

    const auto &ops = *def_.ops();
    for (uint32_t i = 0; i < ops.size(); ++i) {
      const OpDef *op = ops.Get(i);
      if (!inRange(op->prefill_device()))
        return fail(opText(i), " has unknown prefill device ",
                    static_cast<int>(op->prefill_device()));
      const uint8_t sublayers = static_cast<uint8_t>(op->cost_sublayers());
      if (sublayers & ~kAllCostSublayers)
        return fail(opText(i), " names cost sublayer bits 0x", std::hex, unsigned{sublayers},
                    std::dec, " beyond the 6 sublayers");
      if (op->layer() < 0 && sublayers != 0)
        return fail(opText(i), " lies outside the decoder layers but names cost sublayers ",
                    costSublayersText(sublayers));
      if (!targetHasGpu())
        for (const auto &[stage, device] : {std::make_pair("decode", op->device()),
                                            std::make_pair("prefill", op->prefill_device())})
          if (device == DeviceDef::GPU)
            return fail(opText(i), " runs on the GPU in ", stage, " but ", targetText());
    }

    // A sublayer is on the GPU exactly when one of its ops runs there in decode.
    for (uint32_t s = 0; s < count(def_.sublayers()); ++s) {
      const SublayerDef *sub = def_.sublayers()->Get(s);
      int32_t gpuOp = -1;
      for (uint32_t i = sub->first_op(); i < sub->first_op() + sub->op_count() && gpuOp < 0; ++i)
        if (ops.Get(i)->device() == DeviceDef::GPU)
          gpuOp = static_cast<int32_t>(i);
      if (sub->device() == DeviceDef::CPU && gpuOp >= 0)
        return fail("sublayer ", s, " is on the CPU but its ", opText(static_cast<uint32_t>(gpuOp)),
                    " runs on the GPU in decode");
      if (sub->device() == DeviceDef::GPU && gpuOp < 0)
        return fail("sublayer ", s, " is on the GPU but none of its ops runs there in decode");
    }

    bool seen[2] = {false, false};
    for (uint32_t k = 0; k < count(def_.stages()); ++k)
      if (Status s = checkStage(*def_.stages()->Get(k), seen); !s)
        return s;
    return Status();
  }

  Status checkStage(const StagePlanDef &stage, bool (&seen)[2]) const {
    if (!inRange(stage.stage()))
      return fail("a stage plan has unknown stage ", static_cast<int>(stage.stage()));
    const std::string name = concat("stage ", EnumNameStageDef(stage.stage()));
    bool &already = seen[static_cast<int>(stage.stage())];
    if (already)
      return fail("the plan has two ", name, " plans");
    already = true;
    const BoundsDef &bounds = *def_.bounds();
    if (stage.batch() == 0 || stage.len() == 0)
      return fail(name, " point B=", stage.batch(), ", L=", stage.len(), " is empty");
    if (stage.batch() > bounds.max_batch() || stage.len() > bounds.max_seq())
      return fail(name, " point B=", stage.batch(), ", L=", stage.len(),
                  " lies beyond bounds max_batch ", bounds.max_batch(), ", max_seq ",
                  bounds.max_seq());
    if (!std::isfinite(stage.predicted_seconds()) || stage.predicted_seconds() < 0)
      return fail(name, " predicted_seconds ", stage.predicted_seconds(),
                  " is not a finite non-negative number");

    // Groups: the layers in order, each once.
    const uint32_t groupCount = count(stage.groups());
    if (groupCount == 0)
      return fail(name, " has no layer groups");
    uint64_t nextLayer = 0;
    for (uint32_t g = 0; g < groupCount; ++g) {
      const LayerGroupDef *group = stage.groups()->Get(g);
      const std::string what = concat(name, " group ", g, " (", quoted(group->name()), ")");
      if (group->first_layer() != nextLayer || group->layer_count() == 0)
        return fail(what, " holds layers [", group->first_layer(), ", ",
                    uint64_t{group->first_layer()} + group->layer_count(),
                    ") but the groups before it end at layer ", nextLayer,
                    "; groups hold every layer once, in order");
      nextLayer += group->layer_count();
      if (!std::isfinite(group->layer_seconds()) || group->layer_seconds() < 0)
        return fail(what, " layer_seconds ", group->layer_seconds(),
                    " is not a finite non-negative number");
      if (Status s = checkPolicy(static_cast<uint8_t>(group->policy()), what); !s)
        return s;
    }
    if (nextLayer != def_.model()->layers())
      return fail(name, " groups hold layers [0, ", nextLayer, ") but the model has ",
                  def_.model()->layers());

    // The policy table: rows by increasing length, each covering batches 1..max_batch.
    const uint32_t rowCount = count(stage.policy_table());
    if (rowCount == 0)
      return fail(name, " has an empty policy table");
    uint64_t previousLen = 0;
    for (uint32_t r = 0; r < rowCount; ++r) {
      const PolicyRowDef *row = stage.policy_table()->Get(r);
      const std::string rowName = concat(name, " policy table row ", r, " (len ", row->len(), ")");
      if (row->len() <= previousLen)
        return fail(rowName, " does not follow len ", previousLen,
                    "; lengths start at 1 and increase");
      previousLen = row->len();
      uint64_t nextBatch = 1;
      for (uint32_t k = 0; k < count(row->ranges()); ++k) {
        const PolicyRangeDef *range = row->ranges()->Get(k);
        if (range->first_batch() != nextBatch || range->last_batch() < range->first_batch())
          return fail(rowName, " range ", k, " covers batches ", range->first_batch(), "-",
                      range->last_batch(), " where batch ", nextBatch, " comes next");
        nextBatch = range->last_batch() + 1;
        const uint32_t policies = range->policies() ? range->policies()->size() : 0;
        if (policies != groupCount)
          return fail(rowName, " range ", k, " has ", policies, " policies for ", groupCount,
                      " layer groups");
        for (uint32_t g = 0; g < policies; ++g)
          if (Status s = checkPolicy(static_cast<uint8_t>(range->policies()->Get(g)),
                                     concat(rowName, " range ", k));
              !s)
            return s;
      }
      if (nextBatch != uint64_t{bounds.max_batch()} + 1)
        return fail(rowName, " covers batches up to ", nextBatch - 1, " but bounds max_batch is ",
                    bounds.max_batch());
    }

    // Every op of a layer runs where its group's policy puts the first sublayer it computes.
    const bool decode = stage.stage() == StageDef::Decode;
    for (uint32_t i = 0; i < def_.ops()->size(); ++i) {
      const OpDef *op = def_.ops()->Get(i);
      if (op->layer() < 0)
        continue;
      const uint8_t sublayers = static_cast<uint8_t>(op->cost_sublayers());
      if (sublayers == 0)
        return fail(opText(i), " in layer ", op->layer(),
                    " names no cost sublayer, so the stage plans cannot place it");
      uint32_t g = 0;
      while (g + 1 < groupCount &&
             uint64_t(op->layer()) >= stage.groups()->Get(g + 1)->first_layer())
        ++g;
      const LayerGroupDef *group = stage.groups()->Get(g);
      const uint8_t policy = static_cast<uint8_t>(group->policy());
      const unsigned first = firstCostSublayer(sublayers);
      const DeviceDef expected = (policy >> first & 1) ? DeviceDef::CPU : DeviceDef::GPU;
      const DeviceDef device = decode ? op->device() : op->prefill_device();
      if (device != expected)
        return fail(opText(i), " runs on the ", EnumNameDeviceDef(device), " in ",
                    EnumNameStageDef(stage.stage()), " but its layer group ", g, " (",
                    quoted(group->name()), ") runs ", costSublayerName(first), " on the ",
                    EnumNameDeviceDef(expected), " (policy ", policyText(policy), ")");
    }
    return Status();
  }

  Status checkChecksums() {
    const auto &segments = *def_.segments();
    for (uint32_t i = 0; i < segments.size(); ++i) {
      const SegmentDef *s = segments.Get(i);
      if (XXH64(bytes_ + s->offset(), s->size(), 0) != s->xxh64())
        return fail("segment ", i, " checksum mismatch: the weights are corrupted");
    }
    return Status();
  }

  const uint8_t *bytes_;
  uint64_t size_;
  uint64_t flatbufferEnd_;
  const PlanDef &def_;
  std::string subject_;
};

// Identify, verify structure and version, then meaning; sets *def on success. Whether this host
// has the CPU features the plan requires is the executor's question (Engine::create), so a plan
// for another machine can still be inspected here.
Status verifyPlan(const uint8_t *bytes, uint64_t size, const std::string &subject,
                  const PlanDef **def) {
  if (size == 0)
    return Status::error(subject + " is empty");
  if (size < kPlanHeaderBytes)
    return Status::error(concat(subject, " is truncated or not a plan: ", size,
                                " bytes, the plan header alone needs ", kPlanHeaderBytes));
  if (std::memcmp(bytes + kIdentifierOffset, PlanDefIdentifier(), 4) != 0)
    return Status::error(concat(subject, " is not a hetc plan (identifier '",
                                identifierText(bytes + kIdentifierOffset), "', expected '",
                                PlanDefIdentifier(), "')"));
  const uint64_t flatbufferSize = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(bytes);
  const uint64_t flatbufferEnd = sizeof(flatbuffers::uoffset_t) + flatbufferSize;
  if (flatbufferEnd >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return Status::error(concat(subject, " is corrupted: its FlatBuffer claims ", flatbufferEnd,
                                " bytes, over the 2 GiB FlatBuffers limit"));
  if (flatbufferEnd > size)
    return Status::error(concat(subject, " is truncated: ", size,
                                " bytes, the FlatBuffer alone needs ", flatbufferEnd));
  // The verifier checks alignment relative to memory; a mapping is page aligned, but bytes
  // handed to fromBytes might not be.
  if (reinterpret_cast<uintptr_t>(bytes) % alignof(uint64_t) != 0)
    return Status::error(subject + " bytes are not 8-byte aligned in memory");

  flatbuffers::Verifier verifier(bytes, flatbufferEnd);
  if (!VerifySizePrefixedPlanDefBuffer(verifier))
    return Status::error(subject + " is corrupted: its FlatBuffer fails structural verification "
                                   "(an offset, length or alignment is out of bounds)");
  const PlanDef *plan = GetSizePrefixedPlanDef(bytes);

  const uint32_t version = plan->schema_version();
  if (version >> 16 > kPlanSchemaMajor)
    return Status::error(concat(subject, ": plan schema ", versionText(version),
                                " is newer than this runtime's ", versionText(kPlanSchemaVersion),
                                "; update the runtime"));
  if (version >> 16 < kPlanSchemaMajor)
    return Status::error(concat(subject, ": plan schema ", versionText(version),
                                " is older than this runtime's ", versionText(kPlanSchemaVersion),
                                "; recompile the plan"));

  Status status = PlanChecker(bytes, size, flatbufferEnd, *plan, subject).check();
  if (!status)
    return status;
  *def = plan;
  return Status();
}

std::string errnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

} // namespace

Result<std::unique_ptr<Plan>> Plan::load(const std::string &path) {
  const std::string subject = "plan '" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error("cannot open " + subject + ": " + errnoText(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::error("cannot stat " + subject + ": " + errnoText(err));
  }
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    return Status::error(subject + " is a directory, not a plan file");
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return Status::error(subject + " is not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(info.st_size);
  if (size == 0) {
    ::close(fd);
    return Status::error(subject + " is empty");
  }
  // Read-only and private: the weights are read in place and nothing can write them back.
  void *mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int mapError = errno;
  ::close(fd);
  if (mapping == MAP_FAILED)
    return Status::error("cannot map " + subject + ": " + errnoText(mapError));

  std::unique_ptr<Plan> plan(new Plan());
  plan->mapping_ = mapping;
  plan->bytes_ = static_cast<const uint8_t *>(mapping);
  plan->size_ = size;
  Status status = verifyPlan(plan->bytes_, size, subject, &plan->def_);
  if (!status)
    return status;
  return plan;
}

Result<std::unique_ptr<Plan>> Plan::fromBytes(const uint8_t *bytes, size_t size) {
  if (!bytes && size > 0)
    return Status::error("plan bytes are null");
  // The format aligns its 8-byte fields relative to the buffer's start (a mapped file's is a page).
  if (reinterpret_cast<uintptr_t>(bytes) % alignof(uint64_t) != 0)
    return Status::error("plan bytes must be 8-byte aligned");
  std::unique_ptr<Plan> plan(new Plan());
  plan->bytes_ = bytes;
  plan->size_ = size;
  Status status = verifyPlan(bytes, size, "plan", &plan->def_);
  if (!status)
    return status;
  return plan;
}

Plan::~Plan() {
  if (mapping_)
    ::munmap(mapping_, size_);
}

const void *Plan::tensorData(uint32_t index) const {
  const auto *tensors = def_->tensors();
  if (index >= tensors->size())
    return nullptr;
  return bytes_ + def_->segments()->Get(tensors->Get(index)->segment())->offset();
}

} // namespace hetc
