// Finds the decoder structure in the dataflow of a raised model: the embedding starts the
// residual stream; each sublayer reads the stream through one norm (rms_norm or layer_norm) and
// writes it back through one residual add; attention and feed-forward sublayers alternate; the
// final norm feeds lm_head. A feed-forward sublayer is gated (gate and up linears, swiglu, down)
// or not (fc1, activation, fc2). Names play no part, so a renamed or reordered export groups the
// same way. The norms and feed-forwards name the model's architecture: rms_norm and swiglu
// "llama", layer_norm and activation "opt"; a model mixing them is refused.
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanAttributes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

#include <string>

namespace hetc {
#define GEN_PASS_DEF_GROUPSUBLAYERS
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;
using namespace hetc::planning;

namespace {

using SublayerKind = plan::SublayerKindDef;

StringRef kindPhrase(SublayerKind kind) {
  return kind == SublayerKind::Attention ? "an attention" : "a feed-forward";
}

// `op` when it is a norm a sublayer or the final norm may read the residual stream through
// (hetc.rms_norm or hetc.layer_norm, the stream its operand 0); null for any other op.
Operation *asNorm(Operation *op) { return isa<RmsNormOp, LayerNormOp>(op) ? op : nullptr; }

// "rms_norm" or "layer_norm", for messages.
StringRef normName(Operation *norm) { return norm->getName().stripDialect(); }

// The epsilon a norm adds to the mean square (rms_norm) or the variance (layer_norm).
float normEpsilon(Operation *norm) {
  if (auto rms = dyn_cast<RmsNormOp>(norm))
    return rms.getEpsilon().convertToFloat();
  return cast<LayerNormOp>(norm).getEpsilon().convertToFloat();
}

// The architecture a norm or a feed-forward's activation (swiglu or activation) stands for.
Architecture architectureOf(Operation *op) {
  return isa<RmsNormOp, SwiGluOp>(op) ? Architecture::Llama : Architecture::Opt;
}

// The ops from a sublayer's norm to its residual add, both included.
struct Sublayer {
  SublayerKind kind;
  Operation *norm;
  AddOp residual;
  llvm::SetVector<Operation *> ops;
};

std::string describeUsers(ArrayRef<Operation *> users) {
  if (users.empty())
    return "nothing";
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(users, os, [&](Operation *op) { os << "'" << op->getName() << "'"; });
  return text;
}

// The ops reading `value`, each once, in IR order.
SmallVector<Operation *> uniqueUsers(Value value) {
  SmallVector<Operation *> users;
  for (Operation *user : value.getUsers())
    if (!llvm::is_contained(users, user))
      users.push_back(user);
  llvm::sort(users, [](Operation *a, Operation *b) {
    return a->getBlock() == b->getBlock() ? a->isBeforeInBlock(b) : a < b;
  });
  return users;
}

// True when lm_head's weight is the embedding table read transposed (tied embeddings): the same
// weight-store entry seen as [hidden, vocab] instead of [vocab, hidden].
bool isTiedEmbedding(Value lmHeadWeight, Value table) {
  auto head = lmHeadWeight.getDefiningOp<WeightOp>();
  auto embed = table.getDefiningOp<WeightOp>();
  return head && embed && head.getName() == embed.getName() && head.getTransposed() &&
         !embed.getTransposed() && !head.getColumns() && !embed.getColumns();
}

// Collects the sublayer that starts at `norm` and ends at `residual`: the ops the residual add's
// branch depends on, back to the norm. Checks that it is closed: nothing inside reads the
// residual stream except the norm or reads an earlier sublayer's values, and nothing outside
// reads its values except through the residual add (and the KV cache the attention returns).
FailureOr<Sublayer> traceSublayer(Value stream, Operation *norm, AddOp residual,
                                  const llvm::SmallPtrSetImpl<Operation *> &earlier) {
  Sublayer sublayer{SublayerKind::Attention, norm, residual, {}};
  Value branch = residual.getLhs() == stream ? residual.getRhs() : residual.getLhs();
  if (branch == stream)
    return residual.emitOpError("adds the residual stream to itself; expected the stream plus a "
                                "sublayer's output");

  SmallVector<Operation *> worklist{branch.getDefiningOp()};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!op || !isa<LlmOp>(op) || sublayer.ops.contains(op))
      continue;
    sublayer.ops.insert(op);
    if (op == norm)
      continue;
    for (Value operand : op->getOperands()) {
      if (operand == stream)
        return op->emitOpError() << "reads the residual stream directly; a sublayer reads it "
                                    "only through its "
                                 << normName(norm);
      Operation *producer = operand.getDefiningOp();
      if (producer && earlier.contains(producer))
        return op->emitOpError() << "reads an activation of an earlier sublayer (produced at "
                                 << producer->getLoc() << ")";
      worklist.push_back(producer);
    }
  }
  if (!sublayer.ops.contains(norm))
    return residual.emitOpError() << "adds a branch that does not start at the " << normName(norm)
                                  << " reading the residual stream";

