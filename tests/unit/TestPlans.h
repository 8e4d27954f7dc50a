// A small but complete plan for the runtime's tests: a tiny Llama (embedding, per layer
// rms_norm, q/k/v, rope, attention, o_proj, residual add, rms_norm, gate/up, swiglu, down_proj,
// residual add, then the final rms_norm and lm_head) or OPT-style decoder with seeded weights,
// every buffer laid out in one activation arena and a dimension-first KV cache. Header-only, for
// every *_test.cpp.
#pragma once

#include "runtime/format/Plan.h"
#include "runtime/format/PlanWriter.h"

#include "codegen/cpu/linear/ActivationRows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace hetc::test {

struct TinyPlanShape {
  uint32_t vocab = 64;
  uint32_t hidden = 32;
  uint32_t layers = 1;
  uint32_t heads = 4;
  uint32_t kv_heads = 2;
  uint32_t head_dim = 8;
  uint32_t intermediate = 48;
  uint32_t max_batch = 2;
  uint64_t max_seq = 32;
  uint32_t max_step_tokens = 8;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  // The lm_head reuses the embedding table's segment (a second tensor, LinearNK, same bytes).
  bool tied_embeddings = false;
  // Embedding, norm and linear weights; inv_freq is always F32.
  plan::DTypeDef weight_dtype = plan::DTypeDef::F32;
  plan::DTypeDef kv_dtype = plan::DTypeDef::F32;
  // Tasks: Linear and LmHead split by output columns, Attention none (the executor splits it by
  // positions), the row-wise ops (Embedding, RmsNorm, Rope, SwiGlu, Add) by token rows.
  uint32_t linear_task_grain = 16;
  uint32_t row_task_grain = 4;
  uint64_t seed = 1;
  // Linear and lm_head weights in BF16 packed as LinearBf16N16K2 (weight_dtype applies to the
  // rest); a tied embedding then reads the packed lm_head weight as its table.
  bool packed_bf16_linear = false;
  // The layers' linears in INT8 LinearInt8N16K4 (a scale per output column); the lm_head stays
  // as packed_bf16_linear says, as hetc compile --weights int8 leaves it in BF16.
  bool packed_int8_linear = false;
  // The same in INT4 LinearInt4N16K8 with groups of this many k (0: not), asymmetric.
  uint32_t packed_int4_group = 0;
  // With packed_int8_linear or packed_int4_group: the lm_head in that format too (hetc compile
  // --lm-head), and a tied embedding then reads it as its table.
  bool integer_lm_head = false;
  // o_proj and down_proj with the residual Add fused in (LinearParamsDef.residual), writing the
  // Add's output; needs packed_bf16_linear.
  bool fused_residual = false;
  // The SwiGlu fused into the linear before it (LinearParamsDef.swiglu): up_proj reads
  // [normed, gate] and writes the SwiGlu's output, or with swiglu_gate_last, up_proj runs first
  // and gate_proj reads [normed, up].
  bool fused_swiglu = false;
  bool swiglu_gate_last = false;
  // The q and k ropes carried out by the attention (AttentionParamsDef.rope), not as Rope ops.
  bool fused_rope = false;
  // q, k and v with a bias (LinearParamsDef.bias, weights[1] F32 [N]), as Qwen2.
  bool qkv_bias = false;
  // OPT-style (architecture "opt"): every norm a LayerNorm with a bias; the feed-forward fc1
  // (with a bias) -> Activation(activation) -> fc2 (with a bias) in place of gate/up, swiglu and
  // down; learned positions (position_offset 2, rows for max_seq + 2) added by the embedding.
  // F32 weights only; the attention keeps its RoPE, which the runtime runs all the same.
  bool opt = false;
  plan::ActivationFunctionDef activation = plan::ActivationFunctionDef::Relu;
  uint32_t position_offset = 2;
  // Gemma's forms (schema 1.16): the embedding times `embedding_scale`, the swiglu's gate
  // function, scores and logits soft-capped (0: not), and a sliding window on the even layers
  // only (Gemma 2's alternation; 0: none).
  float embedding_scale = 1.0f;
  plan::ActivationFunctionDef gate = plan::ActivationFunctionDef::Silu;
  float attention_softcap = 0.0f;
  float logit_softcap = 0.0f;
  uint32_t even_layer_window = 0;
  // The lm_head adds a bias (LmHeadParamsDef.bias, weights[1] F32 [vocab]), as Phi-2's.
  bool lm_head_bias = false;
  // ALiBi (schema 1.18): every attention's scores plus slope_h * key position, BLOOM's slopes
  // 2^(-8 (h + 1) / heads).
  bool alibi = false;
};

