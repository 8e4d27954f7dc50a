// Finds the decoder structure in the dataflow of a raised model: the embedding starts the
// residual stream (perhaps through a norm of the embeddings, BLOOM's); each sublayer reads the
// stream through one norm (rms_norm or layer_norm) and writes it back through one residual add; attention and feed-forward sublayers alternate; the
// final norm feeds lm_head. A feed-forward sublayer is gated (gate and up linears, swiglu, down)
// or not (fc1, activation, fc2). A parallel layer, whose feed-forward reads the layer's input
// rather than the attention's sum, is first rewritten to that sequence (sequenceParallelLayers).
// Names play no part, so a renamed or reordered export groups the same way. The feed-forwards
// name the model's architecture, gated (swiglu) "llama", not gated (activation) "opt", and must
// all be of one kind; the norms may be rms_norm or layer_norm in either (StableLM 2: LayerNorm
// and SwiGLU).
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

// The architecture a feed-forward's activation stands for: gated (swiglu) or not (activation).
Architecture architectureOf(Operation *op) {
  return isa<SwiGluOp>(op) ? Architecture::Llama : Architecture::Opt;
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
      diag << " (the attention and the feed-forward both read this norm's output, as a parallel "
              "residual's do, but their outputs are not summed with the layer's input as one)";
    return diag;
  }
  sublayer.kind = attentions ? SublayerKind::Attention : SublayerKind::FeedForward;
  for (Operation *op : sublayer.ops) {
    if (op == norm)
      continue;
    // A norm inside a sublayer normalizes each head of q or k (its gamma a head's, Qwen3's
    // q_norm and k_norm) or the sublayer's output before the residual add (Gemma 2's
    // post_attention_layernorm and post_feedforward_layernorm); the sublayer's own norm is the
    // one at its start.
    bool allowed = isa<LinearOp, AttentionOp, SwiGluOp, RmsNormOp, LayerNormOp>(op) ||
                   (isa<RopeOp>(op) && sublayer.kind == SublayerKind::Attention) ||
                   (isa<ActivationOp>(op) && sublayer.kind == SublayerKind::FeedForward);
    if (!allowed)
      return op->emitOpError() << "cannot appear inside " << kindPhrase(sublayer.kind)
                               << " sublayer (between its " << normName(norm)
                               << " and residual add)";
  }
  sublayer.ops.insert(residual);
  return sublayer;
}

// The LLM ops `value` is computed from, back to the ops that read `stream` (included), without
// passing through `stream` itself.
llvm::SetVector<Operation *> branchOps(Value value, Value stream) {
  llvm::SetVector<Operation *> ops;
  SmallVector<Value> worklist{value};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    Operation *op = v == stream ? nullptr : v.getDefiningOp();
    if (!op || !isa<LlmOp>(op) || !ops.insert(op))
      continue;
    for (Value operand : op->getOperands())
      worklist.push_back(operand);
  }
  return ops;
}

// The norm of `branch` that reads `stream`, when there is exactly one.
Operation *branchNorm(const llvm::SetVector<Operation *> &branch, Value stream) {
  Operation *found = nullptr;
  for (Operation *op : branch)
    if (asNorm(op) && op->getOperand(0) == stream) {
      if (found)
        return nullptr;
      found = op;
    }
  return found;
}