  for (Operation *op : sublayer.ops) {
    for (OpResult result : op->getResults()) {
      for (Operation *user : result.getUsers()) {
        if (user == residual.getOperation() || sublayer.ops.contains(user))
          continue;
        if (isa<func::ReturnOp>(user)) {
          if (isa<AttentionOp>(op) && result.getResultNumber() > 0)
            continue; // present_key / present_value: the KV cache, returned by design
          return op->emitOpError()
                 << "result #" << result.getResultNumber()
                 << " is returned from the function, but it is internal to the sublayer that "
                    "starts at the "
                 << normName(norm) << " at " << norm->getLoc();
        }
        bool readsOnlySublayer = llvm::all_of(user->getOperands(), [&](Value operand) {
          return !isActivation(operand) || sublayer.ops.contains(operand.getDefiningOp());
        });
        if (isa<LlmOp>(user) && readsOnlySublayer)
          return user->emitOpError()
                 << "does not contribute to its sublayer's residual add at " << residual.getLoc();
        return user->emitOpError() << "reads a value internal to the sublayer that starts at the "
                                   << normName(norm) << " at " << norm->getLoc();
      }
    }
  }

  unsigned attentions = 0, swiglus = 0, activations = 0;
  for (Operation *op : sublayer.ops) {
    attentions += isa<AttentionOp>(op);
    swiglus += isa<SwiGluOp>(op);
    activations += isa<ActivationOp>(op);
  }
  if (attentions + swiglus + activations != 1) {
    InFlightDiagnostic diag = norm->emitOpError();
    diag << "starts a sublayer with " << attentions << " hetc.attention and " << swiglus
         << " hetc.swiglu";
    if (activations)
      diag << " and " << activations << " hetc.activation";
    diag << " ops; a decoder sublayer has exactly one of them";
    if (attentions == 1 && swiglus + activations == 1)
      diag << " (the attention and the feed-forward both read this norm's output: a parallel "
              "residual with one shared norm, as Phi-2's and Falcon's layers, which hetc does not "
              "run yet)";
    return diag;
  }
  sublayer.kind = attentions ? SublayerKind::Attention : SublayerKind::FeedForward;
  for (Operation *op : sublayer.ops) {
    if (op == norm)
      continue;
    // An rms_norm inside an attention sublayer normalizes each head of q or k (its gamma a
    // head's, Qwen3's q_norm and k_norm); the sublayer's own norm is the one at its start.
    bool allowed = isa<LinearOp, AttentionOp, SwiGluOp>(op) ||
                   (isa<RopeOp>(op) && sublayer.kind == SublayerKind::Attention) ||
                   (isa<RmsNormOp>(op) && sublayer.kind == SublayerKind::Attention) ||
                   (isa<ActivationOp>(op) && sublayer.kind == SublayerKind::FeedForward);
    if (!allowed)
      return op->emitOpError() << "cannot appear inside " << kindPhrase(sublayer.kind)
                               << " sublayer (between its " << normName(norm)
                               << " and residual add)";
  }
  sublayer.ops.insert(residual);
  return sublayer;
}

struct GroupSublayersPass : public hetc::impl::GroupSublayersBase<GroupSublayersPass> {
  void runOnOperation() override;
  LogicalResult group(func::FuncOp func);
};

