#include "runtime/executor/DeviceSteps.h"

#include "runtime/executor/OpResolver.h"
#include "runtime/kv/KvCache.h"

#include "runtime/device/kernels/DeviceKernels.h"
#include "runtime/format/Format.h"
#include "runtime/format/WeightLayout.h"

#include "codegen/cpu/attention/Attention.h"
#include "codegen/cpu/linear/LinearInt4.h"

#include <algorithm>
#include <cstring>

namespace hetc {

using device::Access;
using device::DevicePtr;
using plan::WeightLayoutDef;
namespace cuda = codegen::cuda;

namespace {

std::string str(uint64_t value) { return std::to_string(value); }
uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}
template <typename T> T *at(DevicePtr pointer) { return reinterpret_cast<T *>(pointer.address); }

} // namespace

// Where everything lives in the device allocation: the plan's weights (each tensor an op reads),
// its activation arena and KV arena at the plan's own offsets, the step block and the scratch the
// lm_head, the quantized rows and the attention use.
struct DeviceSteps::Layout {
  DevicePtr base;
  std::vector<uint64_t> tensorOffset; // per plan tensor; UINT64_MAX for one no op reads
  std::vector<uint64_t> slopesOffset; // per plan op: its ALiBi slopes; UINT64_MAX for none
  uint64_t activations = 0, kv = 0;
  // The step block: rows, logits count, argmax flag, then the arrays.
  uint64_t step = 0, stepBytes = 0;
  uint64_t tokens = 0, positions = 0, slots = 0, sourceRows = 0, outputRows = 0;
  // Scratch.
  uint64_t quantized = 0, quantizedScales = 0, quantizedSums = 0;
  uint64_t quantizedStride = 0, sumsStride = 0;
  uint64_t lmRows = 0, lmRowsStride = 0, lmLogits = 0, lmLogitsStride = 0;
  uint64_t attentionWork = 0, attentionWorkFloats = 0, argmax = 0;
  uint64_t bytes = 0;

  DevicePtr operator()(uint64_t offset) const { return base + offset; }
  const uint32_t *rowCount() const { return at<const uint32_t>(base + step); }
  const uint32_t *logitsCount() const { return at<const uint32_t>(base + step + 4); }
  const uint32_t *argmaxStep() const { return at<const uint32_t>(base + step + 8); }
};

struct DeviceSteps::Launch {
  OpKind kind = OpKind::Embedding;
  uint32_t planOp = 0;
  const device::Kernel *kernel = nullptr;
  std::vector<uint8_t> args;
  std::vector<Access> accesses;
};

namespace {

// Builds one plan op's launches.
class OpLaunches {
public:
  OpLaunches(const Plan &plan, const DeviceSteps::Layout &layout, bool decodeBucket,
             uint32_t index, std::vector<DeviceSteps::Launch> &out)
      : plan_(plan), def_(plan.def()), layout_(layout), decode_(decodeBucket), index_(index),
        op_(*def_.ops()->Get(index)), out_(out) {}

  Status build();

private:
  Status fail(const std::string &message) const {
    return Status::error("op " + str(index_) + " '" + (op_.name() ? op_.name()->str() : "") +
                         "' (" + plan::EnumNameOpKindDef(op_.kind()) +
                         "): on the device: " + message);
  }
  const plan::BufferDef &buffer(size_t position, bool input) const {
    const auto *list = input ? op_.inputs() : op_.outputs();
    return *def_.buffers()->Get(list->Get(position));
  }
  // A buffer's rows in device memory and their access (every row the plan gives it).
  float *rows(const plan::BufferDef &b) const {
    return at<float>(layout_(layout_.activations + b.offset()));
  }
  uint64_t stride(const plan::BufferDef &b) const { return b.row_stride() / sizeof(float); }
  Access access(const plan::BufferDef &b, bool write) const {
    return {layout_(layout_.activations + b.offset()),
            (b.rows() - 1) * b.row_stride() + b.cols() * sizeof(float), write};
  }
  const plan::TensorDef &tensor(size_t position) const {
    return *def_.tensors()->Get(op_.weights()->Get(position));
  }
  DevicePtr weight(size_t position) const {
    return layout_(layout_.tensorOffset[op_.weights()->Get(position)]);
  }
  uint64_t weightBytes(size_t position) const {
    return def_.segments()->Get(tensor(position).segment())->size();
  }
  Access weightAccess(size_t position) const {
    return {weight(position), weightBytes(position), false};
  }
  Access stepAccess() const { return {layout_(layout_.step), layout_.stepBytes, false}; }
  uint64_t maxRows() const { return def_.bounds()->max_step_tokens(); }
  Access kvAccess(bool write) const {
    return {layout_(layout_.kv), def_.kv_cache()->arena_size(), write};
  }

