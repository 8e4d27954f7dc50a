// The attributes the planning passes record and the plan emitter reads: their names, the ops
// they annotate, and small readers. Every planning decision is one of these attributes.
//
// On each LLM op:
//   hetc.layer        i64: decoder layer; absent on the embedding, the final norm and lm_head
//   hetc.sublayer     {index: i64 (position in the plan's sublayer list), kind: "attention" |
//                     "feed_forward"}; absent where hetc.layer is
//   hetc.device       {decode = "cpu" | "gpu", prefill = "cpu" | "gpu"}: where the op runs in
//                     each stage on the target (hetc-assign-devices)
//   hetc.cost_sublayer "qkv" | "qk_sv" | "out" | "fc1" | "fc2": the cost model's sublayers the op
//                     computes (an attention op both Q x K^T and S x V); absent outside the layers
//   hetc.buffers_in   array<i64>: activation buffer of each activation operand, operand order
//   hetc.buffers_out  array<i64>: activation buffer of the op's activation result
//   hetc.tasks        {count: i64, grain: i64}: independent tasks and units of work per task
//   hetc.residual     unit, on a linear: fused with the add after it (hetc-fuse-residual-add)
//   hetc.fused        unit, on that add (or swiglu): run by the linear, left out of the plan;
//                     on a rope: run by the attention reading its result
//   hetc.rope         unit, on an attention: rotates q and k itself (hetc-fuse-rope-into-attention)
//   hetc.swiglu       "gate" | "up", on a linear: computes that operand of the swiglu after it
//                     and applies the swiglu to its own columns (hetc-fuse-swiglu)
// On each hetc.weight and hetc.constant an LLM op reads (hetc-assign-devices):
//   hetc.tier         "gpu" | "ddr" | "cxl": where the target reads it from; "gpu" is a copy kept
//                     in GPU memory beside the host one (a weight several layers share, RoPE's
//                     inv_freq, is "gpu" when any of them keeps its weights there)
// On the module:
//   hetc.device_plan  (hetc-assign-devices) {target: str, gpu: str ("" for a CPU-only target),
//                     timing: "serial" | "overlapped", placement: "ddr" | "cxl" | "helm" |
//                     "all-cpu", resident_layers: i64, weight_tier, kv_tier, activation_tier:
//                     tier, tier_reason: str, prefill, decode: stage} where a stage is
//                     {batch, len: i64 (the operating point), predicted_ms: f64, reason: str,
//                     groups: [{name: str, first_layer, layers: i64, policy: "(p1,...,p6)",
//                     layer_ms: f64}] in layer order, table: [{len: i64, ranges: [{first_batch,
//                     last_batch: i64, policies: ["(p1,...,p6)"] one per group}]}]}; a policy's
//                     p_i = 1 runs sublayer i on the CPU (LIA), as hetc plan prints it
//   hetc.model        {architecture: "llama" | "opt", vocab, hidden, layers, heads, kv_heads,
//                     head_dim, intermediate: i64, rms_eps: f32 (the first norm's epsilon),
//                     tied_embeddings: bool}
//   hetc.bounds       {max_batch, max_seq, max_step_tokens: i64}
//   hetc.buffers      [{name, role: "hidden" | "scratch" | "logits", offset, rows, cols,
//                     row_stride: i64}]: the activation arena's buffers, in index order
//   hetc.activation_arena_size  i64 bytes
//   hetc.kv_cache     {dtype: "f32" | "bf16" | "int8", layers, slots, kv_heads, max_seq,
//                     head_dim, pos_stride, head_stride, slot_stride, layer_stride (elements),
//                     k_offset, v_offset, arena_size (bytes); int8 only: k_scale_offset,
//                     v_scale_offset (bytes), scale_head_stride, scale_slot_stride,
//                     scale_layer_stride (float32 scales, one per position row)}
#pragma once

#include "runtime/format/Format.h"

#include "hetc/Dialect/HetcDialect.h"
#include "hetc/compiler/DeviceAssignment.h"
#include "hetc/compiler/ModelShape.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace hetc::planning {