LogicalResult GroupSublayersPass::group(func::FuncOp func) {
  SmallVector<Operation *> ops = collectLlmOps(func);
  if (ops.empty())
    return func.emitOpError("has no LLM ops; the raising passes produce them");

  SmallVector<EmbeddingOp> embeddings;
  for (Operation *op : ops)
    if (auto embedding = dyn_cast<EmbeddingOp>(op))
      embeddings.push_back(embedding);
  if (embeddings.size() != 1)
    return func.emitOpError() << "expected one hetc.embedding to start the residual stream, found "
                              << embeddings.size();
  EmbeddingOp embedding = embeddings.front();

  // Walk the residual stream from the embedding to the final norm.
  SmallVector<Sublayer> sublayers;
  llvm::SmallPtrSet<Operation *, 32> assigned{embedding.getOperation()};
  Value stream = embedding.getResult();
  Operation *finalNorm = nullptr;
  LmHeadOp lmHead;
  while (true) {
    SmallVector<Operation *> users = uniqueUsers(stream);
    if (users.size() == 1 && asNorm(users[0])) {
      Operation *norm = users[0];
      SmallVector<Operation *> normUsers = uniqueUsers(norm->getResult(0));
      if (normUsers.size() != 1 || !isa<LmHeadOp>(normUsers[0]))
        return norm->emitOpError() << "is the final norm (the residual stream ends here), so it "
                                      "must feed exactly one hetc.lm_head; it feeds "
                                   << describeUsers(normUsers);
      finalNorm = norm;
      lmHead = cast<LmHeadOp>(normUsers[0]);
      break;
    }
    Operation *norm = nullptr;
    AddOp residual;
    for (Operation *user : users) {
      if (asNorm(user) && !norm && user->getOperand(0) == stream)
        norm = user;
      else if (auto asAdd = dyn_cast<AddOp>(user); asAdd && !residual)
        residual = asAdd;
    }
    if (users.size() != 2 || !norm || !residual) {
      InFlightDiagnostic diag = stream.getDefiningOp()->emitOpError();
      diag << "produces the residual stream after "
           << (sublayers.empty() ? std::string("the embedding")
                                 : "sublayer " + std::to_string(sublayers.size() - 1))
           << ", which must feed either one norm (hetc.rms_norm or hetc.layer_norm) and one "
              "residual hetc.add (the next sublayer) or only the final norm; it feeds "
           << describeUsers(users);
      // Two norms of the stream and one add: each sublayer reads the layer's input through its
      // own norm and the sum adds both (GPT-NeoX's use_parallel_residual).
      if (llvm::count_if(users, asNorm) == 2 && users.size() == 3 && residual)
        diag << " (the attention and the feed-forward both read the layer's input, each through "
                "its own norm: a parallel residual, as GPT-NeoX's and Pythia's layers, which hetc "
                "does not run yet)";
      // A sublayer read without a norm whose residual add then feeds one: post-norm.
      if (!norm && residual && llvm::any_of(uniqueUsers(residual.getResult()), asNorm))
        diag << " (the norm comes after the residual add: a post-norm decoder, as OPT-350m's "
                "do_layer_norm_before = False; hetc runs pre-norm decoders)";
      return diag;
    }
    FailureOr<Sublayer> sublayer = traceSublayer(stream, norm, residual, assigned);
    if (failed(sublayer))
      return failure();
    SublayerKind expected =
        sublayers.size() % 2 == 0 ? SublayerKind::Attention : SublayerKind::FeedForward;
    if (sublayer->kind != expected)
      return norm->emitOpError() << "starts " << kindPhrase(sublayer->kind)
                                 << " sublayer where layer " << sublayers.size() / 2 << " needs "
                                 << kindPhrase(expected)
                                 << " sublayer (layers are attention, then feed-forward)";
    stream = residual.getResult();
    assigned.insert(sublayer->ops.begin(), sublayer->ops.end());
    sublayers.push_back(std::move(*sublayer));
  }
  if (sublayers.empty())
    return finalNorm->emitOpError("follows the embedding directly; expected at least one "
                                  "decoder layer in between");
  if (sublayers.size() % 2 != 0)
    return sublayers.back().residual.emitOpError()
           << "ends layer " << sublayers.size() / 2
           << "'s attention sublayer, but the final norm follows without a feed-forward sublayer";

  // Record the decisions.
  Builder b(func.getContext());
  llvm::SmallPtrSet<Operation *, 32> placed;
  auto place = [&](Operation *op) {
    op->removeAttr(kLayer);
    op->removeAttr(kSublayer);
    placed.insert(op);
  };
  place(embedding);
  for (auto [index, sublayer] : llvm::enumerate(sublayers)) {
    DictionaryAttr info = SublayerAttrs{static_cast<int64_t>(index), sublayer.kind}.toAttr(b);
    for (Operation *op : sublayer.ops) {
      place(op);
      op->setAttr(kLayer, b.getI64IntegerAttr(index / 2));
      op->setAttr(kSublayer, info);
    }
  }
  place(finalNorm);
  place(lmHead);
  for (Operation *op : ops)
    if (!placed.contains(op))
      return op->emitOpError("is not part of the decoder structure (embedding, then layers of an "
                             "attention and a feed-forward sublayer, then the final norm and "
                             "lm_head)");

  // The model's dimensions, read from the ops; the runtime's KV cache needs them uniform.
  auto table = cast<RankedTensorType>(embedding.getTable().getType());
  int64_t vocab = table.getDimSize(0), hidden = table.getDimSize(1);
  AttentionOp firstAttention;
  std::optional<int64_t> intermediate;
  for (Operation *op : ops) {
    if (auto attention = dyn_cast<AttentionOp>(op)) {
      if (!firstAttention) {
        firstAttention = attention;
      } else if (attention.getHeads() != firstAttention.getHeads() ||
                 attention.getKvHeads() != firstAttention.getKvHeads() ||
                 attention.getHeadDim() != firstAttention.getHeadDim()) {
        return attention.emitOpError()
               << "has heads = " << attention.getHeads()
               << ", kv_heads = " << attention.getKvHeads()
               << ", head_dim = " << attention.getHeadDim() << ", but layer 0 has "
               << firstAttention.getHeads() << ", " << firstAttention.getKvHeads() << ", "
               << firstAttention.getHeadDim() << "; every layer must share one KV cache shape";
      }
    } else if (isa<SwiGluOp, ActivationOp>(op)) {
      // The feed-forward's width: the swiglu's or the activation's features.
      std::optional<int64_t> size = featureSize(op->getResult(0).getType());
      if (!size)
        size = featureSize(op->getOperand(0).getType());
      if (!size)
        return op->emitOpError("needs a static feature size to plan the feed-forward width");
      if (intermediate && *intermediate != *size)
        return op->emitOpError() << "has " << *size << " features, but layer 0 has "
                                 << *intermediate;
      intermediate = size;
    }
  }
  // Every norm and feed-forward of the model names one architecture, the final norm's.
  const Architecture architecture = architectureOf(finalNorm);
  for (Operation *op : ops)
    if ((asNorm(op) || isa<SwiGluOp, ActivationOp>(op)) && architectureOf(op) != architecture)
      return op->emitOpError()
             << "does not fit a model whose final norm is hetc." << normName(finalNorm)
             << "; hetc plans llama decoders (hetc.rms_norm, gated feed-forwards with "
                "hetc.swiglu) and opt decoders (hetc.layer_norm, feed-forwards with "
                "hetc.activation)";
  auto headWeight = cast<RankedTensorType>(lmHead.getW().getType());
  if (headWeight.getDimSize(0) != hidden || headWeight.getDimSize(1) != vocab)
    return lmHead.emitOpError() << "weight is " << headWeight << ", expected [" << hidden << ", "
                                << vocab << "] to match the embedding table " << table;

  ModelAttrs model;
  model.architecture = architecture;
  model.vocab = vocab;
  model.hidden = hidden;
  model.layers = static_cast<int64_t>(sublayers.size() / 2);
  model.heads = firstAttention.getHeads();
  model.kvHeads = firstAttention.getKvHeads();
  model.headDim = firstAttention.getHeadDim();
  model.intermediate = *intermediate;
  model.rmsEps = normEpsilon(sublayers.front().norm);
  model.tiedEmbeddings = isTiedEmbedding(lmHead.getW(), embedding.getTable());
  getOperation()->setAttr(kModel, model.toAttr(b));
  return success();
}

void GroupSublayersPass::runOnOperation() {
  func::FuncOp func = findModelFunction(getOperation());
  if (!func || failed(group(func)))
    signalPassFailure();
}

} // namespace
