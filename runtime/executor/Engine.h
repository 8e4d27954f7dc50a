// The executor: replays a verified plan's task collection, one step at a time.
//
// create() allocates everything a step needs, once: the activation arena, the KV arena (reserved
// address space, touched only where written), the step's token/position/slot arrays sized by the
// plan's bounds, and the ops resolved into plain structs with raw pointers. step() validates its
// input, fills those arrays and replays the ops; it never allocates.
#pragma once

#include "runtime/executor/Op.h"
#include "runtime/executor/PolicyTable.h"
#include "runtime/executor/ThreadPool.h"
#include "runtime/executor/ops/AttentionOps.h"
#include "runtime/format/Status.h"
#include "runtime/kv/KvCache.h"
#include "runtime/platform/NumaBinding.h"

#include "codegen/cpu/vector/VectorKernels.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hetc {

class Plan;
struct LmHeadArgs;
class DeviceSteps;
namespace codegen {
class LinearKernel;
} // namespace codegen
namespace device {
class Device;
} // namespace device

struct EngineOptions {
  unsigned threads = 0; // 0 = every core this process may run on
  // Bind each worker thread to one core (falls back to unpinned if refused). The caller's own
  // thread, which runs share 0 of every phase, is pinned only when pinCaller is also set: a
  // library must not move its caller's thread unless asked (hetc run and bench ask).
  bool pin = true;
  bool pinCaller = false;
  bool profile = false; // record each op's run and barrier wait time per thread (profile())
  // The portable row-wise and attention kernels even where the host runs faster ones.
  bool portableKernels = false;
  // Run every op of each step on this device (DeviceSteps.h) rather than on the CPU's threads;
  // null: the CPU. deviceGraphs: replay the device's captured graphs (else enqueue each launch).
  std::shared_ptr<device::Device> device;
  bool deviceGraphs = true;
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

// Ops that run in one phase of the pool, between two barriers: consecutive ops none of which
// reads what another writes (the q, k and v projections; gate and up, whose fused swiglu reads
// the other's columns that the same thread wrote). Each thread runs its share of each in order.
struct Phase {
  uint32_t firstOp = 0; // into resolvedOps()
  uint32_t opCount = 1;
};

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
  size_t kvArenaBytes() const { return kv_.bytes(); }
  // Positions of `slot` held in the KV cache (a sequence in that slot may start at most here).
  uint64_t cachedPositions(uint32_t slot) const { return kv_.cachedPositions(slot); }
  // The device the steps run on (EngineOptions::device), or null: the CPU.
  const DeviceSteps *deviceSteps() const { return device_.get(); }
  // The KV cache the steps write: for session files (runtime/kv/Session.h) and measurements. With
  // a device it holds only the cached position counts: the keys and values are on the device.
  KvCache &kvCache() { return kv_; }
  const KvCache &kvCache() const { return kv_; }
  const std::vector<ResolvedOp> &resolvedOps() const { return ops_; }
  // The phases a step runs, in order, with a barrier after each.
  const std::vector<Phase> &phases() const { return phases_; }
  // The row-wise and attention kernels picked at create() ("avx512-bf16", "avx512-f32",
  // "portable-f32").
  const kernels::VectorKernels &vectorKernels() const { return *vector_; }
  // Positions per attention chunk: the fixed boundaries of the attention's reduction order.
  size_t attentionChunkPositions() const { return kernels::kAttentionChunkPositions; }

  // Where the arenas' tiers were mapped on this host's NUMA nodes and what was bound (create()).
  const MemoryBinding &memoryBinding() const { return memoryBinding_; }
  // The KV arena's first byte (null for a plan without a KV cache), for checking its placement.
  const void *kvArena() const { return kv_.data(); }
  const void *activationArena() const { return activations_; }

  // The plan's policy tables, copied at create() for lookups by (stage, batch, length).
  const PolicyTables &policyTables() const { return policyTables_; }

  // The kernels the ops run, one entry per (op kind, kernel) in the order first met.
  std::vector<KernelUse> kernelSummary() const;
  // Phase i of the profile is phases()[i]; null unless EngineOptions::profile was set.
  const PhaseProfile *profile() const { return profile_.get(); }
  void resetProfile();
  // The engine's threads, for measurements that must use the same threads as the kernels.
  ThreadPool &threadPool() { return *pool_; }
  // Benchmarks only: writes positions 0..positions-1 of `slot` in every layer's K and V with
  // deterministic pseudo-random values in [-1, 1), as a prefill would have, on the engine's
  // threads outside the profile (then copied to the device's cache, with a device), and marks
  // them cached. Logits computed after this are
  // meaningless; the work is not.
  Status fillSyntheticKv(uint32_t slot, uint64_t positions, uint64_t seed);

private:
  explicit Engine(std::shared_ptr<const Plan> plan);
  Status resolve(unsigned threads);
  Status allocateAttentionScratch();
  Status uploadSyntheticKv(uint32_t slot, uint64_t positions);
  void groupPhases();
  static void runPhase(void *engine, size_t phase, unsigned thread, unsigned threadCount);

  std::shared_ptr<const Plan> plan_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<PhaseProfile> profile_; // sized for phases_ at create() when asked for
  std::vector<ResolvedOp> ops_;
  std::vector<Phase> phases_;
  // The ops' argument blocks and the linear kernels generated for them (one per K and epilogue).
  std::vector<std::unique_ptr<OpArgs>> args_;
  std::vector<std::unique_ptr<codegen::LinearKernel>> linearKernels_;
  const LmHeadArgs *lmHead_ = nullptr;
  // The bf16 or int8 activation rows the linear kernels read: [max_step_tokens] rows of the
  // widest converted input (OpResolver::needConvertedRows).
  void *convertedRows_ = nullptr;
  PolicyTables policyTables_;
  MemoryBinding memoryBinding_;

  uint32_t maxBatch_ = 0;
  uint64_t maxSeq_ = 0;
  uint32_t maxStepTokens_ = 0;
  uint32_t vocab_ = 0;

  // Arenas, owned: anonymous mappings, bound to their tier's NUMA nodes before the first touch.
  float *activations_ = nullptr;
  size_t activationBytes_ = 0;
  size_t activationMapBytes_ = 0; // activationBytes_ rounded up to pages
  KvCache kv_;

  // Per-step metadata, sized by the bounds in create() and only overwritten by step(); step_
  // points at them and is what every op reads (on lines of its own: every thread reads it in
  // every phase).
  alignas(64) StepRows step_;
  alignas(64) std::unique_ptr<int32_t[]> rowTokens_; // [max_step_tokens]
  std::unique_ptr<uint32_t[]> rowPositions_;         // [max_step_tokens]
  std::unique_ptr<uint32_t[]> rowSlots_;             // [max_step_tokens]
  std::unique_ptr<uint32_t[]> logitsSourceRows_;     // [max_batch] last row of each asking sequence
  std::unique_ptr<uint32_t[]> logitsOutputRows_;     // [max_batch] its index within the step
  std::unique_ptr<uint64_t[]> slotSeenInStep_;       // [max_batch] step number, to catch repeats
  std::unique_ptr<int32_t[]> stepArgmax_;            // [max_batch]
  uint64_t stepNumber_ = 0;

  const kernels::VectorKernels *vector_ = nullptr;
  AttentionScratch attention_;
  std::unique_ptr<DeviceSteps> device_;
};

} // namespace hetc
