// The hetc dialect.
//
// Two levels live here. The importer produces the ONNX level: one generic `hetc.onnx.node` per
// ONNX node, `hetc.constant` for small initializers and Constant nodes, `hetc.weight` for large
// initializers (their bytes stay outside the IR, in the compiler's weight store). The raising
// passes replace recognised computations with the LLM level: embedding, rms_norm, layer_norm,
// linear, rope, attention with its KV cache, swiglu, activation, add, lm_head. LLM-level activations keep the source
// model's leading dimensions ([batch, seq, features]); only the last dimension is the feature
// dimension, which is what lets the runtime pack tokens of different sequences into rows.

#ifndef HETC_DIALECT_HETCOPS_TD
#define HETC_DIALECT_HETCOPS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Hetc_Dialect : Dialect {
  let name = "hetc";
  let summary = "LLM inference graphs, from imported ONNX nodes to planned LLM ops";
  let description = [{
    The hetc dialect carries a model from import to plan emission. Imported ONNX nodes are
    generic (`hetc.onnx.node`); raising passes turn decomposed computations into LLM ops whose
    attributes record every decision the compiler makes (layer, sublayer, device, buffers,
    tasks), so that each decision can be inspected in the IR and in the plan.
  }];
  let cppNamespace = "::hetc";
  let useDefaultTypePrinterParser = 1;
}

class Hetc_Op<string mnemonic, list<Trait> traits = []> :
    Op<Hetc_Dialect, mnemonic, traits>;

// What planning and the plan emitter ask of every LLM op, answered by the op itself, so that a
// new op states its facts here and nowhere else.
def Hetc_LlmOpInterface : OpInterface<"LlmOp"> {
  let cppNamespace = "::hetc";
  let description = [{
    An LLM-level op: what raising produces, planning places and the emitter turns into an op of
    the plan. It reads some operands from activation buffers (the others are weights or step
    metadata such as positions), and its first result keeps the leading (token) dimensions of
    one operand.
  }];
  let methods = [
    InterfaceMethod<[{
        The positions of the operands the plan's op reads from activation buffers, in the plan's
        order. By default operand 0 alone.
      }], "::llvm::SmallVector<unsigned>", "getActivationOperandPositions", (ins), "",
      [{ return {0}; }]>,
    InterfaceMethod<[{
        The operand whose leading dimensions the first result keeps: the tokens it is computed
        for. By default operand 0.
      }], "::mlir::Value", "getTokenSource", (ins), "", [{ return $_op->getOperand(0); }]>,
  ];
}

// An LLM op: pure, and an LlmOp; `overridden` names the interface methods the op defines itself
// (in HetcOps.cpp) instead of taking the defaults.
class Hetc_LlmOp<string mnemonic, list<string> overridden = [], list<Trait> traits = []> :
    Hetc_Op<mnemonic, !listconcat([Pure,
        DeclareOpInterfaceMethods<Hetc_LlmOpInterface, overridden>], traits)>;

//===----------------------------------------------------------------------===//
// ONNX level
//===----------------------------------------------------------------------===//

def Hetc_OnnxNodeOp : Hetc_Op<"onnx.node", [NoMemoryEffect]> {
  // The ONNX operators an LLM export uses are pure functions, so a node nobody reads is dead.
  let summary = "one ONNX node as imported, not yet understood";
  let description = [{
    A node of the source ONNX graph. `op_type` is the ONNX operator, `node_name` the node's name
    in the source (for error messages), `onnx_attrs` its attributes converted to MLIR attributes
    (ints as i64, floats as f32, strings, tensors as dense elements, lists as arrays). A missing
    optional input is a value of type `none` from `hetc.onnx.none`.

    Example:
    ```mlir
    %2 = hetc.onnx.node "Mul"(%0, %1) {node_name = "/layers.0/Mul"}
           : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$op_type, StrAttr:$node_name,
                       OptionalAttr<DictionaryAttr>:$onnx_attrs,
                       Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$outputs);
  let assemblyFormat = [{
    $op_type `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs)
  }];
  let hasVerifier = 1;
}