inline constexpr llvm::StringLiteral kLayer = "hetc.layer";
inline constexpr llvm::StringLiteral kSublayer = "hetc.sublayer";
inline constexpr llvm::StringLiteral kDevice = "hetc.device";
inline constexpr llvm::StringLiteral kBuffersIn = "hetc.buffers_in";
inline constexpr llvm::StringLiteral kBuffersOut = "hetc.buffers_out";
inline constexpr llvm::StringLiteral kTasks = "hetc.tasks";
// hetc-fuse-residual-add: on a linear, it also adds its second input buffer (the residual) and
// writes the fused add's buffer; on that add, the op is carried out by the linear before it.
inline constexpr llvm::StringLiteral kResidual = "hetc.residual";
inline constexpr llvm::StringLiteral kFused = "hetc.fused";
// hetc-fuse-swiglu: on a linear, which operand of the fused swiglu it computes; it reads the other
// operand as its second input buffer and writes the swiglu's buffer.
inline constexpr llvm::StringLiteral kSwiGlu = "hetc.swiglu";
inline constexpr llvm::StringLiteral kSwiGluGate = "gate";
inline constexpr llvm::StringLiteral kSwiGluUp = "up";
// hetc-fuse-rope-into-attention: on an attention, it rotates q and k (the fused ropes' work)
// before writing K and V into the KV cache.
inline constexpr llvm::StringLiteral kRope = "hetc.rope";
// On an LLM op raised by fitting a region's values (hetc-raise-norm): the fit, for --explain.
inline constexpr llvm::StringLiteral kFit = "hetc.fit";

inline constexpr llvm::StringLiteral kModel = "hetc.model";
inline constexpr llvm::StringLiteral kBounds = "hetc.bounds";
inline constexpr llvm::StringLiteral kBuffers = "hetc.buffers";
inline constexpr llvm::StringLiteral kActivationArenaSize = "hetc.activation_arena_size";
inline constexpr llvm::StringLiteral kKvCache = "hetc.kv_cache";

inline constexpr llvm::StringLiteral kCostSublayer = "hetc.cost_sublayer";
inline constexpr llvm::StringLiteral kTier = "hetc.tier";
inline constexpr llvm::StringLiteral kDevicePlan = "hetc.device_plan";

inline constexpr llvm::StringLiteral kCpuDevice = "cpu";
inline constexpr llvm::StringLiteral kGpuDevice = "gpu";
inline constexpr llvm::StringLiteral kPrefillStage = "prefill";
inline constexpr llvm::StringLiteral kDecodeStage = "decode";
// The attention op's hetc.cost_sublayer: it computes Q x K^T and S x V.
inline constexpr llvm::StringLiteral kAttentionCostSublayers = "qk_sv";

// Bits of the cost model's sublayers (bit i is LIA's sublayer i + 1: qkv, qk, sv, out, fc1, fc2)
// a hetc.cost_sublayer value names; none for any other text.
std::optional<unsigned> costSublayerBits(llvm::StringRef name);

// "gpu", "ddr" or "cxl": a tier as hetc.tier and hetc.device_plan record it; tierNamed reads one
// back (none for any other text).
llvm::StringRef tierAttrName(compiler::Tier tier);
std::optional<compiler::Tier> tierNamed(llvm::StringRef name);

// Activations are float32 in plans of this version.
inline constexpr int64_t kElementBytes = 4;

// The KV cache element type named "f32", "bf16" or "int8"; none for any other name. Its size,
// scales and layout are the plan format's (runtime/format/Format.h).
std::optional<plan::DTypeDef> kvDtypeFromName(llvm::StringRef name);

// "hidden", "scratch" or "logits": a buffer's role as hetc.buffers records it.
llvm::StringRef bufferRoleName(plan::BufferRoleDef role);

// The dictionaries described at the top, typed. `toAttr` writes one and `read` reads it back; a
// missing or malformed field is an error on the module or op naming the attribute and the field,
// and a missing module attribute an error saying that `user` needs it and which pass records it.

// The decoder family a model's ops describe, named by the plan's model.architecture: its norms
// and its feed-forward. Positions (RoPE, learned rows or both) are free in either.
enum class Architecture {
  Llama, // hetc.rms_norm; gated feed-forward: gate and up linears, hetc.swiglu, down
  Opt,   // hetc.layer_norm; fc1 -> hetc.activation -> fc2 (OPT, GPT-2)
};

// "llama" or "opt", as hetc.model and the plan record it.
llvm::StringRef architectureName(Architecture architecture);

// hetc.model, recorded by hetc-group-sublayers. Every dimension is positive and fits 32 bits.
struct ModelAttrs {
  Architecture architecture = Architecture::Llama;
  int64_t vocab = 0;
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kvHeads = 0;
  int64_t headDim = 0;
  int64_t intermediate = 0;
  float rmsEps = 0;
  bool tiedEmbeddings = false;

  mlir::DictionaryAttr toAttr(mlir::Builder &b) const;
  static mlir::FailureOr<ModelAttrs> read(mlir::ModuleOp module, llvm::StringRef user);
  // The cost model's view of the model; the caller names it and sets its context.
  compiler::ModelShape shape() const;
};