// A parallel layer (GPT-NeoX's use_parallel_residual, Phi-2's and Falcon's layers): an attention
// and a feed-forward that both read the layer's input, the residual stream, through a norm each
// or one they share, their outputs and the stream summed by two adds in any order. The plan runs
// sublayers one after the other, each adding its output to the stream, so the layer is rewritten
// to that form, which computes the same sum: h1 = stream + attention, h2 = h1 + feed-forward, the
// feed-forward's norm still reading the layer's input (a shared norm cloned, so that each
// sublayer has its own), and the feed-forward's ops moved after h1 so that each sublayer's ops
// are contiguous. `root` is the add that completes the sum and `inner` the other; `stream` is
// the one of their three terms both branches read through their norms. Returns whether it
// rewrote.
bool sequenceParallelLayer(AddOp root, AddOp inner, Value stream, Value a, Value b,
                           OpBuilder &builder) {
  llvm::SetVector<Operation *> branches[2] = {branchOps(a, stream), branchOps(b, stream)};
  auto hasAttention = [](const llvm::SetVector<Operation *> &ops) {
    return llvm::any_of(ops, [](Operation *op) { return isa<AttentionOp>(op); });
  };
  auto hasFeedForward = [](const llvm::SetVector<Operation *> &ops) {
    return llvm::any_of(ops, [](Operation *op) { return isa<SwiGluOp, ActivationOp>(op); });
  };
  const int attention = hasAttention(branches[0]) ? 0 : 1, feedForward = 1 - attention;
  if (!hasAttention(branches[attention]) || hasFeedForward(branches[attention]) ||
      !hasFeedForward(branches[feedForward]) || hasAttention(branches[feedForward]))
    return false;
  const Value terms[2] = {a, b};
  Operation *attentionNorm = branchNorm(branches[attention], stream);
  Operation *feedForwardNorm = branchNorm(branches[feedForward], stream);
  if (!attentionNorm || !feedForwardNorm)
    return false;
  // Already the sequence the plan runs: nothing to do.
  auto reads = [](AddOp add, Value x, Value y) {
    return (add.getLhs() == x && add.getRhs() == y) || (add.getLhs() == y && add.getRhs() == x);
  };
  if (reads(inner, stream, terms[attention]) &&
      reads(root, inner.getResult(), terms[feedForward]) && attentionNorm != feedForwardNorm &&
      llvm::all_of(branches[feedForward],
                   [&](Operation *op) { return inner->isBeforeInBlock(op); }))
    return false;

  // A shared norm: the feed-forward gets its own copy.
  if (attentionNorm == feedForwardNorm) {
    builder.setInsertionPointAfter(attentionNorm);
    Operation *copy = builder.clone(*attentionNorm);
    attentionNorm->getResult(0).replaceUsesWithIf(copy->getResult(0), [&](OpOperand &use) {
      return branches[feedForward].contains(use.getOwner());
    });
    branches[feedForward].remove(attentionNorm);
    branches[feedForward].insert(copy);
  }
  // h1 right after the attention's output; the feed-forward's ops after it, in their order.
  builder.setInsertionPointAfter(terms[attention].getDefiningOp());
  auto h1 = builder.create<AddOp>(root.getLoc(), root.getResult().getType(), stream,
                                  terms[attention]);
  SmallVector<Operation *> moved(branches[feedForward].begin(), branches[feedForward].end());
  llvm::sort(moved, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
  Operation *after = h1;
  for (Operation *op : moved) {
    op->moveAfter(after);
    // Weights and constants defined later keep dominating their readers.
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && !isa<LlmOp>(def) && def->getBlock() == op->getBlock() && op->isBeforeInBlock(def))
        def->moveBefore(op);
    after = op;
  }
  builder.setInsertionPoint(root);
  auto h2 = builder.create<AddOp>(root.getLoc(), root.getResult().getType(), h1.getResult(),
                                  terms[feedForward]);
  root.getResult().replaceAllUsesWith(h2.getResult());
  root->erase();
  inner->erase();
  return true;
}

// Every parallel layer of `func` rewritten as sequenceParallelLayer says: each add of two terms
// one of which is an add read by nothing else, tried with each of the three terms as the stream.
void sequenceParallelLayers(func::FuncOp func) {
  SmallVector<AddOp> adds;
  func.walk([&](AddOp add) { adds.push_back(add); });
  llvm::SmallPtrSet<Operation *, 16> erased;
  OpBuilder builder(func.getContext());
  for (AddOp root : adds) {
    if (erased.contains(root))
      continue;
    for (int side = 0; side < 2; ++side) {
      Value innerValue = side ? root.getRhs() : root.getLhs();
      Value last = side ? root.getLhs() : root.getRhs();
      auto inner = innerValue.getDefiningOp<AddOp>();
      if (!inner || !innerValue.hasOneUse())
        continue;
      const Value terms[3] = {inner.getLhs(), inner.getRhs(), last};
      bool rewrote = false;
      for (int s = 0; s < 3 && !rewrote; ++s)
        rewrote = sequenceParallelLayer(root, inner, terms[s], terms[(s + 1) % 3],
                                        terms[(s + 2) % 3], builder);
      if (rewrote) {
        erased.insert(root);
        erased.insert(inner);
        break;
      }
    }
  }
}

