// The executor: replays a verified plan's task collection, one step at a time.
//
// create() allocates everything a step needs, once: the activation arena, the KV arena (reserved
// address space, touched only where written), the step's token/position/slot arrays sized by the
// plan's bounds, and the ops resolved into plain structs with raw pointers. step() validates its
// input, fills those arrays and replays the ops; it never allocates.
#pragma once

#include "hetc/runtime/Attention.h"
#include "hetc/runtime/Kernels.h"
#include "hetc/runtime/NumaBinding.h"
#include "hetc/runtime/PolicyTable.h"
#include "hetc/runtime/Session.h"
#include "hetc/runtime/Status.h"
#include "hetc/runtime/ThreadPool.h"
#include "hetc/runtime/VectorKernels.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hetc {

class Plan;
namespace codegen {
class LinearKernel;
} // namespace codegen

struct EngineOptions {
  unsigned threads = 0; // 0 = every core this process may run on
  bool pin = true;      // bind each thread to one core (falls back to unpinned if refused)
  bool profile = false; // record each op's run and barrier wait time per thread (profile())
  // The portable row-wise and attention kernels even where the host runs faster ones.
  bool portableKernels = false;
};

// What a step's LmHead leaves for the sequences that ask: their whole logits rows, or only the
// index of each row's largest logit (no logits row is written).
enum class StepOutput : uint8_t { Logits, Argmax };

// One sequence's part of a step: `count` >= 1 tokens at positions start .. start+count-1 of
// batch slot `slot`. Positions before `start` must already be in the slot's KV cache.
struct StepSequence {
  uint32_t slot = 0;
  uint64_t start = 0;
  const int32_t *tokens = nullptr;
  uint32_t count = 0;
  bool wantLogits = false; // logits of this sequence's last token of the step
};

// An op of the plan resolved to what its kernel needs. Attention becomes three resolved ops: the
// KV append, the attention units (chunks of positions) and the merge of the chunks of rows split
// across threads, so the barriers between them are the pool's ordinary ones.
struct ResolvedOp {
  enum class Kind : uint8_t {
    Embedding,
    RmsNorm,
    Linear,
    Rope,
    KvAppend,
    Attention,
    AttentionMerge,
    SwiGlu,
    Add,
    LmHead,
    // x rows to bf16 pairs for the linear kernels that read them, once per input (not a plan
    // op: inserted before the first such Linear reading a buffer, or before a BF16 LmHead).
    ConvertRowsBf16,
  };
  // An activation buffer: row t at data + t * stride (elements), `cols` elements used.
  struct Rows {
    float *data = nullptr;
    size_t stride = 0;
    size_t cols = 0;
  };

  Kind kind = Kind::Embedding;
  uint32_t planOp = 0; // index of the op in the plan, for messages
  // Inputs in plan order (Rope: x is in[0] and out; Linear: residual in[1]); KvAppend: k, v and,
  // when it rotates q and k (weight = inv_freq), q.
  Rows in[3];
  Rows out;
  const float *weight = nullptr; // table, gamma, W [N, K] or inv_freq (f32)
  // Linear, LmHead: a LinearBf16N16K2 weight, run by `linear`; Embedding: a tied table in that
  // layout (weight is then null). ConvertRowsBf16: `linear` is the kernel whose layout it writes.
  const uint16_t *weightBf16 = nullptr;
  const codegen::LinearKernel *linear = nullptr;
  // ConvertRowsBf16 writes, and a Linear or LmHead whose kernel reads bf16 rows reads, here.
  uint32_t *bf16Rows = nullptr;
  bool lastRowsOnly = false; // ConvertRowsBf16 for an LmHead: the step's logits rows, gathered
  size_t weightRows = 0;     // N of a Linear or LmHead, vocab of an Embedding
  float eps = 0.0f;          // RmsNorm
  size_t heads = 0;          // Rope
  size_t headDim = 0;        // Rope
  kernels::AttentionShape attention; // KvAppend, Attention, AttentionMerge
  // Linear and LmHead: columns [i * grain, (i+1) * grain) form task i of taskCount.
  // Row-wise ops: rows [i * grain, (i+1) * grain) form task i of ceil(T / grain).
  size_t taskCount = 1;
  size_t taskGrain = 1;
  // Linear: the operand of a fused SwiGlu the op computes; in[1] is then the other operand.
  enum class SwiGluRole : uint8_t { None, Gate, Up };
  SwiGluRole swiGlu = SwiGluRole::None;
  const char *kernel = "portable-f32"; // the kernel that runs the op, as kernelSummary() names it
};

