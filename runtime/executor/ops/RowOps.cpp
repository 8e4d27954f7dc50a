// The row-wise ops: Embedding, RmsNorm, LayerNorm, Rope, SwiGlu, Activation and Add. Each splits
// the step's rows into tasks of the plan's grain and runs the kernel of the vector set picked at
// create() (codegen/cpu/vector: AVX-512 BF16, AVX-512 or portable); the label is that set's name.
#include "runtime/executor/OpResolver.h"
#include "runtime/executor/ops/Split.h"

#include "runtime/format/WeightLayout.h"

namespace hetc {
namespace {

using plan::OpKindDef;
using plan::WeightLayoutDef;

size_t grainOf(const OpResolver &resolver) {
  return ops::rowGrain(resolver.op().task_grain(), resolver.op().task_count(),
                       resolver.setup().maxStepTokens);
}

struct EmbeddingArgs : OpArgs {
  Rows out;
  size_t grain = 1;
  const float *table = nullptr; // f32 [vocab, hidden]
  kernels::EmbeddingKernel kernel = nullptr;
  // Or the packed weight of the lm_head it is tied to: BF16, INT8 or INT4 (with its group).
  const void *packed = nullptr;
  WeightLayoutDef packedLayout = WeightLayoutDef::RowMajor;
  size_t group = 0;
  size_t vocab = 0;
  // Learned positions: row positions[t] + positionOffset of f32 [max_positions, hidden] is added
  // to row t; null without them.
  const float *positions = nullptr;
  size_t positionOffset = 0;
  kernels::AddKernel add = nullptr;
  float scale = 1.0f; // each row times this (Gemma's sqrt(hidden)), after its positions
};

// After each token row was written: adds its learned position row, table[id] + positions[p]
// (the order of OPT's and GPT-2's inputs_embeds + pos_embeds; the loader checked that max_seq +
// offset rows exist), then multiplies by the scale (Gemma's embeddings * normalizer).
void finishRows(const EmbeddingArgs &a, const StepRows &step, size_t begin, size_t end) {
  if (a.positions)
    for (size_t t = begin; t < end; ++t) {
      float *row = a.out.data + t * a.out.stride;
      const float *position = a.positions + (step.positions[t] + a.positionOffset) * a.out.cols;
      a.add(row, 0, position, 0, a.out.cols, row, 0, 0, 1);
    }
  if (a.scale != 1.0f)
    kernels::scaleRows(a.scale, a.out.data, a.out.stride, a.out.cols, begin, end);
}

void runEmbedding(const OpArgs &base, const StepRows &step, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const EmbeddingArgs &>(base);
  size_t begin, end;
  ops::rowShare(step, a.grain, thread, threads, begin, end);
  if (begin < end)
    a.kernel(step.tokens, a.table, a.out.cols, a.out.data, a.out.stride, begin, end);
  finishRows(a, step, begin, end);
}

// Rows are gathered from the lm_head's packed weight it is tied to.
void runEmbeddingPacked(const OpArgs &base, const StepRows &step, unsigned thread,
                        unsigned threads) {
  const auto &a = static_cast<const EmbeddingArgs &>(base);
  size_t begin, end;
  ops::rowShare(step, a.grain, thread, threads, begin, end);
  for (size_t t = begin; t < end; ++t) {
    float *row = a.out.data + t * a.out.stride;
    const auto *bytes = static_cast<const uint8_t *>(a.packed);
    switch (a.packedLayout) {
    case WeightLayoutDef::LinearInt8N16K4:
      unpackLinearInt8Row(bytes, a.vocab, a.out.cols, step.tokens[t], row);
      break;
    case WeightLayoutDef::LinearInt4N16K8:
      unpackLinearInt4Row(bytes, a.vocab, a.out.cols, a.group, step.tokens[t], row);
      break;
    default:
      unpackLinearBf16Row(static_cast<const uint16_t *>(a.packed), a.vocab, a.out.cols,
                          step.tokens[t], row);
      break;
    }
  }
  finishRows(a, step, begin, end);
}

struct RmsNormArgs : OpArgs {
  Rows in, out;
  size_t grain = 1;
  const float *gamma = nullptr;
  size_t group = 0; // gamma's length: each group of that many columns is normalized on its own
  float eps = 0.0f;
  kernels::RmsNormKernel kernel = nullptr;
};

void runRmsNorm(const OpArgs &base, const StepRows &step, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const RmsNormArgs &>(base);
  size_t begin, end;
  ops::rowShare(step, a.grain, thread, threads, begin, end);
  if (begin >= end)
    return;
  for (size_t g = 0; g < a.out.cols; g += a.group)
    a.kernel(a.in.data + g, a.in.stride, a.gamma, a.group, a.eps, a.out.data + g, a.out.stride,
             begin, end);
}

struct LayerNormArgs : OpArgs {
  Rows in, out;
  size_t grain = 1;
  const float *gamma = nullptr;
  const float *beta = nullptr; // null without a bias
  float eps = 0.0f;
  kernels::LayerNormKernel kernel = nullptr;
};

void runLayerNorm(const OpArgs &base, const StepRows &step, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const LayerNormArgs &>(base);
  size_t begin, end;
  ops::rowShare(step, a.grain, thread, threads, begin, end);
  if (begin < end)
    a.kernel(a.in.data, a.in.stride, a.gamma, a.beta, a.out.cols, a.eps, a.out.data, a.out.stride,
             begin, end);
}

struct ActivationArgs : OpArgs {
  Rows in, out;
  size_t grain = 1;
  kernels::ActivationFunction function = kernels::ActivationFunction::Relu;
  kernels::ActivationKernel kernel = nullptr;
};

void runActivation(const OpArgs &base, const StepRows &step, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const ActivationArgs &>(base);
  size_t begin, end;
  ops::rowShare(step, a.grain, thread, threads, begin, end);
  if (begin < end)
    a.kernel(a.function, a.in.data, a.in.stride, a.out.cols, a.out.data, a.out.stride, begin, end);
}

struct RopeArgs : OpArgs {
  Rows x; // rotated in place
  size_t grain = 1;
  size_t heads = 0;
  kernels::RopeForm form;
  const float *invFreq = nullptr;
  kernels::RopeKernel kernel = nullptr;
};

void runRope(const OpArgs &base, const StepRows &step, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const RopeArgs &>(base);
  size_t begin, end;
  ops::rowShare(step, a.grain, thread, threads, begin, end);
  if (begin < end)
    a.kernel(a.x.data, a.x.stride, a.heads, a.form, a.invFreq, step.positions, begin, end);
}

// SwiGlu (gate, up) and Add (a, b): two inputs, one output, the same columns.
struct BinaryArgs : OpArgs {
  Rows in[2], out;
  size_t grain = 1;
  kernels::AddKernel kernel = nullptr; // Add's
  kernels::GatedKernel gated = nullptr; // SwiGlu's, with its gate's function
  kernels::ActivationFunction function = kernels::ActivationFunction::Silu;
};

void runBinary(const OpArgs &base, const StepRows &step, unsigned thread, unsigned threads) {
  const auto &a = static_cast<const BinaryArgs &>(base);
  size_t begin, end;
  ops::rowShare(step, a.grain, thread, threads, begin, end);
  if (begin >= end)
    return;
  if (a.gated)
    a.gated(a.function, a.in[0].data, a.in[0].stride, a.in[1].data, a.in[1].stride, a.out.cols,
            a.out.data, a.out.stride, begin, end);
  else
    a.kernel(a.in[0].data, a.in[0].stride, a.in[1].data, a.in[1].stride, a.out.cols, a.out.data,
             a.out.stride, begin, end);
}

// Makes and fills the args (`made`); the caller picks the kernel and pushes the op.
Status resolveBinary(OpResolver &resolver, BinaryArgs *&made) {
  const size_t T = resolver.setup().maxStepTokens;
  BinaryArgs &a = resolver.make<BinaryArgs>();
  made = &a;
  for (size_t i = 0; i < 2; ++i)
    if (Status s = resolver.buffer(i, true, T, a.in[i]); !s)
      return s;
  if (Status s = resolver.buffer(0, false, T, a.out); !s)
    return s;
  a.grain = grainOf(resolver);
  return Status();
}

} // namespace

Status resolveEmbedding(OpResolver &resolver, std::vector<ResolvedOp> &ops) {
  const plan::PlanDef &def = resolver.def();
  const plan::OpDef &op = resolver.op();
  EmbeddingArgs &a = resolver.make<EmbeddingArgs>();
  if (Status s = resolver.buffer(0, false, resolver.setup().maxStepTokens, a.out); !s)
    return s;
  a.grain = grainOf(resolver);
  a.vocab = def.model()->vocab();
  a.scale = op.params_as_EmbeddingParamsDef()->scale(); // finite and non-zero: the loader checked
  // The loader checked weights[1]'s shape [max_positions, hidden] and that max_seq + offset rows
  // exist.
  if (op.weights() && op.weights()->size() > 1) {
    const flatbuffers::Vector<uint64_t> *shape = nullptr;
    if (Status s = resolver.weight(1, WeightLayoutDef::RowMajor, 2, a.positions, shape); !s)
      return s;
    a.positionOffset = op.params_as_EmbeddingParamsDef()->position_offset();
    a.add = resolver.setup().vector->add;
  }
  const plan::TensorDef *table =
      op.weights() && op.weights()->size() > 0 ? def.tensors()->Get(op.weights()->Get(0)) : nullptr;
  if (table && table->layout() != WeightLayoutDef::RowMajor) {
    // A tied lm_head's packed weight: the loader checked its shape [vocab, hidden] and its
    // payload's size.
    a.packed = resolver.setup().plan->tensorData(op.weights()->Get(0));
    a.packedLayout = table->layout();
    a.group = table->group_size();
    const char *label = a.packedLayout == WeightLayoutDef::LinearInt8N16K4 ? "EmbeddingInt8Packed"
                        : a.packedLayout == WeightLayoutDef::LinearInt4N16K8
                            ? "EmbeddingInt4Packed"
                            : "EmbeddingBf16Packed";
    ops.push_back(resolver.resolved(OpKind::Embedding, runEmbeddingPacked, a, label));
    return Status();
  }
  const flatbuffers::Vector<uint64_t> *shape = nullptr;
  if (Status s = resolver.weight(0, WeightLayoutDef::RowMajor, 2, a.table, shape); !s)
    return s;
  a.kernel = resolver.setup().vector->embedding;
  ops.push_back(
      resolver.resolved(OpKind::Embedding, runEmbedding, a, resolver.setup().vector->name));
  return Status();
}

Status resolveRmsNorm(OpResolver &resolver, std::vector<ResolvedOp> &ops) {
  const size_t T = resolver.setup().maxStepTokens;
  RmsNormArgs &a = resolver.make<RmsNormArgs>();
  const flatbuffers::Vector<uint64_t> *shape = nullptr;
  if (Status s = resolver.buffer(0, true, T, a.in); !s)
    return s;
  if (Status s = resolver.buffer(0, false, T, a.out); !s)
    return s;
  if (Status s = resolver.weight(0, WeightLayoutDef::RowMajor, 1, a.gamma, shape); !s)
    return s;
  // The plan's check holds gamma to the row's length or, from 1.15, a divisor of it.
  a.group = shape->Get(0);
  const auto *params = resolver.op().params_as_RmsNormParamsDef();
  a.eps = params ? params->eps() : resolver.def().model()->rms_eps();
  a.grain = grainOf(resolver);
  a.kernel = resolver.setup().vector->rmsNorm;
  ops.push_back(resolver.resolved(OpKind::RmsNorm, runRmsNorm, a, resolver.setup().vector->name));
  return Status();
}

Status resolveLayerNorm(OpResolver &resolver, std::vector<ResolvedOp> &ops) {
  const size_t T = resolver.setup().maxStepTokens;
  LayerNormArgs &a = resolver.make<LayerNormArgs>();
  const flatbuffers::Vector<uint64_t> *shape = nullptr;
  if (Status s = resolver.buffer(0, true, T, a.in); !s)
    return s;
  if (Status s = resolver.buffer(0, false, T, a.out); !s)
    return s;
  if (Status s = resolver.weight(0, WeightLayoutDef::RowMajor, 1, a.gamma, shape); !s)
    return s;
  const auto *params = resolver.op().params_as_LayerNormParamsDef();
  if (params->bias())
    if (Status s = resolver.weight(1, WeightLayoutDef::RowMajor, 1, a.beta, shape); !s)
      return s;
  a.eps = params->eps();
  a.grain = grainOf(resolver);
  a.kernel = resolver.setup().vector->layerNorm;
  ops.push_back(
      resolver.resolved(OpKind::LayerNorm, runLayerNorm, a, resolver.setup().vector->name));
  return Status();
}

Status resolveActivation(OpResolver &resolver, std::vector<ResolvedOp> &ops) {
  const size_t T = resolver.setup().maxStepTokens;
  ActivationArgs &a = resolver.make<ActivationArgs>();
  if (Status s = resolver.buffer(0, true, T, a.in); !s)
    return s;
  if (Status s = resolver.buffer(0, false, T, a.out); !s)
    return s;
  a.function = activationFunction(resolver.op().params_as_ActivationParamsDef()->function());
  a.grain = grainOf(resolver);
  a.kernel = resolver.setup().vector->activation;
  ops.push_back(
      resolver.resolved(OpKind::Activation, runActivation, a, resolver.setup().vector->name));
  return Status();
}

Status resolveRope(OpResolver &resolver, std::vector<ResolvedOp> &ops) {
  const size_t T = resolver.setup().maxStepTokens;
  RopeArgs &a = resolver.make<RopeArgs>();
  if (Status s = resolver.buffer(0, true, T, a.x); !s)
    return s;
  const auto *params = resolver.op().params_as_RopeParamsDef();
  a.heads = params->heads();
  a.form = ropeForm(params->head_dim(), params->rotary_dim(), params->interleaved());
  const flatbuffers::Vector<uint64_t> *shape = nullptr;
  if (Status s = resolver.weight(0, WeightLayoutDef::RowMajor, 1, a.invFreq, shape); !s)
    return s;
  a.grain = grainOf(resolver);
  a.kernel = resolver.setup().vector->rope;
  ops.push_back(resolver.resolved(OpKind::Rope, runRope, a, resolver.setup().vector->name));
  return Status();
}

Status resolveSwiGlu(OpResolver &resolver, std::vector<ResolvedOp> &ops) {
  BinaryArgs *a = nullptr;
  if (Status s = resolveBinary(resolver, a); !s)
    return s;
  a->gated = resolver.setup().vector->gated;
  // Before 1.16 a SwiGlu carried no function: silu.
  const auto *params = resolver.op().params_as_SwiGluParamsDef();
  a->function =
      activationFunction(params ? params->function() : plan::ActivationFunctionDef::Silu);
  ops.push_back(resolver.resolved(OpKind::SwiGlu, runBinary, *a, resolver.setup().vector->name));
  return Status();
}

Status resolveAdd(OpResolver &resolver, std::vector<ResolvedOp> &ops) {
  BinaryArgs *a = nullptr;
  if (Status s = resolveBinary(resolver, a); !s)
    return s;
  a->kernel = resolver.setup().vector->add;
  ops.push_back(resolver.resolved(OpKind::Add, runBinary, *a, resolver.setup().vector->name));
  return Status();
}

} // namespace hetc
