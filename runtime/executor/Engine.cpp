#include "runtime/executor/Engine.h"

#include "runtime/device/Device.h"
#include "runtime/executor/DeviceSteps.h"

#include "runtime/executor/OpResolver.h"
#include "runtime/executor/ops/LinearOps.h"
#include "runtime/format/Plan.h"
#include "runtime/platform/CpuFeatures.h"
#include "runtime/platform/HostMemory.h"

#include "codegen/cpu/linear/Linear.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace hetc {
namespace {

using plan::DTypeDef;

std::string str(uint64_t value) { return std::to_string(value); }

// Whole MiB, rounded up, so a size never reads as 0.
std::string mib(uint64_t bytes) { return str(bytes / (1u << 20) + (bytes % (1u << 20) != 0)); }

size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

} // namespace

Engine::Engine(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {}

Engine::~Engine() {
  pool_.reset(); // joins the workers before the memory they touch goes away
  if (activations_)
    munmap(activations_, activationMapBytes_);
  std::free(convertedRows_);
}

Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<const Plan> plan,
                                               const EngineOptions &options) {
  if (!plan)
    return Status::error("no plan given to the engine");
  // The format does not depend on the host; running it does.
  const uint64_t missing = plan->def().required_cpu_features() & ~hostCpuFeatures();
  if (missing)
    return Status::error("the plan needs CPU features " + describeCpuFeatures(missing) +
                         " that this host lacks (host has " +
                         describeCpuFeatures(hostCpuFeatures()) + ")");
  std::unique_ptr<Engine> engine(new Engine(std::move(plan)));
  // The portable option reaches the row-wise and attention set only (EngineOptions says so).
  engine->vector_ = &kernels::vectorKernelsFor(options.portableKernels ? 0 : hostCpuFeatures());
  Result<std::unique_ptr<ThreadPool>> pool =
      ThreadPool::create(options.threads, options.pin, options.pinCaller);
  if (!pool)
    return pool.status();
  engine->pool_ = std::move(pool.value());
  if (Status s = engine->resolve(engine->pool_->threadCount()); !s)
    return s;
  if (Status s = engine->allocateAttentionScratch(); !s)
    return s;
  engine->groupPhases();
  engine->policyTables_ = PolicyTables::fromPlan(*engine->plan_);
  if (options.device) {
    Result<std::unique_ptr<DeviceSteps>> steps =
        DeviceSteps::create(options.device, *engine->plan_, {options.deviceGraphs});
    if (!steps)
      return steps.status();
    engine->device_ = std::move(steps.value());
  }
  if (options.profile) {
    engine->profile_ =
        std::make_unique<PhaseProfile>(engine->phases_.size(), engine->pool_->threadCount());
    engine->pool_->setProfile(engine->profile_.get());
  }
  return Result<std::unique_ptr<Engine>>(std::move(engine));
}