// An ONNX sequence (SplitToSequence, SequenceInsert, a Loop carrying one): a list of tensors that
// exists only until hetc-fold-shapes unrolls the loops and replaces each sequence by its elements.
def Hetc_OnnxSequenceType : TypeDef<Hetc_Dialect, "OnnxSequence"> {
  let mnemonic = "onnx_sequence";
  let summary = "an ONNX sequence of tensors, before its elements are known";
}

def Hetc_OnnxLoopOp : Hetc_Op<"onnx.loop", [RecursiveMemoryEffects]> {
  let summary = "an ONNX Loop as imported, its body a region";
  let description = [{
    ONNX's Loop: `inputs` are the trip count M (tensor<i64>, or none), the initial condition
    (tensor<i1>, or none) and the initial values of the loop-carried variables. The body's block
    takes the iteration number, the condition and the carried values; it ends in
    `hetc.onnx.yield` of the next condition, the next carried values and the scan outputs of
    the iteration. `outputs` are the final carried values, then each scan output's iterations
    stacked along a new first axis. The body reads values defined around the loop directly.
    hetc-fold-shapes unrolls it when M evaluates to a constant; nothing after that pass sees one.
  }];
  let arguments = (ins StrAttr:$node_name, Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs) $body
  }];
  let hasVerifier = 1;
}