// Gemma 2's forms on the default shape: scaled embeddings, a GELU gate, both soft-caps (small
// enough to bend the tiny model's scores and logits) and a window of 5 on layers 0 and 2.
inline TinyPlanShape gemmaShape() {
  TinyPlanShape shape;
  shape.layers = 3;
  shape.max_seq = 40;
  shape.embedding_scale = 5.656854249f; // sqrt(32), rounded to float as Gemma rounds it
  shape.gate = plan::ActivationFunctionDef::GeluTanh;
  shape.attention_softcap = 2.0f;
  shape.logit_softcap = 1.5f;
  shape.even_layer_window = 5;
  return shape;
}

// The plan before writing, and the bytes of its weight segments.
struct TinyPlan {
  plan::PlanDefT def;
  std::vector<std::vector<uint8_t>> segments; // segment i's payload

  std::vector<WeightPayload> payloads() const {
    std::vector<WeightPayload> out;
    for (const auto &bytes : segments)
      out.push_back({bytes.data(), bytes.size()});
    return out;
  }

  // Index of the tensor, buffer or op with this name; -1 if there is none.
  int tensorIndex(const std::string &name) const { return indexOf(def.tensors, name); }
  int bufferIndex(const std::string &name) const { return indexOf(def.buffers, name); }
  int opIndex(const std::string &name) const { return indexOf(def.ops, name); }

  // Tensor `index`'s elements as floats (BF16 widened; a packed linear weight unpacked to
  // [N, K] row-major), for reference computations.
  std::vector<float> tensorValues(uint32_t index) const;

private:
  template <typename Items> static int indexOf(const Items &items, const std::string &name) {
    for (size_t i = 0; i < items.size(); ++i)
      if (items[i]->name == name)
        return static_cast<int>(i);
    return -1;
  }
};

namespace detail {

inline uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// splitmix64: the same numbers on every platform and standard library.
inline uint64_t nextRandom(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1).
inline float uniform(uint64_t &state) {
  return static_cast<float>(static_cast<double>(nextRandom(state) >> 11) * 0x1.0p-52 - 1.0);
}

inline std::vector<uint8_t> encode(const std::vector<float> &values, plan::DTypeDef dtype) {
  std::vector<uint8_t> bytes(values.size() * dtypeBytes(dtype));
  if (dtype == plan::DTypeDef::BF16) {
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t half = floatToBf16(values[i]);
      std::memcpy(bytes.data() + 2 * i, &half, 2);
    }
  } else if (!values.empty()) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  }
  return bytes;
}

} // namespace detail

// Strides, offsets and arena size of a KV cache whose dims and dtype are set, with position rows
// `posStride` elements apart: the plan format's layout (kvLayout), as the compiler plans it.
inline void layOutKvCache(plan::KvCacheDefT &kv, uint64_t posStride) {
  const std::optional<KvLayout> layout =
      kvLayout(kv.dtype, kv.layers, kv.slots, kv.kv_heads, kv.head_dim, kv.max_seq, posStride);
  if (!layout)
    throw std::overflow_error("the test's KV cache overflows 64 bits");
  setKvLayout(kv, *layout);
}