  template <typename Args>
  void push(OpKind kind, const device::Kernel &kernel, const Args &args,
            std::vector<Access> accesses) {
    DeviceSteps::Launch launch;
    launch.kind = kind;
    launch.planOp = index_;
    launch.kernel = &kernel;
    launch.args.resize(sizeof(Args));
    std::memcpy(launch.args.data(), &args, sizeof(Args));
    launch.accesses = std::move(accesses);
    out_.push_back(std::move(launch));
  }

  Status embedding();
  Status norm(bool rms);
  Status rope();
  Status attention();
  Status elementwise(cuda::ElementwiseKind kind, uint8_t function);
  Status linear();
  Status lmHead();
  // y = x W^T of `rows` rows (a count in device memory) of x into y, the weight at `position`,
  // quantizing x first for an integer layout; the epilogue's pointers set in `base`.
  Status linearLaunches(OpKind kind, const float *x, uint64_t xStride, Access xAccess,
                        const uint32_t *rowCount, uint64_t maxRows, cuda::LinearArgs base,
                        std::vector<Access> epilogue, Access yAccess);

  const Plan &plan_;
  const plan::PlanDef &def_;
  const DeviceSteps::Layout &layout_;
  bool decode_;
  uint32_t index_;
  const plan::OpDef &op_;
  std::vector<DeviceSteps::Launch> &out_;
};

Status OpLaunches::build() {
  using K = plan::OpKindDef;
  switch (op_.kind()) {
  case K::Embedding:
    return embedding();
  case K::RmsNorm:
    return norm(true);
  case K::LayerNorm:
    return norm(false);
  case K::Rope:
    return rope();
  case K::Attention:
    return attention();
  case K::SwiGlu: {
    const auto *params = op_.params_as_SwiGluParamsDef();
    return elementwise(cuda::ElementwiseKind::Gated,
                       static_cast<uint8_t>(params ? params->function()
                                                   : plan::ActivationFunctionDef::Silu));
  }
  case K::Add:
    return elementwise(cuda::ElementwiseKind::Add, 0);
  case K::Activation:
    return elementwise(cuda::ElementwiseKind::Activation,
                       static_cast<uint8_t>(op_.params_as_ActivationParamsDef()->function()));
  case K::Linear:
    return linear();
  case K::LmHead:
    return lmHead();
  }
  return fail("no device kernel for this kind");
}

Status OpLaunches::embedding() {
  const plan::BufferDef &out = buffer(0, false);
  const plan::TensorDef &table = tensor(0);
  cuda::EmbeddingArgs a;
  a.tokens = at<const int32_t>(layout_(layout_.tokens));
  a.positions = at<const uint32_t>(layout_(layout_.positions));
  a.rows = layout_.rowCount();
  a.maxRows = maxRows();
  a.table = at<const void>(weight(0));
  a.tableBytes = weightBytes(0);
  a.packedLayout = table.layout() == WeightLayoutDef::RowMajor ? 0 : uint8_t(table.layout());
  a.group = table.group_size();
  a.vocab = def_.model()->vocab();
  a.hidden = out.cols();
  const auto *params = op_.params_as_EmbeddingParamsDef();
  a.scale = params->scale();
  std::vector<Access> accesses = {stepAccess(), weightAccess(0), access(out, true)};
  if (op_.weights()->size() > 1) {
    a.positionTable = at<const float>(weight(1));
    a.positionRows = tensor(1).shape()->Get(0);
    a.positionOffset = params->position_offset();
    accesses.push_back(weightAccess(1));
  }
  a.out = rows(out);
  a.outStride = stride(out);
  push(OpKind::Embedding, device::kEmbedding, a, std::move(accesses));
  return Status();
}

Status OpLaunches::norm(bool rms) {
  const plan::BufferDef &in = buffer(0, true), &out = buffer(0, false);
  cuda::NormArgs a;
  a.x = rows(in);
  a.xStride = stride(in);
  a.y = rows(out);
  a.yStride = stride(out);
  a.cols = out.cols();
  a.gamma = at<const float>(weight(0));
  a.group = tensor(0).shape()->Get(0);
  a.rms = rms;
  a.rows = layout_.rowCount();
  a.maxRows = maxRows();
  std::vector<Access> accesses = {stepAccess(), access(in, false), access(out, true),
                                  weightAccess(0)};
  if (rms) {
    const auto *params = op_.params_as_RmsNormParamsDef();
    a.eps = params ? params->eps() : def_.model()->rms_eps();
  } else {
    const auto *params = op_.params_as_LayerNormParamsDef();
    a.eps = params->eps();
    if (params->bias()) {
      a.beta = at<const float>(weight(1));
      accesses.push_back(weightAccess(1));
    }
  }
  push(rms ? OpKind::RmsNorm : OpKind::LayerNorm, device::kNorm, a, std::move(accesses));
  return Status();
}

Status OpLaunches::rope() {
  const plan::BufferDef &x = buffer(0, true);
  const auto *params = op_.params_as_RopeParamsDef();
  cuda::RopeArgs a;
  a.x = rows(x);
  a.xStride = stride(x);
  a.heads = params->heads();
  a.headDim = params->head_dim();
  a.rotaryDim = ropeForm(params->head_dim(), params->rotary_dim(), false).rotaryDim;
  a.interleaved = params->interleaved();
  a.invFreq = at<const float>(weight(0));
  a.positions = at<const uint32_t>(layout_(layout_.positions));
  a.rows = layout_.rowCount();
  a.maxRows = maxRows();
  push(OpKind::Rope, device::kRope, a, {stepAccess(), access(x, true), weightAccess(0)});
  return Status();
}

cuda::KvCacheArgs kvCacheArgs(const plan::KvCacheDef &kv, DevicePtr arena) {
  cuda::KvCacheArgs c;
  c.arena = at<uint8_t>(arena);
  c.bytes = kv.arena_size();
  c.keys = at<void>(arena + kv.k_offset());
  c.values = at<void>(arena + kv.v_offset());
  c.element = static_cast<uint8_t>(kvElementOf(kv.dtype()));
  c.layerStride = kv.layer_stride();
  c.slotStride = kv.slot_stride();
  c.headStride = kv.head_stride();
  c.posStride = kv.pos_stride();
  if (kvHasRowScales(kv.dtype())) {
    c.keyScales = at<float>(arena + kv.k_scale_offset());
    c.valueScales = at<float>(arena + kv.v_scale_offset());
    c.scaleLayerStride = kv.scale_layer_stride();
    c.scaleSlotStride = kv.scale_slot_stride();
    c.scaleHeadStride = kv.scale_head_stride();
  }
  return c;
}

Status OpLaunches::attention() {
  const auto *params = op_.params_as_AttentionParamsDef();
  const plan::BufferDef &q = buffer(0, true), &k = buffer(1, true), &v = buffer(2, true);
  const plan::BufferDef &out = buffer(0, false);
  cuda::AttentionShapeArgs shape;
  shape.layer = params->layer();
  shape.heads = params->heads();
  shape.kvHeads = params->kv_heads();
  shape.headDim = params->head_dim();
  shape.scale = params->scale();
  shape.softcap = params->softcap();
  shape.window = params->sliding_window();
  const cuda::KvCacheArgs cache = kvCacheArgs(*def_.kv_cache(), layout_(layout_.kv));

  cuda::KvAppendArgs append;
  append.q = rows(q);
  append.qStride = stride(q);
  append.k = rows(k);
  append.kStride = stride(k);
  append.v = rows(v);
  append.vStride = stride(v);
  append.shape = shape;
  append.cache = cache;
  append.positions = at<const uint32_t>(layout_(layout_.positions));
  append.slots = at<const uint32_t>(layout_(layout_.slots));
  append.rows = layout_.rowCount();
  std::vector<Access> appendAccesses = {stepAccess(), access(k, params->rope()),
                                        access(v, false), kvAccess(true)};
  if (params->rope()) {
    append.invFreq = at<const float>(weight(0));
    append.rotaryDim = ropeForm(params->head_dim(), params->rope_rotary_dim(), false).rotaryDim;
    append.interleaved = params->rope_interleaved();
    appendAccesses.push_back(access(q, true));
    appendAccesses.push_back(weightAccess(0));
  }
  push(OpKind::KvAppend, device::kKvAppend, append, std::move(appendAccesses));

  cuda::AttentionArgs a;
  a.q = rows(q);
  a.qStride = stride(q);
  a.out = rows(out);
  a.outStride = stride(out);
  a.shape = shape;
  a.cache = cache;
  a.chunkPositions = kernels::kAttentionChunkPositions;
  a.work = at<float>(layout_(layout_.attentionWork));
  a.workFloats = layout_.attentionWorkFloats;
  a.positions = append.positions;
  a.slots = append.slots;
  a.rows = layout_.rowCount();
  std::vector<Access> accesses = {
      stepAccess(), access(q, false), access(out, true), kvAccess(false),
      {layout_(layout_.attentionWork), layout_.attentionWorkFloats * sizeof(float), true}};
  if (params->alibi_slopes()) {
    const DevicePtr slopes = layout_(layout_.slopesOffset[index_]);
    a.slopes = at<const float>(slopes);
    accesses.push_back({slopes, params->heads() * sizeof(float), false});
  }
  push(OpKind::Attention, device::kAttention, a, std::move(accesses));
  return Status();
}

Status OpLaunches::elementwise(cuda::ElementwiseKind kind, uint8_t function) {
  const plan::BufferDef &out = buffer(0, false), &first = buffer(0, true);
  cuda::ElementwiseArgs a;
  a.kind = kind;
  a.function = function;
  a.a = rows(first);
  a.aStride = stride(first);
  a.y = rows(out);
  a.yStride = stride(out);
  a.cols = out.cols();
  a.rows = layout_.rowCount();
  a.maxRows = maxRows();
  std::vector<Access> accesses = {stepAccess(), access(first, false), access(out, true)};
  if (kind != cuda::ElementwiseKind::Activation) {
    const plan::BufferDef &second = buffer(1, true);
    a.b = rows(second);
    a.bStride = stride(second);
    accesses.push_back(access(second, false));
  }
  const OpKind opKind = kind == cuda::ElementwiseKind::Add     ? OpKind::Add
                        : kind == cuda::ElementwiseKind::Gated ? OpKind::SwiGlu
                                                               : OpKind::Activation;
  push(opKind, device::kElementwise, a, std::move(accesses));
  return Status();
}

Status OpLaunches::linearLaunches(OpKind kind, const float *x, uint64_t xStride, Access xAccess,
                                  const uint32_t *rowCount, uint64_t maxRows,
                                  cuda::LinearArgs base, std::vector<Access> epilogue,
                                  Access yAccess) {
  const plan::TensorDef &w = tensor(0);
  const WeightLayoutDef layout = w.layout() == WeightLayoutDef::RowMajor
                                     ? WeightLayoutDef::LinearNK // a tied table read as [N, K]
                                     : w.layout();
  if (layout != WeightLayoutDef::LinearNK && layout != WeightLayoutDef::LinearBf16N16K2 &&
      layout != WeightLayoutDef::LinearInt8N16K4 && layout != WeightLayoutDef::LinearInt4N16K8)
    return fail(std::string("no device kernel for weight layout ") +
                plan::EnumNameWeightLayoutDef(layout));
  cuda::LinearArgs &a = base;
  a.layout = static_cast<cuda::LinearLayout>(layout);
  a.w = at<const void>(weight(0));
  a.wBytes = weightBytes(0);
  a.n = w.shape()->Get(0);
  a.k = w.shape()->Get(1);
  a.group = w.group_size();
  a.rows = rowCount;
  const bool integer =
      layout == WeightLayoutDef::LinearInt8N16K4 || layout == WeightLayoutDef::LinearInt4N16K8;
  std::vector<Access> accesses = {stepAccess(), weightAccess(0), yAccess};
  for (const Access &e : epilogue)
    accesses.push_back(e);
  if (integer) {
    // The rows quantized into the shared scratch, then the product over them.
    cuda::QuantizedRowsArgs q;
    q.xq = at<uint8_t>(layout_(layout_.quantized));
    q.xqStride = alignUp(a.k, 64);
    q.rowScale = at<float>(layout_(layout_.quantizedScales));
    q.sums = at<int32_t>(layout_(layout_.quantizedSums));
    q.sumsStride = layout_.sumsStride;
    cuda::QuantizeRowsArgs quantize;
    quantize.x = x;
    quantize.xStride = xStride;
    quantize.k = a.k;
    quantize.signedRows = layout == WeightLayoutDef::LinearInt4N16K8;
    quantize.out = q;
    quantize.rows = rowCount;
    const std::vector<Access> scratch = {
        {layout_(layout_.quantized), maxRows * q.xqStride, true},
        {layout_(layout_.quantizedScales), maxRows * sizeof(float), true},
        {layout_(layout_.quantizedSums), maxRows * q.sumsStride * sizeof(int32_t), true}};
    std::vector<Access> quantizeAccesses = {stepAccess(), xAccess};
    quantizeAccesses.insert(quantizeAccesses.end(), scratch.begin(), scratch.end());
    push(OpKind::QuantizeRowsInt8, device::kQuantizeRows, quantize, std::move(quantizeAccesses));
    a.xq = q;
    for (Access s : scratch) {
      s.write = false;
      accesses.push_back(s);
    }
    // A decode step over int8 without a bias: the GEMV (the same bits).
    if (decode_ && layout == WeightLayoutDef::LinearInt8N16K4 && !a.bias) {
      const LinearInt8N16K4 packed{a.n, a.k};
      const auto *segment = static_cast<const uint8_t *>(a.w);
      cuda::GemvInt8Args g;
      g.w = reinterpret_cast<const uint32_t *>(segment);
      g.scale = reinterpret_cast<const float *>(segment + packed.scaleOffset());
      g.columnSum = reinterpret_cast<const int32_t *>(segment + packed.columnSumOffset());
      g.xq = q.xq;
      g.rowScale = q.rowScale;
      g.residual = a.residual;
      g.y = a.y;
      g.rows = rowCount;
      g.xStride = q.xqStride;
      g.residualStride = a.residualStride;
      g.yStride = a.yStride;
      g.n = a.n;
      g.k = a.k;
      push(kind, device::kGemvInt8, g, std::move(accesses));
      return Status();
    }
  } else {
    a.x = x;
    a.xStride = xStride;
    accesses.push_back(xAccess);
    // A decode step over bf16 with no epilogue: the GEMV (the same bits).
    if (decode_ && layout == WeightLayoutDef::LinearBf16N16K2 && !a.bias && !a.residual) {
      cuda::GemvBf16Args g;
      g.w = static_cast<const uint32_t *>(a.w);
      g.x = x;
      g.y = a.y;
      g.rows = rowCount;
      g.xStride = xStride;
      g.yStride = a.yStride;
      g.n = a.n;
      g.k = a.k;
      push(kind, device::kGemvBf16, g, std::move(accesses));
      return Status();
    }
  }
  push(kind, device::kLinear, a, std::move(accesses));
  return Status();
}

Status OpLaunches::linear() {
  const plan::BufferDef &in = buffer(0, true), &out = buffer(0, false);
  const auto *params = op_.params_as_LinearParamsDef();
  const plan::SwiGluRoleDef role = params ? params->swiglu() : plan::SwiGluRoleDef::None;
  cuda::LinearArgs a;
  a.y = rows(out);
  a.yStride = stride(out);
  std::vector<Access> epilogue;
  if (params && params->bias()) {
    a.bias = at<const float>(weight(1));
    epilogue.push_back(weightAccess(1));
  }
  if (params && params->residual()) {
    const plan::BufferDef &residual = buffer(1, true);
    a.residual = rows(residual);
    a.residualStride = stride(residual);
    epilogue.push_back(access(residual, false));
  }
  if (Status s = linearLaunches(OpKind::Linear, rows(in), stride(in), access(in, false),
                                layout_.rowCount(), maxRows(), a, std::move(epilogue),
                                access(out, true));
      !s)
    return s;
  if (role == plan::SwiGluRoleDef::None)
    return Status();
  // The fused swiglu as its own launch on the written rows: y = f(gate) * up.
  const plan::BufferDef &other = buffer(1, true);
  cuda::ElementwiseArgs g;
  g.kind = cuda::ElementwiseKind::Gated;
  g.function = static_cast<uint8_t>(params->swiglu_function());
  const bool gate = role == plan::SwiGluRoleDef::Gate;
  g.a = gate ? rows(out) : rows(other);
  g.aStride = gate ? stride(out) : stride(other);
  g.b = gate ? rows(other) : rows(out);
  g.bStride = gate ? stride(other) : stride(out);
  g.y = rows(out);
  g.yStride = stride(out);
  g.cols = out.cols();
  g.rows = layout_.rowCount();
  g.maxRows = maxRows();
  push(OpKind::SwiGlu, device::kElementwise, g,
       {stepAccess(), access(other, false), access(out, true)});
  return Status();
}

Status OpLaunches::lmHead() {
  const plan::BufferDef &in = buffer(0, true), &out = buffer(0, false);
  const auto *params = op_.params_as_LmHeadParamsDef();
  const uint64_t vocab = def_.model()->vocab();
  const uint64_t maxBatch = def_.bounds()->max_batch();
  // The asking sequences' last rows gathered, the product over them, then bias, cap and the
  // logits rows or argmax.
  cuda::GatherRowsArgs gather;
  gather.x = rows(in);
  gather.xStride = stride(in);
  gather.sourceRows = at<const uint32_t>(layout_(layout_.sourceRows));
  gather.count = layout_.logitsCount();
  gather.maxCount = maxBatch;
  gather.y = at<float>(layout_(layout_.lmRows));
  gather.yStride = layout_.lmRowsStride;
  gather.cols = in.cols();
  const Access lmRows{layout_(layout_.lmRows), maxBatch * layout_.lmRowsStride * sizeof(float),
                      true};
  const Access lmLogits{layout_(layout_.lmLogits),
                        maxBatch * layout_.lmLogitsStride * sizeof(float), true};
  push(OpKind::LmHead, device::kGatherRows, gather, {stepAccess(), access(in, false), lmRows});

  cuda::LinearArgs product;
  product.y = at<float>(layout_(layout_.lmLogits));
  product.yStride = layout_.lmLogitsStride;
  if (Status s = linearLaunches(OpKind::LmHead, gather.y, gather.yStride,
                                {lmRows.ptr, lmRows.bytes, false}, layout_.logitsCount(), maxBatch,
                                product, {}, lmLogits);
      !s)
    return s;

  cuda::LogitsArgs finish;
  finish.logits = product.y;
  finish.logitsStride = product.yStride;
  finish.softcap = params ? params->softcap() : 0.0f;
  finish.vocab = vocab;
  finish.outputRows = at<const uint32_t>(layout_(layout_.outputRows));
  finish.count = layout_.logitsCount();
  finish.out = rows(out);
  finish.outStride = stride(out);
  finish.argmaxStep = layout_.argmaxStep();
  finish.argmax = at<int32_t>(layout_(layout_.argmax));
  finish.maxBatch = maxBatch;
  std::vector<Access> accesses = {stepAccess(), lmLogits, access(out, true),
                                  {layout_(layout_.argmax), maxBatch * sizeof(int32_t), true}};
  if (params && params->bias()) {
    finish.bias = at<const float>(weight(1));
    accesses.push_back(weightAccess(1));
  }
  push(OpKind::LmHead, device::kLogits, finish, std::move(accesses));
  return Status();
}

} // namespace