def Hetc_OnnxYieldOp : Hetc_Op<"onnx.yield", [Pure, Terminator, HasParent<"OnnxLoopOp">]> {
  let summary = "the end of an ONNX Loop's body: condition, carried values, scan outputs";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

def Hetc_OnnxNoneOp : Hetc_Op<"onnx.none", [Pure]> {
  let summary = "an absent optional ONNX input";
  let description = [{
    Stands for an optional input left empty in the source node.

    Example: `%none = hetc.onnx.none`
  }];
  let results = (outs NoneType:$result);
  let assemblyFormat = "attr-dict";
}

def Hetc_ConstantOp : Hetc_Op<"constant",
    [Pure, ConstantLike, AllTypesMatch<["value", "result"]>]> {
  let summary = "a small constant tensor held in the IR";
  let description = [{
    Shape constants, epsilons, scales and other small initializers or Constant nodes.

    Example: `%eps = hetc.constant dense<1.0e-05> : tensor<f32>`
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def Hetc_WeightOp : Hetc_Op<"weight", [Pure]> {
  let summary = "a model weight whose bytes live in the weight store";
  let description = [{
    A large initializer of the source model. Its bytes stay outside the IR (in the weight store,
    possibly mapped from ONNX external data); `name` is the initializer's name and the key into
    the store. The type is static.

    With `transposed`, the value is the transpose of the stored 2-D tensor: the store holds
    `[N, K]` and the result is `[K, N]`. Raising uses it for `MatMul(x, Transpose(w))` (PyTorch's
    `nn.Linear` layout, and a tied lm_head reading the embedding table) so that no transposed
    copy of a large weight is ever materialised; the plan emitter reads the stored layout.

    With `columns = [begin, end]`, the value is columns `begin` to `end` (exclusive) of that
    view's last dimension: one of q, k and v out of a packed QKV projection (ONNX Runtime GenAI's
    qkv_proj, GPT-2's c_attn split in three), or the matching piece of its bias. The plan emitter
    copies out the slice; the IR never holds the bytes. With `columns = [begin, end, period]` the
    view's last dimension is cut into groups of `period` columns and the value is columns `begin`
    to `end` of every group, in order: q, k or v out of GPT-NeoX's query_key_value, whose output
    is `[heads, 3, head_dim]` per token (period 3 * head_dim).

    Example: `%w = hetc.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>`
    Example: `%t = hetc.weight "model.embed_tokens.weight" {transposed} : tensor<64x256xf32>`
    Example: `%k = hetc.weight "qkv_proj.weight" {columns = array<i64: 64, 96>} : tensor<64x32xf32>`
    Example: `%q = hetc.weight "query_key_value.weight" {transposed, columns = array<i64: 0, 16, 48>} : tensor<64x64xf32>`
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$transposed,
                       OptionalAttr<DenseI64ArrayAttr>:$columns);
  let builders = [
    // The stored weight itself, not a view.
    OpBuilder<(ins "::mlir::Type":$type, "::llvm::StringRef":$name), [{
      build($_builder, $_state, type, $_builder.getStringAttr(name), nullptr, nullptr);
    }]>
  ];
  let extraClassDeclaration = [{
    // The columns `columns` takes of each group (of the whole last dimension without a
    // period); nullopt without `columns`.
    std::optional<std::pair<int64_t, int64_t>> getColumnRange() {
      std::optional<::llvm::ArrayRef<int64_t>> columns = getColumns();
      if (!columns || (columns->size() != 2 && columns->size() != 3))
        return std::nullopt;
      return std::make_pair((*columns)[0], (*columns)[1]);
    }
    // The group length of a strided `columns` (GPT-NeoX's fused q, k and v); nullopt otherwise.
    std::optional<int64_t> getColumnPeriod() {
      std::optional<::llvm::ArrayRef<int64_t>> columns = getColumns();
      if (!columns || columns->size() != 3)
        return std::nullopt;
      return (*columns)[2];
    }
  }];
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// LLM level
//===----------------------------------------------------------------------===//

def Hetc_EmbeddingOp : Hetc_LlmOp<"embedding",
    ["getActivationOperandPositions", "getTokenSource"]> {
  let summary = "token embedding lookup, plus learned positions";
  let description = [{
    `result[..., :] = table[ids[...], :]` with `table : [vocab, hidden]`. With `positions :
    [max_positions, hidden]` (learned position embeddings: OPT, GPT-2) each token's row of it is
    added, at the token's index in its own sequence (cached tokens included) plus
    `position_offset` (OPT's 2). With `scale` each row is then multiplied by it (Gemma's
    embeddings times sqrt(hidden)).

    Example:
    ```mlir
    %h = hetc.embedding %table, %ids
           : (tensor<256x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
    %p = hetc.embedding %table, %ids, %positions {position_offset = 2 : i64}
           : (tensor<256x64xf32>, tensor<?x?xi64>, tensor<258x64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$table, AnyTensor:$ids,
                       Optional<AnyRankedTensor>:$positions,
                       OptionalAttr<I64Attr>:$position_offset, OptionalAttr<F32Attr>:$scale);
  let results = (outs AnyTensor:$result);
  let assemblyFormat = [{
    $table `,` $ids (`,` $positions^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Hetc_RmsNormOp : Hetc_LlmOp<"rms_norm"> {
  let summary = "RMSNorm over the last dimension, or over each group of it";
  let description = [{
    `result = x / sqrt(mean(x^2, -1) + epsilon) * gamma`, computed in float32. A gamma shorter
    than the last dimension (which it must divide) normalizes each group of that many features on
    its own, as Qwen3's q and k norms normalize each head of the flat [.., heads * head_dim]
    projection.

    Example:
    ```mlir
    %y = hetc.rms_norm %x, %gamma {epsilon = 1.0e-05 : f32}
           : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$x, AnyRankedTensor:$gamma, F32Attr:$epsilon);
  let results = (outs AnyTensor:$result);
  let assemblyFormat = "$x `,` $gamma attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Hetc_LayerNormOp : Hetc_LlmOp<"layer_norm"> {
  let summary = "LayerNorm over the last dimension, with an optional bias";
  let description = [{
    `result = (x - mean(x, -1)) / sqrt(var(x, -1) + epsilon) * gamma (+ beta)` (the biased
    variance, as nn.LayerNorm and ONNX LayerNormalization compute it), in float32. OPT, GPT-2.

    Example:
    ```mlir
    %y = hetc.layer_norm %x, %gamma, %beta {epsilon = 1.0e-05 : f32}
           : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$x, AnyRankedTensor:$gamma, Optional<AnyRankedTensor>:$beta,
                       F32Attr:$epsilon);
  let results = (outs AnyTensor:$result);
  let assemblyFormat = [{
    $x `,` $gamma (`,` $beta^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Hetc_LinearOp : Hetc_LlmOp<"linear"> {
  let summary = "a matmul with a weight, in ONNX MatMul orientation, and an optional bias";
  let description = [{
    `result = x @ w (+ bias)` with `w : [in_features, out_features]` (the orientation of ONNX
    MatMul; the plan emitter packs it in the layout the kernels read) and `bias : [out_features]`
    (Qwen2's q, k and v projections, every linear of OPT).

    Example:
    ```mlir
    %q = hetc.linear %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %k = hetc.linear %x, %wk, %bk
           : (tensor<?x?x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$x, AnyRankedTensor:$w, Optional<AnyRankedTensor>:$bias);
  let results = (outs AnyTensor:$result);
  let assemblyFormat = [{
    $x `,` $w (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Hetc_RopeOp : Hetc_LlmOp<"rope"> {
  let summary = "rotary position embedding";
  let description = [{
    `x : [..., heads * head_dim]`, the first `rotary_dim` columns of each head (all without it)
    rotated by angles `position * inv_freq` with `inv_freq : [rotary_dim / 2]`; column `i` pairs
    with `i + rotary_dim / 2` (rotate-half, Hugging Face Llama) or, with `interleaved`, column `2i`
    with `2i + 1` (GPT-J). The other columns pass through (partial rotary: GPT-NeoX, Phi).

    A token's position is its index in its own sequence, cached tokens included: hetc never pads
    a sequence, so that is what `positions` (the graph's position_ids, `[batch, sequence]`) holds
    at run time. Without `positions` the rotation takes them from the cache alone, as
    GroupQueryAttention's do_rotary does from seqlens_k.

    Example:
    ```mlir
    %qr = hetc.rope %q, %pos, %inv_freq {heads = 4 : i64, head_dim = 16 : i64}
            : (tensor<?x?x64xf32>, tensor<?x?xi64>, tensor<8xf32>) -> tensor<?x?x64xf32>
    %kr = hetc.rope %k, %pos, %inv_half {heads = 2 : i64, head_dim = 16 : i64, rotary_dim = 8 : i64, interleaved}
            : (tensor<?x?x32xf32>, tensor<?x?xi64>, tensor<4xf32>) -> tensor<?x?x32xf32>
    %kc = hetc.rope %k, %inv_freq {heads = 2 : i64, head_dim = 16 : i64}
            : (tensor<?x?x32xf32>, tensor<8xf32>) -> tensor<?x?x32xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$x, Optional<AnyTensor>:$positions, AnyRankedTensor:$inv_freq,
                       I64Attr:$heads, I64Attr:$head_dim, OptionalAttr<I64Attr>:$rotary_dim,
                       UnitAttr:$interleaved);
  let extraClassDeclaration = [{
    // The columns of each head rotated: rotary_dim, or head_dim without it.
    int64_t getRotatedColumns() { return getRotaryDim().value_or(getHeadDim()); }
  }];
  let results = (outs AnyTensor:$result);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Hetc_AttentionOp : Hetc_LlmOp<"attention", ["getActivationOperandPositions"]> {
  let summary = "causal grouped-query attention with its KV cache";
  let description = [{
    Appends `k` and `v` (`[..., kv_heads * head_dim]`, already rotated) to the cache given by
    `past_key` / `past_value` (`[batch, kv_heads, past, head_dim]`), then computes
    `softmax(scale * q k^T + causal mask) v` for every query head, query head `h` reading KV head
    `h / (heads / kv_heads)`. `present_key` / `present_value` are the cache after the append.
    Padding masks are not represented: sequences of different lengths are never padded. With
    `sliding_window = W` a query at position p attends to positions p - W + 1 .. p only
    (Mistral's window; ONNX Runtime's local_window_size; Gemma 2's on alternate layers). With
    `softcap = c` each scaled score s becomes c * tanh(s / c) before the mask (Gemma 2's
    attn_logit_softcapping). With `alibi_slopes` (one per query head) query head h's score of the
    key at position j gains `alibi_slopes[h] * j` after the scale and the soft-cap (ALiBi: BLOOM,
    MPT; a bias the same for every key of a query, as theirs relative to the query is, changes no
    softmax). With `broadcast_cache` the graph's cache tensors hold every query
    head, each KV head repeated for the `heads / kv_heads` query heads of its group (Falcon's new
    decoder architecture broadcasts K and V before its cache); hetc's cache holds each KV head
    once, so only the graph's view of the cache is wider.

    Example:
    ```mlir
    %o, %pk, %pv = hetc.attention %q, %k, %v, %past_k, %past_v
        {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f32}
        : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>,
           tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
        -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
    ```
  }];
  let arguments = (ins AnyTensor:$q, AnyTensor:$k, AnyTensor:$v,
                       AnyTensor:$past_key, AnyTensor:$past_value,
                       I64Attr:$heads, I64Attr:$kv_heads, I64Attr:$head_dim, F32Attr:$scale,
                       OptionalAttr<I64Attr>:$sliding_window, OptionalAttr<F32Attr>:$softcap,
                       UnitAttr:$broadcast_cache, OptionalAttr<DenseF32ArrayAttr>:$alibi_slopes);
  let results = (outs AnyTensor:$result, AnyTensor:$present_key, AnyTensor:$present_value);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $past_key `,` $past_value attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Hetc_SwiGluOp : Hetc_LlmOp<"swiglu", ["getActivationOperandPositions"]> {
  let summary = "gated product: SiLU-gated (SwiGLU) or GELU-gated (GeGLU)";
  let description = [{
    `result = f(gate) * up` with `f` silu, `gate * sigmoid(gate)`, or with `function` one of
    hetc.activation's GELUs (`gelu`, `gelu_tanh`: Gemma's GeGLU).

    Example:
    ```mlir
    %a = hetc.swiglu %g, %u : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
    %b = hetc.swiglu %g, %u {function = "gelu_tanh"}
           : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$gate, AnyTensor:$up, OptionalAttr<StrAttr>:$function);
  let results = (outs AnyTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Hetc_ActivationOp : Hetc_LlmOp<"activation"> {
  let summary = "a pointwise activation of a non-gated feed-forward";
  let description = [{
    `result = f(x)` per element, `f` named by `function`:
    - `relu`: max(x, 0) (OPT);
    - `gelu`: 0.5 x (1 + erf(x / sqrt(2))) (nn.GELU());
    - `gelu_tanh`: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) (GPT-2's gelu_new, ONNX
      Runtime's FastGelu);
    - `silu`: x * sigmoid(x);
    - `relu2`: max(x, 0)^2 (squared ReLU: Primer, Nemotron).

    Example:
    ```mlir
    %a = hetc.activation %h {function = "relu"} : (tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$x, StrAttr:$function);
  let results = (outs AnyTensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Hetc_AddOp : Hetc_LlmOp<"add", ["getActivationOperandPositions"]> {
  let summary = "residual addition of two activations of the same shape";
  let description = [{
    `result = lhs + rhs`, both `[..., features]` with the same feature size.

    Example:
    ```mlir
    %h1 = hetc.add %h, %o : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$lhs, AnyTensor:$rhs);
  let results = (outs AnyTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Hetc_LmHeadOp : Hetc_LlmOp<"lm_head"> {
  let summary = "the final projection to vocabulary logits";
  let description = [{
    `result = x @ w (+ bias)` with `w : [hidden, vocab]` and `bias : [vocab]` (Phi-2's), or with
    `softcap = c`, c * tanh(that / c) (Gemma 2's final_logit_softcapping). Only the rows whose
    logits are asked for (the last token of each sequence in a step) are computed at run time.

    Example:
    ```mlir
    %logits = hetc.lm_head %x, %w
                : (tensor<?x?x64xf32>, tensor<64x256xf32>) -> tensor<?x?x256xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$x, AnyRankedTensor:$w, Optional<AnyRankedTensor>:$bias,
                       OptionalAttr<F32Attr>:$softcap);
  let results = (outs AnyTensor:$result);
  let assemblyFormat = [{
    $x `,` $w (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // HETC_DIALECT_HETCOPS_TD