inline std::vector<float> TinyPlan::tensorValues(uint32_t index) const {
  const plan::TensorDefT &t = *def.tensors.at(index);
  const std::vector<uint8_t> &bytes = segments.at(t.segment);
  if (t.layout == plan::WeightLayoutDef::LinearBf16N16K2) {
    const uint64_t n = t.shape.at(0), k = t.shape.at(1);
    std::vector<float> values(n * k);
    for (uint64_t row = 0; row < n; ++row)
      unpackLinearBf16Row(reinterpret_cast<const uint16_t *>(bytes.data()), n, k, row,
                          values.data() + row * k);
    return values;
  }
  std::vector<float> values(bytes.size() / dtypeBytes(t.dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (t.dtype == plan::DTypeDef::BF16) {
      uint16_t half;
      std::memcpy(&half, bytes.data() + 2 * i, 2);
      values[i] = bf16ToFloat(half);
    } else {
      std::memcpy(&values[i], bytes.data() + 4 * i, 4);
    }
  }
  return values;
}

inline TinyPlan buildTinyPlan(const TinyPlanShape &shape = {}) {
  using namespace plan;
  TinyPlan tiny;
  PlanDefT &def = tiny.def;
  uint64_t rng = shape.seed;

  def.required_cpu_features = static_cast<uint64_t>(CpuFeatureBits::X86_64);
  def.target = "host";
  def.producer = "hetc unit tests";

  def.model = std::make_unique<ModelDefT>();
  def.model->architecture = shape.opt ? "opt" : "llama";
  def.model->vocab = shape.vocab;
  def.model->hidden = shape.hidden;
  def.model->layers = shape.layers;
  def.model->heads = shape.heads;
  def.model->kv_heads = shape.kv_heads;
  def.model->head_dim = shape.head_dim;
  def.model->intermediate = shape.intermediate;
  def.model->rms_eps = shape.rms_eps;
  def.model->tied_embeddings = shape.tied_embeddings;

  def.bounds = std::make_unique<BoundsDefT>();
  def.bounds->max_batch = shape.max_batch;
  def.bounds->max_seq = shape.max_seq;
  def.bounds->max_step_tokens = shape.max_step_tokens;

  // Weights: one segment per tensor, except a tied lm_head that shares the embedding's.
  auto addTensor = [&](const std::string &name, WeightLayoutDef layout, std::vector<uint64_t> dims,
                       DTypeDef dtype, const std::vector<float> &values) {
    auto tensor = std::make_unique<TensorDefT>();
    tensor->name = name;
    tensor->segment = static_cast<uint32_t>(tiny.segments.size());
    tensor->dtype = dtype;
    tensor->layout = layout;
    tensor->shape = std::move(dims);
    tiny.segments.push_back(detail::encode(values, dtype));
    def.tensors.push_back(std::move(tensor));
    return static_cast<uint32_t>(def.tensors.size() - 1);
  };
  auto randomValues = [&](uint64_t n, float center, float scale) {
    std::vector<float> values(n);
    for (float &v : values)
      v = center + scale * detail::uniform(rng);
    return values;
  };
  auto packed = [&](const std::string &name, uint32_t n, uint32_t k,
                    const std::vector<float> &values) {
    auto tensor = std::make_unique<TensorDefT>();
    tensor->name = name;
    tensor->segment = static_cast<uint32_t>(tiny.segments.size());
    tensor->dtype = DTypeDef::BF16;
    tensor->layout = WeightLayoutDef::LinearBf16N16K2;
    tensor->shape = {n, k};
    std::vector<uint8_t> bytes(LinearBf16N16K2{n, k}.bytes());
    packLinearBf16(values.data(), false, n, k, reinterpret_cast<uint16_t *>(bytes.data()));
    tiny.segments.push_back(std::move(bytes));
    def.tensors.push_back(std::move(tensor));
    return static_cast<uint32_t>(def.tensors.size() - 1);
  };
  auto packedInt8 = [&](const std::string &name, uint32_t n, uint32_t k,
                        const std::vector<float> &values) {
    auto tensor = std::make_unique<TensorDefT>();
    tensor->name = name;
    tensor->segment = static_cast<uint32_t>(tiny.segments.size());
    tensor->dtype = DTypeDef::INT8;
    tensor->layout = WeightLayoutDef::LinearInt8N16K4;
    tensor->shape = {n, k};
    std::vector<uint8_t> bytes(LinearInt8N16K4{n, k}.segmentBytes());
    quantizeLinearInt8Segment(values.data(), false, n, k, bytes.data());
    tiny.segments.push_back(std::move(bytes));
    def.tensors.push_back(std::move(tensor));
    return static_cast<uint32_t>(def.tensors.size() - 1);
  };
  auto packedInt4 = [&](const std::string &name, uint32_t n, uint32_t k,
                        const std::vector<float> &values) {
    auto tensor = std::make_unique<TensorDefT>();
    tensor->name = name;
    tensor->segment = static_cast<uint32_t>(tiny.segments.size());
    tensor->dtype = DTypeDef::INT4;
    tensor->layout = WeightLayoutDef::LinearInt4N16K8;
    tensor->shape = {n, k};
    tensor->group_size = shape.packed_int4_group;
    const LinearInt4N16K8 layout{n, k, shape.packed_int4_group};
    std::vector<uint8_t> bytes(layout.segmentBytes());
    quantizeLinearInt4Segment(values.data(), false, n, k, layout.group, false, bytes.data());
    tiny.segments.push_back(std::move(bytes));
    def.tensors.push_back(std::move(tensor));
    return static_cast<uint32_t>(def.tensors.size() - 1);
  };
  const bool integerHead =
      shape.integer_lm_head && (shape.packed_int8_linear || shape.packed_int4_group != 0);
  // A packed weight: in the layers' integer format, or (the lm_head, unless integerHead) BF16.
  auto packedAs = [&](const std::string &name, uint32_t n, uint32_t k,
                      const std::vector<float> &values, bool lmHead) {
    if (shape.packed_int4_group != 0 && (!lmHead || integerHead))
      return packedInt4(name, n, k, values);
    if (shape.packed_int8_linear && (!lmHead || integerHead))
      return packedInt8(name, n, k, values);
    return packed(name, n, k, values);
  };
  auto linear = [&](const std::string &name, uint32_t n, uint32_t k) {
    std::vector<float> values = randomValues(uint64_t{n} * k, 0.0f, 1.0f / std::sqrt(float(k)));
    const bool lmHead = name == "lm_head.weight";
    if (shape.packed_bf16_linear || shape.packed_int8_linear || shape.packed_int4_group != 0)
      if (!lmHead || shape.packed_bf16_linear || integerHead)
        return packedAs(name, n, k, values, lmHead);
    return addTensor(name, WeightLayoutDef::LinearNK, {n, k}, shape.weight_dtype, values);
  };
  auto bias = [&](const std::string &name, uint32_t n) {
    return addTensor(name, WeightLayoutDef::RowMajor, {n}, DTypeDef::F32,
                     randomValues(n, 0.0f, 0.5f));
  };
  auto norm = [&](const std::string &name) {
    return addTensor(name, WeightLayoutDef::RowMajor, {shape.hidden}, shape.weight_dtype,
                     randomValues(shape.hidden, 1.0f, 0.1f));
  };

  const uint32_t qCols = shape.heads * shape.head_dim;
  const uint32_t kvCols = shape.kv_heads * shape.head_dim;
  const std::vector<float> tableValues =
      randomValues(uint64_t{shape.vocab} * shape.hidden, 0.0f, 1.0f);
  // A packed tied table is the lm_head weight itself: one tensor, written once.
  const bool packedTable = (shape.packed_bf16_linear || integerHead) && shape.tied_embeddings;
  const uint32_t embedTensor =
      packedTable
          ? packedAs("model.embed_tokens.weight", shape.vocab, shape.hidden, tableValues, true)
          : addTensor("model.embed_tokens.weight", WeightLayoutDef::RowMajor,
                      {shape.vocab, shape.hidden}, shape.weight_dtype, tableValues);
  std::vector<float> invFreq(shape.head_dim / 2);
  for (uint32_t i = 0; i < invFreq.size(); ++i)
    invFreq[i] = static_cast<float>(
        1.0 / std::pow(double(shape.rope_theta), 2.0 * i / double(shape.head_dim)));
  const uint32_t invFreqTensor = addTensor("model.rotary_emb.inv_freq", WeightLayoutDef::RowMajor,
                                           {shape.head_dim / 2}, DTypeDef::F32, invFreq);

  // Activation buffers: one arena, 64-byte aligned rows; shared by every layer.
  auto addBuffer = [&](const std::string &name, BufferRoleDef role, uint64_t rows, uint64_t cols) {
    auto buffer = std::make_unique<BufferDefT>();
    buffer->name = name;
    buffer->role = role;
    buffer->dtype = plan::DTypeDef::F32;
    buffer->rows = rows;
    buffer->cols = cols;
    buffer->row_stride = detail::alignUp(cols * sizeof(float), kBufferAlignment);
    buffer->offset = def.activation_arena_size;
    def.activation_arena_size =
        detail::alignUp(buffer->offset + rows * buffer->row_stride, kBufferAlignment);
    def.buffers.push_back(std::move(buffer));
    return static_cast<uint32_t>(def.buffers.size() - 1);
  };
  const uint64_t tokens = shape.max_step_tokens;
  const uint32_t hidden = addBuffer("hidden", BufferRoleDef::Hidden, tokens, shape.hidden);
  const uint32_t residual = addBuffer("residual", BufferRoleDef::Hidden, tokens, shape.hidden);
  const uint32_t normed = addBuffer("normed", BufferRoleDef::Scratch, tokens, shape.hidden);
  const uint32_t q = addBuffer("q", BufferRoleDef::Scratch, tokens, qCols);
  const uint32_t k = addBuffer("k", BufferRoleDef::Scratch, tokens, kvCols);
  const uint32_t v = addBuffer("v", BufferRoleDef::Scratch, tokens, kvCols);
  const uint32_t attn = addBuffer("attn", BufferRoleDef::Scratch, tokens, qCols);
  const uint32_t proj = addBuffer("proj", BufferRoleDef::Scratch, tokens, shape.hidden);
  const uint32_t gate = addBuffer("gate", BufferRoleDef::Scratch, tokens, shape.intermediate);
  const uint32_t up = addBuffer("up", BufferRoleDef::Scratch, tokens, shape.intermediate);
  const uint32_t act = addBuffer("act", BufferRoleDef::Scratch, tokens, shape.intermediate);
  const uint32_t logits = addBuffer("logits", BufferRoleDef::Logits, shape.max_batch, shape.vocab);
  def.logits_buffer = logits;

  // KV cache, dimension-first and tightly packed.
  def.kv_cache = std::make_unique<KvCacheDefT>();
  KvCacheDefT &kv = *def.kv_cache;
  kv.dtype = shape.kv_dtype;
  kv.layers = shape.layers;
  kv.slots = shape.max_batch;
  kv.kv_heads = shape.kv_heads;
  kv.max_seq = shape.max_seq;
  kv.head_dim = shape.head_dim;
  layOutKvCache(kv, shape.head_dim);

  auto addOp = [&](OpKindDef kind, const std::string &name, int32_t layer,
                   std::vector<uint32_t> inputs, std::vector<uint32_t> outputs,
                   std::vector<uint32_t> weights, uint64_t work, uint64_t grain) {
    auto op = std::make_unique<OpDefT>();
    op->kind = kind;
    op->name = name;
    op->layer = layer;
    op->sublayer =
        def.sublayers.empty() || layer < 0 ? -1 : static_cast<int32_t>(def.sublayers.size() - 1);
    op->inputs = std::move(inputs);
    op->outputs = std::move(outputs);
    op->weights = std::move(weights);
    // Attention carries no tasks (work 0): the executor splits it by positions.
    op->task_grain = work ? grain : 0;
    op->task_count = work ? static_cast<uint32_t>((work + grain - 1) / grain) : 0;
    def.ops.push_back(std::move(op));
    return def.ops.back().get();
  };
  auto rowGrain = std::min<uint64_t>(shape.row_task_grain, tokens);
  auto rowOp = [&](OpKindDef kind, const std::string &name, int32_t layer,
                   std::vector<uint32_t> inputs, uint32_t output, std::vector<uint32_t> weights) {
    return addOp(kind, name, layer, std::move(inputs), {output}, std::move(weights), tokens,
                 rowGrain);
  };
  auto linearOp = [&](OpKindDef kind, const std::string &name, int32_t layer, uint32_t input,
                      uint32_t output, uint32_t weight, uint64_t outCols) {
    return addOp(kind, name, layer, {input}, {output}, {weight}, outCols,
                 std::min<uint64_t>(shape.linear_task_grain, outCols));
  };
  auto rmsNorm = [&](const std::string &name, int32_t layer, uint32_t in, uint32_t out,
                     uint32_t gamma) {
    OpDefT *op = rowOp(OpKindDef::RmsNorm, name, layer, {in}, out, {gamma});
    RmsNormParamsDefT params;
    params.eps = shape.rms_eps;
    op->params.Set(std::move(params));
  };
  // An OPT norm: gamma then beta, both F32 [hidden].
  auto layerNorm = [&](const std::string &name, int32_t layer, uint32_t in, uint32_t out) {
    const uint32_t gamma = addTensor(name + ".weight", WeightLayoutDef::RowMajor, {shape.hidden},
                                     DTypeDef::F32, randomValues(shape.hidden, 1.0f, 0.1f));
    const uint32_t beta = bias(name + ".bias", shape.hidden);
    OpDefT *op = rowOp(OpKindDef::LayerNorm, name, layer, {in}, out, {gamma, beta});
    LayerNormParamsDefT params;
    params.eps = shape.rms_eps;
    params.bias = true;
    op->params.Set(std::move(params));
  };
  // A LayerNorm (OPT) or an RmsNorm reading `rmsGamma` (Llama).
  auto normOp = [&](const std::string &name, int32_t layer, uint32_t in, uint32_t out,
                    uint32_t rmsGamma) {
    if (shape.opt)
      layerNorm(name, layer, in, out);
    else
      rmsNorm(name, layer, in, out, rmsGamma);
  };
  auto setEmptyParams = [](OpDefT *op, auto params) { op->params.Set(std::move(params)); };
  auto beginSublayer = [&](uint32_t layer, SublayerKindDef kind) {
    auto sublayer = std::make_unique<SublayerDefT>();
    sublayer->layer = layer;
    sublayer->kind = kind;
    sublayer->device = DeviceDef::CPU;
    sublayer->first_op = static_cast<uint32_t>(def.ops.size());
    def.sublayers.push_back(std::move(sublayer));
  };
  auto endSublayer = [&]() {
    def.sublayers.back()->op_count =
        static_cast<uint32_t>(def.ops.size()) - def.sublayers.back()->first_op;
  };

  OpDefT *embedding =
      rowOp(OpKindDef::Embedding, "model.embed_tokens", -1, {}, hidden, {embedTensor});
  EmbeddingParamsDefT embeddingParams;
  if (shape.opt) {
    const uint64_t rows = shape.max_seq + shape.position_offset;
    embedding->weights.push_back(
        addTensor("model.embed_positions.weight", WeightLayoutDef::RowMajor, {rows, shape.hidden},
                  DTypeDef::F32, randomValues(rows * shape.hidden, 0.0f, 0.5f)));
    embeddingParams.position_offset = shape.position_offset;
  }
  embeddingParams.scale = shape.embedding_scale;
  embedding->params.Set(std::move(embeddingParams));

  for (uint32_t l = 0; l < shape.layers; ++l) {
    const std::string prefix = "model.layers." + std::to_string(l) + ".";
    const int32_t layer = static_cast<int32_t>(l);
    // OPT's norms make their own gamma and beta as they are added; its fc1 and fc2 are
    // gate_proj's and down_proj's shapes.
    const uint32_t inputNorm = shape.opt ? 0 : norm(prefix + "input_layernorm.weight");
    const uint32_t qProj = linear(prefix + "self_attn.q_proj.weight", qCols, shape.hidden);
    const uint32_t kProj = linear(prefix + "self_attn.k_proj.weight", kvCols, shape.hidden);
    const uint32_t vProj = linear(prefix + "self_attn.v_proj.weight", kvCols, shape.hidden);
    const uint32_t oProj = linear(prefix + "self_attn.o_proj.weight", shape.hidden, qCols);
    const uint32_t postNorm = shape.opt ? 0 : norm(prefix + "post_attention_layernorm.weight");
    const uint32_t gateProj =
        linear(prefix + (shape.opt ? "mlp.fc1.weight" : "mlp.gate_proj.weight"), shape.intermediate,
               shape.hidden);
    const uint32_t upProj =
        shape.opt ? 0 : linear(prefix + "mlp.up_proj.weight", shape.intermediate, shape.hidden);
    const uint32_t downProj =
        linear(prefix + (shape.opt ? "mlp.fc2.weight" : "mlp.down_proj.weight"), shape.hidden,
               shape.intermediate);

    beginSublayer(l, SublayerKindDef::Attention);
    normOp(prefix + "input_layernorm", layer, hidden, normed, inputNorm);
    for (const auto &[suffix, output, weight, cols] :
         {std::make_tuple("q_proj", q, qProj, qCols), std::make_tuple("k_proj", k, kProj, kvCols),
          std::make_tuple("v_proj", v, vProj, kvCols)}) {
      const std::string name = prefix + "self_attn." + suffix;
      OpDefT *op = linearOp(OpKindDef::Linear, name, layer, normed, output, weight, cols);
      LinearParamsDefT params;
      params.bias = shape.qkv_bias;
      if (shape.qkv_bias)
        op->weights.push_back(bias(name + ".bias", cols));
      op->params.Set(std::move(params));
    }
    for (const auto &[buffer, heads, suffix] :
         {std::make_tuple(q, shape.heads, "q"), std::make_tuple(k, shape.kv_heads, "k")}) {
      if (shape.fused_rope)
        break;
      OpDefT *rope = rowOp(OpKindDef::Rope, prefix + "self_attn.rotary_emb." + suffix, layer,
                           {buffer}, buffer, {invFreqTensor});
      RopeParamsDefT params;
      params.heads = heads;
      params.head_dim = shape.head_dim;
      rope->params.Set(std::move(params));
    }
    OpDefT *attention = addOp(
        OpKindDef::Attention, prefix + "self_attn", layer, {q, k, v}, {attn},
        shape.fused_rope ? std::vector<uint32_t>{invFreqTensor} : std::vector<uint32_t>{}, 0, 0);
    AttentionParamsDefT attentionParams;
    attentionParams.layer = l;
    attentionParams.heads = shape.heads;
    attentionParams.kv_heads = shape.kv_heads;
    attentionParams.head_dim = shape.head_dim;
    attentionParams.scale = 1.0f / std::sqrt(float(shape.head_dim));
    attentionParams.rope = shape.fused_rope;
    attentionParams.softcap = shape.attention_softcap;
    attentionParams.sliding_window = l % 2 == 0 ? shape.even_layer_window : 0;
    if (shape.alibi)
      for (uint32_t h = 0; h < shape.heads; ++h)
        attentionParams.alibi_slopes.push_back(
            std::exp2(-8.0f * float(h + 1) / float(shape.heads)));
    attention->params.Set(std::move(attentionParams));
    // A fused residual reads `hidden` as its second input and writes the Add's output.
    auto fusedLinear = [&](const std::string &name, uint32_t input, uint32_t residualIn,
                           uint32_t output, uint32_t weight) {
      OpDefT *op = linearOp(OpKindDef::Linear, name, layer, input, output, weight, shape.hidden);
      op->inputs.push_back(residualIn);
      LinearParamsDefT params;
      params.residual = true;
      op->params.Set(std::move(params));
    };
    if (shape.fused_residual) {
      fusedLinear(prefix + "self_attn.o_proj", attn, hidden, residual, oProj);
    } else {
      setEmptyParams(linearOp(OpKindDef::Linear, prefix + "self_attn.o_proj", layer, attn, proj,
                              oProj, shape.hidden),
                     LinearParamsDefT());
      setEmptyParams(
          rowOp(OpKindDef::Add, prefix + "attn_residual", layer, {hidden, proj}, residual, {}),
          AddParamsDefT());
    }
    endSublayer();

    beginSublayer(l, SublayerKindDef::FeedForward);
    normOp(prefix + "post_attention_layernorm", layer, residual, normed, postNorm);
    const std::string gateName = prefix + "mlp.gate_proj", upName = prefix + "mlp.up_proj";
    auto linearWithBias = [&](const std::string &name, uint32_t input, uint32_t output,
                              uint32_t weight, uint32_t cols) {
      OpDefT *op = linearOp(OpKindDef::Linear, name, layer, input, output, weight, cols);
      op->weights.push_back(bias(name + ".bias", cols));
      LinearParamsDefT params;
      params.bias = true;
      op->params.Set(std::move(params));
    };
    if (shape.opt) {
      linearWithBias(prefix + "mlp.fc1", normed, gate, gateProj, shape.intermediate);
      OpDefT *activation = rowOp(OpKindDef::Activation, prefix + "mlp.act", layer, {gate}, act, {});
      ActivationParamsDefT params;
      params.function = shape.activation;
      activation->params.Set(std::move(params));
      linearWithBias(prefix + "mlp.fc2", act, proj, downProj, shape.hidden);
      setEmptyParams(
          rowOp(OpKindDef::Add, prefix + "mlp_residual", layer, {residual, proj}, hidden, {}),
          AddParamsDefT());
      endSublayer();
      continue;
    }
    if (shape.fused_swiglu) {
      // The first linear writes its operand; the second reads it and writes the SwiGlu's output.
      const bool gateLast = shape.swiglu_gate_last;
      setEmptyParams(linearOp(OpKindDef::Linear, gateLast ? upName : gateName, layer, normed,
                              gateLast ? up : gate, gateLast ? upProj : gateProj,
                              shape.intermediate),
                     LinearParamsDefT());
      OpDefT *fused = linearOp(OpKindDef::Linear, gateLast ? gateName : upName, layer, normed, act,
                               gateLast ? gateProj : upProj, shape.intermediate);
      fused->inputs.push_back(gateLast ? up : gate);
      LinearParamsDefT params;
      params.swiglu = gateLast ? SwiGluRoleDef::Gate : SwiGluRoleDef::Up;
      params.swiglu_function = shape.gate;
      fused->params.Set(std::move(params));
    } else {
      setEmptyParams(
          linearOp(OpKindDef::Linear, gateName, layer, normed, gate, gateProj, shape.intermediate),
          LinearParamsDefT());
      setEmptyParams(
          linearOp(OpKindDef::Linear, upName, layer, normed, up, upProj, shape.intermediate),
          LinearParamsDefT());
      SwiGluParamsDefT swiglu;
      swiglu.function = shape.gate;
      setEmptyParams(rowOp(OpKindDef::SwiGlu, prefix + "mlp.act", layer, {gate, up}, act, {}),
                     swiglu);
    }
    if (shape.fused_residual) {
      fusedLinear(prefix + "mlp.down_proj", act, residual, hidden, downProj);
    } else {
      setEmptyParams(linearOp(OpKindDef::Linear, prefix + "mlp.down_proj", layer, act, proj,
                              downProj, shape.hidden),
                     LinearParamsDefT());
      setEmptyParams(
          rowOp(OpKindDef::Add, prefix + "mlp_residual", layer, {residual, proj}, hidden, {}),
          AddParamsDefT());
    }
    endSublayer();
  }

  const uint32_t finalNorm = shape.opt ? 0 : norm("model.norm.weight");
  normOp("model.norm", -1, hidden, normed, finalNorm);
  uint32_t lmHeadTensor;
  if (packedTable) {
    lmHeadTensor = embedTensor;
  } else if (shape.tied_embeddings) {
    // Same bytes as the embedding table, seen as a LinearNK [vocab, hidden] weight.
    auto tied = std::make_unique<TensorDefT>();
    tied->name = "lm_head.weight";
    tied->segment = def.tensors[embedTensor]->segment;
    tied->dtype = shape.weight_dtype;
    tied->layout = WeightLayoutDef::LinearNK;
    tied->shape = {shape.vocab, shape.hidden};
    def.tensors.push_back(std::move(tied));
    lmHeadTensor = static_cast<uint32_t>(def.tensors.size() - 1);
  } else {
    lmHeadTensor = linear("lm_head.weight", shape.vocab, shape.hidden);
  }
  LmHeadParamsDefT lmHeadParams;
  lmHeadParams.softcap = shape.logit_softcap;
  lmHeadParams.bias = shape.lm_head_bias;
  OpDefT *lmHead =
      linearOp(OpKindDef::LmHead, "lm_head", -1, normed, logits, lmHeadTensor, shape.vocab);
  if (shape.lm_head_bias)
    lmHead->weights.push_back(addTensor("lm_head.bias", WeightLayoutDef::RowMajor, {shape.vocab},
                                        DTypeDef::F32, randomValues(shape.vocab, 0.0f, 0.5f)));
  setEmptyParams(lmHead, lmHeadParams);
  return tiny;
}

// The cost model's sublayers (CostSublayerBits) a tiny-plan op computes, from its name; none
// outside the layers.
inline uint8_t tinyCostSublayers(const plan::OpDefT &op) {
  using Bits = plan::CostSublayerBits;
  auto has = [&](const char *part) { return op.name.find(part) != std::string::npos; };
  auto bits = [](Bits b) { return static_cast<uint8_t>(b); };
  if (op.layer < 0)
    return 0;
  if (op.kind == plan::OpKindDef::Attention)
    return bits(Bits::QK) | bits(Bits::SV);
  if (has("o_proj") || has("attn_residual"))
    return bits(Bits::OUT);
  if (has("down_proj") || has("fc2") || has("mlp_residual"))
    return bits(Bits::FC2);
  if (has("post_attention_layernorm") || has("mlp."))
    return bits(Bits::FC1);
  return bits(Bits::QKV); // the input norm, q, k, v and RoPE
}

// Gives the tiny plan the device plan hetc-assign-devices records for a target with a GPU: one
// "gpu-resident" group of every layer running `decodePolicy` in decode and `prefillPolicy` in
// prefill (CPU bits, LIA's p_i = 1 on the CPU), each op on its first sublayer's device, the
// layers' weights kept in GPU memory, and one-row policy tables.
inline void addDevicePlan(TinyPlan &tiny, uint8_t decodePolicy, uint8_t prefillPolicy) {
  using namespace plan;
  PlanDefT &def = tiny.def;
  def.target = "spr-h100";
  def.target_gpu = "NVIDIA H100 80GB PCIe";
  def.tier_reason = "weights, KV cache and activations in DDR; all layers resident";
  for (auto &tensor : def.tensors)
    if (tensor->name.rfind("model.layers.", 0) == 0)
      tensor->tier = TierDef::GPU;
  auto deviceOf = [](uint8_t policy, uint8_t sublayers) {
    const unsigned first = static_cast<unsigned>(__builtin_ctz(sublayers));
    return (policy >> first & 1) ? DeviceDef::CPU : DeviceDef::GPU;
  };
  for (auto &op : def.ops) {
    const uint8_t sublayers = tinyCostSublayers(*op);
    op->cost_sublayers = static_cast<CostSublayerBits>(sublayers);
    if (sublayers) {
      op->device = deviceOf(decodePolicy, sublayers);
      op->prefill_device = deviceOf(prefillPolicy, sublayers);
    }
  }
  for (auto &sublayer : def.sublayers)
    for (uint32_t i = sublayer->first_op; i < sublayer->first_op + sublayer->op_count; ++i)
      if (def.ops[i]->device == DeviceDef::GPU)
        sublayer->device = DeviceDef::GPU;
  for (const auto &[stage, policy, batch, len] :
       {std::make_tuple(StageDef::Prefill, prefillPolicy, uint64_t{1}, uint64_t{8}),
        std::make_tuple(StageDef::Decode, decodePolicy, uint64_t{def.bounds->max_batch},
                        def.bounds->max_seq)}) {
    auto plan = std::make_unique<StagePlanDefT>();
    plan->stage = stage;
    plan->batch = batch;
    plan->len = std::min(len, def.bounds->max_seq);
    plan->predicted_seconds = 1e-6;
    plan->reason = std::string(EnumNameStageDef(stage)) + " on spr-h100";
    auto group = std::make_unique<LayerGroupDefT>();
    group->name = "gpu-resident";
    group->first_layer = 0;
    group->layer_count = def.model->layers;
    group->policy = static_cast<CostSublayerBits>(policy);
    group->layer_seconds = 1e-6 / def.model->layers;
    plan->groups.push_back(std::move(group));
    auto range = std::make_unique<PolicyRangeDefT>();
    range->first_batch = 1;
    range->last_batch = def.bounds->max_batch;
    range->policies = {static_cast<CostSublayerBits>(policy)};
    auto row = std::make_unique<PolicyRowDefT>();
    row->len = 1;
    row->ranges.push_back(std::move(range));
    plan->policy_table.push_back(std::move(row));
    def.stages.push_back(std::move(plan));
  }
}

// A fresh directory under the test temporary directory, removed with everything in it.
class ScratchDir {
public:
  ScratchDir() {
    std::string pattern = ::testing::TempDir() + "hetc-test-XXXXXX";
    if (char *made = ::mkdtemp(pattern.data()))
      path_ = made;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty())
      std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir &) = delete;
  ScratchDir &operator=(const ScratchDir &) = delete;

  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

inline std::vector<uint8_t> readFileBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void writeFileBytes(const std::string &path, const uint8_t *data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(size));
}

// Writes the tiny plan to `path` (filling its segments and schema version).
inline Status writeTinyPlan(const std::string &path, TinyPlan &tiny) {
  return writePlanFile(path, tiny.def, tiny.payloads());
}

} // namespace hetc::test