DeviceSteps::~DeviceSteps() = default;

Result<std::unique_ptr<DeviceSteps>> DeviceSteps::create(std::shared_ptr<device::Device> device,
                                                         const Plan &plan, Options options) {
  std::unique_ptr<DeviceSteps> steps(new DeviceSteps());
  steps->device_ = std::move(device);
  steps->options_ = options;
  steps->layout_ = std::make_unique<Layout>();
  Layout &l = *steps->layout_;
  const plan::PlanDef &def = plan.def();
  const uint64_t maxRows = def.bounds()->max_step_tokens();
  const uint64_t maxBatch = def.bounds()->max_batch();
  const uint64_t vocab = def.model()->vocab();

  // The layout: 256-byte aligned regions, the weights first.
  uint64_t offset = 0;
  auto region = [&offset](uint64_t bytes) {
    const uint64_t at = offset;
    offset = alignUp(offset + std::max<uint64_t>(bytes, 1), 256);
    return at;
  };
  l.tensorOffset.assign(def.tensors()->size(), UINT64_MAX);
  l.slopesOffset.assign(def.ops()->size(), UINT64_MAX);
  uint64_t maxK = 0, lmK = 0, maxStateFloats = 0;
  for (uint32_t i = 0; i < def.ops()->size(); ++i) {
    const plan::OpDef *op = def.ops()->Get(i);
    if (op->weights())
      for (uint32_t t : *op->weights())
        if (l.tensorOffset[t] == UINT64_MAX)
          l.tensorOffset[t] = region(def.segments()->Get(def.tensors()->Get(t)->segment())->size());
    if (op->kind() == plan::OpKindDef::Linear || op->kind() == plan::OpKindDef::LmHead) {
      const plan::TensorDef *w = def.tensors()->Get(op->weights()->Get(0));
      if (w->shape() && w->shape()->size() == 2)
        maxK = std::max<uint64_t>(maxK, w->shape()->Get(1));
      if (op->kind() == plan::OpKindDef::LmHead)
        lmK = def.buffers()->Get(op->inputs()->Get(0))->cols();
    }
    if (op->kind() == plan::OpKindDef::Attention) {
      const auto *p = op->params_as_AttentionParamsDef();
      maxStateFloats = std::max<uint64_t>(
          maxStateFloats, kernels::attentionStateFloats(p->heads() / p->kv_heads(), p->head_dim()));
      if (p->alibi_slopes())
        l.slopesOffset[i] = region(p->alibi_slopes()->size() * sizeof(float));
    }
  }
  l.activations = region(def.activation_arena_size());
  l.kv = region(def.kv_cache()->arena_size());
  l.step = region(0);
  l.tokens = 16;
  l.positions = l.tokens + 4 * maxRows;
  l.slots = l.positions + 4 * maxRows;
  l.sourceRows = l.slots + 4 * maxRows;
  l.outputRows = l.sourceRows + 4 * maxBatch;
  l.stepBytes = l.outputRows + 4 * maxBatch;
  offset = alignUp(l.step + l.stepBytes, 256);
  // Array offsets above are from the block's start; make them the allocation's.
  l.tokens += l.step;
  l.positions += l.step;
  l.slots += l.step;
  l.sourceRows += l.step;
  l.outputRows += l.step;
  const uint64_t quantRows = std::max(maxRows, maxBatch);
  l.quantizedStride = alignUp(maxK, 64);
  l.sumsStride = alignUp((maxK + codegen::kInt4GranuleK - 1) / codegen::kInt4GranuleK, 16);
  l.quantized = region(quantRows * l.quantizedStride);
  l.quantizedScales = region(quantRows * sizeof(float));
  l.quantizedSums = region(quantRows * l.sumsStride * sizeof(int32_t));
  l.lmRowsStride = alignUp(lmK, 16);
  l.lmRows = region(maxBatch * l.lmRowsStride * sizeof(float));
  l.lmLogitsStride = alignUp(vocab, 16);
  l.lmLogits = region(maxBatch * l.lmLogitsStride * sizeof(float));
  l.attentionWorkFloats = 2 * maxStateFloats;
  l.attentionWork = region(l.attentionWorkFloats * sizeof(float));
  l.argmax = region(maxBatch * sizeof(int32_t));
  l.bytes = offset;
  steps->deviceBytes_ = l.bytes;

  device::Device &d = *steps->device_;
  Result<DevicePtr> base = d.allocate(l.bytes);
  if (!base)
    return Status::error("cannot allocate " + str(l.bytes) + " bytes on " + d.name() + ": " +
                         base.message());
  l.base = base.value();
  Result<device::StreamId> stream = d.createStream();
  if (!stream)
    return stream.status();
  steps->stream_ = stream.value();

  // The weights, once; and the arenas start as the CPU's do: zeroed activations (so padding
  // columns read as 0); the KV cache is written before it is read.
  for (uint32_t t = 0; t < l.tensorOffset.size(); ++t)
    if (l.tensorOffset[t] != UINT64_MAX)
      if (Status s = d.copyToDevice(steps->stream_, l(l.tensorOffset[t]), plan.tensorData(t),
                                    def.segments()->Get(def.tensors()->Get(t)->segment())->size());
          !s)
        return s;
  // ALiBi's slopes, from the plan's parameters.
  for (uint32_t i = 0; i < def.ops()->size(); ++i)
    if (l.slopesOffset[i] != UINT64_MAX) {
      const auto *slopes = def.ops()->Get(i)->params_as_AttentionParamsDef()->alibi_slopes();
      if (Status s = d.copyToDevice(steps->stream_, l(l.slopesOffset[i]), slopes->data(),
                                    slopes->size() * sizeof(float));
          !s)
        return s;
    }
  std::vector<uint8_t> zeros(def.activation_arena_size(), 0);
  if (!zeros.empty())
    if (Status s = d.copyToDevice(steps->stream_, l(l.activations), zeros.data(), zeros.size()); !s)
      return s;
  if (Status s = d.synchronize(steps->stream_); !s)
    return s;
  steps->stepBlock_.assign(l.stepBytes, 0);

  for (const plan::OpDef *op : *def.ops())
    if (op->kind() == plan::OpKindDef::LmHead) {
      const plan::BufferDef *logits = def.buffers()->Get(op->outputs()->Get(0));
      steps->logitsOffset_ = logits->offset();
      steps->logitsRowBytes_ = logits->row_stride();
    }
  steps->vocab_ = vocab;

  for (bool decodeBucket : {true, false}) {
    std::vector<Launch> &launches = decodeBucket ? steps->decode_ : steps->prefill_;
    if (Status s = steps->build(plan, decodeBucket, launches); !s)
      return s;
    if (!options.graphs)
      continue;
    // One graph per bucket: captured now, replayed every step.
    if (Status s = d.beginCapture(steps->stream_); !s)
      return s;
    if (Status s = steps->enqueue(launches); !s)
      return s;
    Result<device::GraphId> graph = d.endCapture(steps->stream_);
    if (!graph)
      return graph.status();
    (decodeBucket ? steps->decodeGraph_ : steps->prefillGraph_) = graph.value();
  }
  return Result<std::unique_ptr<DeviceSteps>>(std::move(steps));
}