// "Linear", "KvAppend", ...: a resolved op's kind as reports name it.
const char *opKindName(ResolvedOp::Kind kind);

// How many ops of one kind run one kernel.
struct KernelUse {
  std::string opKind;
  std::string kernel;
  size_t count = 0;
};

class Engine {
public:
  static Result<std::unique_ptr<Engine>> create(std::shared_ptr<const Plan> plan,
                                                const EngineOptions &options = {});
  ~Engine();
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  // Runs one step over `count` sequences whose tokens are packed in order into rows 0..T-1.
  // Each slot may appear once. Fails, changing nothing, when a limit of the plan is exceeded.
  // `output` says what the sequences asking for logits get: logits() or argmax().
  Status step(const StepSequence *sequences, size_t count, StepOutput output = StepOutput::Logits);

  // Logits [vocab] of sequence `sequenceIndexInStep` of the last step; meaningful only for a
  // sequence that asked for them. Null past max_batch.
  const float *logits(size_t sequenceIndexInStep) const;

  // After a StepOutput::Argmax step: the id of the largest logit of sequence
  // `sequenceIndexInStep` (the first on ties, as torch.argmax), or -1 if it did not ask.
  int32_t argmax(size_t sequenceIndexInStep) const;

  const Plan &plan() const { return *plan_; }
  uint32_t maxBatch() const { return maxBatch_; }
  uint64_t maxSeq() const { return maxSeq_; }
  uint32_t maxStepTokens() const { return maxStepTokens_; }
  uint32_t vocab() const { return vocab_; }
  unsigned threads() const { return pool_->threadCount(); }
  unsigned pinnedThreads() const { return pool_->pinnedThreads(); }
  size_t activationArenaBytes() const { return activationBytes_; }
  size_t kvArenaBytes() const { return kvBytes_; }
  // Positions of `slot` held in the KV cache (a sequence in that slot may start at most here).
  uint64_t cachedPositions(uint32_t slot) const { return slotCachedPositions_[slot]; }
  const std::vector<ResolvedOp> &resolvedOps() const { return ops_; }
  // The row-wise and attention kernels picked at create() ("avx512-bf16", "avx512-f32",
  // "portable-f32").
  const kernels::VectorKernels &vectorKernels() const { return *vector_; }
  // Positions per attention chunk: the fixed boundaries of the attention's reduction order.
  size_t attentionChunkPositions() const { return attentionSplit_.chunkPositions(); }

  // Where the arenas' tiers were mapped on this host's NUMA nodes and what was bound (create()).
  const MemoryBinding &memoryBinding() const { return memoryBinding_; }
  // The KV arena's first byte (null for a plan without a KV cache), for checking its placement.
  const void *kvArena() const { return kvArena_; }
  const void *activationArena() const { return activations_; }

  // The plan's policy tables, copied at create() for lookups by (stage, batch, length).
  const PolicyTables &policyTables() const { return policyTables_; }

  // The kernels the ops run, one entry per (op kind, kernel) in the order first met.
  std::vector<KernelUse> kernelSummary() const;
  // Phase i of the profile is resolvedOps()[i]; null unless EngineOptions::profile was set.
  const PhaseProfile *profile() const { return profile_.get(); }
  void resetProfile();
  // The engine's threads, for measurements that must use the same threads as the kernels.
  ThreadPool &threadPool() { return *pool_; }
  // Benchmarks only: fills positions 0..positions-1 of `slot` in every layer's K and V with
  // deterministic pseudo-random values in [-1, 1) as if they had been prefilled, and marks them
  // cached. Nothing is computed: logits after this are meaningless, the work is not.
  Status fillSyntheticKv(uint32_t slot, uint64_t positions, uint64_t seed);