// hetc.bounds, recorded by hetc-plan-memory. All positive; max_batch and max_step_tokens fit 32
// bits.
struct BoundsAttrs {
  int64_t maxBatch = 0;
  int64_t maxSeq = 0;
  int64_t maxStepTokens = 0;

  mlir::DictionaryAttr toAttr(mlir::Builder &b) const;
  static mlir::FailureOr<BoundsAttrs> read(mlir::ModuleOp module, llvm::StringRef user);
};

// hetc.kv_cache, recorded by hetc-plan-memory: the plan format's layout (kvLayout) of a cache of
// these dimensions, all positive and all but max_seq within 32 bits. The layout's scale fields are
// recorded only for a dtype with row scales.
struct KvCacheAttrs {
  plan::DTypeDef dtype = plan::DTypeDef::F32;
  int64_t layers = 0;
  int64_t slots = 0;
  int64_t kvHeads = 0;
  int64_t maxSeq = 0;
  int64_t headDim = 0;
  KvLayout layout;

  mlir::DictionaryAttr toAttr(mlir::Builder &b) const;
  static mlir::FailureOr<KvCacheAttrs> read(mlir::ModuleOp module, llvm::StringRef user);
};

// An entry of hetc.buffers, recorded by hetc-plan-memory.
struct PlannedBuffer {
  std::string name;
  plan::BufferRoleDef role = plan::BufferRoleDef::Scratch;
  int64_t offset = 0; // bytes into the activation arena
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t rowStride = 0; // bytes

  mlir::DictionaryAttr toAttr(mlir::Builder &b) const;
};

// Every entry of the module's hetc.buffers, in index order.
mlir::FailureOr<llvm::SmallVector<PlannedBuffer>> readPlannedBuffers(mlir::ModuleOp module,
                                                                     llvm::StringRef user);

// hetc.tasks on an LLM op, recorded by hetc-partition-tasks: count fits 32 bits, both positive.
struct TaskAttrs {
  int64_t count = 0;
  int64_t grain = 0;

  mlir::DictionaryAttr toAttr(mlir::Builder &b) const;
  static mlir::FailureOr<TaskAttrs> read(mlir::Operation *op);
};

// hetc.sublayer on an op of a decoder layer, recorded by hetc-group-sublayers.
struct SublayerAttrs {
  int64_t index = 0; // non-negative
  plan::SublayerKindDef kind = plan::SublayerKindDef::Attention;

  mlir::DictionaryAttr toAttr(mlir::Builder &b) const;
  static mlir::FailureOr<SublayerAttrs> read(mlir::Operation *op);
};

// hetc.device_plan, recorded by hetc-assign-devices: what the plan keeps of a device assignment.
// Not recorded, so left empty by the reader: each span's weightsOnGpu (the weights' hetc.tier
// says it), each stage's notes, its table's maxBatch and each range's planner policy (its
// groupPolicies are recorded).
mlir::DictionaryAttr devicePlanAttr(mlir::Builder &b, const compiler::DeviceAssignment &a);
mlir::FailureOr<compiler::DeviceAssignment> readDevicePlan(mlir::ModuleOp module,
                                                           llvm::StringRef user);

// The positions a model with learned position rows (a hetc.embedding with positions) has rows
// for, max_positions - position_offset, and that offset; none without them.
struct LearnedPositions {
  int64_t tokens = 0;
  int64_t offset = 0;
};
std::optional<LearnedPositions> learnedPositions(mlir::func::FuncOp func);

// The function holding the model: @main, or the module's only function. Emits an error on the
// module and returns null when there is none.
mlir::func::FuncOp findModelFunction(mlir::ModuleOp module);

// The LLM ops of `func`, in execution order.
llvm::SmallVector<mlir::Operation *> collectLlmOps(mlir::func::FuncOp func);

// True when `value` is an activation: a result of an LLM op other than the KV cache an
// attention op returns.
bool isActivation(mlir::Value value);

// Byte range [begin, end) of buffer `index` in the activation arena; none when there is no such
// buffer or its end overflows.
std::optional<std::pair<int64_t, int64_t>> bufferByteRange(llvm::ArrayRef<PlannedBuffer> buffers,
                                                           int64_t index);

// True when two byte ranges share a byte.
inline bool byteRangesOverlap(std::pair<int64_t, int64_t> a, std::pair<int64_t, int64_t> b) {
  return a.first < b.second && b.first < a.second;
}

} // namespace hetc::planning