Status DeviceSteps::build(const Plan &plan, bool decodeBucket, std::vector<Launch> &launches) {
  const plan::PlanDef &def = plan.def();
  for (uint32_t i = 0; i < def.ops()->size(); ++i)
    if (Status s = OpLaunches(plan, *layout_, decodeBucket, i, launches).build(); !s)
      return s;
  for (const Launch &launch : launches)
    if (!device_->has(*launch.kernel))
      return Status::error("op " + str(launch.planOp) + " (" + opKindName(launch.kind) + "): " +
                           device_->name() + " has no kernel '" + launch.kernel->name + "' yet");
  return Status();
}

Status DeviceSteps::enqueue(const std::vector<Launch> &launches) {
  for (const Launch &launch : launches)
    if (Status s = device_->launch(stream_, *launch.kernel, launch.args.data(), launch.args.size(),
                                   launch.accesses);
        !s)
      return Status::error("op " + str(launch.planOp) + " (" + opKindName(launch.kind) +
                           ", kernel " + launch.kernel->name + "): " + s.message());
  return Status();
}

Status DeviceSteps::run(const StepRows &step, size_t sequences, float *hostArena,
                        int32_t *argmax) {
  const Layout &l = *layout_;
  // The step block, as the kernels read it.
  uint8_t *block = stepBlock_.data();
  const uint32_t header[3] = {static_cast<uint32_t>(step.count),
                              static_cast<uint32_t>(step.logitsCount), step.argmax ? 1u : 0u};
  std::memcpy(block, header, sizeof header);
  std::memcpy(block + (l.tokens - l.step), step.tokens, step.count * sizeof(int32_t));
  std::memcpy(block + (l.positions - l.step), step.positions, step.count * sizeof(uint32_t));
  std::memcpy(block + (l.slots - l.step), step.slots, step.count * sizeof(uint32_t));
  std::memcpy(block + (l.sourceRows - l.step), step.logitsSourceRows,
              step.logitsCount * sizeof(uint32_t));
  std::memcpy(block + (l.outputRows - l.step), step.logitsOutputRows,
              step.logitsCount * sizeof(uint32_t));
  device::Device &d = *device_;
  if (Status s = d.copyToDevice(stream_, l(l.step), block, l.stepBytes); !s)
    return s;
  const bool decodeBucket = step.count <= kDeviceDecodeRows;
  if (options_.graphs) {
    if (Status s = d.replay(decodeBucket ? decodeGraph_ : prefillGraph_, stream_); !s)
      return s;
  } else if (Status s = enqueue(decodeBucket ? decode_ : prefill_); !s) {
    return s;
  }
  if (step.logitsCount > 0) {
    if (step.argmax) {
      if (Status s = d.copyToHost(stream_, argmax, l(l.argmax), sequences * sizeof(int32_t)); !s)
        return s;
    } else {
      // The logits buffer's first rows, one copy.
      const uint64_t bytes = (sequences - 1) * logitsRowBytes_ + vocab_ * sizeof(float);
      if (Status s = d.copyToHost(stream_, reinterpret_cast<uint8_t *>(hostArena) + logitsOffset_,
                                  l(l.activations + logitsOffset_), bytes);
          !s)
        return s;
    }
  }
  return d.synchronize(stream_);
}

Status DeviceSteps::copyToKv(uint64_t offset, const void *host, uint64_t bytes) {
  return device_->copyToDevice(stream_, (*layout_)(layout_->kv + offset), host, bytes);
}

Status DeviceSteps::finishCopies() { return device_->synchronize(stream_); }

std::vector<DeviceSteps::LaunchInfo> DeviceSteps::launches(bool decodeBucket) const {
  std::vector<LaunchInfo> infos;
  for (const Launch &launch : decodeBucket ? decode_ : prefill_)
    infos.push_back({launch.kind, launch.kernel->name});
  return infos;
}

std::string DeviceSteps::describe() const {
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.1f", deviceBytes_ / 1048576.0);
  return device_->name() + ": " + mib + " MiB of device memory in one allocation, " +
         str(decode_.size()) + " launches a decode step (up to " + str(kDeviceDecodeRows) +
         " rows) and " + str(prefill_.size()) + " a prefill step, " +
         (options_.graphs ? "each bucket one captured graph" : "enqueued one by one (no graphs)");
}

} // namespace hetc
