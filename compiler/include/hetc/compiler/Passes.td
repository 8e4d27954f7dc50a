// The compiler's passes. Flags are hetc-<verb>-<noun>; class <VerbNoun>Pass; file <VerbNoun>.cpp;
// lit test tests/lit/<verb_noun>.mlir (and <verb_noun>_invalid.mlir for its errors).
#ifndef HETC_COMPILER_PASSES_TD
#define HETC_COMPILER_PASSES_TD

include "mlir/Pass/PassBase.td"

//===- Raising: ONNX level to LLM level ------------------------------------===//

def FoldConstants : Pass<"hetc-fold-constants", "mlir::func::FuncOp"> {
  let summary = "Fold ONNX nodes whose inputs are all constants, and drop no-op nodes";
  let description = [{
    Evaluates shape and scalar arithmetic that an export left unfolded (Cast, Sqrt, Div, Unsqueeze,
    Concat, ... on `hetc.constant`s) and removes Identity and same-type Cast nodes, so the raising
    patterns see the same graph whether the exporter folded constants or not.
  }];
}

def FoldShapes : Pass<"hetc-fold-shapes", "mlir::func::FuncOp"> {
  let summary = "Evaluate shape computations symbolically and replace computed shape operands by constants";
  let description = [{
    Evaluates every dimension, and every small integer tensor computed from dimensions, as an
    integer polynomial over the graph inputs' symbolic dimensions (named by their ONNX dim_param).
    A computed Reshape target, Expand shape or Slice bound that equals a constant for every value
    of the symbols is replaced by it (0 and -1 in a Reshape, 1 in an Expand, INT64_MAX and
    negative bounds in a Slice where an entry is the operand's own dimension), integer values
    that evaluate to constants become `hetc.constant`s, and results get the static dimensions
    their evaluated shapes have. Whatever spelling an exporter chose for a head split or a
    broadcast, the raising patterns then see the same constants.
  }];
}

def RaiseContribOps : Pass<"hetc-raise-contrib-ops", "mlir::func::FuncOp"> {
  let summary = "Raise ONNX Runtime's contrib ops (SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization, RotaryEmbedding, GroupQueryAttention) to the LLM ops they compute";
}

def RaiseEmbedding : Pass<"hetc-raise-embedding", "mlir::func::FuncOp"> {
  let summary = "Raise Gather(weight, ids) to hetc.embedding";
}

def RaiseNorm : Pass<"hetc-raise-norm", "mlir::func::FuncOp"> {
  let summary = "Raise a norm spelled out in nodes (found by dataflow, fitted by its values) to hetc.rms_norm or hetc.layer_norm";
}

def RaiseLinear : Pass<"hetc-raise-linear", "mlir::func::FuncOp"> {
  let summary = "Raise MatMul with a weight (possibly transposed) to hetc.linear";
}

def RaiseSwiGlu : Pass<"hetc-raise-swiglu", "mlir::func::FuncOp"> {
  let summary = "Raise gate * sigmoid(gate) * up to hetc.swiglu";
}

def RaiseActivation : Pass<"hetc-raise-activation", "mlir::func::FuncOp"> {
  let summary = "Raise Relu, Gelu and ONNX Runtime's FastGelu of LLM values to hetc.activation";
}

def RaiseAttention : Pass<"hetc-raise-attention", "mlir::func::FuncOp"> {
  let summary = "Raise RoPE, the KV concat, repeat_kv, mask and softmax (4-D or OPT's bmm form) to hetc.rope and hetc.attention";
}

def RaiseResidualAdd : Pass<"hetc-raise-residual-add", "mlir::func::FuncOp"> {
  let summary = "Raise Add of two LLM-level activations to hetc.add";
}

def RaiseLmHead : Pass<"hetc-raise-lm-head", "mlir::func::FuncOp"> {
  let summary = "Raise the linear that produces the logits output to hetc.lm_head";
}

def Float32Activations : Pass<"hetc-float32-activations", "mlir::func::FuncOp"> {
  let summary = "Give every LLM activation the float32 element type hetc computes in";
  let description = [{
    A float16 or bfloat16 export types its activations in that precision (or, where shape
    inference stopped at a contrib op, not at all, which reads as f32); hetc's ops compute and keep
    activations in float32 whatever the source did, and planning gives buffers to float32 values.
    The KV cache results of hetc.attention keep their types: the plan decides the cache's format.
  }];
}

def CheckRaised : Pass<"hetc-check-raised", "mlir::func::FuncOp"> {
  let summary = "Fail, naming the node and op, if anything the outputs need was not raised";
}

//===- Planning ------------------------------------------------------------===//

def GroupSublayers : Pass<"hetc-group-sublayers", "mlir::ModuleOp"> {
  let summary = "Assign each LLM op its layer and sublayer (attention or feed-forward)";
}

def PlanMemory : Pass<"hetc-plan-memory", "mlir::ModuleOp"> {
  let summary = "Plan every activation buffer and the KV cache statically for the bounds";
  let options = [
    Option<"maxBatch", "max-batch", "uint32_t", "4", "sequence slots">,
    Option<"maxSeq", "max-seq", "uint64_t", "4096", "positions per sequence">,
    Option<"maxStepTokens", "max-step-tokens", "uint32_t", "512", "tokens per step">,
    Option<"kvDtype", "kv-dtype", "std::string", "\"f32\"",
           "KV cache elements: f32, bf16 or int8 (with a scale per row)">,
  ];
}

def AssignDevices : Pass<"hetc-assign-devices", "mlir::ModuleOp"> {
  let summary = "Give each LLM op its device per stage and each weight its memory tier, from the "
                "cost model on a target";
  let description = [{
    After memory planning (it reads `hetc.model` and `hetc.bounds`): runs LIA's cost model
    (compiler/include/hetc/compiler/DeviceAssignment.h) for the model on the target file named by
    `target` (compiler/targets, or a path to a .json file): decode at max-batch sequences
    attending max-seq positions, which also fixes the memory placement and the layers kept in GPU
    memory, and prefill at one step of it (a prompt of min(max-step-tokens, max-seq) tokens).
    Each op in a decoder layer gets `hetc.cost_sublayer` (which of the six sublayers it computes)
    and `hetc.device = {decode, prefill}` from its layer's policy; the embedding, the final norm
    and lm_head, which the model does not time, stay on the CPU. Each weight gets `hetc.tier`, and
    the module `hetc.device_plan`: per stage the layer groups and their policies, the policy table
    over (B, L) within the bounds, the prediction and a one-line reason, plus the tiers of the KV
    cache and activations and why. `target=host` (the default) is this machine's CPU alone:
    every op on the CPU, nothing to predict.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"host\"",
           "Target name (hetc targets) or .json file; host: this machine's CPU alone">,
    Option<"residentLayers", "resident-layers", "bool", "true",
           "Keep whole layers in spare GPU memory (LIA Optimization-1)">,
    Option<"timing", "timing", "std::string", "\"serial\"",
           "serial (LIA Eq. 2) or overlapped (Optimization-2)">,
    Option<"placement", "placement", "std::string", "\"auto\"",
           "Where weights and KV live: auto, ddr, cxl, helm or all-cpu">,
  ];
}

def PartitionTasks : Pass<"hetc-partition-tasks", "mlir::ModuleOp"> {
  let summary = "Split each LLM op into independent tasks with a fixed grain";
}

def FuseResidualAdd : Pass<"hetc-fuse-residual-add", "mlir::ModuleOp"> {
  let summary = "Let a linear write the residual add that follows it (an epilogue)";
  let description = [{
    After memory planning: a `hetc.add` that immediately follows the `hetc.linear` producing one
    of its operands, is that linear's only user and lies in its sublayer is carried out by the
    linear's kernel as an epilogue, `y = x W + residual`, saving one pass over the hidden stream
    and one barrier per fusion (two per decoder layer in Llama). The linear gets `hetc.residual`,
    reads `[x, residual]` and writes the add's buffer; the add gets `hetc.fused` and the plan
    emitter leaves it out. Not fused when the add's buffer overlaps the linear's input, which the
    kernel still reads while it writes. The IR's values are unchanged: this decides how the plan
    runs them, not what they compute (the sum is the same float32 addition).
  }];
}

def FuseSwiGlu : Pass<"hetc-fuse-swiglu", "mlir::ModuleOp"> {
  let summary = "Let a linear apply the swiglu that follows it (an epilogue)";
  let description = [{
    After memory planning: a `hetc.swiglu` that immediately follows the `hetc.linear` producing
    its gate or its up operand, is that linear's only user and lies in its sublayer is carried
    out by the linear: each task applies `silu(gate) * up` to the columns it has just written,
    while they are in cache. That saves one op, one barrier and one pass over the [T, intermediate]
    activations per decoder layer. The linear gets `hetc.swiglu = "gate"` or `"up"` (which operand
    it computes), reads `[x, other operand]` and writes the swiglu's buffer; the swiglu gets
    `hetc.fused` and the plan emitter leaves it out. Not fused when the swiglu's buffer overlaps
    the linear's input or the other operand. The IR's values are unchanged: the runtime applies
    the same swiglu kernel to the same values.
  }];
}

def FuseRopeIntoAttention : Pass<"hetc-fuse-rope-into-attention", "mlir::ModuleOp"> {
  let summary = "Let an attention rotate its q and k itself, writing rotated K into the cache";
  let description = [{
    After memory planning: when an attention's q and k each come from a `hetc.rope` that rotates
    its buffer in place, has the attention as its only reader, lies in the attention's sublayer
    and uses the same positions and frequencies as the other, the attention rotates q and k
    itself, per row, in the phase that writes K and V into the KV cache: the rotated K goes
    straight into the cache. Two ops and two barriers less per layer. The attention gets
    `hetc.rope` and reads the frequencies as its weight; the ropes get `hetc.fused` and the plan
    emitter leaves them out. The runtime runs the same rope kernel on the same rows, so the
    values are those of the separate ropes.
  }];
}

#endif // HETC_COMPILER_PASSES_TD