Status Engine::resolve(unsigned threads) {
  const plan::PlanDef &def = plan_->def();
  if (!def.bounds() || !def.model() || !def.kv_cache() || !def.buffers() || !def.tensors())
    return Status::error("the plan lacks its bounds, model, KV cache, buffers or tensors");
  const plan::BoundsDef *bounds = def.bounds();
  maxBatch_ = bounds->max_batch();
  maxSeq_ = bounds->max_seq();
  maxStepTokens_ = bounds->max_step_tokens();
  vocab_ = def.model()->vocab();
  if (maxBatch_ == 0 || maxSeq_ == 0 || maxStepTokens_ == 0)
    return Status::error("the plan's bounds must all be positive (max_batch " + str(maxBatch_) +
                         ", max_seq " + str(maxSeq_) + ", max_step_tokens " + str(maxStepTokens_) +
                         ")");
  // Positions are kept as 32-bit integers in the step arrays.
  if (maxSeq_ > UINT32_MAX)
    return Status::error("the plan's --max-seq " + str(maxSeq_) + " exceeds " + str(UINT32_MAX));

  // A plan compiled for a larger machine is refused here, not killed for memory as its arenas
  // fill. The weights are pages of the plan file, which the kernel can evict, and do not count.
  // MemAvailable is the host's: a cgroup's lower limit is not read.
  const uint64_t kvBytes = def.kv_cache()->arena_size();
  const uint64_t activationBytes = def.activation_arena_size();
  if (std::optional<uint64_t> available = availableMemoryBytes();
      available && (kvBytes > *available || activationBytes > *available - kvBytes))
    return Status::error("the plan's KV cache (" + mib(kvBytes) + " MiB) and activations (" +
                         mib(activationBytes) + " MiB) need more than the " + mib(*available) +
                         " MiB this host has available; compile it with a smaller --max-seq or "
                         "--max-batch");

  // The plan's tiers on this host's nodes: the threads run on the CPUs this process may use.
  memoryBinding_.topology = readNumaTopology(allowedCpus());
  memoryBinding_.planTarget = def.target() ? def.target()->str() : "";
  auto placeArena = [this](const char *what, plan::TierDef tier) -> ArenaBinding & {
    ArenaBinding arena;
    arena.what = what;
    arena.tier = tier;
    arena.target = nodesForTier(memoryBinding_.topology, tier);
    memoryBinding_.arenas.push_back(std::move(arena));
    return memoryBinding_.arenas.back();
  };

  // Activation arena: an anonymous mapping (page aligned, so kBufferAlignment holds), bound
  // and then zeroed, which places its pages and leaves nothing indeterminate to read.
  activationBytes_ = def.activation_arena_size();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  activationMapBytes_ = std::max(page, ceilDiv(activationBytes_, page) * page);
  void *activationMapping = mmap(nullptr, activationMapBytes_, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (activationMapping == MAP_FAILED)
    return Status::error("cannot allocate the activation arena of " + str(activationBytes_) +
                         " bytes: " + std::strerror(errno));
  activations_ = static_cast<float *>(activationMapping);
  bindArena(activations_, activationMapBytes_, memoryBinding_.topology,
            placeArena("activations", def.activation_tier()));
  std::memset(activations_, 0, activationMapBytes_);

  // The KV cache (runtime/kv/KvCache).
  if (Status s = kv_.map(*def.kv_cache(), memoryBinding_.topology,
                         placeArena("KV cache", def.kv_cache()->tier()));
      !s)
    return s;

  // The weights are the plan file's shared mapping: mbind does not place page-cache pages, so
  // their tiers are mapped and said, not bound.
  for (plan::TierDef tier : weightTiers(*plan_))
    placeArena("weights", tier).outcome = "not bound: pages of the plan file";

  // Step metadata, sized by the bounds once.
  rowTokens_.reset(new int32_t[maxStepTokens_]());
  rowPositions_.reset(new uint32_t[maxStepTokens_]());
  rowSlots_.reset(new uint32_t[maxStepTokens_]());
  logitsSourceRows_.reset(new uint32_t[maxBatch_]());
  logitsOutputRows_.reset(new uint32_t[maxBatch_]());
  slotSeenInStep_.reset(new uint64_t[maxBatch_]());

  stepArgmax_.reset(new int32_t[maxBatch_]);
  std::fill(stepArgmax_.get(), stepArgmax_.get() + maxBatch_, -1);
  step_.tokens = rowTokens_.get();
  step_.positions = rowPositions_.get();
  step_.slots = rowSlots_.get();
  step_.logitsSourceRows = logitsSourceRows_.get();
  step_.logitsOutputRows = logitsOutputRows_.get();

  // Ops: each plan op through its entry in the op table (OpResolver.cpp).
  const auto *planOps = def.ops();
  if (!planOps || planOps->size() == 0)
    return Status::error("the plan has no ops");
  OpResolver::Setup setup;
  setup.plan = plan_.get();
  setup.arena = activations_;
  setup.maxStepTokens = maxStepTokens_;
  setup.maxBatch = maxBatch_;
  setup.threads = threads;
  setup.vector = vector_;
  setup.cpuFeatures = hostCpuFeatures();
  setup.kvCache = &kv_.view();
  setup.rowSlots = rowSlots_.get();
  setup.attention = &attention_;
  OpResolver resolver(setup);
  ops_.reserve(planOps->size() * 3);
  for (uint32_t i = 0; i < planOps->size(); ++i)
    if (Status s = resolver.resolve(i, ops_); !s)
      return s;
  // The loader checked that the LmHead writes the logits buffer; step() reads one.
  const size_t lmHeads = std::count_if(
      ops_.begin(), ops_.end(), [](const ResolvedOp &op) { return op.kind == OpKind::LmHead; });
  if (lmHeads != 1)
    return Status::error("the plan has " + str(lmHeads) + " LmHead ops; the engine needs one");
  lmHead_ = resolver.lmHead();

  // The converted rows the linear kernels read: allocated once, shared by every conversion.
  if (resolver.convertedRowsBytes() > 0) {
    const size_t bytes =
        ceilDiv(resolver.convertedRowsBytes(), kBufferAlignment) * kBufferAlignment;
    convertedRows_ = std::aligned_alloc(kBufferAlignment, bytes);
    if (!convertedRows_)
      return Status::error("cannot allocate " + str(bytes) + " bytes of converted activation rows");
    std::memset(convertedRows_, 0, bytes);
    resolver.setConvertedRows(convertedRows_);
  }
  args_ = resolver.takeArgs();
  linearKernels_ = resolver.takeLinearKernels();
  return Status();
}

// The scratch of the attention's two phases, sized from the bounds. Only rows split across
// threads keep chunk states (one thread runs every row whole), and at most one row per sequence
// is split in a step of max_batch sequences' decode tokens; rows beyond the capacity run whole,
// with the same result.
Status Engine::allocateAttentionScratch() {
  const plan::KvCacheDef *kv = plan_->def().kv_cache();
  attention_.stateFloats = 0;
  for (const plan::OpDef *op : *plan_->def().ops())
    if (const auto *p = op->params_as_AttentionParamsDef()) {
      attention_.stateFloats = std::max<size_t>(
          attention_.stateFloats,
          kernels::attentionStateFloats(p->heads() / p->kv_heads(), p->head_dim()));
    }
  const size_t kvHeads = std::max<size_t>(kv->kv_heads(), 1);
  const size_t splitRows =
      pool_->threadCount() > 1 ? std::min<size_t>(maxStepTokens_, maxBatch_) : 0;
  const unsigned __int128 capacity = static_cast<unsigned __int128>(splitRows) * kvHeads *
                                     ceilDiv(maxSeq_, kernels::kAttentionChunkPositions);
  const unsigned __int128 stateBytes = capacity * attention_.stateFloats * sizeof(float);
  if (stateBytes > (static_cast<unsigned __int128>(1) << 40))
    return Status::error("the attention chunk states for --max-batch " + str(maxBatch_) +
                         " and --max-seq " + str(maxSeq_) + " would take more than 1 TiB");
  // The cuts the attention ops asked for when they resolved. Their split rows share one scratch
  // of states: the attention ops run one at a time.
  for (const std::unique_ptr<AttentionScratch::Cut> &cut : attention_.cuts)
    cut->split.reserve(maxStepTokens_, kvHeads, kernels::kAttentionChunkPositions,
                       attention_.stateFloats > 0 ? static_cast<size_t>(capacity) : 0);
  if (attention_.stateFloats == 0)
    return Status();
  auto allocate = [](size_t bytes) {
    return static_cast<float *>(
        std::aligned_alloc(kBufferAlignment, std::max<size_t>(ceilDiv(bytes, kBufferAlignment), 1) *
                                                 kBufferAlignment));
  };
  if (capacity > 0 && !(attention_.states = allocate(static_cast<size_t>(stateBytes))))
    return Status::error("cannot allocate " + str(static_cast<uint64_t>(stateBytes)) +
                         " bytes of attention chunk states");
  const size_t workBytes = pool_->threadCount() * 2 * attention_.stateFloats * sizeof(float);
  if (!(attention_.work = allocate(workBytes)))
    return Status::error("cannot allocate " + str(workBytes) + " bytes of attention states");
  return Status();
}

// Consecutive ops share a phase when no barrier between them is needed: only linears (their
// tasks split output columns), none writing bytes another of the phase reads or writes. The one
// read of a write allowed is a fused swiglu's read of the other operand's columns, when both
// linears split their columns alike, so each thread reads exactly the columns it wrote.
void Engine::groupPhases() {
  const plan::PlanDef &def = plan_->def();
  auto overlaps = [&](int64_t a, int64_t b) {
    return a >= 0 && b >= 0 &&
           buffersOverlap(*def.buffers()->Get(static_cast<uint32_t>(a)),
                          *def.buffers()->Get(static_cast<uint32_t>(b)));
  };

  auto independent = [&](const ResolvedOp &earlier, const ResolvedOp &later) {
    if (earlier.kind != OpKind::Linear || later.kind != OpKind::Linear)
      return false;
    if (overlaps(later.writes, earlier.writes))
      return false;
    for (int64_t read : earlier.reads)
      if (overlaps(later.writes, read))
        return false;
    for (size_t i = 0; i < 3; ++i) {
      if (!overlaps(later.reads[i], earlier.writes))
        continue;
      const bool columnLocal = i == 1 && later.fusedSwiGlu &&
                               later.columnTasks == earlier.columnTasks &&
                               later.columnGrain == earlier.columnGrain;
      if (!columnLocal)
        return false;
    }
    return true;
  };
  phases_.clear();
  for (uint32_t i = 0; i < ops_.size(); ++i) {
    bool joins = !phases_.empty();
    if (joins) {
      const Phase &last = phases_.back();
      for (uint32_t j = last.firstOp; j < last.firstOp + last.opCount && joins; ++j)
        joins = independent(ops_[j], ops_[i]);
    }
    if (joins)
      ++phases_.back().opCount;
    else
      phases_.push_back(Phase{i, 1});
  }
}

Status Engine::step(const StepSequence *sequences, size_t count, StepOutput output) {
  // Validation first: a failing step changes nothing the next step reads.
  if (count == 0 || !sequences)
    return Status::error("a step needs at least one sequence");
  if (count > maxBatch_)
    return Status::error("the step has " + str(count) +
                         " sequences but the plan's --max-batch is " + str(maxBatch_));
  ++stepNumber_;
  size_t totalTokens = 0;
  for (size_t i = 0; i < count; ++i) {
    const StepSequence &seq = sequences[i];
    if (seq.slot >= maxBatch_)
      return Status::error("sequence " + str(i) + " uses slot " + str(seq.slot) +
                           " but the plan's --max-batch is " + str(maxBatch_) + " (slots 0.." +
                           str(maxBatch_ - 1) + ")");
    if (slotSeenInStep_[seq.slot] == stepNumber_)
      return Status::error("slot " + str(seq.slot) + " appears more than once in the step");
    slotSeenInStep_[seq.slot] = stepNumber_;
    if (seq.count == 0 || !seq.tokens)
      return Status::error("sequence " + str(i) + " has no tokens");
    if (seq.start > maxSeq_ || seq.count > maxSeq_ - seq.start)
      return Status::error("sequence " + str(i) + " needs positions up to " +
                           str(seq.start + seq.count) + " but the plan's --max-seq is " +
                           str(maxSeq_));
    if (seq.start > kv_.cachedPositions(seq.slot))
      return Status::error("sequence " + str(i) + " starts at position " + str(seq.start) +
                           " but slot " + str(seq.slot) + " holds only " +
                           str(kv_.cachedPositions(seq.slot)) + " cached positions");
    for (uint32_t j = 0; j < seq.count; ++j)
      if (seq.tokens[j] < 0 || static_cast<uint32_t>(seq.tokens[j]) >= vocab_)
        return Status::error("sequence " + str(i) + " token " + str(j) + " is id " +
                             std::to_string(seq.tokens[j]) + " but the vocabulary has " +
                             str(vocab_) + " ids (0.." + str(vocab_ - 1) + ")");
    totalTokens += seq.count;
  }
  if (totalTokens > maxStepTokens_)
    return Status::error("the step has " + str(totalTokens) +
                         " tokens but the plan's --max-step-tokens is " + str(maxStepTokens_));

  // Pack the sequences into rows 0..T-1.
  size_t row = 0;
  size_t logitsCount = 0;
  for (size_t i = 0; i < count; ++i) {
    const StepSequence &seq = sequences[i];
    for (uint32_t j = 0; j < seq.count; ++j, ++row) {
      const uint32_t position = static_cast<uint32_t>(seq.start + j);
      rowTokens_[row] = seq.tokens[j];
      rowPositions_[row] = position;
      rowSlots_[row] = seq.slot;
    }
    if (seq.wantLogits) {
      logitsSourceRows_[logitsCount] = static_cast<uint32_t>(row - 1);
      logitsOutputRows_[logitsCount] = static_cast<uint32_t>(i);
      ++logitsCount;
    }
  }
  step_.count = totalTokens;
  step_.logitsCount = logitsCount;
  step_.argmax = output == StepOutput::Argmax;
  std::fill(stepArgmax_.get(), stepArgmax_.get() + maxBatch_, -1);

  if (device_) {
    if (Status s = device_->run(step_, count, activations_, stepArgmax_.get()); !s)
      return Status::error("the step failed on the device: " + s.message());
  } else {
    for (const std::unique_ptr<AttentionScratch::Cut> &cut : attention_.cuts)
      cut->split.cut(rowPositions_.get(), totalTokens, pool_->threadCount() > 1, cut->window);
    pool_->run(phases_.size(), &Engine::runPhase, this);
    if (step_.argmax)
      mergeLmHeadArgmax(*lmHead_, step_, stepArgmax_.get());
  }

  for (size_t i = 0; i < count; ++i)
    kv_.setCachedPositions(sequences[i].slot, sequences[i].start + sequences[i].count);
  return Status();
}

const float *Engine::logits(size_t sequenceIndexInStep) const {
  if (sequenceIndexInStep >= maxBatch_)
    return nullptr;
  return lmHead_->out.data + sequenceIndexInStep * lmHead_->out.stride;
}

int32_t Engine::argmax(size_t sequenceIndexInStep) const {
  return sequenceIndexInStep < maxBatch_ ? stepArgmax_[sequenceIndexInStep] : -1;
}

// One phase: each of its ops, one indirect call each, this thread's share.
void Engine::runPhase(void *engine, size_t phase, unsigned thread, unsigned threadCount) {
  const Engine &self = *static_cast<const Engine *>(engine);
  const Phase &p = self.phases_[phase];
  for (uint32_t i = p.firstOp; i < p.firstOp + p.opCount; ++i) {
    const ResolvedOp &op = self.ops_[i];
    op.run(*op.args, self.step_, thread, threadCount);
  }
}

} // namespace hetc