  // Sessions (Session.h, Session.cpp): writes positions 0..cachedPositions(slot)-1 of `slot`
  // (every layer, K and V) and `history`, the sequence's token ids (at least one per position),
  // to `path` atomically: a temporary file in the same directory, renamed over `path`.
  Status saveSession(const std::string &path, uint32_t slot,
                     const std::vector<int32_t> &history) const;
  // Loads a file saved from a plan of the same model (sessionFingerprint) into `slot`, any slot,
  // and returns its header and history; cachedPositions(slot) becomes its positions. Every
  // failure is one message; one found after the slot's rows were written (a checksum mismatch)
  // leaves the slot with no cached positions.
  Result<SessionInfo> restoreSession(const std::string &path, uint32_t slot);

private:
  explicit Engine(std::shared_ptr<const Plan> plan);
  Status resolve();
  static void runPhase(void *engine, size_t phase, unsigned thread, unsigned threadCount);
  void runOp(const ResolvedOp &op, unsigned thread, unsigned threadCount) const;
  void applySwiGlu(const ResolvedOp &op, size_t rows, size_t begin, size_t end) const;
  Status allocateAttentionStates();
  Status allocateArgmax();
  // Byte address of that row's scale in an INT8 cache (the head's next positions' follow it).
  uint8_t *kvScale(bool values, uint64_t layer, uint64_t slot, uint64_t head,
                   uint64_t position) const;
  void runLmHeadArgmax(const ResolvedOp &op, unsigned thread, size_t firstTask,
                       size_t lastTask) const;
  void mergeArgmax();

  std::shared_ptr<const Plan> plan_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<PhaseProfile> profile_; // sized for ops_ at create() when asked for
  std::vector<ResolvedOp> ops_;
  PolicyTables policyTables_;
  MemoryBinding memoryBinding_;
  // Linear kernels, generated at create() (one per K and epilogue), and the bf16 activation rows
  // they read: [max_step_tokens] rows of the widest converted input.
  std::vector<std::unique_ptr<codegen::LinearKernel>> linearKernels_;
  uint32_t *bf16Rows_ = nullptr;

  uint32_t maxBatch_ = 0;
  uint64_t maxSeq_ = 0;
  uint32_t maxStepTokens_ = 0;
  uint32_t vocab_ = 0;

  // Arenas, owned: anonymous mappings, bound to their tier's NUMA nodes before the first touch.
  float *activations_ = nullptr;
  size_t activationBytes_ = 0;
  size_t activationMapBytes_ = 0; // activationBytes_ rounded up to pages
  void *kvArena_ = nullptr;
  size_t kvBytes_ = 0;
  kernels::KvCacheView kvCache_;
  const float *logitsData_ = nullptr;
  size_t logitsStride_ = 0;

  // Per-step metadata, sized by the bounds in create() and only overwritten by step().
  size_t stepTokens_ = 0;                    // T
  std::unique_ptr<int32_t[]> rowTokens_;     // [max_step_tokens]
  std::unique_ptr<uint32_t[]> rowPositions_; // [max_step_tokens]
  std::unique_ptr<uint32_t[]> rowSlots_;     // [max_step_tokens]
  size_t logitsCount_ = 0;
  std::unique_ptr<uint32_t[]> logitsSourceRows_;    // [max_batch] last row of each asking sequence
  std::unique_ptr<uint32_t[]> logitsOutputRows_;    // [max_batch] its index within the step
  std::unique_ptr<uint64_t[]> slotCachedPositions_; // [max_batch]
  std::unique_ptr<uint64_t[]> slotSeenInStep_;      // [max_batch] step number, to catch repeats
  uint64_t stepNumber_ = 0;

  const kernels::VectorKernels *vector_ = nullptr;
  // Attention: the step's cut into units, the chunk states of split rows (capacity from the
  // bounds: min(max_step_tokens, max_batch) rows x kv_heads x ceil(max_seq / chunk) states of
  // group x (head_dim + 2) floats) and two states per thread for rows run whole.
  kernels::AttentionSplit attentionSplit_;
  // Attention units handed out so far in the current attention phase (reset by the KV append
  // phase before it): threads claim runs of units while any are left.
  mutable std::atomic<size_t> attentionUnitsClaimed_{0};
  float *attentionStates_ = nullptr;
  float *attentionWork_ = nullptr;
  size_t attentionStateFloats_ = 0; // the largest state of any attention op

  // Argmax steps: each thread's LmHead task writes its logits into the thread's window
  // ([max_batch, task grain] floats) and leaves (max, index) per row in taskBest*_ [task, row];
  // step() merges them in task order.
  StepOutput stepOutput_ = StepOutput::Logits;
  float *argmaxWindows_ = nullptr;
  size_t argmaxWindowFloats_ = 0;
  size_t lmHeadTasks_ = 0;
  std::unique_ptr<uint32_t[]> identityRows_; // [max_batch] 0, 1, 2, ...
  std::unique_ptr<float[]> taskBestValues_;  // [lm_head tasks * max_batch]
  std::unique_ptr<uint32_t[]> taskBestIndices_;
  std::unique_ptr<int32_t[]> stepArgmax_; // [max_batch]
};

} // namespace hetc
