// The executor: replays a verified plan's task collection, one step at a time.
//
// create() allocates everything a step needs, once: the activation arena, the KV arena (reserved
// address space, touched only where written), the step's token/position/slot arrays sized by the
// plan's bounds, and the ops resolved into plain structs with raw pointers. step() validates its
// input, fills those arrays and replays the ops; it never allocates.
#pragma once

#include "hetc/runtime/Kernels.h"
#include "hetc/runtime/Status.h"
#include "hetc/runtime/ThreadPool.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace hetc {

class Plan;

struct EngineOptions {
  unsigned threads = 0; // 0 = every core this process may run on
  bool pin = true;      // bind each thread to one core (falls back to unpinned if refused)
};

// One sequence's part of a step: `count` >= 1 tokens at positions start .. start+count-1 of
// batch slot `slot`. Positions before `start` must already be in the slot's KV cache.
struct StepSequence {
  uint32_t slot = 0;
  uint64_t start = 0;
  const int32_t *tokens = nullptr;
  uint32_t count = 0;
  bool wantLogits = false; // logits of this sequence's last token of the step
};

// An op of the plan resolved to what its kernel needs. Attention becomes two resolved ops, the
// KV append and the attention itself, so the barrier between them is the pool's ordinary one.
struct ResolvedOp {
  enum class Kind : uint8_t {
    Embedding,
    RmsNorm,
    Linear,
    Rope,
    KvAppend,
    Attention,
    SwiGlu,
    Add,
    LmHead,
  };
  // An activation buffer: row t at data + t * stride (elements), `cols` elements used.
  struct Rows {
    float *data = nullptr;
    size_t stride = 0;
    size_t cols = 0;
  };

  Kind kind = Kind::Embedding;
  uint32_t planOp = 0; // index of the op in the plan, for messages
  Rows in[3];          // inputs in the plan's order (a Rope's x is in[0] and out)
  Rows out;
  const float *weight = nullptr;     // table, gamma, W [N, K] or inv_freq
  size_t weightRows = 0;             // N of a Linear or LmHead, vocab of an Embedding
  float eps = 0.0f;                  // RmsNorm
  size_t heads = 0;                  // Rope
  size_t headDim = 0;                // Rope
  kernels::AttentionShape attention; // KvAppend, Attention
  // Linear and LmHead: columns [i * grain, (i+1) * grain) form task i of taskCount.
  // Row-wise ops: rows [i * grain, (i+1) * grain) form task i of ceil(T / grain).
  size_t taskCount = 1;
  size_t taskGrain = 1;
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
  Status step(const StepSequence *sequences, size_t count);

  // Logits [vocab] of sequence `sequenceIndexInStep` of the last step; meaningful only for a
  // sequence that asked for them. Null past max_batch.
  const float *logits(size_t sequenceIndexInStep) const;

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

private:
  explicit Engine(std::shared_ptr<const Plan> plan);
  Status resolve();
  static void runPhase(void *engine, size_t phase, unsigned thread, unsigned threadCount);
  void runOp(const ResolvedOp &op, unsigned thread, unsigned threadCount) const;
  size_t attentionItemBoundary(size_t heads, unsigned part, unsigned parts) const;

  std::shared_ptr<const Plan> plan_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<ResolvedOp> ops_;

  uint32_t maxBatch_ = 0;
  uint64_t maxSeq_ = 0;
  uint32_t maxStepTokens_ = 0;
  uint32_t vocab_ = 0;

  // Arenas, owned: activations from aligned_alloc, KV from an anonymous mapping.
  float *activations_ = nullptr;
  size_t activationBytes_ = 0;
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
  // rowWorkBefore_[t] = sum over rows u < t of (position_u + 1): attention work, for splitting.
  std::unique_ptr<uint64_t[]> rowWorkBefore_; // [max_step_tokens + 1]
  size_t logitsCount_ = 0;
  std::unique_ptr<uint32_t[]> logitsSourceRows_;    // [max_batch] last row of each asking sequence
  std::unique_ptr<uint32_t[]> logitsOutputRows_;    // [max_batch] its index within the step
  std::unique_ptr<uint64_t[]> slotCachedPositions_; // [max_batch]
  std::unique_ptr<uint64_t[]> slotSeenInStep_;      // [max_batch] step number, to catch repeats
  uint64_t stepNumber_ = 0;
};

} // namespace hetc