struct GroupSublayersPass : public hetc::impl::GroupSublayersBase<GroupSublayersPass> {
  void runOnOperation() override;
  LogicalResult group(func::FuncOp func);
};

LogicalResult GroupSublayersPass::group(func::FuncOp func) {
  sequenceParallelLayers(func);
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
  // A norm of the embeddings that starts the stream (BLOOM's word_embeddings_layernorm): the
  // embedding's one reader, itself read by the first sublayer's norm (and its residual add).
  Operation *embeddingNorm = nullptr;
  if (SmallVector<Operation *> users = uniqueUsers(stream); users.size() == 1 && asNorm(users[0])) {
    if (llvm::any_of(uniqueUsers(users[0]->getResult(0)), asNorm)) {
      embeddingNorm = users[0];
      stream = embeddingNorm->getResult(0);
    }
  }
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
    // A parallel layer, as sequenceParallelLayers left it: the layer's input feeds the attention's
    // norm, the feed-forward's norm and h1 = input + attention, whose one reader is h2 = h1 +
    // feed-forward.
    if (users.size() == 3 && llvm::count_if(users, asNorm) == 2) {
      auto it = llvm::find_if(users, [](Operation *op) { return isa<AddOp>(op); });
      AddOp h1 = it != users.end() ? cast<AddOp>(*it) : AddOp();
      SmallVector<Operation *> h1Users = h1 ? uniqueUsers(h1.getResult()) : SmallVector<Operation *>();
      if (h1 && h1Users.size() == 1 && isa<AddOp>(h1Users[0])) {
        AddOp h2 = cast<AddOp>(h1Users[0]);
        Value attentionTerm = h1.getLhs() == stream ? h1.getRhs() : h1.getLhs();
        llvm::SetVector<Operation *> attentionOps = branchOps(attentionTerm, stream);
        Operation *attentionNorm = nullptr, *feedForwardNorm = nullptr;
        for (Operation *user : users)
          if (asNorm(user))
            (attentionOps.contains(user) ? attentionNorm : feedForwardNorm) = user;
        if (attentionNorm && feedForwardNorm) {
          FailureOr<Sublayer> first = traceSublayer(stream, attentionNorm, h1, assigned);
          if (failed(first))
            return failure();
          assigned.insert(first->ops.begin(), first->ops.end());
          FailureOr<Sublayer> second =
              traceSublayer(h1.getResult(), feedForwardNorm, h2, assigned);
          if (failed(second))
            return failure();
          if (first->kind != SublayerKind::Attention || second->kind != SublayerKind::FeedForward ||
              sublayers.size() % 2 != 0)
            return attentionNorm->emitOpError()
                   << "starts a parallel layer whose sublayers are not an attention and a "
                      "feed-forward";
          assigned.insert(second->ops.begin(), second->ops.end());
          sublayers.push_back(std::move(*first));
          sublayers.push_back(std::move(*second));
          stream = h2.getResult();
          continue;
        }
      }
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
        diag << " (two sublayers read the layer's input, each through its own norm, as a parallel "
                "residual's do, but their outputs are not summed with it as one)";
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
  if (embeddingNorm)
    place(embeddingNorm);
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
  // Every feed-forward of the model is of one kind, the first's.
  Operation *firstFeedForward = nullptr;
  for (Operation *op : ops) {
    if (!isa<SwiGluOp, ActivationOp>(op))
      continue;
    if (!firstFeedForward)
      firstFeedForward = op;
    else if (architectureOf(op) != architectureOf(firstFeedForward))
      return op->emitOpError()
             << "is a " << (isa<SwiGluOp>(op) ? "gated" : "non-gated")
             << " feed-forward, but layer 0's is "
             << (isa<SwiGluOp>(firstFeedForward) ? "gated" : "not")
             << "; hetc plans decoders whose feed-forwards are all of one kind";
  }
  const Architecture architecture = architectureOf(firstFeedForward);
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
